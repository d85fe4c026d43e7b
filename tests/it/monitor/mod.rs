//! Snapshots and monitoring: `--json`, `-o`, `check`, `serve`, reading by need, what is reported, time formats.

mod addressing;
mod deeper;
mod endless_listing;
mod exposition;
mod monitoring;
mod ndjson_order;
mod report_truth;
mod schedule;
mod serve_limits;
mod serve_stream;
mod snapshot_json;
mod suspect_expiry;
mod times;
