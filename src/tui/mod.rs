//! The console: a ratatui app driven by one event loop.
//!
//! Background tasks own all I/O: the refresher ([`refresh`], on a thread and
//! current-thread runtime of its own) gathers snapshots (bucket
//! leases, the pod scan, request counters, recent audit entries) and the write
//! task ([`ops`], OPS mode only) runs the probes and takeovers the operator
//! confirmed. Both talk to the UI only through messages; the UI never awaits
//! the network while drawing. State changes only in [`app::App::update`];
//! [`ui::render`] takes `&App`.
//!
//! The loop itself ([`run_on`]) is generic over the ratatui backend and the
//! terminal's event stream, its side effects gathered in [`Io`]; [`run`] is
//! the production entry that fills it with the real terminal, crossterm's
//! events and SIGTERM/SIGHUP (tests drive the same loop on `TestBackend`,
//! `tests/it/tui/event_loop.rs`).

pub mod action;
pub mod app;
pub mod layout;
pub mod ops;
mod refresh;
mod start;
pub mod ui;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::{Stream, StreamExt};
use ratatui::backend::Backend;
use ratatui::Terminal;
use tokio::sync::mpsc;

use crate::clock::SharedClock;
use crate::snapshot::Gatherer;
use crate::store::Counters;
use crate::writer::scan::ScanOptions;
use app::{Action, App};
use refresh::spawn_refresher;
pub use refresh::{Gathered, POD_SCAN_HIDDEN_EVERY};
pub use start::{ops_targets, start, Parts, Writes};

/// Everything a console run needs (made by [`Parts::console`]). The
/// settings live in `app.settings` alone: the refresher reads its refresh
/// interval, exclusion mode and audit log there.
pub struct Console {
    /// The initial state, with the front end's settings.
    pub app: App,
    /// The reader's clock.
    pub clock: SharedClock,
    /// The bucket gatherer (read side only).
    pub gatherer: Gatherer,
    /// The pod scans (merged); empty with `--no-pod`.
    pub pod: Vec<ScanOptions>,
    /// Request counters shared with the stores.
    pub counters: Arc<Counters>,
    /// The write side: `None` in watch mode (there is nothing that could write).
    pub ops: Option<ops::Ops>,
}

