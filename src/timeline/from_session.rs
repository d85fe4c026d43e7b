//! A session's own holder history (the console's, [`crate::snapshot::history`])
//! as the timeline's types: tenures, gaps and overlaps, so that the console's
//! timeline pane draws what it saw and what was rebuilt from the versions
//! with one vocabulary.
//!
//! What a session keeps is coarser than the versions: only the holder
//! changes, at the times this reader saw them (its clock, UTC), not the
//! writes. So a tenure runs from the change that showed its holder to the
//! change that showed another (or to `end` while it holds); its `writes` is 0
//! and its `largest_gap_s` `None` (renewals are not kept); `acquired_at` is
//! when it was first seen. A change while the previous record was still
//! fresh with no takeover recorded (`changed_while_fresh`) is an overlap at
//! the instant it was seen: both could write then, for how long only the
//! versions tell.

use chrono::{DateTime, Utc};

use super::{Derived, Ending, Gap, Overlap, Takeover, Tenure};
use crate::audit::AuditEntry;
use crate::snapshot::history::{ChangeKind, HolderChange};
use crate::text::sanitize;

/// The tenures, gaps and overlaps of one prefix's session history `changes`
/// (oldest first), up to `end` (the reader's clock now). `audit`: the audit
/// entries the session read, for a takeover's `forced` and
/// `writes_safe_from` (a takeover not among them counts as not forced).
pub(crate) fn of_history<'a>(
    changes: impl IntoIterator<Item = &'a HolderChange>,
    audit: &[AuditEntry],
    end: DateTime<Utc>,
) -> Derived {
    let known = super::takeovers_of(audit);
    let mut d = Derived::default();
    let mut cur: Option<Tenure> = None;
    let mut gap_from: Option<DateTime<Utc>> = None;
    for c in changes {
        if let Some(mut t) = cur.take() {
            t.last_seen = c.at.max(t.first_seen);
            t.ending = ending(c, &known);
            if c.kind == ChangeKind::Unexpected {
                if let Some(h) = &c.holder {
                    d.overlaps.push(Overlap {
                        from: c.at,
                        to: c.at,
                        earlier: t.holder.clone(),
                        later: h.clone(),
                        why: format!(
                            "{h} replaced {}'s record while it was still fresh, with no takeover in the audit log: both could write when this console saw it (the versions tell for how long)",
                            t.holder
                        ),
                    });
                }
            }
            d.tenures.push(t);
        }
        match &c.holder {
            Some(h) => {
                if let Some(from) = gap_from.take() {
                    if from < c.at {
                        d.gaps.push(Gap { from, to: c.at });
                    }
                }
                cur = Some(Tenure {
                    holder: h.clone(),
                    generation: c.generation,
                    acquired_at: c.at,
                    first_seen: c.at,
                    last_seen: c.at,
                    writes: 0,
                    ttl_s: 0,
                    largest_gap_s: None,
                    punctual: true,
                    ending: Ending::Holding,
                });
            }
            // No holder: released or absent (a gap), or unreadable (neither).
            None if c.kind != ChangeKind::Unexpected => {
                gap_from.get_or_insert(c.at);
            }
            None => gap_from = None,
        }
    }
    if let Some(mut t) = cur {
        t.last_seen = end.max(t.first_seen);
        d.tenures.push(t);
    }
    if let Some(from) = gap_from {
        if from < end {
            d.gaps.push(Gap { from, to: end });
        }
    }
    d
}

