//! The incident timeline: who held a prefix's lease when, rebuilt after the
//! fact from what the store and the audit logs kept (`leasectl timeline`).
//!
//! Sources, merged on one time axis per lease key ([`read`]):
//! - the versions of `{prefix}/LEASE` on a versioned bucket, in the
//!   service's order of them (each version's record and `Last-Modified`,
//!   the service's clock; a delete marker is a release). Every body is read;
//!   with `--bisect`, only where a tenure may change ([`bisect`]), and the
//!   versions inferred are counted: the history is then not known;
//! - NDJSON recordings of `--watch` (`lease` lines: what a watcher saw, by
//!   its clock), for stores without versions;
//! - leasectl's audit logs: takeovers (operator, reason, forced, the records
//!   observed and written).
//!
//! What it derives ([`derive`]), per key: **tenures** (holder, generation,
//! first and last write seen, how it ended, the largest gap between
//! renewals against TTL/3), **gaps** (nobody held it), **overlaps** (an
//! interval in which two holders could both write by the fence rules: a new
//! holder's first write before the previous holder's fence — two thirds of
//! a TTL after its last renewal — had closed, or the previous holder writing
//! again after the new one started), **generations that went back**, and
//! each holder's clock against the service's (`renewed_at − Last-Modified`).
//!
//! [`session`] gives a session's own holder history (the console's) the
//! same types, for the console's timeline pane.
//!
//! Everything here but [`read`] is pure: the bisection asks for bodies
//! through a closure, so its cost is measured by counting calls.

pub(crate) mod build;
pub(crate) mod from_session;
pub mod picture;
pub(crate) mod read;
pub mod render;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::audit::AuditEntry;
use crate::bucket::{fmt_generation, LeaseRecord, MAX_SANE_TTL_S};
use crate::clock::{rfc3339, ser_opt_rfc3339, ser_rfc3339};
use crate::text::{format_secs, sanitize};

/// What one observation of the LEASE key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A holder's record.
    Held(LeaseRecord),
    /// A released record (it keeps the generation).
    Released(LeaseRecord),
    /// Nothing: a delete marker, or a recording's `absent` row.
    Deleted,
    /// A body that is not a record (the reason, escaped).
    Malformed(String),
    /// A version whose body was not read: between two read versions of the
    /// same tenure, so it is one of that tenure's renewals.
    Renewal,
}

impl Seen {
    /// The tenure a record belongs to: (holder, generation, released).
    fn tenure_key(&self) -> Option<(&str, Option<u64>, bool)> {
        match self {
            Seen::Held(r) => Some((&r.instance_id, r.generation, false)),
            Seen::Released(r) => Some((&r.instance_id, r.generation, true)),
            _ => None,
        }
    }

    /// Builds an observation from a parsed body.
    pub(crate) fn of_record(r: LeaseRecord) -> Seen {
        if r.is_released() {
            Seen::Released(r)
        } else {
            Seen::Held(r)
        }
    }
}

/// True when `next` is `last`'s holder writing a fresh generation within its
/// own tenure: the same acquisition (`acquired_at`) and a greater generation,
/// as an acquire that went the slow way, or a takeover after waiting out a
/// holder it may have replaced, writes before handing the lease out
/// (`bucket::lease::confirm`). One tenure, not a holder replacing itself.
fn refreshed(last: &LeaseRecord, next: &LeaseRecord) -> bool {
    next.acquired_at == last.acquired_at
        && matches!((last.generation, next.generation), (Some(a), Some(b)) if b > a)
}

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// A version of the LEASE object (time: its `Last-Modified`, the service's clock).
    Version {
        /// Its version id.
        version_id: String,
        /// Its ETag.
        etag: Option<String>,
        /// Whether its body was read (`false`: inferred by bisection).
        read: bool,
    },
    /// A delete marker (time: its `Last-Modified`).
    DeleteMarker {
        /// Its version id.
        version_id: String,
    },
    /// A line of a `--watch` recording (time: the watcher's clock).
    Recording {
        /// The file.
        file: String,
        /// Its line number (1-based).
        line: usize,
    },
}

/// One observation of a LEASE key at a time.
#[derive(Debug, Clone)]
pub struct Observation {
    /// When (UTC): the service's clock for versions, the watcher's for recordings.
    pub at: DateTime<Utc>,
    /// What was there.
    pub seen: Seen,
    /// Where it came from.
    pub source: Source,
}

