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
#[error("bad TARGET {url}: {why}")]
pub struct TargetError {
    /// The URL as given (escaped).
    pub url: String,
    /// What is wrong with it, and the fix where there is one.
    pub why: String,
}

/// Characters written percent-encoded in a TARGET's path: `%` itself, and the
/// two that would otherwise start a query or a fragment.
const PATH_ESCAPED: [(char, &str); 3] = [('%', "%25"), ('#', "%23"), ('?', "%3F")];

/// A path written as a TARGET path: `%`, `#` and `?` percent-encoded, and
/// every character that is never shown as itself ([`crate::text::is_unsafe_char`]:
/// control characters such as a newline, `%0A`, invisible ones) as the
/// percent-escapes of its UTF-8 bytes; the rest as is. Parsing the result
/// gives the same path back, and the result can be copied as a TARGET.
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match PATH_ESCAPED.iter().find(|(e, _)| *e == c) {
            Some((_, code)) => out.push_str(code),
            None if crate::text::is_unsafe_char(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            None => out.push(c),
        }
    }
    out
}

/// Decodes the path part of a TARGET exactly: `%XX` escapes become their
/// bytes (which must form UTF-8), everything else is kept as written. A `#`
/// or `?` would start a fragment or a query, which a TARGET may not have: the
/// error says how to write it (`%23`, `%3F`). A control character written as
/// such is refused, with its escape (`%0A`); percent-encoded it is part of
/// the name (`s3://b/nl%0Aname/`), except NUL, which no name can hold.
///
/// `whole` is the URL as given, for the suggestion.
fn decode_path(path: &str, whole: &str) -> Result<String, String> {
    if let Some(c) = path.chars().find(|c| *c == '#' || *c == '?') {
        let (what, code) = if c == '#' {
            ("a fragment", "%23")
        } else {
            ("a query", "%3F")
        };
        // The suggestion: the same URL with `#` and `?` encoded (a `%` is left
        // alone: it may already be an escape).
        let fixed: String = whole
            .chars()
            .map(|c| match c {
                '#' => "%23".to_owned(),
                '?' => "%3F".to_owned(),
                c => c.to_string(),
            })
            .collect();
        return Err(format!(
            "`{c}` starts {what}, which a TARGET cannot have; if `{c}` is part of the path, \
             write it as {code}: {}",
            crate::text::sanitize(&fixed)
        ));
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    return Err(
                        "a `%` must start an escape of two hex digits; write a literal `%` as %25"
                            .to_owned(),
                    )
                }
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let decoded = String::from_utf8(out)
        .map_err(|_| "the percent-escapes in the path do not form UTF-8 text".to_owned())?;
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        let mut buf = [0u8; 4];
        let code: String = c
            .encode_utf8(&mut buf)
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect();
        return Err(format!(
            "a control character ({}) in the path; a name that holds one is written \
             percent-encoded ({code})",
            crate::text::sanitize(&c.to_string())
        ));
    }
    if decoded.contains('\0') {
        return Err("a NUL (%00) in the path: no key or file name holds one".to_owned());
    }
    Ok(decoded)
}

impl FromStr for Target {
    type Err = TargetError;

