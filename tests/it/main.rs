//! The integration tests, as one crate (one link of the AWS SDK instead of
//! one per file): real servers (moto on loopback, fault proxies in front of
//! it), real processes, flock and /proc, the real `leasectl` binary, the
//! console in tmux and on ratatui's `TestBackend`. Shared support lives in
//! `common` (servers, proxies, `bucket hold` processes, tmux) and
//! `writer_support` (pod processes).

#[macro_use]
mod common;
mod writer_support;

mod adoption;
mod architecture;
mod audit_junk;
mod audit_log;
mod bad_input;
mod cli_surface;
mod commands;
mod console_e2e;
mod containment;
mod contexts;
mod delta;
mod demo_assets;
mod demo_e2e;
mod engine;
mod fence_faults;
mod fence_fd;
mod fence_soak;
mod generation;
mod generation_outputs;
mod hostile_corpus;
mod hostile_store;
mod hostile_urls;
mod monitoring;
mod own_writes;
mod pod_in_question;
mod race;
mod report_truth;
mod schedule;
mod serve_limits;
mod small_faults;
mod snapshot_json;
mod takeover;
mod takeover_signals;
mod tick_judging;
mod timeline;
mod times;
mod tls;
mod tui_console;
mod tui_loop;
mod tui_snapshots;
mod tui_tmux;
mod writer_assess;
mod writer_exec;
mod writer_exec_tree;
mod writer_judge;
mod writer_lock_file;
mod writer_pod;
mod writer_privacy;
mod writer_snapshot_json;
mod writer_truth;
