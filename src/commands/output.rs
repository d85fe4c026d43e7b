//! The console's outputs that are not the console: `--json` (the snapshot
//! document), `-o table|ndjson|prometheus`, `--watch`, and the table for a
//! stdout that is not a terminal (docs/output.md).

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;

use crate::cli::{ConsoleArgs, OutputFormat};
use crate::clock::{SharedClock, SystemClock};
use crate::exit::say;
use crate::exit::Exit;
use crate::monitor::{prometheus, stream, table};
use crate::setup::{audit_path, recipe, Shared};
use crate::setup::{nothing_to_report, relist_every};
use crate::snapshot::{
    attention_sentence, gather, gather_streamed, look_deeper, GatherOptions, Snapshot,
};
use crate::snapshot::{AuditSource, Gatherer, OpenTarget, Recipe};
use crate::stdout::{print, print_document_with, Checked, WriteError};
use crate::store::Counters;
use crate::text::{sanitize, sanitize_message, write_json_pretty};

/// What `args` asks stdout for: `None` for the console itself.
enum Output {
    /// `--json` (or `-o json`).
    Json,
    /// `-o table|ndjson|prometheus`, or the table for a pipe.
    Once(OutputFormat),
    /// `--watch[=INTERVAL]`.
    Watch,
}

/// Which output `args` asks for (`Ok(None)`: the console).
///
/// # Errors
/// [`Exit::Usage`] for `--watch` with `-o` other than ndjson.
fn output_of(args: &ConsoleArgs, shared: &Shared) -> Result<Option<Output>, Exit> {
    let o = &args.output;
    Ok(match (o.format, o.watch) {
        (None | Some(OutputFormat::Ndjson), Some(_)) => Some(Output::Watch),
        (Some(f), Some(_)) => {
            say(format!(
                "--watch streams NDJSON; it cannot be combined with -o {}",
                f.to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            ));
            return Err(Exit::Usage);
        }
        (Some(OutputFormat::Json), None) => Some(Output::Json),
        (Some(f), None) => Some(Output::Once(f)),
        (None, None) if args.json => Some(Output::Json),
        (None, None) if shared.terminal.stdout => None,
        (None, None) => Some(Output::Once(OutputFormat::Table)),
    })
}

/// Whether `args` asks for an output on stdout rather than the console
/// (`--json`, `-o`, `--watch`, or a stdout that is not a terminal).
pub(crate) fn wanted(args: &ConsoleArgs, shared: &Shared) -> bool {
    args.json
        || args.output.format.is_some()
        || args.output.watch.is_some()
        || !shared.terminal.stdout
}

/// Writes the output `args` asks for, of the `open` targets. `None`: the
/// console is asked for.
pub(crate) async fn run(
    args: &ConsoleArgs,
    open: Vec<OpenTarget>,
    counters: Arc<Counters>,
    shared: &Shared,
) -> Option<Exit> {
    let output = match output_of(args, shared) {
        Ok(o) => o?,
        Err(exit) => return Some(exit),
    };
    let opts = shared.gather_at(args.depth);
    let extras = recipe(&args.pod, shared);
    let clock = SystemClock::shared();
    // The audit log read for `last_takeover` (and, by --watch, to name
    // takeovers in `holder_change` lines): --audit-log, else the default.
    let audit_requested = args.audit.audit_log.is_some();
    let audit_path = audit_path(args.audit.audit_log.as_deref());
    let audit = (audit_path, audit_requested);
    let source = AuditSource {
        path: audit.0.clone(),
        requested: audit.1,
    };
    if matches!(output, Output::Json) {
        let recipe = Recipe {
            audit: Some(source),
            ..extras
        };
        return Some(json(open, &opts, &recipe, &clock).await);
    }
    if open.is_empty() && args.pod.no_pod {
        return Some(nothing_to_report(
            "with no TARGET and --no-pod there is nothing to report",
        ));
    }
    let Output::Once(format) = output else {
        let o = &args.output;
        let interval = o
            .watch
            .flatten()
            .unwrap_or(args.refresh)
            .max(Duration::from_secs(1));
        let g = Gatherer::new(open, opts, relist_every(interval));
        let watch = stream::WatchOptions {
            interval,
            heartbeat: o.heartbeat.max(Duration::from_secs(1)),
        };
        return Some(stream::watch(g, clock, extras, watch, audit).await);
    };
    if format == OutputFormat::Ndjson {
        return Some(ndjson(&open, &opts, &extras, source, &clock).await);
    }
    let depth = opts.depth;
    let mut g = Gatherer::new(open.clone(), opts, 1);
    // The table and the exposition do not read the audit log.
    let recipe = Recipe {
        audit: None,
        ..extras.clone()
    };
    let mut snap = recipe.take(&mut g, &clock).await;
    // What the gatherer keeps for a next refresh (every reading): there is none.
    drop(g);
    if format == OutputFormat::Table {
        look_deeper(&open, &mut snap, depth).await;
    }
    let text = match format {
        OutputFormat::Prometheus => {
            // Streamed: the exposition is written as it is encoded, never held
            // whole (three copies of it were: 387 MB at 50,000 prefixes).
            let mut m = prometheus::Metrics::one_shot();
            m.update(&snap, &counters, extras.scans_pod(), &[]);
            let exit = snap.exit_code();
            // The exposition carries no reasons: they are said on stderr.
            say_problems(&snap);
            drop(snap);
            let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            return Some(match m.write_text_format(out) {
                Ok(()) => exit,
                Err(e) => {
                    let e = WriteError::from(e);
                    if let WriteError::Failed(e) = &e {
                        say(format!("could not write to stdout: {e}"));
                    }
                    e.exit()
                }
            });
        }
        OutputFormat::Table => {
            say_problems(&snap);
            table::render(&snap)
        }
        OutputFormat::Ndjson => unreachable!("-o ndjson is streamed"),
        OutputFormat::Json => unreachable!("-o json is the --json document"),
    };
    Some(match print(&text) {
        Ok(()) => snap.exit_code(),
        Err(exit) => exit,
    })
}

