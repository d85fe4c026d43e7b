//! Discovery: which prefixes a TARGET holds.
//!
//! A TARGET is itself a prefix if `{TARGET}LEASE` exists; with `depth ≥ 1`
//! every common prefix found by listing (delimiter `/`) down to `depth`
//! levels is a prefix too, shown even without a LEASE when nothing deeper was
//! listed under it. Lists run concurrently, bounded, each under its own
//! timeout; a throttled page is asked again after a back-off. Nothing a
//! listing returns is dropped: a prefix that cannot be named as a key, or one
//! below the target that cannot be listed, is an error of its own (the
//! target's other rows are kept).

use futures::stream::{self, StreamExt};

use super::model::PrefixError;
use super::options::{throttle_backoff, timed, GatherOptions, THROTTLE_RETRIES};
use crate::bucket::{lease_key, read_lease, Observed};
use crate::store::{ListBound, ObjectRead, StoreError};

fn is_internal(prefix: &str) -> bool {
    prefix
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .is_some_and(|last| last.starts_with(".leasectl-"))
}

/// The errors for the entries of a listing that cannot be named as keys.
fn unlisted_errors(listing: &crate::store::Listing) -> Vec<PrefixError> {
    listing
        .unlisted
        .iter()
        .map(|u| PrefixError {
            prefix: u.prefix.clone(),
            error: u.problem.clone(),
        })
        .collect()
}

/// Finds the prefixes under `root` per the discovery rule (module docs).
/// Returns the candidate prefixes (sorted) and the prefixes that could not
/// be discovered: one below the root whose listing failed (with what
/// failed; nothing under it was read), and every entry a listing returned
/// that cannot be named as a key ([`crate::store::Listing::unlisted`]).
/// Each listing is bounded as one ([`ListBound`]); the discovery as a whole
/// is one listing for [`ListBound`] too: at most [`crate::store::MAX_LIST_ENTRIES`]
/// entries and [`crate::store::LIST_DEADLINES`] request deadlines.
///
/// Errors: the root's own listing failed, or the discovery reached a bound
/// (the target as a whole is unknown).
pub async fn discover(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    let bound = ListBound::new(
        format!(
            "the discovery under \"{}\" ({} levels deep)",
            crate::text::sanitize(root),
            opts.depth
        ),
        opts.request_timeout,
    );
    bound.page(discover_levels(store, root, opts, &bound)).await
}

/// [`discover`]'s levels, counting the entries listed against `bound`.
async fn discover_levels(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
    bound: &ListBound,
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    let mut errors: Vec<PrefixError> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    let mut frontier = vec![root.to_owned()];
    let mut entries = 0usize;
    for level in 0..opts.depth {
        let mut lists = stream::iter(std::mem::take(&mut frontier))
            .map(|p| async move {
                let r = list_whole(store, &p, opts).await;
                (p, r)
            })
            .buffer_unordered(opts.concurrency.max(1));
        let mut next = Vec::new();
        while let Some((p, r)) = lists.next().await {
            let listing = match r {
                Ok(l) => l,
                Err(e) if level > 0 => {
                    // One directory that cannot be listed loses only itself.
                    errors.push(PrefixError {
                        error: format!(
                            "cannot list it, so its LEASE and anything under it were not read: {e}"
                        ),
                        prefix: p,
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            entries += listing.prefixes.len() + listing.objects.len() + listing.unlisted.len();
            bound.count(entries)?;
            errors.extend(unlisted_errors(&listing));
            let children: Vec<String> = listing
                .prefixes
                .into_iter()
                .filter(|c| !is_internal(c))
                .collect();
            // Below the target, a listed prefix is itself shown when it holds a
            // LEASE or has nothing deeper (a container of prefixes is not one).
            if level > 0 {
                let has_lease = listing.objects.iter().any(|o| o.key == lease_key(&p));
                if children.is_empty() || has_lease {
                    shown.push(p.clone());
                }
            }
            if level + 1 == opts.depth {
                shown.extend(children);
            } else {
                next.extend(children);
            }
        }
        frontier = next;
        if frontier.is_empty() {
            break;
        }
    }
    shown.sort();
    shown.dedup();
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    Ok((shown, errors))
}

/// Every page of the listing of `prefix`, each under its request deadline
/// ([`list_page`]), the whole bounded as one listing ([`ListBound`]).
///
/// Errors: a page's; the listing incomplete (a bound reached).
async fn list_whole(
    store: &dyn ObjectRead,
    prefix: &str,
    opts: &GatherOptions,
) -> Result<crate::store::Listing, StoreError> {
    let mut bound = ListBound::under(prefix, opts.request_timeout);
    let mut out = crate::store::Listing::default();
    let mut token = None;
    loop {
        let (page, next) = bound.page(list_page(store, prefix, token, opts)).await?;
        let entries = page.prefixes.len() + page.objects.len() + page.unlisted.len();
        out.prefixes.extend(page.prefixes);
        out.objects.extend(page.objects);
        out.unlisted.extend(page.unlisted);
        match next {
            Some(t) => {
                bound.follow(entries, &t)?;
                token = Some(t);
            }
            None => break,
        }
    }
    out.prefixes.sort();
    out.prefixes.dedup();
    Ok(out)
}

/// One page of the listing of `prefix` from `token` under the request
/// deadline; a throttled page is asked again after a back-off.
async fn list_page(
    store: &dyn ObjectRead,
    prefix: &str,
    token: Option<String>,
    opts: &GatherOptions,
) -> Result<(crate::store::Listing, Option<String>), StoreError> {
    let what = format!("listing {} under {prefix:?}", store.describe());
    let mut tries = 0;
    loop {
        match timed(
            opts.request_timeout,
            &what,
            store.list_page(prefix, token.clone()),
        )
        .await
        {
            Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                tokio::time::sleep(throttle_backoff(tries)).await;
                tries += 1;
            }
            r => return r,
        }
    }
}

/// Reads the LEASE of `prefix` ([`read_lease`]).
pub async fn observe(store: &dyn ObjectRead, prefix: &str) -> Result<Observed, StoreError> {
    read_lease(store, &lease_key(prefix), None).await
}

/// Lists `root` to `opts.depth` levels, page by page; each page's prefixes
/// go to `found` as soon as they are known (progressive discovery). A
/// throttled page is asked again after a back-off. Returns the prefixes and
/// what could not be discovered, as [`discover`]; without `keep`, the
/// prefixes are only handed to `found`, and none are returned (a streamed
/// gather holds no list of them).
pub(super) async fn discover_paged(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
    found: &mut (dyn FnMut(Vec<String>) + Send),
    keep: bool,
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    if opts.depth != 1 {
        let (all, errors) = discover(store, root, opts).await?;
        if !keep {
            found(all);
            return Ok((Vec::new(), errors));
        }
        found(all.clone());
        return Ok((all, errors));
    }
    let mut errors = Vec::new();
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    let mut bound = ListBound::under(root, opts.request_timeout);
    loop {
        let (page, next) = bound
            .page(list_page(store, root, token.clone(), opts))
            .await?;
        let entries = page.prefixes.len() + page.objects.len() + page.unlisted.len();
        errors.extend(unlisted_errors(&page));
        let children: Vec<String> = page
            .prefixes
            .into_iter()
            .filter(|c| !is_internal(c))
            .collect();
        if keep {
            found(children.clone());
            all.extend(children);
        } else {
            found(children);
        }
        match next {
            Some(t) => {
                bound.follow(entries, &t)?;
                token = Some(t)
            }
            None => break,
        }
    }
    all.sort();
    all.dedup();
    errors.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    Ok((all, errors))
}
