//! One simulated world per seed: the holders and their clocks, the
//! partitions and clock steps, the operator, drawn from the seed and run
//! over the shared state and its checker ([`super::state`]).
//!
//! Everything runs on one thread (tokio's current-thread runtime with paused
//! time: timers fire in a fixed order, time jumps to the next timer when all
//! tasks wait), and every random choice is drawn from one `StdRng` seeded
//! with the seed, so a seed gives the same history byte for byte.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::clock::{ClockError, SimClock, TrueTime};
use super::command::Command;
use super::state::{tenure_of, Outcome, Property, Shared, Tenure, Variant, World, PREFIX};
use super::store::SimStore;
use crate::bucket::defect::{self, Defect};
use crate::bucket::{
    fmt_generation, race, BucketLease, Exclusion, FenceClosed, FenceStatus, KeepAlive, LeaseConfig,
    LeaseError, LeaseWatch, Watchdog,
};
use crate::clock::Clock;
use crate::hold::effective_grace;

/// What one seed's run is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The seed.
    pub seed: u64,
    /// The defect applied to the engine, if any.
    pub defect: Option<Defect>,
    /// Simulated seconds per seed.
    pub duration_s: u64,
    /// Every holder's clock offset is drawn within ± this fraction of the
    /// TTL (default 1/12 × 0.9: inside leasectl's allowance).
    pub max_offset_ttl_fraction: f64,
    /// The TTL, seconds (`None`: drawn per seed from 6, 12 and 30).
    pub ttl_s: Option<u64>,
    /// The store's variant (`None`: drawn per seed).
    pub store: Option<Variant>,
    /// Every holder (and the operator) with best-effort exclusion.
    pub best_effort: bool,
}

impl Options {
    /// The default run of `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            defect: None,
            duration_s: 240,
            max_offset_ttl_fraction: 0.9 / 12.0,
            ttl_s: None,
            store: None,
            best_effort: false,
        }
    }
}

/// One holder process: its slot, instance id and clock.
struct Holder {
    index: usize,
    id: String,
    clock: SimClock,
    world: World,
    store: Arc<SimStore>,
    config: LeaseConfig,
    rng: StdRng,
    end_ms: u64,
    /// Tries again the moment a record may be taken (else every third of a TTL).
    eager: bool,
}

/// How a lifetime ends.
#[derive(Debug, Clone, Copy)]
enum End {
    Release,
    Crash,
    Hold,
}

impl Holder {
    fn now_ms(&self) -> u64 {
        self.world.lock().now_ms()
    }

    async fn sleep_ms(&self, lo: u64, hi: u64, rng: &mut StdRng) {
        tokio::time::sleep(Duration::from_millis(rng.random_range(lo..hi))).await;
    }

    /// Contends, holds, writes, and lets go, until the end of the run.
    async fn run(mut self) {
        let mut rng = StdRng::seed_from_u64(self.rng.random());
        let ttl_ms = self.config.ttl_s * 1000;
        let mut restarts = 0u32;
        while self.now_ms() < self.end_ms {
            let Some(lease) = self.contend(&mut rng, ttl_ms).await else {
                return;
            };
            let tenure = tenure_of(lease.record());
            self.acquired(&lease, &tenure);
            self.hold(lease, &tenure, &mut rng, ttl_ms, &mut restarts)
                .await;
            self.sleep_ms(0, ttl_ms, &mut rng).await;
        }
    }

