//! Reading the audit log: its lines as entries, the lines that are not
//! (counted, the first few kept: [`Unreadable`]), and a log followed as it
//! grows ([`AuditTail`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{not_regular, AuditEntry, AuditError};
use crate::store::local::{open_regular, Opened};
use crate::text::{quote_shown, sanitize};

/// What [`AuditLog::read_report`] found.
#[derive(Debug, Default)]
pub struct AuditRead {
    /// The entries, oldest first.
    pub entries: Vec<AuditEntry>,
    /// The lines that are not entries: how many, and the first few.
    pub(crate) unreadable: Unreadable,
}

/// The lines of a log read that are not entries: their number, and the first
/// [`Unreadable::SHOWN`] of them (a log of junk costs a count, not a copy of
/// every line, and is warned about in a few lines, not one per line).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Unreadable {
    /// How many lines were not entries.
    pub count: u64,
    /// The first of them, in file order.
    pub first: Vec<UnreadableLine>,
}

impl Unreadable {
    /// How many lines are kept to be named.
    pub const SHOWN: usize = 5;

    /// Counts `u`, keeping it if it is one of the first few.
    pub fn push(&mut self, u: UnreadableLine) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(u);
        }
    }

    /// How many lines were not entries.
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// True when every line was an entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sentences that name them: one per kept line, and the total of the
    /// others.
    pub fn sentences(&self) -> Vec<String> {
        let mut v: Vec<String> = self.first.iter().map(ToString::to_string).collect();
        let more = self.count.saturating_sub(self.first.len() as u64);
        if more > 0 {
            v.push(format!(
                "and {more} more unreadable lines ({} in all), skipped",
                self.count
            ));
        }
        v
    }

    /// Warns (`tracing`) about them in at most [`Unreadable::SHOWN`] + 1 lines.
    pub(crate) fn warn(&self, path: &Path) {
        let shown = sanitize(&path.display().to_string());
        for s in self.sentences() {
            tracing::warn!("audit log {shown}: {s}");
        }
    }
}

impl std::ops::Index<usize> for Unreadable {
    type Output = UnreadableLine;
    fn index(&self, i: usize) -> &UnreadableLine {
        &self.first[i]
    }
}

/// A line of the audit log that is not an entry (torn by a crash, edited by hand).
#[derive(Debug, Clone, PartialEq)]
pub struct UnreadableLine {
    /// Its number, from 1 (counted from the first whole line read: of a log
    /// read from its end, or followed by an [`AuditTail`] that started in its
    /// middle, the number is within what was read; `offset` is exact).
    pub line: u64,
    /// Its first byte's offset in the file.
    pub offset: u64,
    /// Why it is not an entry.
    pub error: String,
    /// Its start, escaped, at most 60 characters.
    pub(crate) excerpt: String,
}

impl std::fmt::Display for UnreadableLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} (byte {}) is unreadable, skipped: {} — it starts {}",
            self.line,
            self.offset,
            self.error,
            quote_shown(&self.excerpt)
        )
    }
}

/// Parses `bytes` (whole lines of the log, the first at byte `offset`, line
/// number `line`) as entries; every line that is not one goes to `bad`.
pub(super) fn parse_lines(
    bytes: &[u8],
    offset: u64,
    line: u64,
    good: &mut dyn FnMut(AuditEntry),
    bad: &mut Unreadable,
) {
    // Reading from a slice cannot fail.
    let _ = parse_reader(bytes, offset, line, good, bad);
}

/// [`parse_lines`] over a reader, one line at a time in one reused buffer.
///
/// Errors: the reader's.
pub(super) fn parse_reader(
    mut r: impl std::io::BufRead,
    mut offset: u64,
    mut line: u64,
    good: &mut dyn FnMut(AuditEntry),
    bad: &mut Unreadable,
) -> std::io::Result<()> {
    // Line by line as bytes: one torn or non-UTF-8 line must not hide the rest.
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let l = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let here = offset;
        offset += l.len() as u64 + 1;
        line += 1;
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<AuditEntry>(l) {
            Ok(e) => good(e),
            // Counted; described only while it is one of the first few.
            Err(_) if bad.first.len() >= Unreadable::SHOWN => bad.count += 1,
            Err(e) => {
                let text = String::from_utf8_lossy(&l[..l.len().min(240)]);
                let excerpt: String = sanitize(&text).chars().take(60).collect();
                bad.push(UnreadableLine {
                    line: line - 1,
                    offset: here,
                    error: e.to_string(),
                    excerpt,
                })
            }
        }
    }
}