    /// Parses a TARGET exactly: `s3://BUCKET/PATH` or `file://[localhost]/DIR`.
    /// The path is percent-decoded; `#`, `?` and a stray `%` are refused with
    /// the fix; a `file://` path must be absolute, without `.` or `..`
    /// segments. `Display` writes the same target back.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Credentials written into a TARGET are never echoed, and refused.
        let raw = s;
        let redacted = redact_target(raw);
        let s = redacted.as_str();
        let err = |why: &str| TargetError {
            url: crate::text::sanitize(s),
            why: format!("{why} (expected s3://bucket/path/ or file:///dir/)"),
        };
        let bad_path = |why: String| TargetError {
            url: crate::text::sanitize(s),
            why,
        };
        if redacted != raw {
            return Err(bad_path(
                "a TARGET cannot carry credentials (user information before `@`): give them as \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or with --profile, and the TARGET \
                 as s3://bucket/prefix/ or file:///dir/"
                    .to_owned(),
            ));
        }
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(err("no bucket name"));
            }
            if bucket.contains(['#', '?']) {
                return Err(bad_path(decode_path(bucket, s).unwrap_err()));
            }
            if !bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c))
                || bucket.len() > 63
            {
                return Err(err("not a valid bucket name"));
            }
            // The path is kept as given (after decoding): `s3://b//x/` names
            // prefix `/x/`, a different one from `x/`.
            let mut prefix = decode_path(path, s).map_err(bad_path)?;
            if !prefix.is_empty() && !prefix.ends_with('/') {
                prefix.push('/');
            }
            return Ok(Target::S3 {
                bucket: bucket.to_owned(),
                prefix,
            });
        }
        if let Some(rest) = s.strip_prefix("file:") {
            let Some(rest) = rest.strip_prefix("//") else {
                return Err(err("a file URL starts with file:// (file:///dir/)"));
            };
            let slash = rest.find('/').unwrap_or(rest.len());
            let (host, path) = rest.split_at(slash);
            if !host.is_empty() && host != "localhost" {
                if host.contains(['#', '?']) {
                    return Err(bad_path(decode_path(host, s).unwrap_err()));
                }
                return Err(err("file URLs must name a local path (file:///dir/)"));
            }
            if path.is_empty() {
                return Err(err("not an absolute local path"));
            }
            let dir = decode_path(path, s).map_err(bad_path)?;
            if dir.split('/').any(|seg| seg == "." || seg == "..") {
                return Err(bad_path(
                    "the path has a `.` or `..` segment; write the directory's path without them"
                        .to_owned(),
                ));
            }
            return Ok(Target::Local {
                dir: PathBuf::from(dir),
            });
        }
        Err(match unknown_scheme_hint(s) {
            Some(h) => bad_path(h),
            None => err("unknown scheme"),
        })
    }
}

/// `s` with any user information (`user:password@`) before its host shown as
/// `***`, also when a `/` in the secret (AWS secret keys often hold one) ends
/// the authority early: `s3://AKIA:abc/def@bucket/p/`.
fn redact_target(s: &str) -> String {
    let (shown, found) = crate::store::s3::redact_userinfo(s);
    if !found.is_empty() {
        return shown;
    }
    let Some(i) = s.find("://") else { return shown };
    let (scheme, rest) = s.split_at(i + 3);
    let end = rest.find('/').unwrap_or(rest.len());
    match rest.rfind('@') {
        Some(at) if rest[..end].contains(':') && at > end => format!("{scheme}***{}", &rest[at..]),
        _ => shown,
    }
}

/// The names of the command line's subcommands (hidden ones included), handed
/// in by the front end before any TARGET is parsed
/// ([`set_command_names`]): a misspelt TARGET may have meant one of them.
static COMMAND_NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Hands in the names of every subcommand, so that a TARGET that is a typo of
/// one gets "did you mean `leasectl NAME`?". The first call wins; without one,
/// no such hint is given.
pub fn set_command_names(names: Vec<String>) {
    let _ = COMMAND_NAMES.set(names);
}

fn subcommands() -> &'static [String] {
    COMMAND_NAMES.get().map(Vec::as_slice).unwrap_or(&[])
}

/// A hint for a TARGET with no known scheme: a subcommand with a typo, a bare
/// path, an HTTP(S) endpoint given where the bucket goes.
fn unknown_scheme_hint(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(
            "that is an endpoint: give it with --endpoint-url, and the TARGET as s3://bucket/prefix/ \
             (e.g. leasectl --endpoint-url https://minio:9000 --path-style s3://backups/)"
                .to_owned(),
        );
    }
    if s.starts_with('/') || s.starts_with("./") || s.starts_with("../") || s.starts_with('~') {
        let abs = std::path::absolute(s)
            .ok()
            .filter(|_| !s.starts_with('~'))
            .map(|p| format!("file://{}/", p.display().to_string().trim_end_matches('/')))
            .unwrap_or_else(|| "file:///absolute/path/".to_owned());
        return Some(format!(
            "a local directory is written as a file URL: {}",
            crate::text::sanitize(&abs)
        ));
    }
    // `--watch 1s TARGET`: the optional value of --watch needs `=`, so the
    // interval was taken for a TARGET.
    if !s.is_empty() && crate::values::parse_duration(s).is_ok() {
        return Some(format!(
            "`{}` is a duration, not a TARGET URL; an option's optional value is joined with \
             `=`: --watch={}",
            crate::text::sanitize(s),
            crate::text::sanitize(s)
        ));
    }
    if !s.contains([':', '/']) {
        let commands = subcommands();
        let near = commands
            .iter()
            .map(|c| (edit_distance(&lower, c), c.as_str()))
            .filter(|(d, c)| *d <= 2 && *d < c.len() / 2 + 1)
            .min();
        if let Some((_, cmd)) = near {
            return Some(format!(
                "not a TARGET URL (s3://bucket/path/ or file:///dir/); did you mean `leasectl {cmd}`?"
            ));
        }
    }
    None
}

