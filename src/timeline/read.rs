//! Reading the timeline's sources: a key's versions (every body, or by
//! bisection with `--bisect`), `--watch` recordings, audit logs. Each source
//! says what it could not read.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{bisect, Mark, Observation, Seen, Source};
use crate::audit::LeaseLocation;
use crate::bucket::LeaseRecord;
use crate::snapshot::options::{throttle_backoff, timed, THROTTLE_RETRIES};
use crate::store::{ObjectRead, ObjectVersion, StoreError, Versioning};

/// What reading a key's versions gave.
#[derive(Debug, Default)]
pub struct VersionsRead {
    /// The observations, in the service's order of the versions (oldest first).
    pub observations: Vec<Observation>,
    /// The bucket's versioning (`None`: the store keeps no versions).
    pub versioning: Option<Versioning>,
    /// Versions (and delete markers) listed in the window.
    pub listed: usize,
    /// Bodies read (GET of a version).
    pub gets: usize,
    /// Versions whose body was not read but inferred by bisection (`--bisect`):
    /// taken for a renewal of the tenure read on both sides of them.
    pub inferred: usize,
    /// Listing requests sent.
    pub list_requests: u64,
    /// Why the versions are missing or incomplete (sentences, escaped).
    pub problems: Vec<String>,
    /// Notes that are no fault (sentences).
    pub notes: Vec<String>,
}

/// How the versions' bodies are read.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// Read only where a tenure may change ([`bisect`], `--bisect`): the
    /// versions between two reads of one tenure are inferred, not read.
    /// Otherwise every body is read.
    pub bisect: bool,
    /// GETs in flight at once (`--concurrency`).
    pub concurrency: usize,
    /// The deadline of each GET (`--timeout`).
    pub timeout: Duration,
}

