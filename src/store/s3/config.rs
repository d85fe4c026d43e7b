//! Reaching the service: the SDK configuration (endpoint, region, profile,
//! timeouts, retries, a CA bundle), the endpoint requests really go to, and
//! the redaction of credentials in URLs before anything is shown.

use std::time::Duration;

use super::S3Options;
use crate::store::local::read_capped;
use crate::store::AddressingStyle;
use crate::text::sanitize;

/// Text that may carry credentials in a URL's user information
/// (`scheme://user:password@host/…`, or `user:password@host` without a
/// scheme) with that part shown as `***` (`***:***` when it had a password).
/// Returns the shown form, and the user and password removed. Works on text
/// that is not a valid URL too: a TARGET or an endpoint that failed to parse
/// is shown through this.
pub(crate) fn redact_userinfo(raw: &str) -> (String, Vec<String>) {
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
pub(crate) fn redact_url(raw: &str) -> (String, Vec<String>) {
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
pub(super) fn scrub(text: String, secrets: &[String]) -> String {
    secrets.iter().fold(text, |t, s| {
        if t.contains(s.as_str()) {
            t.replace(s.as_str(), "***")
        } else {
            t
        }
    })
}

/// The endpoint S3 requests actually go to, resolved as the SDK resolves it:
/// `--endpoint-url` (or `AWS_ENDPOINT_URL`) given to the client, else the
/// S3-specific setting (`AWS_ENDPOINT_URL_S3`, or `endpoint_url` in the
/// profile's `services` section), else the general one; `None`: AWS itself.
pub(crate) fn resolved_endpoint(config: &aws_config::SdkConfig) -> Option<String> {
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

/// The addressing the SDK uses for `bucket` at `endpoint` (`None`: AWS's
/// own) when `path_style` is asked for or not, by the rules of the S3
/// endpoint resolver: path-style when asked, when the endpoint's host is an
/// IP address (no bucket can go in front of it), or when the bucket cannot
/// be a host name label (upper case, `_`, fewer than 3 or more than 63
/// characters, dots over https); virtual-host otherwise.
pub fn addressing_used(endpoint: Option<&str>, bucket: &str, path_style: bool) -> AddressingStyle {
    use crate::store::AddressingStyle::{Path, VirtualHost};
    if path_style {
        return Path;
    }
    let url = endpoint.and_then(|e| url::Url::parse(e).ok());
    let ip = url.as_ref().is_some_and(|u| {
        matches!(
            u.host(),
            Some(url::Host::Ipv4(_)) | Some(url::Host::Ipv6(_))
        )
    });
    let http = url.as_ref().is_some_and(|u| u.scheme() == "http");
    let label = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    let hostable = (3..=63).contains(&bucket.len())
        && bucket.parse::<std::net::Ipv4Addr>().is_err()
        && if bucket.contains('.') {
            http && bucket.split('.').all(label)
        } else {
            label(bucket)
        };
    if ip || !hostable {
        Path
    } else {
        VirtualHost
    }
}

/// Where requests for `bucket` go, for people: the endpoint (credentials
/// redacted) or `AWS S3`, with the region and the addressing the SDK uses
/// ([`addressing_used`]).
pub(crate) fn describe_context(
    config: &aws_config::SdkConfig,
    bucket: &str,
    path_style: bool,
) -> String {
    let region = config.region().map(|r| r.as_ref()).unwrap_or("no region");
    let endpoint = resolved_endpoint(config);
    let style = match addressing_used(endpoint.as_deref(), bucket, path_style) {
        AddressingStyle::Path => "path-style",
        AddressingStyle::VirtualHost => "virtual-host",
    };
    match endpoint {
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
        read_capped(&mut f, 4 << 20)
    };
    let pem = read(&path).map_err(|e| {
        format!(
            "the CA bundle {} (AWS_CA_BUNDLE or the profile's ca_bundle) cannot be read: {e}",
            sanitize(&path)
        )
    })?;
    Ok(Some((path, pem)))
}

/// Whether the selected profile asks for path-style addressing, as the aws
/// CLI reads it: `s3 =` followed by an indented `addressing_style = path`.
pub(crate) async fn profile_wants_path_style(profile: Option<&str>) -> bool {
    profile_wants_path_style_in(
        &aws_types::os_shim_internal::Fs::real(),
        &aws_types::os_shim_internal::Env::real(),
        profile,
    )
    .await
}

pub(super) async fn profile_wants_path_style_in(
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
pub(super) fn https_client(
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
            let path = ca.map(|(path, _)| sanitize(path)).unwrap_or_default();
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
