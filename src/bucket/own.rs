//! Telling our own write from someone else's (issue 37: the same instance id
//! twice, answers without an ETag, a lost answer followed by a refusal).
//!
//! An instance id names a holder, not a process: two processes started with
//! the same `--instance-id`, or a stranger writing right after our write
//! landed, leave records that name us without being ours. So a record is
//! adopted as our own only on proof:
//!
//! - **its body is, byte for byte, one this process sent** and did not see
//!   answered ([`Sent`]): our `renewed_at` has microseconds, so two writers'
//!   bodies differ; or
//! - **it is a hand-over not yet taken up** ([`is_handover`]): a takeover
//!   wrote it for a successor named by id, with `acquired_at` equal to
//!   `renewed_at`; no holder ever writes that ([`holder_stamps`]), and the
//!   successor's adoption rewrites it, so a second process under the same id
//!   finds a record it must not adopt.
//!
//! Everything else that names our id is a second holder under the same id:
//! never adopted, never deleted.

use std::collections::VecDeque;

use super::judge::Observed;
use super::record::LeaseRecord;
use crate::store::{ObjectRead, StoreError};

/// The most unconfirmed bodies remembered (each a few hundred bytes).
const KEEP: usize = 16;

/// The bodies this process sent to one LEASE key whose answers it did not
/// see (a lost answer, a timeout, a 409 or 5xx): a read-back adopts a record
/// only when its body is one of these (or the one last confirmed).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sent {
    bodies: VecDeque<Vec<u8>>,
}

impl Sent {
    /// Remembers `body` as sent and not (yet) confirmed; the oldest of more
    /// than 16 is forgotten.
    pub(crate) fn add(&mut self, body: &[u8]) {
        if self.proves(body) {
            return;
        }
        if self.bodies.len() == KEEP {
            self.bodies.pop_front();
        }
        self.bodies.push_back(body.to_vec());
    }

    /// True when `body` is exactly one this process sent and did not see answered.
    pub(crate) fn proves(&self, body: &[u8]) -> bool {
        self.bodies.iter().any(|b| b == body)
    }

    /// Forgets every body (a write of ours was confirmed).
    pub(crate) fn clear(&mut self) {
        self.bodies.clear();
    }

    /// Remembers every body `other` remembers too.
    pub(crate) fn extend(&mut self, other: &Sent) {
        for b in &other.bodies {
            self.add(b);
        }
    }
}

/// True when `record` is a hand-over not yet taken up: a record a takeover
/// wrote (`acquired_at` equal to `renewed_at`, to the microsecond) for the
/// successor it names. Every write of a holder's own has `renewed_at` after
/// `acquired_at` ([`holder_stamps`]), so a record a live holder wrote never
/// looks like one, and the successor's first write ends it. Both record
/// formats carry it (no field is added).
pub(crate) fn is_handover(record: &LeaseRecord) -> bool {
    record.acquired_at == record.renewed_at
}

/// The `(acquired_at, renewed_at)` a holder writes at `now` for a tenure that
/// began at `acquired_at`: `renewed_at` is `now`, or one microsecond later
/// when `now` is `acquired_at` to the microsecond (a lease created now), so
/// that no holder's record is ever taken for a hand-over ([`is_handover`]).
pub(crate) fn holder_stamps(
    acquired_at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    if now == acquired_at {
        (acquired_at, now + chrono::Duration::microseconds(1))
    } else {
        (acquired_at, now)
    }
}

/// A stamp phase for a new contender ([`stamp`]): 1 to 999, from this
/// process's pid and a count of the contenders it made, so that two
/// contenders of one process, or of two processes with different pids mod
/// 999, never share one.
pub(crate) fn new_phase() -> u16 {
    #[cfg(feature = "sim")]
    if let Some(phase) = super::defect::next_phase() {
        return phase;
    }
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    phase_of(std::process::id(), n)
}

/// The phase of the `n`th contender of process `pid`: 1 to 999, a different
/// one for each of 999 contenders in a row.
fn phase_of(pid: u32, n: u32) -> u16 {
    // 337 is prime to 999: pids one apart land far apart.
    let spread = pid.wrapping_mul(337).wrapping_add(n) % 999;
    (1 + spread) as u16
}

