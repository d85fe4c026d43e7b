//! `leasectl demo`: the console on a local store, with live holders on the real
//! engine and a real demo pod — no cloud account needed (README.md, "The demo tour"; ARCHITECTURE.md).
//!
//! Layout of the demo directory (a fresh temporary directory unless `--dir`):
//!
//! ```text
//! {dir}/                      the store root: file:///{dir}/ is the console's TARGET
//!   orders-db/LEASE           healthy-holder renews every TTL/3
//!   billing-db/LEASE          dying-holder renews, then dies (stops renewing) after --die-after
//!   events-db/LEASE           crashed-holder dies 10 s after dying-holder; a contender
//!                             waiting since the start takes the lease over once it is stale
//!   audit-db/LEASE            written once by a holder whose clock is 6 h fast: suspect
//!   ledger-db/LEASE           a torn write: malformed
//!   archive-db/chunk-…        data but no LEASE: absent
//!   metrics-db/LEASE          best-effort-holder (read, then unconditional write)
//!   audit.jsonl               the audit log path reserved for takeovers ([`AUDIT_LOG`])
//!   .leasectl-demo/           internal (hidden from discovery): pod data dirs, pids, logs
//! ```
//!
//! The simulated holders are tokio tasks in this process using
//! [`BucketLease`] and [`KeepAlive`] on a [`LocalStore`]. The two demo pods are
//! real process trees started through `leasectl writer exec`:
//!
//! - **healthy**: `writer exec` as the pod root (duty take, holds the flock) →
//!   `sh` (inherit) → two `sleep`s. The sleeps read `take` (their stamp names
//!   their grandparent) but never open the lock, so no verdict is raised.
//! - **racing**: a root with the lease off (`writer exec` replaces itself with
//!   `sh`), whose two children both have `CLOUD_WRITER_LEASE=1` and no stamp:
//!   both take, one holds, the other waits — `siblings_racing` and `waiting`.
//!
//! Nothing outlives the demo: every pod root is a process-group leader with a
//! parent-death signal (spawned from the main thread, which lives as long as
//! the process), and a watchdog process (`leasectl demo --watchdog`, its own
//! process group) kills the pods' groups and removes a temporary directory if
//! the demo ends without saying goodbye — a crash, a `kill -9`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bucket::{BucketLease, Exclusion, LeaseConfig, LeaseError, LeaseWatch};
use crate::clock::{SharedClock, SystemClock};
use crate::snapshot::OpenTarget;
use crate::store::local::LocalStore;
use crate::store::{ObjectStore, ReadOnly, StoreError};
use crate::writer::scan::ScanOptions;

pub(crate) mod console;
mod dir;
mod holders;
mod pod;

use crate::logfile::init;
pub(crate) use dir::DemoDir;
use holders::{contend, keep, put_static_records, HolderSpec};
use pod::{spawn_pod, spawn_watchdog, Watchdog};
pub(crate) use pod::{watchdog, DemoPod};

/// File name of the demo's audit log, directly under the demo directory
/// (`{dir}/audit.jsonl`); see [`DemoDir::audit_log`]. Takeovers from the demo
/// console are to be audited there.
pub(crate) const AUDIT_LOG: &str = "audit.jsonl";

/// The demo's internal directory under the store root. Discovery hides names
/// starting with `.leasectl-`, so it never shows up as a prefix.
pub(crate) const STATE_DIR: &str = ".leasectl-demo";

/// TTL of every simulated lease, in seconds: short, so things happen within a minute.
pub(crate) const DEMO_TTL_S: u64 = 12;

/// How much longer than the dying holder the contended prefix's first holder lives.
pub(crate) const CRASH_DELAY: Duration = Duration::from_secs(10);

/// The console's refresh interval in the demo.
pub(crate) const DEMO_REFRESH: Duration = Duration::from_secs(2);

/// How far ahead the suspect holder's clock runs: 6 hours.
pub(crate) const SUSPECT_SKEW_H: i64 = 6;

/// Prefixes the demo creates, in the store root.
pub(crate) const PREFIXES: [&str; 7] = [
    "archive-db/",
    "audit-db/",
    "billing-db/",
    "events-db/",
    "ledger-db/",
    "metrics-db/",
    "orders-db/",
];

