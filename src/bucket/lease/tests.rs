use chrono::{DateTime, Utc};

use super::acquire::{decide, Reading, Step};
use super::*;

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

/// A forced takeover's wait ([`BucketLease::end_wait`]): nothing is read
/// before it has run out, and then writes may start only over our own
/// record — the replaced holder's, put back by a store that carried its
/// renewal out against the precondition during the wait, loses the lease.
#[tokio::test]
async fn the_end_of_a_takeover_s_wait_reads_the_record_back() {
    use crate::clock::{Clock as _, ManualClock, SharedClock};
    use crate::store::local::LocalStore;

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    let clock = ManualClock::new(Utc::now());
    let shared: SharedClock = Arc::new(clock.clone());
    let config = LeaseConfig {
        ttl_s: 30,
        ..LeaseConfig::default()
    };
    for put_back in [false, true] {
        let mut lease = BucketLease::acquire(
            store.clone(),
            shared.clone(),
            "db/",
            config.clone(),
            &mut LeaseWatch::new(),
        )
        .await
        .unwrap();
        lease.set_not_before(clock.mono() + Duration::from_secs(4));
        assert!(
            !lease.end_wait().await.unwrap(),
            "put back {put_back}: not run out"
        );
        assert!(!lease.may_write());
        if put_back {
            let old = LeaseRecord {
                instance_id: "old-holder".into(),
                ..lease.record().clone()
            };
            store
                .put("db/LEASE", old.to_body(), PutCondition::None)
                .await
                .unwrap();
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
