//! The S3 backend: any S3-compatible service (AWS S3, Cloudflare R2, MinIO…)
//! through the maintained AWS SDK, which sends `If-Match` / `If-None-Match` on
//! PUT and `If-Match` on DELETE.
//!
//! Credentials come from the AWS chain (environment, profiles, SSO, web
//! identity, IMDS); none is ever printed. Errors are classified by HTTP status.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use chrono::{DateTime, Utc};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use crate::clock::ServerOffset;

use super::{
    normalize_etag, Capabilities, EtagForm, GetOutput, KeyVersions, Listing, ObjectMeta,
    ObjectRead, ObjectStore, ObjectVersion, PutCondition, StoreError, Versioning, MAX_BODY_BYTES,
};

/// How to reach an S3-compatible service.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// Custom endpoint (MinIO, R2, a test server). `AWS_ENDPOINT_URL` is honoured when unset.
    pub endpoint_url: Option<String>,
    /// Region; falls back to the AWS chain, then `us-east-1`.
    pub region: Option<String>,
    /// Named profile from the AWS config files.
    pub profile: Option<String>,
    /// Path-style addressing (`http://host/bucket/key`), needed by MinIO and most test servers.
    pub path_style: bool,
    /// Deadline for one request attempt (default 10 s).
    pub request_timeout: Option<Duration>,
    /// Total attempts per request including retries of transient failures (default 2).
    pub max_attempts: Option<u32>,
}

/// One bucket on an S3-compatible service.
#[derive(Clone)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// The endpoint as shown: credentials in the URL replaced by `***`.
    endpoint: String,
    /// The per-attempt timeout (for messages).
    timeout: Duration,
    /// Parts of the endpoint URL that must never be printed (user info, query).
    secrets: Vec<String>,
    /// The service's clock, from the `Date` of its latest answer.
    clock: ServerClock,
    /// Path-style addressing (for messages: with virtual hosts the bucket is in the host name).
    path_style: bool,
    /// The endpoint URL in use, credentials shown as `***`; `None`: AWS's own.
    endpoint_url: Option<String>,
    /// The region requests are signed for.
    region: Option<String>,
    /// The profile named on the command line (for messages).
    profile: Option<String>,
    /// What the probe found (ETag form for `If-Match`, conditional DELETE).
    caps: std::sync::Arc<std::sync::Mutex<Capabilities>>,
}

/// The latest [`ServerOffset`] seen in an answer's `Date` header, shared with
/// the SDK interceptor that reads it.
#[derive(Debug, Clone, Default)]
struct ServerClock(std::sync::Arc<std::sync::Mutex<ClockReading>>);

/// What the latest answer said about the service's clock.
#[derive(Debug, Clone, Default)]
struct ClockReading {
    /// The estimate from its `Date` (none when it had no usable one).
    offset: Option<ServerOffset>,
    /// Why the latest answer gave no estimate: no `Date`, or one that does
    /// not parse (a sentence, escaped).
    problem: Option<String>,
}

/// When the request of this attempt was sent (system wall clock).
#[derive(Debug, Clone, Copy)]
struct SentAt(DateTime<Utc>);

impl aws_smithy_types::config_bag::Storable for SentAt {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl Intercept for ServerClock {
    fn name(&self) -> &'static str {
        "leasectl-server-clock"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(SentAt(Utc::now()));
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let received = Utc::now();
        let Some(sent) = cfg.load::<SentAt>().map(|s| s.0) else {
            return Ok(());
        };
        let header = context.response().headers().get("date");
        let reading = match header.map(|d| (d, parse_http_date(d))) {
            Some((_, Some(date))) => ClockReading {
                offset: Some(ServerOffset::from_answer(date, sent, received)),
                problem: None,
            },
            Some((d, None)) => ClockReading {
                offset: None,
                problem: Some(format!(
                    "the service's clock is unknown: its Date header `{}` is not an HTTP date, \
                     so this host's clock cannot be checked against it",
                    crate::text::sanitize_cut(d, 64)
                )),
            },
            None => ClockReading {
                offset: None,
                problem: Some(
                    "the service's clock is unknown: its answers carry no Date header, \
                     so this host's clock cannot be checked against it"
                        .to_owned(),
                ),
            },
        };
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = reading;
        Ok(())
    }
}

