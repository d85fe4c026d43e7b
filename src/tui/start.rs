//! What the console runs on ([`Parts`]), built by the console command and the
//! demo, and [`start`], which runs it on the real terminal.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::snapshot::{GatherOptions, Gatherer, OpenTarget};
use crate::store::Counters;

/// The OPS mode's targets: each open target with its writable store.
pub fn ops_targets(
    open: &[OpenTarget],
    writable: Vec<Arc<dyn crate::store::ObjectStore>>,
) -> Vec<super::ops::OpsTarget> {
    open.iter()
        .zip(writable)
        .map(|(o, store)| super::ops::OpsTarget {
            url: o.target.to_string(),
            endpoint: o.endpoint.clone(),
            bucket: o.target.bucket().map(str::to_owned),
            store,
            root: o.target.prefix().to_owned(),
        })
        .collect()
}

/// Everything the console runs on (the console and the demo build it).
pub struct Parts {
    /// The console's state.
    pub app: super::app::App,
    /// The clock.
    pub clock: SharedClock,
    /// Time between two refreshes.
    pub refresh: Duration,
    /// The targets, read-only and counted.
    pub open: Vec<OpenTarget>,
    /// How to gather them.
    pub opts: GatherOptions,
    /// Refreshes between two listings (the console: about 30 s).
    pub relist: u32,
    /// At most this many requests per minute once every LEASE was read.
    pub max_requests: u32,
    /// The pod scans (empty: `--no-pod`).
    pub pod: Vec<crate::writer::scan::ScanOptions>,
    /// The request counters of `open`.
    pub counters: Arc<Counters>,
    /// The audit log shown in the status bar.
    pub audit_path: Option<PathBuf>,
    /// OPS mode: the writable targets and the audit log (None: watch mode).
    pub ops: Option<super::ops::Ops>,
}

/// Runs the console until the operator quits. Listing (discovery) runs
/// every `relist` refreshes; each LEASE is read by need: rows on screen
/// every refresh, the others around their expiry or at the listing's
/// cadence (`snapshot::Schedule`).
///
/// # Errors
/// Terminal errors.
pub async fn start(p: Parts) -> color_eyre::Result<()> {
    let mut app = p.app;
    app.settings.max_requests = p.max_requests;
    super::run(super::Console {
        app,
        clock: p.clock,
        refresh: p.refresh,
        gatherer: Gatherer::new(p.open, p.opts, p.relist)
            .schedule(p.refresh)
            .budget(p.max_requests),
        pod: p.pod,
        counters: p.counters,
        audit_path: p.audit_path,
        ops: p.ops,
    })
    .await?;
    Ok(())
}