/// How a tenure ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ending {
    /// Released by its holder (a released record, or the object deleted).
    Released {
        /// When (UTC).
        #[serde(serialize_with = "ser_rfc3339")]
        at: DateTime<Utc>,
    },
    /// Its TTL ran out after its last renewal and nobody wrote before (the
    /// next holder, if any, came later).
    Expired {
        /// When its TTL ran out (UTC, from its last write's time).
        #[serde(serialize_with = "ser_rfc3339")]
        at: DateTime<Utc>,
    },
    /// Replaced by another holder's record.
    Replaced {
        /// When the new record was written (UTC).
        #[serde(serialize_with = "ser_rfc3339")]
        at: DateTime<Utc>,
        /// The new holder (escaped).
        by: String,
        /// Whether the lease was still fresh (by the last write's time and the TTL).
        while_fresh: bool,
        /// The audit log's takeover that wrote the new record, if one did.
        takeover: Option<Takeover>,
    },
    /// Overwritten by something that is not a record.
    Overwritten {
        /// When (UTC).
        #[serde(serialize_with = "ser_rfc3339")]
        at: DateTime<Utc>,
    },
    /// Still held at the end of what was read.
    Holding,
}

/// A takeover the audit log records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Takeover {
    /// The entry's id.
    pub id: String,
    /// When the outcome was written (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub time: DateTime<Utc>,
    /// `user@host`.
    pub operator: String,
    /// The operator's reason (escaped).
    pub reason: String,
    /// Whether `--force` overrode a fresh lease.
    pub forced: bool,
    /// `release`, `hold` or `handover:ID`.
    pub then: String,
    /// The holder of the record it wrote (escaped).
    pub holder: String,
    /// The generation of the record it wrote.
    pub generation: Option<u64>,
    /// From when the new holder may write (UTC), after a forced takeover.
    #[serde(serialize_with = "ser_opt_rfc3339")]
    pub writes_safe_from: Option<DateTime<Utc>>,
}

/// One holder's time with the lease.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tenure {
    /// The holder's instance id (escaped).
    pub holder: String,
    /// Its generation (`None`: the record has none).
    pub generation: Option<u64>,
    /// `acquired_at` of its record, by the holder's clock (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub acquired_at: DateTime<Utc>,
    /// Its first write seen (UTC, the source's clock).
    #[serde(serialize_with = "ser_rfc3339")]
    pub first_seen: DateTime<Utc>,
    /// Its last write seen (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub(crate) last_seen: DateTime<Utc>,
    /// Writes seen (the first one and its renewals).
    pub writes: usize,
    /// Its TTL, seconds.
    pub ttl_s: u64,
    /// The largest gap between two of its writes, seconds (`None`: one write).
    pub(crate) largest_gap_s: Option<f64>,
    /// Whether every gap was at most TTL/3 plus one second (the renewal period, with the
    /// services' one-second `Last-Modified`).
    pub(crate) punctual: bool,
    /// How it ended.
    pub ending: Ending,
}

/// A time nobody held the lease.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Gap {
    /// From (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub from: DateTime<Utc>,
    /// To (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub to: DateTime<Utc>,
}

/// An interval in which two holders could both write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overlap {
    /// From (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub from: DateTime<Utc>,
    /// To (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub to: DateTime<Utc>,
    /// The earlier holder (escaped).
    pub(crate) earlier: String,
    /// The later holder (escaped).
    pub later: String,
    /// Why, with the evidence (one sentence, escaped).
    pub why: String,
}

/// A new tenure whose generation is smaller than the one before it, or equal
/// to it under another holder (a generation must grow with every new holder;
/// a takeover's hand-over keeps its own, and a holder writing again under
/// its own is an interleaving, an [`Overlap`], not this).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GenerationBack {
    /// When the smaller one was written (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub at: DateTime<Utc>,
    /// The generation before.
    pub before: u64,
    /// The one written.
    pub after: u64,
    /// Who wrote it (escaped).
    pub holder: String,
    /// Who had written the generation before (escaped).
    pub(crate) previous_holder: String,
}

/// A holder's clock against the service's: `renewed_at − Last-Modified`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ClockSkew {
    /// The holder (escaped).
    pub holder: String,
    /// The smallest offset seen, seconds (about ±1 s: `Last-Modified` has whole seconds).
    pub(crate) min_s: f64,
    /// The largest, seconds.
    pub(crate) max_s: f64,
    /// Versions compared.
    pub samples: usize,
}

