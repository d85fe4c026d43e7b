//! `serve` as a multi-target exporter (issue 47): a scrape names the
//! TARGET it wants and the module (a context of the config file) that says
//! how to reach it, `/probe?target=URL&module=NAME`, as Prometheus's
//! blackbox exporter has it; service discovery and sharding stay
//! Prometheus's.
//!
//! A probe answers the families `/metrics` has for a target
//! ([`Metrics::probe`]) and `leasectl_probe_success` and
//! `leasectl_probe_duration_seconds`, within the scrape's own timeout
//! ([`request::probe_timeout`]): its gather ends at that deadline
//! ([`Gatherer::gather_by`]), and what it did not read by then is an error
//! of its row or its target, never a reading shown as healthy. Between
//! scrapes each target's state — its listing, its LEASE readings with their
//! ETags (conditional GETs), when each is due again (reading by need, as
//! `serve`'s own gathers do), its holder history (the change counters) — is
//! kept in a [`StateCache`], bounded by targets and bytes, forgetting
//! targets no longer scraped.
//!
//! A module reads only the TARGETs of its [`AllowList`]; a request for
//! another, for an unknown module, or with a TARGET the command line would
//! refuse (credentials, a query) is refused with a sentence (HTTP 400) and
//! reads nothing.

pub mod allow;
pub mod cache;
pub mod request;
pub mod runner;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::audit::{AuditEntry, AuditTail};
use crate::clock::SharedClock;
use crate::snapshot::{
    GatherOptions, Gatherer, OpenTarget, ReaderClock, Recipe, Snapshot, TargetReport,
    SCHEMA_VERSION,
};
use crate::store::{Counters, Counting, ObjectStore, ReadOnly, Unavailable};
use crate::target::{Connector, Target, TargetError};
use crate::text::sanitize;

use super::family::SortedFamily;
pub use super::prometheus::Exposition;
use super::prometheus::Metrics;
pub use allow::AllowList;
pub use cache::{Bounds, CacheStats, CheckOut, Forgot, StateCache, Weigh};
pub use request::{parse_query, probe_timeout, ProbeParams, SCRAPE_TIMEOUT_HEADER};
pub use runner::ProbeRunner;

/// Opens a TARGET's store for a module: read-only, each request counted.
#[async_trait]
pub trait OpenStores: Send + Sync {
    /// The target ready to be gathered, its requests counted in `counters`
    /// (a store that cannot be opened is one whose every request fails:
    /// the target is then reported as not read, never as empty).
    async fn open(&self, target: &Target, counters: &Arc<Counters>) -> OpenTarget;
}

/// [`OpenStores`] through a [`Connector`] (one module's endpoint, region,
/// profile, addressing and request timeout), sharing one S3 handle per
/// bucket among the targets in it for as long as one of them is kept (its
/// connections, its clock-offset estimate).
pub struct ConnectorStores {
    connector: Connector,
    buckets: Mutex<BTreeMap<String, std::sync::Weak<dyn ObjectStore>>>,
}

impl ConnectorStores {
    /// Stores opened through `connector`.
    pub fn new(connector: Connector) -> Self {
        Self {
            connector,
            buckets: Mutex::new(BTreeMap::new()),
        }
    }

    /// The store of `target`: the bucket's shared one while it lives, else
    /// a new one (kept for the next target of the bucket).
    async fn store(&self, target: &Target) -> Arc<dyn ObjectStore> {
        let bucket = target.bucket().map(str::to_owned);
        if let Some(b) = &bucket {
            let found = self
                .buckets
                .lock()
                .ok()
                .and_then(|m| m.get(b).and_then(std::sync::Weak::upgrade));
            if let Some(s) = found {
                return s;
            }
        }
        let store: Arc<dyn ObjectStore> = match self.connector.open(target).await {
            Ok(s) => s,
            Err(e) => Arc::new(Unavailable::new(target.to_string(), e)),
        };
        if let (Some(b), Ok(mut m)) = (bucket, self.buckets.lock()) {
            // Buckets whose every target was forgotten go with them.
            m.retain(|_, w| w.strong_count() > 0);
            m.insert(b, Arc::downgrade(&store));
        }
        store
    }
}

