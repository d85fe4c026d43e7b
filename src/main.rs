//! The `leasectl` binary: CLI parsing, runtime and wiring. All logic lives in the library.

use std::sync::Arc;
use std::time::Duration;

use color_eyre::eyre::{eyre, Result, WrapErr};
use leasectl::bucket::LeaseConfig;
use leasectl::cli::{
    AuditArgs, BucketCommand, Cli, Command, OnOff, PodArgs, S3Args, WriterCommand,
};
use leasectl::clock::{SharedClock, SystemClock};
use leasectl::commands;
use leasectl::snapshot::{self, GatherOptions, OpenTarget, EXIT_USAGE};
use leasectl::store::s3::S3Options;
use leasectl::store::{Counters, Counting, ObjectStore, ReadOnly};
use leasectl::target::{Connector, Target};
use leasectl::tui;
use leasectl::writer::{self, scan, scan::ScanOptions};

fn main() {
    let code = match real_main() {
        Ok(code) => code,
        Err(e) => {
            // The whole cause chain, escaped: it may quote paths or values
            // that came from outside.
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("leasectl: {}", leasectl::text::sanitize(&chain.join(": ")));
            leasectl::exit::Exit::Failed.code()
        }
    };
    std::process::exit(code);
}

fn real_main() -> Result<i32> {
    let mut hook = color_eyre::config::HookBuilder::default().display_env_section(false);
    {
        use std::io::IsTerminal;
        // Colours only for a person at a terminal that wants them.
        if !std::io::stderr().is_terminal() || std::env::var_os("NO_COLOR").is_some() {
            hook = hook.theme(color_eyre::config::Theme::new());
        }
    }
    hook.install()?;
    let is_check = || std::env::args().skip(1).any(|a| a == "check");
    let parsed = <Cli as clap::CommandFactory>::command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m).map(|c| (c, m)));
    let (mut cli, matches) = match parsed {
        Ok(c) => c,
        // `check` is a monitoring plugin: its usage errors are UNKNOWN (3).
        Err(e) if e.use_stderr() && is_check() => {
            let _ = e.print();
            println!("LEASES UNKNOWN - usage error (see stderr)");
            return Ok(leasectl::exit::CHECK_UNKNOWN);
        }
        Err(e) => e.exit(),
    };
    // The context (-c NAME, or the default one for a bare `leasectl`): flags win.
    if let Err(e) = leasectl::config::apply(&mut cli, &matches) {
        // Its parts from the file are escaped already (ConfigError).
        let why = e.to_string();
        eprintln!("leasectl: {why}");
        if matches!(cli.command, Some(Command::Check(_))) {
            println!("LEASES UNKNOWN - {}", why.replace('|', "\\x7c"));
            return Ok(leasectl::exit::CHECK_UNKNOWN);
        }
        return Ok(EXIT_USAGE);
    }
    // MUSHROOMDB_BACKUP_LEASE_CONDITIONAL, for the commands that use it only
    // (`--conditional` wins): `writer exec` must start whatever it holds.
    let uses_conditional = matches!(
        cli.command,
        None | Some(
            Command::Check(_)
                | Command::Serve(_)
                | Command::Bucket { .. }
                | Command::Takeover { .. }
        )
    );
    if uses_conditional && cli.s3.conditional.is_none() {
        match leasectl::cli::conditional_from_env(
            std::env::var_os(leasectl::cli::CONDITIONAL_ENV).as_deref(),
        ) {
            Ok(c) => cli.s3.conditional = c,
            Err(why) => {
                eprintln!("leasectl: {why}");
                if matches!(cli.command, Some(Command::Check(_))) {
                    println!("LEASES UNKNOWN - {}", why.replace('|', "\\x7c"));
                    return Ok(leasectl::exit::CHECK_UNKNOWN);
                }
                return Ok(EXIT_USAGE);
            }
        }
    }
    // `-o json` is `--json`.
    if cli.console.output.format == Some(leasectl::monitor::OutputFormat::Json) {
        cli.console.json = true;
    }
    if let Some(e) = &cli.s3.endpoint_url {
        if let Err(why) = leasectl::cli::check_endpoint(e) {
            eprintln!("leasectl: {why}");
            return Ok(EXIT_USAGE);
        }
    }
    if let Some(name) = leasectl::cli::bad_aws_env() {
        eprintln!(
            "leasectl: the environment variable {name} holds a control character or a non-ASCII \
             character; fix or unset it (its value is not shown: it may be a secret)"
        );
        return Ok(EXIT_USAGE);
    }
    // Watch mode promises that nothing writes: a writing command cannot run in it.
    if cli.console.read_only {
        let writes = match &cli.command {
            Some(Command::Probe { .. }) => Some("probe"),
            Some(Command::Takeover { .. }) => Some("takeover"),
            Some(Command::Bucket { .. }) => Some("bucket hold"),
            Some(Command::Writer { .. }) => Some("writer exec"),
            Some(Command::Demo { .. }) => Some("demo"),
            _ => None,
        };
        if let Some(cmd) = writes {
            eprintln!("leasectl: --read-only cannot be combined with `{cmd}`, which writes");
            return Ok(EXIT_USAGE);
        }
    }
    // The terminal belongs to the console: the console logs to a file (the demo
    // to one in its directory); every other command logs to stderr.
    match &cli.command {
        Some(Command::Demo { .. }) => {}
        None if !cli.console.json
            && cli.console.output.format.is_none()
            && cli.console.output.watch.is_none()
            && std::io::IsTerminal::is_terminal(&std::io::stdout()) =>
        {
            init_console_logging()
        }
        None => init_logging(true),
        Some(Command::Check(_)) => init_logging(true),
        _ => init_logging(cli.console.json || matches!(cli.command, Some(Command::PodScan { .. }))),
    }
    // Synchronous commands run before any runtime thread exists: `writer exec`
    // masks signals and may exec in place.
    match &cli.command {
        Some(Command::Writer {
            command:
                WriterCommand::Exec {
                    data_dir,
                    wait,
                    command,
                },
        }) => {
            return Ok(match writer::exec::writer_exec(data_dir, *wait, command) {
                Ok(code) => code,
                Err(e) => {
                    tracing::error!("{e}");
                    e.exit_code()
                }
            })
        }
        Some(Command::PodScan { pod, proc_root, .. }) => return pod_scan(pod, proc_root),
        Some(Command::Audit { json, audit }) => {
            let path = match &audit.audit_log {
                Some(p) => p.clone(),
                None => leasectl::audit::AuditLog::default_path()?,
            };
            return Ok(commands::audit_list(&path, *json, &mut std::io::stdout()));
        }
        Some(Command::Demo { watchdog: true, .. }) => return Ok(leasectl::demo::watchdog()),
        Some(Command::Completions { shell }) => return Ok(leasectl::monitor::completions(*shell)),
        Some(Command::Man) => return Ok(leasectl::monitor::man()),
        Some(Command::Config { command }) => return Ok(leasectl::config::config_cmd(*command)),
        None
        | Some(Command::Check(_) | Command::Serve(_))
        | Some(
            Command::Probe { .. }
            | Command::Bucket { .. }
            | Command::Takeover { .. }
            | Command::Demo { .. },
        ) => {}
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    let result = rt.block_on(run(cli));
    // Quitting always exits: a blocking task still running (a file read on a
    // hung network filesystem) is given a moment, not waited for without end.
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// Writes a document to stdout. A reader that went away (`leasectl --json |
/// head -1`) ends the process quietly with 141 (128 + SIGPIPE), as a shell
/// pipeline expects; any other write error is reported in a sentence.
fn print_document(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("leasectl: could not write the document to stdout: {e}");
        std::process::exit(leasectl::exit::Exit::Failed.code());
    }
}

