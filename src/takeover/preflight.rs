//! The takeover's pure guards: what is checked before any I/O, shared by
//! `leasectl takeover` and the console's dialog, and the typed-prefix
//! confirmation rule both use.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::TakeoverError;
use crate::bucket::{judge, lease_key, Judgement, LeaseState, Observed, MAX_SANE_TTL_S};
use crate::text::format_secs;
use crate::text::sanitize;

/// The guards that need no I/O, shared by `leasectl takeover` and the
/// console's dialog: a reason, a sane TTL, `force` for a fresh lease, one TTL
/// of watching for a suspect or malformed record. Returns the judgement of
/// `seen` (the LEASE at `{prefix}LEASE` as the operator saw it; a suspect or
/// malformed one unchanged for `watched_for`) at `now` (reader's clock, UTC).
///
/// Errors: [`TakeoverError::NoReason`], [`TakeoverError::BadTtl`],
/// [`TakeoverError::Absent`] (no LEASE: nothing to take over),
/// [`TakeoverError::Released`] (a released record: nothing to take over),
/// [`TakeoverError::Fresh`], [`TakeoverError::UnderWatch`].
pub(crate) fn preflight(
    prefix: &str,
    seen: &Observed,
    watched_for: Duration,
    reason: &str,
    ttl_s: u64,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Judgement, TakeoverError> {
    let key = lease_key(prefix);
    check_request(reason, ttl_s)?;
    let j = something_to_take_over(prefix, seen, now)?;
    match j.state {
        LeaseState::Fresh if !force => Err(TakeoverError::Fresh {
            key,
            holder: seen
                .record()
                .map(|r| sanitize(&r.instance_id))
                .unwrap_or_default(),
            age: format_secs(j.age_s.unwrap_or(0.0)),
        }),
        LeaseState::Suspect | LeaseState::Malformed if watched_for < Duration::from_secs(ttl_s) => {
            Err(TakeoverError::UnderWatch {
                key,
                state: j.state,
                remaining: Duration::from_secs(ttl_s) - watched_for,
            })
        }
        _ => Ok(j),
    }
}

/// Whether `seen` (the LEASE at `{prefix}LEASE`) holds anything to take
/// over, judged at `now`: nothing the operator could answer changes a
/// refusal here, so the console says it before it opens its dialog.
///
/// Errors: [`TakeoverError::Absent`] (no LEASE), [`TakeoverError::Released`]
/// (a released record: the prefix is free).
pub(crate) fn something_to_take_over(
    prefix: &str,
    seen: &Observed,
    now: DateTime<Utc>,
) -> Result<Judgement, TakeoverError> {
    let j = judge(seen, now);
    match j.state {
        LeaseState::Absent => Err(TakeoverError::Absent {
            key: lease_key(prefix),
        }),
        LeaseState::Released => Err(TakeoverError::Released {
            key: lease_key(prefix),
        }),
        _ => Ok(j),
    }
}

/// The guards on the request alone (before anything is read): a reason
/// (not blank) and a sane TTL (1 s to [`crate::bucket::MAX_SANE_TTL_S`]).
///
/// Errors: [`TakeoverError::NoReason`], [`TakeoverError::BadTtl`].
pub(crate) fn check_request(reason: &str, ttl_s: u64) -> Result<(), TakeoverError> {
    if reason.trim().is_empty() {
        return Err(TakeoverError::NoReason);
    }
    if ttl_s == 0 || ttl_s > MAX_SANE_TTL_S {
        return Err(TakeoverError::BadTtl(ttl_s));
    }
    Ok(())
}

/// The typed-prefix confirmation rule, shared by `leasectl takeover`'s prompt
/// and the console's forced-takeover dialog: `typed` confirms when, ignoring
/// surrounding blanks and trailing `/`, it is one of `names` (the URL or
/// prefix as given, percent-decoded, …) as given or as shown escaped (so that
/// a name holding a control or invisible character can always be typed).
/// Nothing typed confirms nothing — unless every name is itself empty (the
/// bucket's root prefix, shown as nothing to type).
pub(crate) fn typed_confirms(typed: &str, names: &[&str]) -> bool {
    let norm = |s: &str| s.trim().trim_end_matches('/').to_owned();
    let typed = norm(typed);
    if typed.is_empty() {
        return names.iter().all(|n| norm(n).is_empty());
    }
    names
        .iter()
        .flat_map(|s| [s.to_string(), sanitize(s)])
        .any(|s| typed == norm(&s))
}

#[cfg(test)]
mod tests {
    use super::typed_confirms;

    #[test]
    fn the_name_as_given_or_as_shown_confirms() {
        assert!(typed_confirms("app/", &["app/"]));
        assert!(typed_confirms(" app ", &["app/"]));
        assert!(typed_confirms("a\\u{200b}b/", &["a\u{200b}b/"]));
        assert!(typed_confirms("s3://b/app", &["s3://b/app/", "app/"]));
        assert!(!typed_confirms("ap", &["app/"]));
        assert!(!typed_confirms("", &["s3://b/", ""]));
        assert!(!typed_confirms("  ", &["app/"]));
        assert!(typed_confirms("", &[""]));
    }
}
