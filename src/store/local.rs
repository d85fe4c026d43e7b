//! The embedded store: a directory on this machine, with the same conditional
//! semantics as S3.
//!
//! Keys are relative paths under the root. ETag = the first 32 hex digits of the
//! body's SHA-256. A create (`If-None-Match: *`) writes a temp file, fsyncs it
//! and hard-links it into place, which fails atomically if the key exists. A
//! replace or delete takes a per-key `flock` (so concurrent processes serialise),
//! checks the ETag, then renames (or unlinks) and fsyncs the directory.
//! Internal files live under `{root}/.leasectl-tmp/`, which listings hide.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use super::{
    GetOutput, Listing, ObjectMeta, ObjectRead, ObjectStore, PutCondition, StoreError,
    MAX_BODY_BYTES,
};

const INTERNAL_DIR: &str = ".leasectl-tmp";

/// A directory used as an object store. See the module docs for the atomicity rules.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root`; the directory must exist.
    ///
    /// Errors: `Invalid` when `root` is not an existing directory.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        if !root.is_dir() {
            return Err(StoreError::Invalid(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        Ok(Self { root })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, StoreError> {
        let rel = Path::new(key);
        let ok = !key.is_empty()
            && !key.ends_with('/')
            && rel.components().all(|c| matches!(c, Component::Normal(_)))
            && !key.starts_with(INTERNAL_DIR);
        if !ok {
            return Err(StoreError::Invalid(format!(
                "key {:?} is not a plain relative path",
                crate::text::sanitize(key)
            )));
        }
        Ok(self.root.join(rel))
    }

    fn internal(&self, sub: &str) -> Result<PathBuf, StoreError> {
        let p = self.root.join(INTERNAL_DIR).join(sub);
        fs::create_dir_all(&p).map_err(io_err)?;
        Ok(p)
    }

    /// Takes the per-key lock; dropped when the returned guard goes.
    fn lock_key(&self, key: &str) -> Result<Flock<File>, StoreError> {
        let dir = self.internal("locks")?;
        let name = hex::encode(&Sha256::digest(key.as_bytes())[..16]);
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(name))
            .map_err(io_err)?;
        Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| io_err(e.into()))
    }

    /// Writes `body` to a fresh temp file next to nothing else, fsynced.
    fn temp_file(&self, body: &[u8]) -> Result<PathBuf, StoreError> {
        let dir = self.internal("tmp")?;
        let name = format!("{}", rand::random::<u64>());
        let path = dir.join(name);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err)?;
        f.write_all(body).map_err(io_err)?;
        f.sync_all().map_err(io_err)?;
        Ok(path)
    }

    fn read_meta(&self, key: &str, path: &Path) -> Result<(ObjectMeta, Vec<u8>), StoreError> {
        let mut f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StoreError::NotFound(key.to_owned()))
            }
            Err(e) => return Err(io_err(e)),
        };
        let md = f.metadata().map_err(io_err)?;
        if md.is_dir() {
            return Err(StoreError::NotFound(key.to_owned()));
        }
        // The ETag covers the whole body, so hash it all, keeping only the cap.
        let mut hasher = Sha256::new();
        let mut kept = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(io_err)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            let room = (MAX_BODY_BYTES + 1).saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
        let etag = hex::encode(&hasher.finalize()[..16]);
        let last_modified = md.modified().ok().map(DateTime::<Utc>::from);
        Ok((
            ObjectMeta {
                key: key.to_owned(),
                etag: Some(etag),
                last_modified,
                size: md.len(),
            },
            kept,
        ))
    }

    fn current_etag(&self, key: &str, path: &Path) -> Result<Option<String>, StoreError> {
        match self.read_meta(key, path) {
            Ok((m, _)) => Ok(m.etag),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list_sync(&self, prefix: &str) -> Result<Listing, StoreError> {
        // Split the prefix into a directory part and a name filter.
        let (dir_part, name_filter) = match prefix.rfind('/') {
            Some(i) => (&prefix[..=i], &prefix[i + 1..]),
            None => ("", prefix),
        };
        let dir = if dir_part.is_empty() {
            self.root.clone()
        } else {
            self.path_of(dir_part.trim_end_matches('/'))?
        };
        let mut out = Listing::default();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_err(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not representable as a key
            };
            if !name.starts_with(name_filter) || (dir_part.is_empty() && name == INTERNAL_DIR) {
                continue;
            }
            let ft = entry.file_type().map_err(io_err)?;
            let key = format!("{dir_part}{name}");
            if ft.is_dir() {
                out.prefixes.push(format!("{key}/"));
            } else if ft.is_file() {
                let md = entry.metadata().map_err(io_err)?;
                out.objects.push(ObjectMeta {
                    key,
                    etag: None,
                    last_modified: md.modified().ok().map(DateTime::<Utc>::from),
                    size: md.len(),
                });
            }
        }
        out.prefixes.sort();
        out.objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn put_sync(
        &self,
        key: &str,
        body: &[u8],
        condition: &PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let path = self.path_of(key)?;
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err)?;
        }
        let tmp = self.temp_file(body)?;
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
                    let _g = self.lock_key(key)?;
                    match self.current_etag(key, &path)? {
                        None => return Err(StoreError::NotFound(key.to_owned())),
                        Some(have) if &have != want => return Err(StoreError::PreconditionFailed),
                        Some(_) => fs::rename(&tmp, &path).map_err(io_err)?,
                    }
                }
                PutCondition::None => {
                    let _g = self.lock_key(key)?;
                    fs::rename(&tmp, &path).map_err(io_err)?;
                }
            }
            sync_parent(&path)?;
            Ok(Some(hex::encode(&Sha256::digest(body)[..16])))
        })();
        let _ = fs::remove_file(&tmp); // a leftover link after rename/link is harmless to remove
        result
    }

    fn delete_sync(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let path = self.path_of(key)?;
        let _g = self.lock_key(key)?;
        if let Some(want) = if_match {
            match self.current_etag(key, &path)? {
                None => return Err(StoreError::NotFound(key.to_owned())),
                Some(have) if have != want => return Err(StoreError::PreconditionFailed),
                Some(_) => {}
            }
        }
        match fs::remove_file(&path) {
            Ok(()) => sync_parent(&path),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(e)),
        }
    }
}

fn sync_parent(path: &Path) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io_err)?;
    }
    Ok(())
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

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let me = self.clone();
        let prefix = prefix.to_owned();
        blocking(move || me.list_sync(&prefix)).await
    }

    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        let me = self.clone();
        let key = key.to_owned();
        let inm = if_none_match.map(str::to_owned);
        blocking(move || {
            let path = me.path_of(&key)?;
            let (meta, body) = me.read_meta(&key, &path)?;
            if inm.is_some() && meta.etag == inm {
                return Err(StoreError::NotModified);
            }
            Ok(GetOutput { meta, body })
        })
        .await
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
}
