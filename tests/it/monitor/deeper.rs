//! Issue 35 trip 3: a TARGET whose every prefix is absent while LEASE keys
//! lie one level deeper (`s3://backups/` for leases under
//! `s3://backups/db1/x/`) is not all clear: `-o table`, `--json` and
//! `check` say so and name the `--depth` that finds them, on a local store
//! and on moto, with the real binary.

use crate::common::cli::{record, write_lease};
use crate::common::{self, file_url, leasectl_parts, moto_bucket};

/// The three outputs on `target`, whose leases sit at depth 2 (under
/// `db1/a/`), listed to depth 1: each names `--depth 2`; listed to depth 2,
/// all is well and nothing is said.
fn says_the_depth(endpoint: Option<&str>, target: &str, example: &str) {
    let (code, out, err) = leasectl_parts(endpoint, &["--no-pod", "-o", "table", target]);
    assert!(
        out.contains("db1/") && out.contains("absent") && !out.contains("fresh"),
        "{out}"
    );
    assert_eq!(code, 3, "not all clear: {out}{err}");
    assert!(
        err.contains("every prefix under")
            && err.contains("LEASE keys lie deeper")
            && err.contains(&format!("{example}LEASE"))
            && err.contains("give --depth 2 to see them"),
        "{err}"
    );

    let (code, out, err) = leasectl_parts(endpoint, &["--no-pod", "--json", target]);
    assert_eq!(code, 3, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let d = &doc["targets"][0]["deeper_leases"];
    assert_eq!(d["depth"], 2, "{out}");
    assert_eq!(d["example"], "db1/a/", "{out}");
    assert!(err.contains("give --depth 2"), "{err}");

    let (code, out, _) = leasectl_parts(endpoint, &["check", "--no-pod", target]);
    assert_eq!(code, 1, "a WARNING: {out}");
    assert!(out.starts_with("LEASES WARNING - "), "{out}");
    assert!(
        out.contains("\nWARNING every prefix under") && out.contains("give --depth 2"),
        "{out}"
    );

    // Listed deep enough: the lease is read, nothing more is said.
    let (code, out, err) = leasectl_parts(
        endpoint,
        &["--no-pod", "-o", "table", "--depth", "2", target],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("db1/a/") && out.contains("fresh"), "{out}");
    assert!(!err.contains("deeper"), "{err}");
    let (code, out, _) = leasectl_parts(endpoint, &["check", "--no-pod", "--depth", "2", target]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("deeper"), "{out}");
}

#[test]
fn leases_one_level_deeper_are_named_on_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db1/a", &record("holder-a", 2, 60));
    std::fs::create_dir_all(dir.path().join("prod/data")).unwrap();
    std::fs::write(dir.path().join("prod/data/part-0"), b"x").unwrap();
    let url = file_url(dir.path());
    says_the_depth(None, &url, &format!("{url}db1/a/"));

    // Every prefix absent and no LEASE anywhere below: nothing to say, exit 0.
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("db1/a")).unwrap();
    std::fs::write(empty.path().join("db1/a/part-0"), b"x").unwrap();
    let (code, out, err) =
        leasectl_parts(None, &["--no-pod", "-o", "table", &file_url(empty.path())]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("deeper"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_one_level_deeper_are_named_on_moto() {
    let (m, client, bucket) = moto_bucket("deeper-leases").await;
    common::put_record(&client, &bucket, "db1/a/LEASE", "holder-a", 2, 60).await;
    common::put_raw(&client, &bucket, "prod/data/part-0", b"x").await;
    let target = format!("s3://{bucket}/");
    says_the_depth(
        Some(&m.endpoint()),
        &target,
        &format!("s3://{bucket}/db1/a/"),
    );
}
