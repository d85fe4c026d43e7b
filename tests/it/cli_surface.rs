//! The command line as an operator meets it (issue 22 §6, §7; issue 23
//! items 3 and 9), with the real binary: every duration flag refuses values
//! near the type's limit (a usage error, never a panic), intervals under 1s
//! are refused, typos of every subcommand get a hint, `--watch 1s` is
//! explained, `bucket hold` of a file that cannot be run is 126,
//! `MUSHROOMDB_BACKUP_LEASE_CONDITIONAL` is read only where it is used, the
//! README's tables name only options (and exit codes) the `--help` of their
//! command has, the man page names no page that does not exist, and every
//! repository path the Markdown files name exists.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::cli::text;
use crate::common::{self, bin, bin_path, file_url, repo, run_with_timeout};

fn quiet_bin() -> Command {
    let mut c = bin();
    c.env("LEASECTL_LOG", "warn").env("NO_COLOR", "1");
    c
}

fn run_quiet(args: &[&str]) -> Output {
    let mut c = quiet_bin();
    c.args(args);
    run_with_timeout(c, Duration::from_secs(20))
}

/// Every leaf command of the command line (the top level included), with
/// its path of subcommand names: `[]`, `["check"]`, `["bucket", "hold"]` …
fn leaf_commands() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.clone();
            p.push(sub.get_name().to_owned());
            if sub.has_subcommands() {
                walk(sub, p, out);
            } else {
                out.push((p, sub.clone()));
            }
        }
    }
    let mut root = leasectl::cli::command();
    root.build();
    let mut out = vec![(Vec::new(), root.clone())];
    walk(&root, Vec::new(), &mut out);
    out
}

/// A command line on which `path` would really run (a local store, a
/// scratch directory), so that a duration flag that is accepted is used.
fn base_args(path: &[String], store: &str, scratch: &Path) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let audit = scratch.join("audit.jsonl").display().to_string();
    let prefix = format!("{store}db1/");
    match path
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["check"] => s(&["--no-pod", store]),
        ["serve"] => s(&["--no-pod", "--listen", "127.0.0.1:0", store]),
        ["probe"] => s(&[store]),
        ["takeover"] => s(&[&prefix, "--reason", "t", "--yes", "--audit-log", &audit]),
        ["bucket", "hold"] => s(&[&prefix, "--", "true"]),
        ["writer", "exec"] => s(&["--data-dir", &scratch.display().to_string(), "--", "true"]),
        ["audit"] => s(&["--audit-log", &audit]),
        ["demo"] => s(&["--dir", &scratch.join("demo").display().to_string()]),
        ["completions"] => s(&["bash"]),
        _ => Vec::new(),
    }
}

/// Issue 23 item 9: every flag whose value is a duration, on every command
/// (global ones on each), given a value near the type's limit, is a usage
/// error naming the flag (exit 2; `check`: 3), never a panic.
#[test]
fn every_duration_flag_refuses_values_near_the_limit() {
    let scratch = tempfile::tempdir().unwrap();
    let store_dir = scratch.path().join("store");
    std::fs::create_dir_all(store_dir.join("db1")).unwrap();
    let store = file_url(&store_dir);
    let mut seen = std::collections::BTreeSet::new();
    for (path, cmd) in leaf_commands() {
        for arg in cmd.get_arguments() {
            let is_duration = arg
                .get_value_names()
                .is_some_and(|n| n.iter().any(|v| v == "DURATION" || v == "INTERVAL"));
            let Some(long) = arg.get_long().filter(|_| is_duration) else {
                continue;
            };
            seen.insert(format!("{} --{long}", path.join(" ")).trim().to_owned());
            for value in [
                "9223372036854775807s",
                "18446744073709551615s",
                "18446744073709551615ns",
                "106751991167301d",
                "366d",
            ] {
                let mut args: Vec<String> = path.clone();
                args.push(format!("--{long}={value}"));
                args.extend(base_args(&path, &store, scratch.path()));
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = run_quiet(&argv);
                let err = text(&out.stderr);
                let ctx = format!(
                    "leasectl {}: {:?}\nstdout:\n{}\nstderr:\n{err}",
                    args.join(" "),
                    out.status,
                    text(&out.stdout)
                );
                let want = if path == ["check"] { 3 } else { 2 };
                assert_eq!(out.status.code(), Some(want), "{ctx}");
                assert!(!err.contains("panicked"), "{ctx}");
                assert!(
                    err.contains(&format!("invalid value '{value}' for '--{long}")),
                    "{ctx}"
                );
                assert!(
                    err.contains("at most 365d") || err.contains("too large"),
                    "{ctx}"
                );
            }
        }
    }
    // The walk found them all (it is not vacuous).
    for f in [
        "--timeout",
        "--refresh",
        "--watch",
        "--heartbeat",
        "check --warn-age",
        "check --crit-age",
        "check --timeout",
        "serve --refresh",
        "takeover --ttl",
        "bucket hold --ttl",
        "bucket hold --wait",
        "bucket hold --grace",
        "writer exec --wait",
        "demo --die-after",
    ] {
        assert!(seen.contains(f), "{f} not found among {seen:?}");
    }
}

