//! From argv to a checked command line: parsing, the config file's context,
//! the environment, and the rules that hold across commands.

use clap::{ArgMatches, FromArgMatches};

use super::Shared;
use crate::bucket::RecordFormat;
use crate::cli;
use crate::cli::{
    bad_aws_env, check_endpoint, check_endpoint_from, conditional_from_env, OutputFormat,
    CONDITIONAL_ENV,
};
use crate::cli::{BucketCommand, Cli, Command, OnOff};
use crate::config::select;
use crate::config::ConfigError;
use crate::exit::{mark_said, say};
use crate::exit::{CheckStatus, Exit};
use crate::stdout::{write_line, WriteError};
use crate::target::TargetError;
use crate::target::{set_command_names, Target};
use crate::text::sanitize;

/// Parses argv. Help and version are printed (exit 0), as clap prints them;
/// a usage error of `check` (a monitoring plugin) is UNKNOWN (3), with its
/// plugin line on stdout; any other usage error is clap's (2), but for a
/// TARGET that is not one, said as leasectl says it ([`bad_target`]).
///
/// # Errors
/// The [`Exit`] when the command does not run: help, version, usage.
pub fn parse() -> Result<(Cli, ArgMatches), Exit> {
    let command = cli::command();
    hand_in_command_names(&command);
    let parsed = command
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    let e = match parsed {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    if let Some(t) = target_error(&e) {
        return Err(bad_target(t));
    }
    let _ = e.print();
    if e.use_stderr() && parsed_command().as_deref() == Some("check") {
        return Err(plugin_unknown("usage error (see stderr)"));
    }
    if e.use_stderr() {
        mark_said();
    }
    // Help and version (on stdout, 0), or clap's usage error (2).
    Err(if e.use_stderr() {
        Exit::Usage
    } else {
        Exit::Ok
    })
}

/// The TARGET that clap could not parse, when that is `e`'s cause.
fn target_error(e: &clap::Error) -> Option<&TargetError> {
    std::error::Error::source(e)?.downcast_ref::<TargetError>()
}

/// A TARGET that is not one: `leasectl: bad TARGET …` on stderr, a usage
/// error (2); for `check`, its plugin line on stdout alone, UNKNOWN (3).
fn bad_target(e: &TargetError) -> Exit {
    if parsed_command().as_deref() == Some("check") {
        return plugin_unknown(&sanitize(&e.to_string()));
    }
    say(e);
    Exit::Usage
}

/// Tells `target` every subcommand's name (hidden ones included), for the
/// hint a misspelt TARGET gets.
fn hand_in_command_names(command: &clap::Command) {
    set_command_names(
        command
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect(),
    );
}

/// The command argv names, as clap finds it when it ignores the errors (a
/// bad flag or value does not hide which command was meant).
fn parsed_command() -> Option<String> {
    cli::command()
        .ignore_errors(true)
        .try_get_matches()
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_owned))
}

/// A usage error found after parsing: said on stderr; `check` also prints
/// its plugin line and is UNKNOWN.
fn usage(command: Option<&str>, why: &str) -> Exit {
    say(why);
    if command == Some("check") {
        return plugin_unknown(&why.replace('|', "\\x7c"));
    }
    Exit::Usage
}

/// `check`'s plugin line for a usage error, on stdout: UNKNOWN (a closed
/// stdout is 141, as everywhere).
fn plugin_unknown(why: &str) -> Exit {
    match write_line(&format!("LEASES UNKNOWN - {why}")) {
        Err(WriteError::Closed) => Exit::ClosedPipe,
        _ => Exit::Check(CheckStatus::Unknown),
    }
}

