use chrono::{DateTime, Utc};

use super::acquire::{decide, Reading, Step};
use super::*;
use crate::clock::ManualClock;
use crate::store::local::LocalStore;
use crate::store::{Capabilities, EndpointInfo, GetOutput, KeyVersions, Listing};

/// A lease held on a directory store ([`SetOffset`]) at `db/LEASE`, with a
/// `ttl_s` TTL, on a manual clock: where the unit tests of the lease and of
/// its keep-alive start. The directory lives as long as the first value.
pub(crate) async fn held(
    ttl_s: u64,
) -> (tempfile::TempDir, Arc<SetOffset>, ManualClock, BucketLease) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SetOffset {
        inner: LocalStore::open(dir.path()).unwrap(),
        offset: std::sync::Mutex::new(None),
    });
    let clock = ManualClock::new(Utc::now());
    let shared: SharedClock = Arc::new(clock.clone());
    let config = LeaseConfig {
        ttl_s,
        ..LeaseConfig::default()
    };
    let lease = BucketLease::acquire(store.clone(), shared, "db/", config, &mut LeaseWatch::new())
        .await
        .unwrap();
    (dir, store, clock, lease)
}

/// Writes another holder's record, named `id`, over `lease`'s at its key
/// (unconditionally: as a store that carried a write out against its
/// precondition would).
pub(crate) async fn put_theirs(store: &SetOffset, lease: &BucketLease, id: &str) {
    let theirs = LeaseRecord {
        instance_id: id.into(),
        ..lease.record().clone()
    };
    store
        .put(lease.key(), theirs.to_body(), PutCondition::None)
        .await
        .unwrap();
}

/// A directory store ([`LocalStore`]) whose estimate of the service's clock
/// the test sets ([`ObjectRead::server_offset`]; a directory has no clock of
/// its own): everything else is the directory's.
pub(crate) struct SetOffset {
    inner: LocalStore,
    offset: std::sync::Mutex<Option<ServerOffset>>,
}

impl SetOffset {
    /// From now on the store reports `offset` as its estimate.
    pub(crate) fn set(&self, offset: Option<ServerOffset>) {
        *self.offset.lock().unwrap() = offset;
    }
}

#[async_trait::async_trait]
impl ObjectRead for SetOffset {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.inner.list(prefix).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.inner.list_page(prefix, token).await
    }
    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        self.inner.get(key, if_none_match).await
    }
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.sample_keys(prefix).await
    }
    fn server_offset(&self) -> Option<ServerOffset> {
        *self.offset.lock().unwrap()
    }
    fn server_clock_problem(&self) -> Option<String> {
        self.inner.server_clock_problem()
    }
    fn has_clock(&self) -> bool {
        self.inner.has_clock()
    }
    fn endpoint_info(&self) -> EndpointInfo {
        self.inner.endpoint_info()
    }
    fn unavailable(&self) -> Option<StoreError> {
        self.inner.unavailable()
    }
    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        self.inner.list_versions(key).await
    }
    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        self.inner.get_version(key, version_id).await
    }
}

#[async_trait::async_trait]
impl ObjectStore for SetOffset {
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        self.inner.put(key, body, condition).await
    }
    async fn put_once(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        self.inner.put_once(key, body, condition).await
    }
    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        self.inner.delete(key, if_match).await
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn set_capabilities(&self, caps: Capabilities) -> bool {
        self.inner.set_capabilities(caps)
    }
}

fn observed(r: &LeaseRecord) -> Observed {
    Observed::Present {
        etag: Some("e1".into()),
        last_modified: None,
        record: Ok(r.clone()),
    }
}

fn record(id: &str, renewed_ago_s: i64, now: DateTime<Utc>) -> LeaseRecord {
    let t = now - chrono::Duration::seconds(renewed_ago_s);
    LeaseRecord {
        instance_id: id.into(),
        acquired_at: t - chrono::Duration::seconds(60),
        renewed_at: t,
        ttl_s: 30,
        generation: Some(7),
        released_at: None,
    }
}