/// The time a contender on `phase` stamps for a write at `now`: the last
/// microsecond at or before `now` whose count mod 1000 is `phase`, less than
/// a millisecond back (a record so stamped reads as older, never younger).
///
/// Why: a body is proof of authorship ([`whose`]), so two contenders must
/// not write the same bytes. Two processes under one instance id that wrote
/// in the same microsecond did (CI: two successors of one hand-over,
/// started together, both stamped 09:32:49.289558; the loser of the
/// `If-Match` took the winner's record for its own write whose answer was
/// lost). On different phases they never write the same bytes.
pub(crate) fn stamp(
    now: chrono::DateTime<chrono::Utc>,
    phase: u16,
) -> chrono::DateTime<chrono::Utc> {
    let at = i64::from(now.timestamp_subsec_micros());
    now - chrono::Duration::microseconds((at - i64::from(phase)).rem_euclid(1000))
}

/// Whose a stored LEASE is, to a process running as `instance_id` ([`whose`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Whose {
    /// Its body is, byte for byte, one this process wrote (the last one
    /// confirmed, or one whose answer it did not see): adopt its ETag.
    Ours,
    /// It names our instance id and is a hand-over nobody has taken up
    /// ([`is_handover`]): an acquire adopts it, with `If-Match` on its ETag,
    /// so that of two processes under that id only one gets it. A running
    /// holder never adopts one (its own record was replaced: it has lost).
    HandedOver,
    /// It names our instance id but is neither: another process under the
    /// same id wrote it. Never adopted, never deleted; judged like another
    /// holder's record (fresh: refused as [`super::LeaseError::SameInstanceId`];
    /// stale: taken over with a greater generation, after the reader-clock check).
    SameId,
    /// Anything else: absent, malformed, or naming another instance.
    Other,
}

/// The one rule for every read-back (acquire, renewal, release, takeover,
/// hand-over): whose is the LEASE `observed`, stored as the exact bytes
/// `stored`, to a process running as `instance_id` for which `ours(body)` is
/// true of exactly the bodies it wrote itself (see the module docs). The id
/// alone is never proof.
pub(crate) fn whose(
    observed: &Observed,
    stored: Option<&[u8]>,
    instance_id: &str,
    ours: impl Fn(&[u8]) -> bool,
) -> Whose {
    if stored.is_some_and(&ours) {
        return Whose::Ours;
    }
    match observed.record() {
        // A released record holds nothing, whoever it names.
        Some(r) if r.is_released() => Whose::Other,
        Some(r) if r.instance_id == instance_id && is_handover(r) => Whose::HandedOver,
        Some(r) if r.instance_id == instance_id => Whose::SameId,
        _ => Whose::Other,
    }
}

/// A LEASE read back: what it holds, and its exact body (`None` when absent).
pub(crate) struct ReadBack {
    /// The observation.
    pub observed: Observed,
    /// The body as stored (cut as [`crate::store::GetOutput::body`]).
    pub body: Option<Vec<u8>>,
}

impl ReadBack {
    /// The ETag of the object read, if any.
    pub(crate) fn etag(&self) -> Option<&str> {
        self.observed.etag()
    }

    /// True when the object's body is `body` exactly.
    pub(crate) fn holds(&self, body: &[u8]) -> bool {
        self.body.as_deref() == Some(body)
    }
}

