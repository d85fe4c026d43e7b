//! The sample records in `assets/lease-records/` are judged as their README
//! says, read through the real local store and judgement; the sample `--json`
//! snapshot has every state and the racing pod's verdicts.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use leasectl::snapshot::{gather_target, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::store::ReadOnly;
use leasectl::target::Target;

fn assets() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/assets"))
}

#[tokio::test]
async fn sample_records_are_judged_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for e in std::fs::read_dir(assets().join("lease-records")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("LEASE") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let state = stem.split('-').next().unwrap().to_owned();
        std::fs::create_dir_all(dir.path().join(&stem)).unwrap();
        std::fs::copy(&path, dir.path().join(&stem).join("LEASE")).unwrap();
        expected.push((format!("{stem}/"), state));
    }
    expected.sort();
    assert_eq!(expected.len(), 13, "{expected:?}");
    let target = OpenTarget {
        target: Target::Local {
            dir: dir.path().to_path_buf(),
        },
        endpoint: "local".into(),
        store: Arc::new(ReadOnly::new(Arc::new(
            LocalStore::open(dir.path()).unwrap(),
        ))),
    };
    let at: DateTime<Utc> = "2026-11-30T07:00:00Z".parse().unwrap();
    let report = gather_target(&target, &GatherOptions::default(), || at).await;
    assert!(
        report.error.is_none() && report.errors.is_empty(),
        "{report:?}"
    );
    let got: Vec<(String, String)> = report
        .prefixes
        .iter()
        .map(|p| (p.prefix.clone(), p.state.to_string()))
        .collect();
    assert_eq!(got, expected);
    // The README's reasons.
    let problem = |prefix: &str| {
        report
            .prefixes
            .iter()
            .find(|p| p.prefix == prefix)
            .and_then(|p| p.problem.clone())
            .unwrap_or_default()
    };
    assert!(problem("malformed-missing-field/").contains("renewed_at"));
    assert!(problem("malformed-not-utf8/").contains("UTF-8"));
    assert!(problem("malformed-truncated/").contains("not JSON"));
    assert!(problem("malformed-duplicate-key/").contains("key \"ttl_s\" appears twice"));
    assert!(problem("malformed-invisible-id/")
        .contains(r#"instance_id "\u{301}\u{301}" has no visible character"#));
    assert!(problem("malformed-ttl-float/").contains("written as an integer"));
    assert!(problem("malformed-ttl-float/").contains("got 30.0"));
    assert!(problem("fresh-renewed-before-acquired/")
        .contains("renewed_at is 5m10s before acquired_at"));
}

#[test]
fn sample_snapshot_has_every_state_and_the_racing_pod() {
    let text = std::fs::read_to_string(assets().join("sample-snapshot.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["schema_version"], "1.3");
    let states: std::collections::BTreeSet<&str> = doc["targets"][0]["prefixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["absent", "fresh", "malformed", "stale", "suspect"].into()
    );
    let kinds: std::collections::BTreeSet<&str> = doc["pod"]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["siblings_racing", "waiting"].into());
    // Issue 26: records carry their generation (null where none: the
    // malformed and absent rows), and the takeover of billing-db/ is its
    // last_takeover, from the demo's audit log.
    let rows = doc["targets"][0]["prefixes"].as_array().unwrap();
    let row = |p: &str| rows.iter().find(|r| r["prefix"] == p).unwrap();
    assert!(row("orders-db/")["record"]["generation"].is_u64());
    let billing = row("billing-db/");
    assert_eq!(billing["record"]["instance_id"], "billing-standby");
    assert_eq!(
        billing["last_takeover"]["generation"],
        billing["record"]["generation"]
    );
    assert_eq!(billing["last_takeover"]["then"], "handover:billing-standby");
    assert!(row("orders-db/")["last_takeover"].is_null());
    assert!(doc["audit_log"]["error"].is_null());
}