#[async_trait]
impl OpenStores for ConnectorStores {
    async fn open(&self, target: &Target, counters: &Arc<Counters>) -> OpenTarget {
        let store = self.store(target).await;
        let counted: Arc<dyn ObjectStore> = Arc::new(Counting::new(store, counters.clone()));
        OpenTarget {
            target: target.clone(),
            endpoint: self.connector.endpoint(target).await,
            store: Arc::new(ReadOnly::new(counted)),
        }
    }
}

/// One module: a context of the config file, as the front end resolved it.
pub struct ProbeModule {
    /// How its TARGETs' stores are opened.
    pub stores: Arc<dyn OpenStores>,
    /// Its depth, concurrency and request timeout.
    pub gather: GatherOptions,
    /// Best-effort mode was chosen for it: every prefix's exclusion.
    pub best_effort: bool,
    /// The TARGETs it may read.
    pub allow: AllowList,
}

/// How probes are answered.
pub struct ProbeOptions {
    /// The state kept between scrapes.
    pub bounds: Bounds,
    /// Taken off the scrape's timeout for the answer's way back.
    pub timeout_offset: Duration,
    /// The longest a probe takes (also without a scrape timeout header).
    pub max_timeout: Duration,
}

/// What a probe answers.
pub enum ProbeAnswer {
    /// The request is refused (HTTP 400): the sentence says why. Nothing was read.
    Refused(String),
    /// The target's families (HTTP 200), whether or not it could be read.
    Metrics(Exposition),
}

/// One probed target's state between scrapes.
pub struct TargetState {
    gatherer: Gatherer,
    metrics: Metrics,
    counters: Arc<Counters>,
    /// When it was last probed.
    last: Option<Instant>,
}

/// Boxed in the cache: the map's spare room is then a pointer a slot, not
/// a whole state.
impl Weigh for Box<TargetState> {
    fn bytes(&self) -> usize {
        // The gatherer's readings (counted), and what
        // examples/probe_state_bytes.rs measured besides them: about 460
        // bytes a prefix (its row of the families, its holder history, the
        // maps' nodes; 540 before the history's entry shrank, issue 50) and
        // 1,800 for the rest (the metric handles, the store's wrappers, the
        // cache's slot).
        self.gatherer.held_bytes() + 460 * self.metrics.history().prefixes() + 1800
    }
}

/// The answerer of `/probe` (module docs).
pub struct Prober {
    modules: BTreeMap<String, ProbeModule>,
    cache: StateCache<Box<TargetState>>,
    opts: ProbeOptions,
    clock: SharedClock,
    audit: Mutex<SharedAudit>,
    families: CacheFamilies,
}

/// The audit log the probes name takeovers from, read at most once a second.
struct SharedAudit {
    /// The log (taken out while it is read).
    tail: Option<AuditTail>,
    entries: Arc<Vec<AuditEntry>>,
    read: Option<Instant>,
}

/// `serve`'s families of the probes' state (on `/metrics`).
#[derive(Default)]
struct CacheFamilies {
    targets: Gauge,
    bytes: Gauge,
    max_targets: Gauge,
    max_bytes: Gauge,
    forget_after: Gauge,
    forgotten: SortedFamily<ReasonLabels, Counter>,
}

/// `{reason}` of a forgotten state.
#[derive(
    Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, prometheus_client::encoding::EncodeLabelSet,
)]
struct ReasonLabels {
    /// [`Forgot::label`].
    reason: &'static str,
}

impl Prober {
    /// A prober of `modules` (by name), keeping state within `opts.bounds`,
    /// naming takeovers from the audit log at `audit` (None: none named).
    pub fn new(
        modules: BTreeMap<String, ProbeModule>,
        opts: ProbeOptions,
        clock: SharedClock,
        audit: Option<std::path::PathBuf>,
    ) -> Self {
        let families = CacheFamilies::default();
        families.max_targets.set(opts.bounds.max_targets as i64);
        families.max_bytes.set(opts.bounds.max_bytes as i64);
        families
            .forget_after
            .set(opts.bounds.forget_after.as_secs() as i64);
        for f in Forgot::ALL {
            families
                .forgotten
                .get_or_create(&ReasonLabels { reason: f.label() });
        }
        Self {
            modules,
            cache: StateCache::new(opts.bounds),
            opts,
            clock,
            audit: Mutex::new(SharedAudit {
                tail: audit.map(|p| AuditTail::new(p, AUDIT_KEEP)),
                entries: Arc::default(),
                read: None,
            }),
            families,
        }
    }

