//! `leasectl bucket fence-check`: the fence of the lease `bucket hold` holds
//! for the calling command, asked through the fence fd (`LEASECTL_FENCE_FD`)
//! without blocking.

use crate::cli::FenceCheckArgs;
use crate::exit::Exit;
use crate::setup::Shared;
use crate::supervise::{fence_state_from_env, FenceFdState, FENCE_FD_ENV};

/// 0 while the fence is open, 5 ([`Exit::Fenced`]) once it closed (said on
/// stderr), 2 outside `bucket hold` (a sentence saying where to run it), 1
/// when the descriptor could not be polled.
pub fn run(_a: &FenceCheckArgs, _shared: &Shared) -> Exit {
    match fence_state_from_env() {
        Ok(FenceFdState::Open) => Exit::Ok,
        Ok(FenceFdState::Closed) => {
            crate::exit::say(format!(
                "the lease's fence has closed ({FENCE_FD_ENV} reads end of file): start no more writes under this lease"
            ));
            Exit::Fenced
        }
        Err(e) => {
            crate::exit::say(&e);
            if e.is_usage() {
                Exit::Usage
            } else {
                Exit::Failed
            }
        }
    }
}
