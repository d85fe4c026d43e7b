//! The console's lease table driven through `App::update` (keys → actions →
//! state) and drawn into a `TestBackend`: sort, filter, next problem, the
//! detail pane, help in OPS and WATCH mode, columns and cells at every size,
//! a tiny terminal.

use std::time::Duration;

use crossterm::event::KeyCode;
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::tui::app::{Action, App, Mode, SortKey};

use super::support::*;

#[tokio::test]
async fn sort_filter_and_next_problem() {
    let (_dir, mut a) = seeded(false, 120, 20).await;
    assert_eq!(a.row_count(), 5);
    assert_eq!(selected_prefix(&a), "archive/");
    // n jumps to the next stale / suspect / malformed row, wrapping.
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(selected_prefix(&a), "billing/"); // stale
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(selected_prefix(&a), "events/"); // suspect
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(selected_prefix(&a), "ledger/"); // malformed
    key(&mut a, KeyCode::Char('n'));
    assert_eq!(selected_prefix(&a), "billing/");
    // s cycles the sort column: Holder, then Age (oldest first).
    key(&mut a, KeyCode::Char('s'));
    assert_eq!(a.leases().sort(), SortKey::Holder);
    key(&mut a, KeyCode::Char('s'));
    assert_eq!(a.leases().sort(), SortKey::Age);
    let order: Vec<String> = a.rows().map(|p| p.prefix.clone()).collect();
    assert_eq!(order[0], "billing/", "{order:?}");
    for _ in 0..3 {
        key(&mut a, KeyCode::Char('s'));
    }
    assert_eq!(a.leases().sort(), SortKey::State);
    let order: Vec<String> = a.rows().map(|p| p.prefix.clone()).collect();
    assert_eq!(
        order,
        ["ledger/", "events/", "billing/", "orders/", "archive/"]
    );
    // / filters on prefix or holder; ! negates; Esc clears.
    key(&mut a, KeyCode::Char('/'));
    assert!(matches!(a.mode(), Mode::Filter));
    typed(&mut a, "holder-");
    assert_eq!(a.row_count(), 2);
    key(&mut a, KeyCode::Enter);
    assert!(matches!(a.mode(), Mode::Normal));
    let text = screen(&a, 120, 20);
    assert!(
        text.contains("filter /holder-") && text.contains("(2 of 5)"),
        "{text}"
    );
    insta::assert_snapshot!("filter_active", text);
    key(&mut a, KeyCode::Char('/'));
    key(&mut a, KeyCode::Backspace);
    for _ in 0.."holder".len() {
        key(&mut a, KeyCode::Backspace);
    }
    assert!(a.leases().filter().is_empty());
    typed(&mut a, "!holder");
    key(&mut a, KeyCode::Enter);
    let shown: Vec<String> = a.rows().map(|p| p.prefix.clone()).collect();
    // Rows matching neither in prefix nor in holder, still in state order.
    assert_eq!(shown, ["ledger/", "events/", "archive/"]);
    key(&mut a, KeyCode::Esc);
    assert_eq!(a.row_count(), 5);
}

#[tokio::test]
async fn detail_pane_shows_the_record_raw_body_and_sentence() {
    let (_dir, mut a) = seeded(false, 120, 30).await;
    select(&mut a, "ledger/");
    key(&mut a, KeyCode::Enter);
    assert!(a.leases().detail());
    let text = screen(&a, 120, 30);
    assert!(
        text.contains("raw body") && text.contains("instance_id\\\": 42")
            || text.contains("\"instance_id\": 42"),
        "{text}"
    );
    assert!(text.contains("not JSON"), "{text}");
    insta::assert_snapshot!("detail_malformed", text);
    key(&mut a, KeyCode::Up);
    key(&mut a, KeyCode::Up);
    let text = screen(&a, 120, 30);
    assert!(
        text.contains("holder-billing") && text.contains("ETag") && text.contains("Last-Modified"),
        "{text}"
    );
    assert!(text.contains("holder skew"), "{text}");
    key(&mut a, KeyCode::Esc);
    assert!(
        !a.leases().detail() && !a.should_quit(),
        "Esc closes the pane before it quits"
    );
}