/// An HTTP `Date` (RFC 7231 IMF-fixdate, or the RFC 2822 form it is a case
/// of), UTC; `None` when it does not parse.
fn parse_http_date(d: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(d.trim())
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// Text that may carry credentials in a URL's user information
/// (`scheme://user:password@host/…`, or `user:password@host` without a
/// scheme) with that part shown as `***` (`***:***` when it had a password).
/// Returns the shown form, and the user and password removed. Works on text
/// that is not a valid URL too: a TARGET or an endpoint that failed to parse
/// is shown through this.
pub fn redact_userinfo(raw: &str) -> (String, Vec<String>) {
    let (scheme, rest) = match raw.find("://") {
        Some(i) => raw.split_at(i + 3),
        None => ("", raw),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else {
        return (raw.to_owned(), Vec::new());
    };
    let info = &rest[..at];
    let (masked, parts): (&str, Vec<String>) = match info.split_once(':') {
        Some((u, p)) => ("***:***", vec![u.to_owned(), p.to_owned()]),
        None => ("***", vec![info.to_owned()]),
    };
    (format!("{scheme}{masked}{}", &rest[at..]), parts)
}

/// An endpoint URL made safe to show: user, password, query and fragment
/// replaced by `***`, whether or not the text parses as a URL. Returns the
/// shown form and the parts removed (to scrub from messages).
pub fn redact_url(raw: &str) -> (String, Vec<String>) {
    let (mut shown, mut secrets) = redact_userinfo(raw);
    // The query or fragment, after the authority.
    let after = shown.find("://").map_or(0, |i| i + 3);
    if let Some(i) = shown[after..].find(['?', '#']).map(|i| i + after) {
        let tail = shown[i + 1..].to_owned();
        secrets.extend(tail.split(['&', '#', '?']).map(str::to_owned));
        secrets.push(tail);
        let mark = shown[i..].chars().next().unwrap_or('?');
        shown.truncate(i);
        shown.push(mark);
        shown.push_str("***");
    }
    // Longest first, so that a part is not left half-replaced by a shorter one.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.retain(|s| s.len() >= 3);
    let shown = if shown.ends_with("***") {
        shown
    } else {
        shown.trim_end_matches('/').to_owned()
    };
    (shown, secrets)
}

/// Replaces every secret in `text` by `***`.
fn scrub(text: String, secrets: &[String]) -> String {
    secrets.iter().fold(text, |t, s| {
        if t.contains(s.as_str()) {
            t.replace(s.as_str(), "***")
        } else {
            t
        }
    })
}

/// Decodes a key or prefix from a listing made with `encoding-type=url`.
///
/// Errors: the decoded bytes, when they are not UTF-8 (such a key cannot be
/// sent back in a request; it is never replaced by a look-alike).
fn decode_key(s: &str) -> Result<String, Vec<u8>> {
    let plus_as_space = s.replace('+', " ");
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(&plus_as_space).collect();
    String::from_utf8(bytes).map_err(|e| e.into_bytes())
}

impl S3Store {
    /// Builds a client for `bucket` from `opts` and the AWS configuration chain.
    /// Does no network I/O beyond what the credential chain needs lazily.
    pub async fn connect(bucket: &str, opts: &S3Options) -> Self {
        let config = shared_config(opts).await;
        Self::with_config(&config, bucket, opts)
    }

    /// Builds a store from an already loaded SDK configuration (shared between buckets).
    pub fn with_config(config: &aws_config::SdkConfig, bucket: &str, opts: &S3Options) -> Self {
        // Checksums only where S3 requires them: several S3-compatible services
        // reject the SDK's newer default (streaming CRC trailers).
        let clock = ServerClock::default();
        let mut s3conf = aws_sdk_s3::config::Builder::from(config);
        // A configuration not made by `shared_config` may carry no HTTP client,
        // and this build has no SDK default one.
        if config.http_client().is_none() {
            s3conf = s3conf.http_client(https_client(None));
        }
        // No throughput watch on every body (a wrapper, clocks and a timer
        // per request): request bodies are small and in memory, and `get`
        // reads an answer's body under the attempt's deadline.
        s3conf = s3conf.stalled_stream_protection(
            aws_sdk_s3::config::StalledStreamProtectionConfig::disabled(),
        );
        let s3conf = s3conf
            .force_path_style(opts.path_style)
            .interceptor(clock.clone())
            .request_checksum_calculation(
                aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired,
            )
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .build();
        let resolved = resolved_endpoint(config).map(|e| redact_url(&e));
        let endpoint_url = resolved.as_ref().map(|(shown, _)| shown.clone());
        let (endpoint, secrets) = resolved.unwrap_or_else(|| {
            (
                format!(
                    "AWS S3 ({})",
                    config.region().map(|r| r.as_ref()).unwrap_or("no region")
                ),
                Vec::new(),
            )
        });
        Self {
            client: aws_sdk_s3::Client::from_conf(s3conf),
            bucket: bucket.to_owned(),
            endpoint,
            timeout: opts.request_timeout.unwrap_or(Duration::from_secs(10)),
            secrets,
            clock,
            path_style: opts.path_style,
            endpoint_url,
            region: config.region().map(|r| r.as_ref().to_owned()),
            profile: opts.profile.clone(),
            caps: Default::default(),
        }
    }

    /// The host name this store's requests go to: the endpoint's host (with
    /// the bucket in front under virtual-host addressing, unless it is an IP
    /// address), or AWS's own regional host.
    fn request_host(&self) -> String {
        let host = match &self.endpoint_url {
            Some(url) => url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| url.clone()),
            None => {
                let region = self.region.as_deref().unwrap_or("us-east-1");
                let domain = if region.starts_with("cn-") {
                    "amazonaws.com.cn"
                } else {
                    "amazonaws.com"
                };
                format!("s3.{region}.{domain}")
            }
        };
        let ip = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok();
        if self.path_style || ip {
            host
        } else {
            format!("{}.{host}", self.bucket)
        }
    }

    fn if_match_value(&self, etag: &str) -> String {
        match self.capabilities().etag_form {
            EtagForm::Quoted => quote(etag),
            EtagForm::Unquoted => etag.to_owned(),
        }
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The endpoint as shown to the operator (URL, or `AWS S3 (region)`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn classify<E>(&self, err: SdkError<E, HttpResponse>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match self.classify_raw(err) {
            StoreError::Transport { endpoint, message } => StoreError::Transport {
                endpoint,
                message: scrub(message, &self.secrets),
            },
            StoreError::Other { status, message } => StoreError::Other {
                status,
                message: scrub(message, &self.secrets),
            },
            StoreError::NotFound(m) => StoreError::NotFound(scrub(m, &self.secrets)),
            StoreError::AccessDenied(m) => StoreError::AccessDenied(scrub(m, &self.secrets)),
            StoreError::NotImplemented(m) => StoreError::NotImplemented(scrub(m, &self.secrets)),
            other => other,
        }
    }

    fn classify_raw<E>(&self, err: SdkError<E, HttpResponse>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match &err {
            SdkError::ServiceError(se) => {
                let status = se.raw().status().as_u16();
                let code = se.err().code().unwrap_or("");
                let msg = se.err().message().unwrap_or("");
                let text = format!("{code} {msg}").trim().to_owned();
                match status {
                    404 => StoreError::NotFound(text),
                    412 => StoreError::PreconditionFailed,
                    409 => StoreError::Conflict,
                    304 => StoreError::NotModified,
                    501 => StoreError::NotImplemented(text),
                    403 => StoreError::AccessDenied(text),
                    _ => StoreError::Other {
                        status,
                        message: text,
                    },
                }
            }
            SdkError::TimeoutError(_) => {
                StoreError::Timeout(self.timeout, format!("{} ({})", self.endpoint, self.bucket))
            }
            SdkError::ResponseError(re) => {
                let status = re.raw().status().as_u16();
                if status == 304 {
                    StoreError::NotModified
                } else {
                    StoreError::Other {
                        status,
                        message: format!("unreadable answer: {}", DisplayErrorContext(&err)),
                    }
                }
            }
            _ => {
                let message = self.transport_message(&err);
                if message.starts_with(CREDENTIALS) {
                    StoreError::Credentials(message)
                } else {
                    StoreError::Transport {
                        endpoint: self.endpoint.clone(),
                        message,
                    }
                }
            }
        }
    }

    /// One readable sentence for a request that got no answer: the cause
    /// (no credentials, unknown profile, DNS, TLS, refused connection) and
    /// what to do, from the error's chain of causes (never `Debug` output).
    fn transport_message(&self, err: &(dyn std::error::Error + 'static)) -> String {
        let mut chain = Vec::new();
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = cur {
            let text = e.to_string();
            if !text.is_empty() && !chain.iter().any(|c: &String| c.contains(&text)) {
                chain.push(text);
            }
            cur = e.source();
        }
        let all = chain.join(": ");
        let m = classify_transport(
            &all,
            &self.endpoint,
            &self.request_host(),
            self.endpoint_url.is_some(),
            self.path_style,
        );
        match (&self.profile, m.starts_with(CREDENTIALS)) {
            (Some(p), true) => format!(
                "{CREDENTIALS} for the profile `{}`: it is not in ~/.aws/config or ~/.aws/credentials, \
                 or it holds no credentials; check --profile / AWS_PROFILE",
                crate::text::sanitize(p)
            ),
            _ => m,
        }
    }
}

/// How a missing-credentials sentence starts.
const CREDENTIALS: &str = "unable to locate credentials";

/// The sentence for a transport failure described by `all` (the causes'
/// texts joined), talking to `endpoint` (as shown) at the host name
/// `request_host` (the bucket in it under virtual-host addressing);
/// `custom`: an endpoint was configured (not AWS's own).
fn classify_transport(
    all: &str,
    endpoint: &str,
    request_host: &str,
    custom: bool,
    path_style: bool,
) -> String {
    // The endpoint's own host name for what its server answered (TLS,
    // refused); AWS's host when no endpoint is configured.
    let host = url::Url::parse(endpoint)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| request_host.to_owned());
    if all.contains("no credentials found in chain")
        || all.contains("credential provider was not enabled")
    {
        // The chain's own list of what it tried: "  Environment: …" lines.
        let tried: Vec<&str> = all
            .split("\n")
            .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.trim()))
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()))
            .collect();
        let tried = if tried.is_empty() {
            "environment, profile files, web identity, container, instance metadata".to_owned()
        } else {
            tried.join(", ")
        };
        return format!(
            "{CREDENTIALS} (tried: {tried}); set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, or name a profile with --profile / AWS_PROFILE"
        );
    }
    if let Some(i) = all.find("profile") {
        if all[i..].contains("not defined")
            || all[i..].contains("could not be found")
            || all.contains("ProfileFile")
        {
            return format!(
                "the AWS profile could not be used: {}; check --profile / AWS_PROFILE against ~/.aws/config",
                crate::text::sanitize(all)
            );
        }
    }
    if all.contains("dns error") || all.contains("failed to lookup address") {
        let hint = if !custom {
            "check this host's network and DNS (AWS's endpoint is named after the bucket and the region; check --region)"
        } else if path_style {
            "check the endpoint's host name"
        } else {
            "virtual-host addressing puts the bucket in the host name; for MinIO, Ceph or a test server pass --path-style"
        };
        return format!(
            "cannot resolve the host name {}: {hint}",
            crate::text::sanitize(request_host)
        );
    }
    if all.contains("UnknownIssuer")
        || all.contains("invalid peer certificate")
        || all.contains("certificate")
    {
        return format!(
            "TLS: the certificate of {host} is not trusted ({}); for a private CA set AWS_CA_BUNDLE to its PEM file",
            crate::text::sanitize(&first_sentence(all))
        );
    }
    if all.contains("Connection refused") {
        return format!("connection refused by {host}: nothing listens at {endpoint}; check --endpoint-url and that the service runs");
    }
    if all.contains("timed out") || all.contains("Timeout") {
        return format!("no answer from {endpoint} in time; check the network, or raise --timeout");
    }
    crate::text::sanitize(&first_sentence(all))
}