/// How the tenure before change `c` ended.
fn ending(c: &HolderChange, known: &[Takeover]) -> Ending {
    let at = c.at;
    match (c.kind, &c.holder) {
        (ChangeKind::Release, _) | (ChangeKind::FirstSeen, None) | (ChangeKind::Acquired, None) => {
            Ending::Released { at }
        }
        (ChangeKind::Expiry, Some(by)) => Ending::Replaced {
            at,
            by: by.clone(),
            while_fresh: false,
            takeover: None,
        },
        (ChangeKind::Takeover | ChangeKind::Handover, Some(by)) => {
            let takeover = c.takeover.as_ref().map(|lt| {
                known
                    .iter()
                    .find(|k| k.id == sanitize(&lt.id))
                    .cloned()
                    .unwrap_or_else(|| Takeover {
                        id: sanitize(&lt.id),
                        time: lt.time,
                        operator: sanitize(&lt.operator),
                        reason: sanitize(&lt.reason),
                        forced: false,
                        then: sanitize(&lt.then),
                        holder: by.clone(),
                        generation: lt.generation,
                        writes_safe_from: None,
                    })
            });
            Ending::Replaced {
                at,
                by: by.clone(),
                while_fresh: takeover.as_ref().is_some_and(|t| t.forced),
                takeover,
            }
        }
        (ChangeKind::Unexpected, Some(by)) => Ending::Replaced {
            at,
            by: by.clone(),
            while_fresh: true,
            takeover: None,
        },
        (ChangeKind::Unexpected, None) => Ending::Overwritten { at },
        // A new holder seen without another kind: the previous one's record was replaced.
        (_, Some(by)) => Ending::Replaced {
            at,
            by: by.clone(),
            while_fresh: false,
            takeover: None,
        },
        (_, None) => Ending::Released { at },
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    use crate::snapshot::LastTakeover;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, 9, 0, 0).unwrap() + chrono::Duration::seconds(s)
    }

    fn change(s: i64, kind: ChangeKind, holder: Option<&str>, prev: Option<&str>) -> HolderChange {
        HolderChange {
            at: at(s),
            kind,
            holder: holder.map(str::to_owned),
            previous: prev.map(str::to_owned),
            audit: None,
            generation: None,
            previous_generation: None,
            holder_id: holder.map(Into::into),
            previous_id: prev.map(Into::into),
            takeover: None,
        }
    }

    /// A first sighting, an expiry, a takeover, a change while fresh, a
    /// release and a new holder: the tenures end as the changes say, the
    /// release leaves a gap, the change while fresh is an overlap.
    #[test]
    fn a_session_history_becomes_tenures_gaps_and_overlaps() {
        let mut tk = change(20, ChangeKind::Takeover, Some("c"), Some("b"));
        tk.takeover = Some(Box::new(LastTakeover {
            time: at(19),
            operator: "ops@host".into(),
            reason: "stuck".into(),
            then: "release".into(),
            outcome: Some("taken".into()),
            generation: None,
            id: "t1".into(),
        }));
        let changes = [
            change(0, ChangeKind::FirstSeen, Some("a"), None),
            change(10, ChangeKind::Expiry, Some("b"), Some("a")),
            tk,
            change(30, ChangeKind::Unexpected, Some("d"), Some("c")),
            change(40, ChangeKind::Release, None, Some("d")),
            change(50, ChangeKind::Acquired, Some("e"), None),
        ];
        let d = of_history(&changes, &[], at(60));
        let holders: Vec<&str> = d.tenures.iter().map(|t| t.holder.as_str()).collect();
        assert_eq!(holders, ["a", "b", "c", "d", "e"]);
        assert!(matches!(
            d.tenures[0].ending,
            Ending::Replaced {
                while_fresh: false,
                ..
            }
        ));
        match &d.tenures[1].ending {
            Ending::Replaced {
                takeover: Some(t), ..
            } => assert_eq!(t.operator, "ops@host"),
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            d.tenures[2].ending,
            Ending::Replaced {
                while_fresh: true,
                takeover: None,
                ..
            }
        ));
        assert_eq!(d.tenures[3].ending, Ending::Released { at: at(40) });
        assert_eq!(d.tenures[4].ending, Ending::Holding);
        assert_eq!(
            (d.tenures[4].first_seen, d.tenures[4].last_seen),
            (at(50), at(60))
        );
        assert_eq!(
            d.gaps,
            [Gap {
                from: at(40),
                to: at(50)
            }]
        );
        assert_eq!(d.overlaps.len(), 1);
        assert_eq!(
            (d.overlaps[0].earlier.as_str(), d.overlaps[0].later.as_str()),
            ("c", "d")
        );
    }
}
