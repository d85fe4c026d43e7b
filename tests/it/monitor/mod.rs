//! Snapshots and monitoring: `--json`, `-o`, `check`, `serve`, reading by need, what is reported, time formats.

mod addressing;
mod alert_firing;
mod deeper;
mod endless_listing;
mod exposition;
mod monitoring;
mod ndjson_order;
mod probe_endpoint;
mod report_truth;
mod schedule;
mod serve_limits;
mod serve_stream;
mod sharding;
mod snapshot_json;
pub(crate) mod support;
mod suspect_expiry;
mod times;