    /// The modules' names.
    pub fn module_names(&self) -> impl Iterator<Item = &str> {
        self.modules.keys().map(String::as_str)
    }

    /// What the cache holds now.
    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Registers the families of the probes' state in `registry` (`/metrics`):
    /// the bounds, what is kept, what was forgotten and why.
    pub fn register(&self, registry: &mut Registry) {
        let s = self.cache.stats();
        let f = &self.families;
        f.targets.set(s.targets as i64);
        f.bytes.set(s.bytes as i64);
        for (why, n) in Forgot::ALL.iter().zip(s.forgotten) {
            let c = f.forgotten.get_or_create(&ReasonLabels {
                reason: why.label(),
            });
            c.inc_by(n.saturating_sub(c.get()));
        }
        registry.register(
            "probe_state_targets",
            "Targets whose state serve keeps between probes",
            f.targets.clone(),
        );
        registry.register(
            "probe_state_max_targets",
            "The most targets whose state is kept (--probe-max-targets); the least recently probed is forgotten first",
            f.max_targets.clone(),
        );
        registry.register(
            "probe_state_bytes",
            "About how many bytes the kept states hold (an estimate from their sizes)",
            f.bytes.clone(),
        );
        registry.register(
            "probe_state_max_bytes",
            "About the most bytes of state kept (--probe-max-bytes)",
            f.max_bytes.clone(),
        );
        registry.register(
            "probe_state_forget_after_seconds",
            "A target not probed for this long is forgotten (--probe-forget-after)",
            f.forget_after.clone(),
        );
        registry.register(
            "probe_state_forgotten",
            "Target states forgotten, by reason: targets or bytes (over a bound), unscraped (not probed for --probe-forget-after), abandoned (its probe ended without putting it back: serve stopping, or a probe that failed)",
            f.forgotten.clone(),
        );
    }

    /// Answers one probe: `query` is the request's query string, `timeout`
    /// its scrape timeout header (seconds), if any.
    pub async fn answer(&self, query: &str, timeout: Option<&str>) -> ProbeAnswer {
        let start = Instant::now();
        let (target, module, name, length) = match self.check(query, timeout) {
            Ok(c) => c,
            Err(why) => return ProbeAnswer::Refused(why),
        };
        let deadline = start + length;
        let key = format!("{name}\n{target}");
        let mut taken = match self.cache.check_out(&key, deadline).await {
            CheckOut::Taken(t) => t,
            CheckOut::Busy => {
                let why = "another probe of this target and module was still under way at this one's deadline";
                return ProbeAnswer::Metrics(self.unread(&target, why, start));
            }
        };
        let mut state = match taken.state.take() {
            Some(s) => s,
            None => {
                let counters = Arc::new(Counters::default());
                let open =
                    match tokio::time::timeout_at(deadline, module.stores.open(&target, &counters))
                        .await
                    {
                        Ok(o) => o,
                        Err(_) => {
                            let why = "its store could not be opened within the probe's deadline";
                            return ProbeAnswer::Metrics(self.unread(&target, why, start));
                        }
                    };
                Box::new(TargetState {
                    gatherer: Gatherer::new(vec![open], module.gather.clone(), 1)
                        .schedule(FIRST_INTERVAL),
                    metrics: Metrics::probe(),
                    counters,
                    last: None,
                })
            }
        };
        if let Some(last) = state.last {
            // Reading by need, for probes as far apart as these two.
            state.gatherer.set_refresh(start.duration_since(last));
        }
        state.last = Some(start);
        let mut snap = state.gatherer.gather_by(&self.clock, deadline).await;
        let recipe = Recipe {
            best_effort: module.best_effort,
            ..Recipe::default()
        };
        recipe.mark_snapshot(&mut snap);
        let audit = self.audit_entries().await;
        state
            .metrics
            .update(&snap, &state.counters, false, &audit[..]);
        let success = snap
            .targets
            .iter()
            .all(|t| t.error.is_none() && t.errors.is_empty());
        state.metrics.set_probe(success, start.elapsed());
        let exposition = state.metrics.exposition();
        state.metrics.forget_gauges();
        taken.put(state);
        ProbeAnswer::Metrics(exposition)
    }

