//! `leasectl demo`: the console on a local store, with live holders on the real
//! engine and a real demo pod — no cloud account needed (README: "The demo tour"; ARCHITECTURE.md).
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

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bucket::{
    lease_key, BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseWatch,
};
use crate::clock::{SharedClock, SkewedClock, SystemClock};
use crate::snapshot::OpenTarget;
use crate::store::local::LocalStore;
use crate::store::{ObjectStore, PutCondition, ReadOnly, StoreError};
use crate::target::Target;
use crate::writer::scan::ScanOptions;
use crate::writer::{ENABLE, HELD};

/// File name of the demo's audit log, directly under the demo directory
/// (`{dir}/audit.jsonl`); see [`DemoDir::audit_log`]. Takeovers from the demo
/// console are to be audited there.
pub const AUDIT_LOG: &str = "audit.jsonl";

/// The demo's internal directory under the store root. Discovery hides names
/// starting with `.leasectl-`, so it never shows up as a prefix.
pub const STATE_DIR: &str = ".leasectl-demo";

/// TTL of every simulated lease, in seconds: short, so things happen within a minute.
pub const DEMO_TTL_S: u64 = 12;

/// How long the dying holder renews before it dies, by default.
pub const DEFAULT_DIE_AFTER: Duration = Duration::from_secs(20);

/// How much longer than the dying holder the contended prefix's first holder lives.
pub const CRASH_DELAY: Duration = Duration::from_secs(10);

/// The console's refresh interval in the demo.
pub const DEMO_REFRESH: Duration = Duration::from_secs(2);

/// How far ahead the suspect holder's clock runs: 6 hours.
pub const SUSPECT_SKEW_H: i64 = 6;