/// The console's side effects, in one place: where frames are drawn, where
/// terminal events come from, and what ends the console from outside. The
/// production console ([`run`]) fills it with the real terminal, crossterm's
/// event stream and SIGTERM/SIGHUP; a test fills it with ratatui's
/// `TestBackend`, a stream of events it feeds, and a future it controls, and
/// drives the very same loop ([`run_on`]).
pub struct Io<B: Backend, E> {
    /// Where frames are drawn.
    pub terminal: Terminal<B>,
    /// Terminal events (keys, resizes); the stream's end quits the console,
    /// an error ends it with that error.
    pub events: E,
    /// Completes when the console must end at once (a signal); held leases
    /// are still released.
    pub stop: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Runs the console until the operator quits, or a signal whose default
/// action would end it arrives (SIGTERM, SIGHUP, SIGUSR1, …: those of
/// [`crate::supervise::signals`] it can catch). The terminal is restored on
/// every exit path, panic included (ratatui's panic hook). Leases held by
/// the console are released before it returns.
pub async fn run(console: Console) -> std::io::Result<()> {
    let terminal = ratatui::try_init()?;
    let mut signals = crate::supervise::Signals::new();
    let io = Io {
        terminal,
        events: EventStream::new(),
        stop: Box::pin(async move {
            signals.recv().await;
        }),
    };
    let result = run_on(console, io).await;
    ratatui::restore();
    result
}

/// The console's loop on any backend and event stream (see [`Io`]): starts
/// the refresher and (OPS mode) the write task, draws a frame, applies what
/// arrives through [`App::update`], hands queued writes to the write task,
/// until the operator quits, the events end, or `io.stop` completes. Then it
/// waits (up to 15 s) for the write task to release what it holds and stops
/// the refresher (on its own thread and runtime). It neither sets up nor
/// restores the terminal.
///
/// # Errors
/// A frame that could not be drawn, an event stream error, or the refresher
/// ending (it panicked).
pub async fn run_on<B, E>(console: Console, io: Io<B, E>) -> std::io::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    E: Stream<Item = std::io::Result<Event>> + Unpin,
{
    let Io {
        mut terminal,
        mut events,
        mut stop,
    } = io;
    let Console {
        mut app,
        clock,
        gatherer,
        pod,
        counters,
        ops,
    } = console;
    let focus = gatherer.focus();
    let mut in_view = std::collections::HashSet::new();
    let pod_visible = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The snapshot recipe's steps the refresher takes: the best-effort marks
    // and the pod scan (the console follows the audit log as it grows).
    let recipe = crate::snapshot::Recipe {
        pods: pod,
        best_effort: app.settings.exclusion == crate::bucket::Exclusion::BestEffort,
        audit: None,
    };
    let (mut refresher, mut rx) = spawn_refresher(
        gatherer,
        clock.clone(),
        app.settings.refresh,
        recipe,
        counters,
        app.settings.audit_path.clone(),
        pod_visible.clone(),
    )?;
    let (results_tx, mut results) = mpsc::channel::<Action>(16);
    let (commands, ops_task) = match ops {
        Some(o) => {
            let (c, t) = o.start(results_tx);
            (Some(c), Some(t))
        }
        None => (None, None),
    };

    let size = terminal.size().map_err(io_error)?;
    app.update(Action::Resize(size.width, size.height));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let result = loop {
        let area = match terminal.draw(|f| ui::render(&app, f)) {
            Ok(frame) => frame.area,
            Err(e) => break Err(io_error(e)),
        };
        // How far the detail pane scrolls, as this frame measured it.
        if let Some((lines, shown)) = ui::detail_extent(&app, area) {
            app.update(Action::DetailExtent { lines, shown });
        }
        let actions = tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    app::key_action(&app, k).into_iter().collect()
                }
                Some(Ok(Event::Resize(w, h))) => vec![Action::Resize(w, h)],
                Some(Ok(_)) => vec![],
                Some(Err(e)) => break Err(e),
                None => vec![Action::Quit],
            },
            _ = tick.tick() => vec![Action::Tick(clock.wall())],
            Some(g) = rx.recv() => g.into_actions(),
            Some(a) = results.recv() => vec![a],
            // The refresher never ends by itself: if it did, it panicked (e.g.
            // inside the AWS SDK). Leave rather than show a frozen screen.
            r = &mut refresher => break Err(std::io::Error::other(format!(
                "the background refresh stopped: {}",
                match r {
                    crate::runtime::Ended::Failed(e) => e,
                    _ => "it ended".into(),
                }
            ))),
            // Signals end the console at once; held leases are released below.
            _ = &mut stop => break Ok(()),
        };
        // One message may carry several actions (a snapshot and its pod scan
        // failure); all apply before the next frame is drawn.
        for a in actions {
            app.update(a);
        }
        pod_visible.store(
            app.view() == app::View::Pod,
            std::sync::atomic::Ordering::Relaxed,
        );
        // The rows on screen are read at every refresh; the others by need.
        let shown = app.rows_in_view();
        if shown != in_view {
            focus.set(shown.clone());
            in_view = shown;
        }
        for cmd in app.take_writes() {
            match &commands {
                Some(c) => {
                    if c.send(cmd).await.is_err() {
                        tracing::error!("the write task is gone");
                    }
                }
                None => tracing::error!("write requested in watch mode: ignored"),
            }
        }
        if app.should_quit() {
            break Ok(());
        }
    };
    // Closing the command channel makes the write task release what it
    // holds. The refresher stops after that: the release may go over
    // connections its runtime drives.
    drop(commands);
    if let Some(t) = ops_task {
        let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
    }
    refresher.stop();
    result
}

/// A backend's error as an `io::Error` (crossterm's already is one, and is
/// kept as it is).
fn io_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> std::io::Error {
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    match boxed.downcast::<std::io::Error>() {
        Ok(e) => *e,
        Err(e) => std::io::Error::other(e),
    }
}
