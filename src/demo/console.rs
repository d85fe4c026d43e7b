//! The demo run as the operator sees it: the directory prepared, the demo
//! started, the console on it in operations mode until `q`, everything stopped.

use std::sync::Arc;

use crate::clock::SystemClock;
use crate::exit::Exit;
use crate::snapshot::GatherOptions;
use crate::store::{ObjectStore, ReadOnly};
use crate::tui::app::Settings;

use super::{Demo, DemoDir, DemoOptions, DEMO_REFRESH, DEMO_TTL_S};
use crate::audit::AuditLog;
use crate::exit::say;
use crate::store::{Counters, Counting};
use crate::tui;
use crate::tui::{Parts, Writes};

/// Prepares the directory, starts the demo, runs the console on it
/// (operations mode) until the operator quits, then stops everything.
/// `terminal`: stdin and stdout are a terminal. Returns 0, or 2 without a
/// terminal or with an unusable `--dir`.
///
/// # Errors
/// `DemoError` when the demo cannot start; terminal errors.
pub(crate) async fn run(opts: DemoOptions, terminal: bool) -> color_eyre::Result<Exit> {
    let dir = match DemoDir::create(opts.dir.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            say(&e);
            return Ok(Exit::Usage);
        }
    };
    if !terminal {
        dir.remove_if_temporary();
        say(
            "demo runs the console and needs a terminal (stdin and stdout); \
             for a JSON snapshot of a running demo, start it with --dir DIR and run leasectl --json file:///DIR/"
        );
        return Ok(Exit::Usage);
    }
    super::init_logging(&dir.log_file());
    tracing::info!(dir = %dir.root().display(), audit_log = %dir.audit_log().display(), "demo starting");
    let demo = Demo::start(&opts, dir).await?;
    let result = console(&demo).await;
    demo.shutdown().await;
    result?;
    Ok(Exit::Ok)
}

/// The console on the running demo, in operations mode.
async fn console(demo: &Demo) -> color_eyre::Result<()> {
    let audit_path = demo.dir().audit_log();
    let counters = Arc::new(Counters::default());
    let counted: Arc<dyn ObjectStore> =
        Arc::new(Counting::new(demo.writable_store(), counters.clone()));
    let mut open = demo.open_target();
    open.store = Arc::new(ReadOnly::new(counted.clone()));
    let settings = Settings {
        ttl_s: DEMO_TTL_S,
        relist_every: 5,
        audit_path: Some(audit_path.clone()),
        ..Settings::new(vec![open.target.clone()], false, DEMO_REFRESH)
    };
    tui::start(Parts {
        settings,
        clock: SystemClock::shared(),
        open: vec![open],
        opts: GatherOptions::default(),
        pod: demo.pod_scans(),
        counters,
        writes: Some(Writes {
            stores: vec![counted],
            audit: AuditLog::open(&audit_path)?,
        }),
    })
    .await
}