impl Default for Reading {
    /// Every body, [`crate::snapshot::DEFAULT_CONCURRENCY`] at once, 10 s each.
    fn default() -> Self {
        Self {
            bisect: false,
            concurrency: crate::snapshot::DEFAULT_CONCURRENCY as usize,
            timeout: Duration::from_secs(10),
        }
    }
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

/// One entry of the window: the version as listed, and its time as far as
/// the listing tells (for the window).
struct Listed {
    version: ObjectVersion,
    /// Its `Last-Modified`; for one listed without it, the time of the entry
    /// before it in the service's order (after it, for the first), `None`
    /// when no entry has one (see [`entry_times`] for the time it is shown at).
    at: Option<DateTime<Utc>>,
}

/// The versions that could not be read named one by one in the problem that
/// says so; the rest are counted.
const FAILURES_NAMED: usize = 5;

/// One body read: what it says, and the GET's `Last-Modified`.
struct Body {
    seen: Seen,
    last_modified: Option<DateTime<Utc>>,
}

/// Reads the versions of `key` written in `[from, to]` (plus the last one
/// before `from`, which says who held the lease when the window opened), in
/// the service's order, and their bodies as `reading` says (every one,
/// unless it bisects); each step is told to `progress`.
pub async fn versions(
    store: &dyn ObjectRead,
    key: &str,
    bucket: Option<&str>,
    window: (Option<DateTime<Utc>>, DateTime<Utc>),
    reading: Reading,
    progress: OnProgress<'_>,
) -> VersionsRead {
    let mut out = VersionsRead::default();
    tell(progress, Progress::Listing { key });
    let Some(listed) = list_window(store, key, bucket, window, &mut out).await else {
        return out;
    };
    out.listed = listed.len();
    tell(
        progress,
        Progress::Reading {
            key,
            listed: out.listed,
            gets: 0,
        },
    );
    let mut reader = Reader {
        store,
        key,
        listed: &listed,
        reading,
        progress,
        gets: 0,
        failures: Vec::new(),
    };
    let bodies = if reading.bisect {
        reader.bisected().await
    } else {
        let all: Vec<usize> = (0..listed.len())
            .filter(|&i| !listed[i].version.delete_marker)
            .collect();
        let mut bodies: Vec<Option<Body>> = (0..listed.len()).map(|_| None).collect();
        for (i, b) in reader.read(all).await {
            bodies[i] = Some(b);
        }
        bodies
    };
    out.gets = reader.gets;
    if !reader.failures.is_empty() {
        // The first few by name: every GET of a day refused would be 8,640.
        let shown = FAILURES_NAMED.min(reader.failures.len());
        let more = match reader.failures.len() - shown {
            0 => String::new(),
            n => format!("; and {n} more"),
        };
        out.problems.push(format!(
            "{} version(s) of {} could not be read ({}{more}): the tenures around them are uncertain",
            reader.failures.len(),
            crate::text::sanitize(key),
            reader.failures[..shown].join("; ")
        ));
    }
    observe(key, listed, bodies, &mut out);
    out
}

/// The observations of `listed` with their `bodies` (`None`: not read) into
/// `out`, with the count of versions inferred and what is uncertain.
fn observe(key: &str, listed: Vec<Listed>, bodies: Vec<Option<Body>>, out: &mut VersionsRead) {
    let times = entry_times(&listed, &bodies);
    let mut unplaced = 0;
    for ((l, body), at) in listed.into_iter().zip(bodies).zip(times) {
        let v = l.version;
        let Some(at) = at else {
            unplaced += 1;
            continue;
        };
        let (seen, source) = if v.delete_marker {
            (
                Seen::Deleted,
                Source::DeleteMarker {
                    version_id: crate::text::sanitize(&v.version_id),
                },
            )
        } else {
            let read = body.is_some();
            if !read {
                out.inferred += 1;
            }
            (
                body.map_or(Seen::Renewal, |b| b.seen),
                Source::Version {
                    version_id: crate::text::sanitize(&v.version_id),
                    etag: v.etag.clone(),
                    read,
                },
            )
        };
        out.observations.push(Observation { at, seen, source });
    }
    if unplaced > 0 {
        out.problems.push(format!(
            "{unplaced} entr(ies) of {} carry no time at all (no Last-Modified listed or read): they are left out of the tenures",
            crate::text::sanitize(key)
        ));
    }
    if out.inferred > 0 {
        out.problems.push(format!(
            "{} of the {} version(s) of {} were inferred by bisection, not read (--bisect): a holder that wrote between two reads of another's tenure would not be seen, so the history is not known; run it again without --bisect to read every version",
            out.inferred,
            out.listed,
            crate::text::sanitize(key)
        ));
    }
}

/// The time of each entry: its listed `Last-Modified`, else its GET's;
/// else (a delete marker, or a version not read, listed without one) the
/// time of the entry before it in the service's order, or after it for the
/// first ones; `None` only when no entry has a time.
fn entry_times(listed: &[Listed], bodies: &[Option<Body>]) -> Vec<Option<DateTime<Utc>>> {
    let mut times: Vec<Option<DateTime<Utc>>> = listed
        .iter()
        .zip(bodies)
        .map(|(l, b)| {
            l.version
                .last_modified
                .or_else(|| b.as_ref().and_then(|b| b.last_modified))
        })
        .collect();
    let mut before = None;
    for t in times.iter_mut() {
        *t = t.or(before);
        before = *t;
    }
    let first = times.iter().find_map(|t| *t);
    for t in times.iter_mut().take_while(|t| t.is_none()) {
        *t = first;
    }
    times
}

/// Tells `progress` of `p`, if there is one to tell.
fn tell(progress: OnProgress<'_>, p: Progress<'_>) {
    if let Some(f) = progress {
        f(p)
    }
}

/// Lists the versions of `key` and keeps those of `window` (with the last
/// one before it), in the service's order; records the listing's requests,
/// the versioning status and what it means in `out`. None, with a note or a
/// problem in `out`, when the store keeps no versions or the listing failed.
async fn list_window(
    store: &dyn ObjectRead,
    key: &str,
    bucket: Option<&str>,
    (from, to): (Option<DateTime<Utc>>, DateTime<Utc>),
    out: &mut VersionsRead,
) -> Option<Vec<Listed>> {
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
    if listed.unordered > 0 {
        out.problems.push(format!(
            "the service did not tell the order of {} delete marker(s) and version(s) of {} written in the same second: each was placed as if the version came first, so the tenures around them are uncertain",
            listed.unordered,
            crate::text::sanitize(key)
        ));
    }
    let mut versions = timed_entries(key, listed.versions, out);
    // The window, with the last version before it.
    if let Some(from) = from {
        let first_in = versions
            .iter()
            .position(|v| v.at.is_some_and(|t| t >= from))
            .unwrap_or(versions.len());
        versions.drain(..first_in.saturating_sub(1));
    }
    versions.retain(|v| v.at.is_none_or(|t| t <= to));
    Some(versions)
}

/// `versions` (the service's order) with a time each: its `Last-Modified`,
/// or for one listed without it (a problem in `out`, with how it is timed)
/// the time of the entry before it (after it, for the first). A `Last-Modified`
/// earlier than the one before it is a note: the order stays the service's.
fn timed_entries(key: &str, versions: Vec<ObjectVersion>, out: &mut VersionsRead) -> Vec<Listed> {
    let missing = versions
        .iter()
        .filter(|v| v.last_modified.is_none())
        .count();
    let first_known = versions.iter().find_map(|v| v.last_modified);
    let mut before: Option<DateTime<Utc>> = None;
    let mut backwards = 0;
    let listed: Vec<Listed> = versions
        .into_iter()
        .map(|v| {
            if let (Some(t), Some(b)) = (v.last_modified, before) {
                if t < b {
                    backwards += 1;
                }
            }
            let at = v.last_modified.or(before).or(first_known);
            before = at;
            Listed { version: v, at }
        })
        .collect();
    if missing > 0 {
        out.problems.push(format!(
            "{missing} version(s) of {} were listed without a Last-Modified (the service did not say when they were written, as S3 does): each is kept in the service's order and timed by its own GET's Last-Modified, else by the entry before it, so the times around them are uncertain",
            crate::text::sanitize(key)
        ));
    }
    if backwards > 0 {
        out.notes.push(format!(
            "the service lists {backwards} version(s) of {} after one with a later Last-Modified: the order used is the service's, which says which write replaced which",
            crate::text::sanitize(key)
        ));
    }
    listed
}

/// Reads the bodies of one key's versions: bounded concurrency, a throttled
/// GET sent again after a back-off, each under its deadline.
struct Reader<'a> {
    store: &'a dyn ObjectRead,
    key: &'a str,
    listed: &'a [Listed],
    reading: Reading,
    progress: OnProgress<'a>,
    /// Bodies read so far (GETs answered, or failed for good).
    gets: usize,
    /// A sentence per version that could not be read.
    failures: Vec<String>,
}

