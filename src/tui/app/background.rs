//! The actions that arrive whatever the mode: time, data, results and the
//! terminal's size (called from [`App::update`] only).

use super::{Action, App};
use crate::snapshot::Snapshot;

impl App {
    /// Actions that arrive whatever the mode: time, data, results, size.
    pub(super) fn update_background(&mut self, action: Action) {
        match action {
            Action::Tick(now) => {
                let rows = self.leases.rows();
                let shown: Vec<(usize, usize)> = self
                    .rows_on_screen()
                    .filter_map(|i| rows.get(i))
                    .map(|r| (r.target, r.index))
                    .collect();
                self.session.tick(now, shown);
                self.clear_result(Some(now));
            }
            Action::Snapshot(s) => {
                self.session.set_loading(None);
                self.apply_snapshot(*s);
            }
            Action::Rows(d) => {
                self.session.set_loading(None);
                let keep = self.selected_key();
                if self.session.apply_rows(&d) {
                    self.rebuild_rows(false);
                    self.select_key(keep);
                }
            }
            Action::Unchanged(at) => self.session.unchanged(at),
            Action::Progress {
                snapshot,
                read,
                known,
                listed,
            } => {
                // The partial rows replace the table; the pod stays as it was.
                let mut s = *snapshot;
                if let Some(old) = self.session.snapshot() {
                    s.pod = old.pod.clone();
                    s.pod_error = old.pod_error.clone();
                }
                let pod_status = self.pod.status().clone();
                self.apply_snapshot(s);
                self.pod.restore_status(pod_status);
                self.session.set_loading(Some((read, known, listed)));
            }
            Action::Counters(c) => self.requests.push(self.session.now(), c),
            Action::Audit(entries) => self.session.set_audit(entries),
            Action::OldestReading(at) => self.session.set_oldest_reading(at),
            Action::Pod(pod) => {
                // A new pod scan while the leases stood: only the pod changes.
                let old = self.session.snapshot().map(|s| &s.pod);
                self.pod.take_rows(old, &pod);
                self.session.set_pod(*pod);
            }
            Action::PodScanFailed(e) => self.pod.scan_failed(e),
            Action::ProbeDone {
                target,
                result,
                message,
            } => self.probe_done(target, result, &message),
            Action::TakeoverWaiting { key, text } => self.takeover_waiting(&key, text),
            Action::TakeoverDone { key, result } => self.takeover_done(key, result),
            Action::HeldReleased(lines) => self.held_released(&lines),
            Action::TimelineRead {
                target,
                prefix,
                timeline,
            } => self.timeline_read(target, &prefix, timeline),
            Action::Resize(w, h) => self.size = (w, h),
            Action::DetailExtent { lines, shown } => self.leases.set_detail_extent(lines, shown),
            _ => {}
        }
    }

    /// A new snapshot: the pod's rows, the session's data, then the table's
    /// rows, the selected prefix kept selected.
    pub(super) fn apply_snapshot(&mut self, s: Snapshot) {
        let keep = self.selected_key();
        let old = self.session.snapshot().map(|o| &o.pod);
        self.pod.take_rows(old, &s.pod);
        self.session.apply_snapshot(s);
        self.rebuild_rows(false);
        self.select_key(keep);
    }
}
