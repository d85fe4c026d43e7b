//! `leasectl check`: the monitoring plugin (module `crate::monitor::check`).

use crate::exit::tell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cli::CheckArgs;
use crate::clock::SystemClock;
use crate::exit::{CheckStatus, Exit};
use crate::monitor::check;
use crate::setup::Shared;
use crate::setup::{open_targets, recipe};
use crate::snapshot::look_deeper;
use crate::snapshot::Gatherer;
use crate::stdout::{write_line, WriteError};
use crate::store::Counters;
use crate::text::{format_secs, sanitize};

/// Gathers once, prints the plugin output, returns the plugin status;
/// anything not gathered, and bad usage, is UNKNOWN. The whole check has
/// `--timeout` (the plugin convention's `-t`, 10 s by default): when it has
/// not answered by then, UNKNOWN is printed and the process exits, whatever
/// is still in flight ([`arm_deadline`]).
pub(crate) async fn run(args: &CheckArgs, shared: &Shared) -> Exit {
    let answered = arm_deadline(shared.s3.timeout);
    let (output, status) = check(args, shared).await;
    // The deadline's thread holds the lock while it answers and exits: past
    // the deadline, the check's own answer is never written.
    let mut done = answered.lock().unwrap_or_else(|e| e.into_inner());
    *done = true;
    match write_line(&output) {
        Ok(()) => status.exit(),
        Err(WriteError::Closed) => Exit::ClosedPipe,
        Err(e) => {
            tell(format_args!("could not write to stdout: {e}"));
            Exit::Check(CheckStatus::Unknown)
        }
    }
}

/// Starts the thread that ends the check at `timeout` from now: it prints
/// the UNKNOWN line and exits the process (3, or 141 for a closed stdout)
/// unless the check answered first. A thread, not a timer of the runtime:
/// the deadline does not wait on anything the check waits on. The check
/// writes its answer holding the returned lock, set true.
fn arm_deadline(timeout: Duration) -> Arc<Mutex<bool>> {
    let answered = Arc::new(Mutex::new(false));
    let flag = answered.clone();
    let expire = move || {
        std::thread::sleep(timeout);
        let mut done = flag.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return;
        }
        *done = true;
        let line = format!(
            "LEASES UNKNOWN - the check did not finish within its timeout of {} (--timeout): \
             the stores had not all answered, or a listing had not ended; nothing is known. \
             A TARGET with many prefixes needs a longer --timeout",
            format_secs(timeout.as_secs_f64())
        );
        let exit = match write_line(&line) {
            Err(WriteError::Closed) => Exit::ClosedPipe,
            _ => Exit::Check(CheckStatus::Unknown),
        };
        std::process::exit(exit.code());
    };
    if let Err(e) = std::thread::Builder::new()
        .name("leasectl-check-timeout".into())
        .spawn(expire)
    {
        tracing::warn!(
            "cannot start the check's timeout thread ({e}): only each request has --timeout"
        );
    }
    answered
}

/// [`run`] without its deadline: the plugin output and its status.
async fn check(args: &CheckArgs, shared: &Shared) -> (String, check::Status) {
    // The plugin's output is its first line on stdout, even for usage.
    let unknown = |msg: String| {
        (
            format!("LEASES UNKNOWN - {}", sanitize(&msg)),
            check::Status::Unknown,
        )
    };
    let targets = &args.targets;
    if targets.is_empty() && args.pod.no_pod {
        return unknown("nothing to check: give a TARGET or leave out --no-pod".into());
    }
    let counters = Arc::new(Counters::default());
    let open = open_targets(&shared.connector, targets, &counters, false).await;
    let depth = args.depth;
    let mut g = Gatherer::new(open.read.clone(), shared.gather_at(depth), 1);
    let clock = SystemClock::shared();
    let mut snap = recipe(&args.pod, shared).take(&mut g, &clock).await;
    // Every prefix absent with leases deeper: a WARNING naming the --depth.
    look_deeper(&open.read, &mut snap, depth).await;
    let r = check::evaluate(
        &snap,
        &check::Thresholds {
            warn_age: args.warn_age,
            crit_age: args.crit_age,
            crit_states: args.crit_state.clone(),
            min_leases: args.min_leases,
        },
    );
    (r.output, r.status)
}
