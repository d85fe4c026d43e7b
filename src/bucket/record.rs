//! The LEASE record: what the object `{prefix}/LEASE` holds, how it is read
//! (tolerantly) and written (strictly).
//!
//! Body: `{"instance_id": "…", "acquired_at": "…", "renewed_at": "…", "ttl_s": 30,
//! "generation": 7}`. The first four fields are the seed's; `generation` is
//! leasectl's fencing token (optional: a record without it has an unknown
//! generation). Timestamps are RFC 3339; readers accept any offset and ignore
//! unknown fields; writers write exactly these fields, in UTC with
//! microseconds, so every renewal changes the body and therefore the ETag.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize, Serializer};

use crate::clock::{rfc3339, without_leap_second};
use crate::store::MAX_BODY_BYTES;
use crate::text::{has_visible, quote_shown, sanitize, sanitize_cut};
use crate::values::parse_duration;

/// The longest TTL a record is trusted with, in seconds (one hour). A record
/// with a longer TTL is suspect (bucket-lease spec, "A lease stamped far in the future").
pub(crate) const MAX_SANE_TTL_S: u64 = 3600;

/// The default TTL of a lease this tool takes, in seconds.
pub(crate) const DEFAULT_TTL_S: u64 = 30;

/// The LEASE object's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The holder's instance id (32 hex digits when written by this tool; any
    /// string when read — treat as untrusted text).
    pub instance_id: String,
    /// When the holder first took the lease (UTC).
    #[serde(serialize_with = "ser_ts")]
    pub acquired_at: DateTime<Utc>,
    /// When the holder last renewed it (UTC), by the holder's clock.
    #[serde(serialize_with = "ser_ts")]
    pub renewed_at: DateTime<Utc>,
    /// Time to live in whole seconds, counted from `renewed_at`.
    pub ttl_s: u64,
    /// The fencing token: an unsigned integer that grows with every change of
    /// holder, kept by renewals. `None` when the record has no such field (a
    /// seed-format record, or one written before leasectl wrote it); then it is
    /// not written either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// Set only in a **released** record (a tombstone): when its holder
    /// released the lease (UTC, the releaser's clock). A released record holds
    /// nothing — readers judge it free ([`super::judge::LeaseState::Released`])
    /// and a taker replaces it at once with `If-Match` — but it keeps the
    /// `generation`, so the next holder's is greater ([`LeaseRecord::released`]).
    /// `None` (not written) in every other record.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_ts",
        default
    )]
    pub released_at: Option<DateTime<Utc>>,
}

fn ser_opt_ts<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}

fn ser_ts<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*t, SecondsFormat::Micros))
}

impl LeaseRecord {
    /// The record a holder of this lease leaves when it releases at `now` (its
    /// clock), instead of deleting the object: the same `instance_id`,
    /// `ttl_s` and `generation`, `released_at` = `now`, and `renewed_at` one
    /// TTL before `now` so that a reader that knows nothing of `released_at`
    /// (the seed's format) finds it stale at once and may take it, as it could
    /// take an absent key. `acquired_at` is kept unless that would put it after
    /// `renewed_at`.
    ///
    /// Why (the generation made monotonic, issue 32 §3): deleting the object
    /// lost the last generation, and the next creator counted from its own
    /// clock, which can be behind the releaser's. A released record keeps it,
    /// so the next holder writes `generation + 1` whatever the clocks say.
    pub fn released(&self, now: DateTime<Utc>) -> LeaseRecord {
        let ttl = chrono::Duration::seconds(self.ttl_s.min(MAX_SANE_TTL_S) as i64);
        let renewed_at = now - ttl;
        LeaseRecord {
            instance_id: self.instance_id.clone(),
            acquired_at: self
                .acquired_at
                .min(renewed_at - chrono::Duration::microseconds(1)),
            renewed_at,
            ttl_s: self.ttl_s,
            generation: self.generation,
            released_at: Some(now),
        }
    }

