//! The console's write side (OPS mode only): one background task that owns the
//! writable stores, runs probes and takeovers the operator confirmed, keeps
//! held leases alive, and releases them on quit; it also reads a prefix's
//! timeline from its versions for the timeline pane, in a task of its own. The UI sends it
//! [`WriteRequest`]s and receives the results as actions.
//!
//! Watch mode never builds this task: it has no writable store to give it.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::action::{Action, WriteRequest};
use crate::audit::{AuditLog, AuditTarget};
use crate::bucket::probe::probe_scratch;
use crate::bucket::probe::scratch_key;
use crate::bucket::CONDITIONAL_SWITCH;
use crate::bucket::{lease_key, KeepAlive};
use crate::clock::SharedClock;
use crate::snapshot::ExclusionReport;
use crate::store::ObjectRead;
use crate::store::ObjectStore;
use crate::takeover::{takeover_with, TakeoverRequest, WaitControl};
use crate::target::encode_path;
use crate::text::sanitize;
use crate::timeline::read::{audit_entries, Reading};

/// One target as the write side sees it.
#[derive(Clone)]
pub struct OpsTarget {
    /// The TARGET URL.
    pub url: String,
    /// Where its requests go.
    pub endpoint: String,
    /// Bucket, for S3.
    pub bucket: Option<String>,
    /// The writable store.
    pub store: Arc<dyn ObjectStore>,
    /// The prefix the target names (scratch keys go under it).
    pub root: String,
}

/// Everything the write side needs.
pub struct Ops {
    /// Targets, in the console's order.
    pub targets: Vec<OpsTarget>,
    /// The audit log takeovers write to.
    pub audit: AuditLog,
    /// The clock.
    pub clock: SharedClock,
}

impl Ops {
    /// Starts the write task; returns the command sender and the task.
    pub fn start(
        self,
        actions: mpsc::Sender<Action>,
    ) -> (mpsc::Sender<WriteRequest>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(16);
        let task = tokio::spawn(self.run(rx, actions));
        (tx, task)
    }

    async fn run(self, mut rx: mpsc::Receiver<WriteRequest>, actions: mpsc::Sender<Action>) {
        let mut held: BTreeMap<String, KeepAlive> = BTreeMap::new();
        while let Some(cmd) = rx.recv().await {
            match cmd {
                WriteRequest::Probe { target } => {
                    if let Some(done) = self.probe(target).await {
                        let _ = actions.send(done).await;
                    }
                }
                WriteRequest::Takeover {
                    target,
                    prefix,
                    seen,
                    watched_for,
                    reason,
                    then,
                    force,
                    lease,
                } => {
                    let Some(t) = self.targets.get(target) else {
                        continue;
                    };
                    let key = lease_key(&prefix);
                    let audit_target = audit_target(t, &key, &prefix);
                    let req = TakeoverRequest {
                        prefix,
                        seen,
                        watched_for,
                        reason,
                        then,
                        force,
                        ttl_s: lease.ttl_s,
                        exclusion: lease.exclusion,
                        record_format: lease.record_format,
                        target: audit_target,
                    };
                    let result = self
                        .takeover(t, &key, req, &rx, &mut held, actions.clone())
                        .await;
                    let _ = actions.send(Action::TakeoverDone { key, result }).await;
                }
                WriteRequest::ReadTimeline { target, prefix } => {
                    // A task of its own: a takeover waiting out a fence
                    // does not hold it back, nor it the takeover.
                    if let Some(t) = self.targets.get(target) {
                        tokio::spawn(read_timeline(
                            t.clone(),
                            target,
                            prefix,
                            self.audit.path().to_owned(),
                            self.clock.clone(),
                            actions.clone(),
                        ));
                    }
                }
                WriteRequest::ReleaseHeld => {
                    let mut lines = Vec::new();
                    for (key, keep) in std::mem::take(&mut held) {
                        let line = format!("{}: {}", sanitize(&key), keep.stop_and_release().await);
                        tracing::info!("{line}");
                        lines.push(line);
                    }
                    let _ = actions.send(Action::HeldReleased(lines)).await;
                }
            }
        }
        // The console is gone without asking: release what is still held.
        for (_, keep) in held {
            let _ = keep.stop_and_release().await;
        }
    }

