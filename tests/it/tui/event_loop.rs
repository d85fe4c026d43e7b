//! The console's whole event loop (`tui::run_on`), as `leasectl` runs it, on
//! ratatui's `TestBackend`: the real refresher and write task on a real local
//! store, keys fed as a stream of crossterm events, every frame drawn read
//! back from the backend. A stale lease is taken over end to end (the LEASE
//! on disk rewritten, the audit log's intent and outcome), then the operator
//! quits and the loop returns.

use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use futures::channel::mpsc::{unbounded, UnboundedSender};
use leasectl::clock::{SharedClock, SystemClock};
use leasectl::snapshot::{GatherOptions, Gatherer, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::store::Counters;
use leasectl::tui::app::App;
use leasectl::tui::ops::{Ops, OpsTarget};
use leasectl::tui::{run_on, Console, Io};
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Size};
use ratatui::Terminal;
use tokio::sync::mpsc;

/// `TestBackend` that hands a copy of the screen to the test after every
/// frame (ratatui flushes once per `draw`).
struct Recording {
    inner: TestBackend,
    frames: mpsc::UnboundedSender<Buffer>,
}

impl Backend for Recording {
    type Error = <TestBackend as Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, p: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(p)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, t: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(t)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()?;
        let _ = self.frames.send(self.inner.buffer().clone());
        Ok(())
    }
}

