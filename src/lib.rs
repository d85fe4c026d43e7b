//! leasectl: an operations console for single-writer leases.
//!
//! Layers, bottom to top (each uses only those below it):
//! [`store`] (object stores), [`bucket`] (the bucket-lease record, judgement and
//! engine), [`snapshot`] (discovery and the `--json` document), [`writer`] (the pod writer lease: duty, flock,
//! pod scanner), [`tui`] (the console), [`demo`] (`leasectl demo`: the console on live simulated leases). [`clock`] and [`text`] are shared utilities.

pub mod audit;
pub mod bucket;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod demo;
pub mod exit;
pub mod logfile;
pub mod snapshot;
pub mod store;
pub mod takeover;
pub mod target;
pub mod text;
pub mod tui;
pub mod writer;
