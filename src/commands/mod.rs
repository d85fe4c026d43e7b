//! One file per command, each `run(&Args, &Shared) -> Exit`, and the one
//! dispatch over the commands ([`run`]). The commands are thin: they build
//! the engine's and the monitors' plain options from their arguments.

pub mod audit;
pub mod bucket_fence_check;
pub mod bucket_hold;
pub mod check;
pub mod completions;
pub mod config;
pub mod console;
pub mod demo;
pub mod man;
pub mod output;
pub mod pod_scan;
pub mod probe;
pub mod serve;
pub mod takeover;
pub mod timeline;
pub mod writer_exec;

use crate::cli::{BucketCommand, Cli, Command, WriterCommand};
use crate::exit::Exit;
use crate::setup::{block_on, Shared};

/// Runs the command `cli` names (the console without one). The synchronous
/// commands run before any runtime thread exists: `writer exec` masks
/// signals and may exec in place.
pub fn run(cli: &Cli, shared: &Shared) -> Exit {
    let Some(command) = &cli.command else {
        return block_on(console::run(&cli.console, shared));
    };
    match command {
        Command::Writer {
            command: WriterCommand::Exec(a),
        } => writer_exec::run(a, shared),
        Command::Probe(a) => block_on(probe::run(a, shared)),
        Command::Takeover(a) => block_on(takeover::run(a, shared)),
        Command::Audit(a) => audit::run(a, shared),
        Command::Timeline(a) => block_on(timeline::run(a, shared)),
        Command::Bucket {
            command: BucketCommand::Hold(a),
        } => block_on(bucket_hold::run(a, shared)),
        Command::Bucket {
            command: BucketCommand::FenceCheck(a),
        } => bucket_fence_check::run(a, shared),
        Command::Demo(a) => demo::run(a, shared),
        Command::Check(a) => block_on(check::run(a, shared)),
        Command::Serve(a) => block_on(serve::run(a, shared)),
        Command::Completions(a) => completions::run(a, shared),
        Command::Man => man::run(shared),
        Command::Config { command } => config::run(*command, shared),
        Command::PodScan(a) => pod_scan::run(a, shared),
    }
}
