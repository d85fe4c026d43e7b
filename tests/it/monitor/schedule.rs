//! Reading by need (issue 18): a scheduled `Gatherer` reads the rows in view
//! at every gather, fresh leases around the moment they could turn stale and
//! the others at the listing's cadence — on a real directory store, a clock
//! that moves only when told, and a holder that really rewrites its LEASE.
//! Also: 503 SlowDown answers slow the gather down instead of failing it
//! (a proxy in front of moto), and a long gather reports rows as they arrive.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use leasectl::bucket::LeaseState;
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{GatherOptions, Gatherer, OpenTarget, Progress, Snapshot};
use leasectl::store::local::LocalStore;
use leasectl::store::{GetOutput, Listing, ObjectRead, StoreError};

use crate::common::proxy::{Mode, Proxy};
use crate::common::{self, Moto, Server};

/// A real store that counts the GETs of each key and can answer slowly.
struct PerKey {
    inner: LocalStore,
    gets: Mutex<BTreeMap<String, usize>>,
    lists: Mutex<usize>,
    delay: Duration,
}

#[async_trait]
impl ObjectRead for PerKey {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        *self.lists.lock().unwrap() += 1;
        self.inner.list(prefix).await
    }
    async fn get(&self, key: &str, inm: Option<&str>) -> Result<GetOutput, StoreError> {
        *self.gets.lock().unwrap().entry(key.to_owned()).or_default() += 1;
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.get(key, inm).await
    }
    // The rest as the directory answers (no method of the trait has a default).
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        *self.lists.lock().unwrap() += 1;
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

