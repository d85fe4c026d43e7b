//! The one recipe for a complete snapshot: the gathered leases, then what
//! every front end adds — best-effort marks, the pod scan, each row's last
//! takeover from the audit log — in one place, so that `--json`, `-o`,
//! `--watch`, `check`, `serve` and the console's refresher show the same
//! document and a new field is added once. The console takes the steps one
//! by one ([`Recipe::mark`], [`Recipe::scan_pod`]): it refreshes changed rows
//! alone and scans the pod on a cadence of its own.

use crate::exit::tell;
use std::path::PathBuf;

use super::delta::{Delta, RowUpdate};
use super::gather::Gatherer;
use super::model::{ExclusionReport, PrefixReport, Snapshot};
use super::takeovers::{self, AuditLogReport, TakeoverIndex};
use crate::clock::SharedClock;
use crate::text::sanitize_message;
use crate::writer::scan::{self, PodSnapshot, ScanOptions};
use crate::writer::WriterError;

/// The audit log a recipe reads each row's last takeover from.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditSource {
    /// The log (`--audit-log`, else the default path); `None`: none known.
    pub path: Option<PathBuf>,
    /// Named by `--audit-log`: only then does an unreadable log decide the exit code.
    pub(crate) requested: bool,
}

/// What a complete snapshot holds besides the gathered leases.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recipe {
    /// Scan the pods with these options, merged into one `pod` section
    /// (empty: `--no-pod`).
    pub pods: Vec<ScanOptions>,
    /// Best-effort mode was chosen (`--conditional off`): that is every
    /// prefix's exclusion, whatever the service.
    pub best_effort: bool,
    /// Read each row's last takeover from this audit log (`None`: not read;
    /// `--watch`, `serve` and the console follow the log as it grows instead).
    pub audit: Option<AuditSource>,
}

impl Recipe {
    /// One snapshot from `gatherer`, completed ([`Recipe::complete`]).
    pub(crate) async fn take(&self, gatherer: &mut Gatherer, clock: &SharedClock) -> Snapshot {
        let mut snap = gatherer.gather(clock).await;
        self.complete(&mut snap).await;
        snap
    }

    /// Whether the recipe scans a pod.
    pub(crate) fn scans_pod(&self) -> bool {
        !self.pods.is_empty()
    }

    /// Marks `prefixes` best-effort when best-effort mode was chosen: that is
    /// then every prefix's exclusion, whatever the service.
    pub(crate) fn mark<'a>(&self, prefixes: impl IntoIterator<Item = &'a mut PrefixReport>) {
        if self.best_effort {
            for p in prefixes {
                p.exclusion = ExclusionReport::BestEffort;
            }
        }
    }

    /// Marks every row of `snap` ([`Recipe::mark`]).
    pub(crate) fn mark_snapshot(&self, snap: &mut Snapshot) {
        self.mark(snap.targets.iter_mut().flat_map(|t| t.prefixes.iter_mut()));
    }

    /// Marks the changed rows of `delta` ([`Recipe::mark`]).
    pub(crate) fn mark_delta(&self, delta: &mut Delta) {
        self.mark(
            delta
                .targets
                .iter_mut()
                .flat_map(|t| t.rows.iter_mut())
                .filter_map(|(_, u)| match u {
                    RowUpdate::Report(p) => Some(&mut **p),
                    RowUpdate::Error(_) => None,
                }),
        );
    }

    /// Scans the pods on a blocking thread and merges them; `None` when the
    /// recipe scans none.
    pub(crate) async fn scan_pod(&self) -> Option<Result<PodSnapshot, PodScanFailure>> {
        if self.pods.is_empty() {
            return None;
        }
        let pods = self.pods.clone();
        Some(
            match tokio::task::spawn_blocking(move || scan::scan_all(&pods)).await {
                Ok(Ok(pod)) => Ok(pod),
                Ok(Err(e)) => Err(PodScanFailure::Scan(e)),
                Err(e) => Err(PodScanFailure::Task(e.to_string())),
            },
        )
    }

    /// Adds to a gathered `snap` what the recipe asks for: best-effort marks
    /// on every prefix, the pod scanned on a blocking thread (a pod that
    /// cannot be scanned is `pod_error`, never "healthy"), and each row's last
    /// takeover with the document's `audit_log` (a log that cannot be read is
    /// said on stderr).
    pub(crate) async fn complete(&self, snap: &mut Snapshot) {
        self.mark_snapshot(snap);
        self.add_pod(snap).await;
        if let Some(audit) = &self.audit {
            last_takeovers(snap, audit).await;
        }
    }

    /// Scans the pod when the recipe asks for it ([`Recipe::scan_pod`]) and
    /// puts it in `snap`: its `pod`, or `pod_error` (never "healthy").
    pub(super) async fn add_pod(&self, snap: &mut Snapshot) {
        match self.scan_pod().await {
            Some(Ok(pod)) => snap.pod = pod,
            Some(Err(PodScanFailure::Scan(e))) => {
                snap.pod_error = Some(format!("scanning the pod: {e}"))
            }
            Some(Err(e @ PodScanFailure::Task(_))) => snap.pod_error = Some(e.to_string()),
            None => {}
        }
    }
}

/// Why a pod scan gave no `pod` section.
#[derive(Debug)]
pub(crate) enum PodScanFailure {
    /// The scan failed (the proc root could not be listed, the pod's root is gone).
    Scan(WriterError),
    /// The scan's blocking task ended without an answer (it panicked or was cancelled).
    Task(String),
}

impl std::fmt::Display for PodScanFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodScanFailure::Scan(e) => write!(f, "{e}"),
            PodScanFailure::Task(e) => write!(f, "pod scan task: {e}"),
        }
    }
}

/// Reads the audit log `audit` (on a blocking thread) and sets each row's
/// `last_takeover` and the document's `audit_log`; a log that cannot be read
/// is said on stderr (and makes the exit code 1 when `--audit-log` named it).
async fn last_takeovers(snap: &mut Snapshot, audit: &AuditSource) {
    let (index, report) = read_takeovers(audit).await;
    index.attach(snap);
    snap.audit_log = Some(report);
}

/// Reads the audit log `audit` (on a blocking thread): the index of its
/// takeovers and the document's `audit_log`; a log that cannot be read is
/// said on stderr.
pub(super) async fn read_takeovers(audit: &AuditSource) -> (TakeoverIndex, AuditLogReport) {
    let (path, requested) = (audit.path.clone(), audit.requested);
    let read = tokio::task::spawn_blocking(move || takeovers::read_log(path.as_deref())).await;
    let (index, report) = match read {
        Ok(r) => r,
        Err(e) => (
            TakeoverIndex::default(),
            AuditLogReport {
                path: None,
                error: Some(format!("reading the audit log failed: {e}")),
                requested,
                unreadable_lines: 0,
            },
        ),
    };
    let report = AuditLogReport {
        requested,
        ..report
    };
    if let Some(e) = &report.error {
        tell(format_args!(
            "{}; the last takeover of each prefix is unknown{}",
            sanitize_message(e),
            if requested {
                ""
            } else {
                " (the default log; name one with --audit-log to make this an error)"
            }
        ));
    }
    (index, report)
}
