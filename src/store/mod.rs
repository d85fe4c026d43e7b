//! Object-store access: the two halves of the store interface, and its backends.
//!
//! [`ObjectRead`] lists and reads; [`ObjectStore`] adds conditional writes and
//! deletes. Watch mode holds only [`ReadOnly`], which implements `ObjectRead`
//! and nothing else, so no code path reachable from it can build a write
//! request: the engine's write paths require an `ObjectStore`.
//!
//! Backends: [`s3::S3Store`] (any S3-compatible service, via the AWS SDK) and
//! [`local::LocalStore`] (a directory on this machine, the embedded store).

pub mod local;
pub mod s3;

use std::sync::Arc;

pub(crate) mod bound;
mod listing;
pub(crate) use bound::{ListBound, MAX_LIST_ENTRIES};
pub use listing::Listing;
pub(crate) use listing::Unlisted;

use crate::clock::ServerOffset;
use crate::text::sanitize;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// The most keys [`ObjectRead::sample_keys`] returns (one S3 listing page).
pub(crate) const SAMPLE_KEYS: usize = 1000;

/// The largest LEASE body read, in bytes (64 KiB). A larger object is reported
/// as malformed without being read whole.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// One object as listed or read: its key, ETag (without surrounding quotes),
/// Last-Modified (server clock, UTC) and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Full key within the bucket (or store root).
    pub key: String,
    /// The ETag, quotes removed. Opaque: only ever compared for equality.
    pub etag: Option<String>,
    /// Last-Modified as the service reports it (S3: whole seconds).
    pub last_modified: Option<DateTime<Utc>>,
    /// Size of the whole object in bytes.
    pub size: u64,
}

/// The result of a GET: metadata plus at most [`MAX_BODY_BYTES`] + 1 bytes of body.
#[derive(Debug, Clone)]
pub struct GetOutput {
    /// Key, ETag, Last-Modified and the object's full size.
    pub meta: ObjectMeta,
    /// The body, cut after `MAX_BODY_BYTES + 1` bytes (so a cut body is
    /// recognisable by its length).
    pub body: Vec<u8>,
    /// Set when something exists at the key but it cannot be read as an
    /// object body (the local store: not a regular file, e.g. a symlink or a
    /// FIFO). The sentence is safe to print; the key is then judged malformed.
    pub problem: Option<String>,
    /// A local store's regular file: how many hard links it has (its
    /// identity, as `fstat` says). More than one means the file is also
    /// another name's — a LEASE replaced by a link to some other file, or
    /// linked elsewhere by a backup. `None` where the store has no such
    /// thing (S3, a local path that is not a regular file).
    pub links: Option<u64>,
}

/// One version of an object in a versioned bucket (`ListObjectVersions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The version id the service gave it.
    pub version_id: String,
    /// When it was written (or deleted, for a delete marker), by the service's clock (UTC).
    pub last_modified: Option<DateTime<Utc>>,
    /// Its ETag, quotes removed (`None` for a delete marker).
    pub etag: Option<String>,
    /// Its size in bytes (0 for a delete marker).
    pub size: u64,
    /// A delete marker: the object was deleted at `last_modified`.
    pub(crate) delete_marker: bool,
}

/// Whether a bucket keeps the versions of its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Versioning {
    /// Every write keeps the version it replaces.
    Enabled,
    /// Versioning was on and is now off: the versions of then are kept.
    Suspended,
    /// Never turned on: no version is kept.
    Off,
}

/// The versions of one key, oldest first, and whether the bucket keeps them.
#[derive(Debug, Clone)]
pub struct KeyVersions {
    /// The bucket's versioning.
    pub versioning: Versioning,
    /// The key's versions and delete markers in the service's order of them
    /// (it lists them newest first), reversed: oldest first. Not sorted by
    /// `last_modified`, which has whole seconds on several services and ties
    /// within a second; where the service's order and the times disagree,
    /// the order is the service's.
    pub versions: Vec<ObjectVersion>,
    /// The listing requests sent (pages, the versioning status, and the
    /// one-entry listings that asked the service which of a version and a
    /// delete marker of the same second came first).
    pub requests: u64,
    /// Entries whose place the service could not be made to tell: a delete
    /// marker and a version on one listing page that neither their
    /// `Last-Modified` nor a one-entry listing orders. Each is placed as
    /// its time says (a version before a marker of the same second); the
    /// order around them is uncertain.
    pub(crate) unordered: usize,
}

