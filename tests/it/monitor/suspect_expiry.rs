//! Issue 35 trip 8: a suspect lease's "expires" is one rule in every output.
//! Its stamp (in the future beyond its TTL) or its TTL (over an hour) cannot
//! be trusted, so it has no expiry: `-` in the table (as in the console),
//! `expires_in_s: null` in `--json`, no "expires in" in `check`, no
//! `expires_in` series in the exposition. The real binary on a local store.

use crate::common::cli::{record, write_lease};
use crate::common::{file_url, leasectl};

#[test]
fn a_suspect_lease_has_no_expiry_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    // Suspect by its TTL (two hours, renewed 8 s ago) and by its stamp (two
    // hours in the future, TTL 30 s).
    write_lease(dir.path(), "longttl", &record("long-ttl", 8, 7200));
    write_lease(dir.path(), "ahead", &record("clock-ahead", -7200, 30));
    let url = file_url(dir.path());

    let out = leasectl(None, &["--no-pod", "-o", "table", &url]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let col = header.iter().position(|h| *h == "EXPIRES").unwrap();
    for line in table.lines().skip(1) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[2], "suspect", "{table}");
        assert_eq!(cells[col], "-", "no expiry for a suspect lease: {table}");
    }

    let out = leasectl(None, &["--no-pod", "--json", &url]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["targets"][0]["prefixes"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{doc:#}");
    for p in rows {
        assert_eq!(p["state"], "suspect", "{p:#}");
        assert!(p["expires_in_s"].is_null(), "{p:#}");
        // The age is still what the record says.
        assert!(p["age_s"].is_number(), "{p:#}");
    }

    let out = leasectl(None, &["check", "--no-pod", &url]);
    let check = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        check.contains("is suspect (holder long-ttl, TTL 7200 s)"),
        "{check}"
    );
    assert!(
        check.contains("is suspect (holder clock-ahead, TTL 30 s)"),
        "{check}"
    );
    assert!(!check.contains("expires in"), "{check}");
    assert!(!check.contains("expires_in="), "no soonest expiry: {check}");

    let out = leasectl(None, &["--no-pod", "-o", "prometheus", &url]);
    let prom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !prom
            .lines()
            .any(|l| l.starts_with("leasectl_lease_expires_in_seconds{")),
        "{prom}"
    );
}
