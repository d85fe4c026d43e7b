//! The console's status bar on `TestBackend`: messages shown whole and
//! cleared, the parts that give way by priority as the terminal narrows, the
//! oldest reading, the request rate and its cost.

use chrono::{TimeZone, Utc};
use crossterm::event::KeyCode;
use leasectl::tui::app::{Action, App, Mode};

use leasectl::store::RequestCounts;

use super::support::*;

/// Puts `a` on an S3 target listed every 6 refreshes (30 s), with two
/// readings of the request counters 30 s apart — the shortest window a rate
/// is shown from (issue 35 trip 14): none at [`at`]`(-20)`, then `counts` at
/// [`at`]`(10)`.
fn metered(a: &mut App, counts: RequestCounts) {
    a.settings.targets = vec!["s3://bkt/backups/".parse().unwrap()];
    a.settings.relist_every = 6;
    a.update(Action::Tick(at(-20)));
    a.update(Action::Counters(RequestCounts::default()));
    a.update(Action::Tick(at(10)));
    a.update(Action::Counters(counts));
}

/// A status message longer than the screen (a takeover's report ends with the
/// audit path) wraps onto the hints line instead of being cut.
#[tokio::test]
async fn a_long_status_message_is_not_cut() {
    let (_dir, mut a) = seeded(false, 80, 24).await;
    let report = format!(
        "taken: billing/LEASE now names {} (ETag 0123456789abcdef); released; audit: /var/lib/leasectl/audit/audit.jsonl",
        "f".repeat(32)
    );
    a.update(Action::TakeoverDone {
        key: "billing/LEASE".into(),
        result: Ok((report, None)),
    });
    let text = screen(&a, 80, 24);
    assert!(text.contains("audit.jsonl"), "{text}");
}

/// The status bar gives way by priority and never cuts a part: at 160
/// columns it keeps the request rate, the cost, the error count and the
/// listing cadence (dropping the least used key hints whole); narrower, the
/// hints go first, then the cadence and the cost; the errors stay longest.
#[tokio::test]
async fn the_status_bar_gives_way_by_priority() {
    let (_dir, mut a) = seeded(false, 160, 24).await;
    metered(
        &mut a,
        RequestCounts {
            requests: 660,
            errors: 3,
            lists: 30,
        },
    );
    let text = screen(&a, 160, 24);
    let status = text.lines().last().unwrap().to_owned();
    for part in [
        "req/min",
        "≈ $",
        "/h",
        ", 3 errors",
        "lists every 30s",
        "q quit",
        "? help",
    ] {
        assert!(
            status.contains(part),
            "no {part:?} at 160 columns: {status:?}"
        );
    }
    insta::assert_snapshot!("status_bar_160", text);
    let mut lines = String::new();
    let hints: Vec<String> = leasectl::tui::app::BINDINGS
        .iter()
        .filter(|b| b.hint > 0)
        .map(|b| b.does.to_owned())
        .collect();
    for width in [200u16, 160, 130, 100, 80, 60, 40] {
        a.update(Action::Resize(width, 24));
        let text = screen(&a, width, 24);
        let status = text.lines().last().unwrap().trim_end().to_owned();
        assert!(
            status.chars().count() <= usize::from(width),
            "{width}: {status:?}"
        );
        // The line ends with a whole part, never in the middle of one.
        assert!(
            hints.iter().any(|h| status.ends_with(h.as_str()))
                || ["errors", "req/min", "/h", "every 30s"]
                    .iter()
                    .any(|e| status.ends_with(e)),
            "{width} columns: the status bar ends mid-part: {status:?}"
        );
        assert!(status.contains("3 errors"), "{width}: {status:?}");
        if width >= 40 {
            assert!(status.starts_with("q quit  ? help"), "{width}: {status:?}");
        }
        lines.push_str(&format!("{width:>3}: {status}\n"));
    }
    insta::assert_snapshot!("status_bar_by_width", lines);
}

/// Issue 27: the status bar says how old the oldest reading of any row is
/// (what the request budget costs in freshness): as it ages with the clock,
/// yellow once older than two listing cadences, shortened before the rate
/// gives way and left out last but the first hints.
#[tokio::test]
async fn the_status_bar_shows_the_oldest_reading() {
    let (_dir, mut a) = seeded(true, 200, 24).await;
    metered(
        &mut a,
        RequestCounts {
            requests: 60,
            errors: 0,
            lists: 3,
        },
    );
    // Nothing read yet: no such part.
    let status = |a: &App, w: u16| {
        screen(a, w, 24)
            .lines()
            .last()
            .unwrap()
            .trim_end()
            .to_owned()
    };
    assert!(!status(&a, 200).contains("oldest"), "{}", status(&a, 200));
    a.update(Action::OldestReading(Some(at(0))));
    let text = screen(&a, 200, 24);
    insta::assert_snapshot!("status_bar_oldest_reading", text);
    assert!(
        status(&a, 200).ends_with("│ oldest reading 10.0s"),
        "{}",
        status(&a, 200)
    );
    // It ages with the clock between refreshes.
    a.update(Action::Tick(at(50)));
    assert!(
        status(&a, 200).ends_with("│ oldest reading 50.0s"),
        "{}",
        status(&a, 200)
    );
    // Older than two listing cadences (2 × 30 s): yellow.
    let yellow = |a: &App| {
        let backend = draw(a, 200, 24);
        let buf = backend.buffer();
        let line: String = (0..200u16)
            .map(|x| buf[(x, 23)].symbol().to_owned())
            .collect();
        let x = line
            .find("oldest")
            .map(|b| line[..b].chars().count())
            .expect("the part");
        buf[(x as u16, 23)].fg == ratatui::style::Color::Yellow
    };
    assert!(!yellow(&a));
    a.update(Action::Tick(
        Utc.with_ymd_and_hms(2026, 11, 30, 12, 1, 1).unwrap(),
    ));
    assert!(
        status(&a, 200).ends_with("│ oldest reading 1m01s"),
        "{}",
        status(&a, 200)
    );
    assert!(yellow(&a));
    let mut lines = String::new();
    for width in [200u16, 130, 100, 80, 60] {
        a.update(Action::Resize(width, 24));
        lines.push_str(&format!("{width:>3}: {}\n", status(&a, width)));
    }
    insta::assert_snapshot!("status_bar_oldest_by_width", lines);
}

