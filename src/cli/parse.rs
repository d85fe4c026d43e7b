//! The value parsers of the command line, and the checks of values that
//! clap takes as given (endpoints, the environment).

use std::time::Duration;

use super::{OnOff, ThenArg};
use crate::bucket::LeaseState;

/// Parses a lease TTL: whole seconds from 3 s to one hour (a longer one is
/// judged suspect by every reader; a shorter one cannot be renewed in time).
pub fn parse_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    let max = crate::bucket::MAX_SANE_TTL_S;
    if d.subsec_nanos() != 0 || d.as_secs() < 3 || d.as_secs() > max {
        return Err(format!("a TTL must be whole seconds from 3s to {max}s"));
    }
    Ok(d)
}

/// Parses a per-request timeout: at least 100 ms.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err("a timeout must be at least 100ms".into());
    }
    Ok(d)
}

/// Parses a price: a finite, non-negative number of US dollars.
pub fn parse_price(s: &str) -> Result<f64, String> {
    match s.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err("expected a price in US dollars, e.g. 0.0004".into()),
    }
}

/// The most `--max-requests` accepts: a million requests a minute.
pub const MAX_REQUESTS_LIMIT: u32 = 1_000_000;

/// Parses a request budget into requests per minute: `N`, `N/min` or `N/s`
/// (a whole number; `N/s` is `N × 60` a minute), from 1 to
/// [`MAX_REQUESTS_LIMIT`] a minute.
pub fn parse_rate(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (n, per) = match t.split_once('/') {
        None => (t, 1),
        Some((n, "min" | "m")) => (n, 1),
        Some((n, "s" | "sec")) => (n, 60),
        Some(_) => {
            return Err("expected requests per minute: N, N/min or N/s (e.g. 1200/min)".into())
        }
    };
    match n.trim().replace(['_', ','], "").parse::<u64>() {
        Ok(v) if v >= 1 && v * per <= u64::from(MAX_REQUESTS_LIMIT) => Ok((v * per) as u32),
        Ok(_) => Err(format!(
            "expected 1 to {MAX_REQUESTS_LIMIT} requests per minute"
        )),
        Err(_) => Err("expected requests per minute: N, N/min or N/s (e.g. 1200/min)".into()),
    }
}

/// Parses an instance id: 1 to 256 characters, no whitespace or control characters.
pub fn parse_instance_id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 256 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("expected 1 to 256 characters without spaces or control characters".into());
    }
    Ok(s.to_owned())
}

/// Parses an endpoint URL: `http://` or `https://` with a host.
///
/// Accepted as given here and checked by [`check_endpoint`] before use: clap
/// would echo a refused value, and an endpoint may carry a secret.
pub fn parse_endpoint(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}

/// Checks an `--endpoint-url`: `http(s)://host[:port]`, without credentials
/// in it. The message never repeats the user information.
pub fn check_endpoint(s: &str) -> Result<(), String> {
    check_endpoint_from("--endpoint-url", s)
}

/// [`check_endpoint`] for an endpoint given by `source` (`--endpoint-url`,
/// or an environment variable such as `AWS_ENDPOINT_URL`, which the SDK
/// would use just the same): the same rules, the messages naming `source`.
pub fn check_endpoint_from(source: &str, s: &str) -> Result<(), String> {
    let shown = crate::text::sanitize(&crate::store::s3::redact_url(s).0);
    let shown = format!(
        "{source}{}{shown}",
        if source.starts_with('-') { " " } else { "=" }
    );
    let u = url::Url::parse(s).map_err(|e| format!("{shown} is not a URL ({e})"))?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(format!(
            "{shown} carries credentials: give them as AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY or with --profile, and the URL without them"
        ));
    }
    if u.query().is_some() || u.fragment().is_some() {
        // The SDK logs its endpoint at debug level: nothing secret may be in it.
        return Err(format!(
            "{shown} has a query or fragment: an S3 endpoint is \
             http(s)://host[:port][/path] only"
        ));
    }
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "{shown}: expected http://host[:port] or https://host[:port]"
        ));
    }
    Ok(())
}

/// Parses a region name: letters, digits, `-`, `_`, `.`, 1 to 64 characters.
pub fn parse_plain_name(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("expected 1 to 64 letters, digits, '-', '_' or '.'".into());
    }
    Ok(s.to_owned())
}

/// Parses a profile name as the aws CLI and `AWS_PROFILE` accept it: 1 to 128
/// printable ASCII characters other than spaces and `[ ] # ;` (which the
/// config files' syntax uses), e.g. `team/prod@admin`.
pub fn parse_profile(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 128
        || !s
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '[' | ']' | '#' | ';'))
    {
        return Err("expected 1 to 128 printable characters without spaces or [ ] # ;".into());
    }
    Ok(s.to_owned())
}

/// The AWS environment variables that end up in request headers or URLs. A
/// value with a control character (or outside printable ASCII) would make the
/// SDK fail deep inside request signing, so it is refused up front.
pub const CHECKED_ENV: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
];

/// The first variable of [`CHECKED_ENV`] whose value is not printable ASCII
/// (its name only: the value may be a secret).
pub fn bad_aws_env() -> Option<&'static str> {
    CHECKED_ENV.iter().copied().find(|name| {
        std::env::var_os(name).is_some_and(|v| {
            v.to_str()
                .is_none_or(|v| !v.chars().all(|c| c.is_ascii_graphic()))
        })
    })
}

