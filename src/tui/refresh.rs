//! The console's refresher: one background task that gathers a snapshot (the
//! bucket leases, the pod scan beside it, request counters, the audit log's
//! new entries) after another and sends each to the event loop as a
//! [`Gathered`], progress reports of a long first gather included.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::action::Action;
use crate::audit::{AuditEntry, AuditTail};
use crate::clock::SharedClock;
use crate::runtime::{spawn, RuntimeThread};
use crate::snapshot::{Delta, Gatherer, Progress, Recipe, Refresh, Snapshot};
use crate::store::Counters;
use crate::store::RequestCounts;
use crate::writer::scan::PodSnapshot;

/// What one background refresh produced.
#[derive(Debug, Clone)]
pub(crate) struct Gathered {
    /// The snapshot; its `pod` section is empty when the scan failed or is off.
    /// `None` when no more than rows changed since the last one (the
    /// console keeps it and judges it again as the clock moves).
    pub snapshot: Option<Snapshot>,
    /// The rows that changed, when that is all that did (`snapshot` is then
    /// `None`).
    pub rows: Option<Delta>,
    /// When the gather ended (reader's clock).
    pub at: chrono::DateTime<chrono::Utc>,
    /// Why the pod scan failed, if it did.
    pub(crate) pod_error: Option<String>,
    /// Request totals of the stores so far.
    pub counters: RequestCounts,
    /// Recent audit entries, if an audit log is known.
    pub audit: Option<Vec<AuditEntry>>,
    /// Set on a report of a gather still running: (LEASEs read, prefixes
    /// known, listing complete).
    pub(crate) progress: Option<(usize, usize, bool)>,
    /// When the oldest reading of any row was taken (reader's clock).
    pub(crate) oldest_reading: Option<chrono::DateTime<chrono::Utc>>,
    /// A pod scan that differs from the last one, when `snapshot` is `None`
    /// (with a snapshot, the scan is its `pod` section).
    pub pod: Option<PodSnapshot>,
}

impl Gathered {
    /// The actions that apply this refresh to the console, in order.
    pub(crate) fn into_actions(self) -> Vec<Action> {
        if let Some((read, known, listed)) = self.progress {
            let mut v = vec![Action::Counters(self.counters)];
            v.extend(self.snapshot.map(|s| Action::Progress {
                snapshot: Box::new(s),
                read,
                known,
                listed,
            }));
            return v;
        }
        // The audit entries first: the snapshot's holder changes are
        // classified against them (a takeover names its audit entry).
        let mut v: Vec<Action> = self.audit.map(Action::Audit).into_iter().collect();
        v.push(Action::Counters(self.counters));
        v.push(Action::OldestReading(self.oldest_reading));
        v.push(match (self.snapshot, self.rows) {
            (Some(s), _) => Action::Snapshot(Box::new(s)),
            (None, Some(d)) => Action::Rows(Box::new(d)),
            (None, None) => Action::Unchanged(self.at),
        });
        v.extend(self.pod.map(|p| Action::Pod(Box::new(p))));
        v.extend(self.pod_error.map(Action::PodScanFailed));
        v
    }
}

/// How often the pod is scanned while the pod view is not on screen (its
/// verdicts still reach the leases view's operator within this).
pub(crate) const POD_SCAN_HIDDEN_EVERY: Duration = Duration::from_secs(30);

/// The pod scan's cadence and last result, kept by the refresher; the scan
/// itself is the snapshot recipe's.
struct PodScans {
    recipe: Recipe,
    last: Option<(tokio::time::Instant, Result<PodSnapshot, String>)>,
}

/// The audit log's entries after reading only what was appended since the
/// last refresh (each bad line is warned about once), on a blocking thread;
/// the tail comes back for the next refresh. `None` without an audit log.
async fn poll_audit(tail: Option<AuditTail>) -> Option<(AuditTail, Option<Vec<AuditEntry>>)> {
    let mut tail = tail?;
    let path = tail.path().to_owned();
    match tokio::task::spawn_blocking(move || {
        let ok = tail.poll().map_err(|e| tracing::warn!("{e}")).is_ok();
        let v = tail.entries();
        (tail, ok.then_some(v))
    })
    .await
    {
        Ok((tail, v)) => Some((tail, v)),
        Err(_) => Some((AuditTail::new(path, 200), None)),
    }
}

impl PodScans {
    /// Whether this refresh scans the pod. Scanning /proc is the console's
    /// largest idle cost: every refresh while the pod view is shown
    /// (`visible`), else every [`POD_SCAN_HIDDEN_EVERY`] (reusing the last
    /// result in between).
    fn due(&self, visible: bool) -> bool {
        visible
            || self
                .last
                .as_ref()
                .is_none_or(|(at, _)| at.elapsed() >= POD_SCAN_HIDDEN_EVERY)
    }