/// The body the demo puts in `ledger-db/LEASE`: a record cut short, as a torn
/// write by a hand-rolled tool would leave it.
pub(crate) const MALFORMED_BODY: &[u8] =
    br#"{"instance_id":"ledger-writer","acquired_at":"2026-03-01T02:00:00Z","renewed_at":"2026-03-0"#;

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// The demo directory could not be prepared.
    #[error("demo directory {path}: {message}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The store refused a write.
    #[error("writing the demo store: {0}")]
    Store(#[from] StoreError),
    /// The engine refused to take a demo lease.
    #[error("taking a demo lease: {0}")]
    Lease(#[from] LeaseError),
    /// A demo process could not be started.
    #[error("starting {what}: {source}")]
    Spawn {
        /// Which process.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// What `leasectl demo` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct DemoOptions {
    /// The directory to use; `None`: a new temporary directory, removed at exit.
    pub dir: Option<PathBuf>,
    /// How long the dying holder renews before it dies (`--die-after`, 20 s by
    /// default).
    pub(crate) die_after: Duration,
    /// The `leasectl` binary the pods and the watchdog run (normally this one).
    pub leasectl: PathBuf,
}

/// The running demo world: holders, pods, watchdog.
pub(crate) struct Demo {
    dir: DemoDir,
    store: Arc<dyn ObjectStore>,
    cancel: CancellationToken,
    holders: Vec<JoinHandle<()>>,
    pods: Vec<DemoPod>,
    watchdog: Option<Watchdog>,
}

impl Demo {
    /// Starts the demo in `dir`: the watchdog, the static records (suspect,
    /// malformed, absent), the holders (their first leases taken before this
    /// returns, so the first snapshot shows them), and the two pods.
    ///
    /// Must be called on the thread that lives as long as the demo (the
    /// main thread): the pods' parent-death signal fires when the spawning
    /// thread exits.
    ///
    /// # Errors
    /// [`DemoError`]; whatever was started is stopped again.
    pub(crate) async fn start(opts: &DemoOptions, dir: DemoDir) -> Result<Demo, DemoError> {
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.root())?);
        let mut demo = Demo {
            dir,
            store,
            cancel: CancellationToken::new(),
            holders: Vec::new(),
            pods: Vec::new(),
            watchdog: None,
        };
        let mut pids = format!("demo {}\n", std::process::id());
        match demo.start_inner(opts, &mut pids).await {
            Ok(()) => Ok(demo),
            Err(e) => {
                demo.shutdown().await;
                Err(e)
            }
        }
    }

    /// The steps of [`Demo::start`], in order; `pids` is the pids file's
    /// text so far (rewritten after each process started).
    async fn start_inner(
        &mut self,
        opts: &DemoOptions,
        pids: &mut String,
    ) -> Result<(), DemoError> {
        // The watchdog first, so that anything started after it is covered.
        self.start_watchdog(opts, pids)?;
        put_static_records(&self.store).await?;
        self.start_holders(opts).await?;
        self.start_pods(opts, pids)
    }

    /// Writes the pids file (best effort: it only helps to clean up by hand).
    fn write_pids(&self, pids: &str) {
        let _ = fs::write(self.dir.pids_file(), pids);
    }

    /// Starts the watchdog, which kills the pods' groups and removes a
    /// temporary demo directory if the demo ends without saying goodbye.
    fn start_watchdog(&mut self, opts: &DemoOptions, pids: &mut String) -> Result<(), DemoError> {
        let mut wd = spawn_watchdog(&opts.leasectl, &self.dir)?;
        if self.dir.is_temporary() {
            wd.tell(&format!("remove {}", self.dir.root().display()));
        }
        pids.push_str(&format!("watchdog {}\n", wd.child.id()));
        self.watchdog = Some(wd);
        self.write_pids(pids);
        Ok(())
    }

    /// The holders: their first leases now, renewals in tasks; then the
    /// contender's task.
    async fn start_holders(&mut self, opts: &DemoOptions) -> Result<(), DemoError> {
        let clock: SharedClock = SystemClock::shared();
        let store = self.store.clone();
        let config = |exclusion| LeaseConfig {
            ttl_s: DEMO_TTL_S,
            exclusion,
            ..LeaseConfig::default()
        };
        let specs = [
            HolderSpec {
                prefix: "orders-db/",
                instance_id: "healthy-holder",
                exclusion: Exclusion::Conditional,
                dies_after: None,
            },
            HolderSpec {
                prefix: "billing-db/",
                instance_id: "dying-holder",
                exclusion: Exclusion::Conditional,
                dies_after: Some(opts.die_after),
            },
            HolderSpec {
                prefix: "events-db/",
                instance_id: "crashed-holder",
                exclusion: Exclusion::Conditional,
                dies_after: Some(opts.die_after + CRASH_DELAY),
            },
            HolderSpec {
                prefix: "metrics-db/",
                instance_id: "best-effort-holder",
                exclusion: Exclusion::BestEffort,
                dies_after: None,
            },
        ];
        for spec in specs {
            let lease = BucketLease::acquire_as(
                store.clone(),
                clock.clone(),
                spec.prefix,
                spec.instance_id,
                config(spec.exclusion),
                &mut LeaseWatch::new(),
            )
            .await?;
            self.holders
                .push(tokio::spawn(keep(lease, spec, self.cancel.clone())));
        }
        // The contender: waits for events-db's lease to go stale, takes it over, renews.
        let contender = HolderSpec {
            prefix: "events-db/",
            instance_id: "contender",
            exclusion: Exclusion::Conditional,
            dies_after: None,
        };
        self.holders.push(tokio::spawn(contend(
            store.clone(),
            clock.clone(),
            contender,
            self.cancel.clone(),
        )));
        Ok(())
    }

    /// The pods, from this (the main) thread, each in the watchdog's care.
    fn start_pods(&mut self, opts: &DemoOptions, pids: &mut String) -> Result<(), DemoError> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.log_file())
            .map_err(|source| DemoError::Spawn {
                what: "the pods' log".into(),
                source,
            })?;
        for name in ["healthy", "racing"] {
            let pod = spawn_pod(&opts.leasectl, &self.dir, name, &log)?;
            if let Some(wd) = self.watchdog.as_mut() {
                wd.tell(&format!("group {}", pod.pid()));
            }
            pids.push_str(&format!("pod {name} {}\n", pod.pid()));
            self.pods.push(pod);
            self.write_pids(pids);
        }
        Ok(())
    }

    /// The demo directory.
    pub(crate) fn dir(&self) -> &DemoDir {
        &self.dir
    }

    /// The store as the console sees it: read side only.
    /// The demo store, writable: the console's write task (takeovers, probes) uses it.
    pub(crate) fn writable_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The demo store as a console target (read side).
    pub(crate) fn open_target(&self) -> OpenTarget {
        OpenTarget {
            target: self.dir.target(),
            endpoint: "local".into(),
            store: Arc::new(ReadOnly::new(self.store.clone())),
        }
    }

    /// One scan per pod (each restricted to its root's subtree and its own
    /// lock), merged: the pod view shows exactly the demo's processes.
    pub(crate) fn pod_scans(&self) -> Vec<ScanOptions> {
        self.pods.iter().map(DemoPod::scan_options).collect()
    }

    /// Stops everything: the holders release their leases (dead ones stay
    /// dead), the pods' process groups are killed, the watchdog dismissed,
    /// and a temporary directory removed.
    pub(crate) async fn shutdown(mut self) {
        self.cancel.cancel();
        for h in self.holders.drain(..) {
            // The local store answers in milliseconds; never hang the exit.
            let _ = tokio::time::timeout(Duration::from_secs(3), h).await;
        }
        for mut p in self.pods.drain(..) {
            p.kill();
        }
        if let Some(wd) = self.watchdog.take() {
            wd.dismiss();
        }
        self.dir.remove_if_temporary();
    }
}

/// Sends the demo's logs (the engine's, the holders') to `path`: the terminal
/// belongs to the console. Honours `LEASECTL_LOG`; default `info`.
pub(crate) fn init_logging(path: &Path) {
    init(path);
}