impl Reader<'_> {
    /// Reads the bodies of versions `wanted` (indices into `listed`), at most
    /// `reading.concurrency` at once, telling the progress of each.
    async fn read(&mut self, wanted: Vec<usize>) -> Vec<(usize, Body)> {
        use futures::StreamExt;
        let (store, key, listed, timeout) =
            (self.store, self.key, self.listed, self.reading.timeout);
        let mut answers = futures::stream::iter(wanted)
            .map(|i| async move {
                let id = &listed[i].version.version_id;
                (i, get_version(store, key, id, timeout).await)
            })
            .buffer_unordered(self.reading.concurrency.max(1));
        let mut out = Vec::new();
        while let Some((i, r)) = answers.next().await {
            self.gets += 1;
            let body = match r {
                Ok(g) => Body {
                    seen: match LeaseRecord::parse(&g.body, g.meta.size) {
                        Ok(r) => Seen::of_record(r),
                        Err(m) => Seen::Malformed(m.0),
                    },
                    last_modified: g.meta.last_modified,
                },
                Err(e) => {
                    self.failures.push(format!(
                        "version {}: {}",
                        crate::text::sanitize(&listed[i].version.version_id),
                        crate::text::sanitize_message(&e.to_string())
                    ));
                    Body {
                        seen: Seen::Malformed(format!("could not be read: {e}")),
                        last_modified: None,
                    }
                }
            };
            out.push((i, body));
            tell(
                self.progress,
                Progress::Reading {
                    key,
                    listed: listed.len(),
                    gets: self.gets,
                },
            );
        }
        out
    }

    /// The bodies [`bisect`] asks for, `None` for a version not read. The
    /// bisection decides which to read; reading is async, so it runs in
    /// rounds: each round's reads are done (at once, bounded), then the
    /// bisection asks again.
    async fn bisected(&mut self) -> Vec<Option<Body>> {
        let listed = self.listed;
        let mut bodies: Vec<Option<Body>> = (0..listed.len()).map(|_| None).collect();
        let mut cache: std::collections::HashMap<usize, Mark> = Default::default();
        loop {
            let mut wanted: Vec<usize> = Vec::new();
            let _ = bisect(
                listed.len(),
                false,
                |i| listed[i].version.delete_marker.then_some(Mark::Other(i)),
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
                return bodies;
            }
            for (i, body) in self.read(wanted).await {
                let mark = match body.seen.tenure_key() {
                    Some((id, g, rel)) => Mark::Record(id.to_owned(), g, rel),
                    None => Mark::Other(i),
                };
                cache.insert(i, mark);
                bodies[i] = Some(body);
            }
        }
    }
}

/// One version's GET under `timeout`; sent again, after a back-off, while
/// the service asks to slow down (at most [`THROTTLE_RETRIES`] times).
async fn get_version(
    store: &dyn ObjectRead,
    key: &str,
    version_id: &str,
    timeout: Duration,
) -> Result<crate::store::GetOutput, StoreError> {
    let mut tries = 0;
    loop {
        let what = format!("reading a version of {}", crate::text::sanitize(key));
        match timed(timeout, &what, store.get_version(key, version_id)).await {
            Err(e) if e.is_throttle() && tries < THROTTLE_RETRIES => {
                tokio::time::sleep(throttle_backoff(tries)).await;
                tries += 1;
            }
            r => return r,
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