fn buffer_text(buf: &Buffer) -> String {
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

/// The frames drawn so far, and waiting for one.
struct Screen {
    frames: mpsc::UnboundedReceiver<Buffer>,
    last: String,
}

impl Screen {
    /// Waits (up to 20 s) for a frame for which `ok` holds; returns its text.
    async fn until(&mut self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let wait = async {
            loop {
                if ok(&self.last) {
                    return self.last.clone();
                }
                match self.frames.recv().await {
                    Some(b) => self.last = buffer_text(&b),
                    None => panic!("the loop ended while waiting for {what}"),
                }
            }
        };
        match tokio::time::timeout(Duration::from_secs(20), wait).await {
            Ok(s) => s,
            Err(_) => panic!("no frame showed {what}; the last one:\n{}", self.last),
        }
    }
}

fn press(keys: &UnboundedSender<std::io::Result<Event>>, code: KeyCode) {
    let k = KeyEvent::new(code, KeyModifiers::NONE);
    keys.unbounded_send(Ok(Event::Key(k))).unwrap();
}

fn typed(keys: &UnboundedSender<std::io::Result<Event>>, s: &str) {
    for c in s.chars() {
        press(keys, KeyCode::Char(c));
    }
}

fn instance_id(lease: &std::path::Path) -> String {
    let body = std::fs::read_to_string(lease).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["instance_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_loop_takes_over_a_stale_lease_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let lease = dir.path().join("billing").join("LEASE");
    std::fs::create_dir_all(lease.parent().unwrap()).unwrap();
    // Renewed five minutes ago with a TTL of 30 s, written 5 s ago: stale.
    let now = chrono::Utc::now();
    let renewed =
        (now - chrono::Duration::minutes(5)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    std::fs::write(
        &lease,
        format!(
            r#"{{"instance_id":"holder-billing","acquired_at":"{renewed}","renewed_at":"{renewed}","ttl_s":30}}"#
        ),
    )
    .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&lease)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(5))
        .unwrap();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit_path = audit_dir.path().join("audit.jsonl");

    let clock: SharedClock = SystemClock::shared();
    let url = format!("file://{}/", dir.path().display());
    let store = Arc::new(LocalStore::open(dir.path()).unwrap());
    let refresh = Duration::from_secs(1);
    let mut app = App::new(vec![url.parse().unwrap()], false, refresh, clock.wall()).without_pod();
    app.settings.audit_path = Some(audit_path.clone());
    let open = vec![OpenTarget {
        target: url.parse().unwrap(),
        endpoint: "local".into(),
        store: store.clone(),
    }];
    let ops = Ops {
        targets: vec![OpsTarget {
            url: url.clone(),
            endpoint: "local".into(),
            bucket: None,
            store,
            root: String::new(),
        }],
        audit: leasectl::audit::AuditLog::open(&audit_path).unwrap(),
        clock: clock.clone(),
    };
    let console = Console {
        app,
        clock,
        gatherer: Gatherer::new(open, GatherOptions::default(), 1).schedule(refresh),
        pod: Vec::new(),
        counters: Arc::new(Counters::default()),
        ops: Some(ops),
    };

    let (frames_tx, frames) = mpsc::unbounded_channel();
    let backend = Recording {
        inner: TestBackend::new(110, 30),
        frames: frames_tx,
    };
    let (keys, events) = unbounded::<std::io::Result<Event>>();
    let io = Io {
        terminal: Terminal::new(backend).unwrap(),
        events,
        stop: Box::pin(std::future::pending()),
    };
    let mut screen = Screen {
        frames,
        last: String::new(),
    };

    let operator = async {
        screen
            .until("the stale lease", |s| {
                s.contains("billing/") && s.contains("stale")
            })
            .await;
        press(&keys, KeyCode::Char('t'));
        screen
            .until("the takeover dialog", |s| {
                s.contains("holder-billing") && s.contains("Take over")
            })
            .await;
        // The focus starts in the reason field.
        typed(&keys, "INC-9 host gone");
        press(&keys, KeyCode::Tab); // → Then
        press(&keys, KeyCode::Right); // release → hold
        press(&keys, KeyCode::Tab); // → Cancel
        press(&keys, KeyCode::Tab); // → Confirm
        press(&keys, KeyCode::Enter);
        let done = screen
            .until("the takeover's result", |s| {
                s.contains("taken: billing/LEASE")
            })
            .await;
        assert!(done.contains("◆ billing/"), "{done}");

        // On disk: the LEASE names the new holder, as the audit log says.
        let ours = instance_id(&lease);
        assert_ne!(ours, "holder-billing");
        let entries = leasectl::audit::AuditLog::read(&audit_path).unwrap();
        let phases: Vec<&str> = entries.iter().map(|e| e.phase.as_str()).collect();
        assert_eq!(phases, ["intent", "outcome"], "{entries:?}");
        assert_eq!(entries[0].id, entries[1].id);
        assert_eq!(entries[1].reason, "INC-9 host gone");
        let written = entries[1]
            .written
            .as_ref()
            .expect("the outcome names the record written");
        assert_eq!(written.record.instance_id, ours);
        assert!(done.contains(&ours), "{done}");

        // Issue 35 trip 2: Esc closes the result (the key hints come back)
        // and does not quit; the outcome stays readable in the detail
        // pane's audit entries.
        press(&keys, KeyCode::Esc);
        screen
            .until("the key hints back", |s| {
                !s.contains("taken: billing/LEASE")
                    && s.lines().last().is_some_and(|l| l.starts_with("q quit"))
            })
            .await;
        press(&keys, KeyCode::Enter);
        screen
            .until("the outcome in the detail pane's audit entries", |s| {
                s.contains("audit ") && s.contains(" outcome ") && s.contains("→ taken and held")
            })
            .await;

        // Quitting asks first (a lease is held), then releases it.
        press(&keys, KeyCode::Char('q'));
        screen
            .until("the quit question", |s| {
                s.contains("Release them and quit?")
            })
            .await;
        press(&keys, KeyCode::Char('y'));
        ours
    };
    let (result, ours) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(run_on(console, io), operator)
    })
    .await
    .expect("the loop did not return after the operator quit");
    result.unwrap();
    // The held lease was released on the way out.
    assert!(
        crate::common::released_file(&lease) || instance_id(&lease) != ours,
        "the lease was not released"
    );
}
