//! `leasectl demo`: the console on a local store with simulated holders and
//! demo pods (module `crate::demo`), wired as the console is
//! ([`super::console::start`]).

use std::sync::Arc;

use color_eyre::eyre::WrapErr;

use crate::cli::DemoArgs;
use crate::clock::{SharedClock, SystemClock};
use crate::demo::{Demo, DemoDir, DemoOptions, DEMO_REFRESH, DEMO_TTL_S};
use crate::exit::Exit;
use crate::setup::Context;
use crate::snapshot::GatherOptions;
use crate::store::{ObjectStore, ReadOnly};

/// The demo, or (`--watchdog`, internal) the demo's watchdog process.
pub fn run(a: &DemoArgs, ctx: &Context) -> Exit {
    if a.watchdog {
        return crate::demo::watchdog();
    }
    // Runs on the main thread (block_on): the demo pods' parent-death
    // signal is tied to the thread that spawns them.
    crate::setup::block_on(async {
        let leasectl = match std::env::current_exe().wrap_err("locating the leasectl binary") {
            Ok(p) => p,
            Err(e) => return crate::setup::fail(&e),
        };
        let opts = DemoOptions {
            dir: a.dir.clone(),
            die_after: a.die_after,
            leasectl,
        };
        match demo(opts, ctx).await {
            Ok(exit) => exit,
            Err(e) => crate::setup::fail(&e),
        }
    })
}

/// Prepares the directory, starts the demo, runs the console on it
/// (operations mode) until the operator quits, then stops everything.
/// Returns 0, or 2 without a terminal or with an unusable `--dir`.
///
/// # Errors
/// `DemoError` when the demo cannot start; terminal errors.
async fn demo(opts: DemoOptions, ctx: &Context) -> color_eyre::Result<Exit> {
    let dir = match DemoDir::create(opts.dir.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("leasectl: {e}");
            return Ok(Exit::Usage);
        }
    };
    if !ctx.terminal.stdin || !ctx.terminal.stdout {
        dir.remove_if_temporary();
        eprintln!(
            "leasectl: demo runs the console and needs a terminal (stdin and stdout); \
             for a JSON snapshot of a running demo, start it with --dir DIR and run leasectl --json file:///DIR/"
        );
        return Ok(Exit::Usage);
    }
    crate::demo::init_logging(&dir.log_file());
    tracing::info!(dir = %dir.root().display(), audit_log = %dir.audit_log().display(), "demo starting");
    let demo = Demo::start(&opts, dir).await?;
    let result = console(&demo).await;
    demo.shutdown().await;
    result?;
    Ok(Exit::Ok)
}

/// The console on the running demo, in operations mode.
async fn console(demo: &Demo) -> color_eyre::Result<()> {
    let clock: SharedClock = SystemClock::shared();
    let mut app = crate::tui::app::App::new(
        vec![demo.dir().target().to_string()],
        false,
        DEMO_REFRESH,
        clock.wall(),
    );
    app.ttl_s = DEMO_TTL_S;
    let audit_path = demo.dir().audit_log();
    app.audit_path = Some(audit_path.display().to_string());
    let counters = Arc::new(crate::store::Counters::default());
    let counted: Arc<dyn ObjectStore> = Arc::new(crate::store::Counting::new(
        demo.writable_store(),
        counters.clone(),
    ));
    let mut open = demo.open_target();
    open.store = Arc::new(ReadOnly::new(counted.clone()));
    let ops = crate::tui::ops::Ops {
        targets: vec![crate::tui::ops::OpsTarget {
            url: open.target.to_string(),
            endpoint: "local".into(),
            bucket: None,
            store: counted,
            root: String::new(),
        }],
        audit: crate::audit::AuditLog::open(&audit_path)?,
        exclusion: crate::bucket::Exclusion::Conditional,
        ttl_s: DEMO_TTL_S,
        record_format: crate::bucket::RecordFormat::default(),
        clock: clock.clone(),
    };
    super::console::start(super::console::Parts {
        app,
        clock,
        refresh: DEMO_REFRESH,
        open: vec![open],
        opts: GatherOptions::default(),
        relist: 5,
        max_requests: crate::snapshot::DEFAULT_MAX_REQUESTS,
        pod: demo.pod_scans(),
        counters,
        audit_path: Some(audit_path),
        ops: Some(ops),
    })
    .await
}
