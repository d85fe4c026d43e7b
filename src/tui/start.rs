//! The one console builder: what a front end chose ([`Parts`]: the console
//! command and the demo fill it) made into a [`super::Console`] — its state,
//! gatherer and write task, each built from the one [`Settings`] — and
//! [`start`], which runs it on the real terminal.

use std::sync::Arc;

use super::app::{App, Settings};
use super::ops::{Ops, OpsTarget};
use crate::audit::AuditLog;
use crate::clock::SharedClock;
use crate::snapshot::{GatherOptions, Gatherer, OpenTarget};
use crate::store::{Counters, ObjectStore};
use crate::writer::scan::ScanOptions;

/// The OPS mode's targets: each open target with its writable store.
pub fn ops_targets(open: &[OpenTarget], writable: Vec<Arc<dyn ObjectStore>>) -> Vec<OpsTarget> {
    open.iter()
        .zip(writable)
        .map(|(o, store)| OpsTarget {
            url: o.target.to_string(),
            endpoint: o.endpoint.clone(),
            bucket: o.target.bucket().map(str::to_owned),
            store,
            root: o.target.prefix().to_owned(),
        })
        .collect()
}

/// What the console runs on, as its front end chose it (the console command,
/// the demo): every setting once, in `settings`.
pub struct Parts {
    /// The settings (TARGETs, watch mode, refresh, listings' cadence, TTL,
    /// exclusion mode, record format, audit log, price, request budget):
    /// the gatherer and the write task are made from them.
    pub settings: Settings,
    /// The clock.
    pub clock: SharedClock,
    /// The targets, read-only and counted, in the order of `settings.targets`.
    pub open: Vec<OpenTarget>,
    /// How to gather them (`--timeout`, `--concurrency`, `--depth`).
    pub opts: GatherOptions,
    /// The pod scans (empty: `--no-pod`, and the console says so).
    pub pod: Vec<ScanOptions>,
    /// The request counters of `open`.
    pub counters: Arc<Counters>,
    /// OPS mode's write side (`None`: watch mode). Given with
    /// `settings.read_only`, it is dropped: watch mode never has a write task.
    pub writes: Option<Writes>,
}

/// The write side a front end hands the console in OPS mode.
pub struct Writes {
    /// The stores of `Parts::open`, writable, in the same order.
    pub stores: Vec<Arc<dyn ObjectStore>>,
    /// The audit log takeovers write to (at `settings.audit_path`).
    pub audit: AuditLog,
}

impl Parts {
    /// The console these parts make: its state from the settings, the
    /// gatherer on their refresh, listings' cadence and request budget, and
    /// (OPS mode) the write task. Listing (discovery) runs every
    /// `settings.relist_every` refreshes; each LEASE is read by need: rows on
    /// screen every refresh, the others around their expiry or at the
    /// listing's cadence (`snapshot::Schedule`).
    pub fn console(self) -> super::Console {
        let Parts {
            settings,
            clock,
            open,
            opts,
            pod,
            counters,
            writes,
        } = self;
        let ops = writes.filter(|_| !settings.read_only).map(|w| Ops {
            targets: ops_targets(&open, w.stores),
            audit: w.audit,
            clock: clock.clone(),
        });
        let gatherer = Gatherer::new(open, opts, settings.relist_every)
            .schedule(settings.refresh)
            .budget(settings.max_requests);
        let mut app = App::with_settings(settings, clock.wall());
        if pod.is_empty() {
            app = app.without_pod();
        }
        super::Console {
            app,
            clock,
            gatherer,
            pod,
            counters,
            ops,
        }
    }
}

/// Runs the console of `parts` until the operator quits.
///
/// # Errors
/// Terminal errors.
pub async fn start(parts: Parts) -> color_eyre::Result<()> {
    super::run(parts.console()).await?;
    Ok(())
}
