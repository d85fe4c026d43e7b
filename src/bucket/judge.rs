//! Judging a LEASE object by the reader's own clock.
//!
//! With `age = now − renewed_at` (seconds, reader's wall clock):
//! - `fresh`: `age < ttl_s` — including a stamp up to `ttl_s` in the future;
//! - `stale`: `age ≥ ttl_s` — the holder stopped renewing; may be taken over;
//! - `suspect`: `renewed_at > now + ttl_s`, or `ttl_s > MAX_SANE_TTL_S`; its
//!   stamp or TTL cannot be trusted, so it has no expiry (`expires_in_s` is
//!   `None` — one rule for the console, the table, `--json` and `check`): it
//!   is taken over only after it is seen unchanged for one TTL;
//! - `malformed`: the body is not a valid record (see [`LeaseRecord::parse`]);
//! - `absent`: no LEASE object.
//!
//! A record whose `renewed_at` is before its `acquired_at` is judged by
//! `renewed_at` as any other, with a problem noted (the holder's clock went
//! back, or the record was written by hand): an operator must see it, but a
//! live holder whose clock stepped back is still live.
//!
//! A generation the rule cannot keep growing from is noted the same way:
//! `u64::MAX` (no greater one exists: the record is not taken over), or one
//! more than [`GENERATION_AHEAD_S`] ahead of the reader's clock read as
//! microseconds since 1970 (hand-written, another tool's numbering, or a
//! holder clock far ahead: a lease created after its release gets a smaller
//! one).
//!
//! Suspect and malformed records block nothing forever: a contender takes them
//! over after watching the same ETag unchanged for one of its own TTLs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::record::{LeaseRecord, MAX_SANE_TTL_S};
use crate::store::{GetOutput, MAX_BODY_BYTES};
use crate::text::{format_secs, sanitize_bytes};

/// How far a generation may run ahead of the reader's clock (read as
/// microseconds since 1970) before it is noted: one hour
/// ([`MAX_SANE_TTL_S`]), far beyond what clocks that pass leasectl's offset
/// check and `replaced + 1` steps can add.
pub(crate) const GENERATION_AHEAD_S: u64 = MAX_SANE_TTL_S;

/// The judgement of one LEASE object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// Renewed less than its TTL ago: a live holder. Do not write.
    Fresh,
    /// Not renewed for at least its TTL: may be taken over.
    Stale,
    /// Stamped more than its TTL in the future, or a TTL over one hour.
    Suspect,
    /// Not a valid record.
    Malformed,
    /// No LEASE object: nobody holds the prefix.
    Absent,
    /// A released record (a tombstone, with `released_at`): nobody holds the
    /// prefix, and the record keeps the last generation so the next holder's
    /// is greater. Free, like `absent`: a taker replaces it at once.
    Released,
}

impl LeaseState {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fresh => "fresh",
            Self::Stale => "stale",
            Self::Suspect => "suspect",
            Self::Malformed => "malformed",
            Self::Absent => "absent",
            Self::Released => "released",
        }
    }

    /// True for the states an operator must look at (stale, suspect, malformed).
    pub(crate) fn needs_attention(self) -> bool {
        matches!(self, Self::Stale | Self::Suspect | Self::Malformed)
    }
}

impl std::fmt::Display for LeaseState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was read at a lease key: nothing, or an object with its parsed record.
#[derive(Debug, Clone)]
pub enum Observed {
    /// The key does not exist.
    Absent,
    /// The object, and its record or why it is malformed.
    Present {
        /// ETag without quotes.
        etag: Option<String>,
        /// Last-Modified by the server's clock.
        last_modified: Option<DateTime<Utc>>,
        /// The parsed record, or the reason and the raw body (escaped, cut to 64 KiB).
        record: Result<LeaseRecord, (String, String)>,
    },
}

