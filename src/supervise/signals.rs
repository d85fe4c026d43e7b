//! The signals a supervisor passes on to its command, and those that end
//! what it holds: every signal whose default action ends a process
//! (signal(7)) has one of three fates here, so none ends `bucket hold`,
//! `writer exec`, a takeover's hold or the console with a lease left held.
//!
//! - **Forwarded** ([`forwarded`]): what someone outside sends to tell the
//!   command something — SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
//!   SIGALRM, SIGVTALRM, SIGPROF, SIGIO (SIGPOLL), SIGPWR, SIGSTKFLT and the
//!   real-time signals SIGRTMIN…SIGRTMAX. leasectl uses none of them itself.
//!   A supervisor without a command (a takeover's hold, the console) ends
//!   what it holds on each, as on SIGTERM.
//! - **Ending the hold** ([`ENDING`]): SIGXCPU and SIGXFSZ say that leasectl
//!   itself passed its CPU-time or file-size limit (its own, not the
//!   command's, which has its own): the command is stopped as when the fence
//!   closes (SIGTERM, then SIGKILL after the grace) and the lease released.
//! - **Left as they are**: SIGPIPE is ignored (as in every Rust program: a
//!   write to a closed pipe fails with `EPIPE` instead, and leasectl's own
//!   writes would raise it); the faults SIGSEGV, SIGBUS, SIGFPE, SIGILL,
//!   SIGSYS, SIGTRAP and SIGABRT keep their default (a core dump: a handler
//!   returning from a real fault would run the faulting instruction again);
//!   SIGKILL and SIGSTOP cannot be caught. After any of these the command
//!   dies with leasectl (its parent-death signal, its PID namespace) and the
//!   lease is left to expire after its TTL.

use nix::sys::signal::{SigSet, Signal};

/// The signals passed on to a supervised command (`writer exec`, `bucket
/// hold`, and by `bucket hold`'s PID-namespace init), and that end a
/// takeover's waits and the console (module docs).
pub fn forwarded() -> Vec<i32> {
    let mut v = vec![
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// The signals that end a supervisor's hold instead of being forwarded:
/// leasectl's own CPU-time and file-size limits (module docs).
pub const ENDING: [i32; 2] = [libc::SIGXCPU, libc::SIGXFSZ];

/// Every signal a supervisor catches: [`forwarded`], then [`ENDING`].
pub fn caught() -> Vec<i32> {
    let mut v = forwarded();
    v.extend(ENDING);
    v
}

/// Whether `sig` ends a supervisor's hold rather than being forwarded.
pub fn ends_hold(sig: i32) -> bool {
    ENDING.contains(&sig)
}

/// `SIGTERM`, `SIGINT`, `SIGRTMIN+3`, … for a signal number.
pub fn signal_name(sig: i32) -> String {
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if (min..=max).contains(&sig) {
        return match sig - min {
            0 => "SIGRTMIN".to_owned(),
            n => format!("SIGRTMIN+{n}"),
        };
    }
    Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// A signal set of `signals` (real-time ones included, which
/// [`nix::sys::signal::Signal`] does not name).
pub fn sigset(signals: &[i32]) -> SigSet {
    let mut raw = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset of a valid number.
    unsafe {
        libc::sigemptyset(raw.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(raw.as_mut_ptr(), s);
        }
        SigSet::from_sigset_t_unchecked(raw.assume_init())
    }
}

/// Waits (`sigwait`) for a signal of `set`, blocked in every thread, and
/// returns its number; real-time signals included.
pub fn wait(set: &SigSet) -> i32 {
    loop {
        let mut sig = 0;
        // SAFETY: a valid set and out-parameter.
        if unsafe { libc::sigwait(set.as_ref(), &mut sig) } == 0 {
            return sig;
        }
    }
}

/// The [`caught`] signals, received on the tokio runtime (installing the
/// handlers stops them from ending this process).
pub struct Signals {
    kinds: Vec<(i32, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Installs the handlers. Must run inside a tokio runtime.
    ///
    /// # Panics
    /// When a handler cannot be installed (only outside a runtime).
    pub fn new() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let kinds = caught()
            .into_iter()
            .map(|n| {
                let s = signal(SignalKind::from_raw(n)).expect("installing a signal handler");
                (n, s)
            })
            .collect();
        Self { kinds }
    }

    /// The next signal received, as its number.
    pub async fn recv(&mut self) -> Option<i32> {
        let waits = self.kinds.iter_mut().map(|(n, s)| {
            let n = *n;
            Box::pin(async move { s.recv().await.map(|()| n) })
        });
        futures::future::select_all(waits).await.0
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signal_that_ends_a_process_by_default_has_a_fate() {
        // signal(7), "Term" and "Core" default actions, Linux on x86 and arm.
        let ends = [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGABRT,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGKILL,
            libc::SIGUSR1,
            libc::SIGSEGV,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
            libc::SIGTERM,
            libc::SIGSTKFLT,
            libc::SIGXCPU,
            libc::SIGXFSZ,
            libc::SIGVTALRM,
            libc::SIGPROF,
            libc::SIGIO,
            libc::SIGPWR,
            libc::SIGSYS,
        ];
        let left = [
            libc::SIGPIPE,
            libc::SIGKILL,
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGSYS,
            libc::SIGTRAP,
            libc::SIGABRT,
        ];
        let caught = caught();
        for s in ends {
            assert!(
                caught.contains(&s) != left.contains(&s),
                "{} has no fate, or two",
                signal_name(s)
            );
        }
        for s in libc::SIGRTMIN()..=libc::SIGRTMAX() {
            assert!(forwarded().contains(&s), "{}", signal_name(s));
        }
        assert!(caught.iter().all(|s| !left.contains(s)));
        assert_eq!(signal_name(libc::SIGRTMIN() + 3), "SIGRTMIN+3");
        assert_eq!(signal_name(libc::SIGUSR1), "SIGUSR1");
    }

    #[test]
    fn a_set_holds_real_time_signals() {
        let set = sigset(&caught());
        let raw = set.as_ref();
        for s in caught() {
            // SAFETY: a valid, initialised set.
            assert_eq!(unsafe { libc::sigismember(raw, s) }, 1, "{s}");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sigismember(raw, libc::SIGSEGV) }, 0);
    }
}
