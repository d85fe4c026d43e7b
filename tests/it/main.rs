//! The integration tests, as one crate (one link of the AWS SDK instead of
//! one per file): real servers (moto on loopback, fault proxies in front of
//! it), real processes, flock and /proc, the real `leasectl` binary, the
//! console in tmux and on ratatui's `TestBackend`. Shared support lives in
//! `common` (servers, proxies, `bucket hold` processes, tmux) and
//! `writer_support` (pod processes); the tests are grouped by area, one
//! folder each (bucket, takeover, writer, tui, monitor, hostile).

#[macro_use]
mod common;
mod writer_support;

mod architecture;
mod bucket;
mod cli_surface;
mod contexts;
mod demo_assets;
mod hostile;
mod monitor;
mod sentences;
mod takeover;
mod timeline;
mod tui;
mod tutorial;
mod writer;