/// Completes and checks `cli` (the config file's context, the exclusion
/// mode from the environment, `-o json`, endpoints, AWS variables,
/// `--read-only`), sets up logging, and builds the [`Shared`] set-up.
///
/// # Errors
/// The [`Exit`] of a usage error (said on stderr).
pub fn prepare(cli: &mut Cli, matches: &ArgMatches) -> Result<Shared, Exit> {
    let command = matches.subcommand_name();
    // `bucket fence-check` only reads a descriptor it inherited: it neither
    // writes nor judges a lease.
    let fence_check = matches
        .subcommand_matches("bucket")
        .and_then(|m| m.subcommand_name())
        == Some("fence-check");
    // The context (-c NAME, or the default one for a bare `leasectl`): flags win.
    // Its parts from the file are escaped already (ConfigError).
    apply_context(cli, matches).map_err(|e| usage(command, &e.to_string()))?;
    // MUSHROOMDB_BACKUP_LEASE_CONDITIONAL, for the commands that use it only
    // (`--conditional` wins): `writer exec` must start whatever it holds.
    let uses_conditional = !fence_check
        && matches!(
            command,
            None | Some("check" | "serve" | "bucket" | "takeover")
        );
    if uses_conditional && cli.s3.conditional.is_none() {
        cli.s3.conditional = conditional_from_env(std::env::var_os(CONDITIONAL_ENV).as_deref())
            .map_err(|why| usage(command, &why))?;
    }
    // `-o json` is `--json`.
    if cli.console.output.format == Some(OutputFormat::Json) {
        cli.console.json = true;
    }
    check_environment(cli)?;
    // Watch mode promises that nothing writes: a writing command cannot run in it.
    let writes = match command {
        Some("bucket") if !fence_check => Some("bucket hold"),
        Some("writer") => Some("writer exec"),
        Some(c @ ("probe" | "takeover" | "demo")) => Some(c),
        _ => None,
    };
    if let (true, Some(cmd)) = (cli.console.read_only, writes) {
        say(format!(
            "--read-only cannot be combined with `{cmd}`, which writes"
        ));
        return Err(Exit::Usage);
    }
    let shared = Shared::new(cli);
    set_up_logging(cli, command, &shared);
    Ok(shared)
}

/// The endpoint (`--endpoint-url`, or the SDK's variables when none is
/// given: the same rules) and the AWS variables that end up in requests.
fn check_environment(cli: &Cli) -> Result<(), Exit> {
    let refuse = |why: String| {
        say(why);
        Exit::Usage
    };
    if let Some(e) = &cli.s3.endpoint_url {
        check_endpoint(e).map_err(refuse)?;
    } else {
        // The SDK takes these when no endpoint is given: the same rules as
        // for --endpoint-url (no credentials, query or fragment in them).
        for var in ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"] {
            if let Some(e) = std::env::var(var).ok().filter(|e| !e.is_empty()) {
                check_endpoint_from(var, &e).map_err(refuse)?;
            }
        }
    }
    if let Some(name) = bad_aws_env() {
        return Err(refuse(format!(
            "the environment variable {name} holds a control character or a non-ASCII \
             character; fix or unset it (its value is not shown: it may be a secret)"
        )));
    }
    Ok(())
}

/// The terminal belongs to the console: the console logs to a file (the demo
/// to one in its directory); every other command says its warnings and
/// errors on stderr as sentences, and logs there with `-v` (or to
/// `--log-file`).
fn set_up_logging(cli: &Cli, command: Option<&str>, shared: &Shared) {
    let c = &cli.console;
    match command {
        Some("demo") => {}
        None if !c.json
            && c.output.format.is_none()
            && c.output.watch.is_none()
            && shared.terminal.stdout =>
        {
            super::init_console_logging(&cli.log)
        }
        _ => super::init_logging(&cli.log),
    }
}

