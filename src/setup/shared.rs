//! What every command shares ([`Shared`]: how to reach the stores, the
//! exclusion mode, the terminal), and the plumbing the commands share.

use crate::exit::tell;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use color_eyre::eyre::{eyre, Result};

use crate::audit::AuditLog;
use crate::bucket::Exclusion;
use crate::cli::{AuditArgs, Cli, OnOff, PodArgs, S3Args};
use crate::exit::say;
use crate::exit::Exit;
use crate::snapshot::{GatherOptions, OpenTarget, Recipe};
use crate::store::s3::S3Options;
use crate::store::Unavailable;
use crate::store::{Counters, Counting, ObjectStore, ReadOnly};
use crate::target::{Connector, Target};
use crate::text::sanitize;
use crate::writer::scan::ScanOptions;

/// Whether stdin and stdout are terminals (read once).
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    /// stdin is a terminal.
    pub stdin: bool,
    /// stdout is a terminal.
    pub stdout: bool,
}

/// What every command shares, built once from the command line (the config
/// file's context applied already), before the command runs: how to reach
/// the stores, the gathering options, the exclusion mode, the terminal.
pub struct Shared {
    /// How to reach S3 (`--endpoint-url`, `--timeout`, …).
    pub s3: S3Args,
    /// The connector with `--timeout` as each request's deadline.
    pub connector: Connector,
    /// `--timeout` and `--concurrency` (each command sets its own depth).
    pub gather: GatherOptions,
    /// Best-effort mode was chosen (`--conditional off` or the environment).
    pub best_effort: bool,
    /// The terminal facts.
    pub terminal: Terminal,
}

impl Shared {
    /// What the commands share, from `cli`.
    pub fn new(cli: &Cli) -> Self {
        use std::io::IsTerminal;
        let s3 = cli.s3.clone();
        Self {
            connector: Connector::new(s3_options(&s3, s3.timeout)),
            gather: GatherOptions {
                request_timeout: s3.timeout,
                concurrency: usize::from(s3.concurrency),
                ..GatherOptions::default()
            },
            best_effort: s3.conditional == Some(OnOff::Off),
            terminal: Terminal {
                stdin: std::io::stdin().is_terminal(),
                stdout: std::io::stdout().is_terminal(),
            },
            s3,
        }
    }

    /// A connector whose requests end after `timeout` (`bucket hold`: at
    /// most a third of the TTL).
    pub(crate) fn connector_with_timeout(&self, timeout: Duration) -> Connector {
        Connector::new(s3_options(&self.s3, timeout))
    }

    /// The exclusion asked for on the command line / environment.
    pub fn exclusion(&self) -> Exclusion {
        if self.best_effort {
            Exclusion::BestEffort
        } else {
            Exclusion::Conditional
        }
    }

    /// `--timeout`, `--concurrency` and this discovery depth.
    pub fn gather_at(&self, depth: u32) -> GatherOptions {
        GatherOptions {
            depth,
            ..self.gather.clone()
        }
    }
}

fn s3_options(a: &S3Args, timeout: Duration) -> S3Options {
    S3Options {
        endpoint_url: a.endpoint_url.clone(),
        region: a.region.clone(),
        profile: a.profile.clone(),
        path_style: a.path_style,
        request_timeout: Some(timeout),
        max_attempts: None,
    }
}

/// Says on stderr that with no TARGET and `--no-pod` there is nothing to
/// report (`lead` names the output: "--json with no TARGET …" or "with no
/// TARGET …") and returns [`Exit::Usage`].
pub(crate) fn nothing_to_report(lead: &str) -> Exit {
    say(format!(
        "{lead}; give a TARGET (s3://bucket/path/ or file:///dir/) or leave out --no-pod"
    ));
    Exit::Usage
}

/// The targets opened: each read-only and counted for the gatherers, and,
/// when asked, the same counted store writable (the console's OPS mode
/// only: otherwise nothing that could write exists).
pub struct Opened {
    /// Read-only, counted: what every gatherer gets.
    pub read: Vec<OpenTarget>,
    /// The same stores, counted and writable, in the same order (empty
    /// unless asked for).
    pub writable: Vec<Arc<dyn ObjectStore>>,
}

