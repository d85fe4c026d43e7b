//! `leasectl timeline`: who held each prefix when, rebuilt from the LEASE
//! object's versions, `--watch` recordings and audit logs (see [`crate::timeline`]).

use chrono::Utc;

use crate::audit::{AuditEntry, AuditLog, LeaseLocation};
use crate::cli::{TimelineArgs, TimelineFormat};
use crate::exit::Exit;
use crate::setup::Context;
use crate::text::{sanitize, sanitize_message};
use crate::timeline::render::{PrefixTimeline, Report, Sources, SCHEMA_VERSION};
use crate::timeline::{derive, read};

/// Reads every source for every PREFIX_URL, derives, prints in the format asked.
pub async fn run(a: &TimelineArgs, ctx: &Context) -> Exit {
    let mut targets = Vec::new();
    for url in &a.prefix_urls {
        match crate::setup::target_or_usage(url) {
            Ok(t) => targets.push(t),
            Err(exit) => return exit,
        }
    }
    let now = Utc::now();
    let to = a.to.unwrap_or(now);
    let from = a.from.or_else(|| {
        a.since
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map(|d| to - d)
    });
    if from.is_some_and(|f| f >= to) {
        eprintln!(
            "leasectl: the window is empty: --from (or --to minus --since) is not before --to"
        );
        return Exit::Usage;
    }
    // The audit logs: those given, else this host's if it exists.
    let (entries, audit_problems) = audit_entries(&a.audit_logs);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        generated_at: now,
        from,
        to,
        prefixes: Vec::new(),
    };
    for target in &targets {
        let url = target.to_string();
        let key = crate::bucket::lease_key(target.prefix());
        let mut p = PrefixTimeline {
            url: sanitize(&url),
            key: sanitize(&key),
            versioning: None,
            sources: Sources::default(),
            problems: audit_problems.clone(),
            notes: Vec::new(),
            takeovers: Vec::new(),
            derived: Default::default(),
        };
        let mut obs = Vec::new();
        match ctx.connector.open(target).await {
            Ok(store) => {
                let v = read::versions(
                    store.as_ref(),
                    &key,
                    target.bucket(),
                    from,
                    to,
                    a.all_versions,
                )
                .await;
                p.versioning = v.versioning;
                p.sources.versions_listed = v.listed;
                p.sources.versions_read = v.gets;
                p.sources.list_requests = v.list_requests;
                p.problems.extend(v.problems);
                p.notes.extend(v.notes);
                obs = v.observations;
            }
            Err(e) => p.problems.push(format!(
                "{} could not be opened: {}",
                sanitize(&url),
                sanitize_message(&e.to_string())
            )),
        }
        let lease = LeaseLocation::of_row(&url, target.bucket(), &key);
        let has_versions = p.versioning == Some(crate::store::Versioning::Enabled)
            || p.versioning == Some(crate::store::Versioning::Suspended);
        for file in &a.recordings {
            let Some(lease) = &lease else { break };
            match read::recording(file, lease, from, to) {
                Ok((lines, unreadable)) => {
                    p.sources.recording_lines += lines.len();
                    if unreadable > 0 {
                        p.notes.push(format!(
                            "{unreadable} line(s) of {} are not lease lines and were skipped",
                            sanitize(&file.display().to_string())
                        ));
                    }
                    if has_versions {
                        // The versions are the service's own record; a watcher's
                        // lines add nothing and would mix two clocks.
                        continue;
                    }
                    obs.extend(lines);
                }
                Err(e) => p.problems.push(format!(
                    "the recording {} could not be read: {e}",
                    sanitize(&file.display().to_string())
                )),
            }
        }
        if has_versions && !a.recordings.is_empty() {
            p.notes.push(
                "the bucket keeps versions: the recordings' lines were counted, not merged (one clock, the service's)".into(),
            );
        }
        obs.sort_by_key(|x| x.at);
        let about: Vec<AuditEntry> = entries
            .iter()
            .filter(|e| lease.is_some() && e.target.location() == lease)
            .filter(|e| from.is_none_or(|f| e.time >= f) && e.time <= to)
            .cloned()
            .collect();
        p.sources.audit_entries = about.len();
        if obs.is_empty() && about.is_empty() {
            p.problems.push(format!(
                "no source holds the history of {}: {}",
                sanitize(&key),
                if p.versioning.is_some() {
                    "no version of it was written in the window"
                } else {
                    "give the --watch recordings (--recording) or audit logs (--audit-log) that saw it"
                }
            ));
        }
        p.derived = derive(&obs, &about, to);
        p.takeovers = crate::timeline::takeovers_of(&about);
        report.prefixes.push(p);
    }
    let mut out = crate::stdout::Checked::new(std::io::stdout().lock());
    match a.output {
        TimelineFormat::Text => crate::timeline::render::text(&report, &mut out),
        TimelineFormat::Json => {
            let _ = std::io::Write::write_all(
                &mut out,
                format!(
                    "{}\n",
                    crate::text::to_json_pretty(&report).unwrap_or_default()
                )
                .as_bytes(),
            );
        }
        TimelineFormat::Ndjson => crate::timeline::render::ndjson(&report, &mut out),
        TimelineFormat::Svg => match crate::timeline::picture::svg(&report) {
            Ok(svg) => {
                let _ = std::io::Write::write_all(&mut out, svg.as_bytes());
            }
            Err(e) => {
                eprintln!("leasectl: the picture could not be drawn: {e}");
                return Exit::Failed;
            }
        },
    }
    for p in &report.prefixes {
        for s in &p.problems {
            eprintln!("leasectl: {}: {s}", p.url);
        }
    }
    out.finish(report.exit())
}

/// The entries of the audit logs `paths` (this host's, if it exists, when
/// none is given), and what could not be read of them.
fn audit_entries(paths: &[std::path::PathBuf]) -> (Vec<AuditEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    let given = !paths.is_empty();
    let paths: Vec<std::path::PathBuf> = if given {
        paths.to_vec()
    } else {
        AuditLog::default_path()
            .ok()
            .filter(|p| p.exists())
            .into_iter()
            .collect()
    };
    for path in paths {
        if given && !path.exists() {
            problems.push(format!(
                "the audit log {} does not exist",
                sanitize(&path.display().to_string())
            ));
            continue;
        }
        match AuditLog::read_report(&path) {
            Ok(r) => {
                for u in r.unreadable.sentences() {
                    problems.push(format!(
                        "audit log {}: {u}",
                        sanitize(&path.display().to_string())
                    ));
                }
                entries.extend(r.entries);
            }
            Err(e) => problems.push(format!(
                "the audit log {} could not be read: {}",
                sanitize(&path.display().to_string()),
                sanitize_message(&e.to_string())
            )),
        }
    }
    (entries, problems)
}
