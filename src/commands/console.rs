//! The console (no command): the operations console on the TARGETs, or one
//! of the outputs of [`super::output`] when stdout asks for one.

use std::sync::Arc;
use std::time::Duration;

use crate::bucket::record::DEFAULT_TTL_S;
use crate::cli::ConsoleArgs;
use crate::clock::SystemClock;
use crate::exit::say;
use crate::exit::Exit;
use crate::setup::{audit_path, relist_every, Shared};
use crate::setup::{fail, nothing_to_report, open_audit, open_targets, scan_options};
use crate::store::Counters;
use crate::tui;
use crate::tui::app::Settings;

/// `leasectl [TARGET…]`: the console, or `--json`, `-o`, `--watch`.
pub(crate) async fn run(args: &ConsoleArgs, shared: &Shared) -> Exit {
    let targets = &args.targets;
    if args.json && targets.is_empty() && args.pod.no_pod {
        return nothing_to_report("--json with no TARGET and --no-pod has nothing to report");
    }
    // Every request is counted (the console's request rate). Neither the
    // snapshot nor the console table writes: they get the read side only; the
    // writable handle is kept only for the console's write task in OPS mode, so
    // in watch mode (and for --json) nothing that could write exists.
    let counters = Arc::new(Counters::default());
    let writes = !args.read_only && !super::output::wanted(args, shared);
    let opened = open_targets(&shared.connector, targets, &counters, writes).await;
    if let Some(exit) =
        super::output::run(args, opened.read.clone(), counters.clone(), shared).await
    {
        return exit;
    }
    if !shared.terminal.stdout || !shared.terminal.stdin {
        say("the console needs a terminal (stdin and stdout); use --json for a snapshot");
        return Exit::Usage;
    }
    let refresh = args.refresh.max(Duration::from_secs(1));
    let settings = Settings {
        targets: targets.clone(),
        read_only: args.read_only,
        exclusion: shared.exclusion(),
        refresh,
        relist_every: relist_every(refresh),
        ttl_s: args.ttl.map_or(DEFAULT_TTL_S, |t| t.as_secs()),
        record_format: args.record_format,
        audit_path: audit_path(args.audit.audit_log.as_deref()),
        get_price: args.get_price,
        max_requests: args.max_requests,
    };
    // The pod is scanned with every refresh, next to the bucket gather, on a
    // blocking thread (it reads /proc); the UI only receives the result.
    let pod = if args.pod.no_pod {
        Vec::new()
    } else {
        vec![scan_options(&args.pod, std::path::Path::new("/proc"))]
    };
    let writes = if args.read_only {
        None
    } else {
        let audit = match open_audit(&shared.connector, &args.audit).await {
            Ok(l) => l,
            Err(e) => return fail(&e),
        };
        Some(tui::Writes {
            stores: opened.writable,
            audit,
        })
    };
    let parts = tui::Parts {
        settings,
        clock: SystemClock::shared(),
        open: opened.read,
        opts: shared.gather_at(args.depth),
        pod,
        counters,
        writes,
    };
    match tui::start(parts).await {
        Ok(()) => Exit::Ok,
        Err(e) => fail(&e),
    }
}
