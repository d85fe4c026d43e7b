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
use crate::store::{ObjectRead, StoreError};

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
///
/// Errors: the root's own listing failed (the target as a whole is unknown).
pub async fn discover(
    store: &dyn ObjectRead,
    root: &str,
    opts: &GatherOptions,
) -> Result<(Vec<String>, Vec<PrefixError>), StoreError> {
    let mut errors: Vec<PrefixError> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    let mut frontier = vec![root.to_owned()];
    for level in 0..opts.depth {
        let lists: Vec<(String, Result<crate::store::Listing, StoreError>)> =
            stream::iter(frontier.iter().cloned())
                .map(|p| async move {
                    let what = format!("listing {} under {p:?}", store.describe());
                    let r = timed(opts.request_timeout, &what, store.list(&p)).await;
                    (p, r)
                })
                .buffer_unordered(opts.concurrency.max(1))
                .collect()
                .await;
        let mut next = Vec::new();
        for (p, r) in lists {
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
    let mut pages = 0usize;
    let mut trail = crate::store::TokenTrail::default();
    loop {
        let what = format!("listing {} under {root:?}", store.describe());
        let mut tries = 0;
        let (page, next) = loop {
            match timed(
                opts.request_timeout,
                &what,
                store.list_page(root, token.clone()),
            )
            .await
            {
                Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                    tokio::time::sleep(throttle_backoff(tries)).await;
                    tries += 1;
                }
                r => break r?,
            }
        };
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
        pages += 1;
        match next {
            // A listing that never ends (a hostile service) stops at a
            // million prefixes' worth of pages: an error, not a cut.
            Some(_) if pages >= MAX_LIST_PAGES => {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" was stopped after {MAX_LIST_PAGES} pages \
                     (about a million entries) and is incomplete; give a TARGET deeper in the \
                     bucket",
                    crate::text::sanitize(root)
                )))
            }
            Some(t) => {
                trail.check(&t, root)?;
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

/// The most pages one listing of a TARGET follows (1,000 entries each).
const MAX_LIST_PAGES: usize = 1000;
