//! Table test of `assess`: every class of enable value, and every kind of stamp.

use leasectl::writer::{assess, Duty, Enable, WriterError, ENABLE, HELD};

fn env<'a>(
    enable: Option<&'a str>,
    stamp: Option<&'a str>,
) -> impl Fn(&str) -> Option<String> + 'a {
    move |k: &str| match k {
        ENABLE => enable.map(str::to_string),
        HELD => stamp.map(str::to_string),
        other => panic!("assess asked for {other}, not a lease variable"),
    }
}

const PARENT: u32 = 4242;

#[test]
fn enable_values_classify() {
    for on in ["1", "t", "T", "TRUE", "true", "True"] {
        assert_eq!(Enable::parse(Some(on)), Enable::On, "{on}");
        let (d, s) = assess(env(Some(on), None), PARENT).unwrap();
        assert_eq!(d, Duty::Take, "{on}: {s}");
    }
    for off in ["0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(Enable::parse(Some(off)), Enable::Off, "{off}");
        let (d, s) = assess(env(Some(off), Some("4242")), PARENT).unwrap();
        assert_eq!(d, Duty::Off, "{off}: {s}");
        assert!(s.contains(&format!("{ENABLE}={off}")), "{s}");
    }
    for (raw, word) in [(None, "unset"), (Some(""), "empty")] {
        let (d, s) = assess(env(raw, None), PARENT).unwrap();
        assert_eq!(d, Duty::Off);
        assert!(s.contains(word), "{s}");
    }
    for bad in ["yes", "on", "2", " 1", "1 ", "tRUE", "enabled"] {
        match assess(env(Some(bad), None), PARENT) {
            Err(WriterError::InvalidEnable(v)) => assert_eq!(v, bad),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
}

#[test]
fn invalid_enable_message_names_value_escaped() {
    let err = assess(env(Some("on\x1b[2J"), None), PARENT).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("on\\x1b[2J"), "{msg}");
    assert!(!msg.contains('\x1b'), "raw control char in {msg:?}");
}

#[test]
fn stamps_against_parent() {
    struct Case {
        stamp: Option<&'static str>,
        duty: Duty,
        says: &'static [&'static str],
    }
    let cases = [
        // stamp = parent: inherit.
        Case {
            stamp: Some("4242"),
            duty: Duty::Inherit,
            says: &["4242", "parent"],
        },
        // stamp = another pid: take, and the sentence names both pids.
        Case {
            stamp: Some("77"),
            duty: Duty::Take,
            says: &["=77", "ignored", "pid 77", "parent 4242"],
        },
        // stamp = garbage: take, the sentence names the garbage.
        Case {
            stamp: Some("abc"),
            duty: Duty::Take,
            says: &["\"abc\"", "not a pid"],
        },
        Case {
            stamp: Some("42 42"),
            duty: Duty::Take,
            says: &["not a pid"],
        },
        Case {
            stamp: Some("-4242"),
            duty: Duty::Take,
            says: &["not a pid"],
        },
        Case {
            stamp: Some("0"),
            duty: Duty::Take,
            says: &["pid 0"],
        },
        // stamp absent or empty: take as the pod root.
        Case {
            stamp: None,
            duty: Duty::Take,
            says: &["no CLOUD_WRITER_LEASE_HELD stamp", "pod root"],
        },
        Case {
            stamp: Some(""),
            duty: Duty::Take,
            says: &["no CLOUD_WRITER_LEASE_HELD stamp"],
        },
    ];
    for c in cases {
        let (d, s) = assess(env(Some("1"), c.stamp), PARENT).unwrap();
        assert_eq!(d, c.duty, "stamp {:?}: {s}", c.stamp);
        for w in c.says {
            assert!(s.contains(w), "stamp {:?}: {s:?} lacks {w:?}", c.stamp);
        }
    }
}

#[test]
fn garbage_stamp_is_escaped_in_sentence() {
    let (d, s) = assess(env(Some("1"), Some("12\n\x1b[31mred")), PARENT).unwrap();
    assert_eq!(d, Duty::Take);
    assert!(s.contains("12\\n\\x1b[31mred"), "{s}");
    assert!(!s.contains('\n') && !s.contains('\x1b'));
}

#[test]
fn duty_display_and_serde_are_snake_case() {
    for (d, name) in [
        (Duty::Off, "off"),
        (Duty::Take, "take"),
        (Duty::Inherit, "inherit"),
    ] {
        assert_eq!(d.to_string(), name);
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{name}\""));
    }
}
