//! leasectl: an operations console for single-writer leases.
//!
//! Layers, bottom to top (each uses only those below it; ARCHITECTURE.md has
//! the map, the invariants and where each protocol rule lives):
//! - utilities: [`clock`], [`text`], [`exit`], [`logfile`], [`stdout`];
//! - [`store`]: object stores (S3, a local directory, read-only);
//! - [`bucket`]: the bucket lease: record, judgement, engine, fence, probe;
//! - [`takeover`] and [`audit`]: the guarded, audited takeover;
//! - [`writer`]: the pod writer lease: duty, flock, `writer exec`, pod scan;
//! - [`target`] and [`snapshot`]: TARGET URLs, discovery, the `--json` document;
//! - front ends: [`cli`] (clap only), [`config`] (contexts), [`tui`] (the console), [`demo`],
//!   [`monitor`] (`check`, `-o`, `--watch`, `serve`), [`app`] (the context every
//!   command runs in) and [`commands`] (one file per command, the one dispatch).

pub mod app;
pub mod audit;
pub mod bucket;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod demo;
pub mod exit;
pub mod logfile;
pub mod monitor;
pub mod snapshot;
pub mod stdout;
pub mod store;
pub mod supervise;
pub mod takeover;
pub mod target;
pub mod text;
pub mod tui;
pub mod writer;
