//! What `serve` keeps of each probed target between scrapes, bounded: at
//! most [`Bounds::max_targets`] targets and about [`Bounds::max_bytes`]
//! bytes of their state, the least recently probed forgotten first, and any
//! target not probed for [`Bounds::forget_after`] forgotten (a target that
//! left service discovery, or a shard that moved it elsewhere).
//!
//! A probe takes its target's state out ([`StateCache::check_out`]) and
//! puts it back when done ([`Taken::put`]): the cache's lock is held only to
//! look a state up or put it back, never across a request to a store. A
//! second probe of a target whose state is out waits for it (two Prometheus
//! servers of an HA pair scrape the same targets); a probe dropped before it
//! put its state back (its runtime stopping) forgets it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The bounds of a [`StateCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most targets whose state is kept.
    pub max_targets: usize,
    /// About the most bytes of state kept (each state's own estimate,
    /// [`Weigh::bytes`]).
    pub max_bytes: usize,
    /// A target not probed for this long is forgotten.
    pub forget_after: Duration,
}

/// A state that can say about how many bytes it holds.
pub trait Weigh {
    /// About how many bytes of heap it holds.
    fn bytes(&self) -> usize;
}

/// Why states were forgotten, counted ([`CacheStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgot {
    /// Over [`Bounds::max_targets`]: the least recently probed went.
    Targets,
    /// Over [`Bounds::max_bytes`]: the least recently probed went.
    Bytes,
    /// Not probed for [`Bounds::forget_after`].
    Unscraped,
    /// Its probe ended without putting it back.
    Abandoned,
}

impl Forgot {
    /// Every reason, in the order of [`Forgot::label`].
    pub const ALL: [Forgot; 4] = [
        Forgot::Abandoned,
        Forgot::Bytes,
        Forgot::Targets,
        Forgot::Unscraped,
    ];

    /// Its label value.
    pub fn label(self) -> &'static str {
        match self {
            Forgot::Targets => "targets",
            Forgot::Bytes => "bytes",
            Forgot::Unscraped => "unscraped",
            Forgot::Abandoned => "abandoned",
        }
    }
}

/// What a [`StateCache`] holds at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Targets whose state is kept (those taken out by a probe included).
    pub targets: usize,
    /// Their states' bytes, as last weighed.
    pub bytes: usize,
    /// States forgotten so far, by [`Forgot`] in the order of [`Forgot::ALL`].
    pub forgotten: [u64; 4],
}

struct Slot<V> {
    /// `None` while a probe has it out.
    state: Option<V>,
    /// Its weight when last put back.
    bytes: usize,
    /// Its place in the least-recently-probed order (while in).
    tick: u64,
    /// When it was last put back.
    used: Instant,
    /// Told when it is put back or forgotten (probes waiting for it).
    back: Arc<Notify>,
}

struct Inner<V> {
    slots: HashMap<String, Slot<V>>,
    /// The states in the cache (not out), least recently probed first.
    order: BTreeMap<u64, String>,
    tick: u64,
    bytes: usize,
}

/// The states of probed targets by key, bounded (module docs).
pub struct StateCache<V> {
    inner: Mutex<Inner<V>>,
    bounds: Bounds,
    forgotten: [AtomicU64; 4],
}

/// A state taken out of the cache by a probe: put it back with
/// [`Taken::put`]; dropped without that, the cache forgets it.
pub struct Taken<'a, V> {
    cache: &'a StateCache<V>,
    key: String,
    /// The state kept for the key (`None`: none yet).
    pub state: Option<V>,
    put: bool,
}

/// What [`StateCache::check_out`] found.
pub enum CheckOut<'a, V> {
    /// The key's state (or none yet), now out.
    Taken(Taken<'a, V>),
    /// Another probe still had it out at the deadline.
    Busy,
}

