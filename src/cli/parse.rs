//! The value parsers of the command line: those of its own types
//! (`--conditional` from the environment, `--crit-state`) and those clap
//! calls for the engine's values (TARGETs, `--then`, `--record-format`,
//! `--containment`, each the type's own `FromStr`); the plain value
//! parsers live in [`crate::values`] (shared with `target` and `config`) and
//! the TTL rule in [`crate::bucket::parse_ttl`], both re-exported here for clap.

use super::OnOff;
pub use crate::bucket::parse_ttl;
use crate::bucket::LeaseState;
use crate::takeover::Then;
use crate::target::{Target, TargetError};
pub use crate::values::*;

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

/// Parses `--then`: `release`, `hold` or `handover:INSTANCE_ID` (the
/// takeover's own [`Then`], as [`parse_record_format`] parses the record's
/// own format).
///
/// # Errors
/// A sentence naming the accepted forms.
pub fn parse_then(s: &str) -> Result<Then, String> {
    s.parse()
}

/// Parses a TARGET (`s3://bucket/path/` or `file:///dir/`), once, as clap
/// reads the command line; `setup::parse` says a [`TargetError`] as
/// leasectl's own usage error.
///
/// # Errors
/// The [`TargetError`] of a URL that is not a TARGET.
pub fn parse_target(s: &str) -> Result<Target, TargetError> {
    s.parse()
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

/// Parses `bucket hold --containment`: `auto`, `require` or `off`.
pub fn parse_containment(s: &str) -> Result<crate::supervise::ContainmentMode, String> {
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
}
