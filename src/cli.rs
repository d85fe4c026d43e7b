//! The command line (ARCHITECTURE.md: front ends): parsed with clap.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// none are given, its endpoint, region, profile, path style, refresh, TTL and depth
    /// unless given on the command line. Without it, `leasectl` with no TARGET applies
    /// the file's default_context.
    #[arg(short = 'c', long = "context", global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// The applied context's TTL for takeovers from the console (set from the config).
    #[arg(skip)]
    pub context_ttl: Option<Duration>,
}

/// Options of the console and of `--json`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Prefixes to watch: s3://bucket/path/ or file:///dir/.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,

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

    /// US dollars per 1,000 GET requests, for the console's cost estimate in the status bar
    /// (AWS S3 Standard in us-east-1: 0.0004; a LIST is counted at 12.5 times that, as on AWS).
    #[arg(long, default_value_t = leasectl_default_get_price(), value_parser = parse_price, value_name = "USD")]
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
}

/// `-o FORMAT` and `--watch` (README: Monitoring).
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
    pub format: Option<crate::monitor::OutputFormat>,

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
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
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
        value_parser = crate::monitor::check::parse_states,
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
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// Address to listen on (port 0: any free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:9899", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Time between two gathers (at least 1s); listings about every 30 s.
    #[arg(long, default_value = "15s", value_parser = parse_interval, value_name = "DURATION")]
    pub refresh: Duration,
    /// Discovery depth under each TARGET.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub depth: u32,
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
    /// Deadline of each request (e.g. 10s).
    #[arg(long, global = true, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    pub timeout: Duration,
    /// Requests in flight at once per TARGET while gathering (listings and LEASE reads,
    /// 1 to 1024). More helps on a far-away service; a service that answers 503 SlowDown
    /// gets fewer at once automatically.
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
    /// Check whether a service really honours If-None-Match and If-Match (writes a scratch
    /// key `{TARGET}.leasectl-probe/{id}` and removes it). Exit 0 only when it does.
    Probe {
        /// s3://bucket/path/ or file:///dir/.
        #[arg(value_name = "TARGET")]
        target: String,
        /// Print the findings as one JSON document (each step, the ETag form, how a lease is released).
        #[arg(long)]
        json: bool,
        /// After the steps, race each primitive: 5 rounds of N concurrent requests (default 16,
        /// 2-64) on a scratch key; two winners in a round is "not atomic" (exit 3).
        #[arg(long, value_name = "N", num_args = 0..=1, require_equals = true,
              default_missing_value = "16",
              value_parser = clap::value_parser!(u16).range(2..=64))]
        race: Option<u16>,
    },
    /// Take over the lease on PREFIX_URL: guarded, conditional on the ETag seen, audited.
    /// Exit 0 taken; 4 refused (fresh without --force, changed since seen, under watch,
    /// preconditions ignored, not confirmed); 5 `--then hold`: the held lease was lost or
    /// its fence closed; 1 failed (audit log, store); 2 usage.
    Takeover {
        /// The prefix: s3://bucket/path/ or file:///dir/.
        #[arg(value_name = "PREFIX_URL")]
        prefix_url: String,
        /// Why (required; recorded in the audit log).
        #[arg(long)]
        reason: String,
        /// Refuse unless the LEASE's current ETag is exactly this (from --json or the console).
        #[arg(long, value_name = "ETAG")]
        expect_etag: Option<String>,
        /// After taking it: release (free the prefix), hold (renew until Ctrl-C, then
        /// release) or handover:INSTANCE_ID (name the successor that will adopt it).
        #[arg(long, default_value = "release", value_parser = parse_then, value_name = "WHAT")]
        then: crate::takeover::Then,
        /// Allow taking over a fresh lease (a live holder!). Still asks for the prefix.
        #[arg(long)]
        force: bool,
        /// Do not ask for confirmation (scripts and runbooks).
        #[arg(long)]
        yes: bool,
        /// TTL of the lease written (whole seconds, 3s to 1h); a hand-over's successor must
        /// start within it.
        #[arg(long, default_value = "30s", value_parser = parse_ttl, value_name = "DURATION")]
        ttl: Duration,
        /// Audit log options.
        #[command(flatten)]
        audit: AuditArgs,
    },
    /// List the audit log, newest first.
    Audit {
        /// One JSON array on stdout.
        #[arg(long)]
        json: bool,
        /// Audit log options.
        #[command(flatten)]
        audit: AuditArgs,
    },
    /// Bucket lease commands.
    Bucket {
        /// What to do.
        #[command(subcommand)]
        command: BucketCommand,
    },
    /// The console on a local store with live simulated holders and two real demo pods:
    /// no cloud account needed. Quitting stops every demo process and removes the
    /// temporary directory (a --dir is kept).
    Demo {
        /// Use this directory (created if missing; must be empty or a previous demo's)
        /// instead of a temporary one.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// How long the dying holder renews before it dies (for tests).
        #[arg(
            long,
            hide = true,
            env = "LEASECTL_DEMO_DIE_AFTER",
            default_value = "20s",
            value_parser = parse_duration,
            value_name = "DURATION"
        )]
        die_after: Duration,
        /// Internal: the demo's watchdog process.
        #[arg(long, hide = true)]
        watchdog: bool,
    },
    /// Monitoring plugin (Nagios, Icinga, Sensu): one status line with perfdata; exit 0 OK,
    /// 1 WARNING, 2 CRITICAL, 3 UNKNOWN (anything not gathered, or bad usage).
    Check(CheckArgs),
    /// Prometheus exporter: /metrics and /healthz over HTTP, for a sidecar or a DaemonSet.
    Serve(ServeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
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
    PodScan {
        /// Accepted for symmetry with the console; output is always JSON.
        #[arg(long)]
        json: bool,
        /// Pod selection.
        #[command(flatten)]
        pod: PodArgs,
        /// The proc filesystem to read.
        #[arg(long, default_value = "/proc", value_name = "DIR")]
        proc_root: PathBuf,
    },
}