/// The innermost causes of a joined error text, without the SDK's plumbing
/// words ("dispatch failure", "io error", "client error (Connect)").
fn first_sentence(all: &str) -> String {
    let parts: Vec<&str> = all
        .split(": ")
        .filter(|p| {
            !matches!(
                p.trim(),
                "dispatch failure"
                    | "io error"
                    | "other"
                    | "client error (Connect)"
                    | "tcp connect error"
            )
        })
        .collect();
    parts.join(": ")
}

/// The endpoint S3 requests actually go to, resolved as the SDK resolves it:
/// `--endpoint-url` (or `AWS_ENDPOINT_URL`) given to the client, else the
/// S3-specific setting (`AWS_ENDPOINT_URL_S3`, or `endpoint_url` in the
/// profile's `services` section), else the general one; `None`: AWS itself.
pub fn resolved_endpoint(config: &aws_config::SdkConfig) -> Option<String> {
    if config.get_origin("endpoint_url").is_client_config() {
        return config.endpoint_url().map(str::to_owned);
    }
    config
        .service_config()
        .and_then(|conf| {
            conf.load_config(
                aws_types::service_config::ServiceConfigKey::builder()
                    .service_id("S3")
                    .env("AWS_ENDPOINT_URL")
                    .profile("endpoint_url")
                    .build()
                    .ok()?,
            )
        })
        .or_else(|| config.endpoint_url().map(str::to_owned))
}