impl Observed {
    /// Builds an observation from a GET result.
    pub fn from_get(out: &GetOutput) -> Self {
        let record = match &out.problem {
            // Something is there but it is not an object body (e.g. a FIFO).
            Some(p) => Err((p.clone(), String::new())),
            None => LeaseRecord::parse(&out.body, out.meta.size).map_err(|m| {
                let cut = &out.body[..out.body.len().min(MAX_BODY_BYTES)];
                // A local file that is also another name's says so: most
                // likely the LEASE was replaced by a link to another file.
                let reason = match out.links {
                    Some(n) if n > 1 => format!(
                        "{}; the file has {n} hard links, so it is also another file (a LEASE replaced by, or linked to, some other file)",
                        m.0
                    ),
                    _ => m.0,
                };
                (reason, sanitize_bytes(cut))
            }),
        };
        Observed::Present {
            etag: out.meta.etag.clone(),
            last_modified: out.meta.last_modified,
            record,
        }
    }

    /// The ETag, if an object was there.
    pub fn etag(&self) -> Option<&str> {
        match self {
            Observed::Present { etag, .. } => etag.as_deref(),
            Observed::Absent => None,
        }
    }

    /// The record, if there is a valid one.
    pub fn record(&self) -> Option<&LeaseRecord> {
        match self {
            Observed::Present { record: Ok(r), .. } => Some(r),
            _ => None,
        }
    }

    /// What [`judge`] and [`next_change_view`] read of it, borrowed.
    pub fn view(&self) -> ObservedView<'_> {
        match self {
            Observed::Absent => ObservedView::Absent,
            Observed::Present {
                last_modified,
                record,
                ..
            } => ObservedView::Present {
                last_modified: *last_modified,
                record: record.as_ref().map_err(|(reason, _)| reason.as_str()),
            },
        }
    }
}

/// What judging an [`Observed`] reads of it, borrowed from wherever it is
/// kept (a snapshot's row keeps its record once, not a second copy inside
/// an `Observed`: [`crate::snapshot::PrefixReport`]).
#[derive(Debug, Clone, Copy)]
pub enum ObservedView<'a> {
    /// The key does not exist.
    Absent,
    /// The object: its Last-Modified (server clock), and its record or why
    /// it is malformed.
    Present {
        /// Last-Modified by the server's clock.
        last_modified: Option<DateTime<Utc>>,
        /// The parsed record, or why the body is not one.
        record: Result<&'a LeaseRecord, &'a str>,
    },
}

/// The judgement of an observation at one instant, with the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// The state.
    pub state: LeaseState,
    /// Why the record is suspect or malformed, or what is wrong with a
    /// record judged fresh or stale all the same (safe to print).
    pub problem: Option<String>,
    /// `now − renewed_at` in seconds (negative when stamped in the future).
    pub age_s: Option<f64>,
    /// `ttl_s − age` in seconds: time left before the lease may be taken
    /// (negative: expired that long ago). `None` for a suspect record, whose
    /// stamp or TTL cannot be trusted (it is taken after one TTL's watch).
    pub expires_in_s: Option<f64>,
    /// Estimate of the holder's clock offset from the server's: `renewed_at −
    /// Last-Modified`, in seconds, good to about ±1 s (Last-Modified has whole seconds).
    pub(crate) holder_skew_s: Option<f64>,
}

impl Judgement {
    /// What the state means for an operator, without the state's own name
    /// (safe to print): e.g. `renewed 3.1s ago; may be taken over in 26.9s`.
    pub(crate) fn explanation(&self) -> String {
        let fmt = |s: f64| format_secs(s);
        match self.state {
            LeaseState::Absent => "no LEASE object: nobody holds this prefix".into(),
            LeaseState::Released => {
                "nobody holds this prefix (the record keeps the last generation, so the next holder's is greater)".into()
            }
            LeaseState::Fresh => format!(
                "held, renewed {} ago; may be taken over in {}{}",
                fmt(self.age_s.unwrap_or(0.0)),
                fmt(self.expires_in_s.unwrap_or(0.0)),
                self.note()
            ),
            LeaseState::Stale => format!(
                "not renewed for {}, expired {} ago; its holder died or lost the bucket; may be taken over{}",
                fmt(self.age_s.unwrap_or(0.0)),
                fmt(-self.expires_in_s.unwrap_or(0.0)),
                self.note()
            ),
            LeaseState::Suspect => format!(
                "{}; taken over only after it is seen unchanged for one TTL",
                self.problem.as_deref().unwrap_or("untrustworthy record")
            ),
            LeaseState::Malformed => format!(
                "{}; taken over only after it is seen unchanged for one TTL",
                self.problem.as_deref().unwrap_or("not a record")
            ),
        }
    }

