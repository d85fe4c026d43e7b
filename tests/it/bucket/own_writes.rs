//! A record is adopted as our own only on proof (issue 37, items 1, 4 and 5):
//! two processes under one instance id, answers without an ETag with a
//! stranger writing right behind, and a takeover whose answer was lost before
//! the client's retry was refused. Real servers (moto, the local store), a
//! fault proxy, real `leasectl bucket hold` processes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::hold::{stamps, tagged_writer, wait_for_lines, Hold};
use crate::common::proxy::{Mode, Proxy};
use crate::common::*;
use chrono::Utc;
use leasectl::audit::{AuditLog, AuditTarget};
use leasectl::bucket::{
    BucketLease, Exclusion, LeaseError, LeaseRecord, LeaseWatch, Observed, Released,
};
use leasectl::clock::{SharedClock, SystemClock};
use leasectl::store::local::LocalStore;
use leasectl::store::{ObjectStore, PutCondition};
use leasectl::takeover::{takeover, TakeoverRequest, Then};

fn sys() -> SharedClock {
    SystemClock::shared()
}

async fn moto_proxied(test: &str) -> (Arc<dyn ObjectStore>, Proxy, String, String) {
    let (endpoint, bucket) = Server::Moto(Moto::Conditional).bucket(test).await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    (
        s3_store(&proxy.endpoint(), &bucket),
        proxy,
        endpoint,
        bucket,
    )
}

async fn stored(store: &dyn ObjectStore) -> Option<(LeaseRecord, String)> {
    let out = store.get("db/LEASE", None).await.ok()?;
    Some((
        LeaseRecord::parse(&out.body, out.meta.size).ok()?,
        out.meta.etag.unwrap_or_default(),
    ))
}

fn fresh_record(id: &str) -> LeaseRecord {
    let now = Utc::now();
    LeaseRecord {
        instance_id: id.to_owned(),
        acquired_at: now - chrono::Duration::seconds(1),
        renewed_at: now,
        ttl_s: 30,
        generation: Some(1),
        released_at: None,
    }
}