/// The longest duration any flag or config value accepts: 365 days. Longer
/// ones mean nothing for a lease, a timeout or a refresh, and a value near
/// the type's limit would overflow the arithmetic on instants and deadlines.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a humantime duration such as `5s` or `1m30s`, at most
/// [`MAX_DURATION`].
///
/// # Errors
/// A sentence for a value that is not a duration or is longer than 365 days.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 5s, 1m, 250ms)"))?;
    if d > MAX_DURATION {
        return Err("a duration must be at most 365d (examples: 5s, 1m, 1h)".into());
    }
    Ok(d)
}

/// Parses a refresh or watch interval: a duration from 1 s to
/// [`MAX_DURATION`] (a shorter one is refused, never silently raised).
///
/// # Errors
/// As [`parse_duration`], and for a value under 1 s.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("an interval must be at least 1s (examples: 1s, 5s, 1m)".into());
    }
    Ok(d)
}

/// The environment variable that chooses the exclusion mode, like
/// `--conditional`.
pub const CONDITIONAL_ENV: &str = "MUSHROOMDB_BACKUP_LEASE_CONDITIONAL";

/// The exclusion mode that `MUSHROOMDB_BACKUP_LEASE_CONDITIONAL` (`value`,
/// as read from the environment) asks for: `None` when it is unset or empty
/// (deployment templates often leave it empty), `on` or `off` (any ASCII
/// case) otherwise.
///
/// Only the commands that write or judge bucket leases read it (the console,
/// `--json`, `-o`, `--watch`, `check`, `serve`, `bucket hold`, `takeover`);
/// the others (`writer exec` first of all) run whatever it holds.
///
/// # Errors
/// A sentence naming the variable and the accepted values for any other value.
pub fn conditional_from_env(value: Option<&std::ffi::OsStr>) -> Result<Option<OnOff>, String> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match v.to_str().map(str::to_ascii_lowercase).as_deref() {
        Some("on") => Ok(Some(OnOff::On)),
        Some("off") => Ok(Some(OnOff::Off)),
        _ => Err(format!(
            "the environment variable {CONDITIONAL_ENV} is \"{}\"; accepted values are `on`, \
             `off` (best-effort), or empty / unset (conditional, the default)",
            crate::text::sanitize_cut(&v.to_string_lossy(), 64)
        )),
    }
}

/// Parses `--then`: `release`, `hold` or `handover:INSTANCE_ID` (an id
/// without blanks or control characters, at most 256 bytes).
///
/// # Errors
/// A sentence naming the accepted forms.
pub fn parse_then(s: &str) -> Result<ThenArg, String> {
    match s {
        "release" => Ok(ThenArg::Release),
        "hold" => Ok(ThenArg::Hold),
        _ => match s.strip_prefix("handover:") {
            // An id a successor can be started with: no blank, no control character.
            Some(id)
                if !id.is_empty()
                    && !id.chars().any(|c| c.is_control() || c.is_whitespace())
                    && id.len() <= 256 =>
            {
                Ok(ThenArg::Handover(id.to_owned()))
            }
            _ => Err(
                "expected release, hold or handover:INSTANCE_ID (an id without blanks or control characters)"
                    .into(),
            ),
        },
    }
}

/// Parses `--crit-state`: a comma-separated list of stale, suspect,
/// malformed, absent (or `none`).
pub fn parse_states(s: &str) -> Result<Vec<LeaseState>, String> {
    if s == "none" {
        return Ok(Vec::new());
    }
    s.split(',')
        .map(|w| match w.trim() {
            "stale" => Ok(LeaseState::Stale),
            "suspect" => Ok(LeaseState::Suspect),
            "malformed" => Ok(LeaseState::Malformed),
            "absent" => Ok(LeaseState::Absent),
            "fresh" => Err("fresh is the healthy state; it cannot be critical".to_owned()),
            other => Err(format!(
                "unknown state `{}`; expected a comma-separated list of stale, suspect, malformed, absent, or none",
                crate::text::sanitize(other)
            )),
        })
        .collect()
}

/// Parses `--record-format` (and the context's `record_format`): `leasectl`
/// or `seed`.
pub fn parse_record_format(s: &str) -> Result<crate::bucket::RecordFormat, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_and_refuse_fresh() {
        assert_eq!(
            parse_states("stale,malformed").unwrap(),
            vec![LeaseState::Stale, LeaseState::Malformed]
        );
        assert!(parse_states("none").unwrap().is_empty());
        assert!(parse_states("fresh").is_err());
        assert!(parse_states("bogus").unwrap_err().contains("unknown state"));
    }

    /// `--max-requests`: per minute, `N/min` the same, `N/s` times 60; zero,
    /// a fraction, another unit and more than the limit are refused.
    #[test]
    fn request_budgets_parse_per_minute() {
        assert_eq!(parse_rate("1200"), Ok(1200));
        assert_eq!(parse_rate("6000/min"), Ok(6000));
        assert_eq!(parse_rate("6,000/min"), Ok(6000));
        assert_eq!(parse_rate("20/s"), Ok(1200));
        for bad in ["0", "0/s", "1.5", "10/h", "", "-5", "1000001", "20000/s"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
