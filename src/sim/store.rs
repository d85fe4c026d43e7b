//! The simulated S3 store: linearizable conditional PUT and DELETE, ETags,
//! `Last-Modified` and `Date` from the store's clock (true time), per-request
//! faults drawn from the seed, and the store variants the engine must refuse.
//!
//! Every holder talks to the store through a [`SimStore`] handle of its own
//! (its own learned capabilities, as a process has); the objects, the fault
//! draws and the checker are shared in the [`super::state::World`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::clock::{SimClock, TrueTime};
use super::state::{tenure_of, Apply, Fault, Shared, Variant, World, KEY};
use crate::bucket::LeaseRecord;
use crate::clock::{Clock as _, DateAnswer, OffsetEstimator, ServerOffset};
use crate::store::{
    no_sample, no_versions, normalize_etag, Capabilities, EndpointInfo, GetOutput, KeyVersions,
    Listing, ObjectRead, ObjectStore, PutCondition, StoreError,
};

/// How long a client waits before it gives a request up.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// One holder's view of the simulated store.
pub(crate) struct SimStore {
    world: World,
    holder: usize,
    caps: Mutex<Capabilities>,
    /// The holder's clock, by which it times its requests.
    clock: SimClock,
    /// The service's clock: true time (its `Date` headers).
    truth: TrueTime,
    /// The service's clock as the holder's engine knows it: the
    /// intersection of its answers' `Date` intervals (whole seconds of true
    /// time), timed by the holder's clock, as the S3 store keeps it.
    offset: Mutex<OffsetEstimator>,
}

impl SimStore {
    /// Holder `holder`'s handle on `world`'s store, timed by its `clock`;
    /// the service stamps `Date` from `truth`.
    pub(crate) fn new(world: World, holder: usize, clock: SimClock, truth: TrueTime) -> Arc<Self> {
        Arc::new(Self {
            world,
            holder,
            caps: Mutex::new(Capabilities::default()),
            clock,
            truth,
            offset: Mutex::new(OffsetEstimator::new()),
        })
    }

    /// An answer arrived now for a request sent at `sent` (holder's
    /// boot-time clock): its `Date` is the service's time, truncated to
    /// whole seconds as HTTP dates are.
    fn answered(&self, sent: Duration) {
        let now = self.truth.wall();
        let date = DateTime::<Utc>::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        let answer = DateAnswer {
            date,
            sent_mono: sent,
            received_mono: self.clock.mono(),
            received_wall: self.clock.wall(),
        };
        self.offset
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(answer);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.world.lock()
    }

    /// Draws the delay and fault of one request (`write`: a PUT or DELETE).
    fn draw(&self, write: bool) -> (Duration, Fault) {
        self.lock().draw(self.holder, write)
    }

    async fn fail_before(fault: Fault) -> Result<(), StoreError> {
        match fault {
            Fault::Timeout | Fault::LateApply => {
                tokio::time::sleep(CLIENT_TIMEOUT).await;
                Err(timeout())
            }
            Fault::Conflict => Err(StoreError::Conflict),
            Fault::Internal => Err(StoreError::Other {
                status: 500,
                message: "InternalError".into(),
            }),
            Fault::SlowDown => Err(StoreError::Other {
                status: 503,
                message: "SlowDown".into(),
            }),
            _ => Ok(()),
        }
    }
}

fn timeout() -> StoreError {
    StoreError::Timeout(CLIENT_TIMEOUT, "simulated: no answer".into())
}

#[async_trait]
impl ObjectRead for SimStore {
    /// The store's name and the holder's: each holder is a process of its
    /// own, which runs its own once-per-store checks (probe, race).
    fn describe(&self) -> String {
        format!("{}#h{}", self.lock().name, self.holder)
    }

    /// The service's clock against the holder's, from its answers' `Date`
    /// intervals as the S3 store estimates it ([`OffsetEstimator`]), timed by
    /// the holder's clock: the simulated host's system clock. Each reading
    /// (the engine's offset checks) is scored against the truth
    /// ([`super::state::OffsetScore`]).
    fn server_offset(&self) -> Option<ServerOffset> {
        let (mono, wall) = (self.clock.mono(), self.clock.wall());
        let o = self
            .offset
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .estimate(mono, wall)?;
        let truth = (self.truth.wall() - wall)
            .num_microseconds()
            .unwrap_or(i64::MAX) as f64
            / 1e6;
        let mut w = self.lock();
        let holding = w.current_holder() == Some(self.holder);
        w.outcome.offset.score(&o, truth, holding);
        Some(o)
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let objects = self
            .lock()
            .objects
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, o)| o.meta(k))
            .collect();
        Ok(Listing {
            prefixes: Vec::new(),
            objects,
            unlisted: Vec::new(),
        })
    }

    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        self.stopped().await;
        let answer = self.get_running(key, if_none_match).await;
        self.stopped().await;
        if key == KEY {
            // What the holder now knows of the LEASE (S5).
            let seen = match &answer {
                Ok(out) => LeaseRecord::parse(&out.body, out.meta.size)
                    .ok()
                    .map(|r| tenure_of(&r)),
                Err(StoreError::NotFound(_)) => None,
                Err(_) => return answer,
            };
            let at = self.clock.mono();
            self.lock().lease_read_answered(self.holder, seen, at);
        }
        answer
    }

    /// One page: the whole listing.
    async fn list_page(
        &self,
        prefix: &str,
        _token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.list(prefix).await.map(|l| (l, None))
    }

    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        Err(no_sample(&self.describe(), prefix))
    }

    /// Every answer carries a `Date` (see [`SimStore::answered`]).
    fn server_clock_problem(&self) -> Option<String> {
        None
    }

    fn has_clock(&self) -> bool {
        true
    }

    fn endpoint_info(&self) -> EndpointInfo {
        EndpointInfo::default()
    }

    fn unavailable(&self) -> Option<StoreError> {
        None
    }

    /// The simulated store keeps one version of an object.
    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        Err(no_versions(&self.describe(), key))
    }

    async fn get_version(&self, key: &str, _version_id: &str) -> Result<GetOutput, StoreError> {
        Err(no_versions(&self.describe(), key))
    }
}

