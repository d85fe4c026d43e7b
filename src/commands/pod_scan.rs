//! `leasectl pod-scan` (hidden): only the pod section, as JSON.

use crate::cli::PodScanArgs;
use crate::exit::Exit;
use crate::setup::{fail, scan_options, Shared};
use crate::stdout::print_document;
use crate::text::to_json_pretty;
use crate::writer::scan::scan;

/// Scans the pod and prints its section; exit 3 when a verdict fires.
pub(crate) fn run(a: &PodScanArgs, _shared: &Shared) -> Exit {
    let snap = match scan(&scan_options(&a.pod, &a.proc_root)) {
        Ok(s) => s,
        Err(e) => return fail(&e.into()),
    };
    let text = match to_json_pretty(&snap) {
        Ok(t) => t,
        Err(e) => return fail(&e.into()),
    };
    if let Err(exit) = print_document(&text) {
        return exit;
    }
    snap.exit_code()
}