/// The precondition sent with a PUT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCondition {
    /// Unconditional (best-effort mode only).
    None,
    /// `If-None-Match: *` — create only if the key is absent.
    IfNoneMatch,
    /// `If-Match: <etag>` — replace only the version with this ETag.
    IfMatch(String),
}

/// How an ETag is written in `If-Match`: quoted as S3 specifies (`"abc"`,
/// what SDKs send), or bare (`abc`, which some services, Ceph RGW 16 among
/// them, require: they refuse the quoted form of the ETag the object has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EtagForm {
    /// `If-Match: "abc"` (S3, the default).
    #[default]
    Quoted,
    /// `If-Match: abc`.
    Unquoted,
}

impl EtagForm {
    /// `quoted` or `unquoted`, as in `--json`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EtagForm::Quoted => "quoted",
            EtagForm::Unquoted => "unquoted",
        }
    }
}

/// What is known about `DELETE` with `If-Match` on a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DeleteSupport {
    /// Not probed yet: a release reads and checks before it deletes.
    #[default]
    Unknown,
    /// A made-up ETag is refused: a release is one conditional DELETE.
    Honoured,
    /// The header is ignored (the object is deleted whatever its ETag):
    /// a release reads, checks the record is ours, then deletes.
    Ignored,
}

/// What a store has been found to do with conditional requests (by the probe).
/// Shared by every user of one store: one finding applies engine-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// The form of ETag `If-Match` is sent with.
    pub(crate) etag_form: EtagForm,
    /// Conditional DELETE.
    pub(crate) conditional_delete: DeleteSupport,
    /// `If-Match` on an absent key was found to create the object (a deleted
    /// lease would be resurrected by an evicted holder's renewal).
    pub(crate) if_match_absent_creates: bool,
}

/// Why a store request failed, classified by what the caller must do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// 404: the key (or bucket) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// 412: the precondition (`If-Match` / `If-None-Match`) was not met.
    #[error("precondition failed")]
    PreconditionFailed,
    /// 409: a concurrent conditional write on the same key (AWS `ConditionalRequestConflict`).
    #[error("conflicting conditional request in progress")]
    Conflict,
    /// 304: the object still has the ETag given in a conditional GET.
    #[error("not modified")]
    NotModified,
    /// 501: the service does not implement this request (e.g. conditional writes).
    #[error("not implemented by the service: {0}")]
    NotImplemented(String),
    /// 403: credentials refused or the request not permitted.
    #[error("access denied: {0}")]
    AccessDenied(String),
    /// The request did not get an answer in time.
    #[error("timed out after {0:?} ({1})")]
    Timeout(std::time::Duration, String),
    /// No credentials could be found or used (the sentence says where it looked).
    #[error("{0}")]
    Credentials(String),
    /// The request could not be sent or its answer read (connection refused, DNS, TLS, reset).
    #[error("cannot reach {endpoint}: {message}")]
    Transport {
        /// Where the request was going.
        endpoint: String,
        /// What went wrong, credentials never included.
        message: String,
    },
    /// A conditional request was not sent: the ETag it would carry, as the
    /// service gave it, is unusable ([`unusable_etag`]).
    #[error("the service's ETag \"{etag}\" is {why}: it cannot be sent in If-Match, so no conditional request was sent with it")]
    UnusableEtag {
        /// The ETag (escaped).
        etag: String,
        /// Why it is unusable.
        why: &'static str,
    },
    /// A bad key or local I/O failure.
    #[error("{0}")]
    Invalid(String),
    /// Any other answer from the service.
    #[error("service answered {status}: {message}")]
    Other {
        /// HTTP status code, 0 if none.
        status: u16,
        /// The service's error code and message.
        message: String,
    },
}