/// Issue 22 §6: an interval under 1s is refused naming the minimum, never
/// raised in silence; a config file's durations follow the same limits.
#[test]
fn intervals_under_a_second_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_url(dir.path());
    for args in [
        vec!["--json", "--no-pod", "--refresh", "500ms", &store],
        vec!["--no-pod", "--watch=500ms", &store],
        vec!["--no-pod", "--watch", "--heartbeat", "999ms", &store],
        vec!["serve", "--no-pod", "--refresh", "500ms", &store],
    ] {
        let out = run_quiet(&args);
        let err = text(&out.stderr);
        let ctx = format!("{args:?}: {:?}\n{err}", out.status);
        assert_eq!(out.status.code(), Some(2), "{ctx}");
        assert!(err.contains("at least 1s"), "{ctx}");
        assert!(out.stdout.is_empty(), "{ctx}");
    }
    let out = run_quiet(&["--json", "--no-pod", "--refresh", "1s", &store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let cfg = dir.path().join("config.toml");
    for (field, value) in [
        ("refresh", "9223372036854775807s"),
        ("ttl", "18446744073709551615s"),
    ] {
        std::fs::write(&cfg, format!("[contexts.x]\n{field} = \"{value}\"\n")).unwrap();
        let mut c = quiet_bin();
        c.env("LEASECTL_CONFIG", &cfg)
            .args(["-c", "x", "--json", "--no-pod", &store]);
        let out = run_with_timeout(c, Duration::from_secs(20));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: {err}");
        assert!(
            !err.contains("panicked") && err.contains(field),
            "{field}: {err}"
        );
    }
}

/// Issue 22 §6 and §7: a word that is no TARGET gets a hint for every
/// subcommand, and a duration after `--watch` is explained.
#[test]
fn typos_of_every_subcommand_and_watch_values_get_a_hint() {
    let mut cases: Vec<(String, String)> = [
        ("chek", "check"),
        ("serv", "serve"),
        ("confg", "config"),
        ("mann", "man"),
        ("completion", "completions"),
        ("takover", "takeover"),
    ]
    .iter()
    .map(|(t, c)| (t.to_string(), c.to_string()))
    .collect();
    for sub in leasectl::cli::command().get_subcommands() {
        let name = sub.get_name();
        if name != "help" {
            // One letter doubled at the end: a typo at distance 1.
            cases.push((
                format!("{name}{}", &name[name.len() - 1..]),
                name.to_owned(),
            ));
        }
    }
    for (typo, cmd) in cases {
        let out = run_quiet(&[&typo]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{typo}: {err}");
        assert!(
            err.contains(&format!("did you mean `leasectl {cmd}`?")),
            "{typo}: {err}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let store = file_url(dir.path());
    let out = run_quiet(&["--no-pod", "--watch", "1s", &store]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad TARGET 1s") && err.contains("--watch=1s"),
        "{err}"
    );
}

/// Issue 22 §6: a CMD that exists but cannot be run is 126 for `bucket
/// hold`, as for `writer exec` and shells; a missing one is 127 for both.
#[test]
fn bucket_hold_of_a_command_that_cannot_run_is_126() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("p")).unwrap();
    let not_exec = dir.path().join("script.sh");
    std::fs::write(&not_exec, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_exec, std::fs::Permissions::from_mode(0o644)).unwrap();
    let prefix = format!("{}p/", file_url(dir.path()));
    let data = dir.path().to_str().unwrap();
    let missing = dir.path().join("no-such-command");
    for (cmd, code) in [
        ("/etc/passwd", 126),
        (not_exec.to_str().unwrap(), 126),
        (missing.to_str().unwrap(), 127),
    ] {
        let out = run_quiet(&[
            "bucket", "hold", "--ttl", "3s", "--grace", "0s", &prefix, "--", cmd,
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "bucket hold -- {cmd}: {err}");
        assert!(err.contains("cannot run"), "{err}");
        // The lease was released: the prefix is free again (a released
        // record keeps the generation).
        assert!(common::released_file(&dir.path().join("p/LEASE")), "{err}");
        let out = run_quiet(&["writer", "exec", "--data-dir", data, "--", cmd]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "writer exec -- {cmd}: {}",
            text(&out.stderr)
        );
    }
}

/// Issue 23 item 3: `MUSHROOMDB_BACKUP_LEASE_CONDITIONAL` set but empty is
/// unset; `on`/`off` are read; another value is an error naming the variable
/// and the accepted values, only for the commands that use it: `writer exec`
/// (and `audit`) run whatever it holds; `--conditional` wins.
#[test]
fn conditional_env_is_read_only_where_it_is_used() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("db")).unwrap();
    let store = file_url(dir.path());
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let audit = dir.path().join("audit.jsonl");
    let with = |value: &str, args: &[&str]| {
        let mut c = quiet_bin();
        c.env("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL", value)
            .args(args);
        run_with_timeout(c, Duration::from_secs(20))
    };
    let exclusion = |out: &Output| -> String {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        doc["targets"][0]["prefixes"][0]["exclusion"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (value, ok, best_effort) in [
        ("", true, false),
        ("on", true, false),
        ("off", true, true),
        ("OFF", true, true),
        ("maybe", false, false),
        ("false", false, false),
        ("0", false, false),
    ] {
        let ctx = format!("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL={value:?}");
        // Commands that do not use it run.
        let out = with(
            value,
            &[
                "writer",
                "exec",
                "--data-dir",
                data.to_str().unwrap(),
                "--",
                "true",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{ctx} writer exec: {}",
            text(&out.stderr)
        );
        let out = with(value, &["audit", "--audit-log", audit.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{ctx} audit: {}",
            text(&out.stderr)
        );
        // Commands that use it.
        let out = with(value, &["--json", "--no-pod", &store]);
        let check = with(value, &["check", "--no-pod", &store]);
        if ok {
            assert_eq!(out.status.code(), Some(0), "{ctx}: {}", text(&out.stderr));
            let want = if best_effort {
                "best_effort"
            } else {
                "unprobed"
            };
            assert_eq!(exclusion(&out), want, "{ctx}");
            assert_eq!(
                check.status.code(),
                Some(0),
                "{ctx}: {}",
                text(&check.stdout)
            );
        } else {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{ctx}: {err}");
            assert!(
                err.contains("MUSHROOMDB_BACKUP_LEASE_CONDITIONAL")
                    && err.contains("`on`")
                    && err.contains("`off`")
                    && err.contains("empty"),
                "{ctx}: {err}"
            );
            assert!(!err.contains("a value is required"), "{ctx}: {err}");
            assert_eq!(check.status.code(), Some(3), "{ctx}");
            assert!(
                text(&check.stdout).starts_with(
                    "LEASES UNKNOWN - the environment variable MUSHROOMDB_BACKUP_LEASE_CONDITIONAL"
                ),
                "{ctx}: {}",
                text(&check.stdout)
            );
            let hold = with(
                value,
                &["bucket", "hold", &format!("{store}db/"), "--", "true"],
            );
            assert_eq!(hold.status.code(), Some(2), "{ctx}: {}", text(&hold.stderr));
            assert!(!dir.path().join("db/LEASE").exists());
            // The flag wins over the variable.
            let out = with(
                value,
                &["--conditional", "off", "--json", "--no-pod", &store],
            );
            assert_eq!(out.status.code(), Some(0), "{ctx}: {}", text(&out.stderr));
            assert_eq!(exclusion(&out), "best_effort", "{ctx}");
        }
    }
}

/// The long options (`--name`) in `line`: `--` not preceded by a letter,
/// digit or `-`, then a lowercase name.
fn long_options(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if b[i] == b'-' && b[i + 1] == b'-' && before_ok && b[i + 2].is_ascii_lowercase() {
            let mut j = i + 2;
            while j < b.len()
                && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-')
            {
                j += 1;
            }
            out.push(line[i..j].trim_end_matches('-').to_owned());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The `--help` text of the command at `path`.
fn help(path: &[&str]) -> String {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let out = run_quiet(&args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    text(&out.stdout)
}

/// The command a README table documents: named in its header (`exit code
/// of `takeover``), else by the section it is in.
fn table_command(header: &str, heading: &str) -> Vec<&'static str> {
    let pick = |s: &str| -> Option<Vec<&'static str>> {
        for (name, path) in [
            ("writer exec", vec!["writer", "exec"]),
            ("bucket hold", vec!["bucket", "hold"]),
            ("bucket fence-check", vec!["bucket", "fence-check"]),
            ("takeover", vec!["takeover"]),
            ("leasectl check", vec!["check"]),
            ("leasectl probe", vec!["probe"]),
        ] {
            if s.contains(name) {
                return Some(path);
            }
        }
        None
    };
    pick(header).or_else(|| pick(heading)).unwrap_or_default()
}

/// Issue 22 §6: every option a README table names exists in the `--help` of
/// the command that table documents, and every exit code of an exit-code
/// table is in that `--help` too; `check --min-leases` is documented.
#[test]
fn readme_tables_name_only_what_the_help_has() {
    // The README and the reference in docs/ (issue 35): one text, read in order
    // (not the performance lab notebook: its tables are measurements).
    let readme = the_documents()
        .iter()
        .filter(|p| {
            !p.ends_with("docs/exit-codes.md") && !p.ends_with("docs/performance-history.md")
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut heading = String::new();
    let mut header: Option<String> = None;
    let mut checked = 0;
    let mut helps: std::collections::HashMap<Vec<&str>, String> = Default::default();
    let mut in_code = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            heading = line.to_owned();
            header = None;
            // A heading that is a command's synopsis names its options too.
            let path = table_command("", &heading);
            if !path.is_empty() {
                let help = helps.entry(path.clone()).or_insert_with(|| help(&path));
                for o in long_options(line) {
                    checked += 1;
                    assert!(
                        help.contains(&o),
                        "README heading {heading:?} names {o}, which `leasectl {} --help` does not have",
                        path.join(" ")
                    );
                }
            }
            continue;
        }
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let Some(h) = header.clone() else {
            header = Some(line.to_owned());
            continue;
        };
        if line.starts_with("|---") {
            continue;
        }
        let path = table_command(&h, &heading);
        let help = helps.entry(path.clone()).or_insert_with(|| help(&path));
        for o in long_options(line) {
            checked += 1;
            assert!(
                help.contains(&o),
                "README table under {heading:?} names {o}, which `leasectl {} --help` does not have:\n{line}",
                path.join(" ")
            );
        }
        if h.contains("exit code") && path != Vec::<&str>::new() {
            let first = line.split('|').nth(1).unwrap_or("").trim();
            if first.chars().all(|c| c.is_ascii_digit()) && !first.is_empty() {
                let numbers: Vec<&str> = help.split(|c: char| !c.is_ascii_digit()).collect();
                assert!(
                    numbers.contains(&first),
                    "README says `leasectl {}` exits {first}, its --help does not:\n{line}\n{help}",
                    path.join(" ")
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} options and codes found: is the parser broken?"
    );
    assert!(
        readme.contains("`--min-leases N`"),
        "check --min-leases is not documented"
    );
}

/// Issue 22 §6: `leasectl man` is one page that documents every command in
/// itself and names no `leasectl-COMMAND(1)` page (none is installed).
#[test]
fn the_man_page_refers_to_no_missing_page() {
    let out = run_quiet(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let man = text(&out.stdout);
    // `leasectl-check(1)`, roff-escaped or not.
    let plain = man.replace("\\-", "-");
    for (at, _) in plain.match_indices("leasectl-") {
        let rest = &plain[at + "leasectl-".len()..];
        let name_end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(rest.len());
        let after = &rest[name_end..];
        let is_page = after.len() >= 3
            && after.starts_with('(')
            && after.as_bytes()[1].is_ascii_digit()
            && after.as_bytes()[2] == b')';
        assert!(
            !is_page,
            "the man page refers to leasectl-{}",
            &rest[..name_end + 3]
        );
    }
    for (path, _) in leaf_commands().into_iter().skip(1) {
        if path.first().is_some_and(|p| p == "pod-scan") {
            continue; // hidden
        }
        let h = format!(".SS \"leasectl {}\"", path.join(" "));
        assert!(man.contains(&h), "no section {h}");
    }
    assert!(man.contains("\\-\\-min\\-leases") || man.contains("--min-leases"));
    // groff renders it without a warning, when installed.
    if let Ok(o) = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(man.as_bytes())?;
            c.wait_with_output()
        })
    {
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{}",
            text(&o.stderr)
        );
    }
}

/// Issue 22 §6: every repository path that a Markdown file names in
/// backticks (`tests/it/…`, `scripts/…`, `assets/…`, `src/…`, `benches/…`,
/// `examples/…`) exists, so a moved file cannot leave a stale reference.
#[test]
fn paths_named_in_the_markdown_files_exist() {
    let root = repo();
    let mut docs = vec![root.join("ARCHITECTURE.md"), root.join("PERFORMANCE.md")];
    docs.extend(the_documents());
    for d in [
        "assets/lease-records",
        "assets/sample-store",
        "assets/monitoring",
    ] {
        if let Ok(rd) = std::fs::read_dir(root.join(d)) {
            docs.extend(
                rd.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "md")),
            );
        }
    }
    let mut named = 0;
    for doc in docs.iter().filter(|d| d.exists()) {
        let text = std::fs::read_to_string(doc).unwrap();
        let prefixes = [
            "tests/",
            "scripts/",
            "assets/",
            "src/",
            "benches/",
            "examples/",
            ".ci/",
        ];
        // Every `…` span that is a plain repository path.
        let spans = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("```"))
            .flat_map(|l| l.split('`').skip(1).step_by(2));
        for span in spans {
            let is_path = prefixes.iter().any(|p| span.starts_with(p))
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'));
            if !is_path {
                continue;
            }
            let p = span.trim_end_matches(['.', ',']);
            if p.contains("NAME") || p.contains('*') {
                continue;
            }
            named += 1;
            assert!(
                root.join(p).exists(),
                "{} names `{p}`, which does not exist",
                doc.strip_prefix(&root).unwrap().display()
            );
        }
    }
    assert!(named > 5, "only {named} paths found");
}

/// Issue 24: `leasectl --help` (and `bucket`, `writer`, `config --help`)
/// gives each command a one-line summary, at most 100 characters with its
/// name; the details (exit codes, what it writes) are in `leasectl help CMD`.
#[test]
fn help_gives_each_command_a_one_line_summary() {
    for path in [&[][..], &["bucket"], &["writer"], &["config"]] {
        let h = help(path);
        let commands: Vec<&str> = h
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(
            !commands.is_empty(),
            "no Commands section in {path:?} --help:\n{h}"
        );
        for line in commands {
            assert!(
                line.chars().count() <= 100,
                "`leasectl {} --help` has a command summary over 100 characters:\n{line}",
                path.join(" ")
            );
        }
    }
    // The details are still there, in the command's own help.
    assert!(help(&["takeover"]).contains("4 refused"));
    assert!(help(&["check"]).contains("3 UNKNOWN"));
}

/// Issue 24: `check`'s usage errors are UNKNOWN (3, with the plugin line)
/// because the command parsed is `check`, not because argv holds the word:
/// a usage error of `probe` whose TARGET is the word `check` is clap's 2.
#[test]
fn only_the_check_commands_usage_errors_are_unknown() {
    let out = run_quiet(&["check", "--bogus"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("LEASES UNKNOWN - usage error"));
    let out = run_quiet(&["--region", "eu-west-1", "check", "--warn-age", "soon"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let out = run_quiet(&["probe", "check", "--bogus"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "no plugin line for another command");
}

/// The user's documents: README.md, CONTRIBUTING.md and every file of docs/.
fn the_documents() -> Vec<std::path::PathBuf> {
    let root = repo();
    let mut docs = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut reference: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    reference.sort();
    docs.extend(reference);
    docs
}

/// A heading's anchor as GitHub makes it: lower case, punctuation other than
/// `-` and `_` removed, spaces as `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Issue 35: every link between the documents resolves — the file exists
/// and, when the link names an anchor, a heading of that file makes it.
#[test]
fn every_link_between_the_documents_resolves() {
    let root = repo();
    let mut docs = the_documents();
    docs.extend([
        root.join("ARCHITECTURE.md"),
        root.join("PERFORMANCE.md"),
        root.join("CHANGELOG.md"),
    ]);
    let anchors = |path: &std::path::Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut in_code = false;
        let mut out = Vec::new();
        for l in text.lines() {
            if l.starts_with("```") {
                in_code = !in_code;
            }
            if !in_code && l.starts_with('#') {
                out.push(anchor_of(l));
            }
        }
        out
    };
    let mut links = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let dir = doc.parent().unwrap();
        let mut in_code = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            }
            if in_code {
                continue;
            }
            for part in line.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                if target.starts_with("http") || target.contains(' ') {
                    continue;
                }
                let (file, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target, None),
                };
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    dir.join(file)
                };
                links += 1;
                let name = doc.strip_prefix(&root).unwrap().display().to_string();
                assert!(
                    path.exists(),
                    "{name} links to {target}, which does not exist"
                );
                if let Some(a) = anchor {
                    assert!(
                        anchors(&path).iter().any(|h| h == a),
                        "{name} links to {target}: no heading makes #{a}"
                    );
                }
            }
        }
    }
    assert!(
        links > 30,
        "only {links} links found: is the parser broken?"
    );
}