/// Everything derived for one key.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Derived {
    /// The tenures, oldest first.
    pub tenures: Vec<Tenure>,
    /// The gaps, oldest first.
    pub(crate) gaps: Vec<Gap>,
    /// The overlaps, oldest first.
    pub overlaps: Vec<Overlap>,
    /// Generations that went back.
    pub(crate) generations_back: Vec<GenerationBack>,
    /// Each holder's clock against the service's (versions only).
    pub(crate) clocks: Vec<ClockSkew>,
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_microseconds().map_or(f64::MAX, |us| us as f64 / 1e6)
}

fn ttl_of(r: &LeaseRecord) -> chrono::Duration {
    chrono::Duration::seconds(r.ttl_s.min(MAX_SANE_TTL_S) as i64)
}

/// The takeovers of `entries` that wrote a record, oldest first.
pub fn takeovers_of(entries: &[AuditEntry]) -> Vec<Takeover> {
    takeovers(entries).into_iter().map(|(_, _, t)| t).collect()
}

/// The takeovers of `entries` (outcome entries that wrote a record), by the
/// record they wrote: (holder, generation) → the takeover.
fn takeovers(entries: &[AuditEntry]) -> Vec<(String, Option<u64>, Takeover)> {
    entries
        .iter()
        .filter(|e| e.phase == "outcome")
        .filter_map(|e| {
            let w = e.written.as_ref()?;
            Some((
                w.record.instance_id.clone(),
                w.record.generation,
                Takeover {
                    id: e.id.clone(),
                    time: e.time,
                    operator: sanitize(&e.operator),
                    reason: sanitize(&e.reason),
                    forced: e.forced,
                    then: sanitize(&e.then),
                    holder: sanitize(&w.record.instance_id),
                    generation: w.record.generation,
                    writes_safe_from: e.writes_safe_from,
                },
            ))
        })
        .collect()
}

/// Derives tenures, gaps, overlaps, generations that went back and clocks
/// from `obs` (one key, oldest first) and the audit entries about that key;
/// `end` is the end of what was read (now, or `--to`).
pub fn derive(obs: &[Observation], audit: &[AuditEntry], end: DateTime<Utc>) -> Derived {
    let mut walk = Walk {
        takeovers: takeovers(audit),
        ..Walk::default()
    };
    for o in obs {
        walk.note_clock(o);
        walk.step(o);
    }
    walk.finish(end)
}

/// The state of [`derive`]'s walk over the observations, oldest first.
#[derive(Default)]
struct Walk {
    /// The takeovers of the audit entries, by the record they wrote.
    takeovers: Vec<(String, Option<u64>, Takeover)>,
    d: Derived,
    /// The tenure in progress and its holder's latest record.
    cur: Option<(Tenure, LeaseRecord)>,
    /// (holder, generation) of every tenure that ended.
    ended: Vec<(String, Option<u64>)>,
    /// Since when nobody holds the prefix.
    gap_from: Option<DateTime<Utc>>,
    /// The latest generation written, and by whom.
    last_generation: Option<(u64, String)>,
    clocks: std::collections::BTreeMap<String, ClockSkew>,
}

impl Walk {
    /// A version read whole gives its holder's clock against the service's:
    /// `renewed_at` (the holder's) minus `Last-Modified` (the service's).
    fn note_clock(&mut self, o: &Observation) {
        if let (Source::Version { read: true, .. }, Seen::Held(r)) = (&o.source, &o.seen) {
            let skew = secs(r.renewed_at - o.at);
            let e = self
                .clocks
                .entry(r.instance_id.clone())
                .or_insert_with(|| ClockSkew {
                    holder: sanitize(&r.instance_id),
                    min_s: skew,
                    max_s: skew,
                    samples: 0,
                });
            e.min_s = e.min_s.min(skew);
            e.max_s = e.max_s.max(skew);
            e.samples += 1;
        }
    }

