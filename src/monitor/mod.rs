//! Monitoring front ends (issue 16): the `check` plugin, the output formats
//! (`-o table|json|ndjson|prometheus`), the `--watch` stream and the `serve`
//! exporter. Each is a thin layer over the one [`Snapshot`] that the console
//! and `--json` show, gathered with the same request discipline
//! ([`Gatherer`]: conditional GETs, a listing about every 30 s).

pub mod check;
pub mod prometheus;
pub mod serve;
pub mod stream;
pub mod table;

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;

use crate::clock::SharedClock;
use crate::snapshot::{ExclusionReport, Gatherer, OpenTarget, Snapshot};
use crate::store::{Counters, Counting, ObjectStore, ReadOnly};
use crate::target::{Connector, Target};
use crate::writer::scan::{self, ScanOptions};

/// `-o FORMAT`: how a snapshot is written on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A plain-text table, one lease per line (for scripts and pipes).
    Table,
    /// One JSON document (the `--json` snapshot).
    Json,
    /// One JSON object per line: one per prefix (with its target), then a summary.
    Ndjson,
    /// The Prometheus text exposition format (node_exporter's textfile collector).
    Prometheus,
}

/// Opens every target read-only, each request counted in `counters`. A
/// target that cannot even be opened (a missing directory) stays in the list
/// as a store whose every request fails, so it is reported as unreachable.
pub async fn open_targets(
    connector: &Connector,
    targets: &[Target],
    counters: &Arc<Counters>,
) -> Vec<OpenTarget> {
    let mut open = Vec::new();
    for t in targets {
        let store: Arc<dyn ObjectStore> = match connector.open(t).await {
            Ok(s) => s,
            Err(e) => Arc::new(crate::store::Unavailable::new(t.to_string(), e)),
        };
        let counted: Arc<dyn ObjectStore> = Arc::new(Counting::new(store, counters.clone()));
        open.push(OpenTarget {
            target: t.clone(),
            endpoint: connector.endpoint(t).await,
            store: Arc::new(ReadOnly::new(counted)),
        });
    }
    open
}

/// How many refreshes of `every` pass between two listings: about 30 s, as
/// in the console.
pub fn relist_every(every: Duration) -> u32 {
    (30 / every.as_secs().max(1)).max(1) as u32
}

/// What every monitoring front end gathers besides the buckets.
#[derive(Debug, Clone, Default)]
pub struct GatherExtras {
    /// Scan the pod with these options (None: `--no-pod`).
    pub pod: Option<ScanOptions>,
    /// Best-effort mode was chosen (`--conditional off`): that is every
    /// prefix's exclusion, whatever the service.
    pub best_effort: bool,
}

/// One snapshot from `gatherer`, with the pod scanned (on a blocking thread)
/// when asked. A pod that cannot be scanned is `pod_error`, never "healthy".
pub async fn gather(
    gatherer: &mut Gatherer,
    clock: &SharedClock,
    extras: &GatherExtras,
) -> Snapshot {
    let mut snap = gatherer.gather(clock).await;
    if extras.best_effort {
        for p in snap.targets.iter_mut().flat_map(|t| t.prefixes.iter_mut()) {
            p.exclusion = ExclusionReport::BestEffort;
        }
    }
    if let Some(so) = extras.pod.clone() {
        match tokio::task::spawn_blocking(move || scan::scan(&so)).await {
            Ok(Ok(pod)) => snap.pod = pod,
            Ok(Err(e)) => snap.pod_error = Some(format!("scanning the pod: {e}")),
            Err(e) => snap.pod_error = Some(format!("pod scan task: {e}")),
        }
    }
    snap
}

/// Writes `text` (and a newline) on stdout and flushes. A reader that went
/// away ends the process quietly with 141 (128 + SIGPIPE), as a shell
/// pipeline expects, like `--json`; any other write error is an error.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(EXIT_PIPE),
        r => r,
    }
}

/// Exit status when stdout's reader went away: 128 + SIGPIPE.
pub const EXIT_PIPE: i32 = 141;

fn parse_targets(raw: &[String]) -> Result<Vec<Target>, String> {
    raw.iter()
        .map(|s| s.parse::<Target>().map_err(|e| e.to_string()))
        .collect()
}

fn pod_extras(pod: &crate::cli::PodArgs, best_effort: bool) -> GatherExtras {
    GatherExtras {
        pod: (!pod.no_pod).then(|| ScanOptions {
            proc_root: "/proc".into(),
            data_dirs: pod.data_dirs.clone(),
            pod_root: pod.pod_root,
        }),
        best_effort,
    }
}