    /// Tries to acquire the lease until it does (Some) or the run ends
    /// (None), as a contender of its kind does.
    async fn contend(&mut self, rng: &mut StdRng, ttl_ms: u64) -> Option<BucketLease> {
        let mut watch = self.new_watch();
        loop {
            if self.now_ms() >= self.end_ms {
                return None;
            }
            self.stopped().await;
            self.check_answer_lost(ttl_ms);
            match BucketLease::acquire_as(
                self.store.clone(),
                Arc::new(self.clock.clone()),
                PREFIX,
                &self.id,
                self.config.clone(),
                &mut watch,
            )
            .await
            {
                Ok(l) => return Some(l),
                // An eager contender tries again the moment the record may
                // be taken; the others as `bucket hold --wait` does, a
                // third of a TTL later.
                Err(LeaseError::HeldByOther { may_take_in_s, .. }) if self.eager => {
                    let ms = (may_take_in_s.max(0.0) * 1000.0) as u64;
                    self.sleep_ms(ms + 1, ms + 50, rng).await
                }
                Err(LeaseError::HeldByOther { .. } | LeaseError::UnderWatch { .. }) => {
                    tokio::time::sleep(Duration::from_millis(ttl_ms / 3)).await
                }
                // No answer: tried again by the same process (as the SDK's
                // retries do), which remembers what it sent.
                Err(e @ LeaseError::Store(_)) => {
                    let broken = self.world.lock().variant != Variant::Healthy;
                    if broken {
                        let mut w = self.world.lock();
                        w.log(format_args!("h{} store error: {e}", self.index));
                    }
                    self.sleep_ms(200, 1000, rng).await
                }
                // Any other refusal ends the process; it is started again.
                Err(e) => {
                    if matches!(e, LeaseError::SameInstanceId { .. }) {
                        self.check_refused_own(&e);
                    }
                    watch = self.new_watch();
                    let broken = self.world.lock().variant != Variant::Healthy;
                    if broken {
                        let mut w = self.world.lock();
                        w.log(format_args!("h{} refused: {e}", self.index));
                    }
                    self.sleep_ms(200, 1000, rng).await
                }
            }
        }
    }

    /// Logs an acquired lease and tells the world that `tenure` was handed
    /// out (an acquire on a broken store is an S4 violation).
    fn acquired(&self, lease: &BucketLease, tenure: &Tenure) {
        let mut w = self.world.lock();
        w.log(format_args!(
            "h{} ({}) acquired, generation {}",
            self.index,
            self.id,
            fmt_generation(lease.record().generation)
        ));
        w.handed_out(tenure, lease.record().generation);
        if w.variant.always_broken() && !w.best_effort {
            let what = format!(
                "h{} acquired on a store that is {}",
                self.index,
                w.variant.as_str()
            );
            w.violation(Property::S4, tenure, what);
        }
    }

    /// Holds `lease` for a drawn life and ends it as drawn: a release, a
    /// crash (the process restarted, one time in three under the same id) or
    /// a hold until the run ends. Its command runs as `bucket hold` runs it
    /// ([`Command`]): started only with the fence open, it writes whenever it
    /// likes until it exits by itself or the fence's close stops it.
    async fn hold(
        &mut self,
        lease: BucketLease,
        tenure: &Tenure,
        rng: &mut StdRng,
        ttl_ms: u64,
        restarts: &mut u32,
    ) {
        let ka = KeepAlive::start_with(lease, Watchdog::Task);
        let ttl = Duration::from_millis(ttl_ms);
        let grace = effective_grace(None, ttl);
        let cmd = Command::start(&ka, self.clock.clone(), grace, rng);
        // Short holds (a release soon after the acquire) are what a
        // generation taken from the clock gets wrong.
        let life_ms = if rng.random_bool(0.3) {
            rng.random_range(50..ttl_ms / 4)
        } else {
            rng.random_range(ttl_ms / 4..ttl_ms * 2)
        };
        let end = match rng.random_range(0..10) {
            0..7 => End::Release,
            7..9 => End::Crash,
            _ => End::Hold,
        };
        let until = self.now_ms() + life_ms;
        // `bucket hold` starts its command only with the fence open.
        if ka.status().is_open() {
            self.world.lock().command_started(self.index, tenure);
        } else {
            let how = ka.stop_and_release().await;
            let mut w = self.world.lock();
            w.log(format_args!(
                "h{} fence closed before the command started; {how}",
                self.index
            ));
            w.outcome.lifetimes += 1;
            return;
        }
        loop {
            self.sleep_ms(50, 500, rng).await;
            self.stopped().await;
            let now = self.now_ms();
            let status = ka.status();
            self.check_loss_learned(tenure, status.is_open(), now, ttl_ms);
            if cmd.dead() {
                // The close reached the command; `bucket hold` then lets go.
                self.check_not_evicted(tenure, status, ttl_ms);
                self.world.lock().command_ended(self.index);
                let how = ka.stop_and_release().await;
                let mut w = self.world.lock();
                w.log(format_args!(
                    "h{} fence closed, command stopped; {how}",
                    self.index
                ));
                w.outcome.lifetimes += 1;
                break;
            }
            {
                let mut w = self.world.lock();
                let mono = Clock::mono(&self.clock);
                w.check_stopped(self.index, mono, ttl * 2 / 3, grace);
                w.write(self.index, tenure);
            }
            if now >= until.min(self.end_ms) && !matches!(end, End::Hold) || now >= self.end_ms {
                self.world.lock().command_ended(self.index);
                self.let_go(ka, end, rng, restarts).await;
                break;
            }
        }
    }