/// Where requests go, for people: the endpoint (credentials redacted) or
/// `AWS S3`, with the region and the addressing style.
pub fn describe_context(config: &aws_config::SdkConfig, path_style: bool) -> String {
    let region = config.region().map(|r| r.as_ref()).unwrap_or("no region");
    let style = if path_style {
        "path-style"
    } else {
        "virtual-host"
    };
    match resolved_endpoint(config) {
        Some(e) => format!("{} (region {region}, {style})", redact_url(&e).0),
        None => format!("AWS S3 (region {region}, {style})"),
    }
}

/// The CA bundle to trust besides the system's roots, as the aws CLI finds
/// it: `AWS_CA_BUNDLE`, else `ca_bundle` in the selected profile. Returns its
/// path and PEM contents, `None` when none is configured; an error (a
/// sentence) when one is configured but cannot be read.
async fn ca_bundle(profile: Option<&str>) -> Result<Option<(String, Vec<u8>)>, String> {
    let path = match std::env::var("AWS_CA_BUNDLE") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            let set = aws_config::profile::load(
                &aws_types::os_shim_internal::Fs::real(),
                &aws_types::os_shim_internal::Env::real(),
                &Default::default(),
                profile.map(|p| std::borrow::Cow::Owned(p.to_owned())),
            )
            .await
            .ok();
            set.and_then(|s| s.get("ca_bundle").map(str::to_owned))
        }
    };
    let Some(path) = path else { return Ok(None) };
    // A regular file (links followed: bundles often are links), read bounded.
    let read = |p: &str| -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        crate::store::local::read_capped(&mut f, 4 << 20)
    };
    let pem = read(&path).map_err(|e| {
        format!(
            "the CA bundle {} (AWS_CA_BUNDLE or the profile's ca_bundle) cannot be read: {e}",
            crate::text::sanitize(&path)
        )
    })?;
    Ok(Some((path, pem)))
}