impl<V> StateCache<V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<V>> {
        // A probe that panicked under the lock leaves a consistent map.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, why: Forgot, n: u64) {
        let i = Forgot::ALL.iter().position(|f| *f == why).unwrap_or(0);
        self.forgotten[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Forgets the state of `key` if it is out (its probe ended without
    /// putting it back).
    fn forget_out(&self, key: &str) {
        let mut g = self.lock();
        let Some(slot) = g.slots.get(key).filter(|s| s.state.is_none()) else {
            return;
        };
        let (bytes, back) = (slot.bytes, slot.back.clone());
        g.slots.remove(key);
        g.bytes -= bytes;
        drop(g);
        back.notify_waiters();
        self.count(Forgot::Abandoned, 1);
    }
}

impl<V: Weigh> StateCache<V> {
    /// An empty cache with these bounds.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            inner: Mutex::new(Inner {
                slots: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                bytes: 0,
            }),
            bounds,
            forgotten: Default::default(),
        }
    }

    /// Its bounds.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Takes the state of `key` out (or a place for it, when there is none
    /// yet), waiting while another probe has it, until `deadline`.
    /// Forgets the states not probed for [`Bounds::forget_after`] first.
    pub async fn check_out(&self, key: &str, deadline: Instant) -> CheckOut<'_, V> {
        loop {
            let back = match self.try_take(key) {
                Ok(t) => return CheckOut::Taken(t),
                Err(back) => back,
            };
            // Registered before looking again, so that a put in between
            // is not missed.
            let told = back.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            match self.try_take(key) {
                Ok(t) => return CheckOut::Taken(t),
                Err(_) => {
                    if tokio::time::timeout_at(deadline, told).await.is_err() {
                        return CheckOut::Busy;
                    }
                }
            }
        }
    }

    /// The state of `key`, out; or what tells when it is back, while
    /// another probe has it.
    fn try_take(&self, key: &str) -> Result<Taken<'_, V>, Arc<Notify>> {
        let now = Instant::now();
        let mut g = self.lock();
        self.forget_unscraped(&mut g, now);
        let inner = &mut *g;
        let state = match inner.slots.get_mut(key) {
            Some(slot) if slot.state.is_none() => return Err(slot.back.clone()),
            Some(slot) => {
                inner.order.remove(&slot.tick);
                slot.state.take()
            }
            None => {
                inner.slots.insert(
                    key.to_owned(),
                    Slot {
                        state: None,
                        bytes: 0,
                        tick: 0,
                        used: now,
                        back: Arc::new(Notify::new()),
                    },
                );
                None
            }
        };
        Ok(Taken {
            cache: self,
            key: key.to_owned(),
            state,
            put: false,
        })
    }

    /// Forgets the states (not out) last put back before `now` − forget_after.
    fn forget_unscraped(&self, inner: &mut Inner<V>, now: Instant) {
        let mut n = 0;
        while let Some((&tick, key)) = inner.order.first_key_value() {
            let Some(slot) = inner.slots.get(key) else {
                inner.order.remove(&tick);
                continue;
            };
            if now.saturating_duration_since(slot.used) < self.bounds.forget_after {
                break;
            }
            let key = key.clone();
            inner.order.remove(&tick);
            if let Some(slot) = inner.slots.remove(&key) {
                inner.bytes -= slot.bytes;
                slot.back.notify_waiters();
            }
            n += 1;
        }
        if n > 0 {
            self.count(Forgot::Unscraped, n);
        }
    }

    /// Puts `state` back for `key`, then forgets the least recently probed
    /// states (this one last) while over a bound.
    fn put_back(&self, key: &str, state: V) {
        let bytes = state.bytes();
        let mut g = self.lock();
        let inner = &mut *g;
        inner.tick += 1;
        let tick = inner.tick;
        let Some(slot) = inner.slots.get_mut(key) else {
            // Forgotten meanwhile: nothing to keep it in.
            return;
        };
        inner.bytes = inner.bytes - slot.bytes + bytes;
        slot.bytes = bytes;
        slot.tick = tick;
        slot.used = Instant::now();
        slot.state = Some(state);
        slot.back.notify_waiters();
        inner.order.insert(tick, key.to_owned());
        self.shrink(inner);
    }

    /// Forgets the least recently probed states (not out) while over a bound.
    fn shrink(&self, inner: &mut Inner<V>) {
        loop {
            let why = if inner.slots.len() > self.bounds.max_targets {
                Forgot::Targets
            } else if inner.bytes > self.bounds.max_bytes {
                Forgot::Bytes
            } else {
                return;
            };
            let Some((_, key)) = inner.order.pop_first() else {
                // Every state is out: nothing can go until one comes back.
                return;
            };
            if let Some(slot) = inner.slots.remove(&key) {
                inner.bytes -= slot.bytes;
                slot.back.notify_waiters();
            }
            self.count(why, 1);
        }
    }

    /// What it holds now.
    pub fn stats(&self) -> CacheStats {
        let (targets, bytes) = {
            let g = self.lock();
            (g.slots.len(), g.bytes)
        };
        CacheStats {
            targets,
            bytes,
            forgotten: std::array::from_fn(|i| self.forgotten[i].load(Ordering::Relaxed)),
        }
    }
}

impl<V: Weigh> Taken<'_, V> {
    /// Puts `state` back as the key's (forgetting others while over a bound).
    pub fn put(mut self, state: V) {
        self.put = true;
        self.cache.put_back(&self.key, state);
    }
}