    /// One observation: a write of the current tenure, or the end of it and
    /// what follows (a new tenure, a release, a deletion).
    fn step(&mut self, o: &Observation) {
        // A renewal inferred by bisection belongs to the current tenure.
        if o.seen == Seen::Renewal {
            if let Some((t, _)) = self.cur.as_mut() {
                note_write(t, o.at);
            }
            return;
        }
        let same = match (&self.cur, &o.seen) {
            (Some((t, last)), Seen::Held(r)) => {
                t.holder_raw_eq(&r.instance_id)
                    && (t.generation == r.generation || refreshed(last, r))
            }
            _ => false,
        };
        if same {
            if let Some((t, r)) = self.cur.as_mut() {
                note_write(t, o.at);
                if let Seen::Held(nr) = &o.seen {
                    t.generation = nr.generation;
                    *r = nr.clone();
                }
            }
            return;
        }
        // Something else is there now: the current tenure ends.
        if let Some((t, last)) = self.cur.take() {
            self.end_tenure(t, &last, o);
        }
        match &o.seen {
            Seen::Held(r) => self.begin_tenure(r, o),
            Seen::Released(_) | Seen::Deleted => {
                if self.gap_from.is_none() {
                    self.gap_from = Some(o.at);
                }
            }
            Seen::Malformed(_) | Seen::Renewal => {}
        }
    }

    /// The current tenure `t` (its holder's latest record `last`) ends with
    /// `o`: how it ended, and an overlap when `o`'s holder wrote before `t`'s
    /// fence closed.
    fn end_tenure(&mut self, mut t: Tenure, last: &LeaseRecord, o: &Observation) {
        let fence_end = t.last_seen + ttl_of(last) * 2 / 3;
        t.ending = self.ending(&t, last, o);
        // A takeover's own record, written while it waits for the replaced
        // holder's fence and then handed over under the same generation: no
        // command ran under it, so nothing of it can overlap its successor.
        let interim = last.generation.is_some()
            && self
                .takeovers
                .iter()
                .any(|(id, g, _)| *g == last.generation && *id != last.instance_id);
        // The new holder may write from its write (or, after a forced
        // takeover, from when leasectl let it); the old one until its fence.
        if let (Seen::Held(r), false) = (&o.seen, interim) {
            let starts = match &t.ending {
                Ending::Replaced {
                    takeover: Some(tk), ..
                } => tk.writes_safe_from.map_or(o.at, |s| s.max(o.at)),
                _ => o.at,
            };
            if starts < fence_end {
                self.d.overlaps.push(Overlap {
                    from: starts,
                    to: fence_end,
                    earlier: t.holder.clone(),
                    later: sanitize(&r.instance_id),
                    why: format!(
                        "{} wrote its record {} before {}'s fence closed (two thirds of its {} s TTL after its last write at {})",
                        sanitize(&r.instance_id),
                        format_secs(secs(fence_end - starts)),
                        t.holder,
                        last.ttl_s,
                        rfc3339(t.last_seen, chrono::SecondsFormat::Millis),
                    ),
                });
            }
        }
        if let Ending::Released { at } | Ending::Expired { at } = &t.ending {
            self.gap_from = Some(*at);
        }
        self.ended.push((last.instance_id.clone(), last.generation));
        self.d.tenures.push(t);
    }

    /// How tenure `t` (latest record `last`) ended, seen through `o`.
    fn ending(&self, t: &Tenure, last: &LeaseRecord, o: &Observation) -> Ending {
        let expiry = t.last_seen + ttl_of(last);
        match &o.seen {
            // The version's time (one clock for every event), not the
            // holder's `released_at`.
            Seen::Released(r) if r.instance_id == last.instance_id => Ending::Released { at: o.at },
            Seen::Deleted if o.at <= expiry => Ending::Released { at: o.at },
            Seen::Deleted => Ending::Expired { at: expiry },
            Seen::Malformed(_) => Ending::Overwritten { at: o.at },
            Seen::Held(r) | Seen::Released(r) => {
                // The takeover that wrote `r`: by its generation (a forced
                // takeover's own record while it waits for the old fence and
                // its hand-over's record share it), else by id.
                let takeover = self
                    .takeovers
                    .iter()
                    .find(|(id, g, _)| *g == r.generation && (g.is_some() || *id == r.instance_id))
                    .map(|(_, _, t)| t.clone());
                let while_fresh = o.at < expiry;
                if !while_fresh && takeover.is_none() {
                    Ending::Expired { at: expiry }
                } else {
                    Ending::Replaced {
                        at: o.at,
                        by: sanitize(&r.instance_id),
                        while_fresh,
                        takeover,
                    }
                }
            }
            Seen::Renewal => Ending::Holding,
        }
    }