#[tokio::test]
async fn help_is_generated_from_bindings_and_watch_mode_has_no_write_keys() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let mut ops = app(dir.path(), false, 100, 24).await;
    key(&mut ops, KeyCode::Char('?'));
    let text = screen(&ops, 100, 24);
    assert!(
        text.contains("take over") && text.contains("probe preconditions"),
        "{text}"
    );
    insta::assert_snapshot!("help_ops", text);

    let mut watch = app(dir.path(), true, 100, 24).await;
    key(&mut watch, KeyCode::Char('?'));
    let text = screen(&watch, 100, 24);
    assert!(
        !text.contains("take over") && !text.contains("probe preconditions"),
        "{text}"
    );
    assert!(text.contains("WATCH"), "{text}");
    insta::assert_snapshot!("help_watch", text);
    key(&mut watch, KeyCode::Esc);
    // In watch mode t and p do nothing and nothing is queued.
    key(&mut watch, KeyCode::Char('t'));
    key(&mut watch, KeyCode::Char('p'));
    assert!(matches!(watch.mode(), Mode::Normal));
    assert!(watch.outbox().is_empty());
}

#[tokio::test]
async fn tiny_terminals_never_panic() {
    let (_dir, mut a) = seeded(false, 20, 5).await;
    let text = screen(&a, 20, 5);
    assert!(text.contains("too small"), "{text}");
    insta::assert_snapshot!("tiny_20x5", text);
    for (w, h) in [(1, 1), (20, 5), (41, 9), (300, 3), (3, 300)] {
        a.update(Action::Resize(w, h));
        key(&mut a, KeyCode::Char('t'));
        let _ = screen(&a, w, h);
        key(&mut a, KeyCode::Esc);
        key(&mut a, KeyCode::Enter);
        let _ = screen(&a, w, h);
        key(&mut a, KeyCode::Char('?'));
        let _ = screen(&a, w, h);
        key(&mut a, KeyCode::Esc);
    }
}

#[tokio::test]
async fn a_prefix_with_an_invisible_character_can_be_typed_as_shown() {
    let dir = tempfile::tempdir().unwrap();
    // A right-to-left override in the name: shown escaped, never raw.
    let name = "db\u{202e}txt";
    write_lease(dir.path(), name, &rec("live", "2026-11-30T11:59:50Z", 30));
    let mut a = app(dir.path(), false, 110, 30).await;
    select(&mut a, &format!("{name}/"));
    key(&mut a, KeyCode::Char('t'));
    let shown = screen(&a, 110, 30);
    assert!(!shown.contains('\u{202e}'), "{shown}");
    assert!(shown.contains("db\\u{202e}txt/"), "{shown}");
    typed(&mut a, "drill");
    key(&mut a, KeyCode::Tab); // → Then
    key(&mut a, KeyCode::Tab); // → the typed prefix
    typed(&mut a, "db\\u{202e}txt/"); // exactly as shown
    key(&mut a, KeyCode::Tab); // → Cancel
    key(&mut a, KeyCode::Tab); // → Confirm
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1, "{:?}", a.mode());
}

/// In every size from the advertised minimum up, each visible row shows its
/// prefix and its holder (cut with `…` when narrow); lower-priority columns go
/// first.
#[tokio::test]
async fn prefix_and_holder_are_shown_at_every_size() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    for (w, h) in [(40, 8), (60, 20), (80, 24), (200, 50)] {
        let mut a = app(dir.path(), false, w, h).await;
        select(&mut a, "billing/");
        let text = screen(&a, w, h);
        let row = text
            .lines()
            .find(|l| l.contains("billing/"))
            .unwrap_or_else(|| panic!("{w}x{h}: no billing/ row:\n{text}"));
        assert!(
            row.contains("holder-b"),
            "{w}x{h}: no holder in {row:?}\n{text}"
        );
        assert!(
            text.contains("PREFIX") && text.contains("HOLDER"),
            "{w}x{h}:\n{text}"
        );
        if w >= 120 {
            assert!(
                text.contains("SKEW") && text.contains("EXCLUSION"),
                "{w}x{h}:\n{text}"
            );
        } else {
            // The column headers lack it; the title says it is hidden
            // (issue 35, trip 5), by name where the names fit.
            let header = text.lines().find(|l| l.contains("PREFIX")).unwrap();
            assert!(
                !header.contains("SKEW"),
                "{w}x{h}: skew goes first:\n{text}"
            );
            assert!(
                text.contains("· hidden: ") && text.contains("SKEW ")
                    || text.contains("columns hidden"),
                "{w}x{h}: the dropped columns are not named:\n{text}"
            );
        }
    }
}