/// Applies the context selected by `cli.context` (or the default context
/// for a bare `leasectl`) to `cli`, once, for every command: its endpoint,
/// region, profile, path style, concurrency and exclusion mode to the S3
/// options; its TARGETs (when none
/// are given) to the console's, `check`'s and `serve`'s; its refresh to the
/// console's; its depth to the console's, `check`'s and `serve`'s; its TTL to
/// the console's takeovers and `takeover`'s; its record format to the
/// console's, `takeover`'s and `bucket hold`'s. A value given on the command
/// line (as `matches` records) wins over the context's.
///
/// # Errors
/// A context that does not exist, a config file that cannot be read or is
/// invalid.
fn apply_context(cli: &mut Cli, matches: &clap::ArgMatches) -> Result<(), ConfigError> {
    use clap::parser::ValueSource;
    let bare = cli.command.is_none() && cli.console.targets.is_empty();
    let Some(ctx) = select(cli.context.as_deref(), bare)? else {
        return Ok(());
    };
    // The arguments of the command that runs (the top level for the console;
    // the leaf of a nested one such as `bucket hold`).
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    let given = |id: &str| {
        m.ids().any(|i| i.as_str() == id) && m.value_source(id) == Some(ValueSource::CommandLine)
    };
    let s3 = &mut cli.s3;
    if s3.endpoint_url.is_none() {
        s3.endpoint_url = ctx.endpoint_url.clone();
    }
    if s3.region.is_none() {
        s3.region = ctx.region.clone();
    }
    if s3.profile.is_none() {
        s3.profile = ctx.profile.clone();
    }
    s3.path_style |= ctx.path_style.unwrap_or(false);
    if let Some(n) = ctx.concurrency.filter(|_| !given("concurrency")) {
        s3.concurrency = n;
    }
    if s3.conditional.is_none() {
        s3.conditional = ctx
            .conditional
            .map(|on| if on { OnOff::On } else { OnOff::Off });
    }
    // Each part the context sets, where the command has it and the command
    // line did not give it.
    let targets = |t: &mut Vec<Target>| {
        if t.is_empty() {
            t.clone_from(&ctx.targets);
        }
    };
    let depth = |d: &mut u32| {
        if let Some(c) = ctx.depth.filter(|_| !given("depth")) {
            *d = c;
        }
    };
    let record_format = |f: &mut RecordFormat| {
        if let Some(c) = ctx.record_format.filter(|_| !given("record_format")) {
            *f = c;
        }
    };
    match &mut cli.command {
        None => {
            let c = &mut cli.console;
            targets(&mut c.targets);
            depth(&mut c.depth);
            record_format(&mut c.record_format);
            if let Some(r) = ctx.refresh.filter(|_| !given("refresh")) {
                c.refresh = r;
            }
            // No flag sets the console's TTL.
            c.ttl = ctx.ttl;
        }
        Some(Command::Check(a)) => {
            targets(&mut a.targets);
            depth(&mut a.depth);
        }
        Some(Command::Serve(a)) => {
            targets(&mut a.targets);
            depth(&mut a.depth);
        }
        Some(Command::Takeover(a)) => {
            record_format(&mut a.record_format);
            if let Some(t) = ctx.ttl.filter(|_| !given("ttl")) {
                a.ttl = t;
            }
        }
        Some(Command::Bucket {
            command: BucketCommand::Hold(a),
        }) => record_format(&mut a.record_format),
        Some(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli;
    use crate::target::Target;

    #[test]
    fn unknown_schemes_get_the_right_hint() {
        hand_in_command_names(&cli::command());
        let why = |s: &str| s.parse::<Target>().unwrap_err().why;
        assert!(
            why("porbe").contains("did you mean `leasectl probe`?"),
            "{}",
            why("porbe")
        );
        assert!(why("takover").contains("`leasectl takeover`"));
        assert!(
            why("/srv/store").contains("file:///srv/store/"),
            "{}",
            why("/srv/store")
        );
        assert!(why("https://minio:9000/b").contains("--endpoint-url"));
        assert!(why("zzzzzz").contains("unknown scheme"));
        // Every subcommand, not a fixed list (issue 22 §6).
        for (typo, cmd) in [
            ("chek", "check"),
            ("serv", "serve"),
            ("confg", "config"),
            ("mann", "man"),
            ("completion", "completions"),
        ] {
            assert!(
                why(typo).contains(&format!("did you mean `leasectl {cmd}`?")),
                "{typo}: {}",
                why(typo)
            );
        }
        // `--watch 1s TARGET` (issue 22 §7).
        assert!(why("1s").contains("--watch=1s"), "{}", why("1s"));
        assert!(why("90s").contains("--watch=90s"), "{}", why("90s"));
    }
}