/// Prefixes the demo creates, in the store root.
pub const PREFIXES: [&str; 7] = [
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
pub const MALFORMED_BODY: &[u8] =
    br#"{"instance_id":"ledger-writer","acquired_at":"2026-03-01T02:00:00Z","renewed_at":"2026-03-0"#;

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
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
pub struct DemoOptions {
    /// The directory to use; `None`: a new temporary directory, removed at exit.
    pub dir: Option<PathBuf>,
    /// How long the dying holder renews before it dies ([`DEFAULT_DIE_AFTER`]).
    pub die_after: Duration,
    /// The `leasectl` binary the pods and the watchdog run (normally this one).
    pub leasectl: PathBuf,
}

/// The demo directory: the store root, plus the internal state directory.
#[derive(Debug)]
pub struct DemoDir {
    root: PathBuf,
    temporary: bool,
}

impl DemoDir {
    /// Prepares the directory. With `dir`, the directory is created if
    /// missing; an existing one must be empty or a previous demo's (it then
    /// starts over: the demo prefixes and the state directory are removed; the
    /// audit log is kept). Without, a new directory `leasectl-demo-*` is made
    /// under the system temporary directory (`$TMPDIR`), mode 0700.
    ///
    /// # Errors
    /// [`DemoError::Dir`] when the directory cannot be made, or holds
    /// something other than a previous demo.
    pub fn create(dir: Option<&Path>) -> Result<Self, DemoError> {
        let io = |path: &Path, e: std::io::Error| DemoError::Dir {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let (root, temporary) = match dir {
            Some(d) => {
                fs::create_dir_all(d).map_err(|e| io(d, e))?;
                let d = d.canonicalize().map_err(|e| io(d, e))?;
                let previous_demo = d.join(STATE_DIR).is_dir();
                if previous_demo {
                    for p in PREFIXES {
                        let _ = fs::remove_dir_all(d.join(p));
                    }
                    let _ = fs::remove_dir_all(d.join(STATE_DIR));
                    let _ = fs::remove_dir_all(d.join(".leasectl-tmp"));
                } else if fs::read_dir(&d).map_err(|e| io(&d, e))?.next().is_some() {
                    return Err(DemoError::Dir {
                        path: d,
                        message: "not empty and not a previous demo directory; give an empty or new directory".into(),
                    });
                }
                (d, false)
            }
            None => {
                let base = std::env::temp_dir();
                let mut made = None;
                for _ in 0..16 {
                    let p = base.join(format!("leasectl-demo-{:08x}", rand::random::<u32>()));
                    match fs::DirBuilder::new().mode(0o700).create(&p) {
                        Ok(()) => {
                            made = Some(p);
                            break;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(io(&p, e)),
                    }
                }
                let p = made.ok_or_else(|| DemoError::Dir {
                    path: base.clone(),
                    message: "could not make a new directory".into(),
                })?;
                let p = p.canonicalize().map_err(|e| io(&p, e))?;
                (p, true)
            }
        };
        let d = Self { root, temporary };
        for sub in [d.state_dir(), d.pod_dir("healthy"), d.pod_dir("racing")] {
            fs::create_dir_all(&sub).map_err(|e| io(&sub, e))?;
        }
        Ok(d)
    }

    /// The store root (the console's TARGET is `file://{root}/`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the directory was made by the demo (and is removed at exit).
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The audit log path for takeovers made in the demo: `{dir}/audit.jsonl`.
    pub fn audit_log(&self) -> PathBuf {
        self.root.join(AUDIT_LOG)
    }

    /// The internal state directory `{dir}/.leasectl-demo/`.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// The data directory of the demo pod `name` (`healthy` or `racing`).
    pub fn pod_dir(&self, name: &str) -> PathBuf {
        self.state_dir().join("pods").join(name)
    }

    /// The file listing the demo's processes: lines `demo PID`, `watchdog
    /// PID`, `pod NAME PID` (each pod root leads its own process group).
    pub fn pids_file(&self) -> PathBuf {
        self.state_dir().join("pids")
    }

    /// The demo's log (the engine's and the pods' messages; the terminal
    /// belongs to the console).
    pub fn log_file(&self) -> PathBuf {
        self.state_dir().join("demo.log")
    }

    /// The TARGET of the demo store.
    pub fn target(&self) -> Target {
        Target::Local {
            dir: self.root.clone(),
        }
    }

    /// Removes the directory if the demo made it; a `--dir` is left in place.
    pub fn remove_if_temporary(&self) {
        if self.temporary {
            if let Err(e) = fs::remove_dir_all(&self.root) {
                tracing::warn!(dir = %self.root.display(), "could not remove the demo directory: {e}");
            }
        }
    }
}

/// One simulated bucket-lease holder.
#[derive(Debug, Clone)]
struct HolderSpec {
    prefix: &'static str,
    instance_id: &'static str,
    exclusion: Exclusion,
    /// Stop renewing (without releasing) after this long.
    dies_after: Option<Duration>,
}

/// A running demo pod: its root process, leader of its own process group.
pub struct DemoPod {
    /// `healthy` or `racing`.
    pub name: &'static str,
    /// The pod's data directory (holds `.writer.lock`).
    pub data_dir: PathBuf,
    child: Child,
}

impl DemoPod {
    /// The root's pid (= its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The scan that shows exactly this pod: its root's subtree and its lock.
    pub fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            proc_root: PathBuf::from("/proc"),
            data_dirs: vec![self.data_dir.clone()],
            pod_root: Some(self.pid()),
        }
    }

    /// SIGKILLs the whole process group and reaps the root.
    fn kill(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DemoPod {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The watchdog's end of the conversation: lines on its stdin.
struct Watchdog {
    stdin: Option<ChildStdin>,
    child: Child,
}

impl Watchdog {
    fn tell(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    /// A clean goodbye: the demo has cleaned up itself.
    fn dismiss(mut self) {
        self.tell("clean");
        self.stdin.take();
        let _ = self.child.wait();
    }
}

/// The running demo world: holders, pods, watchdog.
pub struct Demo {
    dir: DemoDir,
    store: Arc<dyn ObjectStore>,
    cancel: CancellationToken,
    holders: Vec<JoinHandle<()>>,
    pods: Vec<DemoPod>,
    watchdog: Option<Watchdog>,
}

/// The static records: data without a lease, a torn write, a clock 6 h fast.
async fn put_static_records(store: &Arc<dyn ObjectStore>) -> Result<(), DemoError> {
    store
        .put(
            "archive-db/chunk-000001.bin",
            b"archived backup data\n".to_vec(),
            PutCondition::None,
        )
        .await?;
    store
        .put(
            &lease_key("ledger-db/"),
            MALFORMED_BODY.to_vec(),
            PutCondition::IfNoneMatch,
        )
        .await?;
    let fast: SharedClock = Arc::new(SkewedClock::new(chrono::Duration::hours(SUSPECT_SKEW_H)));
    // The real engine on a wrong clock: the record is stamped 6 h ahead,
    // then never renewed (the holder went away).
    BucketLease::acquire_as(
        store.clone(),
        fast,
        "audit-db/",
        "clock-6h-fast",
        LeaseConfig {
            ttl_s: 30,
            exclusion: Exclusion::Conditional,
            ..LeaseConfig::default()
        },
        &mut LeaseWatch::new(),
    )
    .await?;
    Ok(())
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
    pub async fn start(opts: &DemoOptions, dir: DemoDir) -> Result<Demo, DemoError> {
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
    pub fn dir(&self) -> &DemoDir {
        &self.dir
    }

    /// The demo pods.
    pub fn pods(&self) -> &[DemoPod] {
        &self.pods
    }

    /// The store as the console sees it: read side only.
    /// The demo store, writable: the console's write task (takeovers, probes) uses it.
    pub fn writable_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The demo store as a console target (read side).
    pub fn open_target(&self) -> OpenTarget {
        OpenTarget {
            target: self.dir.target(),
            endpoint: "local".into(),
            store: Arc::new(ReadOnly::new(self.store.clone())),
        }
    }

    /// One scan per pod (each restricted to its root's subtree and its own
    /// lock), merged: the pod view shows exactly the demo's processes.
    pub fn pod_scans(&self) -> Vec<ScanOptions> {
        self.pods.iter().map(DemoPod::scan_options).collect()
    }

    /// Stops everything: the holders release their leases (dead ones stay
    /// dead), the pods' process groups are killed, the watchdog dismissed,
    /// and a temporary directory removed.
    pub async fn shutdown(mut self) {
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

/// Renews `lease` until the demo ends (then releases it), the holder's time
/// to die comes (then it stops renewing and never releases: a crash), or the
/// lease is lost (someone took it over).
async fn keep(lease: BucketLease, spec: HolderSpec, cancel: CancellationToken) {
    // Made once per holder: its size does not matter.
    #[allow(clippy::large_enum_variant)]
    enum End {
        Quit,
        Die,
        Lost(Result<BucketLease, LeaseError>),
    }
    let mut ka = KeepAlive::start(lease);
    let die = async {
        match spec.dies_after {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let end = tokio::select! {
        _ = cancel.cancelled() => End::Quit,
        _ = die => End::Die,
        r = ka.lost() => End::Lost(r),
    };
    match end {
        End::Quit => {
            let _ = ka.stop_and_release().await;
        }
        End::Die => {
            let _ = ka.stop().await;
            tracing::info!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder died: no more renewals, no release; the lease goes stale after its TTL"
            );
        }
        End::Lost(Ok(lease)) => {
            // The fence closed (e.g. renewals failed for two thirds of a TTL).
            let _ = lease.release().await;
            tracing::warn!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder's fence closed; it stopped and released its lease"
            );
        }
        End::Lost(Err(e)) => {
            tracing::warn!(
                prefix = spec.prefix,
                holder = spec.instance_id,
                "demo holder lost its lease: {e}"
            );
        }
    }
}

/// A contender: retries the acquire until the current holder's lease may be
/// taken over, then renews like [`keep`].
async fn contend(
    store: Arc<dyn ObjectStore>,
    clock: SharedClock,
    spec: HolderSpec,
    cancel: CancellationToken,
) {
    let mut watch = LeaseWatch::new();
    let config = LeaseConfig {
        ttl_s: DEMO_TTL_S,
        exclusion: spec.exclusion,
        ..LeaseConfig::default()
    };
    let lease = loop {
        let wait = match BucketLease::acquire_as(
            store.clone(),
            clock.clone(),
            spec.prefix,
            spec.instance_id,
            config.clone(),
            &mut watch,
        )
        .await
        {
            Ok(lease) => break lease,
            // Check again when it may be taken over (the holder may renew meanwhile).
            Err(LeaseError::HeldByOther { may_take_in_s, .. }) => {
                Duration::from_secs_f64(may_take_in_s.clamp(0.0, DEMO_TTL_S as f64))
                    + Duration::from_millis(200)
            }
            Err(LeaseError::UnderWatch { remaining, .. }) => remaining,
            Err(e) => {
                tracing::warn!(prefix = spec.prefix, "demo contender: {e}");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    };
    tracing::info!(
        prefix = spec.prefix,
        holder = spec.instance_id,
        "demo contender took the lease over"
    );
    keep(lease, spec, cancel).await;
}

fn spawn_watchdog(leasectl: &Path, dir: &DemoDir) -> Result<Watchdog, DemoError> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log_file())
        .map_err(|source| DemoError::Spawn {
            what: "the watchdog's log".into(),
            source,
        })?;
    let mut child = Command::new(leasectl)
        .arg0("leasectl")
        .args(["demo", "--watchdog"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own group: a signal to the terminal's foreground group spares it.
        .process_group(0)
        .spawn()
        .map_err(|source| DemoError::Spawn {
            what: "the demo watchdog".into(),
            source,
        })?;
    Ok(Watchdog {
        stdin: child.stdin.take(),
        child,
    })
}

/// The racing pod's script: two children that both take (the lease is on in
/// their environment only, so their parent never took and stamped).
/// `leasectl` is found through `PATH` (a link in the state directory), so
/// the pod view shows `leasectl writer exec …` rather than a build path.
const RACING_SCRIPT: &str =
    "CLOUD_WRITER_LEASE=1 leasectl writer exec --data-dir \"$1\" --wait 24h -- sleep 86400 & \
CLOUD_WRITER_LEASE=1 leasectl writer exec --data-dir \"$1\" --wait 24h -- sleep 86400 & wait";

/// The healthy pod's command under its root: a shell (inherit) with two workers.
const HEALTHY_SCRIPT: &str = "sleep 86400 & sleep 86400 & wait";

fn spawn_pod(
    leasectl: &Path,
    dir: &DemoDir,
    name: &'static str,
    log: &fs::File,
) -> Result<DemoPod, DemoError> {
    let data_dir = dir.pod_dir(name);
    let mut cmd = Command::new(leasectl);
    cmd.arg0("leasectl")
        .args(["writer", "exec", "--data-dir"])
        .arg(&data_dir)
        .env_remove(ENABLE)
        .env_remove(HELD)
        .env("LEASECTL_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match name {
        "healthy" => {
            cmd.env(ENABLE, "1")
                .args(["--wait", "10s", "--", "sh", "-c", HEALTHY_SCRIPT]);
        }
        _ => {
            let bin = dir.state_dir().join("bin");
            let link = bin.join("leasectl");
            let spawn_err = |source| DemoError::Spawn {
                what: format!("the {name} pod"),
                source,
            };
            fs::create_dir_all(&bin).map_err(spawn_err)?;
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(leasectl, &link).map_err(spawn_err)?;
            let mut path = OsString::from(bin.as_os_str());
            if let Some(p) = std::env::var_os("PATH") {
                path.push(":");
                path.push(p);
            }
            cmd.env("PATH", path)
                .args(["--", "sh", "-c", RACING_SCRIPT, "sh"])
                .arg(&data_dir);
        }
    }
    let err_log = log.try_clone().map_err(|source| DemoError::Spawn {
        what: format!("the {name} pod"),
        source,
    })?;
    cmd.stderr(err_log).process_group(0);
    let me = std::process::id();
    // SAFETY: runs in the forked child before exec; prctl and getppid are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if nix::unistd::getppid().as_raw() as u32 != me {
                return Err(std::io::Error::other(
                    "the demo exited before the pod started",
                ));
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| DemoError::Spawn {
        what: format!("the {name} pod ({})", leasectl.display()),
        source,
    })?;
    Ok(DemoPod {
        name,
        data_dir,
        child,
    })
}

/// `leasectl demo --watchdog` (internal): reads lines from stdin — `group
/// PGID`, `remove DIR`, `clean` — until end of file. If the demo closed the
/// pipe without `clean` (it crashed or was killed), SIGKILLs every group and
/// removes every directory it was told of (only a demo directory: one that
/// holds [`STATE_DIR`]). Returns the exit code.
pub fn watchdog() -> crate::exit::Exit {
    use nix::sys::signal::{signal, SigHandler};
    // The terminal's hang-up and Ctrl-C are for the demo, not for us.
    for s in [Signal::SIGHUP, Signal::SIGINT, Signal::SIGQUIT] {
        // SAFETY: installing SIG_IGN has no handler code to be unsafe.
        let _ = unsafe { signal(s, SigHandler::SigIgn) };
    }
    let mut groups = BTreeSet::new();
    let mut remove = Vec::new();
    let mut clean = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("group", g)) => {
                if let Ok(g) = g.trim().parse::<i32>() {
                    if g > 1 {
                        groups.insert(g);
                    }
                }
            }
            Some(("remove", d)) => remove.push(PathBuf::from(d)),
            _ if line.trim() == "clean" => clean = true,
            _ => {}
        }
    }
    if clean {
        return crate::exit::Exit::Ok;
    }
    eprintln!("leasectl demo watchdog: the demo ended without cleaning up; stopping its pods");
    for g in groups {
        let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
    }
    for d in remove {
        if d.join(STATE_DIR).is_dir() {
            let _ = fs::remove_dir_all(&d);
        }
    }
    crate::exit::Exit::Ok
}

/// Sends the demo's logs (the engine's, the holders') to `path`: the terminal
/// belongs to the console. Honours `LEASECTL_LOG`; default `info`.
pub fn init_logging(path: &Path) {
    crate::logfile::init(path);
}
