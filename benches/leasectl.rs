//! `cargo bench`: the hot paths of the console and of `--json`, measured with
//! criterion. Targets (see PERFORMANCE.md) live here and in
//! `scripts/compare.sh`, never in timed unit tests.
//!
//! - `lease/parse_judge`: one LEASE body parsed and judged (per record).
//! - `render/leases_10k_*`: one frame of the leases view with 10,000 rows into
//!   a 200×50 `TestBackend` (top of the table, and scrolled to the end), and
//!   the once-a-second tick that re-judges every row.
//! - `pod_scan/*`: a scan of this machine's whole `/proc` (auto-detected pod,
//!   and `--pod-root 1`, i.e. every process), topped up to 1,000 processes
//!   with `sleep` children (`LEASECTL_BENCH_PROCS=N` to change; 0 for none).
//! - `gather/*`: snapshot assembly (discovery + 10,000 GETs + judgement) from
//!   an in-memory store and from a `LocalStore` directory.
//! - `console_refresh/*`: a console's refresh at 10,000 rows when 100 rows in
//!   view changed (a new ETag each): the gather and the console taking it,
//!   as a whole snapshot (`whole_10k`) or as the changed rows (`rows_10k`,
//!   what the console does).
//!
//! `cargo test --all-targets` builds this file and runs it without `--bench`:
//! `main` then returns at once, so the test suite never runs a benchmark.

use std::collections::{BTreeMap, HashSet};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use criterion::Criterion;
use leasectl::bucket::{judge, LeaseRecord, Observed};
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget, Snapshot};
use leasectl::store::local::LocalStore;
use leasectl::store::{GetOutput, Listing, ObjectMeta, ObjectRead, StoreError};
use leasectl::tui::app::{Action, App};
use leasectl::tui::ui::render;
use leasectl::writer::scan::{scan, ScanOptions};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const ROWS: usize = 10_000;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// The body a holder writes, renewed `age_s` seconds before [`now`].
fn body(i: usize, age_s: i64) -> Vec<u8> {
    let r = LeaseRecord {
        instance_id: format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        acquired_at: now() - chrono::Duration::hours(1),
        renewed_at: now() - chrono::Duration::seconds(age_s),
        ttl_s: 30,
        generation: None,
        released_at: None,
    };
    r.to_body()
}

/// A realistic mix: mostly fresh, some stale, a few malformed, some absent.
fn lease_body(i: usize) -> Option<Vec<u8>> {
    match i % 20 {
        0 => None,
        1 => Some(b"{not json".to_vec()),
        2..=4 => Some(body(i, 120)),
        _ => Some(body(i, (i % 25) as i64)),
    }
}

fn prefix(i: usize) -> String {
    format!("backups/db{i:05}/")
}

/// An in-memory store: one listing level under `backups/`, one LEASE per prefix.
struct MemStore {
    prefixes: Vec<String>,
    objects: BTreeMap<String, GetOutput>,
}

impl MemStore {
    fn seeded(n: usize) -> Self {
        let mut prefixes = Vec::new();
        let mut objects = BTreeMap::new();
        for i in 0..n {
            let p = prefix(i);
            if let Some(b) = lease_body(i) {
                let key = format!("{p}LEASE");
                objects.insert(
                    key.clone(),
                    GetOutput {
                        meta: ObjectMeta {
                            key,
                            etag: Some(format!("{i:032x}")),
                            last_modified: Some(now() - chrono::Duration::seconds(2)),
                            size: b.len() as u64,
                        },
                        body: b,
                        problem: None,
                        links: None,
                    },
                );
            }
            prefixes.push(p);
        }
        Self { prefixes, objects }
    }
}

#[async_trait]
impl ObjectRead for MemStore {
    fn describe(&self) -> String {
        "memory".into()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let prefixes = if prefix == "backups/" {
            self.prefixes.clone()
        } else {
            Vec::new()
        };
        Ok(Listing {
            prefixes,
            ..Listing::default()
        })
    }
    async fn get(&self, key: &str, _: Option<&str>) -> Result<GetOutput, StoreError> {
        self.objects
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(key.to_owned()))
    }
    // A store in memory: one page, no clock of its own, no versions.
    async fn list_page(
        &self,
        prefix: &str,
        _token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.list(prefix).await.map(|l| (l, None))
    }
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Err(leasectl::store::no_sample("memory", prefix))
    }
    fn server_offset(&self) -> Option<leasectl::clock::ServerOffset> {
        None
    }
    fn server_clock_problem(&self) -> Option<String> {
        None
    }
    fn has_clock(&self) -> bool {
        true
    }
    fn endpoint_info(&self) -> leasectl::store::EndpointInfo {
        leasectl::store::EndpointInfo::default()
    }
    fn unavailable(&self) -> Option<StoreError> {
        None
    }
    async fn list_versions(&self, key: &str) -> Result<leasectl::store::KeyVersions, StoreError> {
        Err(leasectl::store::no_versions("memory", key))
    }
    async fn get_version(&self, key: &str, _: &str) -> Result<GetOutput, StoreError> {
        Err(leasectl::store::no_versions("memory", key))
    }
}

