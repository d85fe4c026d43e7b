//! The simulated operator: takeovers through the real executor
//! ([`crate::takeover::takeover`]) — of stale leases, of suspect or
//! malformed ones after a TTL of watching them unchanged, and of fresh ones
//! with `--force` — each followed by a release, a hold (the operator's
//! command writes while its fence is open) or a hand-over to one of the
//! holders' instance ids (two processes may run under it).
//!
//! What the checker needs to know of a forced takeover it is told before the
//! executor runs ([`super::state::Shared::forcing`]): the replaced holder may
//! still write until its fence has closed, and the new holder may not write
//! before then.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::clock::SimClock;
use super::state::{tenure_of, World, KEY, PREFIX};
use super::store::SimStore;
use crate::audit::{AuditLog, AuditTarget};
use crate::bucket::{
    fmt_generation, judge, read_lease, Exclusion, FenceStatus, KeepAlive, LeaseState, Observed,
    RecordFormat, Watchdog,
};
use crate::clock::{Clock as _, SharedClock};
use crate::takeover::{takeover, TakeoverRequest, Then};

/// The operator of one world: its slot (after the holders'), clock, store
/// handle and audit log.
pub(super) struct Operator {
    pub index: usize,
    pub clock: SimClock,
    pub world: World,
    pub store: Arc<SimStore>,
    pub ttl_s: u64,
    /// The holders' instance ids (hand-over successors).
    pub ids: Vec<String>,
    pub audit: PathBuf,
    pub rng: StdRng,
    pub(crate) end_ms: u64,
}

impl Operator {
    fn now_ms(&self) -> u64 {
        self.world.lock().now_ms()
    }

    fn log(&self, line: std::fmt::Arguments<'_>) {
        self.world.lock().log(line);
    }

    /// Looks at the LEASE now and then, and takes it over when the draw says
    /// so, until a little before the end of the run.
    pub(super) async fn run(mut self) {
        let ttl_ms = self.ttl_s * 1000;
        let Ok(audit) = AuditLog::open(&self.audit) else {
            self.log(format_args!("operator: the audit log cannot be opened"));
            return;
        };
        // A suspect or malformed record, and since when (true ms) its ETag
        // has been seen unchanged.
        let mut watching: Option<(String, u64)> = None;
        loop {
            let gap = self.rng.random_range(ttl_ms / 2..ttl_ms * 3);
            tokio::time::sleep(Duration::from_millis(gap)).await;
            if self.now_ms() + ttl_ms * 3 >= self.end_ms {
                return;
            }
            let Ok(seen) = read_lease(self.store.as_ref(), KEY, None).await else {
                continue;
            };
            let state = judge(&seen, self.clock.wall()).state;
            let now = self.now_ms();
            let watched_for = match (&seen, &watching) {
                (Observed::Present { etag: Some(e), .. }, Some((w, since))) if e == w => {
                    Duration::from_millis(now - since)
                }
                _ => Duration::ZERO,
            };
            let force = match state {
                LeaseState::Stale => false,
                LeaseState::Suspect | LeaseState::Malformed => {
                    if watched_for < Duration::from_secs(self.ttl_s) {
                        watching = seen.etag().map(|e| (e.to_owned(), now));
                        continue;
                    }
                    false
                }
                // A fresh lease: forced, now and then.
                LeaseState::Fresh if self.rng.random_bool(0.4) => true,
                _ => continue,
            };
            watching = None;
            self.take_over(&audit, seen, state, watched_for, force)
                .await;
        }
    }

    /// One takeover of `seen` (judged `state`), then what the draw chose.
    async fn take_over(
        &mut self,
        audit: &AuditLog,
        seen: Observed,
        state: LeaseState,
        watched_for: Duration,
        force: bool,
    ) {
        let then = match self.rng.random_range(0..3) {
            0 => Then::Release,
            1 => Then::Hold,
            _ => Then::Handover(self.ids[self.rng.random_range(0..self.ids.len())].clone()),
        };
        let replaced = seen.record().map(tenure_of);
        {
            let mut w = self.world.lock();
            w.log(format_args!(
                "operator: takes over a {} lease of {}{}, then {then}",
                state.as_str(),
                replaced.as_ref().map(|t| t.0.as_str()).unwrap_or("-"),
                if force { " (forced)" } else { "" }
            ));
            w.forcing = if force { replaced.clone() } else { None };
        }
        let req = TakeoverRequest {
            prefix: PREFIX.to_owned(),
            seen,
            watched_for,
            reason: "simulated incident".into(),
            then: then.clone(),
            force,
            ttl_s: self.ttl_s,
            exclusion: if self.world.lock().best_effort {
                Exclusion::BestEffort
            } else {
                Exclusion::Conditional
            },
            record_format: RecordFormat::Leasectl,
            target: AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: None,
                key: KEY.to_owned(),
                url: format!("sim://{PREFIX}/"),
            },
        };
        let clock: SharedClock = Arc::new(self.clock.clone());
        let result = takeover(self.store.clone(), clock, audit, req).await;
        self.world.lock().forcing = None;
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                self.log(format_args!("operator: takeover refused or failed: {e}"));
                return;
            }
        };
        let tenure = tenure_of(&out.written);
        {
            let mut w = self.world.lock();
            w.log(format_args!(
                "operator: took it, {} generation {}{}",
                tenure.0,
                fmt_generation(out.written.generation),
                out.writes_safe_from
                    .map(|t| format!(", writes safe from {}", t.format("%H:%M:%S%.6f")))
                    .unwrap_or_default()
            ));
            w.handed_out(&tenure, out.written.generation);
            if w.variant.always_broken() && !w.best_effort {
                let what = format!(
                    "the operator's takeover succeeded on a store that is {}",
                    w.variant.as_str()
                );
                w.violation(super::state::Property::S4, &tenure, what);
            }
            w.outcome.lifetimes += 1;
        }
        let Some(held) = out.held else {
            return;
        };
        // Then hold: the operator's command writes whenever its fence is open.
        let mut rng = StdRng::seed_from_u64(self.rng.random());
        let ka = KeepAlive::start_with(held, Watchdog::Task);
        let ttl_ms = self.ttl_s * 1000;
        let until = self.now_ms() + rng.random_range(ttl_ms / 2..ttl_ms * 2);
        loop {
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..500))).await;
            match ka.status() {
                FenceStatus::Open(_) => self.world.lock().write(self.index, &tenure),
                FenceStatus::Waiting(_) => {}
                FenceStatus::Closed(_) => break,
            }
            if self.now_ms() >= until {
                break;
            }
        }
        let how = ka.stop_and_release().await;
        self.log(format_args!("operator: let go: {how}"));
    }
}
