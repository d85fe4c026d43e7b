//! The one recipe for a complete snapshot: the gathered leases, then what
//! every front end adds — best-effort marks, the pod scan, each row's last
//! takeover from the audit log — in one place, so that `--json`, `-o`,
//! `--watch`, `check` and `serve` show the same document and a new field is
//! added once.

use std::path::PathBuf;

use super::{AuditLogReport, ExclusionReport, Gatherer, Snapshot, TakeoverIndex};
use crate::clock::SharedClock;
use crate::writer::scan::{self, ScanOptions};

/// The audit log a recipe reads each row's last takeover from.
#[derive(Debug, Clone, Default)]
pub struct AuditSource {
    /// The log (`--audit-log`, else the default path); `None`: none known.
    pub path: Option<PathBuf>,
    /// Named by `--audit-log`: only then does an unreadable log decide the exit code.
    pub requested: bool,
}

/// What a complete snapshot holds besides the gathered leases.
#[derive(Debug, Clone, Default)]
pub struct Recipe {
    /// Scan the pod with these options (`None`: `--no-pod`).
    pub pod: Option<ScanOptions>,
    /// Best-effort mode was chosen (`--conditional off`): that is every
    /// prefix's exclusion, whatever the service.
    pub best_effort: bool,
    /// Read each row's last takeover from this audit log (`None`: not read;
    /// `--watch`, `serve` and the console follow the log as it grows instead).
    pub audit: Option<AuditSource>,
}

impl Recipe {
    /// One snapshot from `gatherer`, completed ([`Recipe::complete`]).
    pub async fn take(&self, gatherer: &mut Gatherer, clock: &SharedClock) -> Snapshot {
        let mut snap = gatherer.gather(clock).await;
        self.complete(&mut snap).await;
        snap
    }

    /// Adds to a gathered `snap` what the recipe asks for: best-effort marks
    /// on every prefix, the pod scanned on a blocking thread (a pod that
    /// cannot be scanned is `pod_error`, never "healthy"), and each row's last
    /// takeover with the document's `audit_log` (a log that cannot be read is
    /// said on stderr).
    pub async fn complete(&self, snap: &mut Snapshot) {
        if self.best_effort {
            for p in snap.targets.iter_mut().flat_map(|t| t.prefixes.iter_mut()) {
                p.exclusion = ExclusionReport::BestEffort;
            }
        }
        if let Some(so) = self.pod.clone() {
            match tokio::task::spawn_blocking(move || scan::scan(&so)).await {
                Ok(Ok(pod)) => snap.pod = pod,
                Ok(Err(e)) => snap.pod_error = Some(format!("scanning the pod: {e}")),
                Err(e) => snap.pod_error = Some(format!("pod scan task: {e}")),
            }
        }
        if let Some(audit) = &self.audit {
            last_takeovers(snap, audit).await;
        }
    }
}

/// Reads the audit log `audit` (on a blocking thread) and sets each row's
/// `last_takeover` and the document's `audit_log`; a log that cannot be read
/// is said on stderr (and makes the exit code 1 when `--audit-log` named it).
async fn last_takeovers(snap: &mut Snapshot, audit: &AuditSource) {
    let (path, requested) = (audit.path.clone(), audit.requested);
    let read =
        tokio::task::spawn_blocking(move || super::takeovers::read_log(path.as_deref())).await;
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
        eprintln!(
            "leasectl: {}; the last takeover of each prefix is unknown{}",
            crate::text::sanitize_message(e),
            if requested {
                ""
            } else {
                " (the default log; name one with --audit-log to make this an error)"
            }
        );
    }
    index.attach(snap);
    snap.audit_log = Some(report);
}
