//! Reading the timeline's sources: a key's versions (bodies by bisection),
//! `--watch` recordings, audit logs. Each source says what it could not read.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::{bisect, Mark, Observation, Seen, Source};
use crate::audit::LeaseLocation;
use crate::bucket::LeaseRecord;
use crate::store::{ObjectRead, ObjectVersion, StoreError, Versioning};

/// What reading a key's versions gave.
#[derive(Debug, Default)]
pub struct VersionsRead {
    /// The observations, oldest first.
    pub observations: Vec<Observation>,
    /// The bucket's versioning (`None`: the store keeps no versions).
    pub versioning: Option<Versioning>,
    /// Versions (and delete markers) listed in the window.
    pub listed: usize,
    /// Bodies read (GET of a version).
    pub gets: usize,
    /// Listing requests sent.
    pub list_requests: u64,
    /// Why the versions are missing or incomplete (sentences, escaped).
    pub problems: Vec<String>,
    /// Notes that are no fault (sentences).
    pub notes: Vec<String>,
}

/// How far reading a key's versions got, for a progress display (the key
/// as stored: escape it before showing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// Listing the versions of `key` (page by page).
    Listing {
        /// The LEASE key.
        key: &'a str,
    },
    /// Bodies read so far (`gets`) of the `listed` versions in the window;
    /// with bisection, far fewer than `listed` are read.
    Reading {
        /// The LEASE key.
        key: &'a str,
        /// Versions (and delete markers) in the window.
        listed: usize,
        /// Bodies read so far.
        gets: usize,
    },
}

