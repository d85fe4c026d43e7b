//! The command line (ARCHITECTURE.md: front ends): parsed with clap into the
//! engine's own values where it has them (`--then` is the takeover's `Then`,
//! `--record-format` the record's `RecordFormat`). This module imports no
//! front end.

mod parse;

pub use parse::*;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::target::Target;

/// leasectl: who writes here, is it safe, and how to move the lease without two writers.
#[derive(Debug, Parser)]
#[command(
    name = "leasectl",
    version,
    about,
    subcommand_precedence_over_arg = true
)]
pub struct Cli {
    /// What to do; without a command, the console on the TARGETs.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Console / snapshot options.
    #[command(flatten)]
    pub console: ConsoleArgs,

    /// How to reach S3.
    #[command(flatten)]
    pub s3: S3Args,

    /// Apply the context NAME of the config file (`leasectl config path`): its TARGETs when
    /// none are given, its endpoint, region, profile, path style, refresh, TTL, depth and
    /// record format unless given on the command line. Without it, `leasectl` with no TARGET applies
    /// the file's default_context.
    #[arg(short = 'c', long = "context", global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// Where the log goes.
    #[command(flatten)]
    pub log: LogArgs,
}

/// The log: without these options stderr gets sentences only (warnings and
/// errors, no timestamps); the log itself (every step, timestamped) goes to
/// stderr with `-v` or `LEASECTL_LOG`, and to a file with `--log-file`.
#[derive(Debug, Args, Clone, Default)]
pub struct LogArgs {
    /// The log on stderr instead of sentences: each step with its time (-v info, -vv debug,
    /// -vvv trace; LEASECTL_LOG sets the filter too).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Append the log (each step with its time, at info or as -v and LEASECTL_LOG say) to
    /// this file, created private (0600); stderr keeps its sentences.
    #[arg(long, global = true, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
}

/// The commands on which the global options (`-c` and the S3 ones: every
/// option declared `global = true`) do nothing: `audit` reads only the
/// local audit log, `config` only the config file. Their `--help` does not
/// list those options and they refuse them after the command's name; given
/// before it (`leasectl --region R audit`, as a shell alias does) they are
/// accepted for the top level and do nothing.
pub const LOCAL_COMMANDS: [&str; 2] = ["audit", "config"];

/// The command line as leasectl parses it: [`Cli`]'s, except that each
/// global option is copied to every subcommand but [`LOCAL_COMMANDS`] (and,
/// from there, to the nested ones) instead of being propagated everywhere.
/// Its values end up in [`Cli`] as before: the copies are global, so clap
/// hands a value given after a command up to the top level.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let shared: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    for a in &shared {
        cmd = cmd.mut_arg(a.get_id(), |a| a.global(false));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    // Every subcommand in turn (`mut_subcommand` moves it last: the order
    // stays), the local ones unchanged.
    for name in names {
        let local = LOCAL_COMMANDS.contains(&name.as_str());
        cmd = cmd.mut_subcommand(name, |sub| {
            if local {
                return sub;
            }
            // After the command's own options and before `--help` (999)
            // in its help, as propagated ones were.
            shared
                .iter()
                .enumerate()
                .fold(sub, |sub, (i, a)| sub.arg(a.clone().display_order(900 + i)))
        });
    }
    cmd
}

/// Options of the console and of `--json`.
#[derive(Debug, Args, Clone)]
pub struct ConsoleArgs {
    /// Prefixes to watch: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "TARGET", value_parser = parse_target)]
    pub targets: Vec<Target>,

    /// Watch mode: the stores are opened read-only; no write request can be built.
    #[arg(long)]
    pub read_only: bool,

    /// Print one JSON snapshot on stdout and exit (0 healthy, 1 unreachable or incomplete,
    /// 2 usage, 3 attention).
    #[arg(long)]
    pub json: bool,

    /// Discovery depth under each TARGET.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub depth: u32,

    /// Refresh interval (e.g. 5s, 1m); at least 1s.
    #[arg(long, default_value = "5s", value_parser = parse_interval, value_name = "DURATION")]
    pub refresh: Duration,

