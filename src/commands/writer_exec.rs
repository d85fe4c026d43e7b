//! `leasectl writer exec`: run CMD under the writer-lease rules (module
//! `crate::writer::exec`). Runs before any runtime thread exists.

use crate::cli::ExecArgs;
use crate::exit::Exit;
use crate::setup::Shared;

/// CMD's own status; `writer exec`'s own failures as
/// `crate::writer::WriterError::exit_code` says (125, 126, 127).
pub fn run(a: &ExecArgs, _shared: &Shared) -> Exit {
    match crate::writer::exec::writer_exec(&a.data_dir, a.wait, &a.command) {
        Ok(exit) => exit,
        // A refusal is a sentence for the person or the pod's log reading
        // stderr (`-v` adds the log of each step before it).
        Err(e) => {
            crate::exit::say(&e);
            e.exit_code()
        }
    }
}
