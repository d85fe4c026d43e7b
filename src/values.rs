//! Plain value parsers and checks shared by the command line, the config file
//! and TARGET hints: durations and intervals (at most 365 days), timeouts,
//! prices, request budgets, instance ids, endpoints, region and profile names,
//! and the AWS variables checked before use. Each returns a sentence on error.
//! Nothing here knows a command or a lease.

use crate::store::s3::redact_url;
use crate::text::sanitize;
use std::time::Duration;

/// Parses a per-request timeout: at least 100 ms.
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err("a timeout must be at least 100ms".into());
    }
    Ok(d)
}

/// Parses a price: a finite, non-negative number of US dollars.
pub(crate) fn parse_price(s: &str) -> Result<f64, String> {
    match s.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err("expected a price in US dollars, e.g. 0.0004".into()),
    }
}

/// The most `--max-requests` accepts: a million requests a minute.
pub(crate) const MAX_REQUESTS_LIMIT: u32 = 1_000_000;

/// Parses a request budget into requests per minute: `N`, `N/min` or `N/s`
/// (a whole number; `N/s` is `N × 60` a minute), from 1 to
/// [`MAX_REQUESTS_LIMIT`] a minute.
pub(crate) fn parse_rate(s: &str) -> Result<u32, String> {
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
pub(crate) fn parse_instance_id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 256 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("expected 1 to 256 characters without spaces or control characters".into());
    }
    Ok(s.to_owned())
}

/// Parses an endpoint URL: `http://` or `https://` with a host.
///
/// Accepted as given here and checked by [`check_endpoint`] before use: clap
/// would echo a refused value, and an endpoint may carry a secret.
pub(crate) fn parse_endpoint(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}

/// Checks an `--endpoint-url`: `http(s)://host[:port]`, without credentials
/// in it. The message never repeats the user information.
pub(crate) fn check_endpoint(s: &str) -> Result<(), String> {
    check_endpoint_from("--endpoint-url", s)
}

/// [`check_endpoint`] for an endpoint given by `source` (`--endpoint-url`,
/// or an environment variable such as `AWS_ENDPOINT_URL`, which the SDK
/// would use just the same): the same rules, the messages naming `source`.
pub(crate) fn check_endpoint_from(source: &str, s: &str) -> Result<(), String> {
    let shown = sanitize(&redact_url(s).0);
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
pub(crate) fn parse_plain_name(s: &str) -> Result<String, String> {
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
pub(crate) fn parse_profile(s: &str) -> Result<String, String> {
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
pub(crate) const CHECKED_ENV: &[&str] = &[
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
pub(crate) fn bad_aws_env() -> Option<&'static str> {
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
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a humantime duration such as `5s` or `1m30s`, at most
/// [`MAX_DURATION`].
///
/// # Errors
/// A sentence for a value that is not a duration or is longer than 365 days.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
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
pub(crate) fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("an interval must be at least 1s (examples: 1s, 5s, 1m)".into());
    }
    Ok(d)
}

/// Parses an amount of memory: bytes, or a whole number of `KiB`, `MiB` or
/// `GiB` (e.g. `256MiB`), from 1 MiB to 1 TiB.
///
/// # Errors
/// A sentence for anything else.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim() {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => {
            return Err(format!(
                "`{}` is not a size (examples: 256MiB, 1GiB)",
                sanitize(s)
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{}` is not a size (examples: 256MiB, 1GiB)", sanitize(s)))?;
    let bytes = n.checked_shl(shift).filter(|b| b >> shift == n);
    match bytes {
        Some(b) if (1 << 20..=1 << 40).contains(&b) => {
            usize::try_from(b).map_err(|_| "too large for this machine".to_owned())
        }
        _ => Err("a size must be from 1MiB to 1024GiB".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2048KiB"), Ok(2 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        for bad in [
            "",
            "MiB",
            "1.5GiB",
            "10MB",
            "1KiB",
            "2000GiB",
            "-1MiB",
            "99999999999999999999GiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
        }
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
