//! A scrape's probe request: `/probe?target=URL&module=NAME`, and the time
//! it may take (the `X-Prometheus-Scrape-Timeout-Seconds` header, less a
//! margin for the answer's way back, at most the longest a probe may take).
//! What is wrong with a request is a sentence for a 400 answer.

use std::time::Duration;

use crate::text::sanitize;

/// The header Prometheus sends with its scrape timeout, in seconds.
pub const SCRAPE_TIMEOUT_HEADER: &str = "x-prometheus-scrape-timeout-seconds";

/// The parameters of one probe, as given (the TARGET not parsed yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeParams {
    /// `target`: the TARGET URL.
    pub target: String,
    /// `module`: the module's name.
    pub module: String,
}

/// Reads `target` and `module` from a query string (percent-decoded, `+`
/// a space). Each must be given once; other parameters are refused too (a
/// misspelt one would otherwise be ignored).
///
/// Errors: a sentence saying what is missing, repeated or unknown.
pub fn parse_query(query: &str) -> Result<ProbeParams, String> {
    let (mut target, mut module) = (None, None);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*k {
            "target" => &mut target,
            "module" => &mut module,
            other => {
                return Err(format!(
                    "unknown parameter `{}`: a probe takes target and module (/probe?target=s3://bucket/prefix/&module=NAME)",
                    sanitize(other)
                ))
            }
        };
        if slot.replace(v.into_owned()).is_some() {
            return Err(format!("the parameter `{k}` is given twice: give it once"));
        }
    }
    let missing = |what: &str| {
        format!(
            "no `{what}` parameter: a probe is /probe?target=s3://bucket/prefix/&module=NAME (module: a context of the config file)"
        )
    };
    Ok(ProbeParams {
        target: target
            .filter(|t| !t.is_empty())
            .ok_or_else(|| missing("target"))?,
        module: module
            .filter(|m| !m.is_empty())
            .ok_or_else(|| missing("module"))?,
    })
}

/// How long a probe may take: the scrape's timeout (`header`, seconds, as
/// Prometheus sends it) less `offset` (the answer's way back), at most
/// `max`; `max` when there is no header. A timeout not larger than `offset`
/// gives half of it.
///
/// Errors: a header that is not a positive number of seconds.
pub fn probe_timeout(
    header: Option<&str>,
    offset: Duration,
    max: Duration,
) -> Result<Duration, String> {
    let Some(h) = header else { return Ok(max) };
    let secs: f64 = h
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
        .ok_or_else(|| {
            format!(
                "the {SCRAPE_TIMEOUT_HEADER} header is `{}`, not a positive number of seconds",
                sanitize(h)
            )
        })?;
    let scrape = Duration::try_from_secs_f64(secs).unwrap_or(max);
    let t = if scrape > offset {
        scrape - offset
    } else {
        scrape / 2
    };
    Ok(t.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_and_module_once_each() {
        let p = parse_query("target=s3%3A%2F%2Ffleet-a%2Fdb%2F&module=prod").unwrap();
        assert_eq!(p.target, "s3://fleet-a/db/");
        assert_eq!(p.module, "prod");
        // Unencoded, and in any order.
        let p = parse_query("module=prod&target=s3://fleet-a/").unwrap();
        assert_eq!(p.target, "s3://fleet-a/");
        for bad in [
            "",
            "module=prod",
            "target=s3://a/",
            "target=&module=prod",
            "target=s3://a/&module=",
            "target=s3://a/&target=s3://b/&module=prod",
            "target=s3://a/&module=prod&module=dev",
            "target=s3://a/&module=prod&debug=true",
        ] {
            assert!(parse_query(bad).is_err(), "{bad}");
        }
        let e = parse_query("target=s3://a/&module=prod&\u{1b}[2J=1").unwrap_err();
        assert!(!e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn the_scrape_timeout_less_the_offset_at_most_the_max() {
        let (half, ten) = (Duration::from_millis(500), Duration::from_secs(10));
        let t = |h| probe_timeout(h, half, ten);
        assert_eq!(t(None).unwrap(), ten);
        assert_eq!(t(Some("10")).unwrap(), Duration::from_millis(9500));
        assert_eq!(t(Some("2.5")).unwrap(), Duration::from_secs(2));
        assert_eq!(t(Some("120")).unwrap(), ten);
        assert_eq!(t(Some("0.4")).unwrap(), Duration::from_millis(200));
        for bad in ["", "soon", "-1", "0", "NaN", "inf"] {
            assert!(t(Some(bad)).is_err(), "{bad}");
        }
    }
}