    /// The command exited by itself (or the run ended): the lifetime ends as
    /// drawn — a crash of the process (restarted, one time in three under
    /// the same id), or a release.
    async fn let_go(&mut self, ka: KeepAlive, end: End, rng: &mut StdRng, restarts: &mut u32) {
        match end {
            End::Crash => {
                drop(ka);
                let mut w = self.world.lock();
                w.log(format_args!("h{} crashed", self.index));
                w.forgot_at[self.index] = w.now_ms();
                w.outcome.lifetimes += 1;
                drop(w);
                *restarts += 1;
                if rng.random_range(0..3) != 0 {
                    self.id = format!("h{}r{restarts}", self.index);
                }
            }
            _ => {
                let how = ka.stop_and_release().await;
                let mut w = self.world.lock();
                w.log(format_args!("h{} released: {how}", self.index));
                w.outcome.lifetimes += 1;
            }
        }
    }

    /// Waits while this holder's process is stopped.
    async fn stopped(&self) {
        loop {
            let d = self.world.lock().stopped_for(self.index);
            if d.is_zero() {
                return;
            }
            tokio::time::sleep(d).await;
        }
    }

    /// L1: a live holder on a healthy store is never evicted — not by
    /// another, and not by its own fence. Where no request fails (fault rate
    /// 0), the TTL leaves room for the slowest answer, the holder has been
    /// reachable and running for two TTLs and its record is still the one
    /// stored, a fence closed for want of a renewal is the engine evicting a
    /// holder that did nothing wrong.
    fn check_not_evicted(&self, tenure: &Tenure, status: FenceStatus, ttl_ms: u64) {
        let FenceStatus::Closed(FenceClosed::Expired) = status else {
            return;
        };
        let mut w = self.world.lock();
        let now = w.now_ms();
        // A TTL of 12 s or more: a renewal's slack (a third of a TTL) then
        // outlasts the slowest answer drawn (1.5 s) with room to spare; at
        // 6 s, slow answers around an acquire's checks close a fence rightly.
        let quiet = w.variant == Variant::Healthy
            && w.fault_rate == 0.0
            && ttl_ms >= 12_000
            && now > w.partition_ended[self.index] + 2 * ttl_ms
            && w.current.as_ref() == Some(tenure);
        if quiet {
            let what = format!(
                "h{} ({}) closed its own fence for want of a renewal on a store that failed no request: a live holder evicted",
                self.index, tenure.0
            );
            w.violation(Property::L1, tenure, what);
        }
    }

    /// A new process's memory of what it sent: none.
    fn new_watch(&self) -> LeaseWatch {
        let mut w = self.world.lock();
        w.forgot_at[self.index] = w.now_ms();
        LeaseWatch::new()
    }

    /// S3: once our tenure was replaced, the fence is closed within the next
    /// renewal's reach (two thirds of a TTL, the fence's own bound, + 0.5 s).
    fn check_loss_learned(&self, tenure: &Tenure, open: bool, now: u64, ttl_ms: u64) {
        let mut w = self.world.lock();
        let replaced = w.tenures.get(tenure).and_then(|i| i.replaced_ms);
        if let (true, Some(r)) = (open, replaced) {
            if now > r + ttl_ms * 2 / 3 + 500 {
                let what = format!(
                    "h{} ({}) still has an open fence {} ms after its lease was taken",
                    self.index,
                    tenure.0,
                    now - r
                );
                w.violation(Property::S3, tenure, what);
            }
        }
    }

