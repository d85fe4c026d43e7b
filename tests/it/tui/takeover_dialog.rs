//! The console's takeover dialog on `TestBackend`: what it checks before it
//! queues a takeover (reason, typed prefix, watched TTL, look-alike names,
//! a terminal large enough to read it), and how it scrolls and forgets a
//! refusal once answered.

use crossterm::event::KeyCode;
use leasectl::takeover::Then;
use leasectl::tui::action::WriteRequest;
use leasectl::tui::app::{Action, App, Field, Mode};

use super::support::*;

#[tokio::test]
async fn takeover_dialog_validates_then_queues_exactly_what_was_seen() {
    let (_dir, mut a) = seeded(false, 110, 30).await;
    select(&mut a, "billing/");
    let seen_etag = a.selected_lease().unwrap().1.etag.clone();
    key(&mut a, KeyCode::Char('t'));
    let Mode::Takeover(d) = a.mode() else {
        panic!("dialog")
    };
    // Issue 35 trip 6: the focus starts in the reason field, where the
    // caret is, so what is typed first is not dropped.
    assert_eq!(d.focus, Field::Reason, "focus starts in the reason field");
    let text = screen(&a, 110, 30);
    assert!(
        text.contains("holder-billing") && text.contains("stale"),
        "{text}"
    );
    insta::assert_snapshot!("takeover_dialog", text);
    typed(&mut a, "typed at once");
    let Mode::Takeover(d) = a.mode() else {
        panic!("dialog")
    };
    assert_eq!(
        d.reason, "typed at once",
        "what is typed first lands in the reason"
    );
    // Esc closes without queuing anything.
    key(&mut a, KeyCode::Esc);
    assert!(matches!(a.mode(), Mode::Normal) && a.outbox().is_empty());
    // Again: confirm with an empty reason is refused.
    key(&mut a, KeyCode::Char('t'));
    key(&mut a, KeyCode::BackTab); // reason → Take over (wraps)
    key(&mut a, KeyCode::Enter);
    let Mode::Takeover(d) = a.mode() else {
        panic!("dialog stays")
    };
    assert!(d.problem.as_deref().unwrap().contains("reason"));
    assert!(a.outbox().is_empty());
    // Fill the reason, choose hold, confirm.
    key(&mut a, KeyCode::Tab); // Confirm → Reason (wraps)
    typed(&mut a, "INC-7 host gone");
    key(&mut a, KeyCode::Tab); // → Then
    key(&mut a, KeyCode::Right); // release → hold
    key(&mut a, KeyCode::Tab); // → Cancel
    key(&mut a, KeyCode::Tab); // → Confirm
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1);
    match &a.outbox()[0] {
        WriteRequest::Takeover {
            prefix,
            seen,
            reason,
            then,
            force,
            ..
        } => {
            assert_eq!(prefix, "billing/");
            assert_eq!(seen.etag().map(str::to_owned), seen_etag);
            assert_eq!(reason, "INC-7 host gone");
            assert_eq!(*then, Then::Hold);
            assert!(!force);
        }
        c => panic!("{c:?}"),
    }
    // The result closes the dialog; the held lease is marked and quitting asks first.
    a.take_writes();
    a.update(Action::TakeoverDone {
        key: "billing/LEASE".into(),
        result: Ok(("taken".into(), Some("billing/LEASE".into()))),
    });
    assert!(matches!(a.mode(), Mode::Normal));
    assert!(screen(&a, 110, 30).contains("◆ billing/"));
    key(&mut a, KeyCode::Char('q'));
    assert!(matches!(a.mode(), Mode::ConfirmQuit) && !a.should_quit());
    key(&mut a, KeyCode::Char('y'));
    assert!(matches!(a.outbox()[0], WriteRequest::ReleaseHeld));
    assert!(!a.should_quit(), "waits for the release");
    a.update(Action::HeldReleased(vec!["billing/LEASE: released".into()]));
    assert!(a.should_quit());
}

