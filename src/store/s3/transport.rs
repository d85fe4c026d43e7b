//! A request that got no answer, as one readable sentence: the cause (no
//! credentials, an unknown profile, DNS, TLS, a refused connection, a
//! timeout) and what to do, from the error's chain of causes.

use crate::text::sanitize;

/// How a missing-credentials sentence starts.
pub(super) const CREDENTIALS: &str = "unable to locate credentials";

/// The sentence for a transport failure described by `all` (the causes'
/// texts joined), talking to `endpoint` (as shown) at the host name
/// `request_host` (the bucket in it under virtual-host addressing);
/// `custom`: an endpoint was configured (not AWS's own).
pub(super) fn classify_transport(
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
    // A provider that failed rather than found nothing (instance metadata
    // answering 403, a container endpoint refusing): still no credentials.
    if all.contains("loading credentials") || all.contains("IMDS") {
        return format!(
            "{CREDENTIALS} (the last source tried failed: {}); set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, or name a profile with --profile / AWS_PROFILE",
            sanitize(&first_sentence(all))
        );
    }
    if let Some(i) = all.find("profile") {
        if all[i..].contains("not defined")
            || all[i..].contains("could not be found")
            || all.contains("ProfileFile")
        {
            return format!(
                "the AWS profile could not be used: {}; check --profile / AWS_PROFILE against ~/.aws/config",
                sanitize(all)
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
            sanitize(request_host)
        );
    }
    if all.contains("UnknownIssuer")
        || all.contains("invalid peer certificate")
        || all.contains("certificate")
    {
        return format!(
            "TLS: the certificate of {host} is not trusted ({}); for a private CA set AWS_CA_BUNDLE to its PEM file",
            sanitize(&first_sentence(all))
        );
    }
    if all.contains("Connection refused") {
        return format!("connection refused by {host}: nothing listens at {endpoint}; check --endpoint-url and that the service runs");
    }
    if all.contains("timed out") || all.contains("Timeout") {
        return format!("no answer from {endpoint} in time; check the network, or raise --timeout");
    }
    sanitize(&first_sentence(all))
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