    /// `; but PROBLEM` for a fresh or stale record with a problem, else empty.
    fn note(&self) -> String {
        self.problem
            .as_deref()
            .map(|p| format!("; but {p}"))
            .unwrap_or_default()
    }

    /// The state and its explanation: `STATE: EXPLANATION`.
    pub(crate) fn sentence(&self) -> String {
        format!("{}: {}", self.state, self.explanation())
    }
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_microseconds()
        .map(|us| us as f64 / 1e6)
        .unwrap_or(d.num_seconds() as f64)
}

/// Judges `obs` at the reader's wall-clock time `now` (UTC). Pure: no I/O.
/// The rules are in the module docs (bucket-lease spec; ARCHITECTURE.md, "Where each rule lives").
pub fn judge(obs: &Observed, now: DateTime<Utc>) -> Judgement {
    judge_view(obs.view(), now)
}

/// [`judge`] on a borrowed view of what was read.
pub fn judge_view(obs: ObservedView<'_>, now: DateTime<Utc>) -> Judgement {
    let mut j = Judgement {
        state: LeaseState::Absent,
        problem: None,
        age_s: None,
        expires_in_s: None,
        holder_skew_s: None,
    };
    let ObservedView::Present {
        last_modified,
        record,
    } = obs
    else {
        return j;
    };
    let r = match record {
        Ok(r) => r,
        Err(reason) => {
            j.state = LeaseState::Malformed;
            j.problem = Some(reason.to_owned());
            return j;
        }
    };
    if r.is_released() {
        // Nobody holds it: no age, no expiry, no skew to judge.
        j.state = LeaseState::Released;
        return j;
    }
    let age = now - r.renewed_at;
    let ttl = chrono::Duration::seconds(r.ttl_s.min(i64::MAX as u64 / 2_000_000) as i64);
    j.age_s = Some(secs(age));
    j.expires_in_s = Some(secs(ttl - age));
    j.holder_skew_s = last_modified.map(|lm| secs(r.renewed_at - lm));
    if r.ttl_s > MAX_SANE_TTL_S {
        j.state = LeaseState::Suspect;
        j.expires_in_s = None;
        j.problem = Some(format!(
            "ttl_s {} is over the {MAX_SANE_TTL_S} s limit",
            r.ttl_s
        ));
    } else if r.renewed_at > now + ttl {
        j.state = LeaseState::Suspect;
        j.expires_in_s = None;
        j.problem = Some(format!(
            "renewed_at is {} in the future, more than its {} s TTL (holder clock wrong, or hand-written)",
            format_secs(-secs(age)),
            r.ttl_s
        ));
    } else if age < ttl {
        j.state = LeaseState::Fresh;
    } else {
        j.state = LeaseState::Stale;
    }
    if let Some(note) = generation_note(r.generation, now) {
        j.problem = Some(match j.problem.take() {
            Some(p) => format!("{p}; {note}"),
            None => note,
        });
    }
    if r.renewed_at < r.acquired_at {
        let note = format!(
            "renewed_at is {} before acquired_at (the holder's clock went back, or the record was written by hand)",
            format_secs(secs(r.acquired_at - r.renewed_at))
        );
        j.problem = Some(match j.problem.take() {
            Some(p) => format!("{p}; {note}"),
            None => note,
        });
    }
    j
}

/// When [`judge`]'s verdict on `obs` (its state and problem) can next differ
/// from the verdict at `now`, other than by the ages it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VerdictChange {
    /// Never: absent, malformed, stale, or suspect for its TTL.
    Never,
    /// At this instant (UTC): a fresh lease turns stale at
    /// `renewed_at + ttl_s`.
    At(DateTime<Utc>),
    /// At any time: the problem quotes a time that moves with the clock (a
    /// stamp in the future, a generation ahead of the clock).
    Always,
}