    /// At most this many requests per minute to the stores once every LEASE has been read
    /// (N, N/min or N/s): rows on screen first, then fresh leases at their expiry, rows never
    /// read, the others round robin; the status bar says how old the oldest reading is.
    #[arg(long, default_value_t = crate::snapshot::DEFAULT_MAX_REQUESTS, value_parser = parse_rate, value_name = "N/min")]
    pub max_requests: u32,

    /// US dollars per 1,000 GET requests, for the console's cost estimate in the status bar
    /// (AWS S3 Standard in us-east-1: 0.0004; a LIST is counted at 12.5 times that, as on AWS).
    #[arg(long, default_value_t = crate::tui::app::DEFAULT_GET_PRICE, value_parser = parse_price, value_name = "USD")]
    pub get_price: f64,

    /// Monitoring output options (`-o`, `--watch`).
    #[command(flatten)]
    pub output: OutputArgs,

    /// Pod view options.
    #[command(flatten)]
    pub pod: PodArgs,

    /// Audit log of the console's takeovers.
    #[command(flatten)]
    pub audit: AuditArgs,

    /// The console's takeovers: The fields of the LEASE records written: leasectl (the seed's four and `generation`,
    /// the fencing token) or seed (exactly the seed's four, for readers that refuse unknown
    /// fields: no generation is written or handed out). Also the context's record_format.
    #[arg(long, default_value = "leasectl", value_parser = parse_record_format, value_name = "FORMAT")]
    pub record_format: crate::bucket::RecordFormat,

    /// The console's takeovers: the TTL of the leases they write. No flag sets it: the
    /// context's `ttl` when one applies (`setup::prepare`), else `None` (30 s).
    #[arg(skip)]
    pub ttl: Option<Duration>,
}

/// `-o FORMAT` and `--watch` (docs/output.md).
#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Print one snapshot on stdout in this format and exit (exit codes as --json); without
    /// it, a stdout that is not a terminal gets the table.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        value_name = "FORMAT",
        conflicts_with = "json"
    )]
    pub format: Option<OutputFormat>,

    /// Stream NDJSON on stdout: one line per prefix change (state, holder or ETag), every
    /// INTERVAL (default: --refresh), plus a heartbeat; ends on SIGTERM or a closed pipe.
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        value_parser = parse_interval,
        value_name = "INTERVAL",
        conflicts_with = "json"
    )]
    pub watch: Option<Option<Duration>>,

    /// Time between two `heartbeat` lines of --watch (at least 1s).
    #[arg(long, default_value = "30s", value_parser = parse_interval, value_name = "DURATION")]
    pub heartbeat: Duration,
}

/// `leasectl check`.
#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// Prefixes to check: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "TARGET", value_parser = parse_target)]
    pub targets: Vec<Target>,
    /// Discovery depth under each TARGET.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub depth: u32,
    /// WARNING when a lease's age is over this (e.g. 1m).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub warn_age: Option<Duration>,
    /// CRITICAL when a lease's age is over this.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub crit_age: Option<Duration>,
    /// States that are CRITICAL (comma-separated: stale, suspect, malformed, absent; or
    /// none); the others needing attention are WARNING.
    #[arg(
        long,
        default_value = "stale,suspect,malformed",
        value_parser = parse_states,
        value_name = "STATES"
    )]
    pub crit_state: std::vec::Vec<crate::bucket::LeaseState>,
    /// CRITICAL when fewer than N leases are found (rows that are not absent), e.g. a
    /// service whose holder never started. Default 0: finding none is OK.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub min_leases: usize,
    /// Pod options (a pod verdict is CRITICAL).
    #[command(flatten)]
    pub pod: PodArgs,
}