    /// The current tenure and when its write was sent, when the LEASE on a
    /// healthy store holds this process's own record whose answer was lost
    /// after this process's memory began (what an acquire must take up).
    fn own_lost_answer(&self, w: &Shared) -> Option<(Tenure, u64)> {
        if w.variant != Variant::Healthy {
            return None;
        }
        let cur = w.current.clone()?;
        let info = w.tenures.get(&cur)?;
        if info.holder != self.index || cur.0 != self.id || info.handed_out {
            return None;
        }
        let sent = info
            .answer_lost_ms
            .filter(|&sent| sent > w.forgot_at[self.index])?;
        Some((cur, sent))
    }

    /// L1, at the moment it is decided: this process refused as "another
    /// process under the same instance id" by the record it wrote itself
    /// (its answer lost, its memory of the body intact). `bucket hold` exits
    /// 4 then, and the next process must wait the lease out: a TTL lost.
    fn check_refused_own(&self, e: &LeaseError) {
        let mut w = self.world.lock();
        if let Some((cur, _)) = self.own_lost_answer(&w) {
            let what = format!(
                "h{} ({}) was refused its own record, whose answer it lost ({e}): the next process must wait the lease out",
                self.index, cur.0
            );
            w.violation(Property::L1, &cur, what);
        }
    }

    /// L1: a create of ours whose answer was lost is adopted by our next
    /// acquire, not waited out: within half a TTL while we are reachable.
    /// (On a broken store no acquire may succeed: nothing to take up.)
    fn check_answer_lost(&self, ttl_ms: u64) {
        let mut w = self.world.lock();
        let now = w.now_ms();
        if let Some((cur, lost)) = self.own_lost_answer(&w) {
            let reachable_since = lost.max(w.partition_ended[self.index]);
            // A client timeout, a pause before the next try, request delays.
            let bound = 5_000 + ttl_ms / 6;
            if now >= w.partitioned_until[self.index] && now > reachable_since + bound {
                let what = format!(
                    "h{} ({}) has not taken up its own record {} ms after sending the write whose answer was lost",
                    self.index,
                    cur.0,
                    now - lost
                );
                w.violation(Property::L1, &cur, what);
            }
        }
    }
}

/// What the operator needs of its world.
struct Setting<'a> {
    world: &'a World,
    truth: TrueTime,
    n: usize,
    ttl_s: u64,
    end_ms: u64,
}

/// Starts the operator (slot `n`, after the holders) with a clock and a
/// generator drawn from `op_rng`, its audit log in `audit_dir`.
fn spawn_operator(
    set: Setting<'_>,
    op_rng: &mut StdRng,
    max_off_us: i64,
    audit_dir: &std::path::Path,
) -> tokio::task::JoinHandle<()> {
    let Setting {
        world,
        truth,
        n,
        ttl_s,
        end_ms,
    } = set;
    let err = clock_error(op_rng, max_off_us);
    let clock = SimClock::new(truth, err);
    {
        let mut w = world.lock();
        w.operator = Some(n);
        w.log(format_args!(
            "operator clock offset {:+.3}s drift {:+}ppm",
            err.offset_us as f64 / 1e6,
            err.drift_ppm
        ));
    }
    let op = super::operator::Operator {
        index: n,
        clock: clock.clone(),
        world: world.clone(),
        store: SimStore::new(world.clone(), n, clock, truth),
        ttl_s,
        ids: (0..n).map(|i| format!("h{i}")).collect(),
        audit: audit_dir.join("audit.jsonl"),
        rng: StdRng::seed_from_u64(op_rng.random()),
        end_ms,
    };
    tokio::spawn(op.run())
}

