//! The console: its state on `TestBackend`, snapshots, the whole loop, incremental refreshes, tick judging, the timeline pane, end to end in tmux.

mod console;
mod console_e2e;
mod console_stack;
mod cuts;
mod delta;
mod demo_e2e;
mod event_loop;
mod snapshots;
mod tick_judging;
mod timeline_pane;
mod tmux;