/// `leasectl serve`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Prefixes to export: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "TARGET", value_parser = parse_target)]
    pub targets: Vec<Target>,
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:9899", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Time between two gathers (at least 1s); listings about every 30 s.
    #[arg(long, default_value = "15s", value_parser = parse_interval, value_name = "DURATION")]
    pub refresh: Duration,
    /// Discovery depth under each TARGET.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub depth: u32,
    /// At most this many requests per minute to the stores once every LEASE has been read
    /// (N, N/min or N/s), the most pressing first (fresh leases at their expiry, rows never
    /// read, the others round robin).
    #[arg(long, default_value_t = crate::snapshot::DEFAULT_MAX_REQUESTS, value_parser = parse_rate, value_name = "N/min")]
    pub max_requests: u32,
    /// The local audit log to read (never written) to name takeovers and hand-overs in the
    /// holder history, as the console does. Default: the platform data directory, e.g.
    /// ~/.local/share/leasectl/audit.jsonl.
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<PathBuf>,
    /// Pod options.
    #[command(flatten)]
    pub pod: PodArgs,
}

/// Which pod to show.
#[derive(Debug, Args, Clone)]
pub struct PodArgs {
    /// A data directory whose `.writer.lock` to inspect (repeatable; default: auto-detected
    /// from open files ending in `/.writer.lock`).
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dirs: Vec<PathBuf>,

    /// The pod's root process: show it and its descendants (default: every process that
    /// carries a lease variable or has the lock open, with its ancestors).
    #[arg(long, value_name = "PID")]
    pub pod_root: Option<u32>,

    /// Do not scan processes at all (bucket leases only).
    #[arg(long, conflicts_with_all = ["data_dirs", "pod_root"])]
    pub no_pod: bool,

    /// The node view: every pod of this host, grouped by the pod its processes' cgroups name,
    /// each judged alone, with a tally (run in the host's PID namespace, as root with
    /// CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH, to see every pod).
    #[arg(long, conflicts_with_all = ["data_dirs", "pod_root", "no_pod"])]
    pub node: bool,
}

/// S3 connection options, shared by every command.
#[derive(Debug, Args, Clone)]
pub struct S3Args {
    /// S3 endpoint (MinIO, R2, …); AWS_ENDPOINT_URL is honoured too.
    #[arg(long, global = true, value_name = "URL", value_parser = parse_endpoint)]
    pub endpoint_url: Option<String>,
    /// AWS region (default: the AWS chain, then us-east-1).
    #[arg(long, global = true, value_name = "R", value_parser = parse_plain_name)]
    pub region: Option<String>,
    /// AWS profile name.
    #[arg(long, global = true, value_name = "P", value_parser = parse_profile)]
    pub profile: Option<String>,
    /// Path-style addressing (needed by MinIO and most self-hosted services).
    #[arg(long, global = true)]
    pub path_style: bool,
    /// Deadline of each request (e.g. 10s); a listing may last 30 of them. For `check`, also
    /// the whole check's: UNKNOWN when it passes.
    #[arg(long, global = true, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    pub timeout: Duration,
    /// Requests in flight at once per TARGET while gathering (listings and LEASE reads,
    /// 1 to 1024), and `timeline`'s reads of versions. More helps on a far-away service; a
    /// service that answers 503 SlowDown gets fewer at once automatically (`timeline` sends
    /// each slowed-down read again after a back-off).
    #[arg(
        long,
        global = true,
        default_value_t = crate::snapshot::DEFAULT_CONCURRENCY,
        value_parser = clap::value_parser!(u16).range(1..=1024),
        value_name = "N"
    )]
    pub concurrency: u16,
    /// Exclusion mode: `off` = best-effort (read, then unconditional write).
    /// Also MUSHROOMDB_BACKUP_LEASE_CONDITIONAL=off (empty means unset; read only by the
    /// commands that write or judge bucket leases).
    #[arg(long, global = true, value_enum)]
    pub conditional: Option<OnOff>,
}

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

/// `-o FORMAT` of `timeline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimelineFormat {
    /// A chronological list, one event per line, the findings counted first.
    Text,
    /// One JSON document (`schema_version` 1.0; every time RFC 3339 UTC).
    Json,
    /// One JSON object per event, then a summary line per prefix.
    Ndjson,
    /// A picture for the incident review (SVG): one lane per holder, tenures, gaps,
    /// overlaps and takeovers.
    Svg,
}