/// The status bar's last line: the key hints, unless a message takes both lines.
fn hints_shown(s: &str) -> bool {
    s.lines().last().is_some_and(|l| l.starts_with("q quit"))
}

/// Issue 35 trip 2: a takeover's result is a message that clears on the
/// next key or after a few seconds, and the key hints come back; `Esc`
/// closes it and never quits (nor does it with nothing open: `q` quits).
#[tokio::test]
async fn a_result_clears_on_the_next_key_or_after_a_few_seconds() {
    let (_dir, mut a) = seeded(false, 120, 24).await;
    let result = |a: &mut App| {
        a.update(Action::TakeoverDone {
            key: "billing/LEASE".into(),
            result: Ok((
                "taken: billing/LEASE now held by 9f0e (generation 7); released; audit entry \
                 5d2a in /home/ops/.local/share/leasectl/audit.jsonl, read it with leasectl audit"
                    .into(),
                None,
            )),
        });
    };
    assert!(hints_shown(&screen(&a, 120, 24)));

    // The next key clears it.
    result(&mut a);
    let s = screen(&a, 120, 24);
    assert!(
        s.contains("taken: billing/LEASE") && !hints_shown(&s),
        "{s}"
    );
    key(&mut a, KeyCode::Char('j'));
    let s = screen(&a, 120, 24);
    assert!(!s.contains("taken:") && hints_shown(&s), "{s}");

    // So does time: still there after 3 s, gone after 6 s.
    result(&mut a);
    a.update(Action::Tick(at(3)));
    assert!(screen(&a, 120, 24).contains("taken:"));
    a.update(Action::Tick(at(6)));
    let s = screen(&a, 120, 24);
    assert!(!s.contains("taken:") && hints_shown(&s), "{s}");

    // Esc closes it, and does not quit.
    result(&mut a);
    key(&mut a, KeyCode::Esc);
    let s = screen(&a, 120, 24);
    assert!(!s.contains("taken:") && hints_shown(&s), "{s}");
    assert!(!a.should_quit());
    // Esc with nothing open does nothing; a key without a use clears a result.
    key(&mut a, KeyCode::Esc);
    assert!(!a.should_quit());
    result(&mut a);
    key(&mut a, KeyCode::Char('x'));
    assert!(!screen(&a, 120, 24).contains("taken:"));

    // Work under way stays until its result: a key does not clear it.
    open_takeover(&mut a, "billing/", "INC-1 host gone");
    key(&mut a, KeyCode::BackTab); // → Take over
    key(&mut a, KeyCode::Enter);
    let s = screen(&a, 120, 24);
    assert!(s.contains("taking over billing/LEASE…"), "{s}");
    a.update(Action::Tick(at(30)));
    assert!(screen(&a, 120, 24).contains("taking over billing/LEASE…"));
    result(&mut a);
    assert!(matches!(a.mode(), Mode::Normal));

    key(&mut a, KeyCode::Char('q'));
    assert!(a.should_quit());
}

/// Issue 35 trip 14: the status bar does not extrapolate a rate and a cost
/// from a few seconds of readings (right after a probe's burst it said
/// "3301 req/min ≈ $0.0825/h"): it says "measuring" until 30 s of readings.
#[tokio::test]
async fn the_request_rate_is_not_extrapolated_from_a_few_seconds() {
    let (_dir, mut a) = seeded(false, 160, 24).await;
    a.settings.targets = vec!["s3://bkt/backups/".parse().unwrap()];
    let status = |a: &App| screen(a, 160, 24).lines().last().unwrap().to_owned();
    // A tick at `s` seconds, then the counters read: the status line.
    let reading = |a: &mut App, s: i64, requests: u64, lists: u64| {
        a.update(Action::Tick(at(s)));
        a.update(Action::Counters(RequestCounts {
            requests,
            errors: 0,
            lists,
        }));
        status(a)
    };
    a.update(Action::Counters(RequestCounts::default()));
    let s = reading(&mut a, 4, 220, 10);
    assert!(s.contains("req/min: measuring"), "{s}");
    assert!(!s.contains("≈ $") && !s.contains("3300"), "{s}");
    assert_eq!(a.cost_per_hour(), None);
    // 30 s of readings: the rate over them, and its cost.
    let s = reading(&mut a, 30, 250, 12);
    assert!(s.contains("│ 500 req/min ≈ $"), "{s}");
    assert!(a.cost_per_hour().is_some());
}