/// A second process under the same instance id is refused while the first
/// one's lease is fresh; a record naming our id that we did not write (the
/// second process got in) is a lost lease at our next renewal, never adopted.
async fn same_instance_id_is_refused_and_never_adopted(store: Arc<dyn ObjectStore>) {
    let same_id = || {
        let store = store.clone();
        async move {
            let mut watch = LeaseWatch::new();
            BucketLease::acquire_as(store, sys(), "db/", "same-id", cfg(30), &mut watch).await
        }
    };
    let mut first = same_id().await.unwrap();
    let err = same_id().await.unwrap_err();
    assert!(
        matches!(err, LeaseError::SameInstanceId { .. }),
        "the second process under the id was let in: {err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("same instance id"), "{msg}");
    assert!(msg.contains("--instance-id"), "{msg}");
    first
        .renew()
        .await
        .expect("the first holder renews as before");
    // The other process's record, named as ours (it got in some other way).
    let (_, etag) = stored(store.as_ref()).await.unwrap();
    store
        .put(
            "db/LEASE",
            fresh_record("same-id").to_body(),
            PutCondition::IfMatch(etag),
        )
        .await
        .unwrap();
    match first.renew().await {
        Err(LeaseError::Lost { by: Some(r), .. }) => assert_eq!(r.instance_id, "same-id"),
        other => panic!("a record naming our id but not written by us was adopted: {other:?}"),
    }
    assert!(!first.may_write());
    // And its release does not delete the other process's lease.
    let before = store.get("db/LEASE", None).await.unwrap().body;
    let released = first.release().await.unwrap();
    assert!(matches!(released, Released::NotOurs(_)), "{released:?}");
    let after = store.get("db/LEASE", None).await.unwrap().body;
    assert_eq!(after, before, "the other process's record was touched");
}

#[tokio::test(flavor = "multi_thread")]
async fn same_instance_id_is_refused_and_never_adopted_local() {
    let dir = tempfile::tempdir().unwrap();
    same_instance_id_is_refused_and_never_adopted(Arc::new(LocalStore::open(dir.path()).unwrap()))
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn same_instance_id_is_refused_and_never_adopted_moto() {
    let (endpoint, bucket) = Server::Moto(Moto::Conditional).bucket("same-id").await;
    same_instance_id_is_refused_and_never_adopted(s3_store(&endpoint, &bucket)).await
}

/// `bucket hold --instance-id same` twice, a second apart: the second is
/// refused (exit 4, its command never runs, the sentence says why) while the
/// first runs its command to the end; on the local store and on moto, five
/// rounds each.
async fn two_holds_under_one_id(endpoint: &str, url_of: impl Fn(usize) -> String) {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(round);
        let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
        let hold = |name: &str, log: &Path, lines: u32| {
            Hold::spawn(
                dir.path(),
                name,
                endpoint,
                &url,
                &["--ttl", "6s", "--instance-id", "sameid", "--wait", "0s"],
                &tagged_writer(log, name, false, Some(lines)),
                &[],
            )
        };
        let mut a = hold("a", &log_a, 25);
        wait_for_lines(&log_a, 1, Duration::from_secs(20)).await;
        let mut b = hold("b", &log_b, 5);
        let code_b = b.exit_code(Duration::from_secs(30)).await;
        let code_a = a.exit_code(Duration::from_secs(30)).await;
        assert_eq!(
            code_b,
            Some(4),
            "round {round}: the second hold: {}",
            b.stderr()
        );
        assert!(
            b.stderr().contains("same instance id"),
            "round {round}: {}",
            b.stderr()
        );
        assert!(
            stamps(&log_b).is_empty(),
            "round {round}: the second command ran under the first's lease"
        );
        assert_eq!(code_a, Some(0), "round {round}: {}", a.stderr());
        assert_eq!(stamps(&log_a).len(), 25, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_holds_under_one_instance_id_local() {
    let root = tempfile::tempdir().unwrap();
    let base = format!("file://{}", root.path().display());
    two_holds_under_one_id("http://127.0.0.1:9", |r| {
        std::fs::create_dir_all(root.path().join(format!("db{r}"))).unwrap();
        format!("{base}/db{r}/")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_holds_under_one_instance_id_moto() {
    let (endpoint, bucket) = Server::Moto(Moto::Conditional).bucket("two-holds").await;
    two_holds_under_one_id(&endpoint, |r| format!("s3://{bucket}/db{r}/")).await;
}

/// A renewal answered without an ETag reads back; a stranger's record written
/// right after ours landed is a lost lease, not an ETag to adopt. Without the
/// stranger the read-back finds our own body and the lease goes on.
///
/// Five rounds, each followed by a new holder's takeover of the stranger's
/// stale record (each such acquire took 25 s, five sixths of its 30 s TTL),
/// and the acquire's read-back at the end. One after another they took
/// 126 s; each step here runs on a bucket and proxy of its own, side by
/// side, from the state the one before it left: step 0 starts with a fresh
/// lease, step `n` (1-5) with the takeover of the stale record round `n - 1`
/// left.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_without_etag_never_adopts_a_strangers_record() {
    crate::common::trials::side_by_side_async(6, 6, no_etag_step);
}

/// The stranger of round `round`: stale, so that a new holder may take it
/// over after the round.
fn stale_intruder(round: usize) -> LeaseRecord {
    let mut intruder = fresh_record(&format!("intruder-{round}"));
    intruder.renewed_at -= chrono::Duration::seconds(60);
    intruder.acquired_at -= chrono::Duration::seconds(60);
    intruder
}

/// Step `step` of [`an_answer_without_etag_never_adopts_a_strangers_record`]
/// on a bucket and proxy of its own: rounds 0-4, then (step 5) the acquire's
/// read-back.
async fn no_etag_step(step: usize) {
    let (store, proxy, endpoint, bucket) = moto_proxied(&format!("no-etag-renew-{step}")).await;
    // The intruder writes straight to the server, not through the proxy.
    let direct = s3_store(&endpoint, &bucket);
    let mut lease = if step == 0 {
        let mut lease =
            BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
                .await
                .unwrap();
        proxy.strip_put_etags(None);
        lease.renew().await.expect("our own body read back");
        let (rec, etag) = stored(store.as_ref()).await.unwrap();
        assert_eq!(
            (rec.instance_id.as_str(), etag.as_str()),
            (lease.record().instance_id.as_str(), lease.etag())
        );
        lease
    } else {
        // Where round `step - 1` ended: the intruder's stale record stays,
        // and a new holder takes it over.
        direct
            .put(
                "db/LEASE",
                stale_intruder(step - 1).to_body(),
                PutCondition::None,
            )
            .await
            .unwrap();
        let lease =
            BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
                .await
                .unwrap();
        proxy.strip_put_etags(None);
        lease
    };
    if step < 5 {
        let round = step;
        let intruder = stale_intruder(round);
        proxy.strip_put_etags(Some((direct.clone(), intruder.to_body())));
        match lease.renew().await {
            Err(LeaseError::Lost { by: Some(r), .. }) => {
                assert_eq!(r.instance_id, intruder.instance_id)
            }
            other => panic!("round {round}: the intruder's ETag was adopted: {other:?}"),
        }
        assert!(!lease.may_write());
        let (rec, _) = stored(store.as_ref()).await.unwrap();
        assert_eq!(
            rec.instance_id, intruder.instance_id,
            "the intruder's record stays"
        );
        return;
    }
    // The acquire's read-back too: a stranger right behind our create.
    store.delete("db/LEASE", None).await.unwrap();
    proxy.strip_put_etags(Some((
        direct.clone(),
        fresh_record("intruder-acquire").to_body(),
    )));
    let r =
        BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new()).await;
    assert!(
        matches!(r, Err(LeaseError::Contended { .. })),
        "an acquire adopted a stranger's ETag: {r:?}"
    );
}

fn takeover_request(seen: Observed, then: Then) -> TakeoverRequest {
    TakeoverRequest {
        prefix: "db/".into(),
        seen,
        watched_for: Duration::ZERO,
        reason: "holder host died (INC-37)".into(),
        then,
        force: false,
        ttl_s: 30,
        exclusion: Exclusion::Conditional,
        record_format: leasectl::bucket::RecordFormat::Leasectl,
        target: AuditTarget {
            endpoint: Some("test".into()),
            region: None,
            addressing_style: None,
            bucket: None,
            key: "db/LEASE".into(),
            url: "test://db/".into(),
        },
    }
}

/// The takeover's PUT lands, its answer is lost, the client sends it again
/// and that is refused (412: the ETag changed — by our own write). The
/// takeover reads back, finds its own record and goes on: `hold` holds it,
/// `release` releases it (no phantom holder), and the audit outcome says
/// what is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_whose_answer_was_lost_is_judged_by_what_is_stored() {
    for then in [Then::Hold, Then::Release] {
        let (store, proxy, _, _) = moto_proxied("takeover-lost-answer").await;
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path().join("audit.jsonl")).unwrap();
        // A dead holder: renewed a minute ago, TTL 30 s.
        let mut dead = fresh_record("dead-holder");
        dead.renewed_at = Utc::now() - chrono::Duration::seconds(60);
        dead.acquired_at = dead.renewed_at - chrono::Duration::seconds(60);
        store
            .put("db/LEASE", dead.to_body(), PutCondition::IfNoneMatch)
            .await
            .unwrap();
        let seen = Observed::from_get(&store.get("db/LEASE", None).await.unwrap());
        // The takeover's probe writes scratch keys first; drop the answer of
        // the PUT of the lease itself only.
        proxy.drop_next_answers_of("PUT", "/db/LEASE", 1);
        let done = takeover(
            store.clone(),
            sys(),
            &log,
            takeover_request(seen, then.clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{then:?}: the takeover's own record was stored: {e}"));
        let lines = AuditLog::read(log.path()).unwrap();
        let outcome = lines.last().unwrap().outcome.clone().unwrap();
        assert!(outcome.starts_with("taken"), "{then:?}: {outcome}");
        match then {
            Then::Hold => {
                let held = done.held.expect("held");
                let (rec, etag) = stored(store.as_ref()).await.unwrap();
                assert_eq!(
                    (rec.instance_id.as_str(), etag.as_str()),
                    (held.record().instance_id.as_str(), held.etag())
                );
                assert!(held.may_write());
            }
            _ => {
                assert!(
                    crate::common::released_record(store.as_ref(), "db/LEASE")
                        .await
                        .is_some(),
                    "{then:?}: a phantom holder is left at the key: {:?}",
                    stored(store.as_ref()).await
                );
            }
        }
    }
}

/// A service whose ETags are empty (`ETag: ""`): an `If-Match` with one is
/// refused quoted and ignored bare, so every "conditional" write would be
/// unconditional. `probe` says so and exits 3 (it never says "excludes a
/// second writer"); `bucket hold` refuses (exit 4), its command never runs,
/// and nothing is left at the key.
#[tokio::test(flavor = "multi_thread")]
async fn a_service_with_empty_etags_fails_closed() {
    let (_, proxy, endpoint, bucket) = moto_proxied("empty-etag").await;
    proxy.rewrite_etags("\"\"");
    let url = format!("s3://{bucket}/db/");
    let probe = tokio::task::block_in_place(|| leasectl(Some(&proxy.endpoint()), &["probe", &url]));
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&probe.stdout),
        String::from_utf8_lossy(&probe.stderr)
    );
    assert_eq!(probe.status.code(), Some(3), "{out}");
    assert!(out.contains("cannot be sent in"), "{out}");
    assert!(!out.contains("excludes a second writer"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cmd.log");
    let mut hold = Hold::spawn(
        dir.path(),
        "hold",
        &proxy.endpoint(),
        &format!("s3://{bucket}/db/"),
        &["--ttl", "6s"],
        &tagged_writer(&log, "hold", false, Some(3)),
        &[],
    );
    let code = hold.exit_code(Duration::from_secs(30)).await;
    assert_eq!(code, Some(4), "{}", hold.stderr());
    assert!(
        hold.stderr().contains("cannot be sent in If-Match"),
        "{}",
        hold.stderr()
    );
    assert!(stamps(&log).is_empty(), "the command ran without exclusion");
    let direct = s3_store(&endpoint, &bucket);
    let left = stored(direct.as_ref()).await;
    // Under load the write may take over 100 ms from its read to its answer
    // (the slow way): a refusal then leaves ours to expire, and says so,
    // since it may have replaced a holder unseen (docs/bucket-leases.md).
    if hold
        .stderr()
        .contains("may have replaced a holder's record unseen")
    {
        let (r, _) = left.expect("ours, left to expire as the refusal says");
        assert!(r.released_at.is_none(), "{r:?}");
    } else {
        assert!(left.is_none(), "a record was left behind");
    }
}

/// Found by the simulator (issue 32, seed 375 before this fix): a release
/// whose PUT of the released record was answered 500 (the record unchanged,
/// nothing landed) deleted the record instead, so the next holder counted from
/// its clock and its generation went back. A 409 or 5xx is transient: the
/// release tries again and, when every try fails, leaves our record to expire
/// — never deletes it. Reproduced on moto through a proxy that answers every
/// PUT of the LEASE with 500.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_answered_500_never_deletes_the_generation() {
    let (store, proxy, _, _) = moto_proxied("release-500").await;
    let lease = BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
        .await
        .unwrap();
    let generation = lease.record().generation;
    let id = lease.record().instance_id.clone();
    let deletes = || proxy.counts().get("DELETE").copied().unwrap_or(0);
    let before = deletes();
    proxy.fail_requests("PUT", "db/LEASE", 500);
    let err = lease.release().await.expect_err("every PUT failed");
    assert!(err.to_string().contains("500"), "{err}");
    assert_eq!(deletes(), before, "nothing was deleted");
    proxy.clear_faults();
    let out = store
        .get("db/LEASE", None)
        .await
        .expect("our record is still there");
    let r = LeaseRecord::parse(&out.body, out.meta.size).unwrap();
    assert_eq!(
        (r.instance_id, r.generation, r.released_at),
        (id, generation, None)
    );
}

/// A renewal in flight when the holder lets go: `stop` cancels it, yet its
/// write landed. The release must know that body as its own and release it,
/// not leave the record behind as "held by" another (itself). Found by the
/// timeline's scripted history (about 1 run in 4 on moto: `bucket hold`'s
/// command exited while a renewal's answer was on its way); reproduced here
/// with a proxy that holds the renewal's answer back for 1.5 s, 5 rounds.
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_cancelled_in_flight_is_still_ours_at_release() {
    use leasectl::bucket::{KeepAlive, ReleaseReport};
    for round in 0..5 {
        let (store, proxy, _, _) = moto_proxied(&format!("cancelled-renewal-{round}")).await;
        let lease =
            BucketLease::acquire(store.clone(), sys(), "db/", cfg(3), &mut LeaseWatch::new())
                .await
                .unwrap();
        let generation = lease.record().generation;
        proxy.delay_next_answers_of("PUT", "db/LEASE", 1, Duration::from_millis(1500));
        let puts = || proxy.counts().get("PUT").copied().unwrap_or(0);
        let before = puts();
        let ka = KeepAlive::start(lease);
        let t = std::time::Instant::now();
        while puts() == before {
            assert!(t.elapsed() < Duration::from_secs(5), "no renewal was sent");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The renewal has reached the server; its answer is held back.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let report = ka.stop_and_release().await;
        assert!(
            matches!(report, ReleaseReport::Released(Released::Recorded { .. })),
            "round {round}: {report}"
        );
        let (r, _) = stored(store.as_ref()).await.expect("a record");
        assert!(r.is_released(), "round {round}: {r:?}");
        assert_eq!(r.generation, generation);
    }
}

/// Waiting for a keep-alive's loss beside something else (the demo's holders
/// wait for it beside their shutdown) and then letting go releases the lease:
/// `KeepAlive::lost` gave its task's handle away when its wait was dropped,
/// and `stop_and_release` then found "no task" and released nothing (issue 35
/// trip 1: after `q`, `demo --dir`'s live leases stayed fresh). Local store
/// and moto.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_wait_for_loss_still_releases() {
    use leasectl::bucket::{KeepAlive, ReleaseReport};
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    let (moto, _, _, _) = moto_proxied("dropped-wait").await;
    for store in [local, moto] {
        let lease =
            BucketLease::acquire(store.clone(), sys(), "db/", cfg(30), &mut LeaseWatch::new())
                .await
                .unwrap();
        let mut ka = KeepAlive::start(lease);
        tokio::select! {
            r = ka.lost() => panic!("the lease was not lost: {:?}", r.err()),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let report = ka.stop_and_release().await;
        assert!(
            matches!(report, ReleaseReport::Released(Released::Recorded { .. })),
            "{}: {report}",
            store.describe()
        );
        let (r, _) = stored(store.as_ref()).await.expect("a record");
        assert!(r.is_released(), "{r:?}");
    }
}
