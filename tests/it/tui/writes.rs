//! The console with its write task on a real local store (OPS mode): the
//! probe asks first, a takeover's name is escaped once in the status bar,
//! and the holder history names a takeover released at once.

use std::time::Duration;

use crossterm::event::KeyCode;
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::tui::action::WriteRequest;
use leasectl::tui::app::{Action, App, Mode};

use super::support::*;

/// `p` asks first, as the help promises, saying what the probe writes and
/// removes (`{TARGET}.leasectl-probe/…`); no probe reaches the write task
/// (and the store is untouched) until the operator says yes.
#[tokio::test]
async fn probe_asks_first_and_sends_nothing_until_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let audit = tempfile::tempdir().unwrap();
    let (commands, mut results) = ops_on(dir.path(), &audit.path().join("audit.jsonl"));
    let before = tree(dir.path());
    let mut a = app(dir.path(), false, 100, 24).await;
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Char('p'));
    assert!(
        matches!(a.mode(), Mode::ConfirmProbe { target: 0 }),
        "{:?}",
        a.mode()
    );
    assert!(a.outbox().is_empty(), "p queued a probe before asking");
    let text = screen(&a, 100, 24);
    assert!(
        text.contains("file:///srv/backups/.leasectl-probe/{random id}")
            && text.contains("removes"),
        "{text}"
    );
    insta::assert_snapshot!("probe_confirm", text);
    // Time passing and refreshes while it asks send nothing either.
    a.update(Action::Tick(at(1)));
    pump(&mut a, &commands).await;
    // Esc, or any other key, cancels.
    key(&mut a, KeyCode::Esc);
    assert!(matches!(a.mode(), Mode::Normal) && a.outbox().is_empty());
    key(&mut a, KeyCode::Char('p'));
    key(&mut a, KeyCode::Char('n'));
    assert!(matches!(a.mode(), Mode::Normal) && a.outbox().is_empty());
    pump(&mut a, &commands).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), results.recv())
            .await
            .is_err(),
        "the write task ran something before the confirmation"
    );
    assert_eq!(tree(dir.path()), before, "the store was written to");
    // y confirms: exactly one probe, of the selected row's target, and it runs.
    key(&mut a, KeyCode::Char('p'));
    key(&mut a, KeyCode::Char('y'));
    assert!(matches!(a.mode(), Mode::Normal));
    assert!(
        matches!(a.outbox(), [WriteRequest::Probe { target: 0 }]),
        "{:?}",
        a.outbox()
    );
    pump(&mut a, &commands).await;
    let done = answer(&mut results).await;
    assert!(
        matches!(done, Action::ProbeDone { target: 0, .. }),
        "{done:?}"
    );
    // Enter confirms too.
    key(&mut a, KeyCode::Char('p'));
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1);
}

/// Names are escaped exactly once in the status bar: a real takeover (the
/// write task on a real local store) of `nl<newline>name/` reports
/// `nl\nname/LEASE`, not `nl\\nname/LEASE`, while it runs, once it is done,
/// and when it is refused.
#[tokio::test]
async fn the_status_bar_escapes_a_name_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let name = "nl\nname";
    write_lease(dir.path(), name, &rec("gone", "2026-11-30T11:50:00Z", 30));
    let audit = tempfile::tempdir().unwrap();
    let (commands, mut results) = ops_on(dir.path(), &audit.path().join("audit.jsonl"));
    let once = "nl\\nname/LEASE";
    let twice = "nl\\\\nname";
    let mut a = app(dir.path(), false, 200, 24).await;
    let take = |a: &mut App| {
        select(a, "nl\nname/");
        key(a, KeyCode::Char('t'));
        typed(a, "INC-13");
        key(a, KeyCode::BackTab); // → Confirm
        key(a, KeyCode::Enter);
        assert_eq!(a.outbox().len(), 1, "{:?}", a.mode());
    };
    take(&mut a);
    let text = screen(&a, 200, 24);
    assert!(
        text.contains(&format!("taking over {once}…")) && !text.contains(twice),
        "{text}"
    );
    pump(&mut a, &commands).await;
    let done = answer(&mut results).await;
    a.update(done);
    let text = screen(&a, 200, 24);
    let status = text.lines().rev().nth(1).unwrap();
    assert!(
        status.contains(&format!("taken: {once}")) && !text.contains(twice),
        "{text}"
    );
    // Refused: the LEASE changed since it was seen (another holder wrote it).
    let lease = dir.path().join(name).join("LEASE");
    std::fs::write(&lease, rec("gone-again", "2026-11-30T11:50:00Z", 30)).unwrap();
    let mut a = app(dir.path(), false, 200, 24).await;
    std::fs::write(&lease, rec("someone-else", "2026-11-30T11:50:01Z", 30)).unwrap();
    take(&mut a);
    pump(&mut a, &commands).await;
    let done = answer(&mut results).await;
    a.update(done);
    let text = screen(&a, 200, 24);
    assert!(
        text.contains(&format!("takeover of {once}")) && !text.contains(twice),
        "{text}"
    );
}

