//! `leasectl check`: the monitoring plugin (module `crate::monitor::check`).

use std::sync::Arc;

use crate::cli::CheckArgs;
use crate::exit::{CheckStatus, Exit};
use crate::monitor::check;
use crate::setup::Shared;
use crate::snapshot::Gatherer;
use crate::store::Counters;

/// Gathers once, prints the plugin output, returns the plugin status;
/// anything not gathered, and bad usage, is UNKNOWN.
pub async fn run(args: &CheckArgs, shared: &Shared) -> Exit {
    let unknown = |msg: String| {
        // The plugin's output is its first line on stdout, even for usage.
        let line = format!("LEASES UNKNOWN - {}", crate::text::sanitize(&msg));
        match crate::stdout::write_line(&line) {
            Err(crate::stdout::WriteError::Closed) => Exit::ClosedPipe,
            _ => Exit::Check(CheckStatus::Unknown),
        }
    };
    let targets = &args.targets;
    if targets.is_empty() && args.pod.no_pod {
        return unknown("nothing to check: give a TARGET or leave out --no-pod".into());
    }
    let counters = Arc::new(Counters::default());
    let open = crate::setup::open_targets(&shared.connector, targets, &counters, false).await;
    let depth = args.depth;
    let mut g = Gatherer::new(open.read.clone(), shared.gather_at(depth), 1);
    let clock = crate::clock::SystemClock::shared();
    let mut snap = crate::setup::recipe(&args.pod, shared)
        .take(&mut g, &clock)
        .await;
    // Every prefix absent with leases deeper: a WARNING naming the --depth.
    crate::snapshot::look_deeper(&open.read, &mut snap, depth).await;
    let r = check::evaluate(
        &snap,
        &check::Thresholds {
            warn_age: args.warn_age,
            crit_age: args.crit_age,
            crit_states: args.crit_state.clone(),
            min_leases: args.min_leases,
        },
    );
    match crate::stdout::write_line(&r.output) {
        Ok(()) => r.status.exit(),
        Err(crate::stdout::WriteError::Closed) => Exit::ClosedPipe,
        Err(e) => {
            eprintln!("leasectl: could not write to stdout: {e}");
            Exit::Check(CheckStatus::Unknown)
        }
    }
}