    /// True for a released record (a tombstone, [`LeaseRecord::released`]).
    pub fn is_released(&self) -> bool {
        self.released_at.is_some()
    }

    /// The exact bytes a writer puts: the four seed fields and, when known,
    /// `generation` (and `released_at` in a released record); nothing else.
    pub fn to_body(&self) -> Vec<u8> {
        // Serialising a struct of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a LEASE body. `size` is the object's full size in bytes (the body
    /// passed may have been cut at `MAX_BODY_BYTES + 1`).
    ///
    /// Errors: [`Malformed`] with the reason — over 64 KiB, not UTF-8, not JSON,
    /// not an object, a top-level key given twice (readers disagree on which
    /// counts), a missing or mistyped field, an `instance_id` with no visible
    /// character ([`crate::text::has_visible`]), a timestamp that is not
    /// RFC 3339, or `ttl_s` not a positive whole number written as an integer
    /// (`30.0` and `3e1` are refused, as a reader decoding an integer refuses
    /// them) of at most `u64::MAX`, or a `generation` that is present but not
    /// a whole number from 0 to `u64::MAX` written as an integer (`null` counts
    /// as absent). The reason quotes a bad `ttl_s` or `generation` as written.
    pub fn parse(body: &[u8], size: u64) -> Result<Self, Malformed> {
        if size > MAX_BODY_BYTES as u64 || body.len() > MAX_BODY_BYTES {
            return Err(Malformed(format!(
                "body is {} bytes, over the 64 KiB limit",
                size.max(body.len() as u64)
            )));
        }
        let text = std::str::from_utf8(body).map_err(|e| {
            Malformed(format!(
                "body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ))
        })?;
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Malformed(format!("body is not JSON: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| Malformed("body is JSON but not an object".into()))?;
        // The parse above keeps the last of two equal keys; other readers keep
        // the first or refuse: a record whose meaning depends on the reader is
        // malformed. The fields as written (for the exact text of `ttl_s`).
        let fields: RawFields =
            serde_json::from_str(text).map_err(|e| Malformed(format!("body is not JSON: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        if let Some((k, _)) = fields.0.iter().find(|(k, _)| !seen.insert(k.as_str())) {
            return Err(Malformed(format!(
                "key \"{}\" appears twice: readers disagree on such a record (one keeps the first, one the last, one refuses it)",
                sanitize_cut(k, 40)
            )));
        }
        let field = |name: &str| {
            obj.get(name)
                .ok_or_else(|| Malformed(format!("missing field {name}")))
        };
        let string = |name: &str| -> Result<String, Malformed> {
            field(name)?
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| Malformed(format!("{name} is not a string")))
        };
        let stamp = |name: &str| -> Result<DateTime<Utc>, Malformed> {
            let s = string(name)?;
            DateTime::parse_from_rfc3339(&s)
                .map(|t| without_leap_second(t.with_timezone(&Utc)))
                .map_err(|e| {
                    Malformed(format!(
                        "{name} {} is not an RFC 3339 time: {e}",
                        quote_shown(&sanitize(&s))
                    ))
                })
        };
        let instance_id = string("instance_id")?;
        if instance_id.is_empty() {
            return Err(Malformed("instance_id is empty".into()));
        }
        if !has_visible(&instance_id) {
            return Err(Malformed(format!(
                "instance_id \"{}\" has no visible character: the holder would look empty",
                sanitize_cut(&instance_id, 40)
            )));
        }
        let acquired_at = stamp("acquired_at")?;
        let renewed_at = stamp("renewed_at")?;
        let ttl = field("ttl_s")?;
        let ttl_s = match ttl.as_u64() {
            Some(0) | None => {
                let raw = fields
                    .0
                    .iter()
                    .find(|(k, _)| k == "ttl_s")
                    .map(|(_, v)| v.get().trim())
                    .unwrap_or_default();
                return Err(Malformed(ttl_problem(raw)));
            }
            Some(n) => n,
        };
        let generation = match obj.get("generation") {
            None | Some(serde_json::Value::Null) => None,
            Some(g) => match g.as_u64() {
                Some(n) => Some(n),
                None => {
                    let raw = fields
                        .0
                        .iter()
                        .find(|(k, _)| k == "generation")
                        .map(|(_, v)| v.get().trim())
                        .unwrap_or_default();
                    return Err(Malformed(format!(
                        "generation must be a whole number from 0 to {} written as an integer, got {}",
                        u64::MAX,
                        sanitize_cut(raw, 40)
                    )));
                }
            },
        };
        let released_at = match obj.get("released_at") {
            None | Some(serde_json::Value::Null) => None,
            Some(_) => Some(stamp("released_at")?),
        };
        Ok(Self {
            instance_id,
            acquired_at,
            renewed_at,
            ttl_s,
            generation,
            released_at,
        })
    }
}

/// The top-level members of a JSON object in the order written, duplicates
/// kept, each value as its exact text.
struct RawFields(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> Deserialize<'de> for RawFields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = RawFields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawFields, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry()? {
                    out.push(kv);
                }
                Ok(RawFields(out))
            }
        }
        d.deserialize_map(Members)
    }
}

/// Why `raw`, the text of `ttl_s` as written, is not a TTL (safe to print;
/// the number is quoted exactly, never rounded).
fn ttl_problem(raw: &str) -> String {
    let shown = sanitize_cut(raw, 40);
    let number = raw.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    if number && raw.contains(['.', 'e', 'E']) {
        format!(
            "ttl_s must be a positive whole number of seconds written as an integer \
             (30, not 30.0 or 3e1), got {shown}"
        )
    } else if number && !raw.starts_with('-') && !raw.trim_start_matches('0').is_empty() {
        format!(
            "ttl_s must be a positive whole number of seconds of at most {}, got {shown}",
            u64::MAX
        )
    } else {
        format!("ttl_s must be a positive whole number of seconds, got {shown}")
    }
}

/// Why a LEASE body could not be read as a record. The text is safe to print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed LEASE: {0}")]
pub struct Malformed(pub String);

/// `{prefix}/LEASE`: the key of the lease object for `prefix`. A prefix that
/// already ends in `/` gets no second one (`a/` → `a/LEASE`); the empty prefix
/// gives `LEASE`. Nothing else is changed: `x//` → `x//LEASE` (S3 keys may hold
/// empty segments, and that is a different object from `x/LEASE`).
pub fn lease_key(prefix: &str) -> String {
    if prefix.is_empty() || prefix.ends_with('/') {
        format!("{prefix}LEASE")
    } else {
        format!("{prefix}/LEASE")
    }
}

/// The generation a writer puts when it takes a prefix's lease: strictly
/// greater than `replaced` (the generation of the record it replaces, if it
/// read one) and at least `now` in microseconds since the Unix epoch (UTC).
///
/// A release leaves a released record that keeps its generation
/// ([`LeaseRecord::released`]), so its taker passes it as `replaced` and
/// generations grow across releases whatever the clocks say. The clock term
/// matters only for a lease created on an absent key (the first one, or after
/// the object was deleted by hand or by a seed-format holder): the
/// microsecond clock of the new holder is past every generation an earlier
/// holder could have written as long as the clocks involved are within
/// leasectl's offset check of each other and no generation was pushed ahead of
/// the clock by more than that. Saturates at
/// `u64::MAX` (after which a takeover can no longer make it grow; a record
/// that claims `u64::MAX` is therefore worth a look).
pub fn next_generation(replaced: Option<u64>, now: DateTime<Utc>) -> u64 {
    let clock = u64::try_from(now.timestamp_micros()).unwrap_or(0);
    replaced.map_or(0, |g| g.saturating_add(1)).max(clock)
}

/// Which fields a leasectl writer puts in a LEASE record (`--record-format`,
/// the context setting `record_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordFormat {
    /// The seed's four fields and `generation` (the default).
    #[default]
    Leasectl,
    /// Exactly the seed's four fields, for fleets whose readers refuse
    /// unknown fields: no generation is written or handed out.
    Seed,
}

impl RecordFormat {
    /// `leasectl` or `seed`, as on the command line and in a context.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordFormat::Leasectl => "leasectl",
            RecordFormat::Seed => "seed",
        }
    }

    /// The generation a writer of this format puts when it takes a prefix's
    /// lease at `now` (the writer's clock) over a record whose generation is
    /// `replaced` (`None`: no record, a malformed one, or one without the
    /// field): [`next_generation`] for `leasectl`, none for `seed`.
    pub fn generation(self, replaced: Option<u64>, now: DateTime<Utc>) -> Option<u64> {
        match self {
            RecordFormat::Leasectl => Some(next_generation(replaced, now)),
            RecordFormat::Seed => None,
        }
    }

    /// Why a writer of this format must not take over a record whose
    /// generation is `replaced`: `Some(sentence)` when `leasectl` could not
    /// write a greater one (`replaced` is `u64::MAX`, where
    /// [`next_generation`] saturates), so that the new holder's writes would
    /// carry the replaced holder's fencing token. `None` otherwise, and always
    /// for `seed` (which writes no generation). The sentence is safe to print
    /// and says what to do.
    pub(crate) fn cannot_replace(self, replaced: Option<u64>) -> Option<String> {
        match (self, replaced) {
            (RecordFormat::Leasectl, Some(u64::MAX)) => Some(format!(
                "its generation is {}, the largest a generation can be: no greater one can be written, \
                 so the new holder's writes could not be told from the replaced holder's. \
                 Such a record was written by hand or by another tool; once its holder is surely gone, \
                 delete the LEASE object (the next holder then counts from the clock) and set aside what \
                 the storage holds under that generation",
                u64::MAX
            )),
            _ => None,
        }
    }

    /// The generation kept when a holder adopts a record naming it (a lost
    /// answer, a hand-over): `adopted` as it is; `leasectl` gives a record
    /// without one a generation as for a lease taken at `now`, `seed` drops it.
    pub(crate) fn adopted(self, adopted: Option<u64>, now: DateTime<Utc>) -> Option<u64> {
        match self {
            RecordFormat::Leasectl => adopted.or(Some(next_generation(None, now))),
            RecordFormat::Seed => None,
        }
    }
}