    /// `r` (seen in `o`) begins a tenure: the gap before it closes; a holder
    /// whose tenure had ended writing again is an interleaving; a generation
    /// not above the last one went back.
    fn begin_tenure(&mut self, r: &LeaseRecord, o: &Observation) {
        if let Some(from) = self.gap_from.take() {
            if from < o.at {
                self.d.gaps.push(Gap { from, to: o.at });
            }
        }
        // A tenure that had ended writes again after another holder's:
        // two holders interleaved.
        if let Some(other) = self.interleaved_with(r) {
            self.d.overlaps.push(Overlap {
                from: self.d.tenures.last().map_or(o.at, |t| t.first_seen),
                to: o.at,
                earlier: sanitize(&r.instance_id),
                later: other.clone(),
                why: format!(
                    "{} wrote again under generation {} after {} had written: two holders renewing in turn (a lost update, as best-effort exclusion allows)",
                    sanitize(&r.instance_id),
                    fmt_generation(r.generation),
                    other
                ),
            });
        }
        if let Some(back) = self.generation_back(r, o.at) {
            self.d.generations_back.push(back);
        }
        if let Some(g) = r.generation {
            self.last_generation = Some((g, r.instance_id.clone()));
        }
        self.cur = Some((
            Tenure {
                holder: sanitize(&r.instance_id),
                generation: r.generation,
                acquired_at: r.acquired_at,
                first_seen: o.at,
                last_seen: o.at,
                writes: 1,
                ttl_s: r.ttl_s,
                largest_gap_s: None,
                punctual: true,
                ending: Ending::Holding,
            },
            r.clone(),
        ));
    }

    /// The holder (escaped) of the latest tenure written after `r`'s own
    /// tenure (its holder and generation) had ended, when it is another's:
    /// `r` writing again then is two holders renewing in turn. `None` when
    /// `r`'s tenure never ended, or nobody else wrote since (a holder writing
    /// again after its own release is no second writer).
    fn interleaved_with(&self, r: &LeaseRecord) -> Option<String> {
        if !self
            .ended
            .iter()
            .any(|(id, g)| *id == r.instance_id && *g == r.generation)
        {
            return None;
        }
        let mine = |t: &Tenure| t.holder_raw_eq(&r.instance_id) && t.generation == r.generation;
        let since = self.d.tenures.iter().rposition(mine).map_or(0, |i| i + 1);
        self.d.tenures[since..]
            .iter()
            .rev()
            .find(|t| !mine(t))
            .map(|t| t.holder.clone())
    }

    /// `r`'s generation, written at `at` as a new tenure, against the latest
    /// one written: smaller went back; equal under another holder was not
    /// advanced — unless a takeover wrote `r` (its hand-over to a successor
    /// keeps the generation of the takeover's own record). Equal under the
    /// same holder is that holder writing again, which [`Walk::interleaved_with`]
    /// judges.
    fn generation_back(&self, r: &LeaseRecord, at: DateTime<Utc>) -> Option<GenerationBack> {
        let (g, (before, by)) = (r.generation?, self.last_generation.as_ref()?);
        let handed_over = self
            .takeovers
            .iter()
            .any(|(id, tg, _)| *tg == Some(g) && *id == r.instance_id);
        let back = g < *before || (g == *before && *by != r.instance_id && !handed_over);
        back.then(|| GenerationBack {
            at,
            before: *before,
            after: g,
            holder: sanitize(&r.instance_id),
            previous_holder: sanitize(by),
        })
    }

    /// The walk's end at `end`: a tenure still in progress has expired if
    /// its TTL ran out before `end`; a gap lasts until `end`.
    fn finish(mut self, end: DateTime<Utc>) -> Derived {
        if let Some((mut t, last)) = self.cur.take() {
            let expiry = t.last_seen + ttl_of(&last);
            if expiry < end {
                t.ending = Ending::Expired { at: expiry };
                self.gap_from = Some(expiry);
            }
            self.d.tenures.push(t);
        }
        if let Some(from) = self.gap_from {
            if from < end {
                self.d.gaps.push(Gap { from, to: end });
            }
        }
        self.d.clocks = self.clocks.into_values().collect();
        self.d
    }
}

impl Tenure {
    /// True when this tenure's holder is `id` (compared escaped, as stored).
    fn holder_raw_eq(&self, id: &str) -> bool {
        self.holder == sanitize(id)
    }
}

