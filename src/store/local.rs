//! The embedded store: a directory on this machine, with the same conditional
//! semantics as S3.
//!
//! Keys are relative paths under the root. ETag = the first 32 hex digits of the
//! body's SHA-256. A create (`If-None-Match: *`) writes a temp file, fsyncs it
//! and hard-links it into place, which fails atomically if the key exists. A
//! replace or delete takes a per-key `flock` (so concurrent processes serialise),
//! checks the ETag, then renames (or unlinks) and fsyncs the directory.
//!
//! The lock file and temp files live **beside the object** (`.NAME.leasectl-lock`,
//! `.NAME.leasectl-tmp-*`): two stores rooted at different levels of the same
//! tree (`file:///d/` and `file:///d/db1/`) then lock the same file for the
//! same object, and a rename never crosses a filesystem. Listings hide them.
//!
//! Every file the store opens is opened without following a symlink at the
//! last component and without blocking (`O_NOFOLLOW | O_NONBLOCK`), then checked
//! with `fstat` to be a regular file, and read only up to the 64 KiB cap plus
//! one byte: a `LEASE` that is a symlink, FIFO, device or socket is reported
//! as a malformed object ("not a regular file: FIFO") and never read, so no
//! read can hang or grow without bound.
//!
//! The layout follows S3's: a directory is a prefix, never an object, so a
//! directory named `LEASE` is the prefix `LEASE/` (beside which the key
//! `LEASE` is absent). Links are never followed below the root: a symlink to
//! a directory is listed as a prefix whose LEASE reads as malformed ("the
//! prefix directory is a symlink"), and no write goes through one. A
//! directory whose name is not UTF-8 cannot be a key: a listing returns it
//! in [`Listing::unlisted`](super::Listing::unlisted), never drops it.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use super::{
    GetOutput, Listing, ObjectMeta, ObjectRead, ObjectStore, PutCondition, StoreError,
    MAX_BODY_BYTES,
};

/// Marks the store's own files (locks, temp files) next to objects.
const INTERNAL_MARK: &str = ".leasectl-";

/// Whether a directory entry is one of the store's own files.
fn is_internal_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(INTERNAL_MARK)
}

/// How long a replace or delete waits for another process's per-key lock
/// before giving up (a holder keeps it only for one check and one rename).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// What a path holds, in the words of a problem sentence: `regular file`,
/// `symlink`, `FIFO`, `character device`, `block device`, `socket`, `directory`.
pub fn kind_name(ft: &fs::FileType) -> &'static str {
    if ft.is_file() {
        "regular file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_socket() {
        "socket"
    } else {
        "unknown file type"
    }
}

/// The result of [`open_regular`].
#[derive(Debug)]
pub enum Opened {
    /// A regular file, open for reading, with its `fstat` metadata.
    Regular(File, Metadata),
    /// Something else is at the path; it was not opened (or was closed again
    /// unread). The kind is a word of [`kind_name`]; the metadata is `lstat`'s.
    Other(&'static str, Metadata),
}

/// Opens `path` for reading the safe way: a symlink at the last component is
/// not followed, a FIFO or device does not block the open, and only a regular
/// file (checked with `fstat` on the open descriptor, so a swap after the
/// check is caught) is returned open. Anything else is [`Opened::Other`],
/// never read.
///
/// Errors: the open's or `lstat`'s I/O error (`NotFound` when nothing is there).
pub fn open_regular(path: &Path) -> std::io::Result<Opened> {
    // Look first: a device or FIFO is never opened at all (opening some
    // devices has effects of its own).
    let lmd = fs::symlink_metadata(path)?;
    if !lmd.file_type().is_file() {
        return Ok(Opened::Other(kind_name(&lmd.file_type()), lmd));
    }
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        // Replaced between the look and the open: say what is there now.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => {
            let md = fs::symlink_metadata(path)?;
            return Ok(Opened::Other(kind_name(&md.file_type()), md));
        }
        Err(e) => return Err(e),
    };
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Ok(Opened::Other(kind_name(&md.file_type()), md));
    }
    Ok(Opened::Regular(f, md))
}