/// `leasectl check`: gathers once, prints the plugin output, returns the
/// plugin status (module [`check`]).
pub async fn check_cmd(
    connector: &Connector,
    args: &crate::cli::CheckArgs,
    base: crate::snapshot::GatherOptions,
    best_effort: bool,
) -> i32 {
    let unknown = |msg: String| {
        // The plugin's output is its first line on stdout, even for usage.
        let _ = write_stdout(&format!("LEASES UNKNOWN - {}", crate::text::sanitize(&msg)));
        crate::exit::CHECK_UNKNOWN
    };
    let targets = match parse_targets(&args.targets) {
        Ok(t) => t,
        Err(e) => return unknown(e),
    };
    if targets.is_empty() && args.pod.no_pod {
        return unknown("nothing to check: give a TARGET or leave out --no-pod".into());
    }
    let counters = Arc::new(Counters::default());
    let open = open_targets(connector, &targets, &counters).await;
    let opts = crate::snapshot::GatherOptions {
        depth: args.depth,
        ..base
    };
    let mut g = Gatherer::new(open, opts, 1);
    let clock = crate::clock::SystemClock::shared();
    let snap = gather(&mut g, &clock, &pod_extras(&args.pod, best_effort)).await;
    let r = check::evaluate(
        &snap,
        &check::Thresholds {
            warn_age: args.warn_age,
            crit_age: args.crit_age,
            crit_states: args.crit_state.clone(),
            min_leases: args.min_leases,
        },
    );
    if let Err(e) = write_stdout(&r.output) {
        eprintln!("leasectl: could not write to stdout: {e}");
        return crate::exit::CHECK_UNKNOWN;
    }
    r.status.code()
}

/// `leasectl serve` (module [`serve`]).
pub async fn serve_cmd(
    connector: &Connector,
    args: &crate::cli::ServeArgs,
    base: crate::snapshot::GatherOptions,
    best_effort: bool,
) -> i32 {
    let targets = match parse_targets(&args.targets) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("leasectl: {e}");
            return crate::exit::Exit::Usage.code();
        }
    };
    if targets.is_empty() && args.pod.no_pod {
        eprintln!("leasectl: serve with no TARGET and --no-pod has nothing to export");
        return crate::exit::Exit::Usage.code();
    }
    let refresh = args.refresh.max(Duration::from_secs(1));
    let counters = Arc::new(Counters::default());
    let open = open_targets(connector, &targets, &counters).await;
    let request_timeout = base.request_timeout;
    let opts = crate::snapshot::GatherOptions {
        depth: args.depth,
        ..base
    };
    serve::serve(
        Gatherer::new(open, opts, relist_every(refresh)).schedule(refresh),
        crate::clock::SystemClock::shared(),
        pod_extras(&args.pod, best_effort),
        counters,
        serve::ServeOptions {
            listen: args.listen,
            refresh,
            request_timeout,
            audit_path: crate::audit::AuditLog::default_path().ok(),
        },
    )
    .await
}