/// Something told of each step of [`versions`] (`leasectl timeline`'s
/// progress bar); `None`: nothing is told.
pub type OnProgress<'a> = Option<&'a (dyn Fn(Progress<'_>) + Sync)>;

/// Reads the versions of `key` written in `[from, to]` (plus the last one
/// before `from`, which says who held the lease when the window opened),
/// their bodies by [`bisect`] (every one with `all`); each step is told to
/// `progress`.
pub async fn versions(
    store: &dyn ObjectRead,
    key: &str,
    bucket: Option<&str>,
    window: (Option<DateTime<Utc>>, DateTime<Utc>),
    all: bool,
    progress: OnProgress<'_>,
) -> VersionsRead {
    let mut out = VersionsRead::default();
    tell(progress, Progress::Listing { key });
    let Some(versions) = list_window(store, key, bucket, window, &mut out).await else {
        return out;
    };
    out.listed = versions.len();
    tell(
        progress,
        Progress::Reading {
            key,
            listed: out.listed,
            gets: 0,
        },
    );
    let (bodies, failures) = read_bisected(store, key, &versions, all, progress).await;
    out.gets = bodies.iter().filter(|b| b.is_some()).count();
    if !failures.is_empty() {
        out.problems.push(format!(
            "{} version(s) of {} could not be read ({}): the tenures around them are uncertain",
            failures.len(),
            crate::text::sanitize(key),
            failures.join("; ")
        ));
    }
    for (v, body) in versions.iter().zip(bodies) {
        let Some(at) = v.last_modified else { continue };
        let (seen, source) = if v.delete_marker {
            (
                Seen::Deleted,
                Source::DeleteMarker {
                    version_id: crate::text::sanitize(&v.version_id),
                },
            )
        } else {
            let read = body.is_some();
            (
                body.unwrap_or(Seen::Renewal),
                Source::Version {
                    version_id: crate::text::sanitize(&v.version_id),
                    etag: v.etag.clone(),
                    read,
                },
            )
        };
        out.observations.push(Observation { at, seen, source });
    }
    out
}

/// Tells `progress` of `p`, if there is one to tell.
fn tell(progress: OnProgress<'_>, p: Progress<'_>) {
    if let Some(f) = progress {
        f(p)
    }
}

/// Lists the versions of `key` and keeps those of `window` (with the last
/// one before it); records the listing's requests, the versioning status
/// and what it means in `out`. None, with a note or a problem in `out`, when
/// the store keeps no versions or the listing failed.
async fn list_window(
    store: &dyn ObjectRead,
    key: &str,
    bucket: Option<&str>,
    (from, to): (Option<DateTime<Utc>>, DateTime<Utc>),
    out: &mut VersionsRead,
) -> Option<Vec<ObjectVersion>> {
    let listed = match store.list_versions(key).await {
        Ok(v) => v,
        Err(StoreError::NotImplemented(_)) => {
            out.notes.push(format!(
                "{} keeps no versions: the timeline is built from the recordings and audit logs given",
                crate::text::sanitize(&store.describe())
            ));
            return None;
        }
        Err(e) => {
            out.problems.push(format!(
                "the versions of {} could not be listed: {}",
                crate::text::sanitize(key),
                crate::text::sanitize_message(&e.to_string())
            ));
            return None;
        }
    };
    out.list_requests = listed.requests;
    out.versioning = Some(listed.versioning);
    if listed.versioning == Versioning::Off {
        out.notes.push(format!(
            "bucket versioning is off: no earlier version of {} is kept, so only its current record is seen. Turn it on for the next incident: aws s3api put-bucket-versioning --bucket {} --versioning-configuration Status=Enabled",
            crate::text::sanitize(key),
            crate::text::sanitize(bucket.unwrap_or("BUCKET"))
        ));
    }
    let mut versions = listed.versions;
    // The window, with the last version before it.
    if let Some(from) = from {
        let first_in = versions
            .iter()
            .position(|v| v.last_modified.is_some_and(|t| t >= from))
            .unwrap_or(versions.len());
        versions.drain(..first_in.saturating_sub(1));
    }
    versions.retain(|v| v.last_modified.is_none_or(|t| t <= to));
    Some(versions)
}

/// Reads the bodies [`bisect`] asks for (every one with `all`): the parsed
/// record (or why not) per version read, None for one not read, and a
/// sentence per version that could not be read. The bisection decides which
/// to read; reading is async, so it runs in rounds: each round's reads are
/// done, then the bisection asks again.
async fn read_bisected(
    store: &dyn ObjectRead,
    key: &str,
    versions: &[ObjectVersion],
    all: bool,
    progress: OnProgress<'_>,
) -> (Vec<Option<Seen>>, Vec<String>) {
    let mut bodies: Vec<Option<Seen>> = vec![None; versions.len()];
    let mut failures: Vec<String> = Vec::new();
    let mut gets = 0;
    let mut cache: std::collections::HashMap<usize, Mark> = Default::default();
    loop {
        let mut wanted: Vec<usize> = Vec::new();
        let _ = bisect(
            versions.len(),
            all,
            |i| versions[i].delete_marker.then_some(Mark::Other(i)),
            |i| {
                let m = cache.get(&i).cloned();
                if m.is_none() {
                    wanted.push(i);
                }
                m
            },
        );
        wanted.sort_unstable();
        wanted.dedup();
        if wanted.is_empty() {
            return (bodies, failures);
        }
        for i in wanted {
            let v = &versions[i];
            gets += 1;
            let seen = match store.get_version(key, &v.version_id).await {
                Ok(g) => match LeaseRecord::parse(&g.body, g.meta.size) {
                    Ok(r) => Seen::of_record(r),
                    Err(m) => Seen::Malformed(m.0),
                },
                Err(e) => {
                    failures.push(format!(
                        "version {}: {}",
                        crate::text::sanitize(&v.version_id),
                        crate::text::sanitize_message(&e.to_string())
                    ));
                    Seen::Malformed(format!("could not be read: {e}"))
                }
            };
            let mark = match seen.tenure_key() {
                Some((id, g, rel)) => Mark::Record(id.to_owned(), g, rel),
                None => Mark::Other(i),
            };
            cache.insert(i, mark);
            bodies[i] = Some(seen);
            tell(
                progress,
                Progress::Reading {
                    key,
                    listed: versions.len(),
                    gets,
                },
            );
        }
    }
}

/// The `lease` lines of the `--watch` recording `path` about the lease at
/// `lease` (whatever TARGET the watcher was given), in `[from, to]`: what the
/// watcher saw, by its clock. Returns the observations and the lines it could
/// not read.
pub fn recording(
    path: &Path,
    lease: &LeaseLocation,
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
) -> Result<(Vec<Observation>, usize), std::io::Error> {
    use std::io::BufRead;
    let file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut unreadable = 0;
    let shown = path.display().to_string();
    for (n, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
            if !line.iter().all(u8::is_ascii_whitespace) {
                unreadable += 1;
            }
            continue;
        };
        if v["type"] != "lease" {
            continue;
        }
        let here = LeaseLocation::of_row(
            v["target"].as_str().unwrap_or_default(),
            v["bucket"].as_str(),
            v["key"].as_str().unwrap_or_default(),
        );
        if here.as_ref() != Some(lease) {
            continue;
        }
        let Some(at) = v["time"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
        else {
            unreadable += 1;
            continue;
        };
        if from.is_some_and(|f| at < f) || at > to {
            continue;
        }
        let seen = match v["state"].as_str() {
            Some("absent") => Seen::Deleted,
            Some("malformed") => Seen::Malformed(v["problem"].as_str().unwrap_or("").to_owned()),
            _ => match record_of(&v["record"]) {
                Some(r) => Seen::of_record(r),
                None => {
                    unreadable += 1;
                    continue;
                }
            },
        };
        out.push(Observation {
            at,
            seen,
            source: Source::Recording {
                file: crate::text::sanitize(&shown),
                line: n + 1,
            },
        });
    }
    Ok((out, unreadable))
}

fn record_of(v: &serde_json::Value) -> Option<LeaseRecord> {
    let body = serde_json::to_vec(v).ok()?;
    LeaseRecord::parse(&body, body.len() as u64).ok()
}

/// The entries of the audit logs `paths` (this host's, if it exists, when
/// none is given), and what could not be read of them.
pub fn audit_entries(paths: &[std::path::PathBuf]) -> (Vec<crate::audit::AuditEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    let given = !paths.is_empty();
    let paths: Vec<std::path::PathBuf> = if given {
        paths.to_vec()
    } else {
        crate::audit::AuditLog::default_path()
            .ok()
            .filter(|p| p.exists())
            .into_iter()
            .collect()
    };
    for path in paths {
        if given && !path.exists() {
            problems.push(format!(
                "the audit log {} does not exist",
                crate::text::sanitize(&path.display().to_string())
            ));
            continue;
        }
        match crate::audit::AuditLog::read_report(&path) {
            Ok(r) => {
                for u in r.unreadable.sentences() {
                    problems.push(format!(
                        "audit log {}: {u}",
                        crate::text::sanitize(&path.display().to_string())
                    ));
                }
                entries.extend(r.entries);
            }
            Err(e) => problems.push(format!(
                "the audit log {} could not be read: {}",
                crate::text::sanitize(&path.display().to_string()),
                crate::text::sanitize_message(&e.to_string())
            )),
        }
    }
    (entries, problems)
}