/// Issue 35 trip 13: after the operator's own takeover with `then release`
/// (the write task on a real local store), read only once released, the
/// holder history says it was a takeover (it said "released: holder-billing
/// → (none)"); the detail pane shows no "ETag seen for" where there is no
/// ETag.
#[tokio::test]
async fn the_history_names_a_takeover_released_at_once() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let url = format!("file://{}/", dir.path().display());
    let audit = tempfile::tempdir().unwrap();
    let audit_path = audit.path().join("audit.jsonl");
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(at(1)));
    let store = std::sync::Arc::new(LocalStore::open(dir.path()).unwrap());
    let ops = leasectl::tui::ops::Ops {
        targets: vec![leasectl::tui::ops::OpsTarget {
            url: url.clone(),
            endpoint: "local".into(),
            bucket: None,
            store: store.clone(),
            root: String::new(),
        }],
        audit: leasectl::audit::AuditLog::open(&audit_path).unwrap(),
        clock: clock.clone(),
    };
    let (tx, mut results) = tokio::sync::mpsc::channel(16);
    let (commands, _task) = ops.start(tx);
    let mut a = app(dir.path(), false, 220, 40).await;
    open_takeover(&mut a, "billing/", "INC-13 host gone");
    key(&mut a, KeyCode::BackTab); // → Take over (then: release, the default)
    key(&mut a, KeyCode::Enter);
    pump(&mut a, &commands).await;
    let done = answer(&mut results).await;
    a.update(done);
    // The next refresh: the audit log as the refresher follows it, and the
    // released record.
    a.update(Action::Audit(
        leasectl::audit::AuditLog::read(&audit_path).unwrap(),
    ));
    let open = vec![OpenTarget {
        target: url.parse().unwrap(),
        endpoint: "local".into(),
        store,
    }];
    let later: SharedClock = std::sync::Arc::new(ManualClock::new(at(3)));
    let snap = snapshot::gather(&open, &GatherOptions::default(), &later).await;
    a.update(Action::Snapshot(Box::new(snap)));
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Enter);
    let s = screen(&a, 220, 40);
    assert!(s.contains("released"), "the record is released: {s}");
    assert!(
        s.contains("takeover: holder-billing → (none)") && s.contains("host gone; released"),
        "{s}"
    );
    assert!(!s.contains("released: holder-billing"), "{s}");
    // The judgement names its state once.
    assert!(!s.contains("released: released"), "{s}");
    // No LEASE, no ETag: nothing was seen for how long.
    key(&mut a, KeyCode::Enter);
    select(&mut a, "archive/");
    key(&mut a, KeyCode::Enter);
    let s = screen(&a, 220, 40);
    assert!(s.contains("ETag          -"), "{s}");
    assert!(!s.contains("ETag seen for"), "{s}");
}

/// A forced takeover from the dialog, run by the real write task on a local
/// store: while it waits for the replaced holder's fence it tells the
/// console what it waits for (before its result), and the dialog shows it;
/// the console quitting (its command channel closing) then ends the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_takeover_tells_the_dialog_what_it_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let audit = tempfile::tempdir().unwrap();
    let (commands, mut results) = ops_on(dir.path(), &audit.path().join("audit.jsonl"));
    let mut a = app(dir.path(), false, 110, 30).await;
    open_takeover(&mut a, "orders/", "INC-9 move the writer");
    key(&mut a, KeyCode::Tab); // → then
    key(&mut a, KeyCode::Tab); // → the typed prefix
    typed(&mut a, "orders/");
    key(&mut a, KeyCode::Tab); // → Cancel
    key(&mut a, KeyCode::Tab); // → Take over
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1, "{:?}", a.mode());
    pump(&mut a, &commands).await;
    let told = answer(&mut results).await;
    let Action::TakeoverWaiting { key: k, text } = &told else {
        panic!("the wait is told before the result: {told:?}");
    };
    assert_eq!(k, "orders/LEASE");
    assert!(
        text.starts_with("waiting until ") && text.contains("fence"),
        "{text}"
    );
    a.update(told.clone());
    let shown = screen(&a, 110, 30);
    assert!(shown.contains("waiting until "), "{shown}");
    drop(commands);
    let done = answer(&mut results).await;
    assert!(
        matches!(&done, Action::TakeoverDone { key, result: Err(e) } if key == "orders/LEASE" && e.contains("stopped by the console quitting")),
        "{done:?}"
    );
}