fn run(o: &Observed, owner: Whose, now: DateTime<Utc>) -> Result<Step, LeaseError> {
    decide(
        Reading {
            key: "db/LEASE",
            observed: o,
            owner,
            instance_id: "me",
            now,
            mono: Duration::ZERO,
        },
        &LeaseConfig::default(),
        &mut LeaseWatch::new(),
    )
}

/// The acquire's decision by whose the record is (own::whose): the id
/// alone never adopts.
/// Two races of one process on one key never share a scratch key: the
/// process's draw is fixed, so the count keeps them apart.
#[test]
fn a_process_s_scratch_keys_for_one_lease_differ() {
    let a = scratch_key("db/LEASE", "me");
    let b = scratch_key("db/LEASE", "me");
    assert_ne!(a, b);
    for k in [&a, &b] {
        assert!(k.starts_with("db/.leasectl-probe/me."), "{k}");
    }
}

#[test]
fn a_record_naming_our_id_is_adopted_only_on_proof() {
    let now = Utc::now();
    let fresh = record("me", 2, now);
    // Another process under our id, fresh: refused, with the sentence.
    let err = run(&observed(&fresh), Whose::SameId, now)
        .err()
        .expect("refused");
    assert!(matches!(err, LeaseError::SameInstanceId { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("another process under the same instance id me"),
        "{msg}"
    );
    assert!(msg.contains("without --instance-id"), "{msg}");
    // The same record proved ours (a lost answer): adopted, generation and
    // acquired_at kept.
    let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&fresh), Whose::Ours, now) else {
        panic!("our own record is adopted");
    };
    assert_eq!(
        (cond, acquired_at, g),
        (
            PutCondition::IfMatch("e1".into()),
            fresh.acquired_at,
            Some(7)
        )
    );
    // A hand-over naming us: adopted the same way, conditional on its ETag.
    let mut handed = fresh.clone();
    handed.acquired_at = handed.renewed_at;
    let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&handed), Whose::HandedOver, now)
    else {
        panic!("a hand-over is adopted");
    };
    assert_eq!(
        (cond, acquired_at, g),
        (
            PutCondition::IfMatch("e1".into()),
            handed.acquired_at,
            Some(7)
        )
    );
    // Another process's record under our id, stale: taken over as anyone's
    // (a new tenure, a greater generation).
    let stale = record("me", 45, now);
    let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&stale), Whose::SameId, now) else {
        panic!("a stale record is taken over");
    };
    assert_eq!(cond, PutCondition::IfMatch("e1".into()));
    assert_eq!(acquired_at, now, "a new tenure");
    assert!(g.unwrap() > 7, "a greater generation: {g:?}");
    // Another holder's fresh record: held by other, as before.
    let other = record("you", 2, now);
    assert!(matches!(
        run(&observed(&other), Whose::Other, now),
        Err(LeaseError::HeldByOther { .. })
    ));
}

/// Issue 32 §3: a released record is taken at once, with `If-Match` on
/// its ETag and a generation greater than the one it keeps — even by a
/// taker whose clock is far behind (no clock term can go back), and even
/// when it names our own id (a released record is nobody's).
#[test]
fn a_released_record_is_taken_at_once_with_a_greater_generation() {
    let now = Utc::now();
    let far_ahead = now + chrono::Duration::hours(1);
    let mut held = record("me", 0, far_ahead);
    held.generation = Some(u64::try_from(far_ahead.timestamp_micros()).unwrap());
    let released = held.released(far_ahead);
    assert!(released.is_released());
    assert_eq!(released.generation, held.generation);
    for owner in [Whose::Other, Whose::SameId] {
        let Ok(Step::Write(cond, acquired_at, g)) = run(&observed(&released), owner, now) else {
            panic!("a released record is taken");
        };
        assert_eq!(cond, PutCondition::IfMatch("e1".into()));
        assert_eq!(acquired_at, now, "a new tenure");
        assert_eq!(
            g,
            held.generation.map(|g| g + 1),
            "released + 1, not the clock"
        );
    }
}