impl SimStore {
    async fn get_running(
        &self,
        key: &str,
        if_none_match: Option<&str>,
    ) -> Result<GetOutput, StoreError> {
        let (delay, fault) = self.draw(false);
        let sent = self.clock.mono();
        tokio::time::sleep(delay).await;
        if matches!(fault, Fault::Internal | Fault::SlowDown) {
            self.answered(sent);
        }
        if matches!(fault, Fault::Timeout | Fault::Internal | Fault::SlowDown) {
            Self::fail_before(fault).await?;
        }
        self.answered(sent);
        let g = self.lock();
        let Some(o) = g.objects.get(key) else {
            return Err(StoreError::NotFound(key.to_owned()));
        };
        if if_none_match.is_some_and(|e| normalize_etag(e) == o.etag) {
            return Err(StoreError::NotModified);
        }
        Ok(GetOutput {
            meta: o.meta(key),
            body: o.body.clone(),
            problem: None,
            links: None,
        })
    }
}

#[async_trait]
impl ObjectStore for SimStore {
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let sent = self.clock.mono();
        self.stopped().await;
        let answer = self.put_running(key, body, condition).await;
        self.stopped().await;
        if key == KEY && answer.is_ok() {
            self.lock().lease_write_answered(self.holder, sent);
        }
        answer
    }

    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        self.stopped().await;
        let answer = self.delete_running(key, if_match).await;
        self.stopped().await;
        answer
    }
    fn capabilities(&self) -> Capabilities {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_capabilities(&self, caps: Capabilities) -> bool {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner()) = caps;
        true
    }
}

/// A stopped process (its holder suspended) sends and receives nothing.
impl SimStore {
    /// Waits while this holder's process is stopped.
    async fn stopped(&self) {
        loop {
            let d = self.lock().stopped_for(self.holder);
            if d.is_zero() {
                return;
            }
            tokio::time::sleep(d).await;
        }
    }

    async fn put_running(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let (delay, fault) = self.draw(true);
        let sent = {
            let mut w = self.lock();
            if key == KEY && w.operator == Some(self.holder) && w.forcing.is_some() {
                w.forced_bodies.insert(body.clone());
            }
            w.now_ms()
        };
        let sent_at = self.clock.mono();
        tokio::time::sleep(delay).await;
        if matches!(fault, Fault::Conflict | Fault::Internal | Fault::SlowDown) {
            self.answered(sent_at);
        }
        if fault == Fault::LateApply {
            // The client gives up; the service carries the write out later.
            let world = self.world.clone();
            let (key, holder) = (key.to_owned(), self.holder);
            let (body, condition) = (body.clone(), condition.clone());
            let late = self.lock().late_delay();
            tokio::spawn(async move {
                tokio::time::sleep(late).await;
                let _ =
                    world
                        .lock()
                        .apply_put(holder, &key, &body, Apply::Now(&condition), Some(sent));
            });
        }
        Self::fail_before(fault).await?;
        if fault != Fault::Lost {
            self.answered(sent_at);
        }
        let variant = self.lock().variant;
        let etag = if variant == Variant::NotAtomic && condition != PutCondition::None {
            // Check now, write a moment later.
            self.lock().precondition_holds(key, &condition)?;
            let window = self.lock().not_atomic_window();
            tokio::time::sleep(window).await;
            self.lock().apply_put(
                self.holder,
                key,
                &body,
                Apply::CheckedBefore(&condition),
                (fault == Fault::Lost).then_some(sent),
            )?
        } else {
            self.lock().apply_put(
                self.holder,
                key,
                &body,
                Apply::Now(&condition),
                (fault == Fault::Lost).then_some(sent),
            )?
        };
        match fault {
            Fault::Lost => Err(timeout()),
            Fault::NoEtag => Ok(None),
            Fault::EmptyEtag => Ok(Some(String::new())),
            _ => Ok(Some(etag)),
        }
    }

    async fn delete_running(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let (delay, fault) = self.draw(true);
        let sent = self.clock.mono();
        tokio::time::sleep(delay).await;
        if matches!(fault, Fault::Conflict | Fault::Internal | Fault::SlowDown) {
            self.answered(sent);
        }
        Self::fail_before(fault).await?;
        let applied = self.lock().apply_delete(self.holder, key, if_match);
        if applied.is_err() || fault != Fault::Lost {
            self.answered(sent);
        }
        applied?;
        if fault == Fault::Lost {
            return Err(timeout());
        }
        Ok(())
    }
}