/// `leasectl timeline`.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The prefixes whose lease history to rebuild (s3://bucket/prefix/ or file:///dir/).
    #[arg(required = true, value_name = "PREFIX_URL", value_parser = parse_target)]
    pub prefix_urls: Vec<Target>,
    /// Only the last DURATION before --to (e.g. 24h, 90m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "from")]
    pub since: Option<std::time::Duration>,
    /// The window's start (RFC 3339, e.g. 2026-12-03T09:00:00Z).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// The window's end (RFC 3339; default: now).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Option<chrono::DateTime<chrono::Utc>>,
    /// An audit log to read (repeatable; default: this host's audit log, if it exists).
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_logs: Vec<PathBuf>,
    /// A `--watch` NDJSON recording to read (repeatable): the history of a store without versions.
    #[arg(long = "recording", value_name = "FILE")]
    pub recordings: Vec<PathBuf>,
    /// Read bodies only where the tenure may change, by bisection: far fewer
    /// GETs, but the versions between two reads of one tenure are inferred, not
    /// read (a holder writing in between is not seen), so the run exits 1 (by
    /// default every version is read).
    #[arg(long)]
    pub bisect: bool,
    /// Read every version's body: the default now (kept for scripts).
    #[arg(long, hide = true, conflicts_with = "bisect")]
    pub all_versions: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: TimelineFormat,
}

/// An RFC 3339 time, as UTC.
fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| {
            format!(
                "{} is not an RFC 3339 time ({e}); write e.g. 2026-12-03T09:00:00Z",
                crate::text::sanitize_cut(s, 60)
            )
        })
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Conditional writes (the default).
    On,
    /// Best-effort: read, then unconditional write.
    Off,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pod writer lease (flock on {DataDir}/.writer.lock).
    Writer {
        /// What to do.
        #[command(subcommand)]
        command: WriterCommand,
    },
    /// Check whether a service really honours If-None-Match and If-Match.
    ///
    /// Writes a scratch key `{TARGET}.leasectl-probe/{id}` and removes it. Exit 0 when it
    /// honours both; 3 it deviates (a precondition ignored, an unusable ETag; with --race,
    /// not atomic); 1 the probe failed (store error); 2 usage.
    Probe(ProbeArgs),
    /// Take over the lease on PREFIX_URL: guarded, conditional on the ETag seen, audited.
    ///
    /// Exit 0 taken; 4 refused (no LEASE there, fresh without --force, changed since seen,
    /// under watch, preconditions ignored, not confirmed); 5 `--then hold`: the held lease was
    /// lost or its fence closed; 6 --force with --then release|handover: a signal ended the
    /// wait for the old holder's fence (the lease is left to expire after it); 1 failed
    /// (audit log, store); 2 usage.
    Takeover(TakeoverArgs),
    /// List the audit log, newest first.
    Audit(AuditListArgs),
    /// Who held each prefix when: tenures, gaps and overlaps from versions and audit logs.
    ///
    /// Reads every version of {PREFIX_URL}LEASE on a versioned bucket, in the service's
    /// order (with --bisect, bodies only where the holder may change: the others are
    /// inferred, not read), the audit logs and the recordings given. Exit 0 nothing wrong
    /// found; 3 an overlap (two holders could both write) or a generation that went back;
    /// 1 a source could not be read completely (a version inferred by --bisect among them),
    /// or no source holds this lease's history; 2 usage.
    Timeline(TimelineArgs),
    /// Bucket lease commands.
    Bucket {
        /// What to do.
        #[command(subcommand)]
        command: BucketCommand,
    },
    /// The console on a local store with simulated holders and demo pods (no cloud account).
    ///
    /// Live simulated holders and two real demo pods: no cloud account needed. Quitting
    /// stops every demo process and removes the temporary directory (a --dir is kept).
    Demo(DemoArgs),
    /// Monitoring plugin (Nagios, Icinga, Sensu): one status line with perfdata.
    ///
    /// Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (anything not gathered, or bad usage).
    Check(CheckArgs),
    /// Prometheus exporter: /metrics and /healthz over HTTP, for a sidecar or a DaemonSet.
    Serve(ServeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout.
    Man,
    /// The config file of contexts (LEASECTL_CONFIG overrides its path).
    Config {
        /// What to do.
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print only the pod section as JSON (debugging aid; exit 3 when a verdict fires).
    #[command(hide = true)]
    PodScan(PodScanArgs),
}

/// `leasectl config …`.
#[derive(Debug, Subcommand, Clone, Copy)]
pub enum ConfigCommand {
    /// Print the config file's path (and say on stderr whether it exists).
    Path,
    /// Print the config file as leasectl reads it: validated and normalised.
    ///
    /// Credentials are never shown. Exit 2 when it is missing or invalid.
    View,
}

/// Where the audit log goes.
#[derive(Debug, Args, Clone)]
pub struct AuditArgs {
    /// The local audit log (JSON lines, mode 0600). Default: the platform data directory,
    /// e.g. ~/.local/share/leasectl/audit.jsonl.
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<PathBuf>,
    /// Also write each audit entry as an immutable object under this prefix (s3://… or file://…).
    #[arg(long, value_name = "URL")]
    pub audit_to: Option<String>,
}

/// `leasectl bucket …`.
#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Run CMD while holding the bucket lease on PREFIX_URL.
    ///
    /// Acquire (with the precondition probe), renew every TTL/3, and stop CMD (SIGTERM,
    /// then SIGKILL after --grace) when the fence closes or the lease is lost; release at
    /// exit. Exit: CMD's status; 4 lease not
    /// acquired; 5 lease lost or fenced (CMD stopped); 1 other failures; 2 usage; 125
    /// --containment require refused (nothing acquired); 126 CMD cannot be run (not
    /// executable); 127 CMD not found.
    Hold(HoldArgs),
    /// Inside `bucket hold`'s CMD: exit 0 while the lease's fence is open, 5 once it closed.
    ///
    /// Reads the descriptor LEASECTL_FENCE_FD names (the fence pipe `bucket hold` hands
    /// its command) without blocking, for shell scripts that check the fence before each
    /// write. Exit 0 the fence is open; 5 it has closed (start no more writes); 2 usage: not
    /// run under `bucket hold` (LEASECTL_FENCE_FD unset, not a number, or not an open
    /// pipe's read end); 1 the descriptor could not be polled.
    FenceCheck(FenceCheckArgs),
}