impl std::fmt::Display for RecordFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RecordFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "leasectl" => Ok(RecordFormat::Leasectl),
            "seed" => Ok(RecordFormat::Seed),
            other => Err(format!(
                "unknown record format `{}`; expected leasectl (the seed's four fields and \
                 generation) or seed (exactly the seed's four fields, no generation)",
                sanitize_cut(other, 40)
            )),
        }
    }
}

/// A generation for people: the number, or `-` when unknown.
pub(crate) fn fmt_generation(g: Option<u64>) -> String {
    g.map_or_else(|| "-".to_owned(), |g| g.to_string())
}

/// A new random instance id: 16 random bytes as 32 lowercase hex digits.
pub fn new_instance_id() -> String {
    #[cfg(feature = "sim")]
    if let Some(id) = super::defect::next_id() {
        return id;
    }
    hex::encode(rand::random::<[u8; 16]>())
}

/// Parses a lease TTL: whole seconds from 3 s to one hour (a longer one is
/// judged suspect by every reader; a shorter one cannot be renewed in time).
pub(crate) fn parse_ttl(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    let max = MAX_SANE_TTL_S;
    if d.subsec_nanos() != 0 || d.as_secs() < 3 || d.as_secs() > max {
        return Err(format!("a TTL must be whole seconds from 3s to {max}s"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TTL is whole seconds from 3 s to an hour, both ends taken: a
    /// shorter one cannot be renewed in time, a longer one every reader
    /// judges suspect, and a fraction is no TTL the record can carry.
    #[test]
    fn a_ttl_is_whole_seconds_from_three_to_an_hour() {
        let max = MAX_SANE_TTL_S;
        for ok in ["3s", "30s", &format!("{max}s")] {
            assert!(parse_ttl(ok).is_ok(), "{ok}");
        }
        for bad in ["2s", "0s", "3500ms", &format!("{}s", max + 1)] {
            let err = parse_ttl(bad).unwrap_err();
            assert!(err.contains("whole seconds from 3s"), "{bad}: {err}");
        }
    }

    use crate::text::sanitize;

    /// A released record: written with `released_at`, read back the same;
    /// it keeps the generation, its `renewed_at` is one TTL before the
    /// release (stale to a reader of the seed's format) and never equal to
    /// `acquired_at` (never taken for a hand-over).
    #[test]
    fn released_record_round_trips_and_keeps_the_generation() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T07:00:00.000001Z")
            .unwrap()
            .with_timezone(&Utc);
        let held = LeaseRecord {
            instance_id: "h".into(),
            acquired_at: t - chrono::Duration::seconds(5),
            renewed_at: t,
            ttl_s: 30,
            generation: Some(42),
            released_at: None,
        };
        assert!(!held.is_released());
        assert!(!String::from_utf8(held.to_body())
            .unwrap()
            .contains("released_at"));
        let r = held.released(t);
        assert_eq!(r.generation, Some(42));
        assert_eq!(r.released_at, Some(t));
        assert_eq!(r.renewed_at, t - chrono::Duration::seconds(30));
        assert!(r.acquired_at < r.renewed_at);
        let body = r.to_body();
        assert!(String::from_utf8(body.clone())
            .unwrap()
            .ends_with(r#""generation":42,"released_at":"2026-11-30T07:00:00.000001Z"}"#));
        assert_eq!(LeaseRecord::parse(&body, body.len() as u64), Ok(r));
        // A `released_at` that is not a time makes the record malformed;
        // `null` counts as absent.
        let bad = br#"{"instance_id":"h","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"released_at":"soon"}"#;
        let err = LeaseRecord::parse(bad, bad.len() as u64).unwrap_err();
        assert!(err.0.contains("released_at"), "{err}");
        let null = br#"{"instance_id":"h","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"released_at":null}"#;
        assert!(!LeaseRecord::parse(null, null.len() as u64)
            .unwrap()
            .is_released());
    }

    fn parse(s: &str) -> Result<LeaseRecord, Malformed> {
        LeaseRecord::parse(s.as_bytes(), s.len() as u64)
    }

    #[test]
    fn reader_is_tolerant() {
        let r = parse(
            r#"{"instance_id":"a","acquired_at":"2026-11-30T08:00:00+01:00",
                "renewed_at":"2026-11-30T07:00:05.25Z","ttl_s":30,"extra":[1]}"#,
        )
        .unwrap();
        assert_eq!(r.acquired_at.to_rfc3339(), "2026-11-30T07:00:00+00:00");
        assert_eq!(r.renewed_at.timestamp_subsec_millis(), 250);
        assert_eq!(r.ttl_s, 30);
        assert_eq!(r.generation, None);
        let r = parse(
            r#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z",
                "renewed_at":"2026-11-30T07:00:05Z","ttl_s":30,"generation":null}"#,
        )
        .unwrap();
        assert_eq!(r.generation, None);
        let r = parse(
            r#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z",
                "renewed_at":"2026-11-30T07:00:05Z","ttl_s":30,"generation":0}"#,
        )
        .unwrap();
        assert_eq!(r.generation, Some(0));
    }

    #[test]
    fn writer_is_strict_and_round_trips() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T07:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let r = LeaseRecord {
            instance_id: "x".into(),
            acquired_at: t,
            renewed_at: t,
            ttl_s: 30,
            generation: None,
            released_at: None,
        };
        let body = String::from_utf8(r.to_body()).unwrap();
        assert_eq!(
            body,
            r#"{"instance_id":"x","acquired_at":"2026-11-30T07:00:00.123456Z","renewed_at":"2026-11-30T07:00:00.123456Z","ttl_s":30}"#
        );
        assert_eq!(parse(&body).unwrap(), r);
        let g = LeaseRecord {
            generation: Some(u64::MAX),
            ..r.clone()
        };
        let body = String::from_utf8(g.to_body()).unwrap();
        assert!(
            body.ends_with(r#","ttl_s":30,"generation":18446744073709551615}"#),
            "{body}"
        );
        assert_eq!(parse(&body).unwrap(), g);
    }

    #[test]
    fn malformed_reasons() {
        let cases: &[(&[u8], &str)] = &[
            (b"not json", "not JSON"),
            (b"[1]", "not an object"),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","ttl_s":30}"#,
                "missing field renewed_at",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":0}"#,
                "ttl_s must be a positive whole number of seconds, got 0",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":-5}"#,
                "ttl_s must be a positive whole number of seconds, got -5",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"yesterday","renewed_at":"2026-11-30T07:00:00Z","ttl_s":5}"#,
                "acquired_at \"yesterday\" is not an RFC 3339",
            ),
            // Quoted as the console shows it: escaped once, not twice.
            (
                b"{\"instance_id\":\"a\",\"acquired_at\":\"\\u001b[2J\\\"x\",\"renewed_at\":\"2026-11-30T07:00:00Z\",\"ttl_s\":5}",
                r#"acquired_at "\x1b[2J\"x" is not an RFC 3339"#,
            ),
            (b"{\"instance_id\":\"\xff\"}", "not UTF-8"),
            // A key twice, in either order.
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"ttl_s":999999}"#,
                "key \"ttl_s\" appears twice",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":999999,"ttl_s":30}"#,
                "key \"ttl_s\" appears twice",
            ),
            (
                br#"{"instance_id":"a","instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30}"#,
                "key \"instance_id\" appears twice",
            ),
            // Holders that would look empty.
            (
                br#"{"instance_id":"\u0301\u0301","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30}"#,
                r#"instance_id "\u{301}\u{301}" has no visible character"#,
            ),
            (
                br#"{"instance_id":"\u2800 \u200b","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30}"#,
                "has no visible character",
            ),
            // TTLs quoted exactly as written.
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30.0}"#,
                "written as an integer (30, not 30.0 or 3e1), got 30.0",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":18446744073709551616}"#,
                "of at most 18446744073709551615, got 18446744073709551616",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":"30"}"#,
                r#"ttl_s must be a positive whole number of seconds, got "30""#,
            ),
            // Generations that cannot be compared.
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"generation":-1}"#,
                "generation must be a whole number from 0 to 18446744073709551615 written as an integer, got -1",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"generation":7.0}"#,
                "got 7.0",
            ),
            (
                br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"generation":"7"}"#,
                r#"got "7""#,
            ),
        ];
        for (body, want) in cases {
            let err = LeaseRecord::parse(body, body.len() as u64).unwrap_err();
            assert!(
                err.0.contains(want),
                "{:?}: {err}",
                String::from_utf8_lossy(body)
            );
        }
        let big = vec![b' '; 100 * 1024];
        let err = LeaseRecord::parse(&big[..MAX_BODY_BYTES + 1], big.len() as u64).unwrap_err();
        assert!(
            err.0.contains("102400 bytes, over the 64 KiB limit"),
            "{err}"
        );
    }

    /// The 64 KiB limit counts the object's size and the bytes passed, each
    /// on its own: a record of exactly 64 KiB is read; one byte more is
    /// refused whether the size says so (the body passed cut short) or the
    /// body does (its size given smaller).
    #[test]
    fn the_size_limit_is_64_kib_inclusive_by_size_or_by_body() {
        let record = br#"{"instance_id":"a","acquired_at":"2026-11-30T07:00:00Z","renewed_at":"2026-11-30T07:00:00Z","ttl_s":30}"#;
        let padded = |len: usize| {
            let mut b = record.to_vec();
            b.resize(len, b' ');
            b
        };
        let exact = padded(MAX_BODY_BYTES);
        LeaseRecord::parse(&exact, exact.len() as u64).expect("exactly 64 KiB is read");
        let err = LeaseRecord::parse(record, MAX_BODY_BYTES as u64 + 1).unwrap_err();
        assert!(
            err.0.contains("65537 bytes, over the 64 KiB limit"),
            "{err}"
        );
        let over = padded(MAX_BODY_BYTES + 1);
        let err = LeaseRecord::parse(&over, record.len() as u64).unwrap_err();
        assert!(
            err.0.contains("65537 bytes, over the 64 KiB limit"),
            "{err}"
        );
    }

    #[test]
    fn visible_ids_and_distinct_nested_keys_are_read() {
        let r = parse(
            r#"{"instance_id":"a\u2800b","acquired_at":"2026-11-30T07:00:00Z",
                "renewed_at":"2026-11-30T07:00:00Z","ttl_s":30,"x":{"k":1},"y":{"k":2}}"#,
        )
        .unwrap();
        assert_eq!(r.instance_id, "a\u{2800}b");
        assert_eq!(sanitize(&r.instance_id), "a\\u{2800}b");
    }

    #[test]
    fn generations_grow() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T07:00:00.000001Z")
            .unwrap()
            .with_timezone(&Utc);
        let us = t.timestamp_micros() as u64;
        assert_eq!(next_generation(None, t), us);
        assert_eq!(next_generation(Some(5), t), us);
        assert_eq!(next_generation(Some(us), t), us + 1);
        assert_eq!(next_generation(Some(us + 10), t), us + 11);
        assert_eq!(next_generation(Some(u64::MAX), t), u64::MAX);
        let before_epoch = DateTime::parse_from_rfc3339("1960-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(next_generation(None, before_epoch), 0);
        assert_eq!(next_generation(Some(3), before_epoch), 4);
    }

    #[test]
    fn record_formats() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T07:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let us = t.timestamp_micros() as u64;
        let l = RecordFormat::Leasectl;
        assert_eq!(l.generation(None, t), Some(us));
        assert_eq!(l.generation(Some(us + 4), t), Some(us + 5));
        assert_eq!(l.adopted(Some(7), t), Some(7));
        assert_eq!(l.adopted(None, t), Some(us));
        assert_eq!(RecordFormat::Seed.generation(Some(7), t), None);
        assert_eq!(RecordFormat::Seed.adopted(Some(7), t), None);
        assert_eq!("seed".parse::<RecordFormat>(), Ok(RecordFormat::Seed));
        assert_eq!(
            "leasectl".parse::<RecordFormat>(),
            Ok(RecordFormat::Leasectl)
        );
        assert!("Seed"
            .parse::<RecordFormat>()
            .unwrap_err()
            .contains("expected leasectl"));
        assert_eq!(RecordFormat::default(), RecordFormat::Leasectl);
        // What is shown (`config view`, messages) reads back as the same format.
        for f in [RecordFormat::Leasectl, RecordFormat::Seed] {
            assert_eq!(f.to_string().parse::<RecordFormat>(), Ok(f));
        }
        assert!(l
            .cannot_replace(Some(u64::MAX))
            .unwrap()
            .contains("18446744073709551615, the largest"));
        assert_eq!(l.cannot_replace(Some(u64::MAX - 1)), None);
        assert_eq!(l.cannot_replace(None), None);
        assert_eq!(RecordFormat::Seed.cannot_replace(Some(u64::MAX)), None);
        assert_eq!(fmt_generation(None), "-");
        assert_eq!(fmt_generation(Some(8)), "8");
    }

    #[test]
    fn keys_and_ids() {
        assert_eq!(lease_key("backups/db1/"), "backups/db1/LEASE");
        assert_eq!(lease_key("backups/db1"), "backups/db1/LEASE");
        assert_eq!(lease_key(""), "LEASE");
        assert_eq!(lease_key("x//"), "x//LEASE");
        assert_eq!(lease_key("/"), "/LEASE");
        let id = new_instance_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(id, new_instance_id());
    }
}
