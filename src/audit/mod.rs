//! The append-only audit log of operator takeovers.
//!
//! One JSON object per line, in a file created with mode 0600. An `intent`
//! entry is written and fsynced **before** the takeover's PUT, an `outcome`
//! entry after it; if the intent cannot be made durable, nothing is sent. A
//! copy of each entry may also go to a bucket as one immutable object
//! (`If-None-Match: *`).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::bucket::LeaseRecord;
use crate::store::local::{kind_name, open_regular, Opened};
use crate::store::{ObjectStore, PutCondition};

mod read;

use crate::clock::{rfc3339, ser_opt_rfc3339, ser_rfc3339};
use crate::logfile::{sole_regular_file, warn_if_world_writable, NotSole};
use crate::store::AddressingStyle;
use crate::text::sanitize;
use read::parse_reader;
pub(crate) use read::AuditRead;
pub use read::{AuditTail, Unreadable};

/// Why the audit log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The local file could not be created, written or fsynced.
    #[error("cannot write the audit log {}: {source}", .path.display())]
    Write {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The local file could not be read.
    #[error("cannot read the audit log {}: {source}", .path.display())]
    Read {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No default location (no home directory).
    #[error("no data directory for the audit log; pass --audit-log PATH")]
    NoDefault,
}

/// Where the takeover was aimed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditTarget {
    /// The endpoint URL requests went to, credentials shown as `***`; null
    /// for the SDK's own AWS endpoint of `region`, and for a local store.
    /// (Entries written by earlier versions hold a sentence here: `local`,
    /// or `URL (region R, path-style)`.)
    pub endpoint: Option<String>,
    /// The region requests were signed for (null for a local store).
    #[serde(default)]
    pub region: Option<String>,
    /// `path` or `virtual_host` (null for a local store).
    #[serde(default)]
    pub addressing_style: Option<AddressingStyle>,
    /// Bucket, for S3.
    pub bucket: Option<String>,
    /// The lease key.
    pub key: String,
    /// The prefix URL as given.
    pub url: String,
}

/// Where a lease object is, however the TARGET that reached it was spelled:
/// what [`AuditTarget::is_lease`] compares, and a key to index entries by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LeaseLocation {
    /// A local store: the LEASE file's path.
    Local(PathBuf),
    /// An S3 bucket and the object's full key.
    S3(String, String),
}

impl LeaseLocation {
    /// The lease at `key` as read through the TARGET `target_url` (its
    /// bucket, for S3: `bucket` when given, else the URL's); `None` when
    /// `target_url` is no TARGET.
    pub(crate) fn of_row(target_url: &str, bucket: Option<&str>, key: &str) -> Option<Self> {
        use crate::target::Target;
        match target_url.parse::<Target>() {
            Ok(Target::Local { dir }) => Some(Self::Local(dir.join(key))),
            Ok(Target::S3 { bucket: b, .. }) => {
                Some(Self::S3(bucket.map_or(b, str::to_owned), key.to_owned()))
            }
            Err(_) => None,
        }
    }
}

impl AuditTarget {
    /// The lease this entry is about; `None` when its URL is no TARGET.
    /// The entry's URL names the prefix; its key is relative to the store it
    /// opened (the prefix directory itself for the command line's local
    /// takeover, the TARGET's directory for the console's).
    pub(crate) fn location(&self) -> Option<LeaseLocation> {
        use crate::target::Target;
        match self.url.parse::<Target>() {
            Ok(Target::Local { dir }) => Some(LeaseLocation::Local(dir.join("LEASE"))),
            Ok(Target::S3 { bucket: b, .. }) => Some(LeaseLocation::S3(
                self.bucket.clone().unwrap_or(b),
                self.key.clone(),
            )),
            Err(_) => None,
        }
    }

    /// Whether this entry is about the lease at `key` as read through the
    /// TARGET `target_url` (its bucket, for S3): the same store and key,
    /// however either TARGET was spelled — a takeover of `file:///d/s1/`
    /// (key `LEASE`) is about `s1/LEASE` as read through `file:///d/`, and one
    /// of `s3://b/p/s1/` about `p/s1/LEASE` of bucket `b` through `s3://b/`.
    /// Entries whose URL is no TARGET are matched by key and bucket.
    pub(crate) fn is_lease(&self, target_url: &str, bucket: Option<&str>, key: &str) -> bool {
        match (
            LeaseLocation::of_row(target_url, bucket, key),
            self.location(),
        ) {
            (Some(r), Some(e)) => r == e,
            _ => self.key == key && self.bucket.as_deref() == bucket,
        }
    }
}