/// With several targets open, rows name their target, so two `db1/` rows in
/// two buckets cannot be mistaken for each other.
#[tokio::test]
async fn rows_name_their_target_when_several_are_open() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    seed(one.path());
    seed(two.path());
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(at(0)));
    let open: Vec<OpenTarget> = [one.path(), two.path()]
        .iter()
        .map(|d| OpenTarget {
            target: format!("file://{}/", d.display()).parse().unwrap(),
            endpoint: "local".into(),
            store: std::sync::Arc::new(LocalStore::open(d).unwrap()),
        })
        .collect();
    let snap = snapshot::gather(&open, &GatherOptions::default(), &clock).await;
    let targets = open.iter().map(|o| o.target.clone()).collect();
    let mut a = App::new(targets, false, Duration::from_secs(5), at(0)).without_pod();
    a.update(Action::Resize(160, 40));
    a.update(Action::Snapshot(Box::new(snap)));
    let text = screen(&a, 160, 40);
    for d in [one.path(), two.path()] {
        let short = format!("{}: orders/", d.file_name().unwrap().to_string_lossy());
        assert!(text.contains(&short), "no {short:?}:\n{text}");
    }
}

/// The header's "ago" is never negative: the refresh time (read by the
/// refresher) can be later than the last tick's "now", and the wall clock
/// can step back.
#[tokio::test]
async fn the_header_never_says_a_negative_ago() {
    let (_dir, mut a) = seeded(false, 120, 20).await;
    a.update(Action::Unchanged(
        at(0) + chrono::Duration::milliseconds(95),
    ));
    let text = screen(&a, 120, 20);
    assert!(
        text.contains("last refresh 12:00:00Z (0ms ago)") && !text.contains("(-"),
        "{text}"
    );
    assert!(text.contains("clock 2026-11-30 12:00:00Z"), "{text}");
    // The wall clock stepped back two seconds (NTP).
    a.update(Action::Tick(at(0) - chrono::Duration::seconds(2)));
    let text = screen(&a, 120, 20);
    assert!(text.contains("(0ms ago)") && !text.contains("(-"), "{text}");
}

/// Whether `s` is a whole duration as the console writes one (`850ms`,
/// `-12.3s`, `+4m05s`, `2h03m`, `3d04h`, `26328d`, `72y`, `1e9y`), not one cut.
fn whole_duration(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    if let Some(y) = s.strip_suffix('y') {
        return digits(y)
            || y.split_once('e')
                .is_some_and(|(m, e)| digits(m) && digits(e));
    }
    if let Some(ms) = s.strip_suffix("ms") {
        return digits(ms);
    }
    for (big, small) in [('m', 's'), ('h', 'm'), ('d', 'h')] {
        if let Some((a, b)) = s.split_once(big) {
            return digits(a)
                && (b.is_empty()
                    || b.strip_suffix(small)
                        .is_some_and(|b| b.len() == 2 && digits(b)));
        }
    }
    match s.strip_suffix('s') {
        Some(x) => match x.split_once('.') {
            Some((i, f)) => digits(i) && f.len() == 1 && digits(f),
            None => digits(x),
        },
        None => false,
    }
}