/// The console's other outputs: `-o table|ndjson|prometheus`, `--watch`,
/// and the table for a stdout that is not a terminal. `None`: none of them
/// applies (the console opens, or `--json` prints its document).
pub async fn console_output(
    args: &crate::cli::ConsoleArgs,
    open: Vec<OpenTarget>,
    opts: crate::snapshot::GatherOptions,
    counters: Arc<Counters>,
    best_effort: bool,
) -> Option<i32> {
    use std::io::IsTerminal;
    let o = &args.output;
    let format = match (o.format, o.watch) {
        (None | Some(OutputFormat::Ndjson), Some(_)) => None,
        (Some(f), Some(_)) => {
            eprintln!(
                "leasectl: --watch streams NDJSON; it cannot be combined with -o {}",
                f.to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            );
            return Some(crate::exit::Exit::Usage.code());
        }
        (Some(OutputFormat::Json), None) => return None,
        (Some(f), None) => Some(f),
        (None, None) if args.json || std::io::stdout().is_terminal() => return None,
        (None, None) => Some(OutputFormat::Table),
    };
    if open.is_empty() && args.pod.no_pod {
        eprintln!(
            "leasectl: with no TARGET and --no-pod there is nothing to report; give a TARGET \
             (s3://bucket/path/ or file:///dir/) or leave out --no-pod"
        );
        return Some(crate::exit::Exit::Usage.code());
    }
    let extras = pod_extras(&args.pod, best_effort);
    let clock = crate::clock::SystemClock::shared();
    let Some(format) = format else {
        let interval = o
            .watch
            .flatten()
            .unwrap_or(args.refresh)
            .max(Duration::from_secs(1));
        let g = Gatherer::new(open, opts, relist_every(interval));
        return Some(
            stream::watch(
                g,
                clock,
                extras,
                stream::WatchOptions {
                    interval,
                    heartbeat: o.heartbeat.max(Duration::from_secs(1)),
                },
            )
            .await,
        );
    };
    let mut g = Gatherer::new(open, opts, 1);
    let snap = gather(&mut g, &clock, &extras).await;
    if matches!(format, OutputFormat::Prometheus) {
        // Streamed: the exposition is written as it is encoded, never held
        // whole (three copies of it were, at 50,000 prefixes: PERFORMANCE.md).
        let mut m = prometheus::Metrics::new();
        m.update(&snap, &counters, extras.pod.is_some(), &[]);
        let code = snap.exit_code();
        drop((snap, g));
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        return Some(match m.write_text_format(out) {
            Ok(()) => code,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_PIPE,
            Err(e) => {
                eprintln!("leasectl: could not write to stdout: {e}");
                crate::exit::Exit::Failed.code()
            }
        });
    }
    let text = match format {
        OutputFormat::Table => {
            for p in table::problems(&snap) {
                eprintln!("leasectl: {p}");
            }
            table::render(&snap)
        }
        OutputFormat::Ndjson => stream::snapshot_lines(&snap, extras.pod.is_some()).join("\n"),
        OutputFormat::Json | OutputFormat::Prometheus => {
            unreachable!("-o json is the --json document; -o prometheus is streamed above")
        }
    };
    if let Err(e) = write_stdout(&text) {
        eprintln!("leasectl: could not write to stdout: {e}");
        return Some(crate::exit::Exit::Failed.code());
    }
    Some(snap.exit_code())
}

/// `leasectl completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory;
    let mut cmd = crate::cli::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "leasectl", &mut out);
    match write_stdout(String::from_utf8_lossy(&out).trim_end()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("leasectl: could not write to stdout: {e}");
            crate::exit::Exit::Failed.code()
        }
    }
}

/// `leasectl man`: the man page (roff) on stdout.
pub fn man() -> i32 {
    use clap::CommandFactory;
    let mut out = Vec::new();
    if let Err(e) = render_man(crate::cli::Cli::command(), &mut out) {
        eprintln!("leasectl: could not render the man page: {e}");
        return crate::exit::Exit::Failed.code();
    }
    match write_stdout(String::from_utf8_lossy(&out).trim_end()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("leasectl: could not write to stdout: {e}");
            crate::exit::Exit::Failed.code()
        }
    }
}

/// The whole man page in one: the top-level sections, then a COMMANDS
/// section with every visible subcommand (nested ones too), each with its
/// synopsis, description and options. It refers to no other page: there is
/// no `leasectl-check(1)`.
///
/// # Errors
/// What writing the roff to `out` returns.
pub fn render_man(mut cmd: clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    render_man_commands(&cmd, out)?;
    man.render_version_section(out)
}

/// One `.SS` subsection per visible subcommand of `cmd`, depth first.
fn render_man_commands(cmd: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
        // The global options are in OPTIONS above: not repeated for each command.
        let globals: Vec<clap::Id> = sub
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().clone())
            .collect();
        let own = globals
            .into_iter()
            .fold(sub.clone(), |c, id| c.mut_arg(id, |a| a.hide(true)));
        let man = clap_mangen::Man::new(own);
        let section = |render: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>,
                       heading: &str,
                       with: &str|
         -> std::io::Result<String> {
            let mut buf = Vec::new();
            render(&mut buf)?;
            Ok(String::from_utf8_lossy(&buf).replacen(heading, with, 1))
        };
        let shown = name.replace('"', "");
        let mut text = section(
            &|b| man.render_synopsis_section(b),
            ".SH SYNOPSIS\n",
            &format!(".SS \"{shown}\"\n"),
        )?;
        text.push_str(&section(
            &|b| man.render_description_section(b),
            ".SH DESCRIPTION\n",
            ".PP\n",
        )?);
        {
            text.push_str(&section(
                &|b| man.render_options_section(b),
                ".SH OPTIONS\n",
                ".PP\nOptions:\n",
            )?);
        }
        out.extend_from_slice(text.as_bytes());
        render_man_commands(sub, out)?;
    }
    Ok(())
}