impl StoreError {
    /// True for an answer that asks the client to slow down: `503 SlowDown`
    /// (S3's per-prefix request-rate limit), any 503, or `429 Too Many Requests`.
    /// Such a request is retried later with fewer requests in flight, not reported.
    pub(crate) fn is_throttle(&self) -> bool {
        match self {
            Self::Other { status, message } => {
                matches!(status, 503 | 429) || message.contains("SlowDown")
            }
            _ => false,
        }
    }
}

/// Reading from a store: list and get. All a watch-mode console ever holds.
///
/// No method has a default: every store, and every wrapper of one
/// ([`ReadOnly`], [`Counting`]), says what it does for each. A wrapper that
/// forgot a method would otherwise answer with the default (a store that
/// "keeps no versions", "has no clock"…) instead of the store it wraps, and
/// nothing would tell (issue 44: the console's timeline pane was blind on S3
/// that way). A store without a feature answers as [`no_versions`] and
/// [`no_sample`] say.
#[async_trait]
pub trait ObjectRead: Send + Sync {
    /// A human description of where this store is (`s3://bucket` at an endpoint,
    /// or `file:///dir`), for messages. Never contains credentials.
    fn describe(&self) -> String;

    /// Lists `prefix` with delimiter `/`, following every page within the
    /// bounds of [`ListBound`].
    ///
    /// Errors: the service's; [`StoreError::Invalid`] when the listing is
    /// incomplete (a bound reached, a token given twice).
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError>;

    /// One page of the listing of `prefix` (delimiter `/`): the page, and the
    /// continuation token of the next one (`None` after the last page). Start
    /// with `token = None`. A store without pages answers its whole listing
    /// as one page.
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError>;

    /// Reads `key`. With `if_none_match` set, answers `NotModified` when the
    /// object's ETag is unchanged. A missing key is `NotFound`.
    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError>;

    /// A bounded look at the keys under `prefix` at any depth: at most
    /// [`SAMPLE_KEYS`] of them, from one listing without delimiter (a local
    /// store walks its directories breadth first, to as many entries). Not a
    /// complete listing: what it does not return may still exist. Used to
    /// tell an operator that leases lie deeper than the listing went.
    ///
    /// Errors: [`StoreError::NotImplemented`] for a store that cannot look
    /// ([`no_sample`]); the service's errors otherwise.
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// The service's clock against this host's, from its latest answer that
    /// carried a `Date` header. `None` for a store with no clock of its own
    /// (a local directory is judged by this host's clock) or before any answer.
    fn server_offset(&self) -> Option<ServerOffset>;

    /// Why the service's clock is unknown although the store has one (its
    /// latest answer carried no `Date`, or one that does not parse): a
    /// sentence safe to print. `None` when the clock is known, or for a store
    /// with no clock of its own.
    fn server_clock_problem(&self) -> Option<String>;

    /// True when the store has a clock of its own that answers carry (S3's
    /// `Date`); false for a local directory, whose writers' clocks nothing
    /// checks against each other (on a file system shared between hosts,
    /// they must agree within TTL/12 by other means, such as NTP).
    fn has_clock(&self) -> bool;

    /// Where this store's requests go (URL, region, addressing style), for
    /// `--json` and the audit log. All `None` for a local directory.
    fn endpoint_info(&self) -> EndpointInfo;

    /// Why the store as a whole cannot be used now, when that is known at no
    /// cost (a local store whose directory went away); `None` otherwise. A
    /// gather checks it every time, even when it reads nothing else.
    fn unavailable(&self) -> Option<StoreError>;

    /// Every version and delete marker of exactly `key` (`ListObjectVersions`,
    /// every page) in the service's own order of them, oldest first (the
    /// service lists newest first: [`KeyVersions::versions`]), with the
    /// bucket's versioning status.
    ///
    /// Errors: [`StoreError::NotImplemented`] for a store that keeps no
    /// versions (a local directory, [`no_versions`]); the service's errors
    /// otherwise.
    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError>;