/// Whether the selected profile asks for path-style addressing, as the aws
/// CLI reads it: `s3 =` followed by an indented `addressing_style = path`.
pub async fn profile_wants_path_style(profile: Option<&str>) -> bool {
    profile_wants_path_style_in(
        &aws_types::os_shim_internal::Fs::real(),
        &aws_types::os_shim_internal::Env::real(),
        profile,
    )
    .await
}

async fn profile_wants_path_style_in(
    fs: &aws_types::os_shim_internal::Fs,
    env: &aws_types::os_shim_internal::Env,
    profile: Option<&str>,
) -> bool {
    let Ok(set) = aws_config::profile::load(
        fs,
        env,
        &Default::default(),
        profile.map(|p| std::borrow::Cow::Owned(p.to_owned())),
    )
    .await
    else {
        return false;
    };
    set.get("s3").is_some_and(|block| {
        block.lines().any(|l| {
            l.split_once('=').is_some_and(|(k, v)| {
                k.trim() == "addressing_style" && v.trim().eq_ignore_ascii_case("path")
            })
        })
    })
}

/// The HTTPS client of every S3 request, and of the credential and region
/// providers (SSO, STS, IMDS), which take theirs from the loader: hyper 1 with
/// rustls on the `ring` crypto provider, trusting the system's roots and, when
/// given, the certificates of a CA bundle (its path, its PEM). Proxies come
/// from `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`, as with the SDK's own default
/// client.
fn https_client(
    ca: Option<(&str, &[u8])>,
) -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::{proxy::ProxyConfig, tls, ConnectorBuilder};
    let mut store = tls::TrustStore::default();
    if let Some((_, pem)) = ca {
        store = store.with_pem_certificate(pem.to_vec());
    }
    let ctx = tls::TlsContext::builder()
        .with_trust_store(store)
        .build()
        .unwrap_or_else(|e| {
            let path = ca
                .map(|(path, _)| crate::text::sanitize(path))
                .unwrap_or_default();
            tracing::error!(
                "the CA bundle {path} could not be used ({e}); connections use the system's roots"
            );
            tls::TlsContext::default()
        });
    aws_smithy_http_client::Builder::new().build_with_connector_fn(move |settings, components| {
        let mut conn = ConnectorBuilder::default()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .tls_context(ctx.clone());
        conn.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            conn.set_sleep_impl(components.sleep_impl());
        }
        conn.set_proxy_config(Some(ProxyConfig::from_env()));
        conn.build()
    })
}

/// Loads the AWS SDK configuration for `opts` (credential chain, region, endpoint, timeouts).
pub async fn shared_config(opts: &S3Options) -> aws_config::SdkConfig {
    use aws_config::meta::region::RegionProviderChain;
    use aws_config::BehaviorVersion;

    let ca = match ca_bundle(opts.profile.as_deref()).await {
        Ok(ca) => ca,
        Err(e) => {
            tracing::error!("{e}; connections use the system's roots");
            None
        }
    };
    let http = https_client(
        ca.as_ref()
            .map(|(path, pem)| (path.as_str(), pem.as_slice())),
    );
    // The default region chain (environment, profile, IMDS), its IMDS client
    // given the HTTP client: this build has no SDK default client.
    let imds = aws_config::imds::region::ImdsRegionProvider::builder()
        .configure(
            &aws_config::provider_config::ProviderConfig::without_region()
                .with_http_client(http.clone()),
        )
        .build();
    let region =
        RegionProviderChain::first_try(opts.region.clone().map(aws_sdk_s3::config::Region::new))
            .or_else(aws_config::environment::region::EnvironmentVariableRegionProvider::new())
            .or_else(aws_config::profile::region::ProfileFileRegionProvider::builder().build())
            .or_else(imds)
            .or_else(aws_sdk_s3::config::Region::new("us-east-1"));
    let attempt = opts.request_timeout.unwrap_or(Duration::from_secs(10));
    let attempts = opts.max_attempts.unwrap_or(2).max(1);
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(region)
        .http_client(http)
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(attempt.min(Duration::from_secs(5)))
                .operation_attempt_timeout(attempt)
                .operation_timeout(attempt * attempts + Duration::from_secs(1))
                .build(),
        )
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(attempts));
    if let Some(p) = &opts.profile {
        loader = loader.profile_name(p);
    }
    if let Some(e) = &opts.endpoint_url {
        loader = loader.endpoint_url(e);
    }
    loader.load().await
}

fn to_chrono(d: &aws_sdk_s3::primitives::DateTime) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(d.secs(), d.subsec_nanos())
}

#[async_trait]
impl ObjectRead for S3Store {
    fn describe(&self) -> String {
        format!("s3://{} at {}", self.bucket, self.endpoint)
    }

    fn server_offset(&self) -> Option<ServerOffset> {
        self.clock
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .offset
    }