    /// The request's TARGET, module (and its name) and how long the probe
    /// may take; or why it is refused.
    fn check(
        &self,
        query: &str,
        timeout: Option<&str>,
    ) -> Result<(Target, &ProbeModule, &str, Duration), String> {
        let p = parse_query(query)?;
        let Some((name, module)) = self.modules.get_key_value(&p.module) else {
            let known: Vec<&str> = self.module_names().collect();
            return Err(format!(
                "there is no module `{}`; the modules are the contexts of the config file that serve was given: {}",
                sanitize(&p.module),
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            ));
        };
        let target: Target = p.target.parse().map_err(|e: TargetError| e.to_string())?;
        if !module.allow.permits(&target) {
            let allowed: Vec<String> = module
                .allow
                .entries()
                .iter()
                .map(|t| t.to_string())
                .collect();
            return Err(format!(
                "module `{name}` may not read {}: it reads only TARGETs at or under {}",
                sanitize(&target.to_string()),
                if allowed.is_empty() {
                    "nothing (its context names no TARGET and no allow-list)".to_owned()
                } else {
                    sanitize(&allowed.join(", "))
                }
            ));
        }
        let length = probe_timeout(timeout, self.opts.timeout_offset, self.opts.max_timeout)?;
        Ok((target, module, name.as_str(), length))
    }

    /// The answer of a probe that read nothing of `target`, for `why`: the
    /// target not up, an error counted, the probe failed.
    fn unread(&self, target: &Target, why: &str, start: Instant) -> Exposition {
        let now = self.clock.wall();
        let snap = Snapshot {
            schema_version: SCHEMA_VERSION,
            generated_at: now,
            reader_clock: ReaderClock {
                now,
                server_offset_s: None,
                server_offset_error_s: None,
            },
            targets: vec![TargetReport {
                url: target.to_string(),
                endpoint: String::new(),
                endpoint_url: None,
                region: None,
                addressing_style: None,
                bucket: target.bucket().map(str::to_owned),
                error: Some(why.to_owned()),
                errors: Vec::new(),
                prefixes: Vec::new(),
                server_offset_s: None,
                server_offset_error_s: None,
                server_clock_note: None,
                deeper_leases: None,
            }],
            pod: Default::default(),
            pod_error: None,
            audit_log: None,
        };
        let mut m = Metrics::probe();
        m.update(&snap, &Counters::default(), false, &[]);
        m.set_probe(false, start.elapsed());
        m.exposition()
    }

    /// The audit log's latest entries, read again when a second has passed
    /// (on a blocking thread; the lock is not held while it is read).
    async fn audit_entries(&self) -> Arc<Vec<AuditEntry>> {
        let tail = {
            let Ok(mut a) = self.audit.lock() else {
                return Arc::default();
            };
            let due = a.read.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
            match a.tail.take_if(|_| due) {
                Some(t) => {
                    a.read = Some(Instant::now());
                    t
                }
                None => return a.entries.clone(),
            }
        };
        let read = tokio::task::spawn_blocking(move || {
            let mut tail = tail;
            if let Err(e) = tail.poll() {
                tracing::debug!("the audit log could not be read for a probe: {e}");
            }
            let v = tail.entries();
            (tail, v)
        })
        .await;
        let Ok(mut a) = self.audit.lock() else {
            return Arc::default();
        };
        if let Ok((tail, v)) = read {
            a.tail = Some(tail);
            a.entries = Arc::new(v);
        }
        a.entries.clone()
    }
}

/// The refresh a target's first gather is scheduled for, until a second
/// probe tells how far apart they come: 30 s.
const FIRST_INTERVAL: Duration = Duration::from_secs(30);

/// The audit entries kept to name takeovers.
const AUDIT_KEEP: usize = 200;

#[cfg(test)]
mod tests;
