//! `leasectl demo`: the console on a local store with simulated holders and
//! demo pods (module `crate::demo`; its run: `crate::demo::console::run`).

use color_eyre::eyre::WrapErr;

use crate::cli::DemoArgs;
use crate::demo::DemoOptions;
use crate::exit::Exit;
use crate::setup::Shared;

/// The demo, or (`--watchdog`, internal) the demo's watchdog process.
pub fn run(a: &DemoArgs, shared: &Shared) -> Exit {
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
        match crate::demo::console::run(opts, shared.terminal.stdin && shared.terminal.stdout).await
        {
            Ok(exit) => exit,
            Err(e) => crate::setup::fail(&e),
        }
    })
}
