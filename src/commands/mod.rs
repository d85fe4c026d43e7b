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

/// The column of [`crate::exit::EXIT_TABLE`] that gives the exit codes of
/// the command `cli` names (`None`: the console, `serve`, `audit`, `config`
/// and the others the table has no column for).
pub fn exit_column(cli: &Cli) -> Option<usize> {
    let o = &cli.console;
    match &cli.command {
        None if o.json || o.output.format.is_some() || o.output.watch.is_some() => Some(0),
        None => None,
        Some(Command::PodScan(_)) => Some(0),
        Some(Command::Check(_)) => Some(1),
        Some(Command::Probe(_)) => Some(2),
        Some(Command::Timeline(_)) => Some(3),
        Some(Command::Bucket {
            command: BucketCommand::Hold(_),
        }) => Some(4),
        Some(Command::Bucket {
            command: BucketCommand::FenceCheck(_),
        }) => Some(5),
        Some(Command::Takeover(_)) => Some(6),
        Some(Command::Writer {
            command: WriterCommand::Exec(_),
        }) => Some(7),
        Some(_) => None,
    }
}