/// The disturbances of one run until `end_ms`, drawn from `rng`:
/// partitions of one holder, clock steps, suspends.
async fn disturb(
    world: &World,
    rng: &mut StdRng,
    clocks: &[SimClock],
    n: usize,
    ttl_ms: u64,
    end_ms: u64,
    max_off_us: i64,
) {
    // The operators' schedule: partitions of one holder, clock steps,
    // suspends.
    let mut t = 0u64;
    loop {
        let gap = rng.random_range(ttl_ms / 2..ttl_ms * 4);
        t += gap;
        if t >= end_ms {
            break;
        }
        tokio::time::sleep(Duration::from_millis(gap)).await;
        let h = rng.random_range(0..n);
        match rng.random_range(0..4) {
            0 | 1 => {
                let len = rng.random_range(ttl_ms / 3..ttl_ms * 2);
                let mut w = world.lock();
                let now = w.now_ms();
                w.partitioned_until[h] = now + len;
                w.partition_ended[h] = now + len;
                w.log(format_args!("h{h} cut off from the store for {len} ms"));
            }
            2 => {
                let step = rng.random_range(-max_off_us / 4..=max_off_us / 4 + 1);
                clocks[h].step(step);
                world
                    .lock()
                    .log(format_args!("h{h} wall clock stepped {step:+} µs"));
            }
            _ if rng.random_bool(0.5) => {
                // The process stops (SIGSTOP, a paused VM, a long pause)
                // while true time goes on; it resumes where it was.
                // Mostly the holder of the lease, where a stop matters.
                let len = rng.random_range(ttl_ms / 4..ttl_ms * 2);
                let mut w = world.lock();
                let holding = w.current_holder().filter(|&c| c < n);
                let h = match holding {
                    Some(c) if rng.random_bool(0.7) => c,
                    _ => h,
                };
                let now = w.now_ms();
                w.suspended_until[h] = now + len;
                w.partition_ended[h] = w.partition_ended[h].max(now + len);
                w.log(format_args!("h{h} stopped for {len} ms"));
            }
            _ => {}
        }
    }
}

/// A host clock's error drawn from `rng`: an offset within ±`max_off_us`,
/// a drift within ±200 ppm, no step yet.
fn clock_error(rng: &mut StdRng, max_off_us: i64) -> ClockError {
    ClockError {
        offset_us: if max_off_us > 0 {
            rng.random_range(-max_off_us..=max_off_us)
        } else {
            0
        },
        drift_ppm: rng.random_range(-200..=200),
        steps_us: 0,
    }
}

/// Runs one seed to its end and returns what the checker found.
pub fn run_seed(opts: Options) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    defect::set(opts.defect);
    defect::seed_ids(Some(opts.seed));
    defect::watchdog_on_task(true);
    let outcome = rt.block_on(world(opts));
    defect::watchdog_on_task(false);
    defect::seed_ids(None);
    defect::set(None);
    outcome
}

/// A store's variant, drawn: one world in 20 each ignores every
/// precondition, checks then writes, or ignores one request in 100 or in
/// 1,000; the rest are healthy.
fn draw_variant(rng: &mut StdRng) -> Variant {
    match rng.random_range(0..20) {
        0 => Variant::IgnoresPreconditions,
        1 => Variant::NotAtomic,
        2 => Variant::IgnoresSometimes(100),
        3 => Variant::IgnoresSometimes(1000),
        _ => Variant::Healthy,
    }
}