fn t0() -> DateTime<Utc> {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn write_record_lease(dir: &Path, prefix: &str, holder: &str, renewed: DateTime<Utc>, ttl: u64) {
    std::fs::create_dir_all(dir.join(prefix)).unwrap();
    let body = format!(
        r#"{{"instance_id":"{holder}","acquired_at":"{}","renewed_at":"{}","ttl_s":{ttl}}}"#,
        stamp(t0()),
        stamp(renewed)
    );
    // Write then rename, as a holder's atomic PUT would look.
    let tmp = dir.join(prefix).join(".LEASE.tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(tmp, dir.join(prefix).join("LEASE")).unwrap();
}

fn state_of(s: &Snapshot, prefix: &str) -> Option<LeaseState> {
    s.targets[0]
        .prefixes
        .iter()
        .find(|p| p.prefix == prefix)
        .map(|p| p.state)
}

fn setup(dir: &Path, delay: Duration) -> (Arc<PerKey>, Vec<OpenTarget>) {
    let store = Arc::new(PerKey {
        inner: LocalStore::open(dir).unwrap(),
        gets: Mutex::default(),
        lists: Mutex::default(),
        delay,
    });
    let open = vec![OpenTarget {
        target: common::file_url(dir).parse().unwrap(),
        endpoint: "local".into(),
        store: store.clone(),
    }];
    (store, open)
}

#[tokio::test]
async fn a_scheduled_gatherer_reads_by_need_and_still_shows_expiry_in_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // long/: fresh for 10 minutes; stale/: expired long ago; empty/: no LEASE;
    // lapsing/: fresh, 30 s TTL, its holder gone; renewing/: 30 s TTL, renewed
    // every 10 s by a holder; shown/: stale, but on screen.
    write_record_lease(dir, "long", "h-long", t0(), 600);
    write_record_lease(
        dir,
        "stale",
        "h-stale",
        t0() - chrono::Duration::hours(1),
        30,
    );
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    write_record_lease(dir, "lapsing", "h-lapsing", t0(), 30);
    write_record_lease(dir, "renewing", "h-renewing", t0(), 30);
    write_record_lease(
        dir,
        "shown",
        "h-shown",
        t0() - chrono::Duration::hours(1),
        30,
    );

    let (store, open) = setup(dir, Duration::ZERO);
    let manual = Arc::new(ManualClock::new(t0()));
    let clock: SharedClock = manual.clone();
    let refresh = Duration::from_secs(5);
    let mut g = Gatherer::new(open.clone(), GatherOptions::default(), 6).schedule(refresh);
    g.focus()
        .set([(0usize, "shown/".to_owned())].into_iter().collect());

    // The same 120 s without a schedule, for comparison: every LEASE every gather.
    let (plain_store, plain_open) = setup(dir, Duration::ZERO);
    let mut plain = Gatherer::new(plain_open, GatherOptions::default(), 6);

    let gathers = 25; // 0 s … 120 s, every 5 s
    let mut lapsing_stale_at = None;
    for i in 0..gathers {
        let now = t0() + chrono::Duration::seconds(5 * i);
        if i > 0 && i % 2 == 0 {
            // The holder renews every 10 s.
            write_record_lease(dir, "renewing", "h-renewing", now, 30);
        }
        let snap = g.gather(&clock).await;
        let plain_snap = plain.gather(&clock).await;
        assert_eq!(
            state_of(&snap, "renewing/"),
            Some(LeaseState::Fresh),
            "a lease renewed every TTL/3 never looks stale (gather at +{}s)",
            5 * i
        );
        assert_eq!(state_of(&snap, "stale/"), Some(LeaseState::Stale));
        assert_eq!(state_of(&snap, "long/"), Some(LeaseState::Fresh));
        assert_eq!(state_of(&snap, "empty/"), Some(LeaseState::Absent));
        // Carried rows are judged at the gather's instant like read ones.
        assert_eq!(
            state_of(&snap, "lapsing/"),
            state_of(&plain_snap, "lapsing/"),
            "the schedule shows what reading everything shows (+{}s)",
            5 * i
        );
        if lapsing_stale_at.is_none() && state_of(&snap, "lapsing/") == Some(LeaseState::Stale) {
            lapsing_stale_at = Some(5 * i);
        }
        manual.advance(refresh);
    }
    // Expired at +30 s: shown stale by the first gather at or after it.
    assert_eq!(lapsing_stale_at, Some(30));

    let gets = store.gets.lock().unwrap().clone();
    let n = |p: &str| gets.get(&format!("{p}/LEASE")).copied().unwrap_or(0);
    let plain_gets: usize = plain_store.gets.lock().unwrap().values().sum();
    let total: usize = gets.values().sum();
    // On screen: every gather.
    assert_eq!(n("shown"), gathers as usize);
    // Fresh for 10 minutes: read once in two minutes.
    assert_eq!(n("long"), 1, "{gets:?}");
    // Stale and absent: at the listing's cadence (30 s ± 25 %), not every 5 s.
    assert!((3..=6).contains(&n("stale")), "{gets:?}");
    assert!((3..=6).contains(&n("empty")), "{gets:?}");
    // Lapsing: first read, once before expiry, once just after, then the cadence.
    assert!((3..=7).contains(&n("lapsing")), "{gets:?}");
    // Renewing every 10 s with a 30 s TTL: about every 20 s.
    assert!((5..=9).contains(&n("renewing")), "{gets:?}");
    assert!(
        total * 3 < plain_gets,
        "scheduled {total} GETs vs {plain_gets} reading everything"
    );
    // Listings: every 6th gather, with or without a schedule.
    assert_eq!(*store.lists.lock().unwrap(), 5);
}

#[tokio::test]
async fn a_long_gather_reports_rows_as_they_arrive() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for i in 0..300 {
        write_record_lease(dir, &format!("db{i:03}"), "h", t0(), 30);
    }
    // 300 reads of 10 ms, 4 at a time: about 0.75 s.
    let (_store, open) = setup(dir, Duration::from_millis(10));
    let clock: SharedClock = Arc::new(ManualClock::new(t0()));
    let opts = GatherOptions {
        concurrency: 4,
        ..GatherOptions::default()
    };
    let mut g = Gatherer::new(open, opts, 1);
    let reports: Mutex<Vec<(usize, usize, usize, bool)>> = Mutex::default();
    let sink = |p: Progress| {
        let rows = p.snapshot.targets[0].prefixes.len();
        reports
            .lock()
            .unwrap()
            .push((p.read, p.known, rows, p.listed));
    };
    let snap = g.gather_with_progress(&clock, Some(&sink)).await;
    assert_eq!(snap.targets[0].prefixes.len(), 300);
    let reports = reports.into_inner().unwrap();
    assert!(!reports.is_empty(), "no progress in a 0.75 s gather");
    for (read, known, rows, listed) in &reports {
        assert!(*read < 301 && *known <= 301, "{reports:?}");
        // Every row shown was read; none is made up.
        assert!(*rows <= *read, "{reports:?}");
        assert!(*listed, "a local listing is one page");
    }
    assert!(
        reports
            .iter()
            .any(|(read, _, rows, _)| *rows > 0 && *read < 300),
        "some report came before the end: {reports:?}"
    );
}

