//! `leasectl man`: the man page (roff) on stdout.

use crate::cli;
use crate::cli::CONDITIONAL_ENV;
use crate::config::CONFIG_ENV;
use crate::exit::say;
use crate::exit::Exit;
use crate::hold::GENERATION_ENV;
use crate::setup::Shared;
use crate::stdout::print;
use crate::supervise::{FENCE_FD_ENV, FENCE_PIPE_ENV};
use crate::writer::{ENABLE, HELD};

/// Prints the whole man page.
pub fn run(_shared: &Shared) -> Exit {
    let mut out = Vec::new();
    if let Err(e) = render_man(cli::command(), &mut out) {
        say(format!("could not render the man page: {e}"));
        return Exit::Failed;
    }
    match print(String::from_utf8_lossy(&out).trim_end()) {
        Ok(()) => Exit::Ok,
        Err(exit) => exit,
    }
}

/// The whole man page in one: the top-level sections, then a COMMANDS
/// section with every visible subcommand (nested ones too), each with its
/// synopsis, description and options. It refers to no other page: there is
/// no `leasectl-check(1)`.
///
/// # Errors
/// What writing the roff to `out` returns.
pub(crate) fn render_man(mut cmd: clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    out.extend_from_slice(b".SH COMMANDS\n");
    render_man_commands(&cmd, out)?;
    out.extend_from_slice(reference_sections().as_bytes());
    man.render_version_section(out)
}

/// Every environment variable leasectl reads (or sets for the command it
/// runs): its names, then what it does (Markdown). The man page's
/// ENVIRONMENT section and docs/targets.md's "Environment" say the same; a
/// test checks that every variable named in `src/` is here, and here in both.
pub const ENVIRONMENT: &[(&[&str], &str)] = &[
    (
        &[
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ],
        "Credentials, read by the AWS SDK with the rest of its chain (profiles, SSO, instance \
         metadata). A value with a control or non-ASCII character is refused (exit 2).",
    ),
    (
        &["AWS_PROFILE"],
        "The profile when `--profile` is not given.",
    ),
    (
        &["AWS_REGION", "AWS_DEFAULT_REGION"],
        "The region when `--region` is not given (then the profile's, then us-east-1).",
    ),
    (
        &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        "The endpoint when `--endpoint-url` is not given, by the same rules: no credentials, \
         query or fragment in it.",
    ),
    (
        &["AWS_CA_BUNDLE"],
        "A PEM file of CAs to trust besides the system's (else the profile's `ca_bundle`).",
    ),
    (&[CONFIG_ENV], "Overrides the config file's path."),
    (
        &["LEASECTL_LOG"],
        "The log's filter (e.g. `debug`, `warn`). Set, stderr gets the log (as with `-v`) \
         instead of sentences; it also filters `--log-file` and the console's log file.",
    ),
    (
        &[CONDITIONAL_ENV],
        "`on` or `off`, as `--conditional` (which wins); empty is unset. Read only by the \
         commands that write or judge bucket leases: the console, `--json`, `-o`, `check`, \
         `serve`, `bucket hold`, `takeover`.",
    ),
    (
        &[ENABLE],
        "The pod writer lease's switch (`1`/`true` or `0`/`false`; unset or empty: off), for \
         `writer exec` and the pod view.",
    ),
    (
        &[HELD],
        "The pid of the process that holds the writer lock for its children: set by \
         `writer exec` for its command, read by `writer exec` and the pod view.",
    ),
    (
        &[FENCE_FD_ENV, FENCE_PIPE_ENV],
        "Set by `bucket hold` for its command: the fence descriptor and its pipe's identity; \
         read by `bucket fence-check`.",
    ),
    (
        &[GENERATION_ENV, "LEASECTL_LEASE_KEY", "LEASECTL_INSTANCE_ID"],
        "Set by `bucket hold` for its command: the lease's generation (the fencing token; \
         unset when unknown), its key and the holder's instance id.",
    ),
    (
        &["NO_COLOR"],
        "Set: error reports on stderr have no colour.",
    ),
    (
        &["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"],
        "Where the config file and the data directory are.",
    ),
    (
        &["USER"],
        "The operator named in the audit log, when the user database has no name for the uid.",
    ),
    (
        &["MIMALLOC_ARENA_EAGER_COMMIT", "MIMALLOC_PURGE_DELAY"],
        "The allocator's options; when set, they win over leasectl's (0 and 0).",
    ),
    (
        &["LEASECTL_DEMO_DIE_AFTER"],
        "For tests: how long the demo's dying holder renews (default 20s).",
    ),
];

