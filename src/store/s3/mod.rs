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
use aws_smithy_types::retry::RetryConfig;
use chrono::{DateTime, Utc};

use crate::clock::ServerOffset;

use super::{
    normalize_etag, Capabilities, EtagForm, GetOutput, KeyVersions, Listing, ObjectMeta,
    ObjectRead, ObjectStore, PutCondition, StoreError, MAX_BODY_BYTES,
};
use crate::store::Unlisted;
use crate::text::sanitize;

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
    /// Path-style addressing as the SDK uses it ([`config::addressing_used`]):
    /// asked for, or forced by the endpoint or the bucket's name.
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

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .finish()
    }
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
            // What the SDK really does: path-style for an IP address or a
            // bucket that cannot be a host name, even when not asked for.
            path_style: config::addressing_used(
                resolved_endpoint(config).as_deref(),
                bucket,
                opts.path_style,
            ) == super::AddressingStyle::Path,
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
        if self.path_style {
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
                sanitize(p)
            ),
            _ => m,
        }
    }
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
        self.clock.offset()
    }

    fn server_clock_problem(&self) -> Option<String> {
        self.clock.problem()
    }

    /// Every answer carries the service's `Date`.
    fn has_clock(&self) -> bool {
        true
    }

    /// Nothing tells at no cost that a bucket cannot be used: a request does.
    fn unavailable(&self) -> Option<StoreError> {
        None
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
        let mut bound = super::ListBound::under(prefix, self.timeout);
        loop {
            let (page, next) = bound.page(self.list_page(prefix, token)).await?;
            let entries = page.prefixes.len() + page.objects.len() + page.unlisted.len();
            out.prefixes.extend(page.prefixes);
            out.objects.extend(page.objects);
            out.unlisted.extend(page.unlisted);
            match next {
                Some(t) => {
                    bound.follow(entries, &t)?;
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
                    Err(raw) => out.unlisted.push(Unlisted::not_utf8(&raw, "key prefix")),
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
                    sanitize(prefix)
                )))
            }
            (Some(true), Some(t)) if !t.is_empty() => Some(t.to_owned()),
            (Some(true), _) => {
                return Err(StoreError::Invalid(format!(
                    "the listing under \"{}\" cannot be completed: the service says the page \
                     is truncated but gives no continuation token; the listing is incomplete",
                    sanitize(prefix)
                )))
            }
            _ => None,
        };
        Ok((out, next))
    }

    async fn get(&self, key: &str, if_none_match: Option<&str>) -> Result<GetOutput, StoreError> {
        self.get_object(key, if_none_match, None).await
    }

    async fn sample_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let page = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .max_keys(super::SAMPLE_KEYS as i32)
            .encoding_type(aws_sdk_s3::types::EncodingType::Url)
            .send()
            .await
            .map_err(|e| self.classify(e))?;
        let encoded = page.encoding_type() == Some(&aws_sdk_s3::types::EncodingType::Url);
        Ok(page
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .filter_map(|k| {
                if encoded {
                    decode_key(k).ok()
                } else {
                    Some(k.to_owned())
                }
            })
            .filter(|k| k.starts_with(prefix))
            .take(super::SAMPLE_KEYS)
            .collect())
    }

    async fn get_version(&self, key: &str, version_id: &str) -> Result<GetOutput, StoreError> {
        self.get_object(key, None, Some(version_id)).await
    }

    async fn list_versions(&self, key: &str) -> Result<KeyVersions, StoreError> {
        self.key_versions(key).await
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
            links: None,
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
        self.put_attempts(key, body, condition, None).await
    }

    async fn put_once(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
    ) -> Result<Option<String>, StoreError> {
        let once = aws_sdk_s3::config::Builder::default().retry_config(RetryConfig::disabled());
        self.put_attempts(key, body, condition, Some(once)).await
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

impl S3Store {
    /// A PUT of `body` at `key` under `condition`, with the client's retries
    /// unless `config` overrides them.
    async fn put_attempts(
        &self,
        key: &str,
        body: Vec<u8>,
        condition: PutCondition,
        config: Option<aws_sdk_s3::config::Builder>,
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
        let out = match config {
            Some(c) => req.customize().config_override(c).send().await,
            None => req.send().await,
        }
        .map_err(|e| self.classify(e))?;
        Ok(out.e_tag().map(normalize_etag))
    }
}

fn quote(etag: &str) -> String {
    format!("\"{etag}\"")
}

mod config;
mod service_clock;
#[cfg(test)]
mod tests;
mod transport;
mod versions;

pub use config::{addressing_used, shared_config};
pub(crate) use config::{
    describe_context, profile_wants_path_style, redact_url, redact_userinfo, resolved_endpoint,
};
use config::{https_client, scrub};
use service_clock::ServerClock;
use transport::{classify_transport, CREDENTIALS};