#[tokio::test]
async fn fresh_needs_the_typed_prefix_and_suspect_needs_a_watched_ttl() {
    let (_dir, mut a) = seeded(false, 110, 30).await;
    open_takeover(&mut a, "orders/", "drill");
    let Mode::Takeover(d) = a.mode() else {
        panic!()
    };
    assert!(d.fields().contains(&Field::TypedPrefix));
    // Jump to Confirm without typing the prefix.
    key(&mut a, KeyCode::BackTab); // Reason → Confirm (wraps)
    key(&mut a, KeyCode::Enter);
    let Mode::Takeover(d) = a.mode() else {
        panic!()
    };
    assert!(
        d.problem.as_deref().unwrap().contains("type the prefix"),
        "{:?}",
        d.problem
    );
    assert!(a.outbox().is_empty());
    key(&mut a, KeyCode::Esc);

    open_takeover(&mut a, "events/", "clock fixed");
    key(&mut a, KeyCode::BackTab); // Reason → Confirm (wraps)
    key(&mut a, KeyCode::Enter);
    let Mode::Takeover(d) = a.mode() else {
        panic!()
    };
    assert!(
        d.problem
            .as_deref()
            .unwrap()
            .contains("unchanged for one TTL"),
        "{:?}",
        d.problem
    );
    key(&mut a, KeyCode::Esc);
    // Thirty seconds later, same ETag: allowed.
    a.update(Action::Tick(at(31)));
    key(&mut a, KeyCode::Char('t'));
    typed(&mut a, "clock fixed");
    key(&mut a, KeyCode::BackTab); // Reason → Confirm (wraps)
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1, "{:?}", a.mode());
}

/// On a short terminal the takeover dialog scrolls to the focused field: its
/// buttons can be reached and seen at 40×10.
#[tokio::test]
async fn the_takeover_dialog_scrolls_to_its_buttons_on_a_short_terminal() {
    let (_dir, mut a) = seeded(false, 40, 10).await;
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Char('t'));
    let first = screen(&a, 40, 10);
    assert!(
        first.contains("take over") && first.contains("reason"),
        "{first}"
    );
    let focus = |a: &App| match a.mode() {
        leasectl::tui::app::Mode::Takeover(d) => Some(d.focus),
        _ => None,
    };
    for _ in 0..6 {
        if focus(&a) == Some(leasectl::tui::app::Field::Confirm) {
            break;
        }
        key(&mut a, KeyCode::Tab);
    }
    assert_eq!(focus(&a), Some(leasectl::tui::app::Field::Confirm));
    let text = screen(&a, 40, 10);
    assert!(
        text.contains("Take over"),
        "the focused button is visible ({:?}):\n{text}",
        a.mode()
    );
}

/// A name that only looks like another (a Cyrillic `а` among Latin letters,
/// or not in NFC) is flagged in the detail pane and the takeover dialog.
#[tokio::test]
async fn look_alike_names_are_flagged_before_a_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let name = "b\u{430}ckups";
    write_lease(dir.path(), name, &rec("gone", "2026-11-30T11:50:00Z", 30));
    let mut a = app(dir.path(), false, 160, 40).await;
    select(&mut a, &format!("{name}/"));
    key(&mut a, KeyCode::Enter);
    let detail = screen(&a, 160, 40);
    assert!(
        detail.contains("LOOK-ALIKE") && detail.contains("U+0430"),
        "{detail}"
    );
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('t'));
    let dialog = screen(&a, 160, 40);
    assert!(
        dialog.contains("warning") && dialog.contains("U+0430"),
        "{dialog}"
    );
}

