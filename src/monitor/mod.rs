//! Monitoring front ends (issue 16): the `check` plugin, the output formats
//! (`-o table|json|ndjson|prometheus`), the `--watch` stream and the `serve`
//! exporter. Each is a thin layer over the one [`Snapshot`] that the console
//! and `--json` show, gathered with the same request discipline
//! ([`Gatherer`]: conditional GETs, a listing about every 30 s). Plain
//! option structs only: the commands build them from
//! the command line; nothing here reads the command line.

pub mod check;
pub mod prometheus;
pub mod serve;
pub mod stream;
pub mod table;
pub mod text_format;

use crate::clock::SharedClock;
use crate::snapshot::{ExclusionReport, Gatherer, Snapshot};
use crate::writer::scan::{self, ScanOptions};

/// What every monitoring front end gathers besides the buckets.
#[derive(Debug, Clone, Default)]
pub struct GatherExtras {
    /// Scan the pod with these options (None: `--no-pod`).
    pub pod: Option<ScanOptions>,
    /// Best-effort mode was chosen (`--conditional off`): that is every
    /// prefix's exclusion, whatever the service.
    pub best_effort: bool,
}

/// One snapshot from `gatherer`, with the pod scanned (on a blocking thread)
/// when asked. A pod that cannot be scanned is `pod_error`, never "healthy".
pub async fn gather(
    gatherer: &mut Gatherer,
    clock: &SharedClock,
    extras: &GatherExtras,
) -> Snapshot {
    let mut snap = gatherer.gather(clock).await;
    add_extras(&mut snap, extras).await;
    snap
}

/// Adds to a gathered `snap` what `extras` asks for: best-effort marking of
/// every prefix, and the pod scanned on a blocking thread (a pod that cannot
/// be scanned is `pod_error`, never "healthy").
pub async fn add_extras(snap: &mut Snapshot, extras: &GatherExtras) {
    if extras.best_effort {
        for p in snap.targets.iter_mut().flat_map(|t| t.prefixes.iter_mut()) {
            p.exclusion = ExclusionReport::BestEffort;
        }
    }
    if let Some(so) = extras.pod.clone() {
        match tokio::task::spawn_blocking(move || scan::scan(&so)).await {
            Ok(Ok(pod)) => snap.pod = pod,
            Ok(Err(e)) => snap.pod_error = Some(format!("scanning the pod: {e}")),
            Err(e) => snap.pod_error = Some(format!("pod scan task: {e}")),
        }
    }
}