/// Opens every target, each request counted in `counters` (and keeps the
/// writable handles when `writable`). A target that
/// cannot even be opened (a missing directory) stays in the list as a store
/// whose every request fails, so it is reported as unreachable.
pub async fn open_targets(
    connector: &Connector,
    targets: &[Target],
    counters: &Arc<Counters>,
    writable: bool,
) -> Opened {
    let mut opened = Opened {
        read: Vec::new(),
        writable: Vec::new(),
    };
    for t in targets {
        let store: Arc<dyn ObjectStore> = match connector.open(t).await {
            Ok(s) => s,
            Err(e) => Arc::new(Unavailable::new(t.to_string(), e)),
        };
        let counted: Arc<dyn ObjectStore> = Arc::new(Counting::new(store, counters.clone()));
        opened.read.push(OpenTarget {
            target: t.clone(),
            endpoint: connector.endpoint(t).await,
            store: Arc::new(ReadOnly::new(counted.clone())),
        });
        if writable {
            opened.writable.push(counted);
        }
    }
    opened
}

/// How many refreshes of `every` pass between two listings: about 30 s.
pub fn relist_every(every: Duration) -> u32 {
    (30 / every.as_secs().max(1)).max(1) as u32
}

/// The pod scan of `pod`, reading the proc filesystem at `proc_root`.
pub(crate) fn scan_options(pod: &PodArgs, proc_root: &Path) -> ScanOptions {
    ScanOptions {
        proc_root: proc_root.to_path_buf(),
        data_dirs: pod.data_dirs.clone(),
        pod_root: pod.pod_root,
        node: pod.node,
    }
}

/// The recipe of a complete snapshot for the front ends: the pod (unless
/// `--no-pod`, from `/proc`) and best-effort marking; no audit log (the
/// caller names one where it reads it once).
pub(crate) fn recipe(pod: &PodArgs, shared: &Shared) -> Recipe {
    Recipe {
        pods: (!pod.no_pod)
            .then(|| scan_options(pod, Path::new("/proc")))
            .into_iter()
            .collect(),
        best_effort: shared.best_effort,
        audit: None,
    }
}

/// The audit log a command reads: `given` (`--audit-log`), else the
/// platform's default (`None` when there is none: no home directory).
pub fn audit_path(given: Option<&Path>) -> Option<std::path::PathBuf> {
    match given {
        Some(p) => Some(p.to_path_buf()),
        None => AuditLog::default_path().ok(),
    }
}

/// Opens the audit log (and its remote copy, `--audit-to`).
///
/// # Errors
/// No default path, a log that cannot be opened, a bad or unreachable
/// `--audit-to`.
pub(crate) async fn open_audit(connector: &Connector, a: &AuditArgs) -> Result<AuditLog> {
    let path = match &a.audit_log {
        Some(p) => p.clone(),
        None => AuditLog::default_path()?,
    };
    let mut log = AuditLog::open(path)?;
    if let Some(url) = &a.audit_to {
        let t: Target = url.parse().map_err(|e| eyre!("--audit-to: {e}"))?;
        let store = connector.open(&t).await.map_err(|e| eyre!("{t}: {e}"))?;
        log = log.with_remote(store, t.prefix().to_owned());
    }
    Ok(log)
}

/// Says, before a writing command acts, exactly where its writes go (on
/// stderr, so scripts reading stdout are not disturbed).
pub(crate) async fn announce(what: &str, connector: &Connector, target: &Target) {
    let endpoint = match target {
        Target::Local { .. } => String::new(),
        Target::S3 { .. } => format!(" at {}", connector.endpoint(target).await),
    };
    tell(format_args!(
        "{what} on {}: the lease is the {}{endpoint}",
        sanitize(&target.to_string()),
        target.lease_location()
    ));
}
