//! `-o ndjson`'s order of lines (issue 38, docs/output.md): the targets are
//! read in turn, and a target's `error` lines come after its `lease` lines
//! (a prefix's read error is known once its read is done; the target's
//! errors are written when the target is). One prefix's GET fails for real:
//! a proxy in front of moto answers it 403 (a local store reads a LEASE
//! that is a directory as absent, a symlink or a FIFO as malformed, and
//! root reads through any permission: none is a read error).

use serde_json::Value;

use crate::common::cli::{record, run, text};
use crate::common::proxy::{Mode, Proxy};
use crate::common::{self, moto, Moto};

/// Target 1 (three prefixes, the middle one's GET answered 403), then
/// target 2 (one prefix): target 1's `lease` lines, its `error` line for the
/// failing prefix (naming it and the cause), then target 2's `lease` line,
/// then the summary.
#[tokio::test(flavor = "multi_thread")]
async fn a_targets_error_lines_follow_its_lease_lines_and_targets_come_in_turn() {
    let m = moto(Moto::Conditional);
    let client = common::sdk_client(&m.endpoint());
    let first = common::bucket_name("ndjson-order-first");
    let second = common::bucket_name("ndjson-order-second");
    for (bucket, prefixes) in [(&first, &["db1", "db2", "db3"][..]), (&second, &["db"][..])] {
        common::create_bucket(&client, bucket).await;
        for p in prefixes {
            let body = record(&format!("holder-{p}"), 5, 60);
            common::put_raw(&client, bucket, &format!("{p}/LEASE"), body.as_bytes()).await;
        }
    }
    let port: u16 = m.endpoint().rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    proxy.fail_requests("GET", &format!("/{first}/db2/LEASE"), 403);
    let (t1, t2) = (format!("s3://{first}/"), format!("s3://{second}/"));
    let args: Vec<String> = [
        "--endpoint-url",
        &proxy.endpoint(),
        "--path-style",
        "--no-pod",
        "-o",
        "ndjson",
        &t1,
        &t2,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let shape: Vec<(String, String, Value)> = lines
        .iter()
        .map(|l| {
            let kind = l["type"].as_str().unwrap_or_default().to_owned();
            let target = l["target"].as_str().unwrap_or_default().to_owned();
            (kind, target, l["prefix"].clone())
        })
        .collect();
    let line = |kind: &str, target: &str, prefix: &str| {
        (kind.to_owned(), target.to_owned(), Value::from(prefix))
    };
    let want = vec![
        line("lease", &t1, "db1/"),
        line("lease", &t1, "db3/"),
        line("error", &t1, "db2/"),
        line("lease", &t2, "db/"),
        ("summary".to_owned(), String::new(), Value::Null),
    ];
    assert_eq!(
        shape,
        want,
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status.code(),
        text(&out.stderr)
    );
    // The line names the prefix (its `prefix`, checked above) and the cause.
    let error = &lines[2];
    let said = error["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("access denied") && said.contains("injected 403"),
        "the error line says the cause: {error:#}"
    );
    assert_eq!(lines[4]["errors"], 1, "{:#}", lines[4]);
    // A LEASE that could not be read is unknown: not a healthy exit.
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        proxy.counts().get("GET").copied().unwrap_or(0) >= 4,
        "{:?}",
        proxy.counts()
    );
}