/// A refusal in the takeover dialog lasts only while it is true: typing the
/// missing reason clears "a reason is required", and what is still missing
/// (a successor for a hand-over) is said instead.
#[tokio::test]
async fn the_takeover_dialog_forgets_a_refusal_once_it_is_answered() {
    let (_dir, mut a) = seeded(false, 110, 30).await;
    select(&mut a, "billing/");
    key(&mut a, KeyCode::Char('t'));
    key(&mut a, KeyCode::BackTab); // reason → Take over (wraps)
    key(&mut a, KeyCode::Enter);
    assert!(screen(&a, 110, 30).contains("a reason is required"));
    key(&mut a, KeyCode::Tab); // → Reason
    typed(&mut a, "INC-7 host gone");
    let text = screen(&a, 110, 30);
    assert!(!text.contains("reason is required"), "{text}");
    let Mode::Takeover(d) = a.mode() else {
        panic!()
    };
    assert_eq!(d.problem, None);
    insta::assert_snapshot!("takeover_dialog_reason_typed", text);
    // Refused again for another reason: hand over without a successor.
    key(&mut a, KeyCode::Tab); // → Then
    key(&mut a, KeyCode::Left); // release → hand over
    for _ in 0..3 {
        key(&mut a, KeyCode::Tab); // → Successor → Cancel → Confirm
    }
    key(&mut a, KeyCode::Enter);
    assert!(screen(&a, 110, 30).contains("needs the successor"));
    key(&mut a, KeyCode::BackTab);
    key(&mut a, KeyCode::BackTab); // → Successor
    typed(&mut a, "next-holder");
    let text = screen(&a, 110, 30);
    assert!(!text.contains("needs the successor"), "{text}");
    // Erasing the reason again brings its refusal back at once.
    key(&mut a, KeyCode::BackTab);
    key(&mut a, KeyCode::BackTab); // → Reason
    for _ in 0.."INC-7 host gone".len() {
        key(&mut a, KeyCode::Backspace);
    }
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab);
    key(&mut a, KeyCode::Tab); // → Confirm
    key(&mut a, KeyCode::Enter);
    assert!(screen(&a, 110, 30).contains("a reason is required"));
    assert!(a.outbox().is_empty());
}

/// Issue 37 item 9: at 41×9 the takeover dialog cannot show the holder, age
/// and state lines nor the whole "then" choice, so it does not confirm (it
/// says the size it needs); once the terminal is large enough, the same
/// dialog confirms.
#[tokio::test]
async fn a_takeover_dialog_too_small_to_read_is_not_confirmed() {
    let (_dir, mut a) = seeded(false, 41, 9).await;
    open_takeover(&mut a, "billing/", "INC-9 host gone");
    key(&mut a, KeyCode::Tab); // → Then
    key(&mut a, KeyCode::Tab); // → Cancel
    key(&mut a, KeyCode::Tab); // → Confirm
    key(&mut a, KeyCode::Enter);
    assert!(a.outbox().is_empty(), "confirmed what could not be seen");
    let Mode::Takeover(d) = a.mode() else {
        panic!("the dialog stays open")
    };
    assert!(
        d.problem.as_deref().unwrap_or("").contains("too small"),
        "{:?}",
        d.problem
    );
    a.update(Action::Resize(110, 30));
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1, "a large enough terminal confirms");
}

/// While a takeover it sent waits (a forced one, for the replaced holder's
/// fence: up to a TTL), the dialog says what for and until when, in the
/// takeover's own sentence, instead of only "working…"; a sentence about
/// another key is not shown, and what it shows is made safe for the terminal.
#[tokio::test]
async fn a_pending_takeover_says_what_it_waits_for() {
    let (_dir, mut a) = seeded(false, 110, 30).await;
    open_takeover(&mut a, "billing/", "INC-8 move the writer");
    key(&mut a, KeyCode::BackTab); // Reason → Confirm (wraps)
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.outbox().len(), 1, "{:?}", a.mode());
    let text = screen(&a, 110, 30);
    assert!(text.contains("working… (probe"), "{text}");
    a.update(Action::TakeoverWaiting {
        key: "orders/LEASE".into(),
        text: "waiting for another key".into(),
    });
    assert!(!screen(&a, 110, 30).contains("another key"));
    a.update(Action::TakeoverWaiting {
        key: "billing/LEASE".into(),
        text:
            "waiting until 12:00:25Z (25s from now) for the replaced holder's fence \x1b[2Jto close"
                .into(),
    });
    let text = screen(&a, 110, 30);
    assert!(
        text.contains("waiting until 12:00:25Z (25s from now) for the replaced holder's"),
        "{text}"
    );
    assert!(!text.contains("working… (probe"), "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
    // The result closes the dialog.
    a.update(Action::TakeoverDone {
        key: "billing/LEASE".into(),
        result: Ok(("released".into(), None)),
    });
    assert!(matches!(a.mode(), Mode::Normal));
}
