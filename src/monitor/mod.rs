//! Monitoring front ends (issue 16): the `check` plugin, the output formats
//! (`-o table|json|ndjson|prometheus`), the `--watch` stream and the `serve`
//! exporter. Each is a thin layer over the one snapshot that the console
//! and `--json` show (`crate::snapshot::Recipe`), gathered with the same
//! request discipline (`crate::snapshot::Gatherer`: conditional GETs, a
//! listing about every 30 s). Plain
//! option structs only: the commands build them from
//! the command line; nothing here reads the command line.

pub mod check;
pub mod family;
mod lease_rows;
mod node_metrics;
pub mod prometheus;
pub mod serve;
pub mod stream;
pub mod table;
pub mod text_format;