    fn server_clock_problem(&self) -> Option<String> {
        self.clock
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .problem
            .clone()
    }

    fn endpoint_info(&self) -> super::EndpointInfo {
        super::EndpointInfo {
            url: self.endpoint_url.clone(),
            region: self.region.clone(),
            addressing_style: Some(if self.path_style {
                super::AddressingStyle::Path
            } else {
                super::AddressingStyle::VirtualHost
            }),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Listing, StoreError> {
        let mut out = Listing::default();
        let mut token = None;
        let mut seen = super::TokenTrail::default();
        loop {
            let (page, next) = self.list_page(prefix, token).await?;
            out.prefixes.extend(page.prefixes);
            out.objects.extend(page.objects);
            out.unlisted.extend(page.unlisted);
            match next {
                Some(t) => {
                    seen.check(&t, prefix)?;
                    token = Some(t)
                }
                None => break,
            }
        }
        out.prefixes.sort();
        out.prefixes.dedup();
        out.objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Listing, Option<String>), StoreError> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .delimiter("/")
            // Keys may hold characters XML cannot carry (control characters):
            // ask for URL-encoded keys and decode them.
            .encoding_type(aws_sdk_s3::types::EncodingType::Url)
            .set_continuation_token(token.clone())
            .send()
            .await
            .map_err(|e| self.classify(e))?;
        let encoded = page.encoding_type() == Some(&aws_sdk_s3::types::EncodingType::Url);
        let key = |k: &str| {
            if encoded {
                decode_key(k)
            } else {
                Ok(k.to_owned())
            }
        };
        let mut out = Listing::default();
        for cp in page.common_prefixes() {
            if let Some(p) = cp.prefix() {
                match key(p) {
                    Ok(p) => out.prefixes.push(p),
                    Err(raw) => out
                        .unlisted
                        .push(crate::store::Unlisted::not_utf8(&raw, "key prefix")),
                }
            }
        }
        for o in page.contents() {
            // A key that is not UTF-8 cannot be a LEASE (see `Listing::unlisted`).
            if let Some(Ok(k)) = o.key().map(key) {
                out.objects.push(ObjectMeta {
                    key: k,
                    etag: o.e_tag().map(normalize_etag),
                    last_modified: o.last_modified().and_then(to_chrono),
                    size: o.size().unwrap_or(0).max(0) as u64,
                });
            }
        }
        out.confine(prefix);
        // A service that says "truncated" but gives no token to go on with,
        // or gives back the token it was sent, cannot be listed to the end:
        // an error, never a listing cut short in silence.
        let next = match (page.is_truncated(), page.next_continuation_token()) {
            (Some(true), Some(t)) if Some(t) == token.as_deref() => {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" cannot be completed: the service answered \
                     a truncated page with the continuation token it was sent (it would repeat \
                     for ever); the listing is incomplete",
                    crate::text::sanitize(prefix)
                )))
            }
            (Some(true), Some(t)) if !t.is_empty() => Some(t.to_owned()),
            (Some(true), _) => {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" cannot be completed: the service says the page \
                     is truncated but gives no continuation token; the listing is incomplete",
                    crate::text::sanitize(prefix)
                )))
            }
            _ => None,
        };
        Ok((out, next))
    }

    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        self.get_object(key, if_none_match, None).await
    }

    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        self.get_object(key, None, Some(version_id)).await
    }

    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        // The status as the service states it; a service whose answer does
        // not parse (moto names its root element differently) is judged by
        // the versions it lists: ids other than "null" exist only where
        // versioning is or was on.
        let stated = self
            .client
            .get_bucket_versioning()
            .bucket(&self.bucket)
            .send()
            .await
            .ok()
            .map(|s| match s.status() {
                Some(aws_sdk_s3::types::BucketVersioningStatus::Enabled) => Versioning::Enabled,
                Some(aws_sdk_s3::types::BucketVersioningStatus::Suspended) => Versioning::Suspended,
                _ => Versioning::Off,
            });
        let mut requests = 1;
        let mut newest_first = Vec::new();
        let (mut key_marker, mut version_marker): (Option<String>, Option<String>) = (None, None);
        let mut seen = super::TokenTrail::default();
        loop {
            let page = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(key)
                .set_key_marker(key_marker.clone())
                .set_version_id_marker(version_marker.clone())
                .send()
                .await
                .map_err(|e| self.classify(e))?;
            requests += 1;
            let mut page_versions: Vec<(String, ObjectVersion)> = Vec::new();
            for v in page.versions() {
                page_versions.push((
                    v.key().unwrap_or_default().to_owned(),
                    ObjectVersion {
                        version_id: v.version_id().unwrap_or("null").to_owned(),
                        last_modified: v.last_modified().and_then(to_chrono),
                        etag: v.e_tag().map(normalize_etag),
                        size: v.size().unwrap_or(0).max(0) as u64,
                        delete_marker: false,
                    },
                ));
            }
            for m in page.delete_markers() {
                page_versions.push((
                    m.key().unwrap_or_default().to_owned(),
                    ObjectVersion {
                        version_id: m.version_id().unwrap_or("null").to_owned(),
                        last_modified: m.last_modified().and_then(to_chrono),
                        etag: None,
                        size: 0,
                        delete_marker: true,
                    },
                ));
            }
            // Newest first within the key, as the service lists them; a delete
            // marker and a version are merged by time (newest first).
            page_versions.retain(|(k, _)| k == key);
            page_versions.sort_by_key(|v| std::cmp::Reverse(v.1.last_modified));
            newest_first.extend(page_versions.into_iter().map(|(_, v)| v));
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
            let token = format!(
                "{}\0{}",
                key_marker.as_deref().unwrap_or_default(),
                version_marker.as_deref().unwrap_or_default()
            );
            seen.check(&token, key)?;
        }
        newest_first.reverse();
        // Stable by time: equal times keep the service's order.
        newest_first.sort_by_key(|v| v.last_modified);
        let versioning = stated.unwrap_or(if newest_first.iter().any(|v| v.version_id != "null") {
            Versioning::Enabled
        } else {
            Versioning::Off
        });
        Ok(KeyVersions {
            versioning,
            versions: newest_first,
            requests,
        })
    }
}

