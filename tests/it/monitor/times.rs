//! Issue 35 trip 9: one time format everywhere — RFC 3339, UTC as `Z`, at
//! most six fraction digits (Python 3.10's `fromisoformat` refuses nine) —
//! in what a person reads (the takeover prompt) and what a program reads
//! (the audit log, `--json`'s last takeover, the timeline).

use crate::common::*;

/// Every RFC 3339 time in `text`: its fraction has at most 6 digits and it
/// ends in `Z`, never `+00:00`. Returns how many were found.
fn check_times(what: &str, text: &str) -> usize {
    assert!(!text.contains("+00:00"), "{what} writes +00:00:\n{text}");
    let mut n = 0;
    let b = text.as_bytes();
    for i in 0..b.len().saturating_sub(19) {
        let looks = b[i + 4] == b'-'
            && b[i + 7] == b'-'
            && b[i + 10] == b'T'
            && b[i + 13] == b':'
            && b[i + 16] == b':'
            && b[i..i + 4].iter().all(u8::is_ascii_digit);
        if !looks {
            continue;
        }
        n += 1;
        let mut j = i + 19;
        if b.get(j) == Some(&b'.') {
            j += 1;
            let start = j;
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            assert!(
                j - start <= 6,
                "{what}: {} has more than 6 fraction digits",
                String::from_utf8_lossy(&b[i..j + 1])
            );
        }
        assert_eq!(
            b.get(j),
            Some(&b'Z'),
            "{what}: {} is not in UTC as Z",
            String::from_utf8_lossy(&b[i..(j + 6).min(b.len())])
        );
    }
    n
}

#[test]
fn one_time_format_in_the_prompt_the_audit_log_json_and_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let old = chrono::Utc::now() - chrono::Duration::seconds(120);
    let record = leasectl::bucket::LeaseRecord {
        instance_id: "dead-holder".into(),
        acquired_at: old,
        renewed_at: old,
        ttl_s: 30,
        generation: Some(7),
        released_at: None,
    };
    std::fs::write(dir.path().join("db/LEASE"), record.to_body()).unwrap();
    let url = format!("{}db/", file_url(dir.path()));
    let audit = dir.path().join("audit.jsonl");
    let audit_s = audit.display().to_string();
    let out = leasectl(
        None,
        &[
            "takeover",
            &url,
            "--reason",
            "times",
            "--then",
            "release",
            "--yes",
            "--audit-log",
            &audit_s,
        ],
    );
    let prompt = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{prompt}");
    assert!(
        check_times("the takeover's output", &prompt) > 0,
        "{prompt}"
    );
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(check_times("the audit log", &log) >= 2, "{log}");
    let store = file_url(dir.path());
    let json = leasectl(
        None,
        &["--json", "--no-pod", "--audit-log", &audit_s, &store],
    );
    let json = String::from_utf8_lossy(&json.stdout).into_owned();
    assert!(json.contains("last_takeover"), "{json}");
    assert!(check_times("--json", &json) > 0);
    let tl = leasectl(
        None,
        &["timeline", &url, "--audit-log", &audit_s, "-o", "json"],
    );
    let tl = String::from_utf8_lossy(&tl.stdout).into_owned();
    assert!(check_times("the timeline", &tl) > 0, "{tl}");
}
