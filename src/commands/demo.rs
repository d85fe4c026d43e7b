//! `leasectl demo`: the console on a local store with simulated holders and
//! demo pods (module `crate::demo`; its run: `crate::demo::console::run`).

use color_eyre::eyre::WrapErr;

use crate::cli::DemoArgs;
use crate::demo;
use crate::demo::DemoOptions;
use crate::exit::Exit;
use crate::setup::{block_on, fail, Shared};

/// The demo, or (`--watchdog`, internal) the demo's watchdog process.
pub(crate) fn run(a: &DemoArgs, shared: &Shared) -> Exit {
    if a.watchdog {
        return demo::watchdog();
    }
    // Runs on the main thread (block_on): the demo pods' parent-death
    // signal is tied to the thread that spawns them.
    block_on(async {
        let leasectl = match std::env::current_exe().wrap_err("locating the leasectl binary") {
            Ok(p) => p,
            Err(e) => return fail(&e),
        };
        let opts = DemoOptions {
            dir: a.dir.clone(),
            die_after: a.die_after,
            leasectl,
        };
        match demo::console::run(opts, shared.terminal.stdin && shared.terminal.stdout).await {
            Ok(exit) => exit,
            Err(e) => fail(&e),
        }
    })
}