async fn world(opts: Options) -> Outcome {
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let epoch = DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default();
    let truth = TrueTime::new(epoch);
    let drawn: u64 = [6, 12, 30][rng.random_range(0..3)];
    let ttl_s = opts.ttl_s.unwrap_or(drawn);
    let ttl_ms = ttl_s * 1000;
    let n = rng.random_range(2..=8usize);
    // Drawn whether or not it is chosen: a seed's later draws stay its own.
    let drawn = draw_variant(&mut rng);
    let variant = opts.store.unwrap_or(drawn);
    let fault_rate = [0.0, 0.01, 0.05][rng.random_range(0..3)];
    let end_ms = opts.duration_s * 1000;
    // Each run its own store name, so that no once-per-store finding of an
    // earlier run (or of a run on another test thread) is reused; the run
    // number is left out of the history.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("sim://seed-{}/{}/run-{run}", opts.seed, variant.as_str());
    let world = World(Arc::new(Mutex::new(Shared {
        name: name.clone(),
        objects: BTreeMap::new(),
        variant,
        truth,
        rng: StdRng::seed_from_u64(rng.random()),
        next_etag: 0,
        fault_rate,
        partitioned_until: vec![0; n + 1],
        suspended_until: vec![0; n + 1],
        partition_ended: vec![0; n + 1],
        forgot_at: vec![0; n + 1],
        ttl_ms,
        current: None,
        latest: None,
        tenures: BTreeMap::new(),
        created: 0,
        outcome: Outcome::default(),
        reported: Default::default(),
        operator: None,
        forcing: None,
        forced_bodies: Default::default(),
        best_effort: opts.best_effort,
        overlap: BTreeMap::new(),
        holding: vec![None; n + 1],
        lease_written_mono: vec![None; n + 1],
        learned_lost: vec![None; n + 1],
    })));
    let max_off_us = (ttl_ms as f64 * 1000.0 * opts.max_offset_ttl_fraction) as i64;
    let same_id = rng.random_bool(0.15);
    // The operator's draws come from a generator of their own, so that the
    // holders' world of a seed is the one it was before operators came.
    let mut op_rng = StdRng::seed_from_u64(opts.seed ^ 0x6f70_6572_6174_6f72);
    let operator = op_rng.random_bool(0.5);
    {
        let mut w = world.lock();
        w.log(format_args!(
            "seed {} defect {} ttl {ttl_s}s holders {n} store {} faults {fault_rate} same-id {same_id} operator {operator}{}",
            opts.seed,
            opts.defect.map(defect::name).unwrap_or("none"),
            variant.as_str(),
            if opts.best_effort { " best-effort" } else { "" }
        ));
    }
    let mut clocks = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..n {
        let err = clock_error(&mut rng, max_off_us);
        world.lock().log(format_args!(
            "h{i} clock offset {:+.3}s drift {:+}ppm",
            err.offset_us as f64 / 1e6,
            err.drift_ppm
        ));
        let clock = SimClock::new(truth, err);
        clocks.push(clock.clone());
        let id = if same_id && i == 1 {
            "h0".to_owned()
        } else {
            format!("h{i}")
        };
        let h = Holder {
            index: i,
            id,
            clock: clock.clone(),
            world: world.clone(),
            store: SimStore::new(world.clone(), i, clock.clone(), truth),
            config: LeaseConfig {
                ttl_s,
                exclusion: if opts.best_effort {
                    Exclusion::BestEffort
                } else {
                    Exclusion::Conditional
                },
                ..LeaseConfig::default()
            },
            rng: StdRng::seed_from_u64(rng.random()),
            end_ms,
            eager: rng.random_bool(0.5),
        };
        tasks.push(tokio::spawn(h.run()));
    }
    let audit_dir = std::env::temp_dir().join(format!("leasectl-sim-{}-{run}", std::process::id()));
    if operator {
        let op = Setting {
            world: &world,
            truth,
            n,
            ttl_s,
            end_ms,
        };
        tasks.push(spawn_operator(op, &mut op_rng, max_off_us, &audit_dir));
    }
    disturb(&world, &mut rng, &clocks, n, ttl_ms, end_ms, max_off_us).await;
    finish(&world, tasks, end_ms, ttl_ms, &name, &audit_dir).await
}

/// The end of a world: the holders past `end_ms` get a TTL to finish (release),
/// then every task stops and the checker's outcome is taken; the store's
/// name is forgotten and the operator's audit directory removed.
async fn finish(
    world: &World,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    end_ms: u64,
    ttl_ms: u64,
    name: &str,
    audit_dir: &std::path::Path,
) -> Outcome {
    let left = end_ms.saturating_sub(world.lock().now_ms());
    tokio::time::sleep(Duration::from_millis(left)).await;
    // Holders past the end finish what they are doing (release) within a TTL.
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    for task in tasks {
        task.abort();
    }
    let mut w = world.lock();
    let (l, wr, v) = (
        w.outcome.lifetimes,
        w.outcome.writes,
        w.outcome.violations.len(),
    );
    w.log(format_args!(
        "end: {l} lifetimes, {wr} writes, {v} violations"
    ));
    w.outcome.variant = Some(w.variant);
    let overlaps: Vec<u64> = w.overlap.values().map(|(a, b)| b - a).collect();
    w.outcome.overlaps_ms = overlaps;
    let out = std::mem::take(&mut w.outcome);
    drop(w);
    race::forget(&format!("{name}#"));
    let _ = std::fs::remove_dir_all(audit_dir);
    out
}