impl<V> Drop for Taken<'_, V> {
    fn drop(&mut self) {
        if !self.put {
            self.cache.forget_out(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S(usize);

    impl Weigh for S {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    fn bounds(max_targets: usize, max_bytes: usize) -> Bounds {
        Bounds {
            max_targets,
            max_bytes,
            forget_after: Duration::from_secs(600),
        }
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    async fn take<'a>(c: &'a StateCache<S>, key: &str) -> Taken<'a, S> {
        match c.check_out(key, later()).await {
            CheckOut::Taken(t) => t,
            CheckOut::Busy => panic!("{key} busy"),
        }
    }

    async fn probe(c: &StateCache<S>, key: &str, bytes: usize) -> bool {
        let t = take(c, key).await;
        let had = t.state.is_some();
        t.put(S(bytes));
        had
    }

    #[tokio::test]
    async fn a_state_comes_back_at_the_next_probe() {
        let c = StateCache::new(bounds(10, 1000));
        assert!(!probe(&c, "a", 10).await);
        assert!(probe(&c, "a", 20).await);
        let s = c.stats();
        assert_eq!((s.targets, s.bytes), (1, 20));
        assert_eq!(s.forgotten, [0; 4]);
    }

    #[tokio::test]
    async fn the_least_recently_probed_go_first_over_the_target_bound() {
        let c = StateCache::new(bounds(2, 1000));
        probe(&c, "a", 1).await;
        probe(&c, "b", 1).await;
        probe(&c, "a", 1).await;
        probe(&c, "c", 1).await;
        // b was the least recently probed.
        assert!(probe(&c, "a", 1).await);
        assert!(probe(&c, "c", 1).await);
        assert!(!probe(&c, "b", 1).await);
        let s = c.stats();
        assert_eq!(s.targets, 2);
        assert_eq!(s.forgotten, [0, 0, 2, 0]);
    }

    #[tokio::test]
    async fn states_go_while_over_the_byte_bound_even_the_one_put_back() {
        let c = StateCache::new(bounds(100, 100));
        probe(&c, "a", 40).await;
        probe(&c, "b", 40).await;
        probe(&c, "c", 40).await;
        let s = c.stats();
        assert_eq!((s.targets, s.bytes), (2, 80));
        assert_eq!(s.forgotten, [0, 1, 0, 0]);
        // A state larger than the bound alone is not kept either.
        probe(&c, "big", 500).await;
        let s = c.stats();
        assert_eq!((s.targets, s.bytes), (0, 0));
        assert!(!probe(&c, "big", 1).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_target_not_probed_for_a_while_is_forgotten() {
        let c = StateCache::new(bounds(10, 1000));
        probe(&c, "a", 1).await;
        probe(&c, "b", 1).await;
        tokio::time::advance(Duration::from_secs(400)).await;
        probe(&c, "b", 1).await;
        tokio::time::advance(Duration::from_secs(300)).await;
        // a: 700 s unprobed, forgotten; b: 300 s, kept.
        assert!(!probe(&c, "a", 1).await);
        assert!(probe(&c, "b", 1).await);
        assert_eq!(c.stats().forgotten, [0, 0, 0, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_probe_waits_for_the_state_until_its_deadline() {
        let c = Arc::new(StateCache::new(bounds(10, 1000)));
        probe(&c, "a", 1).await;
        let first = take(&c, "a").await;
        assert!(first.state.is_some());
        // Out until the deadline: busy.
        let soon = Instant::now() + Duration::from_millis(300);
        assert!(matches!(c.check_out("a", soon).await, CheckOut::Busy));
        // Put back while the second waits: it gets the state.
        let c2 = c.clone();
        let waiter = tokio::spawn(async move {
            match c2.check_out("a", later()).await {
                CheckOut::Taken(t) => {
                    let got = t.state.as_ref().map(|s| s.0);
                    t.put(S(3));
                    got
                }
                CheckOut::Busy => None,
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        first.put(S(2));
        assert_eq!(waiter.await.unwrap(), Some(2));
        assert_eq!(c.stats().bytes, 3);
    }

    #[tokio::test]
    async fn a_probe_that_ends_without_putting_back_forgets_the_state() {
        let c = StateCache::new(bounds(10, 1000));
        probe(&c, "a", 7).await;
        drop(take(&c, "a").await);
        let s = c.stats();
        assert_eq!((s.targets, s.bytes), (0, 0));
        assert_eq!(s.forgotten, [1, 0, 0, 0]);
        assert!(!probe(&c, "a", 1).await);
    }
}
