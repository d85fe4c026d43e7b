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
use crate::store::local::Opened;
use crate::store::{ObjectStore, PutCondition};

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
    pub addressing_style: Option<crate::store::AddressingStyle>,
    /// Bucket, for S3.
    pub bucket: Option<String>,
    /// The lease key.
    pub key: String,
    /// The prefix URL as given.
    pub url: String,
}

/// What the operator saw before deciding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditObserved {
    /// The record (null when absent or malformed).
    pub record: Option<LeaseRecord>,
    /// Its ETag (null when absent).
    pub etag: Option<String>,
    /// The judgement: fresh, stale, suspect, malformed, absent.
    pub judgement: String,
    /// Age in seconds by the reader's clock.
    pub age_s: Option<f64>,
    /// The reader's clock when judged (UTC).
    #[serde(serialize_with = "crate::clock::ser_rfc3339")]
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
    #[serde(serialize_with = "crate::clock::ser_rfc3339")]
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
        serialize_with = "crate::clock::ser_opt_rfc3339"
    )]
    pub writes_safe_from: Option<DateTime<Utc>>,
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
    pub fn default_path() -> Result<PathBuf, AuditError> {
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
        open_append(&path).map_err(err)?;
        Ok(Self { path, remote: None })
    }

    /// Also writes each entry as an immutable object under `prefix` in `store`.
    pub fn with_remote(mut self, store: Arc<dyn ObjectStore>, prefix: String) -> Self {
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
            f.write_all(&l)?;
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
    /// parse are skipped with a warning (a torn last line after a crash).
    ///
    /// The file is opened as the store opens objects: a symlink is not
    /// followed, a FIFO or device is refused without being read, and at most
    /// [`MAX_READ_BYTES`] are read — of a longer log only its newest entries
    /// (the last [`MAX_READ_BYTES`], from the first whole line), with a warning.
    ///
    /// Errors: [`AuditError::Read`], also for a path that is not a regular
    /// file; a missing file is an empty log.
    pub fn read(path: &Path) -> Result<Vec<AuditEntry>, AuditError> {
        let err = |source| AuditError::Read {
            path: path.to_owned(),
            source,
        };
        let (mut f, md) = match crate::store::local::open_regular(path) {
            Ok(Opened::Regular(f, md)) => (f, md),
            Ok(Opened::Other(kind, _)) => return Err(err(not_regular(kind))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(err(source)),
        };
        let mut bytes = Vec::new();
        let skip = md.len().saturating_sub(MAX_READ_BYTES);
        if skip > 0 {
            use std::io::{Seek, SeekFrom};
            tracing::warn!(
                "the audit log {} is {} bytes: only its last {} bytes (the newest entries) are read",
                crate::text::sanitize(&path.display().to_string()),
                md.len(),
                MAX_READ_BYTES
            );
            f.seek(SeekFrom::Start(skip)).map_err(err)?;
        }
        (&mut f)
            .take(MAX_READ_BYTES)
            .read_to_end(&mut bytes)
            .map_err(err)?;
        if skip > 0 {
            // The first line read is most likely the tail of a cut one.
            let start = bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |i| i + 1);
            bytes.drain(..start);
        }
        let mut out = Vec::new();
        // Line by line as bytes: one torn or non-UTF-8 line must not hide the rest.
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<AuditEntry>(line) {
                Ok(e) => out.push(e),
                Err(e) => tracing::warn!("audit log line {} unreadable: {e}", i + 1),
            }
        }
        Ok(out)
    }
}

/// The most `leasectl audit` reads of a log (64 MiB): a longer log is read
/// from its end.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

fn not_regular(kind: &str) -> std::io::Error {
    std::io::Error::other(format!(
        "not a regular file: {kind} (the audit log is never a link, FIFO or device; \
         give the real path of a regular file)"
    ))
}

/// Opens the log for appending: created with mode 0600; a symlink is not
/// followed and a FIFO does not block the open; only a regular file is accepted.
fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(not_regular(crate::store::local::kind_name(&m.file_type())));
        }
    }
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENXIO) => not_regular(
                std::fs::symlink_metadata(path)
                    .map(|m| crate::store::local::kind_name(&m.file_type()))
                    .unwrap_or("symlink"),
            ),
            _ => e,
        })?;
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(not_regular(crate::store::local::kind_name(&md.file_type())));
    }
    Ok(f)
}

/// Formats a time for the audit listing.
pub fn fmt_time(t: &DateTime<Utc>) -> String {
    crate::clock::rfc3339(*t, SecondsFormat::Secs)
}
