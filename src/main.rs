//! The `leasectl` binary: parse, prepare, run the command, exit with its
//! status. All logic lives in the library (`leasectl::app` builds the
//! context; `leasectl::commands::run` is the one dispatch).

use leasectl::exit::Exit;

/// mimalloc instead of glibc's allocator: the console frees and allocates
/// thousands of small objects at every refresh and frame, and glibc spent
/// a third of its CPU sorting and coalescing its free lists
/// (PERFORMANCE.md, "Issue 27", target 1).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // `bucket hold`'s containment re-runs this binary as its shim: that
    // process is never the command-line tool.
    if let Some((parent, command)) = leasectl::supervise::contain::init_args() {
        leasectl::setup::init_logging(false);
        leasectl::supervise::contain::init_main(parent, command);
    }
    std::process::exit(run().code());
}

fn run() -> Exit {
    if let Err(e) = leasectl::setup::install_error_hook() {
        return leasectl::setup::fail(&e);
    }
    let (mut cli, matches) = match leasectl::setup::parse() {
        Ok(parsed) => parsed,
        Err(exit) => return exit,
    };
    match leasectl::setup::prepare(&mut cli, &matches) {
        Ok(ctx) => leasectl::commands::run(&cli, &ctx),
        Err(exit) => exit,
    }
}
