//! The console: a ratatui app driven by one event loop.
//!
//! Background tasks own all I/O and send [`Snapshot`]s over a channel; the UI
//! never awaits the network while drawing. State changes only in
//! [`app::App::update`]; [`ui::render`] takes `&App`.

pub mod app;
pub mod ui;

use std::future::Future;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::clock::SharedClock;
use crate::snapshot::Snapshot;
use app::{Action, App};

/// What one background refresh produced.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// The snapshot; its `pod` section is empty when the scan failed or is off.
    pub snapshot: Snapshot,
    /// Why the pod scan failed, if it did.
    pub pod_error: Option<String>,
}

impl Gathered {
    /// The actions that apply this refresh to the console, in order.
    pub fn into_actions(self) -> Vec<Action> {
        let mut v = vec![Action::Snapshot(Box::new(self.snapshot))];
        v.extend(self.pod_error.map(Action::PodScanFailed));
        v
    }
}

/// Runs the console until the operator quits (or SIGTERM/SIGHUP arrives).
///
/// `gather` produces one [`Gathered`] per call (a snapshot, and why the pod
/// scan failed if it did); it is called every `refresh` by a background task.
/// The terminal is restored on every exit path, panic included (ratatui's
/// panic hook).
pub async fn run<F, Fut>(
    mut app: App,
    clock: SharedClock,
    refresh: Duration,
    gather: F,
) -> std::io::Result<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Gathered> + Send,
{
    let (tx, mut rx) = mpsc::channel::<Gathered>(4);
    let refresher = tokio::spawn(async move {
        loop {
            let snap = gather().await;
            if tx.send(snap).await.is_err() {
                break;
            }
            tokio::time::sleep(refresh).await;
        }
    });

    let mut terminal = ratatui::try_init()?;
    let size = terminal.size()?;
    app.update(Action::Resize(size.width, size.height));
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;

    let result = loop {
        if let Err(e) = terminal.draw(|f| ui::render(&app, f)) {
            break Err(e);
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
            _ = term.recv() => vec![Action::Quit],
            _ = hup.recv() => vec![Action::Quit],
        };
        // One message may carry two actions (a snapshot and its pod scan
        // failure); both apply before the next frame is drawn.
        for a in actions {
            app.update(a);
        }
        if app.quit {
            break Ok(());
        }
    };
    refresher.abort();
    ratatui::restore();
    result
}