    /// Reads one version of `key` (bounded as [`ObjectRead::get`]).
    ///
    /// Errors: as [`ObjectRead::list_versions`]; `NotFound` for a version
    /// that is gone.
    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError>;
}

/// The answer of a store that keeps no versions (described as `store`) to
/// [`ObjectRead::list_versions`] and [`ObjectRead::get_version`] of `key`.
pub fn no_versions(store: &str, key: &str) -> StoreError {
    StoreError::NotImplemented(format!("{} keeps no versions of {}", store, sanitize(key)))
}

/// The answer of a store (described as `store`) that cannot look at the keys
/// under `prefix` at any depth, to [`ObjectRead::sample_keys`].
pub fn no_sample(store: &str, prefix: &str) -> StoreError {
    StoreError::NotImplemented(format!(
        "{} cannot list keys at any depth under {}",
        store,
        sanitize(prefix)
    ))
}

/// How the bucket is addressed in requests to an S3-compatible service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressingStyle {
    /// `http://host/bucket/key`.
    Path,
    /// `http://bucket.host/key`.
    VirtualHost,
}

/// Where a store's requests go, as data (`--json`, NDJSON, the audit log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The endpoint URL in use, credentials shown as `***`; `None` for the
    /// SDK's own AWS endpoint of `region`, and for a local directory.
    pub url: Option<String>,
    /// The region requests are signed for (S3 only).
    pub region: Option<String>,
    /// Path-style or virtual-host addressing (S3 only).
    pub addressing_style: Option<AddressingStyle>,
}

/// A writable store: conditional PUT and DELETE on top of [`ObjectRead`].
#[async_trait]
pub trait ObjectStore: ObjectRead {
    /// Writes `body` at `key` under `condition`; returns the new ETag.
    /// A refused precondition is `PreconditionFailed` (or `NotFound` for
    /// `If-Match` on a key that no longer exists, as AWS answers).
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError>;

    /// [`ObjectStore::put`], sent once: an attempt answered with an error
    /// is not tried again by the client (the SDK waits up to a second
    /// before it retries a 5xx). For a race's contenders, whose every
    /// answer in doubt is judged by reading the key back: Ceph RGW answers
    /// some losers of a contended `If-Match` with a 500, and their retries
    /// made each round of the acquire's race check wait up to a second.
    async fn put_once(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        self.put(key, body, condition).await
    }

    /// Deletes `key`, only if its ETag is `if_match` when given. Deleting a
    /// missing key succeeds (as on S3).
    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError>;

    /// What this store is known to do with conditional requests
    /// (`Capabilities::default()` before any probe).
    fn capabilities(&self) -> Capabilities;

    /// Records a finding; returns false when the store cannot act on it (a
    /// store that has only one way to send `If-Match`, such as a local directory).
    fn set_capabilities(&self, caps: Capabilities) -> bool;
}

/// A store that can only be read: wraps any store and exposes [`ObjectRead`]
/// alone. It has no write methods, so code holding it cannot write — and the
/// takeover, probe and lease code, which need an [`ObjectStore`], do not compile
/// with it:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use leasectl::store::{local::LocalStore, ObjectRead, ObjectStore, ReadOnly};
/// fn needs_a_writable_store(_: Arc<dyn ObjectStore>) {}
/// let dir = std::env::temp_dir();
/// let watch = Arc::new(ReadOnly::new(Arc::new(LocalStore::open(dir).unwrap())));
/// needs_a_writable_store(watch); // error: ReadOnly does not implement ObjectStore
/// ```
pub struct ReadOnly(Arc<dyn ObjectRead>);

impl ReadOnly {
    /// Wraps `inner`; from here on only reads are possible.
    pub fn new(inner: Arc<dyn ObjectRead>) -> Self {
        Self(inner)
    }
}