/// `leasectl config …`.
#[derive(Debug, Subcommand, Clone, Copy)]
pub enum ConfigCommand {
    /// Print the config file's path (and say on stderr whether it exists).
    Path,
    /// Print the config file as leasectl reads it: validated and normalised (credentials
    /// never shown). Exit 2 when it is missing or invalid.
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

fn parse_then(s: &str) -> Result<crate::takeover::Then, String> {
    s.parse()
}

/// `leasectl bucket …`.
#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Run CMD while holding the bucket lease on PREFIX_URL: acquire (with the precondition
    /// probe), renew every TTL/3, and stop CMD (SIGTERM, then SIGKILL after --grace) when the
    /// fence closes or the lease is lost; release at exit. Exit: CMD's status; 4 lease not
    /// acquired; 5 lease lost or fenced (CMD stopped); 1 other failures; 2 usage; 126 CMD
    /// cannot be run (not executable); 127 CMD not found.
    Hold {
        /// The prefix: s3://bucket/path/ or file:///dir/.
        #[arg(value_name = "PREFIX_URL")]
        prefix_url: String,
        /// Lease TTL (whole seconds, 3s to 1h).
        #[arg(long, default_value = "30s", value_parser = parse_ttl, value_name = "DURATION")]
        ttl: Duration,
        /// Keep trying to acquire for this long (a fresh lease going stale, a suspect one
        /// watched for a TTL) before giving up.
        #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
        wait: Duration,
        /// Take the lease as this instance id (default: a new random one). A lease handed
        /// over with `takeover --then handover:ID` is adopted at once by `--instance-id ID`.
        #[arg(long, value_name = "ID", value_parser = parse_instance_id)]
        instance_id: Option<String>,
        /// Time CMD gets between SIGTERM and SIGKILL when the fence closes.
        #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
        grace: Duration,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
}

/// `leasectl writer …`.
#[derive(Debug, Subcommand)]
pub enum WriterCommand {
    /// Run CMD under the writer-lease rules: as the pod's root, take the flock first, stamp
    /// CLOUD_WRITER_LEASE_HELD with our pid, run CMD as a child, forward signals, release after
    /// it is reaped, exit with its status. Otherwise (Inherit, Off) exec CMD in place.
    /// Exit: CMD's status; 125 refused to start (invalid CLOUD_WRITER_LEASE, lock still
    /// held after --wait, lock file cannot be opened); 126 CMD cannot be run; 127 CMD not
    /// found; 2 usage.
    Exec {
        /// The data directory holding `.writer.lock`.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// How long to wait for the previous holder before failing closed.
        #[arg(long, default_value = "90s", value_parser = parse_duration, value_name = "DURATION")]
        wait: Duration,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
}

/// Parses a lease TTL: whole seconds from 3 s to one hour (a longer one is
/// judged suspect by every reader; a shorter one cannot be renewed in time).
pub fn parse_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    let max = crate::bucket::MAX_SANE_TTL_S;
    if d.subsec_nanos() != 0 || d.as_secs() < 3 || d.as_secs() > max {
        return Err(format!("a TTL must be whole seconds from 3s to {max}s"));
    }
    Ok(d)
}

/// Parses a per-request timeout: at least 100 ms.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err("a timeout must be at least 100ms".into());
    }
    Ok(d)
}

fn leasectl_default_get_price() -> f64 {
    crate::tui::app::DEFAULT_GET_PRICE
}

/// Parses a price: a finite, non-negative number of US dollars.
pub fn parse_price(s: &str) -> Result<f64, String> {
    match s.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err("expected a price in US dollars, e.g. 0.0004".into()),
    }
}

/// Parses an instance id: 1 to 256 characters, no whitespace or control characters.
pub fn parse_instance_id(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 256 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("expected 1 to 256 characters without spaces or control characters".into());
    }
    Ok(s.to_owned())
}