fn init_logging(quiet: bool) {
    use tracing_subscriber::EnvFilter;
    // The AWS SDK's own WARN lines (e.g. each credential provider it tried) are
    // noise for an operator; the error that matters reaches us as a value.
    let default = if quiet {
        "warn,aws_config=error,aws_smithy_runtime=error"
    } else {
        "info,aws_config=error,aws_smithy_runtime=error"
    };
    let filter =
        EnvFilter::try_from_env("LEASECTL_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// The console's log file: `{data dir}/leasectl/console.log` (nothing may be
/// written to the console's terminal).
fn init_console_logging() {
    if let Some(d) = directories::ProjectDirs::from("", "", "leasectl") {
        leasectl::logfile::init(&d.data_dir().join("console.log"));
    }
}

/// Parses a TARGET URL; a bad one is a usage error (printed, exit 2).
fn target_or_usage(url: &str) -> std::result::Result<Target, i32> {
    url.parse::<Target>().map_err(|e| {
        eprintln!("leasectl: {e}");
        EXIT_USAGE
    })
}

fn s3_options(a: &S3Args, timeout: Duration) -> S3Options {
    S3Options {
        endpoint_url: a.endpoint_url.clone(),
        region: a.region.clone(),
        profile: a.profile.clone(),
        path_style: a.path_style,
        request_timeout: Some(timeout),
        max_attempts: None,
    }
}

/// The gathering options every command shares (`--timeout`, `--concurrency`).
fn gather_options(a: &S3Args) -> GatherOptions {
    GatherOptions {
        request_timeout: a.timeout,
        concurrency: usize::from(a.concurrency),
        ..GatherOptions::default()
    }
}

fn parse_targets(raw: &[String]) -> std::result::Result<Vec<Target>, String> {
    raw.iter()
        .map(|s| s.parse::<Target>().map_err(|e| e.to_string()))
        .collect()
}

async fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        None => console(cli).await,
        Some(Command::Probe {
            ref target,
            json,
            race,
        }) => {
            let target = match target_or_usage(target) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout));
            let store = connector
                .open(&target)
                .await
                .map_err(|e| eyre!("{target}: {e}"))?;
            Ok(commands::probe_race(
                store.as_ref(),
                target.prefix(),
                json,
                race.map(usize::from),
                &mut std::io::stdout(),
            )
            .await)
        }
        Some(Command::Bucket {
            command:
                BucketCommand::Hold {
                    ref prefix_url,
                    ttl,
                    wait,
                    grace,
                    ref instance_id,
                    ref command,
                },
        }) => {
            let target = match target_or_usage(prefix_url) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            let best_effort = cli.s3.conditional == Some(OnOff::Off);
            let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout.min(ttl / 3)));
            announce("bucket hold", &connector, &target).await;
            let store = connector
                .open(&target)
                .await
                .map_err(|e| eyre!("{target}: {e}"))?;
            let config = LeaseConfig {
                ttl_s: ttl.as_secs(),
                exclusion: commands::exclusion_from(best_effort),
            };
            Ok(commands::hold(
                store,
                SystemClock::shared(),
                target.prefix(),
                commands::HoldOptions {
                    config,
                    instance_id: instance_id.clone(),
                    wait,
                    grace,
                },
                command,
            )
            .await)
        }
        Some(Command::Takeover {
            ref prefix_url,
            ref reason,
            ref expect_etag,
            ref then,
            force,
            yes,
            ttl,
            ref audit,
        }) => {
            let target = match target_or_usage(prefix_url) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout));
            announce("takeover", &connector, &target).await;
            // The audit log is opened before anything else: no log, no write.
            let log = match open_audit(&connector, audit).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("leasectl: {e}; nothing was sent");
                    return Ok(leasectl::exit::Exit::Failed.code());
                }
            };
            let store = connector
                .open(&target)
                .await
                .map_err(|e| eyre!("{target}: {e}"))?;
            let args = commands::TakeoverArgs {
                prefix: target.prefix().to_owned(),
                url: target.to_string(),
                endpoint: connector.endpoint(&target).await,
                bucket: target.bucket().map(str::to_owned),
                reason: reason.clone(),
                expect_etag: expect_etag.clone(),
                then: then.clone(),
                force,
                yes,
                ttl_s: ttl.as_secs().max(1),
                exclusion: commands::exclusion_from(cli.s3.conditional == Some(OnOff::Off)),
            };
            Ok(commands::takeover_cmd(
                store,
                SystemClock::shared(),
                &log,
                args,
                &mut std::io::stdout(),
            )
            .await)
        }
        Some(Command::Demo {
            ref dir, die_after, ..
        }) => {
            // Runs on the main thread (block_on): the demo pods' parent-death
            // signal is tied to the thread that spawns them.
            leasectl::demo::run(leasectl::demo::DemoOptions {
                dir: dir.clone(),
                die_after,
                leasectl: std::env::current_exe().wrap_err("locating the leasectl binary")?,
            })
            .await
        }
        Some(Command::Check(ref a)) => {
            let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout));
            let best_effort = cli.s3.conditional == Some(OnOff::Off);
            Ok(
                leasectl::monitor::check_cmd(&connector, a, gather_options(&cli.s3), best_effort)
                    .await,
            )
        }
        Some(Command::Serve(ref a)) => {
            let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout));
            let best_effort = cli.s3.conditional == Some(OnOff::Off);
            Ok(
                leasectl::monitor::serve_cmd(&connector, a, gather_options(&cli.s3), best_effort)
                    .await,
            )
        }
        Some(
            Command::Writer { .. }
            | Command::PodScan { .. }
            | Command::Audit { .. }
            | Command::Completions { .. }
            | Command::Config { .. }
            | Command::Man,
        ) => {
            unreachable!("handled before the runtime starts")
        }
    }
}