impl S3Store {
    /// GET of `key` (one version of it when `version_id` is given), the body
    /// bounded and read under the request deadline.
    async fn get_object(
        &self,
        key: &str,
        if_none_match: Option<&str>,
        version_id: Option<&str>,
    ) -> Result<GetOutput, StoreError> {
        let mut req = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_owned));
        if let Some(e) = if_none_match {
            req = req.if_none_match(quote(e));
        }
        let out = req.send().await.map_err(|e| self.classify(e))?;
        let meta = ObjectMeta {
            key: key.to_owned(),
            etag: out.e_tag().map(normalize_etag),
            last_modified: out.last_modified().and_then(to_chrono),
            size: out.content_length().unwrap_or(0).max(0) as u64,
        };
        let mut stream = out.body;
        // The body is read under the same deadline as one attempt: a service
        // that sends the headers and then stalls is a timeout, never a hang.
        let read = tokio::time::timeout(self.timeout, async {
            let mut body = Vec::new();
            loop {
                match stream.try_next().await {
                    Ok(Some(chunk)) => {
                        let room = (MAX_BODY_BYTES + 1).saturating_sub(body.len());
                        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        if body.len() > MAX_BODY_BYTES {
                            break; // enough to know it is too large; drop the rest
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        return Err(StoreError::Transport {
                            endpoint: self.endpoint.clone(),
                            message: format!("reading the body of {key}: {e}"),
                        })
                    }
                }
            }
            Ok(body)
        })
        .await;
        let body = match read {
            Ok(body) => body?,
            Err(_) => {
                return Err(StoreError::Timeout(
                    self.timeout,
                    format!(
                        "{} ({}), reading the body of {key}",
                        self.endpoint, self.bucket
                    ),
                ))
            }
        };
        Ok(GetOutput {
            meta,
            body,
            problem: None,
        })
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    async fn put(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(body));
        match &condition {
            PutCondition::None => {}
            PutCondition::IfNoneMatch => req = req.if_none_match("*"),
            PutCondition::IfMatch(e) => {
                super::check_if_match(e)?;
                req = req.if_match(self.if_match_value(e))
            }
        }
        let out = req.send().await.map_err(|e| self.classify(e))?;
        Ok(out.e_tag().map(normalize_etag))
    }

    async fn delete(&self, key: &str, if_match: Option<&str>) -> Result<(), StoreError> {
        let mut req = self.client.delete_object().bucket(&self.bucket).key(key);
        if let Some(e) = if_match {
            super::check_if_match(e)?;
            req = req.if_match(self.if_match_value(e));
        }
        req.send().await.map_err(|e| self.classify(e))?;
        Ok(())
    }

    fn capabilities(&self) -> Capabilities {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_capabilities(&self, caps: Capabilities) -> bool {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner()) = caps;
        true
    }
}

