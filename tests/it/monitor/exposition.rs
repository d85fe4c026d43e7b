//! Issue 35 trip 10: `-o prometheus` lists its series in the same order on
//! every run (each family in the order of its labels), and a one-shot run
//! exports no counter that could only be 0 (`holder_changes_total`). The
//! real binary on a local store.

use crate::common::cli::{record, write_lease};
use crate::common::{file_url, leasectl};

/// The sample lines of an exposition without their values: `name{labels}`.
fn series(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').map_or(l, |(s, _)| s).to_owned())
        .collect()
}

#[test]
fn the_exposition_is_in_one_order_and_has_no_counter_that_cannot_count() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..40 {
        let body = match i % 3 {
            0 => record(&format!("holder-{i}"), 2, 60),
            1 => record(&format!("holder-{i}"), 300, 30),
            _ => "{torn".to_owned(),
        };
        write_lease(dir.path(), &format!("p{i:02}"), &body);
    }
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    let url = file_url(dir.path());
    let run = || {
        let out = leasectl(None, &["--no-pod", "-o", "prometheus", &url]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run();
    let order = series(&first);
    assert!(order.len() > 40 * 7, "{first}");
    for _ in 0..3 {
        assert_eq!(series(&run()), order, "the series moved between two runs");
    }
    // Within a family, in the order of the labels.
    let mut family: Vec<&String> = Vec::new();
    let name = |s: &str| s.split('{').next().unwrap_or(s).to_owned();
    for s in &order {
        if family.last().is_some_and(|l| name(l) != name(s)) {
            assert!(family.windows(2).all(|w| w[0] <= w[1]), "{family:?}");
            family.clear();
        }
        family.push(s);
    }
    // No counter of holder changes: one snapshot sees none.
    assert!(!first.contains("holder_changes"), "{first}");
    // The counters that count are there.
    assert!(
        first.contains("# TYPE leasectl_gathers_total counter"),
        "{first}"
    );
    assert!(
        first.lines().any(|l| l == "leasectl_gathers_total 1"),
        "{first}"
    );
}
