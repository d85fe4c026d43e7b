//! The console (no command): the operations console on the TARGETs, or one
//! of the outputs of [`super::output`] when stdout asks for one.

use std::sync::Arc;
use std::time::Duration;

use crate::cli::ConsoleArgs;
use crate::clock::{SharedClock, SystemClock};
use crate::exit::Exit;
use crate::setup::Context;
use crate::store::Counters;
use crate::tui;

/// `leasectl [TARGET…]`: the console, or `--json`, `-o`, `--watch`.
pub async fn run(args: &ConsoleArgs, ctx: &Context) -> Exit {
    let args = &with_context(args, ctx);
    let targets = match crate::setup::parse_targets(&args.targets) {
        Ok(t) => t,
        Err(e) => {
            crate::exit::say(&e);
            return Exit::Usage;
        }
    };
    if args.json && targets.is_empty() && args.pod.no_pod {
        return crate::setup::nothing_to_report(
            "--json with no TARGET and --no-pod has nothing to report",
        );
    }
    // Every request is counted (the console's request rate). Neither the
    // snapshot nor the console table writes: they get the read side only; the
    // writable handle is kept only for the console's write task in OPS mode, so
    // in watch mode (and for --json) nothing that could write exists.
    let counters = Arc::new(Counters::default());
    let writes = !args.read_only && !super::output::wanted(args, ctx);
    let opened = crate::setup::open_targets(&ctx.connector, &targets, &counters, writes).await;
    if let Some(exit) = super::output::run(args, opened.read.clone(), counters.clone(), ctx).await {
        return exit;
    }
    if !ctx.terminal.stdout || !ctx.terminal.stdin {
        crate::exit::say(
            "the console needs a terminal (stdin and stdout); use --json for a snapshot",
        );
        return Exit::Usage;
    }
    let refresh = args.refresh.max(Duration::from_secs(1));
    let clock: SharedClock = SystemClock::shared();
    let mut app = tui::app::App::new(
        targets.iter().map(|t| t.to_string()).collect(),
        args.read_only,
        refresh,
        clock.wall(),
    );
    app.settings.exclusion = ctx.exclusion();
    if let Some(ttl) = ctx.applied.ttl {
        app.settings.ttl_s = ttl.as_secs();
    }
    // The pod is scanned with every refresh, next to the bucket gather, on a
    // blocking thread (it reads /proc); the UI only receives the result.
    let pod = if args.pod.no_pod {
        app = app.without_pod();
        Vec::new()
    } else {
        vec![crate::setup::scan_options(
            &args.pod,
            std::path::Path::new("/proc"),
        )]
    };
    let audit_path = match &args.audit.audit_log {
        Some(p) => Some(p.clone()),
        None => crate::audit::AuditLog::default_path().ok(),
    };
    let ops = if args.read_only {
        None
    } else {
        let log = match crate::setup::open_audit(&ctx.connector, &args.audit).await {
            Ok(l) => l,
            Err(e) => return crate::setup::fail(&e),
        };
        app.settings.audit_path = Some(log.path().display().to_string());
        Some(tui::ops::Ops {
            targets: tui::ops_targets(&opened.read, opened.writable),
            audit: log,
            exclusion: app.settings.exclusion,
            ttl_s: app.settings.ttl_s,
            record_format: ctx.applied.record_format_or(args.record_format),
            clock: clock.clone(),
        })
    };
    app.settings.get_price = args.get_price;
    let parts = tui::Parts {
        app,
        clock,
        refresh,
        open: opened.read,
        opts: ctx.gather_at(args.depth),
        relist: crate::setup::relist_every(refresh),
        max_requests: args.max_requests,
        pod,
        counters,
        audit_path,
        ops,
    };
    match tui::start(parts).await {
        Ok(()) => Exit::Ok,
        Err(e) => crate::setup::fail(&e),
    }
}

/// `args` with what the config file's context sets (its TARGETs when none
/// are given, its refresh and depth unless given).
fn with_context(args: &ConsoleArgs, ctx: &Context) -> ConsoleArgs {
    let mut a = args.clone();
    a.targets = ctx.applied.targets_or(&args.targets);
    a.refresh = ctx.applied.refresh.unwrap_or(args.refresh);
    a.depth = ctx.applied.depth.unwrap_or(args.depth);
    a
}

#[cfg(test)]
mod tests {
    /// The command line's defaults are the engine's and the console's.
    #[test]
    fn cli_defaults_match_the_engine() {
        assert_eq!(
            crate::cli::DEFAULT_CONCURRENCY,
            crate::snapshot::DEFAULT_CONCURRENCY
        );
        assert_eq!(
            crate::cli::DEFAULT_MAX_REQUESTS,
            crate::snapshot::DEFAULT_MAX_REQUESTS
        );
        assert_eq!(
            crate::cli::DEFAULT_GET_PRICE,
            crate::tui::app::DEFAULT_GET_PRICE
        );
    }
}