/// Reads at most `cap + 1` bytes of `f` (so a longer file is recognisable by
/// the length read), whatever size the file reports.
pub fn read_capped(f: &mut File, cap: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    f.take(cap as u64 + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// The problem sentence for a path that is not a regular file.
fn not_regular(kind: &str) -> String {
    if kind == "symlink" {
        "not a regular file: symlink (links in a store are not followed)".to_owned()
    } else {
        format!("not a regular file: {kind}")
    }
}

/// An ETag from a file's identity: changes on every write, rename, chmod or
/// `touch` (ctime, with nanoseconds, cannot be set back by a user), and
/// differs between files. Prefixed `m` so it never equals a content ETag.
fn identity_etag(kind: &str, md: &Metadata) -> String {
    let id = format!(
        "{kind}:{}:{}:{}:{}.{}:{}.{}",
        md.dev(),
        md.ino(),
        md.len(),
        md.mtime(),
        md.mtime_nsec(),
        md.ctime(),
        md.ctime_nsec()
    );
    format!("m{}", hex::encode(&Sha256::digest(id.as_bytes())[..15]))
}

/// A directory used as an object store. See the module docs for the atomicity rules.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root`; the directory must exist.
    ///
    /// Errors: `Invalid` when `root` does not exist ("does not exist"), is not
    /// a directory, or cannot be looked at (the I/O error).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        let shown = || crate::text::sanitize(&root.display().to_string());
        // Without a trailing `/`, so that a file is said to be one.
        let plain: PathBuf = root.components().collect();
        match fs::metadata(&plain) {
            Ok(md) if md.is_dir() => Ok(Self { root }),
            Ok(md) => Err(StoreError::Invalid(format!(
                "{} is not a directory (it is a {})",
                shown(),
                kind_name(&md.file_type())
            ))),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(StoreError::Invalid(format!(
                "{} does not exist (a file:// store is a directory that must exist)",
                shown()
            ))),
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(StoreError::Invalid(format!(
                "{} is not a directory (a part of its path is a file)",
                shown()
            ))),
            Err(e) => Err(StoreError::Invalid(format!("cannot open {}: {e}", shown()))),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The error for a store whose own directory went away (moved or
    /// removed while leasectl runs): nothing in it can be listed or read, and
    /// a missing key there is not "absent". `None` while the root exists.
    fn root_gone(&self) -> Option<StoreError> {
        (!self.root.is_dir()).then(|| {
            StoreError::Invalid(format!(
                "{} does not exist any more (moved or removed while leasectl runs): \
                 nothing in it can be listed or read",
                crate::text::sanitize(&self.root.display().to_string())
            ))
        })
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, StoreError> {
        let rel = Path::new(key);
        let ok = plain_relative(key)
            && !rel
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_internal_name);
        if !ok {
            return Err(StoreError::Invalid(format!(
                "key {} is not a plain relative path",
                crate::text::quote_shown(&crate::text::sanitize(key))
            )));
        }
        Ok(self.root.join(rel))
    }

    /// The directory of the prefix `dir_part` (empty, or ending in `/`). Unlike
    /// a key's last component, a directory may be one of the store's own
    /// (`.leasectl-probe/`, where the probe's scratch keys live).
    fn dir_of(&self, dir_part: &str) -> Result<PathBuf, StoreError> {
        let rel = dir_part.trim_end_matches('/');
        if rel.is_empty() {
            return Ok(self.root.clone());
        }
        if !plain_relative(rel) {
            return Err(StoreError::Invalid(format!(
                "prefix {} is not a plain relative path",
                crate::text::quote_shown(&crate::text::sanitize(dir_part))
            )));
        }
        Ok(self.root.join(rel))
    }

    /// The first directory on the way from the root to `rel` (its last
    /// component included only when `include_last`) that is a symlink: its
    /// prefix (`a/b/`) and `lstat` metadata. Links below the root are never
    /// followed. `None` also when a component does not exist (the operation
    /// then finds nothing there).
    fn symlinked_dir(&self, rel: &Path, include_last: bool) -> Option<(String, Metadata)> {
        let parts: Vec<_> = rel.components().collect();
        let upto = if include_last {
            parts.len()
        } else {
            parts.len().saturating_sub(1)
        };
        let mut path = self.root.clone();
        let mut prefix = String::new();
        for c in &parts[..upto] {
            path.push(c);
            prefix.push_str(&c.as_os_str().to_string_lossy());
            prefix.push('/');
            match fs::symlink_metadata(&path) {
                Ok(md) if md.file_type().is_symlink() => return Some((prefix, md)),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Refuses a write to `key` (at `path`) that would go through a symlinked
    /// directory or onto a directory (a prefix of that name).
    fn check_writable(&self, key: &str, path: &Path) -> Result<(), StoreError> {
        if let Some((dir, _)) = self.symlinked_dir(Path::new(key), false) {
            return Err(StoreError::Invalid(format!(
                "the prefix directory {} is a symlink: links in a store are not followed, \
                 so nothing was written",
                crate::text::sanitize(&dir)
            )));
        }
        if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            return Err(StoreError::Invalid(format!(
                "{0} is a directory (the prefix {0}/): a local store cannot hold an object \
                 and a prefix of one name, so nothing was written; move the directory away",
                crate::text::sanitize(key)
            )));
        }
        Ok(())
    }

    /// Takes the per-key lock (a `flock` on `.NAME.leasectl-lock` beside the
    /// object); released when the guard is dropped.
    ///
    /// A delete removes the lock file too, so the lock taken is checked to be
    /// on the file that is still at that path (else it is taken again): two
    /// processes can never hold locks on two different files for one key.
    fn lock_key(&self, path: &Path) -> Result<Flock<File>, StoreError> {
        let lock_path = sibling(path, "leasectl-lock");
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            // A lock file that is a device or FIFO is never opened.
            if let Ok(m) = fs::symlink_metadata(&lock_path) {
                if !m.file_type().is_file() {
                    return Err(lock_not_regular(&lock_path, kind_name(&m.file_type())));
                }
            }
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&lock_path)
                .map_err(|e| match e.raw_os_error() {
                    Some(libc::ELOOP | libc::ENXIO) => {
                        let kind = fs::symlink_metadata(&lock_path)
                            .map(|m| kind_name(&m.file_type()))
                            .unwrap_or("symlink");
                        lock_not_regular(&lock_path, kind)
                    }
                    _ => io_err(e),
                })?;
            let md = f.metadata().map_err(io_err)?;
            if !md.file_type().is_file() {
                return Err(lock_not_regular(&lock_path, kind_name(&md.file_type())));
            }
            // A bounded wait: the holder keeps the lock for one check and one
            // rename; a process holding it longer is not one of ours.
            let mut pause = Duration::from_millis(1);
            let held = loop {
                match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                    Ok(h) => break h,
                    Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                        if Instant::now() >= deadline {
                            return Err(StoreError::Invalid(format!(
                                "another process has held the lock file {} for over {} s; \
                                 nothing was written",
                                crate::text::sanitize(&lock_path.display().to_string()),
                                LOCK_WAIT.as_secs()
                            )));
                        }
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_millis(50));
                        f = back;
                    }
                    Err((_, e)) => return Err(io_err(e.into())),
                }
            };
            let ours = held.metadata().map_err(io_err)?;
            match fs::symlink_metadata(&lock_path) {
                Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => return Ok(held),
                _ => continue, // removed or replaced while we waited: take the new one
            }
        }
    }

    /// Writes `body` to a fresh temp file beside `path`, fsynced.
    fn temp_file(&self, path: &Path, body: &[u8]) -> Result<PathBuf, StoreError> {
        let tmp = sibling(
            path,
            &format!("leasectl-tmp-{:016x}", rand::random::<u64>()),
        );
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err)?;
        // A write that fails (ENOSPC, EIO) leaves nothing behind.
        if let Err(e) = f.write_all(body).and_then(|()| f.sync_all()) {
            drop(f);
            let _ = fs::remove_file(&tmp);
            return Err(io_err(e));
        }
        Ok(tmp)
    }

    fn read_meta(&self, key: &str, path: &Path) -> Result<GetOutput, StoreError> {
        if let Some((dir, md)) = self.symlinked_dir(Path::new(key), false) {
            // Reading through the link would show a lease from elsewhere.
            return Ok(GetOutput {
                meta: ObjectMeta {
                    key: key.to_owned(),
                    etag: Some(identity_etag("symlink", &md)),
                    last_modified: md.modified().ok().map(DateTime::<Utc>::from),
                    size: 0,
                },
                body: Vec::new(),
                problem: Some(format!(
                    "the prefix directory {} is a symlink (links in a store are not followed)",
                    crate::text::sanitize(&dir)
                )),
                links: None,
            });
        }
        let (mut f, md) = match open_regular(path) {
            Ok(Opened::Regular(f, md)) => (f, md),
            // A directory is a prefix, not an object (as on S3, where `LEASE`
            // and `LEASE/LEASE` are two keys): no object at this key.
            Ok(Opened::Other("directory", _)) => return Err(StoreError::NotFound(key.to_owned())),
            Ok(Opened::Other(kind, md)) => {
                // Something that is not an object: malformed, never read. Its
                // ETag is its identity, so a takeover can still name it.
                return Ok(GetOutput {
                    meta: ObjectMeta {
                        key: key.to_owned(),
                        etag: Some(identity_etag(kind, &md)),
                        last_modified: md.modified().ok().map(DateTime::<Utc>::from),
                        size: 0,
                    },
                    body: Vec::new(),
                    problem: Some(not_regular(kind)),
                    links: None,
                });
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(self
                    .root_gone()
                    .unwrap_or_else(|| StoreError::NotFound(key.to_owned())))
            }
            Err(e) => return Err(io_err(e)),
        };
        // At most the cap plus one byte, whatever size the file reports (it
        // may grow while read).
        let kept = read_capped(&mut f, MAX_BODY_BYTES).map_err(io_err)?;
        let etag = if md.len() > MAX_BODY_BYTES as u64 || kept.len() > MAX_BODY_BYTES {
            // Over the cap the object is malformed whatever it holds: the ETag
            // comes from the file's identity instead of hashing gigabytes on
            // every refresh. It includes ctime, so an in-place rewrite changes
            // it even when mtime is set back.
            identity_etag("regular file", &md)
        } else {
            // The ETag covers the whole body.
            hex::encode(&Sha256::digest(&kept)[..16])
        };
        let last_modified = md.modified().ok().map(DateTime::<Utc>::from);
        Ok(GetOutput {
            meta: ObjectMeta {
                key: key.to_owned(),
                etag: Some(etag),
                last_modified,
                size: md.len().max(kept.len() as u64),
            },
            body: kept,
            problem: None,
            links: Some(md.nlink()),
        })
    }

    fn current_etag(&self, key: &str, path: &Path) -> Result<Option<String>, StoreError> {
        match self.read_meta(key, path) {
            Ok(out) => Ok(out.meta.etag),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`ObjectRead::sample_keys`]: the directories under `prefix` listed
    /// breadth first ([`LocalStore::list_sync`]), until
    /// [`super::SAMPLE_KEYS`] entries (keys and directories) were seen.
    fn sample_keys_sync(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        let mut seen = 0usize;
        let mut queue = std::collections::VecDeque::from([prefix.to_owned()]);
        while let Some(p) = queue.pop_front() {
            let listing = self.list_sync(&p)?;
            for o in listing.objects {
                seen += 1;
                keys.push(o.key);
            }
            seen += listing.prefixes.len();
            queue.extend(listing.prefixes);
            if seen >= super::SAMPLE_KEYS {
                break;
            }
        }
        keys.truncate(super::SAMPLE_KEYS);
        Ok(keys)
    }

    fn list_sync(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.list_bounded(prefix, super::MAX_LIST_ENTRIES)
    }

    /// [`LocalStore::list_sync`], reading at most `max` directory entries:
    /// a directory whose reading does not end (a FUSE file system's) is an
    /// incomplete listing, an error, not a loop.
    fn list_bounded(&self, prefix: &str, max: usize) -> Result<Listing, StoreError> {
        use std::os::unix::ffi::OsStrExt;
        // Split the prefix into a directory part and a name filter.
        let (dir_part, name_filter) = match prefix.rfind('/') {
            Some(i) => (&prefix[..=i], &prefix[i + 1..]),
            None => ("", prefix),
        };
        let dir = self.dir_of(dir_part)?;
        let mut out = Listing::default();
        // Nothing is listed through a link (its LEASE reads as malformed).
        let rel = Path::new(dir_part.trim_end_matches('/'));
        if !dir_part.is_empty() && self.symlinked_dir(rel, true).is_some() {
            return Ok(out);
        }
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            // A prefix with nothing under it is an empty listing, as on S3;
            // a store whose own directory went away is not a store any more.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return match self.root_gone() {
                    Some(gone) => Err(gone),
                    None => Ok(out),
                }
            }
            Err(e) => return Err(io_err(e)),
        };
        for (read, entry) in entries.enumerate() {
            if read >= max {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" was stopped after {read} directory entries (at \
                     most {max} are read) with more to read; the listing is incomplete",
                    crate::text::sanitize(prefix)
                )));
            }
            let entry = entry.map_err(io_err)?;
            let os_name = entry.file_name();
            if !os_name.as_bytes().starts_with(name_filter.as_bytes()) {
                continue;
            }
            let ft = entry.file_type().map_err(io_err)?;
            let Some(name) = os_name.to_str() else {
                // Not a key, but never dropped: a directory (a prefix) is
                // reported; a file cannot be a LEASE (see `Listing::unlisted`).
                if ft.is_dir() || (ft.is_symlink() && entry.path().is_dir()) {
                    let mut raw = dir_part.as_bytes().to_vec();
                    raw.extend_from_slice(os_name.as_bytes());
                    raw.push(b'/');
                    out.unlisted
                        .push(super::Unlisted::not_utf8(&raw, "directory"));
                }
                continue;
            };
            if is_internal_name(name) {
                continue;
            }
            let key = format!("{dir_part}{name}");
            // A symlink named LEASE is the object (read as malformed); any
            // other link to a directory is a prefix (whose LEASE reads as
            // malformed); other links are not objects of the store.
            let is_prefix =
                ft.is_dir() || (ft.is_symlink() && name != "LEASE" && entry.path().is_dir());
            if is_prefix {
                out.prefixes.push(format!("{key}/"));
            } else if ft.is_file() || name == "LEASE" {
                let md = match entry.metadata() {
                    Ok(md) => md,
                    // Removed since the directory was read: not there.
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_err(e)),
                };
                out.objects.push(ObjectMeta {
                    key,
                    etag: None,
                    last_modified: md.modified().ok().map(DateTime::<Utc>::from),
                    size: if ft.is_file() { md.len() } else { 0 },
                });
            }
        }
        out.prefixes.sort();
        out.objects.sort_by(|a, b| a.key.cmp(&b.key));
        out.unlisted.sort_by(|a, b| a.problem.cmp(&b.problem));
        Ok(out)
    }

    fn put_sync(
        &self,
        key: &str,
        body: &[u8],
        condition: &PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let path = self.path_of(key)?;
        self.check_writable(key, &path)?;
        // An empty `.leasectl-probe/` is removed by the delete of its last
        // key (`delete_sync`): if it goes between the two steps, make it again.
        let mut tries = 0;
        let tmp = loop {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(io_err)?;
            }
            match self.temp_file(&path, body) {
                Err(StoreError::Invalid(_))
                    if tries < 3 && !path.parent().is_some_and(Path::is_dir) =>
                {
                    tries += 1;
                }
                r => break r?,
            }
        };
        let result = (|| {
            match condition {
                PutCondition::IfNoneMatch => match fs::hard_link(&tmp, &path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                        return Err(StoreError::PreconditionFailed)
                    }
                    Err(e) => return Err(io_err(e)),
                },
                PutCondition::IfMatch(want) => {
                    let _g = self.lock_key(&path)?;
                    match self.current_etag(key, &path)? {
                        None => return Err(StoreError::NotFound(key.to_owned())),
                        Some(have) if &have != want => return Err(StoreError::PreconditionFailed),
                        Some(_) => fs::rename(&tmp, &path).map_err(io_err)?,
                    }
                }
                PutCondition::None => {
                    let _g = self.lock_key(&path)?;
                    fs::rename(&tmp, &path).map_err(io_err)?;
                }
            }
            sync_parent(&path)?;
            // Over the cap a read reports an identity-based ETag (see
            // `read_meta`): report none here, so a caller reads it back.
            Ok((body.len() <= MAX_BODY_BYTES).then(|| hex::encode(&Sha256::digest(body)[..16])))
        })();
        let _ = fs::remove_file(&tmp); // a leftover link after rename/link is harmless to remove
        result
    }

    fn delete_sync(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let path = self.path_of(key)?;
        if !path.parent().is_some_and(Path::is_dir) {
            return match if_match {
                Some(_) => Err(StoreError::NotFound(key.to_owned())),
                None => Ok(()),
            };
        }
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            // A prefix, not an object: there is no object to delete.
            return match if_match {
                Some(_) => Err(StoreError::NotFound(key.to_owned())),
                None => Ok(()),
            };
        }
        // The directory can go between the check above and the lock (a
        // concurrent delete of the last scratch key removes `.leasectl-probe/`):
        // then the key is gone too.
        let gone = |e: StoreError| {
            if path.parent().is_some_and(Path::is_dir) {
                Err(e)
            } else if if_match.is_some() {
                Err(StoreError::NotFound(key.to_owned()))
            } else {
                Ok(())
            }
        };
        if let Err(e) = self.check_writable(key, &path) {
            return gone(e);
        }
        let _g = match self.lock_key(&path) {
            Ok(g) => g,
            Err(e) => return gone(e),
        };
        if let Some(want) = if_match {
            match self.current_etag(key, &path)? {
                None => return Err(StoreError::NotFound(key.to_owned())),
                Some(have) if have != want => return Err(StoreError::PreconditionFailed),
                Some(_) => {}
            }
        }
        let r = match fs::remove_file(&path) {
            Ok(()) => sync_parent(&path),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(e)),
        };
        // The object is gone: its lock file goes too (still holding the lock;
        // see `lock_key` for why that is safe).
        let _ = fs::remove_file(sibling(&path, "leasectl-lock"));
        // The probe's scratch directory goes with its last key (a prefix on
        // S3 exists only while keys do). `remove_dir` refuses a directory
        // that is not empty: another probe's key keeps it.
        if let Some(parent) = path.parent() {
            if parent.file_name().is_some_and(|n| n == SCRATCH_DIR) {
                let _ = fs::remove_dir(parent);
            }
        }
        r
    }
}