/// Issue 45 §6: every reference to a document that the binary itself can
/// print — in a message, `--help`, the man page — resolves: `docs/NAME.md`
/// or `README.md` exists, and the section it names (`, "Heading"`: a heading
/// of that file starts so; `#anchor`: a heading makes it) is there. A
/// reference the test cannot check (`see the README, Monitoring`) fails too:
/// `writer exec` and `config view` pointed to README sections that had moved.
#[test]
fn every_reference_the_binary_prints_resolves() {
    let root = repo();
    let bytes = std::fs::read(bin_path()).unwrap();
    // The binary's text: runs of printable bytes (UTF-8 included).
    let text: String = bytes
        .split(|b| *b < 0x20 || *b == 0x7f)
        .filter(|r| r.len() >= 6)
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let headings = |path: &Path| -> Vec<String> {
        let mut in_code = false;
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                if l.starts_with("```") {
                    in_code = !in_code;
                }
                !in_code && l.starts_with('#')
            })
            .map(str::to_owned)
            .collect()
    };
    // The source's text, to tell a reference followed by its section from
    // two literals side by side in the binary.
    fn sources(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut source = String::new();
    sources(&root.join("src"), &mut source);
    let source_has = |s: &str| source.contains(s);
    let mut checked = 0;
    for (at, _) in text
        .match_indices("README")
        .chain(text.match_indices("docs/"))
    {
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.')))
            .unwrap_or(rest.len());
        // Literals sit side by side in the binary with nothing between
        // them ("…see docs/exit-codes.mdevery target…"): a name ends at its
        // ".md".
        let end = rest[..end].find(".md").map_or(end, |md| md + 3);
        let file = rest[..end].trim_end_matches('.');
        // 60 bytes either side, cut where a character starts: the bytes
        // around a literal are the binary's, anything at all.
        let context = &text[text.floor_char_boundary(at.saturating_sub(60))
            ..text.floor_char_boundary((at + 120).min(text.len()))];
        // Rust's own paths (`…/docs/…` of a dependency) are not ours.
        if text[..at].ends_with('/') || text[..at].ends_with("rust") {
            continue;
        }
        assert!(
            file == "README.md" || (file.starts_with("docs/") && file.ends_with(".md")),
            "the binary says {context:?}: name the document as README.md or docs/NAME.md"
        );
        let path = root.join(file);
        assert!(
            path.exists(),
            "the binary names {file}, which does not exist: {context:?}"
        );
        let after = &rest[file.len()..];
        if let Some(a) = after.strip_prefix('#') {
            let a: String = a
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
                .collect();
            assert!(
                headings(&path).iter().any(|h| anchor_of(h) == a),
                "the binary links to {file}#{a}: no heading makes it ({context:?})"
            );
        } else if let Some(q) = after.strip_prefix(", \"") {
            let section = q.split('"').next().unwrap_or_default();
            assert!(
                headings(&path)
                    .iter()
                    .any(|h| h.trim_start_matches('#').trim().starts_with(section)),
                "the binary names the section {section:?} of {file}, which has no such heading ({context:?})"
            );
        } else if source_has(&format!("{file}{}", after.get(..2).unwrap_or_default())) {
            // Only a reference the source writes so: another literal that
            // sits next to it in the binary (", …", ": …") is not its section.
            assert!(
                !after.starts_with(", ") && !after.starts_with(": "),
                "the binary names a section of {file} in a form this test cannot check: {context:?} \
                 (write `{file}, \"Heading\"` or `{file}#anchor`)"
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} references found: is the scan broken?"
    );
}

/// Issue 35: `leasectl::exit::EXIT_TABLE` is the one table of every
/// command's exit codes: docs/exit-codes.md shows it cell by cell, the man
/// page's EXIT STATUS renders it, and each code it gives a command is in
/// that command's `--help`.
#[test]
fn the_exit_code_table_matches_every_help() {
    use leasectl::exit::{EXIT_COLUMNS, EXIT_INTRO, EXIT_OTHERS, EXIT_TABLE};
    let text = std::fs::read_to_string(repo().join("docs/exit-codes.md")).unwrap();
    let cells = |row: &str| -> Vec<String> {
        let row = row.trim().trim_start_matches('|').trim_end_matches('|');
        row.split('|').map(|c| c.trim().to_owned()).collect()
    };
    let mut rows = text.lines().filter(|l| l.starts_with('|'));
    let header = cells(rows.next().unwrap());
    assert_eq!(header[0], "code");
    assert_eq!(header[1..], EXIT_COLUMNS, "docs/exit-codes.md's columns");
    let docs: Vec<Vec<String>> = rows.skip(1).map(cells).collect();
    let code: Vec<Vec<String>> = EXIT_TABLE
        .iter()
        .map(|(c, row)| {
            std::iter::once(c.to_string())
                .chain(row.iter().map(|s| s.to_string()))
                .collect()
        })
        .collect();
    for (d, c) in docs.iter().zip(&code) {
        assert_eq!(d, c, "docs/exit-codes.md's row for exit {} differs", c[0]);
    }
    assert_eq!(docs.len(), code.len(), "docs/exit-codes.md has other rows");
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for paragraph in [EXIT_INTRO, EXIT_OTHERS] {
        assert!(
            flat(&text).contains(&flat(paragraph)),
            "docs/exit-codes.md does not say: {paragraph}"
        );
    }

    let commands: Vec<Vec<&str>> = EXIT_COLUMNS
        .iter()
        .map(|h| match *h {
            "`check`" => vec!["check"],
            "`probe`" => vec!["probe"],
            "`timeline`" => vec!["timeline"],
            "`bucket hold`" => vec!["bucket", "hold"],
            "`bucket fence-check`" => vec!["bucket", "fence-check"],
            "`takeover`" => vec!["takeover"],
            "`writer exec`" => vec!["writer", "exec"],
            _ => vec![],
        })
        .collect();
    let man = text_of_man();
    let status = man_section(&man, "\"EXIT STATUS\"");
    let mut checked = 0;
    for (code, row) in EXIT_TABLE {
        for (i, cell) in row.iter().enumerate() {
            if *cell == "—" {
                continue;
            }
            // The man page: the code under its column's subsection.
            let column = format!(
                ".SS \"{}\"",
                EXIT_COLUMNS[i].replace('`', "").replace('-', "\\-")
            );
            let under = status
                .split(".SS ")
                .find(|s| column.ends_with(s.lines().next().unwrap_or("-")))
                .unwrap_or_else(|| panic!("no {column} in the man page's EXIT STATUS:\n{status}"));
            assert!(
                under.contains(&format!(".B {code}\n")),
                "the man page's {column} lacks exit {code}:\n{under}"
            );
            if *code >= 128 || commands[i].is_empty() || cell.contains("command's own") {
                continue;
            }
            let h = help(&commands[i]);
            let numbers: Vec<&str> = h.split(|c: char| !c.is_ascii_digit()).collect();
            assert!(
                numbers.contains(&code.to_string().as_str()),
                "the exit-code table gives `leasectl {}` exit {code}, its --help does not:\n{h}",
                commands[i].join(" ")
            );
            checked += 1;
        }
    }
    assert!(checked > 25, "only {checked} codes checked");
}

/// `leasectl man`'s text.
fn text_of_man() -> String {
    let out = run_quiet(&["man"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The man page's section `.SH {name}`, up to the next one.
fn man_section<'a>(man: &'a str, name: &str) -> &'a str {
    let head = format!(".SH {name}\n");
    let at = man
        .find(&head)
        .unwrap_or_else(|| panic!("the man page has no {head}"));
    let rest = &man[at + head.len()..];
    &rest[..rest.find("\n.SH ").map_or(rest.len(), |e| e + 1)]
}

/// The Markdown section under `## {heading}` of `doc`, up to the next `## `.
fn doc_section(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let head = format!("## {heading}\n");
    let at = text
        .find(&head)
        .unwrap_or_else(|| panic!("{doc} has no {head}"));
    let rest = &text[at + head.len()..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Issue 35: the man page's ENVIRONMENT names every variable leasectl reads
/// or sets (every `AWS_…`, `LEASECTL_…`, `CLOUD_WRITER_…`, `MIMALLOC_…`,
/// `NO_COLOR`… string in `src/`), and docs/targets.md says the same, row for
/// row; FILES likewise.
#[test]
fn the_man_page_and_the_docs_name_every_variable_and_file() {
    use leasectl::commands::man::{ENVIRONMENT, FILES};
    let names: Vec<&str> = ENVIRONMENT
        .iter()
        .flat_map(|(n, _)| n.iter().copied())
        .collect();
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    let prefixes = [
        "AWS_",
        "LEASECTL_",
        "MUSHROOMDB_",
        "CLOUD_WRITER_",
        "MIMALLOC_",
        "NO_COLOR",
        "XDG_",
    ];
    let mut found = 0;
    for f in files.iter().filter(|f| {
        !f.ends_with("src/commands/man.rs") && !f.components().any(|c| c.as_os_str() == "sim")
    }) {
        let src = std::fs::read_to_string(f).unwrap();
        for literal in src.split('"').skip(1).step_by(2) {
            let is_name = prefixes.iter().any(|p| literal.starts_with(p))
                && literal
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if is_name {
                found += 1;
                assert!(
                    names.contains(&literal),
                    "{} names the variable {literal}, which the man page's ENVIRONMENT \
                     (leasectl::commands::man::ENVIRONMENT) does not list",
                    f.strip_prefix(repo()).unwrap().display()
                );
            }
        }
    }
    assert!(found > 20, "only {found} variables found in src/");
    let man = text_of_man();
    let env = man_section(&man, "ENVIRONMENT");
    let docs = doc_section("docs/targets.md", "Environment");
    for (names, what) in ENVIRONMENT {
        for n in *names {
            assert!(env.contains(n), "the man page's ENVIRONMENT lacks {n}");
        }
        let row = format!(
            "| {} | {} |",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            what
        );
        assert!(
            docs.contains(&row),
            "docs/targets.md's Environment lacks the row\n{row}"
        );
    }
    let in_man = man_section(&man, "FILES");
    let docs = doc_section("docs/targets.md", "Files");
    for (path, what) in FILES {
        assert!(
            in_man.contains(&format!(".I {path}\n")),
            "the man page's FILES lacks {path}"
        );
        let row = format!("| `{path}` | {what} |");
        assert!(
            docs.contains(&row),
            "docs/targets.md's Files lacks the row\n{row}"
        );
    }
    assert!(FILES.iter().any(|(p, _)| p.ends_with(".writer.lock")));
    assert!(FILES.iter().any(|(p, _)| p.ends_with("audit.jsonl")));
    assert!(FILES.iter().any(|(p, _)| p.ends_with("config.toml")));
}

/// Issue 35: the man page's EXAMPLES are command lines the README or docs/
/// give as written, and each parses.
#[test]
fn the_man_pages_examples_are_the_docs_and_parse() {
    use leasectl::commands::man::EXAMPLES;
    let docs = the_documents()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let man = text_of_man();
    let examples = man_section(&man, "EXAMPLES");
    assert!(EXAMPLES.len() >= 8);
    for (_, line) in EXAMPLES {
        assert!(
            docs.contains(line),
            "the example `{line}` is in no document"
        );
        assert!(
            examples.contains(&line.replace('-', "\\-")),
            "the man page's EXAMPLES lacks `{line}`"
        );
        // Words as a shell splits them (double quotes only).
        let mut argv = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                ' ' if !quoted => argv.push(std::mem::take(&mut word)),
                c => word.push(c),
            }
        }
        argv.push(word);
        if let Err(e) = leasectl::cli::command().try_get_matches_from(&argv) {
            panic!("the example `{line}` does not parse: {e}");
        }
    }
}

/// Issue 35: `audit --help` and `config --help` (and `config path|view`)
/// list no option that does nothing there (`--audit-to`, `-c` and the S3
/// options, `--concurrency`, `--conditional`), and refuse them after the
/// command's name; given before it (a shell alias) they are accepted. Every
/// other command still lists them, and a value given after its name is the
/// command line's.
#[test]
fn audit_and_config_neither_list_nor_take_options_that_do_nothing_there() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let audit = audit.to_str().unwrap();
    let none = [
        "--context",
        "--endpoint-url",
        "--region",
        "--profile",
        "--path-style",
        "--timeout",
        "--concurrency",
        "--conditional",
        "--audit-to",
    ];
    for path in [
        &["audit"][..],
        &["config"],
        &["config", "path"],
        &["config", "view"],
    ] {
        let h = help(path);
        for o in none {
            assert!(
                !h.contains(o),
                "`leasectl {} --help` lists {o}:\n{h}",
                path.join(" ")
            );
        }
        for o in [
            "--concurrency=5",
            "--conditional=off",
            "--region=eu-west-1",
            "--path-style",
            "--timeout=5s",
            "--context=prod",
            "--audit-to=file:///tmp/x/",
        ] {
            let mut args = path.to_vec();
            if path == ["config"] {
                args.push("path");
            }
            args.push(o);
            if path == ["audit"] {
                args.extend(["--audit-log", audit]);
            }
            let out = run_quiet(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            let name = o.split('=').next().unwrap();
            assert!(
                err.contains(&format!("unexpected argument '{name}'")),
                "{args:?}: {err}"
            );
        }
    }
    // Before the command, as `alias lc='leasectl --endpoint-url … --path-style'`.
    let out = run_quiet(&[
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--path-style",
        "--concurrency",
        "4",
        "audit",
        "--audit-log",
        audit,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("no audit entries in"));
    // Every other command lists them, and takes them after its name.
    for path in [
        &["check"][..],
        &["bucket", "hold"],
        &["takeover"],
        &["probe"],
    ] {
        let h = help(path);
        for o in &none[..8] {
            assert!(
                h.contains(o),
                "`leasectl {} --help` lacks {o}",
                path.join(" ")
            );
        }
    }
    use clap::FromArgMatches;
    let matches = leasectl::cli::command()
        .try_get_matches_from([
            "leasectl",
            "bucket",
            "hold",
            "--region",
            "eu-west-1",
            "--concurrency",
            "7",
            "file:///tmp/x/",
            "--",
            "true",
        ])
        .unwrap();
    let cli = leasectl::cli::Cli::from_arg_matches(&matches).unwrap();
    assert_eq!(cli.s3.region.as_deref(), Some("eu-west-1"));
    assert_eq!(cli.s3.concurrency, 7);
    let matches = leasectl::cli::command()
        .try_get_matches_from([
            "leasectl",
            "--timeout",
            "3s",
            "check",
            "--conditional",
            "off",
        ])
        .unwrap();
    let cli = leasectl::cli::Cli::from_arg_matches(&matches).unwrap();
    assert_eq!(cli.s3.timeout, Duration::from_secs(3));
    assert_eq!(cli.s3.conditional, Some(leasectl::cli::OnOff::Off));
}
