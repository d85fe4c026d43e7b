//! The command line (DESIGN.md "Command line"): parsed with clap.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// leasectl: who writes here, is it safe, and how to move the lease without two writers.
#[derive(Debug, Parser)]
#[command(
    name = "leasectl",
    version,
    about,
    args_conflicts_with_subcommands = true
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

    /// Print one JSON snapshot on stdout and exit (0 healthy, 1 unreachable, 3 attention).
    #[arg(long)]
    pub json: bool,

    /// Discovery depth under each TARGET.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub depth: u32,

    /// Refresh interval (e.g. 5s, 1m); at least 1s.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub refresh: Duration,

    /// Per-request timeout (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

/// S3 connection options, shared by every command.
#[derive(Debug, Args, Clone)]
pub struct S3Args {
    /// S3 endpoint (MinIO, R2, …); AWS_ENDPOINT_URL is honoured too.
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// AWS region (default: the AWS chain, then us-east-1).
    #[arg(long, global = true, value_name = "R")]
    pub region: Option<String>,
    /// AWS profile name.
    #[arg(long, global = true, value_name = "P")]
    pub profile: Option<String>,
    /// Path-style addressing (needed by MinIO and most self-hosted services).
    #[arg(long, global = true)]
    pub path_style: bool,
    /// Exclusion mode: `off` = best-effort (read, then unconditional write).
    /// Also MUSHROOMDB_BACKUP_LEASE_CONDITIONAL=off.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "MUSHROOMDB_BACKUP_LEASE_CONDITIONAL"
    )]
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
pub enum Command {}

/// Parses a humantime duration such as `5s` or `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 5s, 1m, 250ms)"))
}