/// Says on stderr, a line each, why `snap`'s exit code is not 0: what
/// could not be read, the pod's verdicts and notes, the leases that need
/// attention (`-o table`, `-o prometheus`).
fn say_problems(snap: &Snapshot) {
    for p in table::problems(snap) {
        say(&p);
    }
    if let Some(why) = snap.attention_reason(false) {
        say(why);
    }
}

/// `-o ndjson`: each row's line written as soon as it is judged, no row
/// held ([`crate::snapshot::gather_streamed`]); a target's `error` lines
/// after its `lease` lines, then the pod's line and the summary.
async fn ndjson(
    open: &[OpenTarget],
    opts: &GatherOptions,
    extras: &Recipe,
    audit: AuditSource,
    clock: &SharedClock,
) -> Exit {
    use std::io::Write;
    // The NDJSON lines name each row's last takeover.
    let recipe = Recipe {
        audit: Some(audit),
        ..extras.clone()
    };
    // Not locked: the gather's futures may move between threads.
    let mut out = Checked::new(std::io::BufWriter::with_capacity(
        1 << 16,
        std::io::stdout(),
    ));
    let mut write = |l: String| {
        let _ = out.write_all(l.as_bytes());
        let _ = out.write_all(b"\n");
    };
    let (rest, tally) = gather_streamed(open, opts, clock, &recipe, &mut |item| {
        stream::streamed_lines(item, &mut write)
    })
    .await;
    let exit = stream::streamed_summary(&rest, &tally, recipe.scans_pod(), &mut write);
    // The error lines are in the stream; the reasons are said on stderr too.
    if exit != Exit::Ok {
        for p in table::problems(&rest) {
            say(&p);
        }
        if tally.age_unknown > 0 {
            say(format!(
                "{} lease(s) could not be judged: this host's clock is too far from the service's to tell their age",
                tally.age_unknown
            ));
        }
        if let Some(why) = attention_sentence(tally.noted, &tally.named, &[]) {
            say(why);
        }
    }
    out.finish(exit)
}

/// `--json`: one snapshot document; what could not be read is also said on
/// stderr.
async fn json(
    open: Vec<OpenTarget>,
    opts: &GatherOptions,
    recipe: &Recipe,
    clock: &SharedClock,
) -> Exit {
    let mut snap = gather(&open, opts, clock).await;
    look_deeper(&open, &mut snap, opts.depth).await;
    recipe.complete(&mut snap).await;
    if let Some(e) = &snap.pod_error {
        say(sanitize(e));
    }
    for t in &snap.targets {
        if let Some(e) = &t.error {
            say(format!(
                "could not gather {}: {}",
                t.url,
                sanitize_message(e)
            ));
        }
        for e in &t.errors {
            say(format!(
                "could not read {}: {}",
                sanitize(&t.prefix_url(&e.prefix)),
                sanitize_message(&e.error)
            ));
        }
        if let Some(note) = t.deeper_note() {
            say(&note);
        }
    }
    // Any exit that is not 0 says why, on stderr, in a line each.
    for why in snap.unsaid_reasons() {
        say(&why);
    }
    if let Some(why) = snap.attention_reason(true) {
        say(why);
    }
    // Written as it is serialised: the text of 10,000 rows is 7 MB.
    match print_document_with(|w| write_json_pretty(w, &snap)) {
        Ok(()) => snap.exit_code(),
        Err(exit) => exit,
    }
}