#[tokio::test]
async fn slow_down_answers_slow_the_gather_down_instead_of_failing_it() {
    let server = Server::Moto(Moto::Conditional);
    let (endpoint, bucket) = server.bucket("slow-down").await;
    let client = common::sdk_client(&endpoint);
    for i in 0..40 {
        let body = format!(
            r#"{{"instance_id":"h{i}","acquired_at":"2026-11-30T12:00:00Z","renewed_at":"2026-11-30T12:00:00Z","ttl_s":30}}"#
        );
        common::put_raw(
            &client,
            &bucket,
            &format!("b/p{i:02}/LEASE"),
            body.as_bytes(),
        )
        .await;
    }
    let port: u16 = url::Url::parse(&endpoint).unwrap().port().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    // Every third GET is refused with 503 SlowDown, retries included.
    proxy.slow_down_every(3);
    let ep = proxy.endpoint();
    let out = tokio::task::spawn_blocking(move || {
        common::leasectl(
            Some(&ep),
            &[
                "--json",
                "--no-pod",
                "--concurrency",
                "8",
                &format!("s3://{bucket}/b/"),
            ],
        )
    })
    .await
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let t = &doc["targets"][0];
    assert!(
        t["errors"].as_array().unwrap().is_empty() && t["error"].is_null(),
        "throttled reads were reported as errors: {t}"
    );
    assert_eq!(t["prefixes"].as_array().unwrap().len(), 40);
    assert!(
        proxy.slowed_down() >= 13,
        "the proxy slowed {} GETs",
        proxy.slowed_down()
    );
    // Every lease is stale (renewed long ago): exit 3, not 1 (unreachable).
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_refresh_that_changed_nothing_gives_no_new_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_record_lease(dir, "a", "h-a", t0(), 600);
    write_record_lease(dir, "b", "h-b", t0() - chrono::Duration::hours(1), 30);
    std::fs::create_dir_all(dir.join("c")).unwrap();
    let (store, open) = setup(dir, Duration::ZERO);
    let manual = Arc::new(ManualClock::new(t0()));
    let clock: SharedClock = manual.clone();
    let step = Duration::from_secs(5);
    let mut g = Gatherer::new(open, GatherOptions::default(), 6).schedule(step);
    g.focus()
        .set([(0usize, "a/".to_owned())].into_iter().collect());

    let first = g.gather_changed(&clock, None, false).await;
    assert_eq!(first.unwrap().targets[0].prefixes.len(), 3);
    manual.advance(step);
    // a/ (in view) was read again and is the same object: nothing to redraw.
    let reads = store.gets.lock().unwrap().get("a/LEASE").copied();
    assert!(g.gather_changed(&clock, None, false).await.is_none());
    assert_eq!(
        store.gets.lock().unwrap().get("a/LEASE").copied(),
        reads.map(|n| n + 1)
    );
    // Its holder renews: a new snapshot, with the new stamp.
    manual.advance(step);
    let renewed = t0() + chrono::Duration::seconds(10);
    write_record_lease(dir, "a", "h-a", renewed, 600);
    let s = g
        .gather_changed(&clock, None, false)
        .await
        .expect("a change");
    let a = s.targets[0]
        .prefixes
        .iter()
        .find(|p| p.prefix == "a/")
        .unwrap();
    assert_eq!(a.record.as_ref().unwrap().renewed_at, renewed);
    manual.advance(step);
    assert!(g.gather_changed(&clock, None, false).await.is_none());
    // Forced (the console scanned its pod): a snapshot all the same.
    assert!(g.gather_changed(&clock, None, true).await.is_some());
    // A prefix gone from the listing is a change once listed again (every
    // 6th gather: the 7th is the next listing).
    std::fs::remove_dir_all(dir.join("c")).unwrap();
    manual.advance(step);
    assert!(g.gather_changed(&clock, None, false).await.is_none());
    manual.advance(step);
    let s = g
        .gather_changed(&clock, None, false)
        .await
        .expect("the listing changed");
    assert_eq!(s.targets[0].prefixes.len(), 2);
}

