//! Nothing the console shows is cut without a mark (issue 45 §2): the detail
//! pane scrolls (PgUp/PgDn) and says what lies above and below, a result too
//! long for the status bar ends with `…` and is in the log of results (`m`)
//! in full, and the takeover dialog wraps its refusal whole.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;

use super::console::{app, key, screen, seed, select, selected_prefix, typed};
use leasectl::tui::app::{Action, App, Mode};

/// What the event loop does after each frame: tells the console how far its
/// detail pane scrolls.
fn measured(a: &mut App, w: u16, h: u16) {
    if let Some((lines, shown)) = leasectl::tui::ui::detail_extent(a, Rect::new(0, 0, w, h)) {
        a.update(Action::DetailExtent { lines, shown });
    }
}

/// The text of the innermost box of `screen` (a popup over the table): on
/// each line the widest part between `│`s, trimmed, joined with spaces.
fn inside_box(screen: &str) -> String {
    screen
        .lines()
        .filter_map(|l| l.split('│').max_by_key(|p| p.chars().count()))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// At 80×24 the detail pane showed ten lines and stopped after
/// `instance_id`: acquired, renewed, TTL, generation and ETag were out of
/// reach. Now it says how much lies below, PgDn reaches every field, PgUp
/// goes back, and ↑/↓ still move between rows.
#[tokio::test]
async fn the_detail_pane_scrolls_to_every_field_at_80x24() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let mut a = app(dir.path(), false, 80, 24).await;
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Enter);
    measured(&mut a, 80, 24);
    let first = screen(&a, 80, 24);
    assert!(first.contains("more · PgDn"), "the cut is marked:\n{first}");
    assert!(
        !first.contains("ETag seen for"),
        "the pane is too short for all:\n{first}"
    );
    let mut seen = first.clone();
    let mut pages = 0;
    while screen(&a, 80, 24).contains("more · PgDn") {
        key(&mut a, KeyCode::PageDown);
        measured(&mut a, 80, 24);
        seen.push_str(&screen(&a, 80, 24));
        pages += 1;
        assert!(pages < 10, "PgDn never reaches the end:\n{seen}");
    }
    for field in [
        "target",
        "judgement",
        "instance_id",
        "acquired_at",
        "renewed_at",
        "ttl_s",
        "generation",
        "ETag ",
        "Last-Modified",
        "exclusion",
        "ETag seen for",
    ] {
        assert!(seen.contains(field), "{field} never shown:\n{seen}");
    }
    let last = screen(&a, 80, 24);
    assert!(last.contains("more · PgUp"), "{last}");
    assert_eq!(
        selected_prefix(&a),
        "billing/",
        "PgDn scrolls, it does not page"
    );
    // PgDn at the end stays there; PgUp goes back as far.
    key(&mut a, KeyCode::PageDown);
    measured(&mut a, 80, 24);
    assert_eq!(screen(&a, 80, 24), last);
    for _ in 0..pages {
        key(&mut a, KeyCode::PageUp);
    }
    assert_eq!(screen(&a, 80, 24), first);
    // ↑ moves to another row, whose details start at their top.
    key(&mut a, KeyCode::PageDown);
    key(&mut a, KeyCode::Up);
    assert_ne!(selected_prefix(&a), "billing/");
    assert_eq!(a.leases().detail_scroll(), 0);
}

/// A takeover's report at 160 columns ended "…the prefix is free; audit:"
/// (the audit path and id lost), at 80 "generation 1796609271657469 →".
/// A result too long for the status bar's two lines ends with `…` and says
/// where it is in full; `m` shows it whole.
#[tokio::test]
async fn a_result_longer_than_the_status_bar_is_marked_and_kept_in_full() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let report = "taken: billing/LEASE now names 10ffdd6a5024f6ab512c40eef2a2b1fd (ETag d662c77098a372caaf1d2e581f064249); generation 1796620371523806 → 1796620425745552; released (marked released with If-Match on our ETag; the record keeps generation 1796620425745552, so the next holder's is greater); the prefix is free; audit: /root/.local/share/leasectl/audit.jsonl (id 956821a27a477b31475a751148ff6bce)";
    for w in [80u16, 160] {
        let mut a = app(dir.path(), false, w, 24).await;
        a.update(Action::TakeoverDone {
            key: "billing/LEASE".into(),
            result: Ok((report.to_owned(), None)),
        });
        let s = screen(&a, w, 24);
        let status: Vec<&str> = s.lines().rev().take(2).collect();
        assert!(
            status[0].trim_end().ends_with("… (m: in full)"),
            "{w} columns: the cut is marked and says where the rest is:\n{s}"
        );
        key(&mut a, KeyCode::Char('m'));
        assert!(matches!(a.mode(), Mode::Messages { .. }));
        let log = screen(&a, w, 24);
        // The popup's lines, without its borders, joined: the whole report.
        let text = inside_box(&log);
        assert!(
            text.contains("(id 956821a27a477b31475a751148ff6bce)")
                && text.contains("audit: /root/.local/share/leasectl/audit.jsonl"),
            "{w} columns: the log has the result in full:\n{log}"
        );
        key(&mut a, KeyCode::Esc);
        assert!(matches!(a.mode(), Mode::Normal));
    }
}