/// The newest entries of an audit log, followed as it grows (`serve`, the
/// console): each [`AuditTail::poll`] reads only what was appended since the
/// last one, so a long log costs its size once, not at every refresh, and
/// each unreadable line is warned about once. A log replaced (rotated: another
/// file at the path) or rewritten (truncated, or its last bytes read differ)
/// is read again from its start; the entries already read are kept. A line
/// still being written (no newline yet) waits for the next poll. The first
/// read of a log longer than [`TAIL_FIRST_READ`] starts that far from its end.
pub struct AuditTail {
    path: PathBuf,
    keep: usize,
    /// `(device, inode)` of the file followed.
    file: Option<(u64, u64)>,
    /// Bytes consumed: whole lines up to here have been read.
    offset: u64,
    /// Up to 64 bytes before `offset`, to notice a rewritten file.
    before: Vec<u8>,
    /// The number of the line at `offset`.
    line: u64,
    entries: std::collections::VecDeque<AuditEntry>,
}

/// The most an [`AuditTail`] reads of a log at once (4 MiB): its first read
/// of a longer log, or what was appended between two polls, starts that far
/// from the end (at the next whole line).
pub(crate) const TAIL_FIRST_READ: u64 = 4 * 1024 * 1024;

impl AuditTail {
    /// Follows the log at `path`, keeping its newest `keep` entries (at least 1).
    /// Nothing is read before the first [`AuditTail::poll`].
    pub fn new(path: impl Into<PathBuf>, keep: usize) -> Self {
        Self {
            path: path.into(),
            keep: keep.max(1),
            file: None,
            offset: 0,
            before: Vec::new(),
            line: 1,
            entries: std::collections::VecDeque::new(),
        }
    }

    /// The log followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest entries read, oldest first (at most `keep`).
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.entries.iter().cloned().collect()
    }

    /// Reads what was appended since the last poll (blocking I/O: call it on
    /// a blocking thread). Each line that is not an entry is warned about
    /// (`tracing`) once, and returned.
    ///
    /// Errors: [`AuditError::Read`] (the path is not a regular file, or the
    /// read failed: the entries already read are kept, and the next poll
    /// tries again). A missing file is no error: nothing new.
    pub fn poll(&mut self) -> Result<Unreadable, AuditError> {
        self.poll_with(&mut |_| {})
    }

    /// [`AuditTail::poll`], also passing each entry read (oldest first) to
    /// `on_entry`, even those beyond the `keep` newest (`--watch` indexes
    /// every takeover it reads).
    ///
    /// Errors: as [`AuditTail::poll`].
    pub(crate) fn poll_with(
        &mut self,
        on_entry: &mut dyn FnMut(&AuditEntry),
    ) -> Result<Unreadable, AuditError> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::{FileExt, MetadataExt};
        let err = |source| AuditError::Read {
            path: self.path.clone(),
            source,
        };
        let (mut f, md) = match open_regular(&self.path) {
            Ok(Opened::Regular(f, md)) => (f, md),
            Ok(Opened::Other(kind, _)) => return Err(err(not_regular(kind))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Unreadable::default()),
            Err(source) => return Err(err(source)),
        };
        let id = (md.dev(), md.ino());
        let len = md.len();
        let mut same = self.file == Some(id) && len >= self.offset;
        if same && !self.before.is_empty() {
            let mut b = vec![0u8; self.before.len()];
            let at = self.offset - b.len() as u64;
            same = f.read_exact_at(&mut b, at).is_ok() && b == self.before;
        }
        if !same {
            if self.file.is_some() {
                tracing::info!(
                    "the audit log {} was replaced or rewritten: reading it again from its start",
                    sanitize(&self.path.display().to_string())
                );
            }
            self.file = Some(id);
            self.offset = 0;
            self.before.clear();
            self.line = 1;
        }
        if len == self.offset {
            return Ok(Unreadable::default());
        }
        let mut from = self.offset;
        let mut resync = false;
        if len - from > TAIL_FIRST_READ {
            from = len - TAIL_FIRST_READ;
            resync = true;
        }
        f.seek(SeekFrom::Start(from)).map_err(err)?;
        let mut bytes = Vec::new();
        (&mut f)
            .take(len - from)
            .read_to_end(&mut bytes)
            .map_err(err)?;
        let mut start = 0usize;
        if resync {
            // Started inside the file: the first (most likely cut) line is skipped.
            match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => start = i + 1,
                None => return Ok(Unreadable::default()),
            }
        }
        // Whole lines only: a line without its newline yet is read next time.
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n').map(|i| i + 1) else {
            return Ok(Unreadable::default());
        };
        if end <= start {
            return Ok(Unreadable::default());
        }
        let whole = &bytes[start..end];
        let mut bad = Unreadable::default();
        let keep = self.keep;
        let entries = &mut self.entries;
        let path = sanitize(&self.path.display().to_string());
        parse_lines(
            &whole[..whole.len() - 1],
            from + start as u64,
            self.line,
            &mut |e| {
                on_entry(&e);
                entries.push_back(e);
                if entries.len() > keep {
                    entries.pop_front();
                }
            },
            &mut bad,
        );
        // A few lines and a total, never one per bad line.
        for s in bad.sentences() {
            tracing::warn!("audit log {path}: {s}");
        }
        self.line += whole.iter().filter(|b| **b == b'\n').count() as u64;
        self.offset = from + end as u64;
        self.before = bytes[end.saturating_sub(64).max(start)..end].to_vec();
        Ok(bad)
    }
}