/// What the operator saw before deciding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditObserved {
    /// The record (null when absent or malformed).
    pub record: Option<LeaseRecord>,
    /// Its ETag (null when absent).
    pub etag: Option<String>,
    /// The judgement: fresh, stale, suspect, malformed, absent, released.
    pub judgement: String,
    /// Age in seconds by the reader's clock.
    pub age_s: Option<f64>,
    /// The reader's clock when judged (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub reader_clock: DateTime<Utc>,
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditWritten {
    /// The record put.
    pub record: LeaseRecord,
    /// The ETag the service returned (null if unknown).
    pub etag: Option<String>,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When the entry was written (UTC).
    #[serde(serialize_with = "ser_rfc3339")]
    pub time: DateTime<Utc>,
    /// `intent` (before the write) or `outcome` (after).
    pub phase: String,
    /// Pairs an intent with its outcome.
    pub id: String,
    /// `user@host`.
    pub operator: String,
    /// leasectl version.
    pub tool_version: String,
    /// `takeover`.
    pub action: String,
    /// Where.
    pub target: AuditTarget,
    /// What was seen.
    pub observed: AuditObserved,
    /// What was written (outcome entries of a successful write).
    pub written: Option<AuditWritten>,
    /// The operator's reason.
    pub reason: String,
    /// `conditional` or `best_effort`.
    pub exclusion: String,
    /// Whether `--force` overrode a fresh lease.
    pub forced: bool,
    /// What happens after: `release`, `hold` or `handover:ID`.
    pub then: String,
    /// The result (outcome entries): e.g. `taken`, `refused: …`, `failed: …`.
    pub outcome: Option<String>,
    /// After a forced takeover of a live lease: from when (UTC) the new
    /// holder may write — once the old holder's fence has certainly closed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_rfc3339"
    )]
    pub writes_safe_from: Option<DateTime<Utc>>,
}

#[cfg(test)]
impl AuditEntry {
    /// A takeover's intent for tests, on lease `key` reached through `url`
    /// (no bucket, endpoint or region) at `time`: id `x`, operator
    /// `ops@host`, tool version `0`, seen as `stale` with no record, ETag or
    /// age at `time`, nothing written, reason `r`, conditional, not forced,
    /// then release, no outcome. Tests change what they need with `..`.
    pub(crate) fn sample(time: DateTime<Utc>, url: &str, key: &str) -> AuditEntry {
        AuditEntry {
            time,
            phase: "intent".into(),
            id: "x".into(),
            operator: "ops@host".into(),
            tool_version: "0".into(),
            action: "takeover".into(),
            target: AuditTarget {
                endpoint: None,
                region: None,
                addressing_style: None,
                bucket: None,
                key: key.into(),
                url: url.into(),
            },
            observed: AuditObserved {
                record: None,
                etag: None,
                judgement: "stale".into(),
                age_s: None,
                reader_clock: time,
            },
            written: None,
            reason: "r".into(),
            exclusion: "conditional".into(),
            forced: false,
            then: "release".into(),
            outcome: None,
            writes_safe_from: None,
        }
    }
}

/// `user@host` of this process.
pub fn operator() -> String {
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| format!("uid{}", nix::unistd::getuid()));
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{user}@{host}")
}

/// The audit log: a local JSONL file and an optional remote copy.
#[derive(Clone)]
pub struct AuditLog {
    path: PathBuf,
    remote: Option<(Arc<dyn ObjectStore>, String)>,
}

impl AuditLog {
    /// The default log file: `{data dir}/leasectl/audit.jsonl` (XDG data dir on Linux).
    ///
    /// Errors: [`AuditError::NoDefault`] without a home directory.
    pub(crate) fn default_path() -> Result<PathBuf, AuditError> {
        directories::ProjectDirs::from("", "", "leasectl")
            .map(|d| d.data_dir().join("audit.jsonl"))
            .ok_or(AuditError::NoDefault)
    }

    /// Opens (creating with mode 0600, and its directory) the log at `path`,
    /// checking now that it can be appended to.
    ///
    /// Errors: [`AuditError::Write`].
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        let path = path.into();
        let err = |source| AuditError::Write {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let f = open_append(&path).map_err(err)?;
        if let Ok(md) = f.metadata() {
            warn_if_world_writable(
                &path,
                &md,
                "anyone on this host could forge or erase its takeover records",
            );
        }
        Ok(Self { path, remote: None })
    }

    /// Also writes each entry as an immutable object under `prefix` in `store`.
    pub(crate) fn with_remote(mut self, store: Arc<dyn ObjectStore>, prefix: String) -> Self {
        self.remote = Some((store, prefix));
        self
    }