/// `leasectl bucket fence-check` (no options).
#[derive(Debug, Args)]
pub struct FenceCheckArgs {}

/// `leasectl writer …`.
#[derive(Debug, Subcommand)]
pub enum WriterCommand {
    /// Run CMD under the writer-lease rules (flock, then CMD as a child, or exec in place).
    ///
    /// As the pod's root, take the flock first, stamp CLOUD_WRITER_LEASE_HELD with our pid, run CMD as a child, forward signals, release after
    /// it is reaped, exit with its status. Otherwise (Inherit, Off) exec CMD in place.
    /// Exit: CMD's status; 125 refused to start (invalid CLOUD_WRITER_LEASE, lock still
    /// held after --wait, lock file cannot be opened); 126 CMD cannot be run; 127 CMD not
    /// found; 2 usage.
    Exec(ExecArgs),
}

/// `leasectl probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "TARGET", value_parser = parse_target)]
    pub target: Target,
    /// Print the findings as one JSON document (each step, the ETag form, how a lease is released).
    #[arg(long)]
    pub json: bool,
    /// After the steps, race each primitive: 5 rounds of N concurrent requests (default 16,
    /// 2-64) on a scratch key; two winners in a round is "not atomic" (exit 3).
    #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true,
          default_missing_value = "16",
          value_parser = clap::value_parser!(u16).range(2..=64))]
    pub race: Option<u16>,
}