/// Prints, before a writing command acts, exactly where its writes go (on
/// stderr, so scripts reading stdout are not disturbed).
async fn announce(what: &str, connector: &Connector, target: &Target) {
    let endpoint = match target {
        Target::Local { .. } => String::new(),
        Target::S3 { .. } => format!(" at {}", connector.endpoint(target).await),
    };
    eprintln!(
        "leasectl: {what} on {}: the lease is the {}{endpoint}",
        leasectl::text::sanitize(&target.to_string()),
        target.lease_location()
    );
}

async fn open_audit(connector: &Connector, a: &AuditArgs) -> Result<leasectl::audit::AuditLog> {
    let path = match &a.audit_log {
        Some(p) => p.clone(),
        None => leasectl::audit::AuditLog::default_path()?,
    };
    let mut log = leasectl::audit::AuditLog::open(path)?;
    if let Some(url) = &a.audit_to {
        let t: Target = url.parse().map_err(|e| eyre!("--audit-to: {e}"))?;
        let store = connector.open(&t).await.map_err(|e| eyre!("{t}: {e}"))?;
        log = log.with_remote(store, t.prefix().to_owned());
    }
    Ok(log)
}

fn scan_options(pod: &PodArgs, proc_root: &std::path::Path) -> ScanOptions {
    ScanOptions {
        proc_root: proc_root.to_path_buf(),
        data_dirs: pod.data_dirs.clone(),
        pod_root: pod.pod_root,
    }
}

