//! Contexts (issue 16) with the real binary: the config file named by
//! `LEASECTL_CONFIG`, `-c NAME`, the default context of a bare `leasectl`,
//! flags winning over a context, `config path|view`, and errors as
//! sentences with the file, the line and column, and what to do.

use std::path::Path;
use std::process::Output;

use chrono::{SecondsFormat, Utc};

use crate::common::cli::text;
use crate::common::{bin, file_url, run_with_timeout};

/// `leasectl ARGS` with the config file `config`.
fn run_with_config(config: &Path, args: &[&str]) -> Output {
    let mut c = bin();
    c.env("LEASECTL_CONFIG", config).args(args);
    run_with_timeout(c, std::time::Duration::from_secs(60))
}

fn fresh_record(holder: &str, ttl_s: u64) -> String {
    let t = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    serde_json::json!({"instance_id": holder, "acquired_at": t, "renewed_at": t, "ttl_s": ttl_s})
        .to_string()
}

fn lease(root: &Path, prefix: &str, body: &str) {
    let d = root.join(prefix);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("LEASE"), body).unwrap();
}

/// The prefixes of `-o ndjson`'s lease lines.
fn prefixes(out: &Output) -> Vec<String> {
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "lease")
        .map(|v| v["prefix"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn contexts_select_targets_and_flags_win() {
    let prod = tempfile::tempdir().unwrap();
    lease(prod.path(), "db/", &fresh_record("prod-holder", 60));
    lease(prod.path(), "deep/er/", &fresh_record("deep-holder", 60));
    let stage = tempfile::tempdir().unwrap();
    lease(stage.path(), "web/", &fresh_record("stage-holder", 60));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");

    // No file: `config path` says where it would be; a bare run is as before.
    let out = run_with_config(&config, &["config", "path"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), config.display().to_string());
    assert!(
        text(&out.stderr).contains("does not exist yet"),
        "{}",
        text(&out.stderr)
    );
    let out = run_with_config(&config, &["config", "view"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("there is no config file at"));
    let out = run_with_config(&config, &["-c", "prod", "--no-pod", "-o", "ndjson"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("context `prod` was asked for, but there is no config file"),
        "{}",
        text(&out.stderr)
    );

    std::fs::write(
        &config,
        format!(
            "default_context = \"prod\"\n\n\
             [contexts.prod]\ntargets = [\"{}\"]\ndepth = 2\nttl = \"45s\"\n\n\
             [contexts.stage]\ntargets = [\"{}\"]\nrefresh = \"2s\"\n",
            file_url(prod.path()),
            file_url(stage.path())
        ),
    )
    .unwrap();

    // Bare: the default context, with its depth.
    let out = run_with_config(&config, &["--no-pod", "-o", "ndjson"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(prefixes(&out), ["db/", "deep/er/"]);
    // A flag wins over the context's value.
    let out = run_with_config(&config, &["--no-pod", "-o", "ndjson", "--depth", "1"]);
    assert_eq!(prefixes(&out), ["db/", "deep/"]);
    // -c picks another context; TARGETs given win over the context's.
    let out = run_with_config(&config, &["-c", "stage", "--no-pod", "-o", "ndjson"]);
    assert_eq!(prefixes(&out), ["web/"]);
    let out = run_with_config(
        &config,
        &[
            "--context",
            "stage",
            "--no-pod",
            "-o",
            "ndjson",
            &file_url(prod.path()),
        ],
    );
    assert_eq!(prefixes(&out), ["db/", "deep/"]);
    // check takes the context's targets too.
    let out = run_with_config(&config, &["-c", "prod", "check", "--no-pod"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).starts_with("LEASES OK - 2 leases (2 fresh"),
        "{}",
        text(&out.stdout)
    );

    // A context's ttl is the default --ttl of a takeover; a flag wins.
    let audit = dir.path().join("audit.jsonl");
    let take = |extra: &[&str]| {
        // A holder that died ten minutes ago: there is something to take over.
        let dead = (Utc::now() - chrono::Duration::minutes(10))
            .to_rfc3339_opts(SecondsFormat::Micros, true);
        std::fs::write(
            prod.path().join("free/LEASE"),
            format!(r#"{{"instance_id":"dead","acquired_at":"{dead}","renewed_at":"{dead}","ttl_s":30}}"#),
        )
        .unwrap();
        let url = format!("{}free/", file_url(prod.path()));
        let mut args = vec![
            "-c",
            "prod",
            "takeover",
            url.as_str(),
            "--reason",
            "context test",
            "--yes",
            "--then",
            "handover:next-holder",
            "--audit-log",
            audit.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = run_with_config(&config, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let body = std::fs::read_to_string(prod.path().join("free/LEASE")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        std::fs::remove_file(prod.path().join("free/LEASE")).unwrap();
        v["ttl_s"].as_u64().unwrap()
    };
    std::fs::create_dir_all(prod.path().join("free")).unwrap();
    assert_eq!(take(&[]), 45);
    assert_eq!(take(&["--ttl", "20s"]), 20);

    // config view: validated and normalised.
    let out = run_with_config(&config, &["config", "view"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let view = text(&out.stdout);
    assert!(
        view.starts_with(&format!("# {}\n", config.display())),
        "{view}"
    );
    assert!(
        view.contains("default_context = \"prod\"") && view.contains("ttl = \"45s\""),
        "{view}"
    );
    assert!(view.contains("[contexts.stage]"), "{view}");
}

#[test]
fn context_errors_are_sentences_with_the_file_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let shown = config.display().to_string();
    std::fs::write(&config, "[contexts.prod]\ntargets = [\"file:///tmp/\"]\n").unwrap();

    // An unknown context lists the known ones; check says UNKNOWN (3).
    let out = run_with_config(&config, &["-c", "prdo", "--no-pod", "-o", "table"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        format!("leasectl: there is no context `prdo` in {shown}; the contexts defined are: prod")
    );
    let out = run_with_config(&config, &["-c", "prdo", "check"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).starts_with("LEASES UNKNOWN - there is no context `prdo`"));

    // A typo in a field: line and column, and the fix.
    std::fs::write(&config, "[contexts.prod]\ntargets = []\nregoin = \"eu\"\n").unwrap();
    let out = run_with_config(&config, &["config", "view"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "the config file {shown}:3:1 is not valid: unknown field `regoin`"
        )),
        "{err}"
    );
    assert!(
        !err.contains("Error {") && !err.contains("span:"),
        "no Debug output: {err}"
    );
    // A bare leasectl with an invalid config says so instead of ignoring it.
    let out = run_with_config(&config, &["--no-pod", "-o", "table"]);
    assert_eq!(out.status.code(), Some(2));
    // …but with a TARGET (and no -c) the file is not read at all.
    let out = run_with_config(
        &config,
        &["--no-pod", "-o", "table", "file:///nonexistent-leasectl/"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));

    // Credentials in an endpoint are refused and never printed.
    std::fs::write(
        &config,
        "default_context = \"prod\"\n[contexts.prod]\nendpoint_url = \"https://AKIAEXAMPLE:s3cr3t-key@minio.example:9000\"\n",
    )
    .unwrap();
    for args in [&["config", "view"][..], &["--no-pod", "-o", "table"][..]] {
        let out = run_with_config(&config, args);
        assert_eq!(out.status.code(), Some(2));
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(all.contains("carries credentials"), "{all}");
        assert!(
            !all.contains("s3cr3t-key") && !all.contains("AKIAEXAMPLE"),
            "{all}"
        );
    }
}
