//! The tools the monitoring tests share (issue 49 §4), each defined once.

use std::process::Output;

use serde_json::Value;

use crate::common::cli::text;
use crate::common::proxy::Proxy;

/// The `--json` document `out` printed, after asserting that it exited 1
/// with its first target's error saying `cause` and that it is incomplete.
/// `ctx` (`"depth 2: "`, or empty) starts every message.
pub(crate) fn assert_incomplete(out: &Output, ctx: &str, cause: &str) -> Value {
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{ctx}{e}: {}", text(&out.stderr)));
    assert_eq!(out.status.code(), Some(1), "{ctx}{doc:#}");
    let error = doc["targets"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(cause) && error.contains("incomplete"),
        "{ctx}{doc:#}"
    );
    doc
}

/// `--endpoint-url PROXY --path-style` and then `rest`.
pub(crate) fn through(proxy: &Proxy, rest: &[&str]) -> Vec<String> {
    let mut v = vec![
        "--endpoint-url".to_owned(),
        proxy.endpoint(),
        "--path-style".into(),
    ];
    v.extend(rest.iter().map(|s| (*s).to_owned()));
    v
}