#[async_trait]
impl ObjectRead for ReadOnly {
    fn describe(&self) -> String {
        self.0.describe()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.0.list(prefix).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        self.0.list_page(prefix, token).await
    }
    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        self.0.get(key, if_none_match).await
    }
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.0.sample_keys(prefix).await
    }
    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        self.0.list_versions(key).await
    }
    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        self.0.get_version(key, version_id).await
    }
    fn server_offset(&self) -> Option<ServerOffset> {
        self.0.server_offset()
    }
    fn server_clock_problem(&self) -> Option<String> {
        self.0.server_clock_problem()
    }
    fn has_clock(&self) -> bool {
        self.0.has_clock()
    }
    fn endpoint_info(&self) -> EndpointInfo {
        self.0.endpoint_info()
    }
    fn unavailable(&self) -> Option<StoreError> {
        self.0.unavailable()
    }
}

/// Why an ETag (as [`normalize_etag`] leaves it) cannot be sent in an
/// `If-Match`: `"empty"`, or `"not a plain token"` when it holds a blank, a
/// quote, a comma or a control character. `None` when it can. A service whose
/// ETags are unusable cannot give exclusion: an empty `If-Match:` is ignored by
/// some services, which makes every "conditional" write unconditional.
pub(crate) fn unusable_etag(etag: &str) -> Option<&'static str> {
    if etag.is_empty() {
        Some("empty")
    } else if etag
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == ',')
    {
        Some("not a plain token")
    } else {
        None
    }
}

/// The [`StoreError::UnusableEtag`] for `etag`, if it is unusable.
pub(crate) fn check_if_match(etag: &str) -> Result<(), StoreError> {
    match unusable_etag(etag) {
        Some(why) => Err(StoreError::UnusableEtag {
            etag: sanitize(etag),
            why,
        }),
        None => Ok(()),
    }
}

/// Removes one pair of surrounding double quotes from an ETag (and a weak `W/` prefix).
pub(crate) fn normalize_etag(raw: &str) -> String {
    let s = raw.trim();
    let s = s.strip_prefix("W/").unwrap_or(s);
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
        .to_owned()
}

/// Request and error counters shared by the stores of one console.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests sent.
    pub requests: std::sync::atomic::AtomicU64,
    /// Requests that failed (excluding the expected 404, 304 and 412 answers).
    pub errors: std::sync::atomic::AtomicU64,
    /// LIST requests among `requests` (each page of a listing counts once).
    pub lists: std::sync::atomic::AtomicU64,
}

/// Request totals at one moment ([`Counters::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (excluding the expected 404, 304 and 412 answers).
    pub errors: u64,
    /// LIST requests among `requests`.
    pub lists: u64,
}

