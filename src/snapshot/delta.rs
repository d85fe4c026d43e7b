//! What changed since the last snapshot, row by row: what a console's
//! refresher sends when only some LEASE readings changed, so that the cost of
//! a refresh follows the rows read, not the rows shown (rebuilding 10,000
//! rows for the hundred a refresh reads was most of a large console's CPU).
//!
//! A [`Delta`] applied to the snapshot it follows ([`Snapshot::apply_delta`])
//! gives the snapshot a full gather would have given at the same instant:
//! the rows it names replaced (or added, or moved between
//! [`TargetReport::prefixes`] and [`TargetReport::errors`]), every other row
//! as it was, everything judged again at the delta's time.

use chrono::{DateTime, Utc};

use super::model::{PrefixError, PrefixReport, Snapshot, TargetReport};

/// A changed row: what the prefix's LEASE reading now shows.
#[derive(Debug, Clone)]
pub enum RowUpdate {
    /// A row of [`TargetReport::prefixes`] (present, absent, malformed, …).
    Report(Box<PrefixReport>),
    /// The LEASE could not be read: a row of [`TargetReport::errors`] (the
    /// message is safe to print).
    Error(String),
}

/// The changed rows of one target, and its service clock at the delta's time.
#[derive(Debug, Clone)]
pub struct TargetDelta {
    /// The target's index in [`Snapshot::targets`].
    pub index: usize,
    /// `(prefix, update)`, each prefix once.
    pub rows: Vec<(String, RowUpdate)>,
    /// [`TargetReport::server_offset_s`] now (seconds).
    pub(crate) server_offset_s: Option<f64>,
    /// [`TargetReport::server_offset_error_s`] now (± seconds).
    pub(crate) server_offset_error_s: Option<f64>,
    /// [`TargetReport::server_clock_note`] now.
    pub(crate) server_clock_note: Option<String>,
}

/// Rows whose reading changed since the last snapshot or delta a
/// [`super::Gatherer`] returned; no listing, target error or clock-offset
/// change (those come as a whole snapshot).
#[derive(Debug, Clone)]
pub struct Delta {
    /// When the gather ended (reader's clock, UTC): the instant the rows are
    /// judged at.
    pub generated_at: DateTime<Utc>,
    /// The targets with changed rows.
    pub targets: Vec<TargetDelta>,
}

impl Delta {
    /// Rows changed, over every target.
    pub fn len(&self) -> usize {
        self.targets.iter().map(|t| t.rows.len()).sum()
    }

    /// True when no row changed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Snapshot {
    /// Applies `delta` in place, then judges every row again at the later of
    /// `now` and the delta's time. A delta naming a target index this
    /// snapshot does not have is ignored (it follows another snapshot).
    pub(crate) fn apply_delta(&mut self, delta: &Delta, now: DateTime<Utc>) {
        for d in &delta.targets {
            let Some(t) = self.targets.get_mut(d.index) else {
                continue;
            };
            for (prefix, update) in &d.rows {
                t.replace_row(prefix, update);
            }
            t.server_offset_s = d.server_offset_s;
            t.server_offset_error_s = d.server_offset_error_s;
            t.server_clock_note.clone_from(&d.server_clock_note);
        }
        self.rejudge(now.max(delta.generated_at));
    }
}

impl TargetReport {
    /// Puts `update` in place of what the report shows for `prefix` (both
    /// lists stay sorted by prefix).
    fn replace_row(&mut self, prefix: &str, update: &RowUpdate) {
        let in_rows = self
            .prefixes
            .binary_search_by(|p| p.prefix.as_str().cmp(prefix));
        let in_errors = self
            .errors
            .binary_search_by(|e| e.prefix.as_str().cmp(prefix));
        match update {
            RowUpdate::Report(r) => {
                if let Ok(i) = in_errors {
                    self.errors.remove(i);
                }
                match in_rows {
                    Ok(i) => self.prefixes[i] = (**r).clone(),
                    Err(i) => self.prefixes.insert(i, (**r).clone()),
                }
            }
            RowUpdate::Error(e) => {
                if let Ok(i) = in_rows {
                    self.prefixes.remove(i);
                }
                let row = PrefixError {
                    prefix: prefix.to_owned(),
                    error: e.clone(),
                };
                match in_errors {
                    Ok(i) => self.errors[i] = row,
                    Err(i) => self.errors.insert(i, row),
                }
            }
        }
    }
}