/// [`MemStore`] whose LEASEs of the first [`CHURN`] prefixes get a new ETag
/// at each epoch (as renewing holders' do).
struct Churn {
    inner: MemStore,
    epoch: AtomicU64,
}

/// Rows in view that change at every refresh in `console_refresh/*`.
const CHURN: usize = 100;

#[async_trait]
impl ObjectRead for Churn {
    fn describe(&self) -> String {
        "memory".into()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.inner.list(prefix).await
    }
    async fn get(&self, key: &str, _: Option<&str>) -> Result<GetOutput, StoreError> {
        let mut out = self.inner.get(key, None).await?;
        let churns = (0..CHURN).any(|i| key.starts_with(&prefix(i)));
        if churns {
            let e = self.epoch.load(Ordering::Relaxed);
            out.meta.etag = out.meta.etag.map(|t| format!("{t}-{e}"));
        }
        Ok(out)
    }
    // The rest as the store it wraps.
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.inner.list_page(prefix, token).await
    }
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.sample_keys(prefix).await
    }
    fn server_offset(&self) -> Option<leasectl::clock::ServerOffset> {
        self.inner.server_offset()
    }
    fn server_clock_problem(&self) -> Option<String> {
        self.inner.server_clock_problem()
    }
    fn has_clock(&self) -> bool {
        self.inner.has_clock()
    }
    fn endpoint_info(&self) -> leasectl::store::EndpointInfo {
        self.inner.endpoint_info()
    }
    fn unavailable(&self) -> Option<StoreError> {
        self.inner.unavailable()
    }
    async fn list_versions(&self, key: &str) -> Result<leasectl::store::KeyVersions, StoreError> {
        self.inner.list_versions(key).await
    }
    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        self.inner.get_version(key, version_id).await
    }
}

fn target(url: &str, store: Arc<dyn ObjectRead>) -> Vec<OpenTarget> {
    vec![OpenTarget {
        target: url.parse().unwrap(),
        endpoint: "bench".into(),
        store,
    }]
}

fn clock() -> SharedClock {
    Arc::new(ManualClock::new(now()))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn mem_snapshot(rt: &tokio::runtime::Runtime, n: usize) -> Snapshot {
    let open = target("s3://bench/backups/", Arc::new(MemStore::seeded(n)));
    rt.block_on(snapshot::gather(&open, &GatherOptions::default(), &clock()))
}

fn bench_parse_judge(c: &mut Criterion) {
    let bodies: Vec<Vec<u8>> = (0..64).filter_map(lease_body).collect();
    let mut i = 0;
    c.bench_function("lease/parse_judge", |b| {
        b.iter(|| {
            i = (i + 1) % bodies.len();
            let body = &bodies[i];
            let record = LeaseRecord::parse(black_box(body), body.len() as u64)
                .map_err(|m| (m.0, String::new()));
            let obs = Observed::Present {
                etag: None,
                last_modified: Some(now()),
                record,
            };
            black_box(judge(&obs, black_box(now())))
        })
    });
}

/// A read-only console over the bench's target, 200×50, no pod scan.
fn console() -> App {
    let mut app = App::new(
        vec!["s3://bench/backups/".parse().unwrap()],
        true,
        Duration::from_secs(5),
        now(),
    )
    .without_pod();
    app.update(Action::Resize(200, 50));
    app
}

fn bench_render(c: &mut Criterion) {
    let rt = runtime();
    let snap = mem_snapshot(&rt, ROWS);
    assert_eq!(snap.targets[0].prefixes.len(), ROWS);
    let mut app = console();
    app.update(Action::Snapshot(Box::new(snap)));
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();

    let mut g = c.benchmark_group("render");
    g.bench_function("leases_10k_top_200x50", |b| {
        b.iter(|| {
            term.draw(|f| render(&app, f)).unwrap();
        })
    });
    app.update(Action::End);
    g.bench_function("leases_10k_end_200x50", |b| {
        b.iter(|| {
            term.draw(|f| render(&app, f)).unwrap();
        })
    });
    let mut t = now();
    g.bench_function("tick_rejudge_10k", |b| {
        b.iter(|| {
            t += chrono::Duration::seconds(1);
            app.update(Action::Tick(t));
        })
    });
    g.finish();
}

fn count_procs() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count()
        })
        .unwrap_or(0)
}

/// Tops the machine up to `LEASECTL_BENCH_PROCS` processes (default 1,000,
/// the target's size) with `sleep` children, one in ten carrying
/// `CLOUD_WRITER_LEASE=1`. They are killed when the guard drops.
struct Sleepers(Vec<std::process::Child>);