/// `leasectl takeover`.
#[derive(Debug, Args)]
pub struct TakeoverArgs {
    /// The prefix: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "PREFIX_URL", value_parser = parse_target)]
    pub prefix_url: Target,
    /// Why (required; recorded in the audit log).
    #[arg(long)]
    pub reason: String,
    /// Refuse unless the LEASE's current ETag is exactly this (from --json or the console).
    #[arg(long, value_name = "ETAG")]
    pub expect_etag: Option<String>,
    /// After taking it: release (free the prefix), hold (renew until Ctrl-C, then
    /// release) or handover:INSTANCE_ID (name the successor that will adopt it).
    #[arg(long, default_value = "release", value_parser = parse_then, value_name = "WHAT")]
    pub then: crate::takeover::Then,
    /// Allow taking over a fresh lease (a live holder!). Still asks for the prefix.
    #[arg(long)]
    pub force: bool,
    /// Do not ask for confirmation (scripts and runbooks).
    #[arg(long)]
    pub yes: bool,
    /// TTL of the lease written (whole seconds, 3s to 1h); a hand-over's successor must
    /// start within it.
    #[arg(long, default_value = "30s", value_parser = parse_ttl, value_name = "DURATION")]
    pub ttl: Duration,
    /// The fields of the LEASE records written: leasectl (the seed's four and `generation`,
    /// the fencing token) or seed (exactly the seed's four, for readers that refuse unknown
    /// fields: no generation is written or handed out). Also the context's record_format.
    #[arg(long, default_value = "leasectl", value_parser = parse_record_format, value_name = "FORMAT")]
    pub record_format: crate::bucket::RecordFormat,
    /// Audit log options.
    #[command(flatten)]
    pub audit: AuditArgs,
}

/// `leasectl audit`.
#[derive(Debug, Args)]
pub struct AuditListArgs {
    /// One JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// The local audit log to list. Default: the platform data directory, e.g.
    /// ~/.local/share/leasectl/audit.jsonl.
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<PathBuf>,
}

/// `leasectl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Use this directory (created if missing; must be empty or a previous demo's)
    /// instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// How long the dying holder renews before it dies (for tests).
    #[arg(
        long,
        hide = true,
        env = "LEASECTL_DEMO_DIE_AFTER",
        default_value = "20s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub die_after: Duration,
    /// Internal: the demo's watchdog process.
    #[arg(long, hide = true)]
    pub watchdog: bool,
}

/// `leasectl completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `leasectl pod-scan` (hidden).
#[derive(Debug, Args)]
pub struct PodScanArgs {
    /// Accepted for symmetry with the console; output is always JSON.
    #[arg(long)]
    pub json: bool,
    /// Pod selection.
    #[command(flatten)]
    pub pod: PodArgs,
    /// The proc filesystem to read.
    #[arg(long, default_value = "/proc", value_name = "DIR")]
    pub proc_root: PathBuf,
}

/// `leasectl bucket hold`.
#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The prefix: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "PREFIX_URL", value_parser = parse_target)]
    pub prefix_url: Target,
    /// Lease TTL (whole seconds, 3s to 1h).
    #[arg(long, default_value = "30s", value_parser = parse_ttl, value_name = "DURATION")]
    pub ttl: Duration,
    /// Keep trying to acquire for this long (a fresh lease going stale, a suspect one
    /// watched for a TTL) before giving up.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Duration,
    /// Take the lease as this instance id (default: a new random one). A lease handed
    /// over with `takeover --then handover:ID` is adopted at once by `--instance-id ID`.
    #[arg(long, value_name = "ID", value_parser = parse_instance_id)]
    pub instance_id: Option<String>,
    /// Time CMD gets between SIGTERM and SIGKILL when the fence closes (default 5s; at most
    /// a sixth of the TTL).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub grace: Option<Duration>,
    /// The fields of the LEASE records written: leasectl (the seed's four and `generation`,
    /// the fencing token) or seed (exactly the seed's four, for readers that refuse unknown
    /// fields: no generation is written or handed out). Also the context's record_format.
    #[arg(long, default_value = "leasectl", value_parser = parse_record_format, value_name = "FORMAT")]
    pub record_format: crate::bucket::RecordFormat,
    /// Run CMD in a PID namespace of its own, so that the kernel ends all of it (daemons
    /// included) when leasectl dies: auto (when the kernel allows it, else say why and go
    /// on without), require (refuse to start without it, exit 125) or off.
    #[arg(long, default_value = "auto", value_name = "MODE", value_parser = parse_containment)]
    pub containment: crate::supervise::ContainmentMode,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `leasectl writer exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The data directory holding `.writer.lock`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// How long to wait for the previous holder before failing closed.
    #[arg(long, default_value = "90s", value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Duration,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}