/// The dialog's refusal at 80 columns ended "(th": it is wrapped, whole.
#[tokio::test]
async fn the_takeover_dialogs_refusal_is_shown_whole_at_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let mut a = app(dir.path(), false, 80, 30).await;
    // A suspect record: refused until watched for one TTL.
    select(&mut a, "events/");
    key(&mut a, KeyCode::Char('t'));
    typed(&mut a, "clock far ahead");
    key(&mut a, KeyCode::BackTab); // → Take over
    key(&mut a, KeyCode::Enter);
    let Mode::Takeover(d) = a.mode() else {
        panic!("the dialog closed")
    };
    let problem = d.problem.clone().expect("refused");
    assert!(
        problem.chars().count() > 76,
        "a refusal longer than the box: {problem}"
    );
    let s = screen(&a, 80, 30);
    let shown = inside_box(&s);
    assert!(
        shown.contains(&problem),
        "the refusal is shown whole:\n{problem}\n{s}"
    );
}

/// `t` on a row with nothing to take over (no LEASE, a released record)
/// opened the whole dialog and refused only after the reason was typed
/// (issue 45 §8): it says so at once and opens nothing.
#[tokio::test]
async fn t_on_a_row_with_nothing_to_take_over_says_so_at_once() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let released = r#"{"instance_id":"old","acquired_at":"2026-11-30T11:00:00Z","renewed_at":"2026-11-30T11:58:00Z","ttl_s":30,"generation":9,"released_at":"2026-11-30T11:58:30Z"}"#;
    std::fs::create_dir_all(dir.path().join("free")).unwrap();
    std::fs::write(dir.path().join("free/LEASE"), released).unwrap();
    let mut a = app(dir.path(), false, 120, 30).await;
    for (prefix, why) in [
        ("archive/", "does not exist: there is nothing to take over"),
        ("free/", "was released: nobody holds it"),
    ] {
        select(&mut a, prefix);
        key(&mut a, KeyCode::Char('t'));
        assert!(
            matches!(a.mode(), Mode::Normal),
            "{prefix}: no dialog opens"
        );
        let (msg, error) = a.message().expect("said at once");
        assert!(error && msg.contains(why), "{prefix}: {msg}");
        // The next key clears it.
        key(&mut a, KeyCode::Down);
    }
    // A stale row still opens the dialog.
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Char('t'));
    assert!(matches!(a.mode(), Mode::Takeover(_)));
}

/// SKEW showed "+0ms" and "0ms" in one column (issue 45 §8): a skew that
/// rounds to zero is "0s" on either side; others keep their sign.
#[test]
fn a_skew_of_zero_reads_the_same_on_either_side() {
    use leasectl::tui::ui::skew_text;
    for s in [0.0, -0.0, 0.2, -0.3, 0.49, -0.49] {
        assert_eq!(skew_text(s, 8), "0s", "{s}");
    }
    assert_eq!(skew_text(1.2, 8), "+1.0s");
    assert_eq!(skew_text(-5.0, 8), "-5.0s");
    assert_eq!(skew_text(-300.0, 8), "-5m00s");
}

/// The detail pane mixed "2026-11-30 12:00:55Z" (an audit entry) with
/// "2026-11-30T11:55:00Z" (the record) (issue 45 §8): every time in it is
/// RFC 3339, as the record's.
#[tokio::test]
async fn the_detail_pane_writes_every_time_one_way() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let mut a = app(dir.path(), false, 200, 50).await;
    let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 11, 30, 11, 59, 55).unwrap();
    let mut entry = super::snapshots::takeover_entry(dir.path(), at, "x");
    entry.target.url = format!("file://{}/billing/", dir.path().display());
    entry.target.key = "billing/LEASE".into();
    a.update(Action::Audit(vec![entry]));
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Enter);
    let all = screen(&a, 200, 50);
    // The pane: from its title down (the header's clock is not in it).
    let s: String = all
        .lines()
        .skip_while(|l| !l.contains(" details (Enter closes) "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(s.contains("2026-11-30T11:59:55Z outcome"), "{all}");
    for (i, _) in s.match_indices("2026-11-30") {
        let next = s[i + 10..].chars().next();
        assert_eq!(next, Some('T'), "a time not in RFC 3339: {}", &s[i..i + 20]);
    }
}

/// The console as README.md and docs/console.md show it (the leases view
/// filtered on `holder-`, sorted by state) is what the console draws: the
/// sample was a box 99 columns wide holding rows of 109 (issue 45 §8).
#[tokio::test]
async fn the_documents_sample_console_is_what_it_draws() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let (w, h) = (106, 9);
    let mut a = app(dir.path(), false, w, h).await;
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "holder-");
    key(&mut a, KeyCode::Enter);
    while !screen(&a, w, h).contains("STATE▼") {
        key(&mut a, KeyCode::Char('s'));
    }
    // The header and the table, without the status bar.
    let drawn: Vec<String> = screen(&a, w, h)
        .lines()
        .take(usize::from(h) - 2)
        .map(|l| l.trim_end().to_owned())
        .collect();
    let widths: std::collections::BTreeSet<usize> =
        drawn[2..].iter().map(|l| l.chars().count()).collect();
    assert_eq!(
        widths.len(),
        1,
        "the box's lines differ in width:\n{}",
        drawn.join("\n")
    );
    for doc in ["README.md", "docs/console.md"] {
        let text = std::fs::read_to_string(crate::common::repo().join(doc)).unwrap();
        let sample: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("leasectl  OPS"))
            .take_while(|l| !l.starts_with("```"))
            .map(str::trim_end)
            .collect();
        assert_eq!(
            sample,
            drawn,
            "{doc}'s sample console is not what the console draws; it draws:\n{}",
            drawn.join("\n")
        );
    }
}
