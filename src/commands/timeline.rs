//! `leasectl timeline`: who held each prefix when, rebuilt from the LEASE
//! object's versions, `--watch` recordings and audit logs (see [`crate::timeline`]).

use chrono::Utc;

use crate::cli::{TimelineArgs, TimelineFormat};
use crate::exit::say;
use crate::exit::Exit;
use crate::setup::Shared;
use crate::stdout::Checked;
use crate::store::ObjectRead;
use crate::text::{sanitize, to_json_pretty};
use crate::timeline::build::{prefix_timeline, Inputs, Subject, Window};
use crate::timeline::read::{audit_entries, Progress, Reading};
use crate::timeline::render::ndjson;
use crate::timeline::render::{Report, SCHEMA_VERSION};
use crate::timeline::{picture, render};

/// Reads every source for every PREFIX_URL, derives, prints in the format asked.
pub(crate) async fn run(a: &TimelineArgs, shared: &Shared) -> Exit {
    let now = Utc::now();
    let to = a.to.unwrap_or(now);
    let from = a.from.or_else(|| {
        a.since
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map(|d| to - d)
    });
    if from.is_some_and(|f| f >= to) {
        say("the window is empty: --from (or --to minus --since) is not before --to");
        return Exit::Usage;
    }
    // The audit logs: those given, else this host's if it exists.
    let (entries, audit_problems) = audit_entries(&a.audit_logs);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        generated_at: now,
        from,
        to,
        prefixes: Vec::new(),
    };
    let window = Window { from, to };
    let bar = progress_bar();
    let tell = |p: Progress<'_>| show(&bar, p);
    let inputs = Inputs {
        recordings: &a.recordings,
        entries: &entries,
        audit_problems: &audit_problems,
        reading: Reading {
            bisect: a.bisect,
            concurrency: shared.gather.concurrency,
            timeout: shared.gather.request_timeout,
        },
        progress: Some(&tell),
    };
    for target in &a.prefix_urls {
        let store = shared
            .connector
            .open(target)
            .await
            .map_err(|e| e.to_string());
        let store = store.as_ref().map(|s| s.as_ref() as &dyn ObjectRead);
        let subject = Subject {
            url: target.to_string(),
            bucket: target.bucket(),
            prefix: target.prefix(),
        };
        report
            .prefixes
            .push(prefix_timeline(store.map_err(String::clone), &subject, &window, &inputs).await);
    }
    bar.finish_and_clear();
    let mut out = Checked::new(std::io::stdout().lock());
    match a.output {
        TimelineFormat::Text => render::text(&report, &mut out),
        TimelineFormat::Json => {
            let _ = std::io::Write::write_all(
                &mut out,
                format!("{}\n", to_json_pretty(&report).unwrap_or_default()).as_bytes(),
            );
        }
        TimelineFormat::Ndjson => ndjson(&report, &mut out),
        TimelineFormat::Svg => match picture::svg(&report) {
            Ok(svg) => {
                let _ = std::io::Write::write_all(&mut out, svg.as_bytes());
            }
            Err(e) => {
                say(format!("the picture could not be drawn: {e}"));
                return Exit::Failed;
            }
        },
    }
    for p in &report.prefixes {
        for s in &p.problems {
            say(format!("{}: {s}", p.url));
        }
        let d = &p.derived;
        if !d.overlaps.is_empty() || !d.generations_back.is_empty() {
            say(format!(
                "{}: {} overlap(s) (two holders could both write) and {} generation(s) not advanced or gone back",
                p.url,
                d.overlaps.len(),
                d.generations_back.len()
            ));
        }
    }
    out.finish(report.exit())
}

/// The progress of a run on stderr when it is a terminal (a spinner, the
/// time so far, the versions listed and read); hidden on a pipe or a file,
/// so nothing but the report is written there.
fn progress_bar() -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Shows step `p` on `bar`.
fn show(bar: &indicatif::ProgressBar, p: Progress<'_>) {
    match p {
        Progress::Listing { key } => {
            bar.set_message(format!("{}: listing versions…", sanitize(key)))
        }
        Progress::Reading { key, listed, gets } => bar.set_message(format!(
            "{}: {gets} of {listed} version(s) read",
            sanitize(key)
        )),
    }
}
