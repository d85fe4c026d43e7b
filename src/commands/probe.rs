//! `leasectl probe`: does the service really honour If-None-Match and If-Match?

use crate::bucket::error::{BEST_EFFORT, FAIL_CLOSED};
use crate::bucket::probe::{concurrent_key, probe_scratch, scratch_key, PreconditionReport};
use crate::bucket::race::{RaceReport, PROBE_ROUNDS};
use crate::bucket::{race, CONDITIONAL_SWITCH};
use crate::cli::ProbeArgs;
use crate::clock::SystemClock;
use crate::exit::say;
use crate::exit::Exit;
use crate::setup::fail;
use crate::setup::Shared;
use crate::stdout::Checked;
use crate::store::AddressingStyle;
use crate::store::{ObjectStore, StoreError};
use crate::supervise::Signals;
use crate::text::sanitize;
use crate::text::to_json_pretty;

/// `leasectl probe TARGET`: exit 0 conditional, 3 not, 1 failed, 2 usage.
pub(crate) async fn run(a: &ProbeArgs, shared: &Shared) -> Exit {
    let target = &a.target;
    let store = match shared.connector.open(target).await {
        Ok(s) => s,
        Err(e) => return fail(&color_eyre::eyre::eyre!("{target}: {e}")),
    };
    let mut out = Checked::new(std::io::stdout());
    let exit = probe_race(
        store.as_ref(),
        target.prefix(),
        a.json,
        a.race.map(usize::from),
        &mut out,
    )
    .await;
    out.finish(exit)
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
    addressing_style: Option<AddressingStyle>,
    scratch_key: &'a str,
    /// `conditional`, `not_conditional`, `unsupported`, `not_permitted`, `failed`.
    verdict: &'static str,
    exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a PreconditionReport>,
    /// `--race`: each primitive's rounds, winners per round, verdict; cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    race: Option<&'a RaceReport>,
    adaptations: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs the probe on the scratch key under `root` and prints the findings
/// (as text, or as one JSON document with `json`), then with `race = Some(n)`
/// (and only when no precondition is ignored or refused one request at a
/// time) the race probe ([`crate::bucket::race`]: [`PROBE_ROUNDS`] rounds of
/// `n` concurrent requests per primitive). Returns the exit code: 0
/// conditional (perhaps with adaptations, each named), 3 a precondition
/// ignored, conditional writes not supported, several winners of the eighth
/// step's creates or two winners in a round of the race (verdict
/// `not_atomic`), 1 not permitted or unreachable. Interrupted (SIGINT,
/// SIGTERM, SIGHUP, SIGUSR1, …), it removes its scratch keys and returns
/// 128 + the signal.
pub(crate) async fn probe_race(
    store: &dyn ObjectStore,
    root: &str,
    json: bool,
    race: Option<usize>,
    out: &mut impl std::io::Write,
) -> Exit {
    let key = scratch_key(root);
    if !json {
        let _ = writeln!(out, "probing {} with scratch key {key}", store.describe());
    }
    let work = async {
        let result = probe_scratch(store, &key, &SystemClock::new()).await;
        let raced = match (&result, race) {
            // Raced too when only the concurrent creates found it not
            // atomic: the rounds say more.
            (Ok(r), Some(n)) if r.ignored_header().is_none() && r.unsupported().is_none() => {
                Some(race::race(store, &key, n, PROBE_ROUNDS).await)
            }
            _ => None,
        };
        (result, raced)
    };
    let (result, raced) = tokio::select! {
        done = work => done,
        sig = interrupted() => return remove_after_interrupt(store, &key, sig).await,
    };
    let (result, raced) = match (result, raced) {
        (Ok(r), Some(Err(e))) => (Ok(r), Err(e)),
        (r, Some(Ok(x))) => (r, Ok(Some(x))),
        (r, _) => (r, Ok(None)),
    };
    let (verdict, code, text, error) = verdict_of(&result, &raced, &key);
    // The verdict is the report's last line (or its `verdict`); when it is
    // not 0, stderr says it too.
    if code != Exit::Ok {
        say(format!("probe of {}: {text}", store.describe()));
    }
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
            race: raced.as_ref().ok().and_then(|x| x.as_ref()),
            adaptations: result.as_ref().map(|r| r.adaptations()).unwrap_or_default(),
            error,
        };
        match to_json_pretty(&doc) {
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
    if let Ok(Some(r)) = &raced {
        print_race(r, out);
    }
    let _ = writeln!(out, "verdict: {text}");
    code
}

/// The probe's verdict from the steps' `result` and the race (`raced`):
/// the word for `--json`, the exit status, the sentence, and the error text.
fn verdict_of(
    result: &Result<PreconditionReport, StoreError>,
    raced: &Result<Option<RaceReport>, StoreError>,
    key: &str,
) -> (&'static str, Exit, String, Option<String>) {
    // The concurrent creates' finding, where no precondition is ignored or
    // refused one request at a time (that diagnosis is the more exact one).
    let steps_finding = result
        .as_ref()
        .ok()
        .filter(|r| r.ignored_header().is_none() && r.unsupported().is_none())
        .and_then(|r| r.not_atomic());
    let race_finding = raced
        .as_ref()
        .ok()
        .and_then(|x| x.as_ref()?.finding())
        .or(steps_finding);
    match &result {
        Ok(_) if race_finding.is_some() => (
            "not_atomic",
            Exit::Attention,
            format!(
                "not atomic — {}: a lease here excludes nobody, and an acquire refuses it \
             ({FAIL_CLOSED}). {BEST_EFFORT}",
                race_finding.clone().unwrap_or_default()
            ),
            None,
        ),
        Ok(_) if raced.is_err() => {
            let e = raced
                .as_ref()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            (
                "failed",
                Exit::Failed,
                format!("race probe failed: {e}"),
                Some(e),
            )
        }
        Ok(report) => {
            let (v, c, t) = if let Some(h) = report.unsupported() {
                (
                    "unsupported",
                    Exit::Attention,
                    format!(
                    "this service does not support conditional writes (it refuses {h} itself) — \
                     a lease here excludes nobody; only best-effort mode ({}) can run",
                    CONDITIONAL_SWITCH
                ),
                )
            } else if let Some(h) = report.ignored_header() {
                (
                "not_conditional",
                Exit::Attention,
                format!(
                    "ignores {h} — a lease here excludes nobody; only best-effort mode ({}) can run",
                    CONDITIONAL_SWITCH
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
    }
}

/// Removes what an interrupted probe may have written (its scratch keys),
/// says whether that worked, and returns 128 + `sig`.
async fn remove_after_interrupt(store: &dyn ObjectStore, key: &str, sig: i32) -> Exit {
    let mut left = Vec::new();
    let absent = format!("{key}.absent");
    let race_key = race::race_key(key);
    let concurrent = concurrent_key(key);
    for k in [key, absent.as_str(), race_key.as_str(), concurrent.as_str()] {
        if let Err(e) = store.delete(k, None).await {
            left.push(format!("{} ({e})", sanitize(k)));
        }
    }
    if left.is_empty() {
        say("probe interrupted; its scratch keys were removed");
    } else {
        say(format!(
            "probe interrupted; could not remove {} (a later probe removes \
             scratch keys older than 10 minutes)",
            left.join(", ")
        ));
    }
    Exit::killed_by(sig)
}

fn print_race(r: &RaceReport, out: &mut impl std::io::Write) {
    let _ = writeln!(
        out,
        "  race:      {} rounds of {} concurrent requests per primitive ({})",
        r.rounds,
        r.contenders,
        r.cost()
    );
    for x in &r.races {
        let _ = writeln!(out, "    {}", x.line());
    }
    for c in &r.changed {
        let _ = writeln!(out, "  changed:   {c}");
    }
}

/// Resolves with the number of the first signal whose default action would
/// end the probe and that it can catch (SIGINT, SIGTERM, SIGHUP, SIGUSR1, …:
/// [`crate::supervise::signals`]).
async fn interrupted() -> i32 {
    match Signals::new().recv().await {
        Some(sig) => sig,
        None => std::future::pending().await,
    }
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