    /// The local file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` as one line and fsyncs it; then copies it to the remote,
    /// if any (a remote failure is logged, not fatal: the local line is the record).
    ///
    /// Errors: [`AuditError::Write`] when the local line is not durable.
    pub async fn append(&self, entry: &AuditEntry) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(entry).unwrap_or_default();
        line.push(b'\n');
        let path = self.path.clone();
        let l = line.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut f = open_append(&path)?;
            // One writer at a time, and every entry on a line of its own: a
            // last line left without its newline (a crash mid-write) is ended
            // first, so that it stays one unreadable line instead of
            // swallowing this entry.
            lock_exclusive(&f)?;
            let len = f.metadata()?.len();
            let mut buf = l;
            if len > 0 {
                use std::os::unix::fs::FileExt;
                let mut last = [0u8; 1];
                f.read_exact_at(&mut last, len - 1)?;
                if last[0] != b'\n' {
                    tracing::warn!(
                        "the audit log {} ends inside a line (a write cut short?): that line is kept as it is, \
                         and this entry starts a new one",
                        sanitize(&path.display().to_string())
                    );
                    buf.insert(0, b'\n');
                }
            }
            f.write_all(&buf)?;
            f.sync_data()
        })
        .await
        .map_err(|e| AuditError::Write {
            path: self.path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map_err(|source| AuditError::Write {
            path: self.path.clone(),
            source,
        })?;
        if let Some((store, prefix)) = &self.remote {
            let key = format!(
                "{prefix}{}-{}-{}.json",
                entry.time.format("%Y%m%dT%H%M%S%.6fZ"),
                entry.id,
                entry.phase
            );
            if let Err(e) = store.put(&key, line, PutCondition::IfNoneMatch).await {
                tracing::warn!(key, "audit copy to {} failed: {e}", store.describe());
            }
        }
        Ok(())
    }

    /// Reads every entry of the log at `path`, oldest first. Lines that do not
    /// parse are skipped with a warning each (a torn line after a crash); see
    /// [`AuditLog::read_report`] to get them too.
    ///
    /// Errors: as [`AuditLog::read_report`].
    pub fn read(path: &Path) -> Result<Vec<AuditEntry>, AuditError> {
        let r = Self::read_report(path)?;
        r.unreadable.warn(path);
        Ok(r.entries)
    }

    /// Reads every entry of the log at `path`, oldest first, and names every
    /// line that is not an entry (one torn or non-UTF-8 line never hides the
    /// rest).
    ///
    /// The file is opened as the store opens objects: a symlink is not
    /// followed, a FIFO or device is refused without being read, and at most
    /// [`MAX_READ_BYTES`] are read — of a longer log only its newest entries
    /// (the last [`MAX_READ_BYTES`], from the first whole line), with a warning.
    ///
    /// Errors: [`AuditError::Read`], also for a path that is not a regular
    /// file; a missing file is an empty log.
    pub fn read_report(path: &Path) -> Result<AuditRead, AuditError> {
        let err = |source| AuditError::Read {
            path: path.to_owned(),
            source,
        };
        let (mut f, md) = match open_regular(path) {
            Ok(Opened::Regular(f, md)) => (f, md),
            Ok(Opened::Other(kind, _)) => return Err(err(not_regular(kind))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AuditRead::default()),
            Err(source) => return Err(err(source)),
        };
        let skip = md.len().saturating_sub(MAX_READ_BYTES);
        if skip > 0 {
            use std::io::{Seek, SeekFrom};
            tracing::warn!(
                "the audit log {} is {} bytes: only its last {} bytes (the newest entries) are read",
                sanitize(&path.display().to_string()),
                md.len(),
                MAX_READ_BYTES
            );
            f.seek(SeekFrom::Start(skip)).map_err(err)?;
        }
        // Streamed line by line: memory is the entries, not the log.
        let mut r = std::io::BufReader::with_capacity(1 << 16, (&mut f).take(MAX_READ_BYTES));
        let mut start = 0u64;
        if skip > 0 {
            // The first line read is most likely the tail of a cut one.
            let mut cut = Vec::new();
            start = std::io::BufRead::read_until(&mut r, b'\n', &mut cut).map_err(err)? as u64;
        }
        let mut out = AuditRead::default();
        parse_reader(
            r,
            skip + start,
            1,
            &mut |e| out.entries.push(e),
            &mut out.unreadable,
        )
        .map_err(err)?;
        Ok(out)
    }
}

/// The most `leasectl audit` reads of a log (64 MiB): a longer log is read
/// from its end.
pub(crate) const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

fn not_regular(kind: &str) -> std::io::Error {
    std::io::Error::other(format!(
        "not a regular file: {kind} (the audit log is never a link, FIFO or device; \
         give the real path of a regular file)"
    ))
}

/// The error for a log that is not a regular file with one name
/// ([`crate::logfile::sole_regular_file`]).
fn refused(why: NotSole) -> std::io::Error {
    use crate::logfile::NotSole;
    match why {
        NotSole::NotRegular(ft) => not_regular(kind_name(&ft)),
        NotSole::Links(n) => std::io::Error::other(format!(
            "it has {n} hard links, so it is also another file, and the audit log has one name \
             only (appending would write into that other file too). Check what else it is; give \
             the path of a file with one link, or copy it to a new file and use that"
        )),
    }
}

