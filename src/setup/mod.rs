//! The set-up every command shares, built once before it runs: the parsed command
//! line with its checks and the config file's context applied
//! ([`parse`], [`prepare`]), the [`Shared`] set-up (connector, gathering
//! options, exclusion, terminal facts), the logging
//! set-up, the runtime ([`block_on`]) and the plumbing the commands share
//! (TARGETs, opening stores, the audit log). The one dispatch over the
//! commands is `crate::commands::run`; here, a command is known by the name
//! clap parsed (`check`'s usage errors, which commands write, which read
//! the exclusion mode from the environment, where logs go), and only the
//! command line's shared groups are read.

mod logging;
mod prepare;
mod shared;

use std::future::Future;
use std::time::Duration;

pub use logging::{init_console_logging, init_logging, install_error_hook};
pub use prepare::{parse, prepare};
pub use shared::{
    announce, audit_path, nothing_to_report, open_audit, open_targets, recipe, relist_every,
    scan_options, Opened, Shared, Terminal,
};

use crate::exit::Exit;

/// Says `e` on stderr (its whole cause chain, escaped: it may quote paths
/// or values that came from outside) and returns [`Exit::Failed`].
pub fn fail(e: &color_eyre::eyre::Report) -> Exit {
    let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    crate::exit::say(crate::text::sanitize_message(&chain.join(": ")));
    Exit::Failed
}

/// Runs an async command on a new multi-threaded runtime, on this thread
/// (the demo pods' parent-death signal is tied to the thread that spawns
/// them). Quitting always exits: a blocking task still running (a file read
/// on a hung network filesystem) is given 2 s, not waited for without end.
pub fn block_on(command: impl Future<Output = Exit>) -> Exit {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::exit::say(format!(
                "starting the async runtime: {}",
                crate::text::sanitize(&e.to_string())
            ));
            return Exit::Failed;
        }
    };
    let exit = rt.block_on(command);
    rt.shutdown_timeout(Duration::from_secs(2));
    exit
}