impl Counters {
    /// `(requests, errors)` so far.
    pub fn read(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.requests.load(Relaxed), self.errors.load(Relaxed))
    }

    /// All totals so far.
    pub fn counts(&self) -> RequestCounts {
        use std::sync::atomic::Ordering::Relaxed;
        RequestCounts {
            requests: self.requests.load(Relaxed),
            errors: self.errors.load(Relaxed),
            lists: self.lists.load(Relaxed),
        }
    }

    /// `n` listing requests that all succeeded.
    fn count_lists(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.lists.fetch_add(n, Relaxed);
        self.requests.fetch_add(n, Relaxed);
    }

    fn count_list<T>(&self, r: &Result<T, StoreError>) {
        self.lists
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.count(r);
    }

    fn count<T>(&self, r: &Result<T, StoreError>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.requests.fetch_add(1, Relaxed);
        if let Err(e) = r {
            if !matches!(
                e,
                StoreError::NotFound(_) | StoreError::NotModified | StoreError::PreconditionFailed
            ) {
                self.errors.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A store that counts its requests (for the console's request rate).
pub(crate) struct Counting {
    inner: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
}

impl Counting {
    /// Wraps `inner`, counting into `counters`.
    pub(crate) fn new(inner: Arc<dyn ObjectStore>, counters: Arc<Counters>) -> Self {
        Self { inner, counters }
    }
}

#[async_trait]
impl ObjectRead for Counting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let r = self.inner.list(prefix).await;
        self.counters.count_list(&r);
        r
    }
    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        let r = self.inner.list_page(prefix, token).await;
        self.counters.count_list(&r);
        r
    }
    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        let r = self.inner.get(key, if_none_match).await;
        self.counters.count(&r);
        r
    }
    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let r = self.inner.sample_keys(prefix).await;
        self.counters.count_list(&r);
        r
    }
    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        let r = self.inner.list_versions(key).await;
        // Every request the listing sent (its pages and the versioning
        // status); a store that keeps no versions sent none.
        match &r {
            Ok(v) => self.counters.count_lists(v.requests),
            Err(StoreError::NotImplemented(_)) => {}
            Err(_) => self.counters.count_list(&r),
        }
        r
    }
    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        let r = self.inner.get_version(key, version_id).await;
        if !matches!(r, Err(StoreError::NotImplemented(_))) {
            self.counters.count(&r);
        }
        r
    }
    fn server_offset(&self) -> Option<ServerOffset> {
        self.inner.server_offset()
    }
    fn server_clock_problem(&self) -> Option<String> {
        self.inner.server_clock_problem()
    }
    fn has_clock(&self) -> bool {
        self.inner.has_clock()
    }
    fn endpoint_info(&self) -> EndpointInfo {
        self.inner.endpoint_info()
    }
    fn unavailable(&self) -> Option<StoreError> {
        self.inner.unavailable()
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let r = self.inner.put(key, body, condition).await;
        self.counters.count(&r);
        r
    }
    async fn put_once(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let r = self.inner.put_once(key, body, condition).await;
        self.counters.count(&r);
        r
    }
    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let r = self.inner.delete(key, if_match).await;
        self.counters.count(&r);
        r
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn set_capabilities(&self, caps: Capabilities) -> bool {
        self.inner.set_capabilities(caps)
    }
}

/// A store that could not be opened (e.g. a `file://` directory that does not
/// exist): every request fails with the same error, so the target shows up as
/// unreachable next to the others instead of stopping everything. It says
/// so without a request ([`ObjectRead::unavailable`]), and it has no clock,
/// versions or endpoint to tell of.
pub(crate) struct Unavailable {
    what: String,
    error: StoreError,
}

impl Unavailable {
    /// A stand-in for the store described as `what`, failing with `error`.
    pub(crate) fn new(what: String, error: StoreError) -> Self {
        Self { what, error }
    }
}

#[async_trait]
impl ObjectRead for Unavailable {
    fn describe(&self) -> String {
        self.what.clone()
    }
    async fn list(&self, _prefix: &str) -> Result<Listing, StoreError> {
        Err(self.error.clone())
    }
    async fn list_page(
        &self,
        _prefix: &str,
        _token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        Err(self.error.clone())
    }
    async fn get(&self, _key: &str, _inm: Option<&str>) -> Result<GetOutput, StoreError> {
        Err(self.error.clone())
    }
    async fn sample_keys(&self, _prefix: &str) -> Result<Vec<String>, StoreError> {
        Err(self.error.clone())
    }
    fn server_offset(&self) -> Option<ServerOffset> {
        None
    }
    fn server_clock_problem(&self) -> Option<String> {
        None
    }
    fn has_clock(&self) -> bool {
        false
    }
    fn endpoint_info(&self) -> EndpointInfo {
        EndpointInfo::default()
    }
    fn unavailable(&self) -> Option<StoreError> {
        Some(self.error.clone())
    }
    async fn list_versions(&self, _key: &str) -> Result<KeyVersions, StoreError> {
        Err(self.error.clone())
    }
    async fn get_version(&self, _key: &str, _version_id: &str) -> Result<GetOutput, StoreError> {
        Err(self.error.clone())
    }
}

#[async_trait]
impl ObjectStore for Unavailable {
    async fn put(
        &self,
        _: &str,
        _: Vec<u8>,
        _: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        Err(self.error.clone())
    }
    async fn delete(&self, _: &str, _: Option<&str>) -> Result<(), StoreError> {
        Err(self.error.clone())
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    fn set_capabilities(&self, _caps: Capabilities) -> bool {
        false
    }
}