/// Takes an exclusive `flock(2)` on `f` (released when it is closed).
fn lock_exclusive(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Opens the log for appending (and reading its last byte): created with mode 0600; a symlink is not
/// followed and a FIFO does not block the open; only a regular file with one name is accepted
/// ([`crate::logfile::sole_regular_file`]).
fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        sole_regular_file(&m).map_err(refused)?;
    }
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENXIO) => not_regular(
                std::fs::symlink_metadata(path)
                    .map(|m| kind_name(&m.file_type()))
                    .unwrap_or("symlink"),
            ),
            _ => e,
        })?;
    sole_regular_file(&f.metadata()?).map_err(refused)?;
    Ok(f)
}

/// Formats a time for the audit listing.
pub(crate) fn fmt_time(t: &DateTime<Utc>) -> String {
    rfc3339(*t, SecondsFormat::Secs)
}

#[cfg(test)]
mod tests {
    use super::read::TAIL_FIRST_READ;
    use super::*;

    fn entry(id: &str) -> AuditEntry {
        let t: DateTime<Utc> = "2026-01-01T12:00:00Z".parse().unwrap();
        AuditEntry {
            id: id.into(),
            ..AuditEntry::sample(t, "file:///srv/db/", "LEASE")
        }
    }

    fn line(id: &str) -> String {
        format!("{}\n", serde_json::to_string(&entry(id)).unwrap())
    }

    fn ids(t: &AuditTail) -> Vec<String> {
        t.entries().into_iter().map(|e| e.id).collect()
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    #[test]
    fn a_tail_reads_what_was_appended_and_names_each_bad_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut t = AuditTail::new(&path, 3);
        assert!(t.poll().unwrap().is_empty(), "no log yet: nothing");
        append(&path, &format!("{}{{torn\n{}", line("a"), line("b")));
        let bad = t.poll().unwrap();
        assert_eq!(bad.len(), 1);
        assert_eq!((bad[0].line, bad[0].offset), (2, line("a").len() as u64));
        assert_eq!(ids(&t), ["a", "b"]);
        // Nothing new: nothing read, the bad line is not named again.
        assert!(t.poll().unwrap().is_empty());
        // A line still being written waits for its newline.
        let c = line("c");
        append(&path, &c[..10]);
        assert!(t.poll().unwrap().is_empty());
        assert_eq!(ids(&t), ["a", "b"]);
        append(&path, &c[10..]);
        append(&path, &line("d"));
        assert!(t.poll().unwrap().is_empty());
        assert_eq!(ids(&t), ["b", "c", "d"], "the newest 3");
        // Rotated: a new file at the path is read from its start.
        std::fs::rename(&path, dir.path().join("audit.jsonl.1")).unwrap();
        append(&path, &format!("{}oops\n", line("e")));
        let bad = t.poll().unwrap();
        assert_eq!((bad.len(), bad[0].line), (1, 2));
        assert_eq!(ids(&t), ["c", "d", "e"]);
        // Rewritten in place (same file, other bytes, not shorter): read again.
        std::fs::write(&path, format!("{}{}{}", line("f"), line("g"), line("h"))).unwrap();
        assert!(t.poll().unwrap().is_empty());
        assert_eq!(ids(&t), ["f", "g", "h"]);
        // Truncated: read again from the start.
        std::fs::write(&path, line("i")).unwrap();
        t.poll().unwrap();
        assert_eq!(ids(&t), ["g", "h", "i"]);
    }

    #[test]
    fn a_tail_starts_near_the_end_of_a_long_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let one = line("x");
        let n = (TAIL_FIRST_READ as usize / one.len()) * 2;
        append(&path, &one.repeat(n));
        append(&path, &line("last"));
        let mut t = AuditTail::new(&path, 5);
        assert!(
            t.poll().unwrap().is_empty(),
            "the cut first line is skipped, not named"
        );
        assert_eq!(ids(&t).last().map(String::as_str), Some("last"));
    }

    #[tokio::test]
    async fn an_entry_after_a_torn_last_line_starts_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let a = line("a");
        append(&path, &a[..a.len() / 2]);
        let log = AuditLog::open(&path).unwrap();
        log.append(&entry("b")).await.unwrap();
        let r = AuditLog::read_report(&path).unwrap();
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].id, "b");
        assert_eq!(r.unreadable.len(), 1);
        assert_eq!(r.unreadable[0].line, 1);
        assert!(r.unreadable[0]
            .to_string()
            .contains("line 1 (byte 0) is unreadable"));
        // A log that ends its lines is appended to as is.
        log.append(&entry("c")).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!text.contains("\n\n"));
    }
}
