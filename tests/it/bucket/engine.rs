//! The bucket-lease engine against real servers: moto 5.2.5 (conditional, single-threaded),
//! moto 5.0.14 (ignores preconditions), the local store, and proxies the harness owns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::proxy::{Mode, Proxy};
use crate::common::*;
use chrono::Utc;
use leasectl::bucket::{
    BucketLease, Exclusion, KeepAlive, LeaseConfig, LeaseError, LeaseRecord, LeaseWatch, Released,
};
use leasectl::clock::{ManualClock, SharedClock, SkewedClock, SystemClock};
use leasectl::store::local::LocalStore;
use leasectl::store::{ObjectRead, ObjectStore, PutCondition};

fn sys() -> SharedClock {
    SystemClock::shared()
}

fn best_effort(ttl_s: u64) -> LeaseConfig {
    LeaseConfig {
        ttl_s,
        exclusion: Exclusion::BestEffort,
        ..LeaseConfig::default()
    }
}

async fn moto_bucket(kind: Moto, test: &str) -> (String, String) {
    Server::Moto(kind).bucket(test).await
}

async fn current(store: &dyn ObjectRead, key: &str) -> Option<(LeaseRecord, String)> {
    match store.get(key, None).await {
        Ok(out) => Some((
            LeaseRecord::parse(&out.body, out.meta.size).unwrap(),
            out.meta.etag.unwrap(),
        )),
        Err(leasectl::store::StoreError::NotFound(_)) => None,
        Err(e) => panic!("{e}"),
    }
}

/// Starts `n` contenders on one prefix at the same instant; returns the winners' ids.
async fn race(
    store: Arc<dyn ObjectStore>,
    prefix: &str,
    n: usize,
    config: LeaseConfig,
) -> Vec<String> {
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let store = store.clone();
        let barrier = barrier.clone();
        let prefix = prefix.to_owned();
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            let id = leasectl::bucket::new_instance_id();
            barrier.wait().await;
            let mut w = LeaseWatch::new();
            match BucketLease::acquire_as(store, sys(), &prefix, &id, config, &mut w).await {
                Ok(l) => Some(l.record().instance_id.clone()),
                Err(LeaseError::HeldByOther { .. }) => None,
                Err(e) => panic!("unexpected loser error: {e}"),
            }
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        if let Some(id) = t.await.unwrap() {
            winners.push(id);
        }
    }
    winners
}

async fn race_trials(store: Arc<dyn ObjectStore>, label: &str, plan: &[(usize, usize)]) {
    for &(contenders, trials) in plan {
        let mut total_winners = 0;
        for trial in 0..trials {
            let prefix = format!("race-{contenders}-{trial}/");
            let winners = race(store.clone(), &prefix, contenders, cfg(30)).await;
            assert_eq!(
                winners.len(),
                1,
                "{label}: {contenders}-way trial {trial}: winners {winners:?}"
            );
            let (rec, _) = current(store.as_ref(), &format!("{prefix}LEASE"))
                .await
                .unwrap();
            assert_eq!(
                rec.instance_id, winners[0],
                "the LEASE names the one winner"
            );
            total_winners += winners.len();
        }
        eprintln!("{label}: {trials} trials x {contenders} contenders: {total_winners} winners");
    }
}

server_matrix! {
    /// Two contenders: one winner in each of 100 trials; 16: one in each of 15.
    async fn contenders_starting_together_get_exactly_one_lease(server: Server) {
        let (endpoint, bucket) = server.bucket("race").await;
        let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
        race_trials(store, server.name(), &[(2, 100), (16, 15)]).await;
    }
}