    /// The pod scan of this refresh: a new one when `due`, else the last
    /// result; `None` when no scan is asked for.
    fn scan(
        &self,
        due: bool,
    ) -> impl std::future::Future<Output = Option<Result<PodSnapshot, String>>> + '_ {
        let cached = if due {
            None
        } else {
            self.last.as_ref().map(|(_, r)| r.clone())
        };
        async move {
            match cached {
                Some(r) if self.recipe.scans_pod() => Some(r),
                _ => self
                    .recipe
                    .scan_pod()
                    .await
                    .map(|r| r.map_err(|e| e.to_string())),
            }
        }
    }

    /// Takes this refresh's scan (`scanned`, new when `due`): into the new
    /// `snapshot` if there is one; else, a new scan that found something
    /// different from the last one comes back to go alone (rebuilding
    /// 10,000 rows for it was most of the idle cost of a large console). A
    /// failed scan comes back as its error.
    fn take(
        &mut self,
        due: bool,
        scanned: Option<Result<PodSnapshot, String>>,
        snapshot: &mut Option<Snapshot>,
    ) -> (Option<String>, Option<PodSnapshot>) {
        let before = self.last.as_ref().map(|(_, r)| r.clone());
        if due {
            if let Some(r) = &scanned {
                self.last = Some((tokio::time::Instant::now(), r.clone()));
            }
        }
        match scanned {
            Some(Ok(p)) => {
                if let Some(s) = snapshot {
                    s.pod = p;
                } else if due && before.as_ref().is_none_or(|b| b.as_ref() != Ok(&p)) {
                    return (None, Some(p));
                }
                (None, None)
            }
            Some(Err(e)) => (Some(e), None),
            None => (None, None),
        }
    }
}

/// Rows already read go to the console while a long gather goes on (the
/// first one, at thousands of prefixes). Each report holds every row read
/// so far, so one is queued only when the console has taken the previous
/// one: queued reports were whole copies of the table (four of them at
/// 50,000 prefixes were most of the console's peak memory).
fn send_progress(progress: &mpsc::Sender<Gathered>, counters: &Counters, p: Progress) {
    if progress.capacity() < progress.max_capacity() {
        return;
    }
    let _ = progress.try_send(Gathered {
        at: p.snapshot.generated_at,
        snapshot: Some(p.snapshot),
        rows: None,
        pod_error: None,
        counters: counters.counts(),
        audit: None,
        progress: Some((p.read, p.known, p.listed)),
        oldest_reading: None,
        pod: None,
    });
}

/// One refresh: bucket gather and pod scan side by side, counters, audit
/// tail. A new snapshot only when more than rows changed, the changed rows
/// alone when only they did, and a pod scan that found something new
/// without a new snapshot alone (rebuilding 10,000 rows for the hundred rows
/// a refresh reads was most of the idle cost of a large console).
async fn gather_once(
    gatherer: &mut Gatherer,
    clock: &SharedClock,
    pod: &mut PodScans,
    pod_visible: bool,
    counters: &Counters,
    audit_tail: &mut Option<AuditTail>,
    progress: &mpsc::Sender<Gathered>,
) -> Gathered {
    let due = pod.due(pod_visible);
    let scan = pod.scan(due);
    let audit = poll_audit(audit_tail.take());
    let sink = |p: Progress| send_progress(progress, counters, p);
    let (refresh, scanned, audit) =
        tokio::join!(gatherer.gather_refresh(clock, Some(&sink)), scan, audit);
    let (mut snapshot, rows) = match refresh {
        Refresh::Snapshot(mut s) => {
            pod.recipe.mark_snapshot(&mut s);
            (Some(*s), None)
        }
        Refresh::Rows(mut d) => {
            pod.recipe.mark_delta(&mut d);
            (None, Some(d))
        }
        Refresh::Unchanged => (None, None),
    };
    let audit = audit.and_then(|(tail, v)| {
        *audit_tail = Some(tail);
        v
    });
    let (pod_error, pod_alone) = pod.take(due, scanned, &mut snapshot);
    Gathered {
        at: clock.wall(),
        snapshot,
        rows,
        pod_error,
        counters: counters.counts(),
        audit,
        progress: None,
        oldest_reading: gatherer.oldest_reading(),
        pod: pod_alone,
    }
}

/// Starts the refresher on a thread of its own (current-thread runtime:
/// [`crate::runtime`]): one gather (and pod scan, audit tail)
/// after another, `refresh` apart, each sent on the returned channel
/// (progress reports of a long gather too). It ends when the channel's
/// receiver is gone or it is stopped.
///
/// # Errors
/// Its thread could not be created.
pub(super) fn spawn_refresher(
    mut gatherer: Gatherer,
    clock: SharedClock,
    refresh: Duration,
    recipe: Recipe,
    counters: Arc<Counters>,
    audit_path: Option<PathBuf>,
    visible: Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<(RuntimeThread<()>, mpsc::Receiver<Gathered>)> {
    let (tx, rx) = mpsc::channel::<Gathered>(4);
    let mut audit_tail = audit_path.map(|p| AuditTail::new(p, 200));
    let mut pod = PodScans { recipe, last: None };
    let task = spawn("leasectl-refresh", async move {
        loop {
            let shown = visible.load(std::sync::atomic::Ordering::Relaxed);
            let g = gather_once(
                &mut gatherer,
                &clock,
                &mut pod,
                shown,
                &counters,
                &mut audit_tail,
                &tx,
            )
            .await;
            if tx.send(g).await.is_err() {
                break;
            }
            tokio::time::sleep(refresh).await;
        }
    })?;
    Ok((task, rx))
}