/// AGE, TTL, EXPIRES and SKEW cells are never cut inside a number, at any
/// width: a value too long for its column is shown in a coarser unit
/// (`-26328d`, `+72y`), not as `-26328d0`.
#[tokio::test]
async fn numbers_in_narrow_cells_are_never_cut() {
    use leasectl::tui::ui::lease_columns;
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, body: &str| lease_modified(dir.path(), p, body, at(-5));
    // A holder whose clock is 72 years ahead, one whose lease ran out in 1990,
    // and an ordinary one.
    w("future", &rec("ahead", "2099-01-01T00:00:00Z", 30));
    w("past", &rec("gone", "1990-01-01T00:00:00Z", 3600));
    w("orders", &rec("holder-orders", "2026-11-30T11:59:50Z", 30));
    let mut shots = String::new();
    for width in [40u16, 60, 80, 100, 130, 160] {
        let a = app(dir.path(), false, width, 12).await;
        let backend = draw(&a, width, 12);
        let buf = backend.buffer();
        let columns = lease_columns(width - 2);
        let mut x = 1u16;
        let mut checked = 0;
        for (k, cw) in &columns {
            if matches!(
                k,
                SortKey::Age | SortKey::Ttl | SortKey::Expires | SortKey::Skew
            ) {
                for y in 4..7 {
                    let cell: String = (x..x + cw).map(|x| buf[(x, y)].symbol()).collect();
                    // The TTL cell's number comes before its gauge.
                    let v = cell.split_whitespace().next().unwrap_or("");
                    assert!(
                        v == "-" || whole_duration(v),
                        "{width} columns: {k:?} cell {cell:?} is cut"
                    );
                    checked += 1;
                }
            }
            x += cw + 1;
        }
        let text = screen(&a, width, 12);
        if width >= 60 {
            assert!(checked >= 3, "{width}: no number column shown:\n{text}");
        }
        shots.push_str(&format!("--- {width} columns\n{text}"));
    }
    assert!(
        shots.contains("-26329d") && shots.contains("+72y") && !shots.contains("-26329d0"),
        "{shots}"
    );
    insta::assert_snapshot!("narrow_number_cells", shots);
}

/// Issue 35 trip 8: a suspect lease has no expiry in the console, as in the
/// table, `--json` and `check` (tests/it/monitor/suspect_expiry.rs): by its
/// TTL (two hours) or by its stamp (two hours ahead), EXPIRES is `-`.
#[tokio::test]
async fn a_suspect_lease_has_no_expiry_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let d = dir.path().join("longttl");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("LEASE"),
        rec("long-ttl", "2026-11-30T11:59:52Z", 7200),
    )
    .unwrap();
    let a = app(dir.path(), false, 160, 20).await;
    let s = screen(&a, 160, 20);
    let lines: Vec<Vec<char>> = s.lines().map(|l| l.chars().collect()).collect();
    let header = lines
        .iter()
        .find(|l| String::from_iter(l.iter()).contains("EXPIRES"))
        .unwrap();
    let col = String::from_iter(header.iter())
        .split("EXPIRES")
        .next()
        .unwrap()
        .chars()
        .count();
    for prefix in ["longttl/", "events/"] {
        let row = lines
            .iter()
            .find(|l| String::from_iter(l.iter()).contains(prefix))
            .unwrap();
        let cell: String = row[col..]
            .iter()
            .take_while(|c| !c.is_whitespace())
            .collect();
        let text = String::from_iter(row.iter());
        assert!(text.contains("suspect"), "{s}");
        assert_eq!(cell, "-", "{prefix}: {s}");
    }
}