    /// Probes target `target` (a scratch key under its prefix, written and
    /// removed) and says what it found; `None` for a target that is not there.
    async fn probe(&self, target: usize) -> Option<Action> {
        let t = self.targets.get(target)?;
        let key = scratch_key(&t.root);
        let probed = probe_scratch(t.store.as_ref(), &key, self.clock.as_ref()).await;
        let (result, text) = match probed {
            Ok(r) if r.not_atomic().is_some() => (
                ExclusionReport::Ignored,
                format!(
                    "{}: not atomic — {}: a lease there excludes nobody",
                    t.url,
                    r.not_atomic().unwrap_or_default()
                ),
            ),
            Ok(r) => match (r.ignored_header(), r.unsupported()) {
                (None, None) if r.adaptations().is_empty() => (
                    ExclusionReport::Conditional,
                    format!(
                        "{}: conditional (If-None-Match and If-Match honoured)",
                        t.url
                    ),
                ),
                (None, None) => (
                    ExclusionReport::Conditional,
                    format!(
                        "{}: conditional, adapted (etag_form: {}; release: {})",
                        t.url,
                        r.etag_form.as_str(),
                        r.release
                    ),
                ),
                (Some(h), _) => (
                    ExclusionReport::Ignored,
                    format!("{}: ignores {h}: a lease there excludes nobody", t.url),
                ),
                (None, Some(h)) => (
                    ExclusionReport::Ignored,
                    format!(
                        "{}: does not support conditional writes (refuses {h} itself): \
                         a lease there excludes nobody",
                        t.url
                    ),
                ),
            },
            Err(e) => (
                ExclusionReport::Error,
                format!("{}: probe failed: {e}", t.url),
            ),
        };
        // Steps passed: race the primitives too (as `probe --race`).
        let (result, text) = if result == ExclusionReport::Conditional {
            race_report(t.store.as_ref(), &key, &t.url, result, text).await
        } else {
            (result, text)
        };
        Some(Action::ProbeDone {
            target,
            result,
            message: text,
        })
    }

