//! Monitoring front ends (issue 16): the `check` plugin, the output formats
//! (`-o table|json|ndjson|prometheus`), the `--watch` stream and the `serve`
//! exporter. Each is a thin layer over the one snapshot that the console
//! and `--json` show (`crate::snapshot::Recipe`), gathered with the same
//! request discipline (`crate::snapshot::Gatherer`: conditional GETs, a
//! listing about every 30 s). Plain
//! option structs only: the commands build them from
//! the command line; nothing here reads the command line.

pub(crate) mod check;
pub(crate) mod family;
mod lease_rows;
mod node_metrics;
pub mod probe;
pub(crate) mod prometheus;
pub(crate) mod serve;
pub(crate) mod stream;
pub(crate) mod table;
pub(crate) mod text_format;