/// Issue 35: `S` reverses the sort (▲ marks it), `s` moves on to the next
/// column in its own order again; Esc does not quit.
#[tokio::test]
async fn capital_s_reverses_the_sort() {
    let (_dir, mut a) = seeded(false, 120, 20).await;
    let order = |a: &App| a.rows().map(|p| p.prefix.clone()).collect::<Vec<_>>();
    assert_eq!(
        order(&a),
        ["archive/", "billing/", "events/", "ledger/", "orders/"]
    );
    key(&mut a, KeyCode::Char('S'));
    assert!(a.leases().reversed());
    assert_eq!(
        order(&a),
        ["orders/", "ledger/", "events/", "billing/", "archive/"]
    );
    assert!(screen(&a, 120, 20).contains("PREFIX▲"));
    // The next column, in its own order (State: most urgent first).
    for _ in 0..5 {
        key(&mut a, KeyCode::Char('s'));
    }
    assert_eq!(a.leases().sort(), SortKey::State);
    assert!(!a.leases().reversed());
    assert_eq!(
        order(&a),
        ["ledger/", "events/", "billing/", "orders/", "archive/"]
    );
    assert!(screen(&a, 120, 20).contains("STATE▼"));
    key(&mut a, KeyCode::Char('S'));
    assert_eq!(
        order(&a),
        ["archive/", "orders/", "billing/", "events/", "ledger/"]
    );
    key(&mut a, KeyCode::Esc);
    assert!(!a.should_quit());
    // The help lists it, from the one key table.
    key(&mut a, KeyCode::Char('?'));
    assert!(screen(&a, 120, 40).contains("reverse the sort"));
}

/// Issue 35, trip 16: the help says how often the request budget lets a row
/// off screen be read — at least every 5 minutes only while the budget covers
/// the rows off screen in that time, else about every N / what the budget
/// leaves once the rows on screen and the listings are paid; none when the
/// screen uses it whole.
#[tokio::test]
async fn help_says_how_often_the_budget_reads_rows_off_screen() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..300 {
        std::fs::create_dir_all(dir.path().join(format!("db{i:03}"))).unwrap();
    }
    let mut a = app(dir.path(), true, 100, 24).await;
    assert_eq!(a.total_rows(), 300);
    let on_screen = a.rows_in_view().len();
    assert_eq!(on_screen, 17);
    // Listings every 30 s (6 refreshes of 5 s): one page a listing, 2 a
    // minute; the rows on screen: 17 × 12 = 204 a minute.
    a.settings.relist_every = 6;
    key(&mut a, KeyCode::Char('?'));
    for (budget, line) in [
        (
            1200,
            "off-screen rows: read at least every 5m00s (283 rows / 994 of the 1200 req/min budget left)",
        ),
        (
            250,
            "off-screen rows: read only about every 6m25s (283 rows / 44 of the 250 req/min budget left)",
        ),
        (
            150,
            "off-screen rows: not read while the rows on screen use the 150 req/min budget",
        ),
    ] {
        a.settings.max_requests = budget;
        let text = screen(&a, 100, 24);
        assert!(text.contains(line), "{budget}: {text}");
        assert!(text.contains("any key closes"), "{budget}: {text}");
    }
    // Every row on screen: nothing to say.
    let few = tempfile::tempdir().unwrap();
    seed(few.path());
    let mut a = app(few.path(), true, 100, 24).await;
    key(&mut a, KeyCode::Char('?'));
    assert!(!screen(&a, 100, 24).contains("off-screen rows"));
}

/// Issue 35, trip 5: at 80 columns the table's title names the columns it
/// dropped (EXCLUSION and SKEW), with the sort's mark when the sort column is
/// one of them; at 120 nothing is hidden.
#[tokio::test]
async fn the_title_names_the_columns_dropped_at_80_columns() {
    let (dir, mut a) = seeded(false, 80, 24).await;
    let text = screen(&a, 80, 24);
    let title = text.lines().find(|l| l.contains("┌ leases ")).unwrap();
    assert!(title.contains("· hidden: EXCLUSION, SKEW "), "{text}");
    for _ in 0..10 {
        if a.leases().sort() == SortKey::Skew {
            break;
        }
        key(&mut a, KeyCode::Char('s'));
    }
    assert_eq!(a.leases().sort(), SortKey::Skew);
    let text = screen(&a, 80, 24);
    assert!(text.contains("· hidden: EXCLUSION, SKEW▼ "), "{text}");
    key(&mut a, KeyCode::Char('S'));
    assert!(screen(&a, 80, 24).contains("SKEW▲ "));
    let wide = app(dir.path(), false, 120, 24).await;
    assert!(!screen(&wide, 120, 24).contains("hidden"));
}