/// Issue 27: under a budget (`Gatherer::budget`, the console's and serve's
/// `--max-requests`) a scheduled gatherer sends at most that many requests
/// a minute once every LEASE was read, whatever the population (here 300
/// stale leases, all due every ~30 s: 600 reads a minute by need), and
/// spends them by priority: the row in view at every gather, a fresh lease
/// that lapses off screen read at its expiry, the stale ones round robin
/// (each read in turn, none twice before all once). A budget that reads
/// nothing is not possible: at least one a minute.
#[tokio::test]
async fn a_budget_bounds_the_requests_and_spends_them_by_priority() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for i in 0..300 {
        write_record_lease(
            dir,
            &format!("s{i:03}"),
            "h-gone",
            t0() - chrono::Duration::hours(1),
            30,
        );
    }
    // Fresh, 30 s TTL, its holder gone: read at its expiry, off screen.
    write_record_lease(dir, "lapsing", "h-lapsing", t0(), 30);
    let (store, open) = setup(dir, Duration::ZERO);
    let manual = Arc::new(ManualClock::new(t0()));
    let clock: SharedClock = manual.clone();
    let refresh = Duration::from_secs(5);
    let per_min = 120; // 10 a refresh
    let mut g = Gatherer::new(open, GatherOptions::default(), 6)
        .schedule(refresh)
        .budget(per_min);
    g.focus()
        .set([(0usize, "s150/".to_owned())].into_iter().collect());

    // The first gather reads everything (not counted against the budget).
    g.gather(&clock).await;
    let total = |s: &PerKey| -> usize {
        s.gets.lock().unwrap().values().sum::<usize>() + *s.lists.lock().unwrap()
    };
    let after_first = total(&store);
    assert_eq!(
        after_first,
        301 + 1 + 1,
        "every LEASE, the root's, one listing"
    );
    let first_reads = store.gets.lock().unwrap().clone();

    // Four minutes of refreshes.
    let mut lapsing_stale_at = None;
    let mut per_minute = Vec::new();
    let mut minute_start = total(&store);
    for i in 1..=48 {
        manual.advance(refresh);
        let snap = g.gather(&clock).await;
        if lapsing_stale_at.is_none() && state_of(&snap, "lapsing/") == Some(LeaseState::Stale) {
            lapsing_stale_at = Some(5 * i);
        }
        if i % 12 == 0 {
            per_minute.push(total(&store) - minute_start);
            minute_start = total(&store);
        }
    }
    // Within the budget each minute (the listings included), with at most
    // one refresh's worth carried over.
    for (m, n) in per_minute.iter().enumerate() {
        assert!(
            *n <= per_min as usize + 10,
            "minute {m}: {n} requests for a budget of {per_min}/min ({per_minute:?})"
        );
    }
    // And it was spent once the stale rows came due (22–38 s after their
    // first read): reads by need, the budget only caps them.
    assert!(
        per_minute[1..]
            .iter()
            .all(|n| *n >= per_min as usize * 3 / 4),
        "{per_minute:?}"
    );
    let gets = store.gets.lock().unwrap().clone();
    let n = |p: &str| gets.get(&format!("{p}/LEASE")).copied().unwrap_or(0);
    // In view: every gather.
    assert_eq!(n("s150"), 1 + 48, "{gets:?}");
    // The lapsing lease was read at its expiry though the stale ones were
    // all due: before it (the last refresh before +30 s) and just after.
    assert!(n("lapsing") >= 3, "lapsing read {} times", n("lapsing"));
    assert_eq!(lapsing_stale_at, Some(30));
    // Round robin: after the first ~20 s, ~10 reads a refresh, less the
    // row in view, the lapsing one and the listings: ~370 reads over the 299
    // stale rows off screen, so each was read once or twice since the first
    // gather, none twice while another was not read at all.
    let again: Vec<usize> = (0..300)
        .filter(|i| *i != 150)
        .map(|i| n(&format!("s{i:03}")) - first_reads[&format!("s{i:03}/LEASE")])
        .collect();
    let (lo, hi) = (again.iter().min().unwrap(), again.iter().max().unwrap());
    assert!(
        hi - lo <= 1,
        "reads per stale row since the first gather: {lo}..={hi}"
    );
    assert!(
        *lo >= 1,
        "every stale row was read again within four minutes"
    );
}