/// The directory of the probe's scratch keys (`{prefix}.leasectl-probe/`),
/// removed when its last key is deleted.
const SCRATCH_DIR: &str = ".leasectl-probe";

/// Whether `key` is a relative path of plain components: not empty, no
/// leading or trailing `/`, no empty, `.` or `..` segment.
fn plain_relative(key: &str) -> bool {
    !key.is_empty()
        && !key.ends_with('/')
        && !key.starts_with('/')
        && !key.contains("//")
        && Path::new(key)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// `.NAME.SUFFIX` in the same directory as `path`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{suffix}"))
}

fn sync_parent(path: &Path) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io_err)?;
    }
    Ok(())
}

fn lock_not_regular(lock_path: &Path, kind: &str) -> StoreError {
    StoreError::Invalid(format!(
        "the lock file {} is not a regular file ({kind}); nothing was written",
        crate::text::sanitize(&lock_path.display().to_string())
    ))
}

fn io_err(e: std::io::Error) -> StoreError {
    StoreError::Invalid(format!("local store I/O error: {e}"))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Invalid(format!("local store task failed: {e}")))?
}

#[async_trait]
impl ObjectRead for LocalStore {
    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }
    fn has_clock(&self) -> bool {
        false
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let me = self.clone();
        let prefix = prefix.to_owned();
        blocking(move || me.list_sync(&prefix)).await
    }

    /// A directory has no pages: its whole listing is one.
    async fn list_page(
        &self,
        prefix: &str,
        _token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.list(prefix).await.map(|l| (l, None))
    }

    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let me = self.clone();
        let prefix = prefix.to_owned();
        blocking(move || me.sample_keys_sync(&prefix)).await
    }

    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        let me = self.clone();
        let key = key.to_owned();
        let inm = if_none_match.map(str::to_owned);
        blocking(move || {
            let path = me.path_of(&key)?;
            let out = me.read_meta(&key, &path)?;
            if inm.is_some() && out.meta.etag == inm {
                return Err(StoreError::NotModified);
            }
            Ok(out)
        })
        .await
    }

    fn unavailable(&self) -> Option<StoreError> {
        self.root_gone()
    }

    /// No clock of its own: judged by this host's.
    fn server_offset(&self) -> Option<crate::clock::ServerOffset> {
        None
    }

    fn server_clock_problem(&self) -> Option<String> {
        None
    }

    fn endpoint_info(&self) -> super::EndpointInfo {
        super::EndpointInfo::default()
    }

    /// A directory keeps one version of a file.
    async fn list_versions(&self, key: &str) -> Result<super::KeyVersions, StoreError> {
        Err(super::no_versions(&self.describe(), key))
    }

    async fn get_version(&self, key: &str, _version_id: &str) -> Result<GetOutput, StoreError> {
        Err(super::no_versions(&self.describe(), key))
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let me = self.clone();
        let key = key.to_owned();
        blocking(move || me.put_sync(&key, &body, &condition)).await
    }

    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let me = self.clone();
        let key = key.to_owned();
        let im = if_match.map(str::to_owned);
        blocking(move || me.delete_sync(&key, im.as_deref())).await
    }

    /// Conditional DELETE is checked under the key's lock: honoured.
    fn capabilities(&self) -> super::Capabilities {
        super::Capabilities {
            conditional_delete: super::DeleteSupport::Honoured,
            ..Default::default()
        }
    }

    /// One way to send `If-Match`, under the key's lock: nothing to learn.
    fn set_capabilities(&self, _caps: super::Capabilities) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_longer_than_the_bound_is_an_incomplete_listing() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..11 {
            fs::create_dir(dir.path().join(format!("p{i}"))).unwrap();
        }
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.list_bounded("", 11).unwrap().prefixes.len(), 11);
        let e = store.list_bounded("", 10).unwrap_err().to_string();
        assert!(
            e.contains("stopped after 10 directory entries") && e.contains("incomplete"),
            "{e}"
        );
    }
}