/// Counts one more write of tenure `t` at `at`: the gap since its last one.
fn note_write(t: &mut Tenure, at: DateTime<Utc>) {
    let gap = secs(at - t.last_seen);
    t.largest_gap_s = Some(t.largest_gap_s.map_or(gap, |g: f64| g.max(gap)));
    if gap > t.ttl_s as f64 / 3.0 + 1.0 {
        t.punctual = false;
    }
    t.last_seen = t.last_seen.max(at);
    t.writes += 1;
}

/// The longest run of versions between two reads of one tenure that
/// [`bisect`] reads whole instead of inferring.
pub(crate) const SHORT_RUN: usize = 4;

/// A version's tenure as far as bisection needs it: what a body said, or a
/// delete marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A record: (holder, generation, released).
    Record(String, Option<u64>, bool),
    /// A delete marker, or a body that is not a record (never assumed equal).
    Other(usize),
}

/// Which of `n` versions to read so that every change of tenure is found:
/// `known(i)` gives a version's mark without reading (a delete marker), `read(i)`
/// reads one — or says it is not read yet (`None`: the caller reads the
/// versions asked for and calls again; a range whose ends are not both known
/// waits for the next call). Between two read versions with the same record mark every
/// version is that tenure's renewal (a tenure's versions are contiguous and
/// its generation unique while generations only grow), so it is not read;
/// otherwise the middle one is, and both halves again. Returns each version's
/// mark, `None` for one not read (a renewal of its neighbours' tenure).
///
/// A run of at most [`SHORT_RUN`] versions between two reads of the same
/// tenure is read whole rather than inferred: an interleaving of two
/// writers (each overwriting the other) is short, and would otherwise hide
/// between two versions of one of them. A longer interleaving whose every
/// alternation falls between two reads of one holder, a whole tenure of
/// another holder, one intruder's write: each is inferred away (issue 44),
/// so `leasectl timeline` reads every version unless `--bisect` asks for
/// this, and then says how many it inferred and exits 1.
///
/// Cost: about 2·log2(n) reads per change of tenure plus the short runs
/// beside it (8,640 versions, five tenures: under 200), plus the two ends.
/// With `all`, every version is read.
pub(crate) fn bisect(
    n: usize,
    all: bool,
    mut known: impl FnMut(usize) -> Option<Mark>,
    mut read: impl FnMut(usize) -> Option<Mark>,
) -> Vec<Option<Mark>> {
    let mut marks: Vec<Option<Mark>> = (0..n).map(&mut known).collect();
    let mut get = |i: usize, marks: &mut Vec<Option<Mark>>| {
        if marks[i].is_none() {
            marks[i] = read(i);
        }
        marks[i].is_some()
    };
    if n == 0 {
        return marks;
    }
    if all {
        for i in 0..n {
            get(i, &mut marks);
        }
        return marks;
    }
    // Known marks (delete markers) split the list into runs; each run's ends are read.
    let mut bounds: Vec<usize> = vec![0, n - 1];
    bounds.extend((0..n).filter(|&i| marks[i].is_some()));
    bounds.sort_unstable();
    bounds.dedup();
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for w in bounds.windows(2) {
        stack.push((w[0], w[1]));
    }
    for &b in &bounds {
        get(b, &mut marks);
    }
    let mut inferred = vec![false; n];
    while let Some((lo, hi)) = stack.pop() {
        if hi <= lo + 1 || marks[lo].is_none() || marks[hi].is_none() {
            continue;
        }
        let same =
            matches!((&marks[lo], &marks[hi]), (Some(a @ Mark::Record(..)), Some(b)) if a == b);
        if same && hi - lo - 1 <= SHORT_RUN {
            // A short run is read whole: two writers renewing in turn (the
            // best-effort lost update) interleave for a few versions, and
            // the same holder on both sides would hide them.
            for i in lo + 1..hi {
                get(i, &mut marks);
            }
            continue;
        }
        if same {
            for flag in inferred.iter_mut().take(hi).skip(lo + 1) {
                *flag = true;
            }
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        if get(mid, &mut marks) {
            stack.push((lo, mid));
            stack.push((mid, hi));
        }
    }
    for (i, f) in inferred.into_iter().enumerate() {
        if f {
            marks[i] = None;
        }
    }
    marks
}

#[cfg(test)]
mod tests;