impl Sleepers {
    fn top_up() -> Self {
        let want: usize = std::env::var("LEASECTL_BENCH_PROCS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let need = want.saturating_sub(count_procs());
        let kids = (0..need)
            .filter_map(|i| {
                let mut c = std::process::Command::new("sleep");
                c.arg("600").stdin(std::process::Stdio::null());
                if i % 10 == 0 {
                    c.env("CLOUD_WRITER_LEASE", "1");
                }
                c.spawn().ok()
            })
            .collect();
        Sleepers(kids)
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

fn bench_pod_scan(c: &mut Criterion) {
    let _sleepers = Sleepers::top_up();
    eprintln!("pod_scan: {} processes in /proc", count_procs());
    let mut g = c.benchmark_group("pod_scan");
    let auto = ScanOptions::default();
    g.bench_function("auto_pod", |b| b.iter(|| black_box(scan(&auto).unwrap())));
    let all = ScanOptions {
        pod_root: Some(1),
        ..ScanOptions::default()
    };
    g.bench_function("pod_root_1_all", |b| {
        b.iter(|| black_box(scan(&all).unwrap()))
    });
    g.finish();
}

fn bench_gather(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("gather");
    g.sample_size(20);
    let mem = target("s3://bench/backups/", Arc::new(MemStore::seeded(ROWS)));
    g.bench_function("memory_10k", |b| {
        b.iter(|| {
            black_box(rt.block_on(snapshot::gather(&mem, &GatherOptions::default(), &clock())))
        })
    });

    let dir = tempfile::tempdir().unwrap();
    for i in 0..ROWS {
        let d = dir.path().join(prefix(i));
        std::fs::create_dir_all(&d).unwrap();
        if let Some(b) = lease_body(i) {
            std::fs::write(d.join("LEASE"), b).unwrap();
        }
    }
    // A file:// target is the store's root directory itself.
    let root = dir.path().join("backups");
    let local = target(
        &format!("file://{}/", root.display()),
        Arc::new(LocalStore::open(&root).unwrap()),
    );
    g.bench_function("local_store_10k", |b| {
        b.iter(|| {
            let s = rt.block_on(snapshot::gather(
                &local,
                &GatherOptions::default(),
                &clock(),
            ));
            assert_eq!(s.targets[0].prefixes.len(), ROWS);
            black_box(s)
        })
    });
    // A console's steady state: a scheduled gatherer after its first
    // gather, nothing in view and nothing due — what each refresh costs
    // when nothing changed (assembling 10,000 rows from their last reading).
    let mut sched = snapshot::Gatherer::new(local.clone(), GatherOptions::default(), u32::MAX)
        .schedule(Duration::from_secs(5));
    let clk = clock();
    rt.block_on(sched.gather(&clk));
    g.bench_function("scheduled_refresh_10k", |b| {
        b.iter(|| black_box(rt.block_on(sched.gather(&clk))))
    });
    // The console's holder history over one 10,000-row refresh.
    let snap = mem_snapshot(&rt, ROWS);
    let mut history = leasectl::snapshot::history::History::new();
    history.observe(&snap, &[]);
    g.bench_function("history_observe_10k", |b| {
        b.iter(|| history.observe(black_box(&snap), &[]))
    });
    // Serialising the 10,000-row document, as `--json` does.
    g.bench_function("json_10k", |b| {
        b.iter(|| black_box(serde_json::to_string_pretty(&snap).unwrap()))
    });
    g.finish();
}

fn bench_console_refresh(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("console_refresh");
    g.sample_size(30);
    for rows_alone in [false, true] {
        let store = Arc::new(Churn {
            inner: MemStore::seeded(ROWS),
            epoch: AtomicU64::new(0),
        });
        let open = target("s3://bench/backups/", store.clone());
        let mut gatherer = snapshot::Gatherer::new(open, GatherOptions::default(), u32::MAX)
            .schedule(Duration::from_secs(5));
        // The changing rows are on screen: read at every refresh.
        gatherer
            .focus()
            .set((0..CHURN).map(|i| (0, prefix(i))).collect::<HashSet<_>>());
        let clk = clock();
        let mut app = console();
        app.update(Action::Snapshot(Box::new(
            rt.block_on(gatherer.gather(&clk)),
        )));
        let name = if rows_alone { "rows_10k" } else { "whole_10k" };
        g.bench_function(name, |b| {
            b.iter(|| {
                store.epoch.fetch_add(1, Ordering::Relaxed);
                let action = if rows_alone {
                    match rt.block_on(gatherer.gather_refresh(&clk, None)) {
                        snapshot::Refresh::Rows(d) => Action::Rows(Box::new(d)),
                        other => panic!("expected changed rows, got {other:?}"),
                    }
                } else {
                    let s = rt.block_on(gatherer.gather_changed(&clk, None, false));
                    Action::Snapshot(Box::new(s.expect("100 rows changed")))
                };
                app.update(action);
            })
        });
    }
    g.finish();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("benchmarks run only under `cargo bench`; skipped");
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench_parse_judge(&mut c);
    bench_render(&mut c);
    bench_pod_scan(&mut c);
    bench_gather(&mut c);
    bench_console_refresh(&mut c);
    c.final_summary();
}