/// Levenshtein distance (small strings only).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

impl std::fmt::Display for Target {
    /// The TARGET URL, written so that parsing it gives this target back
    /// (`%`, `#`, `?` in the path percent-encoded).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{}", encode_path(prefix)),
            Target::Local { dir } => {
                let d = dir.display().to_string();
                let slash = if d.ends_with('/') { "" } else { "/" };
                write!(f, "file://{}{slash}", encode_path(&d))
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

    /// The exact place a write to this target's lease goes, for the line a
    /// writing command prints before it acts: the lease file's absolute path,
    /// or the bucket and key. Escaped, safe to print.
    pub fn lease_location(&self) -> String {
        match self {
            Target::S3 { bucket, prefix } => format!(
                "bucket {} key {}",
                crate::text::sanitize(bucket),
                crate::text::sanitize(&format!("{prefix}LEASE"))
            ),
            Target::Local { dir } => {
                let d = dir.display().to_string();
                let slash = if d.ends_with('/') { "" } else { "/" };
                format!(
                    "local file {}",
                    crate::text::sanitize(&format!("{d}{slash}LEASE"))
                )
            }
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
    /// The SDK configuration, loaded once, with the options in effect (a
    /// profile may ask for path-style addressing).
    config: tokio::sync::OnceCell<(aws_config::SdkConfig, S3Options)>,
}

impl Connector {
    /// The SDK configuration and the options in effect, loaded on first use.
    async fn loaded(&self) -> &(aws_config::SdkConfig, S3Options) {
        self.config
            .get_or_init(|| async {
                let mut opts = self.opts.clone();
                if !opts.path_style
                    && crate::store::s3::profile_wants_path_style(opts.profile.as_deref()).await
                {
                    opts.path_style = true;
                }
                (crate::store::s3::shared_config(&opts).await, opts)
            })
            .await
    }

    /// A connector using `opts` for every S3 target.
    pub fn new(opts: S3Options) -> Self {
        Self {
            opts,
            config: tokio::sync::OnceCell::new(),
        }
    }

    /// A connector using an SDK configuration already loaded (`opts` as in
    /// effect with it), for an embedder or a test that has its own
    /// credentials provider rather than the AWS chain's.
    pub fn with_config(config: aws_config::SdkConfig, opts: S3Options) -> Self {
        Self {
            opts: opts.clone(),
            config: tokio::sync::OnceCell::new_with(Some((config, opts))),
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
                let (cfg, opts) = self.loaded().await;
                // Wherever the endpoint comes from (the command line and the
                // environment are checked before; a profile's `endpoint_url`
                // here), one with credentials, a query or a fragment in it is
                // refused, as `--endpoint-url` refuses it, never used.
                if let Some(e) = crate::store::s3::resolved_endpoint(cfg) {
                    let (shown, secrets) = crate::store::s3::redact_url(&e);
                    if shown != e.trim_end_matches('/') || !secrets.is_empty() {
                        return Err(StoreError::Invalid(format!(
                            "the endpoint {} (from the AWS profile or environment) carries \
                             credentials, a query or a fragment: give credentials as \
                             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or in the profile's \
                             credentials, and the endpoint URL without them",
                            crate::text::sanitize(&shown)
                        )));
                    }
                }
                Ok(Arc::new(S3Store::with_config(cfg, bucket, opts)))
            }
        }
    }

    /// Where a target's requests go, for display (`file:///dir/` or the endpoint).
    pub async fn endpoint(&self, target: &Target) -> String {
        match target {
            Target::Local { .. } => "local".to_owned(),
            Target::S3 { bucket, .. } => {
                let (cfg, opts) = self.loaded().await;
                crate::store::s3::describe_context(cfg, bucket, opts.path_style)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_a_swap_as_two() {
        assert_eq!(edit_distance("porbe", "probe"), 2);
    }

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

    #[test]
    fn a_fragment_or_query_is_refused_with_the_fix() {
        let e = "file:///tmp/x/store#2/".parse::<Target>().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("write it as %23"), "{msg}");
        assert!(msg.contains("file:///tmp/x/store%232/"), "{msg}");
        let e = "file:///tmp/x?y/".parse::<Target>().unwrap_err();
        assert!(e.to_string().contains("file:///tmp/x%3Fy/"), "{e}");
        let e = "s3://b/db#2/".parse::<Target>().unwrap_err();
        assert!(e.to_string().contains("s3://b/db%232/"), "{e}");
        assert!("s3://b#x".parse::<Target>().is_err());
        assert!("s3://b?x".parse::<Target>().is_err());
        assert!("file://#x/tmp/".parse::<Target>().is_err());
    }

    #[test]
    fn paths_are_percent_decoded_exactly() {
        assert_eq!(
            "file:///tmp/a%20b%23c%3Fd%25e/".parse::<Target>().unwrap(),
            Target::Local {
                dir: "/tmp/a b#c?d%e/".into()
            }
        );
        assert_eq!(
            "file://localhost/tmp/a/".parse::<Target>().unwrap(),
            Target::Local {
                dir: "/tmp/a/".into()
            }
        );
        // No URL normalisation: a backslash is a character of the name.
        assert_eq!(
            "file:///tmp/a\\b/".parse::<Target>().unwrap(),
            Target::Local {
                dir: "/tmp/a\\b/".into()
            }
        );
        assert_eq!(
            "s3://b/x%23y/".parse::<Target>().unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "x#y/".into()
            }
        );
        for bad in [
            "file:///tmp/%zz/",
            "file:///tmp/50%/",
            "file:///tmp/%ff/",
            "file:///tmp/%00/",
            "s3://b/a%00/",
            "file:///tmp/a\nb/",
            "s3://b/a\tb/",
            "file:///tmp/../etc/",
            "file:///tmp/%2e%2e/etc/",
            "file:///tmp/./x/",
            "file:/tmp/x/",
            "file://",
            "s3://b/%zz/",
        ] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }

    #[test]
    fn control_characters_are_named_percent_encoded() {
        // A name holding a control character, as a listing shows it, can be
        // given as a TARGET in its percent-encoded form.
        assert_eq!(
            "s3://b/nl%0Aname/".parse::<Target>().unwrap(),
            Target::S3 {
                bucket: "b".into(),
                prefix: "nl\nname/".into()
            }
        );
        assert_eq!(
            "file:///tmp/tab%09x/".parse::<Target>().unwrap(),
            Target::Local {
                dir: "/tmp/tab\tx/".into()
            }
        );
        // Written raw, the error gives the escape to use.
        let e = "s3://b/nl\nname/".parse::<Target>().unwrap_err();
        assert!(e.why.contains("%0A"), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        // Display writes the escape, which parses back.
        let t = Target::S3 {
            bucket: "b".into(),
            prefix: "nl\nname/tab\tx/\u{200b}/".into(),
        };
        assert_eq!(t.to_string(), "s3://b/nl%0Aname/tab%09x/%E2%80%8B/");
        assert_eq!(t.to_string().parse::<Target>().unwrap(), t);
    }

    #[test]
    fn credentials_in_a_target_are_refused_and_never_echoed() {
        for (bad, secret) in [
            ("s3://AKIA:secretpass@b/p/", "secretpass"),
            ("s3://AKIAEXAMPLE@b/p/", "AKIAEXAMPLE"),
            ("s3://AKIA:abc/defsecret@b/p/", "defsecret"),
            ("file://AKIA:secretpass@localhost/tmp/x/", "secretpass"),
        ] {
            let e = bad.parse::<Target>().unwrap_err();
            let msg = e.to_string();
            assert!(!msg.contains(secret), "{msg}");
            assert!(!msg.contains("AKIA"), "{msg}");
            assert!(msg.contains("***"), "{msg}");
            assert!(msg.contains("cannot carry credentials"), "{msg}");
        }
        // An `@` in a key is a character of the name.
        assert_eq!(
            "s3://b/ops@host/".parse::<Target>().unwrap().prefix(),
            "ops@host/"
        );
    }

    #[test]
    fn display_parses_back_to_the_same_target() {
        for t in [
            Target::Local {
                dir: "/tmp/a b#c?d%e/".into(),
            },
            Target::Local {
                dir: "/srv/store#2".into(),
            },
            Target::S3 {
                bucket: "b".into(),
                prefix: "x#1/y?2/%41/".into(),
            },
            Target::S3 {
                bucket: "b".into(),
                prefix: String::new(),
            },
        ] {
            let shown = t.to_string();
            let back: Target = shown.parse().unwrap();
            // A local dir gains the trailing slash Display writes.
            assert_eq!(back.to_string(), shown);
            assert!(!shown[5..].contains(['#', '?']), "{shown}");
        }
    }
}