server_matrix! {
    /// Contenders racing over one stale lease (If-Match on its ETag): one winner.
    /// Ceph RGW answers some losers 500 instead of 412; they read back and lose.
    /// The ten trials, each on a prefix of its own, run side by side: a
    /// winner whose round trips were slow waits out five sixths of the TTL
    /// before it has the lease (see `bucket::lease::confirm`), which one
    /// after another took 250 s under the suite's load.
    async fn contenders_over_a_stale_lease_get_exactly_one_lease(server: Server) {
        trace_from_env();
        let (endpoint, bucket) = server.bucket("race-stale").await;
        let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
        let client = sdk_client(&endpoint);
        let trial = |trial: usize| {
            let (store, client, bucket) = (store.clone(), client.clone(), bucket.clone());
            async move {
                let prefix = format!("stale-{trial}/");
                let old = Utc::now() - chrono::Duration::seconds(120);
                let dead = LeaseRecord {
                    instance_id: "dead-holder".into(),
                    acquired_at: old,
                    renewed_at: old,
                    ttl_s: 30,
                    generation: None,
                    released_at: None,
                };
                put_raw(&client, &bucket, &format!("{prefix}LEASE"), &dead.to_body()).await;
                let winners = race(store.clone(), &prefix, 8, cfg(30)).await;
                assert_eq!(winners.len(), 1, "{}: trial {trial}: winners {winners:?}", server.name());
                let (rec, _) = current(store.as_ref(), &format!("{prefix}LEASE")).await.unwrap();
                assert_eq!(rec.instance_id, winners[0]);
            }
        };
        futures::future::join_all((0..10).map(trial)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contenders_starting_together_get_exactly_one_lease_on_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    race_trials(store, "local", &[(2, 50), (16, 30)]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_answer_on_acquire_is_recognised_as_own() {
    let (endpoint, bucket) = moto_bucket(Moto::Conditional, "lost-acquire").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let store: Arc<dyn ObjectStore> = s3_store(&proxy.endpoint(), &bucket);
    let id = leasectl::bucket::new_instance_id();
    let mut w = LeaseWatch::new();
    // The store's race check (once per store per process) done first, on
    // another prefix: an acquire whose write's answer is lost returns at once
    // while the check it ran beside the write goes on, and the retry waits
    // for its finding (seconds on a loaded machine: CI at 722fe7b), which is
    // not the wait this test is about.
    let warm = BucketLease::acquire(store.clone(), sys(), "warm/", cfg(30), &mut w)
        .await
        .unwrap();
    warm.release().await.unwrap();
    // The LEASE's own PUT.
    proxy.drop_next_answers_of("PUT", "/db/LEASE", 1);
    let err = BucketLease::acquire_as(store.clone(), sys(), "db/", &id, cfg(30), &mut w)
        .await
        .unwrap_err();
    assert!(matches!(err, LeaseError::Store(_)), "{err}");
    // The PUT landed: the LEASE names us although we never heard back.
    assert_eq!(
        current(store.as_ref(), "db/LEASE")
            .await
            .unwrap()
            .0
            .instance_id,
        id
    );
    let started = Instant::now();
    let lease = BucketLease::acquire_as(store.clone(), sys(), "db/", &id, cfg(30), &mut w)
        .await
        .expect("our own lease is adopted");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no TTL wait behind ourselves"
    );
    assert!(lease.may_write());
    assert_eq!(lease.exclusion(), Exclusion::Conditional);
    let (rec, etag) = current(store.as_ref(), "db/LEASE").await.unwrap();
    assert_eq!(
        (rec.instance_id.as_str(), etag.as_str()),
        (id.as_str(), lease.etag())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_answer_on_renewal_is_recognised_as_own() {
    let (endpoint, bucket) = moto_bucket(Moto::Conditional, "lost-renew").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let store: Arc<dyn ObjectStore> = s3_store(&proxy.endpoint(), &bucket);
    let mut lease =
        BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
            .await
            .unwrap();
    let before = lease.etag().to_owned();
    proxy.drop_next_answers("PUT", 1);
    assert!(matches!(lease.renew().await, Err(LeaseError::Store(_))));
    // The renewal landed: the object changed, our ETag is out of date.
    let (_, landed) = current(store.as_ref(), "db/LEASE").await.unwrap();
    assert_ne!(landed, before);
    lease
        .renew()
        .await
        .expect("refused renewal re-reads, finds our record, adopts it");
    let (rec, now) = current(store.as_ref(), "db/LEASE").await.unwrap();
    assert_eq!(now, lease.etag());
    assert_eq!(rec.instance_id, lease.record().instance_id);
    assert!(lease.may_write());
}

async fn assert_refused_and_clean(store: Arc<dyn ObjectStore>, what: &str) {
    let err = BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
        .await
        .unwrap_err();
    match &err {
        LeaseError::PreconditionsIgnored { header, .. } => {
            assert_eq!(*header, "If-None-Match", "{what}");
            let msg = err.to_string();
            assert!(
                msg.contains("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL=off"),
                "{msg}"
            );
        }
        e => panic!("{what}: expected PreconditionsIgnored, got {e}"),
    }
    assert!(
        current(store.as_ref(), "db/LEASE").await.is_none(),
        "{what}: nothing left behind"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn services_that_ignore_preconditions_are_refused_at_acquire() {
    let (endpoint, bucket) = moto_bucket(Moto::Ignoring, "ignoring").await;
    assert_refused_and_clean(s3_store(&endpoint, &bucket), "moto 5.0.14").await;

    let (endpoint, bucket) = moto_bucket(Moto::Conditional, "stripped").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::StripConditional).await;
    assert_refused_and_clean(s3_store(&proxy.endpoint(), &bucket), "stripping proxy").await;

    // Best-effort mode runs on the ignoring service, and says so.
    let (endpoint, bucket) = moto_bucket(Moto::Ignoring, "ignoring-be").await;
    let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
    let lease = BucketLease::acquire(store, sys(), "db/", best_effort(30), &mut LeaseWatch::new())
        .await
        .unwrap();
    assert_eq!(lease.exclusion(), Exclusion::BestEffort);
}

server_matrix! {
async fn takeover_of_stale_lease_and_old_holder_learns_it_is_lost(server: Server) {
    let (endpoint, bucket) = server.bucket("takeover").await;
    let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
    let old = BucketLease::acquire(store.clone(), sys(), "db/", cfg(3), &mut LeaseWatch::new())
        .await
        .unwrap();
    let old_id = old.record().instance_id.clone();
    let mut keep = KeepAlive::start(old);
    let fence = keep.fence();
    assert!(*fence.borrow());
    // A contender whose clock is 10 s ahead would see the 3 s lease as stale
    // at once: it measures its clock against the service's and refuses.
    let ahead: SharedClock = Arc::new(SkewedClock::new(chrono::Duration::seconds(10)));
    match BucketLease::acquire(store.clone(), ahead, "db/", cfg(3), &mut LeaseWatch::new()).await {
        Err(e @ LeaseError::ReaderClock { offset_s, .. }) => {
            assert!((offset_s + 10.0).abs() < 1.5, "{offset_s}");
            let text = e.to_string();
            assert!(
                text.contains("ahead of the storage service") && text.contains("NTP"),
                "{text}"
            );
        }
        other => panic!("expected a refusal for the reader's clock, got {other:?}"),
    }
    assert!(*fence.borrow(), "the refused contender changed nothing");
    // Someone overwrites the lease (a writer that ignores the protocol).
    let intruder = LeaseRecord {
        instance_id: "intruder".into(),
        acquired_at: chrono::Utc::now(),
        renewed_at: chrono::Utc::now(),
        ttl_s: 3,
        generation: None,
        released_at: None,
    };
    store
        .put(
            "db/LEASE",
            intruder.to_body(),
            leasectl::store::PutCondition::None,
        )
        .await
        .unwrap();
    // The old holder's next renewal (within a third of a TTL) finds it lost.
    tokio::time::timeout(Duration::from_secs(3), keep.closed())
        .await
        .expect("fence drops");
    assert!(!*fence.borrow());
    match keep.lost().await {
        Err(LeaseError::Lost { by: Some(r), .. }) => {
            assert_eq!(r.instance_id, "intruder");
            assert_ne!(r.instance_id, old_id);
        }
        other => panic!("expected Lost, got {other:?}"),
    }
}
}

#[tokio::test(flavor = "multi_thread")]
async fn partition_closes_the_fence_within_two_thirds_of_a_ttl() {
    let (endpoint, bucket) = moto_bucket(Moto::Conditional, "partition").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let store: Arc<dyn ObjectStore> = s3_store(&proxy.endpoint(), &bucket);
    let ttl = 3; // renew every 1 s, fence 2 s
    let lease = BucketLease::acquire(store, sys(), "db/", cfg(ttl), &mut LeaseWatch::new())
        .await
        .unwrap();
    let keep = KeepAlive::start(lease);
    let fence = keep.fence();
    tokio::time::sleep(Duration::from_millis(2500)).await; // two renewals went through
    assert!(*fence.borrow(), "renewals keep the fence open");
    let puts_before = proxy.counts().get("PUT").copied().unwrap_or(0);
    assert!(
        puts_before >= 3,
        "acquire + probe + renewals: {puts_before}"
    );
    proxy.set_mode(Mode::BlackHole);
    let cut = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), keep.closed())
        .await
        .expect("the fence closes during a partition");
    let closed_after = cut.elapsed();
    // The last successful renewal was at most ~1 s before the cut; the fence
    // closes 2 s after it: so between ~1 s and 2 s (+ scheduling slack) after the cut.
    assert!(
        closed_after <= Duration::from_millis(2300),
        "closed after {closed_after:?}"
    );
    assert!(
        closed_after >= Duration::from_millis(500),
        "closed too early: {closed_after:?}"
    );
    drop(keep);
}

/// Steps two manual clocks second by second; at every step where the
/// contender can take the lease, the holder must already be fenced.
async fn skew_case(store: Arc<dyn ObjectStore>, prefix: &str, skew_s: i64, holder_renews: bool) {
    let t0 = Utc::now();
    let holder_clock = ManualClock::new(t0);
    let contender_clock = ManualClock::new(t0 + chrono::Duration::seconds(skew_s));
    let hc: SharedClock = Arc::new(holder_clock.clone());
    let cc: SharedClock = Arc::new(contender_clock.clone());
    let mut holder =
        BucketLease::acquire(store.clone(), hc, prefix, cfg(30), &mut LeaseWatch::new())
            .await
            .unwrap();
    let mut watch = LeaseWatch::new();
    for step in 1..=60 {
        holder_clock.advance(Duration::from_secs(1));
        contender_clock.advance(Duration::from_secs(1));
        if holder_renews && step % 10 == 0 {
            holder.renew().await.unwrap();
        }
        let writes = holder.may_write();
        match BucketLease::acquire(store.clone(), cc.clone(), prefix, cfg(30), &mut watch).await {
            Ok(_) => {
                assert!(
                    !holder_renews,
                    "skew {skew_s}: took a lease that is being renewed (step {step})"
                );
                assert!(!writes, "skew {skew_s}: contender took the lease at step {step} while the holder may write");
                return;
            }
            Err(LeaseError::HeldByOther { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        holder_renews,
        "skew {skew_s}: a lease nobody renews must become takeable"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_skew_up_to_a_third_of_a_ttl_never_makes_two_writers() {
    // On a local store: its clock is this host's, so the skewed clocks here
    // model holder and contender disagreeing (on S3 a contender whose clock is
    // off from the service's is refused: see the reader-clock tests).
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    for (i, skew) in [-10i64, -5, 0, 5, 10].into_iter().enumerate() {
        skew_case(store.clone(), &format!("stopped-{i}/"), skew, false).await;
        skew_case(store.clone(), &format!("renewing-{i}/"), skew, true).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn suspect_record_taken_only_after_one_ttl_unchanged_and_a_change_resets_the_watch() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    let t0 = Utc::now();
    let future = |id: &str| LeaseRecord {
        instance_id: id.into(),
        acquired_at: t0 + chrono::Duration::hours(2),
        renewed_at: t0 + chrono::Duration::hours(2),
        ttl_s: 30,
        generation: None,
        released_at: None,
    };
    store
        .put(
            "db/LEASE",
            future("clock-ahead").to_body(),
            PutCondition::IfNoneMatch,
        )
        .await
        .unwrap();
    let clock = ManualClock::new(t0);
    let c: SharedClock = Arc::new(clock.clone());
    let mut watch = LeaseWatch::new();
    let remaining = |e: LeaseError| match e {
        LeaseError::UnderWatch { remaining, .. } => remaining,
        e => panic!("expected UnderWatch, got {e}"),
    };
    let try_acquire = |watch: &mut LeaseWatch| {
        let (s, c) = (store.clone(), c.clone());
        let mut w = std::mem::take(watch);
        async move {
            let r = BucketLease::acquire(s, c, "db/", cfg(30), &mut w).await;
            (r, w)
        }
    };
    let (r, w) = try_acquire(&mut watch).await;
    watch = w;
    assert_eq!(remaining(r.unwrap_err()), Duration::from_secs(30));
    clock.advance(Duration::from_secs(20));
    let (r, w) = try_acquire(&mut watch).await;
    watch = w;
    assert_eq!(remaining(r.unwrap_err()), Duration::from_secs(10));
    // The record changes (still suspect): the watch starts again.
    store
        .put(
            "db/LEASE",
            future("clock-ahead-2").to_body(),
            PutCondition::None,
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(15));
    let (r, w) = try_acquire(&mut watch).await;
    watch = w;
    assert_eq!(remaining(r.unwrap_err()), Duration::from_secs(30));
    clock.advance(Duration::from_secs(30));
    let (r, _) = try_acquire(&mut watch).await;
    let lease = r.expect("unchanged for one TTL: taken over");
    assert_eq!(
        current(store.as_ref(), "db/LEASE")
            .await
            .unwrap()
            .0
            .instance_id,
        lease.record().instance_id
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_record_is_watched_like_suspect() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    store
        .put("db/LEASE", b"{oops".to_vec(), PutCondition::IfNoneMatch)
        .await
        .unwrap();
    let clock = ManualClock::new(Utc::now());
    let c: SharedClock = Arc::new(clock.clone());
    let mut watch = LeaseWatch::new();
    let e = BucketLease::acquire(store.clone(), c.clone(), "db/", cfg(30), &mut watch)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("malformed"), "{e}");
    clock.advance(Duration::from_secs(30));
    BucketLease::acquire(store.clone(), c, "db/", cfg(30), &mut watch)
        .await
        .expect("malformed record taken after one TTL");
}

#[tokio::test(flavor = "multi_thread")]
async fn best_effort_later_writer_wins_at_the_next_renewal() {
    // On a local store: its clock is this host's, so the skewed clocks here
    // model holder and contender disagreeing (on S3 a contender whose clock is
    // off from the service's is refused: see the reader-clock tests).
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    let mut first = BucketLease::acquire(
        store.clone(),
        sys(),
        "db/",
        best_effort(30),
        &mut LeaseWatch::new(),
    )
    .await
    .unwrap();
    // A second writer whose clock is far ahead passes the read check and writes unconditionally.
    let ahead: SharedClock = Arc::new(SkewedClock::new(chrono::Duration::seconds(120)));
    let mut second = BucketLease::acquire(
        store.clone(),
        ahead,
        "db/",
        best_effort(30),
        &mut LeaseWatch::new(),
    )
    .await
    .unwrap();
    assert_eq!(first.exclusion(), Exclusion::BestEffort);
    assert!(
        first.may_write() && second.may_write(),
        "best-effort: both passed"
    );
    // The later writer wins at the next renewal.
    assert!(matches!(first.renew().await, Err(LeaseError::Lost { .. })));
    assert!(!first.may_write());
    second.renew().await.unwrap();
    assert_eq!(
        current(store.as_ref(), "db/LEASE")
            .await
            .unwrap()
            .0
            .instance_id,
        second.record().instance_id
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn release_never_deletes_a_lease_taken_by_someone_else() {
    for config in [cfg(30), best_effort(30)] {
        // On a local store: its clock is this host's, so the skewed clocks here
        // model holder and contender disagreeing (on S3 a contender whose clock is
        // off from the service's is refused: see the reader-clock tests).
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
        let old = BucketLease::acquire(
            store.clone(),
            sys(),
            "db/",
            config.clone(),
            &mut LeaseWatch::new(),
        )
        .await
        .unwrap();
        let ahead: SharedClock = Arc::new(SkewedClock::new(chrono::Duration::seconds(60)));
        let new = BucketLease::acquire(
            store.clone(),
            ahead,
            "db/",
            config.clone(),
            &mut LeaseWatch::new(),
        )
        .await
        .unwrap();
        match old.release().await.unwrap() {
            Released::NotOurs(r) => assert_eq!(r.instance_id, new.record().instance_id),
            other => panic!("{config:?}: expected NotOurs, got {other:?}"),
        }
        let (rec, etag) = current(store.as_ref(), "db/LEASE")
            .await
            .expect("still there");
        assert_eq!(
            (rec.instance_id.as_str(), etag.as_str()),
            (new.record().instance_id.as_str(), new.etag())
        );
        let want = if config.exclusion == Exclusion::Conditional {
            Released::ConditionalDelete
        } else {
            Released::ReadCheckDelete
        };
        release_keeps_then_seed_deletes(store.clone(), new, "db/", config.clone(), want).await;
    }
}

/// The release of `lease` (a record with a generation) leaves a released
/// record that keeps its generation (issue 32 §3); a holder of the seed's
/// record format then takes the prefix over it and its release deletes the
/// object, as `delete` says.
async fn release_keeps_then_seed_delete_inner(
    store: Arc<dyn ObjectStore>,
    lease: BucketLease,
    prefix: &str,
    config: LeaseConfig,
    delete: Released,
) -> Result<(), String> {
    let key = leasectl::bucket::lease_key(prefix);
    let (id, generation) = (
        lease.record().instance_id.clone(),
        lease.record().generation.expect("a generation"),
    );
    let how = lease.release().await.unwrap();
    if how != (Released::Recorded { generation }) {
        return Err(format!("released as {how:?}"));
    }
    let (rec, _) = current(store.as_ref(), &key)
        .await
        .ok_or("the key is gone")?;
    if !(rec.is_released() && rec.instance_id == id && rec.generation == Some(generation)) {
        return Err(format!(
            "not a released record keeping {generation}: {rec:?}"
        ));
    }
    let seed = LeaseConfig {
        record_format: leasectl::bucket::RecordFormat::Seed,
        ..config
    };
    let taker = BucketLease::acquire(store.clone(), sys(), prefix, seed, &mut LeaseWatch::new())
        .await
        .map_err(|e| format!("a seed-format holder could not take the released prefix: {e}"))?;
    let how = taker.release().await.unwrap();
    if how != delete {
        return Err(format!("seed-format release: {how:?}, expected {delete:?}"));
    }
    if current(store.as_ref(), &key).await.is_some() {
        return Err("the seed-format release left the key".into());
    }
    Ok(())
}

async fn release_keeps_then_seed_deletes(
    store: Arc<dyn ObjectStore>,
    lease: BucketLease,
    prefix: &str,
    config: LeaseConfig,
    delete: Released,
) {
    if let Err(e) = release_keeps_then_seed_delete_inner(store, lease, prefix, config, delete).await
    {
        panic!("{e}");
    }
}

server_matrix! {
async fn holder_is_refused_to_others_and_acquire_plus_probe_is_timed(server: Server) {
    trace_from_env();
    let (endpoint, bucket) = server.bucket("timing").await;
    let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
    let mut samples = Vec::new();
    for i in 0..10 {
        let t = Instant::now();
        let lease = BucketLease::acquire(
            store.clone(),
            sys(),
            &format!("t{i}/"),
            cfg(30),
            &mut LeaseWatch::new(),
        )
        .await
        .unwrap();
        samples.push(t.elapsed());
        if i == 0 {
            let e =
                BucketLease::acquire(store.clone(), sys(), "t0/", cfg(30), &mut LeaseWatch::new())
                    .await
                    .unwrap_err();
            assert!(matches!(e, LeaseError::HeldByOther { .. }), "{e}");
            assert!(e.to_string().contains(&lease.record().instance_id));
        }
    }
    samples.sort();
    eprintln!(
        "acquire + probe on {}: median {:?}, max {:?}",
        server.name(),
        samples[5],
        samples[9]
    );
}
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_keep_alive_stops_renewing() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    let lease = BucketLease::acquire(store.clone(), sys(), "db/", cfg(3), &mut LeaseWatch::new())
        .await
        .unwrap();
    let keep = KeepAlive::start(lease);
    tokio::time::sleep(Duration::from_millis(1200)).await; // one renewal at 1 s
    let (_, renewed) = current(store.as_ref(), "db/LEASE").await.unwrap();
    drop(keep);
    tokio::time::sleep(Duration::from_millis(2500)).await; // two more would have happened
    let (_, after) = current(store.as_ref(), "db/LEASE").await.unwrap();
    assert_eq!(renewed, after, "no renewal after the drop");
}

/// Two local stores rooted at different levels of one tree (`file:///d/` and
/// `file:///d/db1/`) address the same LEASE file; their conditional writes
/// must still exclude each other (the lock lives beside the object).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_stores_rooted_at_different_levels_exclude_each_other() {
    // The twenty trials at once, each in a tree of its own: one after
    // another, each winner taking the slow way under the suite's load, they
    // took minutes; ten at a time, two batches of 25 s (the winner waits
    // out five sixths of the 30 s TTL), 50 s alone. A local store's requests
    // are file operations, not a server's queue.
    let dir = tempfile::tempdir().unwrap();
    let trial = |trial: usize| {
        let root = dir.path().join(format!("t{trial}"));
        async move {
            std::fs::create_dir_all(root.join("db1")).unwrap();
            let outer: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(&root).unwrap());
            let inner: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root.join("db1")).unwrap());
            let t = Utc::now() - chrono::Duration::minutes(5);
            let stale = LeaseRecord {
                instance_id: format!("dead-{trial}"),
                acquired_at: t,
                renewed_at: t,
                ttl_s: 30,
                generation: None,
                released_at: None,
            };
            outer
                .put("db1/LEASE", stale.to_body(), PutCondition::None)
                .await
                .unwrap();
            let barrier = Arc::new(tokio::sync::Barrier::new(8));
            let mut tasks = Vec::new();
            for i in 0..8 {
                let (store, prefix) = if i % 2 == 0 {
                    (outer.clone(), "db1/")
                } else {
                    (inner.clone(), "")
                };
                let barrier = barrier.clone();
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    BucketLease::acquire(store, sys(), prefix, cfg(30), &mut LeaseWatch::new())
                        .await
                        .is_ok()
                }));
            }
            let mut winners = 0;
            for t in tasks {
                winners += usize::from(t.await.unwrap());
            }
            assert_eq!(winners, 1, "trial {trial}");
        }
    };
    crate::common::trials::side_by_side_async(20, 20, trial);
}

server_matrix! {
    /// A holder whose lease was replaced (taken over, or overwritten) deletes
    /// nothing at release, on a service that ignores If-Match on DELETE too.
    async fn release_never_deletes_a_foreign_lease(server: Server) {
        let (endpoint, bucket) = server.bucket("release-foreign").await;
        let store: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
        // 1. Overwritten behind its back.
        let old = BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
            .await
            .unwrap();
        let now = Utc::now();
        let intruder = LeaseRecord {
            instance_id: "intruder".into(),
            acquired_at: now,
            renewed_at: now,
            ttl_s: 30,
            generation: None,
            released_at: None,
        };
        put_raw(&sdk_client(&endpoint), &bucket, "db/LEASE", &intruder.to_body()).await;
        match old.release().await.unwrap() {
            Released::NotOurs(r) => assert_eq!(r.instance_id, "intruder"),
            other => panic!("{}: expected NotOurs, got {other:?}", server.name()),
        }
        let (rec, _) = current(store.as_ref(), "db/LEASE").await.expect("still there");
        assert_eq!(rec.instance_id, "intruder", "{}", server.name());

        // 2. Taken over once stale (a 2 s lease, by a second store that has probed nothing).
        let old = BucketLease::acquire(store.clone(), sys(), "tk/", cfg(2), &mut LeaseWatch::new())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2300)).await;
        let other: Arc<dyn ObjectStore> = s3_store(&endpoint, &bucket);
        let new = BucketLease::acquire(other.clone(), sys(), "tk/", cfg(30), &mut LeaseWatch::new())
            .await
            .unwrap();
        match old.release().await.unwrap() {
            Released::NotOurs(r) => assert_eq!(r.instance_id, new.record().instance_id),
            other => panic!("{}: expected NotOurs, got {other:?}", server.name()),
        }
        let (rec, _) = current(store.as_ref(), "tk/LEASE").await.expect("still there");
        assert_eq!(rec.instance_id, new.record().instance_id);
        // The new holder releases its own: a released record that keeps its
        // generation; a seed-format holder's release then deletes: conditional
        // DELETE where honoured, read-check-delete where If-Match on DELETE is
        // ignored.
        let want = match server {
            Server::Rgw => Released::ReadCheckDelete,
            _ => Released::ConditionalDelete,
        };
        if let Err(e) =
            release_keeps_then_seed_delete_inner(other.clone(), new, "tk/", cfg(30), want).await
        {
            panic!("{}: {e}", server.name());
        }
    }
}

/// The probe's sweep dates scratch keys by the injected clock, never by
/// `Utc::now()` (ARCHITECTURE.md, invariant 2): a key just written is new to
/// the real clock and older than the sweep age to a clock an hour ahead.
#[tokio::test]
async fn probe_sweep_ages_scratch_keys_by_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let left = "db/.leasectl-probe/left";
    store
        .put(left, b"{}".to_vec(), PutCondition::None)
        .await
        .unwrap();
    let (scratch, own) = ("db/.leasectl-probe/", "db/.leasectl-probe/own");
    let age = leasectl::bucket::probe::SWEEP_AFTER;
    let real = SystemClock::new();
    let removed = leasectl::bucket::probe::sweep(&store, scratch, own, age, &real)
        .await
        .removed;
    assert!(removed.is_empty(), "{removed:?}");
    let ahead = ManualClock::new(Utc::now() + chrono::Duration::hours(1));
    let removed = leasectl::bucket::probe::sweep(&store, scratch, own, age, &ahead)
        .await
        .removed;
    assert_eq!(removed, [left]);
}