    /// Runs one confirmed takeover of `key` on `t`; a lease it holds
    /// afterwards (`--then hold`) joins `held`. The result is the report on
    /// one status line and the key now held, or why it failed.
    async fn takeover(
        &self,
        t: &OpsTarget,
        key: &str,
        req: TakeoverRequest,
        rx: &mpsc::Receiver<WriteRequest>,
        held: &mut BTreeMap<String, KeepAlive>,
        actions: mpsc::Sender<Action>,
    ) -> Result<(String, Option<String>), String> {
        // A forced takeover's wait for the replaced holder's fence
        // ends early when the console quits (the command channel
        // closes): the lease is then left to expire after that
        // fence, audited, never released or handed over early.
        // What the wait is for goes to the log and to the dialog, which
        // would otherwise say only "working…" for up to a TTL.
        let waiting_key = key.to_owned();
        let wait = WaitControl {
            notify: Box::new(move |s: &str| {
                tracing::warn!("{s}");
                let _ = actions.try_send(Action::TakeoverWaiting {
                    key: waiting_key.clone(),
                    text: s.to_owned(),
                });
            }),
            stop: Box::pin(async move {
                while !rx.is_closed() {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                "the console quitting".to_owned()
            }),
        };
        match takeover_with(t.store.clone(), self.clock.clone(), &self.audit, req, wait).await {
            Ok(done) => {
                // The same report as `leasectl takeover`, on one status line.
                let mut msg = done.to_string().replace('\n', "; ");
                let mut held_key = None;
                if let Some(lease) = done.held {
                    held.insert(key.to_owned(), KeepAlive::start(lease));
                    held_key = Some(key.to_owned());
                    msg.push_str("; held until released on quit");
                }
                Ok((msg, held_key))
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// The GETs of versions in flight at once while the timeline pane reads.
pub(crate) const TIMELINE_CONCURRENCY: usize = 32;

/// How far back the console's timeline pane reads the versions.
pub(crate) const TIMELINE_WINDOW: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Reads the timeline of `prefix` on `t` over the last [`TIMELINE_WINDOW`]
/// (every version of its LEASE object, and the audit log at
/// `audit`), as `leasectl timeline` does, and sends it as
/// [`Action::TimelineRead`].
async fn read_timeline(
    t: OpsTarget,
    target: usize,
    prefix: String,
    audit: std::path::PathBuf,
    clock: SharedClock,
    actions: mpsc::Sender<Action>,
) {
    use crate::timeline::build::{prefix_timeline, Inputs, Subject, Window};
    let (entries, audit_problems) =
        match tokio::task::spawn_blocking(move || audit_entries(&[audit])).await {
            Ok(read) => read,
            Err(e) => (
                Vec::new(),
                vec![format!("the audit log could not be read: {e}")],
            ),
        };
    let to = clock.wall();
    let store: &dyn ObjectRead = t.store.as_ref();
    let timeline = prefix_timeline(
        Ok(store),
        &Subject {
            url: t.url.clone(),
            bucket: t.bucket.as_deref(),
            prefix: &prefix,
        },
        &Window {
            from: Some(to - TIMELINE_WINDOW),
            to,
        },
        &Inputs {
            recordings: &[],
            entries: &entries,
            audit_problems: &audit_problems,
            // Every version read, as `leasectl timeline` reads them, fewer at
            // once: the console's refreshes go on beside it.
            reading: Reading {
                concurrency: TIMELINE_CONCURRENCY,
                ..Default::default()
            },
            progress: None,
        },
    )
    .await;
    let _ = actions
        .send(Action::TimelineRead {
            target,
            prefix,
            timeline: Box::new(timeline),
        })
        .await;
}

/// Where a takeover of `key` (under `prefix`) on `t` is recorded as having
/// gone: endpoint, region, addressing, bucket, key and the prefix's URL.
fn audit_target(t: &OpsTarget, key: &str, prefix: &str) -> AuditTarget {
    let info = t.store.endpoint_info();
    AuditTarget {
        endpoint: info.url,
        region: info.region,
        addressing_style: info.addressing_style,
        bucket: t.bucket.clone(),
        key: key.to_owned(),
        url: format!(
            "{}{}",
            t.url,
            encode_path(prefix.strip_prefix(t.root.as_str()).unwrap_or(prefix))
        ),
    }
}

/// The console's `p` after the seven steps passed: the race probe with the
/// defaults of `probe --race`, its verdict appended to the probe's line (or
/// replacing it with "not atomic").
async fn race_report(
    store: &dyn ObjectStore,
    key: &str,
    url: &str,
    result: ExclusionReport,
    text: String,
) -> (ExclusionReport, String) {
    use crate::bucket::race;
    match race::race(store, key, race::PROBE_CONTENDERS, race::PROBE_ROUNDS).await {
        Ok(r) => match r.finding() {
            Some(f) => (
                ExclusionReport::Ignored,
                format!(
                    "{url}: not atomic — {f}: a lease there excludes nobody; only best-effort \
                     mode ({}) can run",
                    CONDITIONAL_SWITCH
                ),
            ),
            None => (
                result,
                format!(
                    "{text}; race: atomic ({} rounds of {} concurrent requests, {})",
                    r.rounds,
                    r.contenders,
                    r.cost()
                ),
            ),
        },
        Err(e) => (
            ExclusionReport::Error,
            format!("{url}: race probe failed: {e}"),
        ),
    }
}
