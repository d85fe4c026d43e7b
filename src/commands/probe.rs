//! `leasectl probe`: does the service really honour If-None-Match and If-Match?

use crate::app::Context;
use crate::bucket::probe::{probe_scratch, PreconditionReport};
use crate::cli::ProbeArgs;
use crate::exit::Exit;
use crate::store::{ObjectStore, StoreError};
use crate::text::sanitize;

/// `leasectl probe TARGET`: exit 0 conditional, 3 not, 1 failed, 2 usage.
pub async fn run(a: &ProbeArgs, ctx: &Context) -> Exit {
    let target = match crate::app::target_or_usage(&a.target) {
        Ok(t) => t,
        Err(exit) => return exit,
    };
    let store = match ctx.connector.open(&target).await {
        Ok(s) => s,
        Err(e) => return crate::app::fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    probe(
        store.as_ref(),
        target.prefix(),
        a.json,
        &mut std::io::stdout(),
    )
    .await
}

/// `leasectl probe --json`: the document printed.
#[derive(serde::Serialize)]
struct ProbeJson<'a> {
    schema: &'static str,
    service: String,
    /// The endpoint URL (credentials `***`); null for AWS's own endpoint of
    /// `region`, and for a local store.
    endpoint: Option<String>,
    /// The region requests are signed for (null for a local store).
    region: Option<String>,
    /// `path` or `virtual_host` (null for a local store).
    addressing_style: Option<crate::store::AddressingStyle>,
    scratch_key: &'a str,
    /// `conditional`, `not_conditional`, `unsupported`, `not_permitted`, `failed`.
    verdict: &'static str,
    exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a PreconditionReport>,
    adaptations: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs the probe on the scratch key under `root` and prints the findings
/// (as text, or as one JSON document with `json`). Returns the exit code: 0
/// conditional (perhaps with adaptations, each named), 3 a precondition
/// ignored or conditional writes not supported, 1 not permitted or unreachable.
pub async fn probe(
    store: &dyn ObjectStore,
    root: &str,
    json: bool,
    out: &mut impl std::io::Write,
) -> Exit {
    let key = crate::bucket::probe::scratch_key(root);
    if !json {
        let _ = writeln!(out, "probing {} with scratch key {key}", store.describe());
    }
    let result = probe_scratch(store, &key, &crate::clock::SystemClock::new()).await;
    let (verdict, code, text, error) = match &result {
        Ok(report) => {
            let (v, c, t) = if let Some(h) = report.unsupported() {
                (
                    "unsupported",
                    Exit::Attention,
                    format!(
                        "this service does not support conditional writes (it refuses {h} itself) — \
                         a lease here excludes nobody; only best-effort mode ({}) can run",
                        crate::bucket::CONDITIONAL_SWITCH
                    ),
                )
            } else if let Some(h) = report.ignored_header() {
                (
                    "not_conditional",
                    Exit::Attention,
                    format!(
                        "ignores {h} — a lease here excludes nobody; only best-effort mode ({}) can run",
                        crate::bucket::CONDITIONAL_SWITCH
                    ),
                )
            } else if report.adaptations().is_empty() {
                (
                    "conditional",
                    Exit::Ok,
                    "conditional — a lease here excludes a second writer".to_owned(),
                )
            } else {
                (
                    "conditional",
                    Exit::Ok,
                    "conditional with the adaptations above — a lease here excludes a second writer"
                        .to_owned(),
                )
            };
            (v, c, t, None)
        }
        Err(StoreError::AccessDenied(m)) => (
            "not_permitted",
            Exit::Failed,
            format!(
                "not permitted — the credentials may not write {key} ({})",
                sanitize(m)
            ),
            Some(format!("access denied: {}", sanitize(m))),
        ),
        Err(StoreError::NotImplemented(m)) => (
            "unsupported",
            Exit::Attention,
            format!(
                "this service does not support conditional writes ({})",
                sanitize(m)
            ),
            Some(format!("not implemented: {}", sanitize(m))),
        ),
        Err(e) => (
            "failed",
            Exit::Failed,
            format!("probe failed: {e}"),
            Some(e.to_string()),
        ),
    };
    if json {
        let info = store.endpoint_info();
        let doc = ProbeJson {
            schema: "leasectl-probe/1",
            service: store.describe(),
            endpoint: info.url,
            region: info.region,
            addressing_style: info.addressing_style,
            scratch_key: &key,
            verdict,
            exit_code: code.code(),
            report: result.as_ref().ok(),
            adaptations: result.as_ref().map(|r| r.adaptations()).unwrap_or_default(),
            error,
        };
        match crate::text::to_json_pretty(&doc) {
            Ok(t) => {
                let _ = writeln!(out, "{t}");
            }
            Err(e) => {
                let _ = writeln!(out, "{{\"error\": \"{e}\"}}");
                return Exit::Failed;
            }
        }
        return code;
    }
    if let Ok(report) = &result {
        print_report(report, out);
    }
    let _ = writeln!(out, "verdict: {text}");
    code
}

fn print_report(r: &PreconditionReport, out: &mut impl std::io::Write) {
    for (i, s) in r.steps.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, s.line());
    }
    let _ = writeln!(out, "  etag_form: {}", r.etag_form.as_str());
    let _ = writeln!(out, "  release:   {}", r.release);
    for a in r.adaptations() {
        let _ = writeln!(out, "  adapted:   {a}");
    }
    for c in &r.changed {
        let _ = writeln!(out, "  changed:   {c}");
    }
}
