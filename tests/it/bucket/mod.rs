//! Bucket leases against real servers: the engine, the fence, generations, own writes, the race probe, `probe` and `bucket hold` as run, containment, TLS.

mod adoption;
mod clock_offset;
mod commands;
mod confirm;
mod containment;
mod engine;
mod fence_faults;
mod fence_fd;
mod fence_soak;
mod generation;
mod generation_outputs;
mod own_writes;
mod race;
mod signals;
mod tls;

/// `leasectl --endpoint-url ENDPOINT --path-style bucket hold URL -- touch
/// MARKER`: a hold whose command leaves `marker` behind once it ran.
fn hold_touching(endpoint: &str, url: &str, marker: &std::path::Path) -> std::process::Command {
    let mut c = hold_on(endpoint, url);
    c.args(["--", "touch"]).arg(marker);
    c
}

/// `leasectl --endpoint-url ENDPOINT --path-style bucket hold URL`, to which
/// the caller adds options and the command.
fn hold_on(endpoint: &str, url: &str) -> std::process::Command {
    let mut c = crate::common::bin();
    c.args([
        "--endpoint-url",
        endpoint,
        "--path-style",
        "bucket",
        "hold",
        url,
    ]);
    c
}

/// How many runs a long test makes: the number in the environment variable
/// `var`, or `default` where it is unset or not a number.
fn runs_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