/// When the verdict of [`judge`] on `obs`, a borrowed view of what was read,
/// can next change after `now` (the rules of the module docs, read for their
/// instants). The console judges a row off screen again only then; `tests`
/// check it against [`judge`].
pub(crate) fn next_change_view(obs: ObservedView<'_>, now: DateTime<Utc>) -> VerdictChange {
    let ObservedView::Present { record: Ok(r), .. } = obs else {
        return VerdictChange::Never;
    };
    if r.generation.is_some_and(|g| g != u64::MAX) && generation_note(r.generation, now).is_some() {
        return VerdictChange::Always;
    }
    if r.ttl_s > MAX_SANE_TTL_S {
        return VerdictChange::Never;
    }
    let ttl = chrono::Duration::seconds(r.ttl_s as i64);
    if r.renewed_at > now + ttl {
        VerdictChange::Always
    } else if now - r.renewed_at < ttl {
        VerdictChange::At(r.renewed_at + ttl)
    } else {
        VerdictChange::Never
    }
}

/// What is wrong with `generation` judged at `now` (module docs), if anything.
fn generation_note(generation: Option<u64>, now: DateTime<Utc>) -> Option<String> {
    let g = generation?;
    if g == u64::MAX {
        return Some(format!(
            "generation is {g}, the largest a generation can be: it cannot be taken over (no greater one can be written)"
        ));
    }
    let clock_us = i128::from(now.timestamp_micros());
    let ahead_s = (i128::from(g) - clock_us) / 1_000_000;
    (ahead_s > i128::from(GENERATION_AHEAD_S)).then(|| {
        format!(
            "generation {g} is {} ahead of this reader's clock read as microseconds since 1970 \
             (hand-written, another tool's numbering, or a holder clock far ahead): a lease created after its release gets a smaller one",
            format_secs(ahead_s as f64)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A released record is judged `released` (free), with no age, expiry
    /// or skew, whatever its stamps say.
    #[test]
    fn a_released_record_is_free_whatever_its_stamps() {
        let now = Utc::now();
        for renewed in [
            now - chrono::Duration::hours(2),
            now,
            now + chrono::Duration::hours(2),
        ] {
            let r = LeaseRecord {
                instance_id: "h".into(),
                acquired_at: renewed - chrono::Duration::seconds(1),
                renewed_at: renewed,
                ttl_s: 30,
                generation: Some(3),
                released_at: Some(renewed),
            };
            let j = judge(
                &Observed::Present {
                    etag: Some("e".into()),
                    last_modified: Some(now),
                    record: Ok(r),
                },
                now,
            );
            assert_eq!(j.state, LeaseState::Released);
            assert!(!j.state.needs_attention());
            assert_eq!(
                (j.age_s, j.expires_in_s, j.holder_skew_s),
                (None, None, None)
            );
            assert!(j.problem.is_none());
        }
    }
    use chrono::{Duration, TimeZone};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
    }

    fn obs(renewed_at: &str, ttl_s: u64) -> Observed {
        let renewed_at = DateTime::parse_from_rfc3339(renewed_at)
            .unwrap()
            .with_timezone(&Utc);
        Observed::Present {
            etag: Some("e".into()),
            last_modified: Some(now() - Duration::seconds(2)),
            record: Ok(LeaseRecord {
                instance_id: "h".into(),
                acquired_at: renewed_at,
                renewed_at,
                ttl_s,
                generation: None,
                released_at: None,
            }),
        }
    }

    #[test]
    fn judgement_table() {
        // (renewed_at, ttl_s, expected state, expected age_s)
        let cases: &[(&str, u64, LeaseState, f64)] = &[
            ("2026-11-30T11:59:50Z", 30, LeaseState::Fresh, 10.0),
            ("2026-11-30T11:59:30.001Z", 30, LeaseState::Fresh, 29.999),
            // age exactly ttl_s: stale
            ("2026-11-30T11:59:30Z", 30, LeaseState::Stale, 30.0),
            ("2026-11-30T11:59:29.999Z", 30, LeaseState::Stale, 30.001),
            // stamped exactly ttl_s in the future: still fresh
            ("2026-11-30T12:00:30Z", 30, LeaseState::Fresh, -30.0),
            // just beyond: suspect
            ("2026-11-30T12:00:30.001Z", 30, LeaseState::Suspect, -30.001),
            // offsets other than Z mean the same instant
            ("2026-11-30T13:59:50+02:00", 30, LeaseState::Fresh, 10.0),
            ("2026-11-30T06:29:00-05:30", 30, LeaseState::Stale, 60.0),
            // TTL over an hour: suspect however fresh
            ("2026-11-30T11:59:59Z", 3601, LeaseState::Suspect, 1.0),
            ("2026-11-30T11:59:59Z", 3600, LeaseState::Fresh, 1.0),
        ];
        for (stamp, ttl, state, age) in cases {
            let j = judge(&obs(stamp, *ttl), now());
            assert_eq!(j.state, *state, "{stamp} ttl {ttl}");
            assert!(
                (j.age_s.unwrap() - age).abs() < 1e-6,
                "{stamp}: age {:?}",
                j.age_s
            );
            // A suspect record has no expiry: its stamp or TTL is not trusted.
            match state {
                LeaseState::Suspect => assert_eq!(j.expires_in_s, None, "{stamp}"),
                _ => assert!(
                    (j.expires_in_s.unwrap() - (*ttl as f64 - age)).abs() < 1e-6,
                    "{stamp}"
                ),
            }
            assert_eq!(
                j.problem.is_some(),
                *state == LeaseState::Suspect,
                "{stamp}"
            );
        }
    }

    #[test]
    fn renewed_before_acquired_is_noted_and_judged_by_renewed_at() {
        let mut o = obs("2026-11-30T11:59:50Z", 30);
        if let Observed::Present { record: Ok(r), .. } = &mut o {
            r.acquired_at = r.renewed_at + Duration::seconds(90);
        }
        let j = judge(&o, now());
        assert_eq!(j.state, LeaseState::Fresh);
        let p = j.problem.clone().unwrap();
        assert!(p.contains("renewed_at is 1m30s before acquired_at"), "{p}");
        assert!(
            j.sentence().contains("; but renewed_at is"),
            "{}",
            j.sentence()
        );
        // Stale, and suspect, keep their own judgement and get the note too.
        let mut o = obs("2026-11-30T11:00:00Z", 30);
        if let Observed::Present { record: Ok(r), .. } = &mut o {
            r.acquired_at = r.renewed_at + Duration::seconds(5);
        }
        let j = judge(&o, now());
        assert_eq!(j.state, LeaseState::Stale);
        assert!(j.problem.unwrap().contains("before acquired_at"));
    }

    #[test]
    fn generations_that_cannot_keep_growing_are_noted() {
        let with = |g: Option<u64>| {
            let mut o = obs("2026-11-30T11:59:50Z", 30);
            if let Observed::Present { record: Ok(r), .. } = &mut o {
                r.generation = g;
            }
            judge(&o, now())
        };
        let us = now().timestamp_micros() as u64;
        for g in [None, Some(0), Some(us), Some(us + 3_600_000_000)] {
            assert_eq!(with(g).problem, None, "{g:?}");
        }
        let j = with(Some(us + 3_601_000_000));
        assert_eq!(j.state, LeaseState::Fresh);
        let p = j.problem.unwrap();
        assert!(p.contains("is 1h00m ahead of this reader's clock"), "{p}");
        let j = with(Some(9_999_999_999_999_999_999));
        assert!(j.problem.unwrap().contains("ahead of this reader's clock"));
        let j = with(Some(u64::MAX));
        assert_eq!(j.state, LeaseState::Fresh);
        assert!(j
            .problem
            .unwrap()
            .contains("18446744073709551615, the largest a generation can be"));
    }

    #[test]
    fn skew_absent_and_malformed() {
        let j = judge(&obs("2026-11-30T11:59:55Z", 30), now());
        // renewed_at is 3 s after Last-Modified (now − 2 s): holder clock ~3 s ahead.
        assert!((j.holder_skew_s.unwrap() + 3.0).abs() < 1e-6);
        assert_eq!(judge(&Observed::Absent, now()).state, LeaseState::Absent);
        let m = Observed::Present {
            etag: None,
            last_modified: None,
            record: Err(("body is not JSON".into(), "x".into())),
        };
        let j = judge(&m, now());
        assert_eq!(j.state, LeaseState::Malformed);
        assert_eq!(j.problem.as_deref(), Some("body is not JSON"));
        assert!(j.sentence().contains("seen unchanged for one TTL"));
    }

    /// [`next_change_view`] on an owned observation.
    fn next_change(obs: &Observed, now: DateTime<Utc>) -> VerdictChange {
        next_change_view(obs.view(), now)
    }

    /// `next_change` against `judge` itself: for fresh, stale, suspect,
    /// over-long, generation-noted, malformed and absent observations, the
    /// verdict (state and problem) stays what it was at `now` until the
    /// instant given, and differs there; `Never` holds for ten days; `Always`
    /// is given only where the problem's text moves with the clock.
    #[test]
    fn next_change_is_when_the_verdict_changes() {
        let verdict = |o: &Observed, t: DateTime<Utc>| {
            let j = judge(o, t);
            (j.state, j.problem)
        };
        let with = |o: Observed, generation: Option<u64>, acquired_back: bool| match o {
            Observed::Present {
                etag,
                last_modified,
                record: Ok(mut r),
            } => {
                r.generation = generation;
                if acquired_back {
                    r.acquired_at = r.renewed_at + Duration::seconds(5);
                }
                Observed::Present {
                    etag,
                    last_modified,
                    record: Ok(r),
                }
            }
            o => o,
        };
        let clock_us = now().timestamp_micros() as u64;
        let mut cases = vec![
            Observed::Absent,
            Observed::Present {
                etag: None,
                last_modified: None,
                record: Err(("body is not JSON".into(), "x".into())),
            },
        ];
        for (stamp, ttl) in [
            ("2026-11-30T11:59:50Z", 30),
            ("2026-11-30T11:59:29Z", 30),
            ("2026-11-30T11:59:30Z", 30),
            ("2026-11-30T11:00:00Z", 3600),
            ("2026-11-30T12:00:20Z", 30),
            ("2026-11-30T12:01:00Z", 30),
            ("2026-11-30T12:00:00Z", 7200),
        ] {
            for (generation, back) in [
                (None, false),
                (Some(7), true),
                (Some(u64::MAX), false),
                (Some(clock_us + 7_200_000_000), false),
            ] {
                cases.push(with(obs(stamp, ttl), generation, back));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for o in &cases {
            let at_now = verdict(o, now());
            match next_change(o, now()) {
                VerdictChange::Never => {
                    for s in [1, 29, 30, 31, 3600, 864_000] {
                        assert_eq!(
                            verdict(o, now() + Duration::seconds(s)),
                            at_now,
                            "{o:?} at +{s}s"
                        );
                    }
                    seen.insert("never");
                }
                VerdictChange::At(t) => {
                    assert!(t > now(), "{o:?}");
                    let mut u = now();
                    while u < t {
                        assert_eq!(verdict(o, u), at_now, "{o:?} at {u}");
                        u += Duration::milliseconds(250);
                    }
                    assert_eq!(verdict(o, t - Duration::microseconds(1)), at_now, "{o:?}");
                    assert_ne!(verdict(o, t), at_now, "{o:?} at its change {t}");
                    seen.insert("at");
                }
                VerdictChange::Always => {
                    assert_ne!(verdict(o, now() + Duration::seconds(2)), at_now, "{o:?}");
                    seen.insert("always");
                }
            }
        }
        assert_eq!(seen.len(), 3, "every kind of change is covered");
    }
}
