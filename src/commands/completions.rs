//! `leasectl completions SHELL`: the completion script on stdout.

use crate::cli::CompletionsArgs;
use crate::exit::Exit;
use crate::setup::Shared;

/// Prints the completion script for the shell asked.
pub fn run(a: &CompletionsArgs, _shared: &Shared) -> Exit {
    let mut cmd = crate::cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "leasectl", &mut out);
    match crate::stdout::print(String::from_utf8_lossy(&out).trim_end()) {
        Ok(()) => Exit::Ok,
        Err(exit) => exit,
    }
}