/// The fence a holder asks before each write ([`BucketLease::may_write`])
/// and the one that keeps a slow acquire renewing
/// (`may_write_ignoring_not_before`): yes while the lease is live, no from
/// two thirds of the TTL after its last write, and no once it is known lost
/// whatever the deadline says (a lost lease keeps no fence).
#[tokio::test]
async fn may_write_says_no_past_the_deadline_and_once_lost() {
    // TTL 12 s: the fence closes 8 s after the last write.
    let (_dir, _store, clock, lease) = held(12).await;
    assert!(lease.may_write(), "just acquired");
    assert!(lease.may_write_ignoring_not_before(), "just acquired");
    let since = clock.mono().saturating_sub(lease.deadline().renewed_mono);
    clock.advance(Duration::from_millis(7_999) - since);
    assert!(lease.may_write(), "a millisecond before the deadline");
    clock.advance(Duration::from_millis(1));
    assert!(!lease.may_write(), "at the deadline");
    assert!(!lease.may_write_ignoring_not_before(), "at the deadline");

    // Another holder's record at the key: the next renewal finds the lease lost.
    let (_dir, store, clock, mut lease) = held(12).await;
    put_theirs(&store, &lease, "someone-else").await;
    let renewal = lease.renew().await;
    assert!(
        matches!(renewal, Err(LeaseError::Lost { .. })),
        "{renewal:?}"
    );
    assert!(
        lease.deadline().status(&clock).is_open(),
        "the deadline is still ahead"
    );
    assert!(!lease.may_write(), "lost");
    assert!(!lease.may_write_ignoring_not_before(), "lost");
}

/// The read-back rule of a running holder ([`BucketLease::is_ours`]): the
/// body it last wrote is its own, and so is one it sent without seeing the
/// answer; another process's record under the same id is not.
#[tokio::test]
async fn a_holder_knows_its_own_body_and_no_other() {
    let (_dir, store, _clock, mut lease) = held(30).await;
    let key = lease.key().to_owned();
    let rb = read_back(store.as_ref(), &key).await.unwrap();
    assert!(lease.is_ours(&rb), "the body it last wrote");
    // Another process under our id: the same record, stamped a microsecond later.
    let mut same_id = lease.record().clone();
    same_id.renewed_at += chrono::Duration::microseconds(1);
    let body = same_id.to_body();
    store
        .put(&key, body.clone(), PutCondition::None)
        .await
        .unwrap();
    let rb = read_back(store.as_ref(), &key).await.unwrap();
    assert!(!lease.is_ours(&rb), "another body naming our id");
    // The same body, had this holder sent it and lost the answer: ours.
    lease.unanswered.add(&body);
    assert!(lease.is_ours(&rb), "a body sent, its answer not seen");
}

/// What an acquire or renewal reports once its rounds are used up
/// (`Conflicts::give_up`): after nothing but refusals, that the key kept
/// changing; after any 409, the conflicts; after only 5xx answers, the last
/// of them as it was.
#[test]
fn giving_up_names_what_the_rounds_met() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let key = || "db/LEASE".to_owned();
    let unavailable = || StoreError::Other {
        status: 503,
        message: "SlowDown".into(),
    };
    let refused = Conflicts::default().give_up(key(), &store);
    assert!(
        matches!(refused, LeaseError::Contended { .. }),
        "{refused:?}"
    );
    let with_409 = Conflicts {
        conflicts: 3,
        saw_409: true,
        last_5xx: Some(unavailable()),
    };
    let e = with_409.give_up(key(), &store);
    assert!(matches!(e, LeaseError::Conflicts { .. }), "{e:?}");
    let only_5xx = Conflicts {
        conflicts: 2,
        saw_409: false,
        last_5xx: Some(unavailable()),
    };
    let e = only_5xx.give_up(key(), &store);
    assert!(
        matches!(e, LeaseError::Store(StoreError::Other { status: 503, .. })),
        "{e:?}"
    );
}

