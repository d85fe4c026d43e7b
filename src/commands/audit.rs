//! `leasectl audit`: the audit log, newest first.

use crate::audit::{fmt_time, AuditEntry, AuditLog};
use crate::cli::AuditListArgs;
use crate::exit::tell;
use crate::exit::Exit;
use crate::setup::fail;
use crate::setup::Shared;
use crate::stdout::Checked;
use crate::text::sanitize;
use crate::text::to_json_pretty;

/// `leasectl audit [--json]`: the log at `--audit-log` (or the default path).
pub(crate) fn run(a: &AuditListArgs, _shared: &Shared) -> Exit {
    let path = match &a.audit_log {
        Some(p) => p.clone(),
        None => match AuditLog::default_path() {
            Ok(p) => p,
            Err(e) => return fail(&e.into()),
        },
    };
    let mut out = Checked::new(std::io::stdout().lock());
    let exit = audit_list(&path, a.json, &mut out);
    out.finish(exit)
}

/// The generation an entry observed and the one it wrote: `7 → 8`; `-` for
/// an unknown one (a record without the field, a seed-format write), `7 →
/// nothing written` for a refused or failed takeover.
fn generations(e: &AuditEntry) -> String {
    use crate::bucket::fmt_generation;
    let observed = fmt_generation(e.observed.record.as_ref().and_then(|r| r.generation));
    match &e.written {
        Some(w) => format!("{observed} → {}", fmt_generation(w.record.generation)),
        None => format!("{observed} → nothing written"),
    }
}

/// `leasectl audit`: the log newest first, as text or one JSON array. Each
/// line that is not an entry (torn by a crash, edited) is named on stderr
/// (its number and byte offset) and skipped; the rest is listed (exit 0).
pub(crate) fn audit_list(
    path: &std::path::Path,
    json: bool,
    out: &mut impl std::io::Write,
) -> Exit {
    match AuditLog::read_report(path) {
        Ok(report) => {
            let mut entries = report.entries;
            entries.reverse();
            for u in report.unreadable.sentences() {
                tell(format_args!(
                    "audit log {}: {u}",
                    sanitize(&path.display().to_string())
                ));
            }
            if json {
                let _ = writeln!(out, "{}", to_json_pretty(&entries).unwrap_or_default());
            } else if entries.is_empty() {
                let _ = writeln!(out, "no audit entries in {}", path.display());
            } else {
                for e in &entries {
                    let _ = writeln!(
                        out,
                        "{}  {:<7}  {}  {}  {}  generation {}  reason: {}{}",
                        fmt_time(&e.time),
                        e.phase,
                        sanitize(&e.operator),
                        sanitize(&e.target.url),
                        e.observed.judgement,
                        generations(e),
                        sanitize(&e.reason),
                        e.outcome
                            .as_deref()
                            .map(|o| format!("  → {}", sanitize(o)))
                            .unwrap_or_default()
                    );
                }
            }
            Exit::Ok
        }
        Err(e) => {
            let _ = writeln!(out, "leasectl: {e}");
            Exit::Failed
        }
    }
}