fn pod_scan(pod: &PodArgs, proc_root: &std::path::Path) -> Result<i32> {
    let snap = scan::scan(&scan_options(pod, proc_root))?;
    print_document(&leasectl::text::to_json_pretty(&snap)?);
    Ok(snap.exit_code())
}

async fn console(cli: Cli) -> Result<i32> {
    let args = &cli.console;
    let targets = match parse_targets(&args.targets) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("leasectl: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    if args.json && targets.is_empty() && args.pod.no_pod {
        eprintln!(
            "leasectl: --json with no TARGET and --no-pod has nothing to report; give a TARGET \
             (s3://bucket/path/ or file:///dir/) or leave out --no-pod"
        );
        return Ok(EXIT_USAGE);
    }
    let refresh = args.refresh.max(Duration::from_secs(1));
    let connector = Connector::new(s3_options(&cli.s3, cli.s3.timeout));
    // Every request is counted (the console's request rate). Neither the
    // snapshot nor the console table writes: they get the read side only; the
    // writable handle is kept only for the console's write task in OPS mode, so
    // in watch mode (and for --json) nothing that could write exists.
    let counters = Arc::new(Counters::default());
    let mut open = Vec::new();
    let mut writable = Vec::new();
    for t in &targets {
        // A target that cannot even be opened (a missing directory) is shown as
        // unreachable next to the others.
        let store: Arc<dyn ObjectStore> = match connector.open(t).await {
            Ok(s) => s,
            Err(e) => Arc::new(leasectl::store::Unavailable::new(t.to_string(), e)),
        };
        let counted: Arc<dyn ObjectStore> = Arc::new(Counting::new(store, counters.clone()));
        open.push(OpenTarget {
            target: t.clone(),
            endpoint: connector.endpoint(t).await,
            store: Arc::new(ReadOnly::new(counted.clone())),
        });
        // Only the interactive OPS console ever writes: no handle otherwise.
        let interactive = {
            use std::io::IsTerminal;
            std::io::stdout().is_terminal()
        };
        if !args.read_only
            && !args.json
            && args.output.format.is_none()
            && args.output.watch.is_none()
            && interactive
        {
            writable.push(counted);
        }
    }
    let opts = GatherOptions {
        depth: args.depth,
        ..gather_options(&cli.s3)
    };
    let clock: SharedClock = SystemClock::shared();

    // -o table|ndjson|prometheus, --watch, and the table for a pipe.
    if let Some(code) = leasectl::monitor::console_output(
        args,
        open.clone(),
        opts.clone(),
        counters.clone(),
        cli.s3.conditional == Some(OnOff::Off),
    )
    .await
    {
        return Ok(code);
    }

    if args.json {
        let mut snap = snapshot::gather(&open, &opts, &clock).await;
        // Best-effort mode was chosen: that is the exclusion, whatever the service.
        if cli.s3.conditional == Some(OnOff::Off) {
            for p in snap.targets.iter_mut().flat_map(|t| t.prefixes.iter_mut()) {
                p.exclusion = snapshot::ExclusionReport::BestEffort;
            }
        }
        if !args.pod.no_pod {
            let so = scan_options(&args.pod, std::path::Path::new("/proc"));
            match tokio::task::spawn_blocking(move || scan::scan(&so)).await {
                Ok(Ok(pod)) => snap.pod = pod,
                Ok(Err(e)) => snap.pod_error = Some(format!("scanning the pod: {e}")),
                Err(e) => snap.pod_error = Some(format!("pod scan task: {e}")),
            }
            if let Some(e) = &snap.pod_error {
                eprintln!("leasectl: {}", leasectl::text::sanitize(e));
            }
        }
        for t in &snap.targets {
            if let Some(e) = &t.error {
                eprintln!(
                    "leasectl: could not gather {}: {}",
                    t.url,
                    leasectl::text::sanitize(e)
                );
            }
            for e in &t.errors {
                eprintln!(
                    "leasectl: could not read {}{}: {}",
                    t.url,
                    leasectl::text::sanitize(&e.prefix),
                    leasectl::text::sanitize(&e.error)
                );
            }
        }
        print_document(&leasectl::text::to_json_pretty(&snap)?);
        return Ok(snap.exit_code());
    }

    {
        use std::io::IsTerminal;
        if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
            eprintln!(
                "leasectl: the console needs a terminal (stdin and stdout); use --json for a snapshot"
            );
            return Ok(EXIT_USAGE);
        }
    }
    let mut app = tui::app::App::new(
        targets.iter().map(|t| t.to_string()).collect(),
        args.read_only,
        refresh,
        clock.wall(),
    );
    app.exclusion = commands::exclusion_from(cli.s3.conditional == Some(OnOff::Off));
    if let Some(ttl) = cli.context_ttl {
        app.ttl_s = ttl.as_secs();
    }
    // The pod is scanned with every refresh, next to the bucket gather, on a
    // blocking thread (it reads /proc); the UI only receives the result.
    let pod_opts = if args.pod.no_pod {
        app = app.without_pod();
        Vec::new()
    } else {
        vec![scan_options(&args.pod, std::path::Path::new("/proc"))]
    };
    let ops_targets: Vec<tui::ops::OpsTarget> = open
        .iter()
        .zip(writable)
        .map(|(o, store)| tui::ops::OpsTarget {
            url: o.target.to_string(),
            endpoint: o.endpoint.clone(),
            bucket: o.target.bucket().map(str::to_owned),
            store,
            root: o.target.prefix().to_owned(),
        })
        .collect();
    let audit_path = match &args.audit.audit_log {
        Some(p) => Some(p.clone()),
        None => leasectl::audit::AuditLog::default_path().ok(),
    };
    let ops = if args.read_only {
        None
    } else {
        let log = open_audit(&connector, &args.audit).await?;
        app.audit_path = Some(log.path().display().to_string());
        Some(tui::ops::Ops {
            targets: ops_targets,
            audit: log,
            exclusion: app.exclusion,
            ttl_s: app.ttl_s,
            clock: clock.clone(),
        })
    };
    // Listing (discovery) runs about every 30 s; each LEASE is read by need:
    // rows on screen every refresh, the others around their expiry or at the
    // listing's cadence (snapshot::Schedule).
    let relist_every = (30 / refresh.as_secs().max(1)).max(1) as u32;
    app.get_price = args.get_price;
    tui::run(tui::Console {
        app,
        clock,
        refresh,
        gatherer: snapshot::Gatherer::new(open, opts, relist_every).schedule(refresh),
        pod: pod_opts,
        counters,
        audit_path,
        ops,
    })
    .await?;
    Ok(leasectl::exit::Exit::Ok.code())
}