/// The exclusion's names as the audit log's JSON and `bucket hold`'s log
/// write them ([`Exclusion::as_str`]), the same as its serialized form:
/// `conditional`, `best_effort`.
#[test]
fn exclusion_names_are_the_written_ones() {
    for (e, name) in [
        (Exclusion::Conditional, "conditional"),
        (Exclusion::BestEffort, "best_effort"),
    ] {
        assert_eq!(e.as_str(), name);
        assert_eq!(serde_json::to_value(e).unwrap(), serde_json::json!(name));
    }
}

/// What a held lease tells the code that writes under it without going
/// through it (a takeover's rewrite with `If-Match`, `bucket hold`'s
/// environment): its key, `{prefix}LEASE`, and the ETag of the object as
/// stored, the one a conditional write must name.
#[tokio::test]
async fn a_held_lease_names_its_key_and_the_stored_etag() {
    let (_dir, store, _clock, lease) = held(30).await;
    assert_eq!(lease.key(), "db/LEASE");
    let stored = read_back(store.as_ref(), "db/LEASE").await.unwrap();
    assert_eq!(Some(lease.etag()), stored.etag());
    assert!(stored.holds(&lease.record().to_body()));
}
/// A forced takeover's wait ([`BucketLease::end_wait`]): nothing is read
/// before it has run out, and then writes may start only over our own
/// record — the replaced holder's, put back by a store that carried its
/// renewal out against the precondition during the wait, loses the lease.
#[tokio::test]
async fn the_end_of_a_takeover_s_wait_reads_the_record_back() {
    for put_back in [false, true] {
        let (_dir, store, clock, mut lease) = held(30).await;
        lease.set_not_before(clock.mono() + Duration::from_secs(4));
        assert!(
            !lease.end_wait().await.unwrap(),
            "put back {put_back}: not run out"
        );
        assert!(!lease.may_write());
        if put_back {
            put_theirs(&store, &lease, "old-holder").await;
        }
        clock.advance(Duration::from_secs(4));
        assert!(
            !lease.may_write(),
            "put back {put_back}: run out, not read yet"
        );
        let ended = lease.end_wait().await;
        if put_back {
            assert!(
                matches!(&ended, Err(LeaseError::Lost { by: Some(r), .. }) if r.instance_id == "old-holder"),
                "{ended:?}"
            );
            assert!(!lease.may_write());
            // Ours was not written over theirs.
            let now = read_back(store.as_ref(), "db/LEASE").await.unwrap();
            assert_eq!(now.observed.record().unwrap().instance_id, "old-holder");
        } else {
            assert!(ended.unwrap(), "our record: the wait is over");
            assert_eq!(lease.waits_until(), None);
            assert!(lease.may_write());
            lease.release().await.unwrap();
        }
    }
}

/// A fresh generation (`refresh_generation`, the slow way's last write) is
/// written to the store and kept by the holder: greater than the one it had
/// (`max(own + 1, now in µs)`), and what the next renewal writes again.
#[tokio::test]
async fn a_refreshed_generation_is_written_and_kept() {
    let (_dir, store, clock, mut lease) = held(12).await;
    let before = lease.record().generation.expect("a generation");
    clock.advance(Duration::from_secs(1));
    lease.refresh_generation().await.unwrap();
    let stored = |store: Arc<SetOffset>| async move {
        match read_lease(store.as_ref(), "db/LEASE", None).await.unwrap() {
            Observed::Present { record: Ok(r), .. } => r.generation,
            other => panic!("a record at db/LEASE: {other:?}"),
        }
    };
    let fresh = stored(store.clone()).await.expect("a generation stored");
    assert!(fresh > before, "{fresh} > {before}");
    assert_eq!(lease.record().generation, Some(fresh));
    clock.advance(Duration::from_secs(1));
    lease.renew().await.unwrap();
    assert_eq!(stored(store).await, Some(fresh), "a renewal keeps it");
}
