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
use crate::clock::{Clock as _, ServerOffset};
use crate::store::{
    normalize_etag, Capabilities, GetOutput, Listing, ObjectRead, ObjectStore, PutCondition,
    StoreError,
};

/// How long a client waits before it gives a request up.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// An answer's `Date`, and when its request was sent and it was received.
type Answered = (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);

/// One holder's view of the simulated store.
pub struct SimStore {
    world: World,
    holder: usize,
    caps: Mutex<Capabilities>,
    /// The holder's clock, by which it times its requests.
    clock: SimClock,
    /// The service's clock: true time (its `Date` headers).
    truth: TrueTime,
    /// The latest answer: its `Date` (whole seconds of true time) and when
    /// the request was sent and the answer received, by the holder's clock.
    last_answer: Mutex<Option<Answered>>,
}

impl SimStore {
    /// Holder `holder`'s handle on `world`'s store, timed by its `clock`;
    /// the service stamps `Date` from `truth`.
    pub fn new(world: World, holder: usize, clock: SimClock, truth: TrueTime) -> Arc<Self> {
        Arc::new(Self {
            world,
            holder,
            caps: Mutex::new(Capabilities::default()),
            clock,
            truth,
            last_answer: Mutex::new(None),
        })
    }

    /// An answer arrived now for a request sent at `sent` (holder's clock):
    /// its `Date` is the service's time, truncated to whole seconds as HTTP
    /// dates are.
    fn answered(&self, sent: DateTime<Utc>) {
        let now = self.truth.wall();
        let date = DateTime::<Utc>::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        *self.last_answer.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((date, sent, self.clock.wall()));
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

    /// The service's clock against the holder's, from the latest answer's
    /// `Date` as the S3 store estimates it ([`ServerOffset::from_answer`]),
    /// timed by the holder's clock: the simulated host's system clock.
    fn server_offset(&self) -> Option<ServerOffset> {
        let (date, sent, received) = (*self.last_answer.lock().unwrap_or_else(|e| e.into_inner()))?;
        Some(ServerOffset::from_answer(date, sent, received))
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
}

impl SimStore {
    async fn get_running(
        &self,
        key: &str,
        if_none_match: Option<&str>,
    ) -> Result<GetOutput, StoreError> {
        let (delay, fault) = self.draw(false);
        let sent = self.clock.wall();
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
        let sent_at = self.clock.wall();
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
        let sent = self.clock.wall();
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
