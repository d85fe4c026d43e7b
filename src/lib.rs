//! leasectl: an operations console for single-writer leases.
//!
//! Layers, bottom to top (each uses only those below it; ARCHITECTURE.md has
//! the map, the invariants and where each protocol rule lives;
//! `tests/it/architecture.rs` checks the rule):
//! - utilities: [`clock`], [`text`], [`exit`], [`logfile`], [`stdout`], [`runtime`];
//! - [`store`]: object stores (S3, a local directory, read-only);
//! - [`values`] (plain value parsers) and [`target`] (TARGET URLs);
//! - [`bucket`]: the bucket lease: record, judgement, engine, fence, probe;
//! - [`supervise`] (running a command under a lease) and [`audit`];
//! - [`takeover`] (the guarded, audited takeover) and [`writer`] (the pod
//!   writer lease: duty, flock, `writer exec`, pod scan);
//! - [`snapshot`]: discovery, gathering, the `--json` document;
//! - [`monitor`] (`check`, `-o`, `--watch`, `serve`), then [`tui`] (the console);
//! - front ends: [`cli`] (clap only), [`config`] (contexts), [`setup`] (what every
//!   command shares, built once), [`commands`] (one file per command, the one
//!   dispatch) and [`demo`].

// A `pub` item is the library's API (see ARCHITECTURE.md, "The library's
// API"); everything else is `pub(crate)` or narrower, and this lint says so
// where a `pub` could not be reached from outside.
#![warn(unreachable_pub)]

pub mod audit;
pub mod bucket;
pub mod cli;
pub mod clock;
pub mod commands;
pub(crate) mod config;
pub(crate) mod demo;
pub mod exit;
pub(crate) mod hold;
pub(crate) mod logfile;
pub mod monitor;
pub(crate) mod runtime;
pub mod setup;
#[cfg(feature = "sim")]
pub mod sim;
pub mod snapshot;
pub(crate) mod stdout;
pub mod store;
pub mod supervise;
pub mod takeover;
pub mod target;
pub mod text;
pub mod timeline;
pub mod tui;
pub(crate) mod values;
pub mod writer;

/// Unit tests that start processes hold this for reading, and one that
/// names the processes holding a descriptor of the test process holds it
/// for writing: a child between its fork and its exec holds every
/// descriptor of the test process, close-on-exec or not, and would be
/// named too.
#[cfg(test)]
pub(crate) static FORKS: std::sync::RwLock<()> = std::sync::RwLock::new(());