fn quote(etag: &str) -> String {
    format!("\"{etag}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_profile_can_ask_for_path_style() {
        use aws_types::os_shim_internal::{Env, Fs};
        let config = "[profile minio]\ns3 =\n  addressing_style = path\n\n[profile aws]\nregion = eu-west-1\n";
        let fs = Fs::from_slice(&[("/home/u/.aws/config", config)]);
        let env = Env::from_slice(&[("HOME", "/home/u")]);
        assert!(profile_wants_path_style_in(&fs, &env, Some("minio")).await);
        assert!(!profile_wants_path_style_in(&fs, &env, Some("aws")).await);
        assert!(!profile_wants_path_style_in(&fs, &env, None).await);
    }

    #[test]
    fn endpoint_credentials_are_redacted() {
        let (shown, secrets) = redact_url("http://user:supersecret@127.0.0.1:9000/?token=abcdef");
        assert_eq!(shown, "http://***:***@127.0.0.1:9000/?***");
        assert!(!shown.contains("supersecret") && !shown.contains("abcdef"));
        assert_eq!(
            scrub(
                "GET http://user:supersecret@h/?token=abcdef failed".into(),
                &secrets
            ),
            "GET http://***:***@h/?*** failed"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9000").0,
            "http://127.0.0.1:9000"
        );
    }

    #[test]
    fn endpoints_that_are_not_plain_urls_are_redacted_too() {
        for (raw, secret) in [
            ("minio.internal:secretpass@x", "secretpass"),
            ("https://h:9000#secretfrag", "secretfrag"),
            (
                "https://h:9000/?X-Amz-Security-Token=secrettoken",
                "secrettoken",
            ),
            ("http://AKIA:abc@h:9000/", "abc"),
        ] {
            let (shown, secrets) = redact_url(raw);
            assert!(!shown.contains(secret), "{raw} → {shown}");
            assert!(shown.contains("***"), "{raw} → {shown}");
            let msg = scrub(format!("failed for {raw}"), &secrets);
            assert!(!msg.contains(secret), "{msg}");
        }
        assert_eq!(redact_url("minio.internal:secretpass@x").0, "***:***@x");
        assert_eq!(
            redact_url("https://h:9000#secretfrag").0,
            "https://h:9000#***"
        );
    }

    #[test]
    fn dns_failures_name_the_host_asked_for() {
        let dns = "dispatch failure: io error: dns error: failed to lookup address information";
        // AWS's own endpoint: its real host, no --path-style hint.
        let m = classify_transport(
            dns,
            "AWS S3 (us-east-1)",
            "bkt.s3.us-east-1.amazonaws.com",
            false,
            false,
        );
        assert!(
            m.contains("cannot resolve the host name bkt.s3.us-east-1.amazonaws.com"),
            "{m}"
        );
        assert!(
            !m.contains("--path-style") && !m.contains("AWS S3 ("),
            "{m}"
        );
        // A custom endpoint with virtual hosts: the hint.
        let m = classify_transport(
            dns,
            "http://minio.internal:9000",
            "bkt.minio.internal",
            true,
            false,
        );
        assert!(
            m.contains("bkt.minio.internal") && m.contains("--path-style"),
            "{m}"
        );
    }

    /// A service that sends an answer's headers and part of its body, then
    /// nothing: `get` gives up at the request deadline with a timeout (the
    /// SDK's stalled-stream watch, now off, waited 20 s).
    #[tokio::test]
    async fn a_body_that_stalls_is_a_timeout_at_the_deadline() {
        use aws_sdk_s3::config::{Credentials, Region, SharedCredentialsProvider};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before its request ended");
                seen.extend_from_slice(&buf[..n]);
            }
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"abc\"\r\n\
                  Content-Type: application/json\r\n\r\n{\"instance_id\":",
            )
            .await
            .unwrap();
            conn.flush().await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(conn);
        });
        let config = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(format!("http://127.0.0.1:{port}"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "AKIDTEST",
                "test-secret",
                None,
                None,
                "test",
            )))
            .build();
        let opts = S3Options {
            path_style: true,
            request_timeout: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let store = S3Store::with_config(&config, "bkt", &opts);
        let t0 = std::time::Instant::now();
        let got = store.get("p/LEASE", None).await;
        let took = t0.elapsed();
        server.abort();
        assert!(
            matches!(&got, Err(StoreError::Timeout(d, _)) if *d == Duration::from_secs(1)),
            "{got:?}"
        );
        assert!(took < Duration::from_secs(5), "gave up after {took:?}");
        let msg = got.unwrap_err().to_string();
        assert!(msg.contains("reading the body of p/LEASE"), "{msg}");
    }

    #[test]
    fn listed_keys_are_url_decoded() {
        assert_eq!(decode_key("esc%1Bx/").unwrap(), "esc\u{1b}x/");
        assert_eq!(decode_key("a+b%2Bc/").unwrap(), "a b+c/");
        // Bytes that are not UTF-8 are given back as bytes, never as U+FFFD
        // (a key that would name another object).
        assert_eq!(decode_key("bad%FFutf8/").unwrap_err(), b"bad\xffutf8/");
        let u = crate::store::Unlisted::not_utf8(b"bad\xffutf8/", "key prefix");
        assert_eq!(u.prefix, "bad\u{fffd}utf8/");
        assert!(
            u.problem.contains("(0xFF at byte 3; shown as U+FFFD)"),
            "{}",
            u.problem
        );
        let u = crate::store::Unlisted::not_utf8(b"a\xc0\x80b\xff/", "directory");
        assert!(
            u.problem.contains("(0xC0 0x80 at byte 1, 0xFF at byte 4;"),
            "{}",
            u.problem
        );
    }
}