/// The files leasectl reads or writes by default: the path, then what it is
/// (Markdown). The man page's FILES section and docs/targets.md's "Files".
pub const FILES: &[(&str, &str)] = &[
    (
        "~/.config/leasectl/config.toml",
        "The config file of contexts (`leasectl config path` prints it; `LEASECTL_CONFIG` \
         overrides it): the platform's config directory.",
    ),
    (
        "~/.local/share/leasectl/audit.jsonl",
        "The default audit log of takeovers (JSON lines, mode 0600; `--audit-log` overrides \
         it): the platform's data directory.",
    ),
    (
        "~/.local/share/leasectl/console.log",
        "The console's log (the terminal belongs to the console).",
    ),
    (
        "{DataDir}/.writer.lock",
        "The pod writer lease: the file `writer exec` holds a flock on (zero length; never \
         delete a held one).",
    ),
    (
        "{prefix}/LEASE",
        "A bucket lease: the object in the store (a file under a `file://` TARGET).",
    ),
];

/// Command lines for the man page's EXAMPLES: what it does, then the line.
/// Each is in the README or docs/ as written, and parses (a test checks both).
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "The console on a local store with simulated holders and demo pods, no cloud account:",
        "leasectl demo",
    ),
    (
        "The console on a MinIO bucket:",
        "leasectl --endpoint-url http://minio.internal:9000 --path-style s3://backups/",
    ),
    (
        "One JSON snapshot of the bucket leases, for a script:",
        "leasectl --json --no-pod s3://bucket/prefix/",
    ),
    (
        "Just the pod, e.g. from inside a container:",
        "leasectl --json --pod-root 1 --data-dir /data",
    ),
    (
        "A monitoring plugin: WARNING when a lease is older than a minute, CRITICAL over five:",
        "leasectl check --warn-age 1m --crit-age 5m s3://backups-prod/mushroomdb/",
    ),
    (
        "Does the service honour the preconditions a lease needs:",
        "leasectl probe s3://bucket/prefix/",
    ),
    (
        "Take over a stale lease, only if it is still the record seen, then free the prefix:",
        "leasectl takeover s3://bucket/prefix/ --expect-etag ETAG --reason \"INC-1234: …\" --then release",
    ),
    (
        "The takeovers done from this host:",
        "leasectl audit",
    ),
    (
        "Run a backup under a bucket lease:",
        "leasectl bucket hold s3://backups/db1/ -- ./backup.sh /srv/db1/snapshot",
    ),
    (
        "Who held a prefix when, and could two ever write:",
        "leasectl timeline s3://timeline-970e50ba/db/",
    ),
];

/// `text` (Markdown: `code` spans, nothing else) as roff: code in bold,
/// `-` and `\` escaped, a leading `.` or `'` made plain.
fn roff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut code = false;
    for c in text.chars() {
        match c {
            '`' => {
                out.push_str(if code { "\\fR" } else { "\\fB" });
                code = !code;
            }
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c => out.push(c),
        }
    }
    if code {
        out.push_str("\\fR");
    }
    if out.starts_with(['.', '\'']) {
        out.insert_str(0, "\\&");
    }
    out
}

/// The sections after COMMANDS: EXIT STATUS (from [`crate::exit::EXIT_TABLE`],
/// one subsection per column), ENVIRONMENT, FILES and EXAMPLES.
pub(crate) fn reference_sections() -> String {
    use crate::exit::{EXIT_COLUMNS, EXIT_INTRO, EXIT_OTHERS, EXIT_TABLE};
    let mut s = String::from(".SH \"EXIT STATUS\"\n.PP\n");
    s.push_str(&roff(EXIT_INTRO));
    s.push('\n');
    for (i, column) in EXIT_COLUMNS.iter().enumerate() {
        s.push_str(&format!(".SS \"{}\"\n", roff(&column.replace('`', ""))));
        for (code, cells) in EXIT_TABLE {
            if cells[i] != "—" {
                s.push_str(&format!(".TP\n.B {code}\n{}\n", roff(cells[i])));
            }
        }
    }
    s.push_str(&format!(".SS Others\n.PP\n{}\n", roff(EXIT_OTHERS)));
    s.push_str(".SH ENVIRONMENT\n");
    for (names, what) in ENVIRONMENT {
        s.push_str(&format!(
            ".TP\n.B {}\n{}\n",
            roff(&names.join(", ")),
            roff(what)
        ));
    }
    s.push_str(".SH FILES\n");
    for (path, what) in FILES {
        s.push_str(&format!(".TP\n.I {}\n{}\n", roff(path), roff(what)));
    }
    s.push_str(".SH EXAMPLES\n");
    for (what, line) in EXAMPLES {
        s.push_str(&format!(
            ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
            roff(what),
            roff(line)
        ));
    }
    s
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