/// Reads `key` whole (no conditional GET): the one read-back of a write.
///
/// Errors: the store's, but a missing key is an absent [`ReadBack`].
pub(crate) async fn read_back(store: &dyn ObjectRead, key: &str) -> Result<ReadBack, StoreError> {
    match store.get(key, None).await {
        Ok(out) => Ok(ReadBack {
            observed: Observed::from_get(&out),
            body: Some(out.body),
        }),
        Err(StoreError::NotFound(_)) => Ok(ReadBack {
            observed: Observed::Absent,
            body: None,
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    use crate::clock::rfc3339;

    fn record(id: &str) -> LeaseRecord {
        let t = Utc.with_ymd_and_hms(2026, 12, 3, 10, 0, 0).unwrap();
        LeaseRecord {
            instance_id: id.to_owned(),
            acquired_at: t,
            renewed_at: t,
            ttl_s: 30,
            generation: Some(7),
            released_at: None,
        }
    }

    /// A released record holds nothing: whoever it names, it is neither
    /// ours to adopt, nor a hand-over, nor a second holder under our id —
    /// unless its exact body is one we sent (our own release, answer lost).
    #[test]
    fn a_released_record_is_nobodys() {
        let t = Utc.with_ymd_and_hms(2026, 12, 3, 10, 0, 0).unwrap();
        let released = record("a").released(t);
        let body = released.to_body();
        let obs = Observed::Present {
            etag: Some("e".into()),
            last_modified: None,
            record: Ok(released),
        };
        assert_eq!(whose(&obs, Some(&body), "a", |_| false), Whose::Other);
        assert_eq!(
            whose(&obs, Some(&body), "a", |b| b == body.as_slice()),
            Whose::Ours
        );
    }

    #[test]
    fn only_a_body_we_sent_is_proof() {
        let mut s = Sent::default();
        let ours = record("a").to_body();
        let mut same_id = record("a");
        same_id.renewed_at += chrono::Duration::microseconds(1);
        assert!(!s.proves(&ours));
        s.add(&ours);
        assert!(s.proves(&ours));
        assert!(!s.proves(&same_id.to_body()), "the same id is not proof");
        for i in 0..KEEP {
            let mut r = record("a");
            r.ttl_s = 100 + i as u64;
            s.add(&r.to_body());
        }
        assert!(!s.proves(&ours), "at most {KEEP} bodies are kept");
        s.clear();
        assert!(s.bodies.is_empty());
    }

    fn present(r: &LeaseRecord) -> (Observed, Vec<u8>) {
        let body = r.to_body();
        let observed = Observed::Present {
            etag: Some("e".into()),
            last_modified: None,
            record: Ok(r.clone()),
        };
        (observed, body)
    }

    #[test]
    fn whose_record_it_is_is_proved_by_the_body_never_by_the_id() {
        let mut sent = Sent::default();
        // Our own create, answer lost: the exact body is proof.
        let mut ours = record("me");
        ours.renewed_at += chrono::Duration::microseconds(1);
        sent.add(&ours.to_body());
        let (o, b) = present(&ours);
        assert_eq!(whose(&o, Some(&b), "me", |x| sent.proves(x)), Whose::Ours);
        // Same id, same fields but one microsecond apart: another process.
        let mut twin = ours.clone();
        twin.renewed_at += chrono::Duration::microseconds(1);
        let (o, b) = present(&twin);
        assert_eq!(whose(&o, Some(&b), "me", |x| sent.proves(x)), Whose::SameId);
        // The same record written with other bytes (a field reordered) is not ours either.
        let reordered = format!(
            r#"{{"acquired_at":"{}","instance_id":"me","renewed_at":"{}","ttl_s":30,"generation":7}}"#,
            rfc3339(ours.acquired_at, chrono::SecondsFormat::Micros),
            rfc3339(ours.renewed_at, chrono::SecondsFormat::Micros),
        );
        let parsed = LeaseRecord::parse(reordered.as_bytes(), reordered.len() as u64).unwrap();
        assert_eq!(parsed, ours, "the same record…");
        let (o, _) = present(&parsed);
        assert_eq!(
            whose(&o, Some(reordered.as_bytes()), "me", |x| sent.proves(x)),
            Whose::SameId,
            "…but not the bytes we sent"
        );
        // A hand-over naming us (acquired_at = renewed_at), not written by us.
        let (o, b) = present(&record("me"));
        assert_eq!(
            whose(&o, Some(&b), "me", |x| sent.proves(x)),
            Whose::HandedOver
        );
        // Another id, hand-over or not; absent; malformed.
        let (o, b) = present(&record("you"));
        assert_eq!(whose(&o, Some(&b), "me", |x| sent.proves(x)), Whose::Other);
        assert_eq!(
            whose(&Observed::Absent, None, "me", |x| sent.proves(x)),
            Whose::Other
        );
        let bad = Observed::Present {
            etag: Some("e".into()),
            last_modified: None,
            record: Err(("not JSON".into(), "x".into())),
        };
        assert_eq!(
            whose(&bad, Some(b"x"), "me", |x| sent.proves(x)),
            Whose::Other
        );
        // The seed's four fields: the exact body is proof all the same.
        let mut seed = ours.clone();
        seed.generation = None;
        sent.add(&seed.to_body());
        let (o, b) = present(&seed);
        assert_eq!(whose(&o, Some(&b), "me", |x| sent.proves(x)), Whose::Ours);
    }

    /// A slow acquire's renewals keep every body they sent unanswered
    /// provable as ours (`renew_or_release`): `extend` takes each of them.
    #[test]
    fn extending_remembers_every_body_the_other_remembers() {
        let (mut into, mut other) = (Sent::default(), Sent::default());
        let kept = record("a").to_body();
        into.add(&kept);
        let bodies: Vec<Vec<u8>> = (0..3)
            .map(|i| {
                let mut r = record("a");
                r.ttl_s = 40 + i;
                r.to_body()
            })
            .collect();
        for b in &bodies {
            other.add(b);
        }
        into.extend(&other);
        for b in bodies.iter().chain([&kept]) {
            assert!(into.proves(b), "{}", String::from_utf8_lossy(b));
        }
        assert!(other.proves(&bodies[0]), "the other keeps its own");
    }

    /// 999 contenders of one process in a row take 999 different phases,
    /// every one of them 1 to 999 (phase 0 is never stamped).
    #[test]
    fn a_process_s_contenders_take_every_phase_once_in_a_cycle() {
        // Linux pids go up to 2^22 (`pid_max`).
        for pid in [1, 2, 998, 999, 4_194_304] {
            for start in [0u32, 1, 500, 1_000_000] {
                let phases: std::collections::BTreeSet<u16> = (0..999u32)
                    .map(|i| phase_of(pid, start.wrapping_add(i)))
                    .collect();
                assert_eq!(
                    phases.len(),
                    999,
                    "pid {pid}, from {start}: a phase taken twice"
                );
                assert_eq!(phases.first(), Some(&1), "pid {pid}, from {start}");
                assert_eq!(phases.last(), Some(&999), "pid {pid}, from {start}");
            }
        }
    }

    #[test]
    fn a_stamp_falls_on_the_contenders_phase_at_most_a_millisecond_back() {
        let phase = new_phase();
        assert!((1..=999).contains(&phase));
        assert_ne!(new_phase(), phase, "two contenders of one process");
        let base = chrono::DateTime::parse_from_rfc3339("2026-12-07T09:32:49.289000Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        for us in [0, 1, 289, 558, 998, 999, 1000, 1558, 123_456] {
            let now = base + chrono::Duration::microseconds(us);
            let s = stamp(now, phase);
            assert!(
                s <= now && now - s < chrono::Duration::milliseconds(1),
                "{now} → {s}"
            );
            assert_eq!(
                s.timestamp_subsec_micros() % 1000,
                u32::from(phase),
                "{now} → {s}"
            );
        }
    }

    #[test]
    fn a_handover_is_a_record_never_renewed_and_no_holder_writes_one() {
        let r = record("successor");
        assert!(is_handover(&r));
        let t = r.acquired_at;
        // Created now: renewed_at moves one microsecond past acquired_at.
        let (a, n) = holder_stamps(t, t);
        assert_eq!((a, n), (t, t + chrono::Duration::microseconds(1)));
        // A clock behind acquired_at (an adoption): its own reading, not equal.
        let behind = t - chrono::Duration::seconds(3);
        assert_eq!(holder_stamps(t, behind).1, behind);
        // A clock ahead: now.
        let later = t + chrono::Duration::seconds(10);
        assert_eq!(holder_stamps(t, later).1, later);
        let renewed = LeaseRecord {
            renewed_at: later,
            ..r
        };
        assert!(!is_handover(&renewed));
    }
}
