//! `leasectl pod-scan` (hidden): only the pod section, as JSON.

use crate::cli::PodScanArgs;
use crate::exit::Exit;
use crate::setup::Shared;

/// Scans the pod and prints its section; exit 3 when a verdict fires.
pub fn run(a: &PodScanArgs, _shared: &Shared) -> Exit {
    let snap = match crate::writer::scan::scan(&crate::setup::scan_options(&a.pod, &a.proc_root)) {
        Ok(s) => s,
        Err(e) => return crate::setup::fail(&e.into()),
    };
    let text = match crate::text::to_json_pretty(&snap) {
        Ok(t) => t,
        Err(e) => return crate::setup::fail(&e.into()),
    };
    if let Err(exit) = crate::stdout::print_document(&text) {
        return exit;
    }
    snap.exit_code()
}
