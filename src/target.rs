//! TARGET URLs: `s3://bucket/path/` (an S3-compatible service) or `file:///dir/`
//! (the embedded local store).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::store::local::LocalStore;
use crate::store::s3::{S3Options, S3Store};
use crate::store::{ObjectStore, StoreError};

/// A parsed TARGET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `s3://bucket/prefix/`.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket: empty, or ending in `/`.
        prefix: String,
    },
    /// `file:///dir/`: the directory is the store's root; the prefix is empty.
    Local {
        /// Absolute directory path.
        dir: PathBuf,
    },
}

/// Why a TARGET could not be parsed (a usage error, exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad TARGET {url:?}: {why} (expected s3://bucket/path/ or file:///dir/)")]
pub struct TargetError {
    /// The URL as given (escaped).
    pub url: String,
    /// What is wrong with it.
    pub why: String,
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| TargetError {
            url: crate::text::sanitize(s),
            why: why.to_owned(),
        };
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(err("no bucket name"));
            }
            if !bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c))
                || bucket.len() > 63
            {
                return Err(err("not a valid bucket name"));
            }
            if path.chars().any(|c| c.is_control()) {
                return Err(err("control characters in the path"));
            }
            // The path is kept as given: `s3://b//x/` names prefix `/x/`, a
            // different one from `x/`.
            let mut prefix = path.to_owned();
            if !prefix.is_empty() && !prefix.ends_with('/') {
                prefix.push('/');
            }
            return Ok(Target::S3 {
                bucket: bucket.to_owned(),
                prefix,
            });
        }
        if s.starts_with("file:") {
            let u = url::Url::parse(s).map_err(|e| err(&e.to_string()))?;
            if u.host_str()
                .is_some_and(|h| !h.is_empty() && h != "localhost")
            {
                return Err(err("file URLs must name a local path (file:///dir/)"));
            }
            let dir = u
                .to_file_path()
                .map_err(|_| err("not an absolute local path"))?;
            if dir.to_string_lossy().chars().any(char::is_control) {
                return Err(err("control characters in the path"));
            }
            return Ok(Target::Local { dir });
        }
        Err(err("unknown scheme"))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Target::Local { dir } => {
                let d = dir.display().to_string();
                let slash = if d.ends_with('/') { "" } else { "/" };
                write!(f, "file://{d}{slash}")
            }
        }
    }
}

impl Target {
    /// The key prefix the target names inside its store (empty or ending in `/`).
    pub fn prefix(&self) -> &str {
        match self {
            Target::S3 { prefix, .. } => prefix,
            Target::Local { .. } => "",
        }
    }

    /// The bucket, for S3 targets.
    pub fn bucket(&self) -> Option<&str> {
        match self {
            Target::S3 { bucket, .. } => Some(bucket),
            Target::Local { .. } => None,
        }
    }
}

/// Opens stores for targets, sharing one AWS configuration between S3 buckets.
pub struct Connector {
    opts: S3Options,
    config: tokio::sync::OnceCell<aws_config::SdkConfig>,
}

impl Connector {
    /// A connector using `opts` for every S3 target.
    pub fn new(opts: S3Options) -> Self {
        Self {
            opts,
            config: tokio::sync::OnceCell::new(),
        }
    }

    /// Opens the (writable) store a target lives in. Callers that must not
    /// write wrap it in [`crate::store::ReadOnly`] at once.
    ///
    /// Errors: `Invalid` for a local directory that does not exist.
    pub async fn open(&self, target: &Target) -> Result<Arc<dyn ObjectStore>, StoreError> {
        match target {
            Target::Local { dir } => Ok(Arc::new(LocalStore::open(dir.clone())?)),
            Target::S3 { bucket, .. } => {
                let cfg = self
                    .config
                    .get_or_init(|| crate::store::s3::shared_config(&self.opts))
                    .await;
                Ok(Arc::new(S3Store::with_config(cfg, bucket, &self.opts)))
            }
        }
    }

    /// Where a target's requests go, for display (`file:///dir/` or the endpoint).
    pub async fn endpoint(&self, target: &Target) -> String {
        match target {
            Target::Local { .. } => "local".to_owned(),
            Target::S3 { .. } => {
                let cfg = self
                    .config
                    .get_or_init(|| crate::store::s3::shared_config(&self.opts))
                    .await;
                cfg.endpoint_url()
                    .map(|e| crate::store::s3::redact_url(e).0)
                    .unwrap_or_else(|| "AWS S3".to_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(
            "s3://b/x/y".parse::<Target>().unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "x/y/".into()
            }
        );
        assert_eq!(
            "s3://b".parse::<Target>().unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "".into()
            }
        );
        assert_eq!(
            "file:///tmp/a/".parse::<Target>().unwrap(),
            Target::Local {
                dir: "/tmp/a/".into()
            }
        );
        for bad in [
            "http://x/",
            "s3:///x",
            "s3://Bad_Bucket!/",
            "file://host/x",
            "/tmp/x",
            "",
        ] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }
}