/// Parses an endpoint URL: `http://` or `https://` with a host.
///
/// Accepted as given here and checked by [`check_endpoint`] before use: clap
/// would echo a refused value, and an endpoint may carry a secret.
pub fn parse_endpoint(s: &str) -> Result<String, String> {
    Ok(s.to_owned())
}

/// Checks an `--endpoint-url`: `http(s)://host[:port]`, without credentials
/// in it. The message never repeats the user information.
pub fn check_endpoint(s: &str) -> Result<(), String> {
    let shown = crate::text::sanitize(&crate::store::s3::redact_url(s).0);
    let u = url::Url::parse(s).map_err(|e| format!("--endpoint-url {shown} is not a URL ({e})"))?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(format!(
            "--endpoint-url {shown} carries credentials: give them as AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY or with --profile, and the URL without them"
        ));
    }
    if u.query().is_some() || u.fragment().is_some() {
        // The SDK logs its endpoint at debug level: nothing secret may be in it.
        return Err(format!(
            "--endpoint-url {shown} has a query or fragment: an S3 endpoint is \
             http(s)://host[:port][/path] only"
        ));
    }
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "--endpoint-url {shown}: expected http://host[:port] or https://host[:port]"
        ));
    }
    Ok(())
}

/// Parses a region name: letters, digits, `-`, `_`, `.`, 1 to 64 characters.
pub fn parse_plain_name(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("expected 1 to 64 letters, digits, '-', '_' or '.'".into());
    }
    Ok(s.to_owned())
}

/// Parses a profile name as the aws CLI and `AWS_PROFILE` accept it: 1 to 128
/// printable ASCII characters other than spaces and `[ ] # ;` (which the
/// config files' syntax uses), e.g. `team/prod@admin`.
pub fn parse_profile(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 128
        || !s
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '[' | ']' | '#' | ';'))
    {
        return Err("expected 1 to 128 printable characters without spaces or [ ] # ;".into());
    }
    Ok(s.to_owned())
}

/// The AWS environment variables that end up in request headers or URLs. A
/// value with a control character (or outside printable ASCII) would make the
/// SDK fail deep inside request signing, so it is refused up front.
pub const CHECKED_ENV: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
];

/// The first variable of [`CHECKED_ENV`] whose value is not printable ASCII
/// (its name only: the value may be a secret).
pub fn bad_aws_env() -> Option<&'static str> {
    CHECKED_ENV.iter().copied().find(|name| {
        std::env::var_os(name).is_some_and(|v| {
            v.to_str()
                .is_none_or(|v| !v.chars().all(|c| c.is_ascii_graphic()))
        })
    })
}

/// The longest duration any flag or config value accepts: 365 days. Longer
/// ones mean nothing for a lease, a timeout or a refresh, and a value near
/// the type's limit would overflow the arithmetic on instants and deadlines.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a humantime duration such as `5s` or `1m30s`, at most
/// [`MAX_DURATION`].
///
/// # Errors
/// A sentence for a value that is not a duration or is longer than 365 days.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 5s, 1m, 250ms)"))?;
    if d > MAX_DURATION {
        return Err("a duration must be at most 365d (examples: 5s, 1m, 1h)".into());
    }
    Ok(d)
}

/// Parses a refresh or watch interval: a duration from 1 s to
/// [`MAX_DURATION`] (a shorter one is refused, never silently raised).
///
/// # Errors
/// As [`parse_duration`], and for a value under 1 s.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("an interval must be at least 1s (examples: 1s, 5s, 1m)".into());
    }
    Ok(d)
}

/// The environment variable that chooses the exclusion mode, like
/// `--conditional`.
pub const CONDITIONAL_ENV: &str = "MUSHROOMDB_BACKUP_LEASE_CONDITIONAL";

/// The exclusion mode that `MUSHROOMDB_BACKUP_LEASE_CONDITIONAL` (`value`,
/// as read from the environment) asks for: `None` when it is unset or empty
/// (deployment templates often leave it empty), `on` or `off` (any ASCII
/// case) otherwise.
///
/// Only the commands that write or judge bucket leases read it (the console,
/// `--json`, `-o`, `--watch`, `check`, `serve`, `bucket hold`, `takeover`);
/// the others (`writer exec` first of all) run whatever it holds.
///
/// # Errors
/// A sentence naming the variable and the accepted values for any other value.
pub fn conditional_from_env(value: Option<&std::ffi::OsStr>) -> Result<Option<OnOff>, String> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match v.to_str().map(str::to_ascii_lowercase).as_deref() {
        Some("on") => Ok(Some(OnOff::On)),
        Some("off") => Ok(Some(OnOff::Off)),
        _ => Err(format!(
            "the environment variable {CONDITIONAL_ENV} is \"{}\"; accepted values are `on`, \
             `off` (best-effort), or empty / unset (conditional, the default)",
            crate::text::sanitize_cut(&v.to_string_lossy(), 64)
        )),
    }
}
