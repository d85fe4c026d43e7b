//! One prefix's timeline assembled from its sources: the LEASE object's
//! versions (when the store keeps them), `--watch` recordings (merged only
//! when there are no versions: one clock, the service's), and the audit
//! entries about it; then derived ([`super::derive`]).

use chrono::{DateTime, Utc};

use super::read;
use super::render::{PrefixTimeline, Sources};
use crate::audit::{AuditEntry, LeaseLocation};
use crate::store::ObjectRead;
use crate::text::{sanitize, sanitize_message};

/// The window asked for: `from` (`None`: from the first version) to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// The window's start (UTC); `None`: everything kept.
    pub from: Option<DateTime<Utc>>,
    /// The window's end (UTC).
    pub to: DateTime<Utc>,
}

/// What every prefix's timeline reads besides its store.
pub struct Inputs<'a> {
    /// `--recording` files (NDJSON of `--watch`).
    pub recordings: &'a [std::path::PathBuf],
    /// Every audit log's entries ([`read::audit_entries`]).
    pub entries: &'a [AuditEntry],
    /// What could not be read of the audit logs, said for each prefix.
    pub audit_problems: &'a [String],
    /// How the versions' bodies are read (every one unless `--bisect`,
    /// `--concurrency` at once, `--timeout` each).
    pub reading: read::Reading,
    /// Told of each step of reading the versions (`leasectl timeline`'s
    /// progress bar on a terminal).
    pub progress: read::OnProgress<'a>,
}

/// The prefix a timeline is about: its URL, bucket and key prefix (the
/// observations' own origin is [`super::Source`]).
pub struct Subject<'a> {
    /// Its URL as given (shown escaped).
    pub url: String,
    /// The bucket, for S3.
    pub bucket: Option<&'a str>,
    /// The prefix inside the store.
    pub prefix: &'a str,
}

/// The timeline of `subject` from `store` (`Err`: why it could not be
/// opened, said as a problem), `inputs` and `window`. Never fails: what
/// could not be read is in the result's `problems`.
pub async fn prefix_timeline(
    store: Result<&dyn ObjectRead, String>,
    subject: &Subject<'_>,
    window: &Window,
    inputs: &Inputs<'_>,
) -> PrefixTimeline {
    let Window { from, to } = *window;
    let url = &subject.url;
    let key = crate::bucket::lease_key(subject.prefix);
    let mut p = PrefixTimeline {
        url: sanitize(url),
        key: sanitize(&key),
        versioning: None,
        sources: Sources::default(),
        problems: inputs.audit_problems.to_vec(),
        notes: Vec::new(),
        takeovers: Vec::new(),
        derived: Default::default(),
    };
    let mut obs = Vec::new();
    match store {
        Ok(store) => {
            let v = read::versions(
                store,
                &key,
                subject.bucket,
                (from, to),
                inputs.reading,
                inputs.progress,
            )
            .await;
            p.versioning = v.versioning;
            p.sources.versions_listed = v.listed;
            p.sources.versions_read = v.gets;
            p.sources.versions_inferred = v.inferred;
            p.sources.list_requests = v.list_requests;
            p.problems.extend(v.problems);
            p.notes.extend(v.notes);
            obs = v.observations;
        }
        Err(e) => p.problems.push(format!(
            "{} could not be opened: {}",
            sanitize(url),
            sanitize_message(&e)
        )),
    }
    let lease = LeaseLocation::of_row(url, subject.bucket, &key);
    let has_versions = p.versioning == Some(crate::store::Versioning::Enabled)
        || p.versioning == Some(crate::store::Versioning::Suspended);
    for file in inputs.recordings {
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
    if has_versions && !inputs.recordings.is_empty() {
        p.notes.push(
            "the bucket keeps versions: the recordings' lines were counted, not merged (one clock, the service's)".into(),
        );
    }
    // The versions are in the service's order, which ties of `Last-Modified`
    // (whole seconds on several services) must not reorder; the recordings
    // merged without versions are put on their one axis by time (a stable
    // sort: a file's lines keep their order within a time).
    if !has_versions {
        obs.sort_by_key(|x| x.at);
    }
    let about: Vec<AuditEntry> = inputs
        .entries
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
    p.derived = super::derive(&obs, &about, to);
    p.takeovers = super::takeovers_of(&about);
    p
}
