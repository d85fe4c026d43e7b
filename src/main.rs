//! The `leasectl` binary: parse, prepare, run the command, exit with its
//! status. All logic lives in the library (`leasectl::setup` parses the
//! command line, applies the config file's context and builds what every
//! command shares; `leasectl::commands::run` is the one dispatch).

use leasectl::exit::Exit;

/// mimalloc instead of glibc's allocator: the console frees and allocates
/// thousands of small objects at every refresh and frame, and glibc spent
/// a third of its CPU sorting and coalescing its free lists
/// (a profile of the console at 10,000 prefixes). Built without the `mimalloc`
/// feature, the system allocator is used (for heap profilers).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's options, set before anything else runs: with its defaults
/// (arenas committed eagerly, freed pages purged after 1 s) a `--json` of 10,000 prefixes on a local store peaked
/// at 92–142 MiB, against 36 MiB with glibc's allocator: the pages freed by
/// the 128 reader threads stayed resident. Not committing arenas eagerly and
/// purging freed pages at once brings it to ~33 MiB. An option given in the
/// environment (`MIMALLOC_ARENA_EAGER_COMMIT`, `MIMALLOC_PURGE_DELAY`) wins.
///
/// It runs as a constructor (`.init_array`), before the first allocation:
/// the first arena is reserved then, and set in `main` the eager commit
/// would come too late. Hence no allocation here (`getenv`, not `std::env`).
#[cfg(feature = "mimalloc")]
extern "C" fn tune_allocator() {
    use std::ffi::{c_int, c_long, CStr};
    extern "C" {
        // mimalloc's own API (libmimalloc-sys builds and links it).
        fn mi_option_set(option: c_int, value: c_long);
    }
    // `mi_option_t` of mimalloc v3 (libmimalloc-sys 0.1.49's default,
    // include/mimalloc.h): arena_eager_commit is 4, purge_delay 15.
    const ARENA_EAGER_COMMIT: c_int = 4;
    const PURGE_DELAY: c_int = 15;
    let options: [(c_int, &CStr, c_long); 2] = [
        (ARENA_EAGER_COMMIT, c"MIMALLOC_ARENA_EAGER_COMMIT", 0),
        (PURGE_DELAY, c"MIMALLOC_PURGE_DELAY", 0),
    ];
    for (option, name, value) in options {
        // SAFETY: getenv reads the environment (no thread runs yet);
        // mi_option_set stores the value of a known option.
        unsafe {
            if libc::getenv(name.as_ptr()).is_null() {
                mi_option_set(option, value);
            }
        }
    }
}

/// [`tune_allocator`] as a constructor of the binary.
#[cfg(feature = "mimalloc")]
#[used]
#[link_section = ".init_array"]
static TUNE_ALLOCATOR: extern "C" fn() = tune_allocator;

fn main() {
    // `bucket hold`'s containment re-runs this binary as its shim: that
    // process is never the command-line tool.
    if let Some((parent, command)) = leasectl::supervise::contain::init_args() {
        leasectl::setup::init_logging(&leasectl::cli::LogArgs::default());
        leasectl::supervise::contain::init_main(parent, command);
    }
    let (exit, column) = run();
    // Every exit other than 0 says why on stderr: when the command did not,
    // here, from what its code means for it (the one place that guarantees
    // the line).
    if exit.needs_reason() && !leasectl::exit::said() {
        leasectl::exit::say(exit.fallback_reason(column));
    }
    std::process::exit(exit.code());
}

/// Runs the command line; its exit and its command's column of the exit
/// codes' table (`leasectl::exit::EXIT_TABLE`).
fn run() -> (Exit, Option<usize>) {
    if let Err(e) = leasectl::setup::install_error_hook() {
        return (leasectl::setup::fail(&e), None);
    }
    let (mut cli, matches) = match leasectl::setup::parse() {
        Ok(parsed) => parsed,
        Err(exit) => return (exit, None),
    };
    let column = leasectl::commands::exit_column(&cli);
    let exit = match leasectl::setup::prepare(&mut cli, &matches) {
        Ok(shared) => leasectl::commands::run(&cli, &shared),
        Err(exit) => exit,
    };
    (exit, column)
}
