//! Discovery of prefixes under each TARGET, and one consistent [`Snapshot`]
//! value: what the console draws and what `--json` prints.
//!
//! - [`model`]: the `--json` document ([`Snapshot`], [`TargetReport`],
//!   [`PrefixReport`], …), each row judged at an instant, and the exit code.
//! - [`discovery`]: which prefixes a TARGET holds ([`discover`]).
//! - [`schedule`]: when each LEASE is read again ([`Schedule`]) and which
//!   rows are in view ([`Focus`]).
//! - [`gather`](mod@gather): reading every LEASE into a snapshot
//!   ([`gather()`], [`Gatherer`]).
//! - [`streamed`]: a gather that hands each row on as it is judged and
//!   holds none (`-o ndjson`: [`gather_streamed`]).
//! - [`deeper`]: leases deeper than a TARGET was listed ([`look_deeper`]).
//! - [`delta`]: the rows that changed since the last snapshot ([`Delta`]).
//! - [`history`]: what changed between two snapshots.
//! - [`takeovers`]: the last takeover the audit log records per prefix.
//!
//! Everything public is re-exported here: `leasectl::snapshot::X` names it
//! whichever file it lives in.

pub mod deeper;
pub mod delta;
pub mod discovery;
pub mod gather;
pub mod history;
pub mod model;
pub mod options;
pub mod recipe;
pub mod schedule;
pub mod streamed;
pub mod takeovers;
pub mod target_read;

pub use deeper::look_deeper;
pub use delta::{Delta, RowUpdate, TargetDelta};
pub use discovery::{discover, observe};
pub use gather::{gather, Gatherer, Progress, ProgressSink, Refresh, DEFAULT_MAX_REQUESTS};
pub use model::{
    attention_item, attention_sentence, DeeperLeases, ExclusionReport, PrefixError, PrefixReport,
    ReaderClock, Snapshot, TargetReport, ATTENTION_NAMED, SCHEMA_VERSION,
};
pub use options::{GatherOptions, DEFAULT_CONCURRENCY};
pub use recipe::{AuditSource, PodScanFailure, Recipe};
pub use schedule::{Focus, OffScreen, Schedule};
pub use streamed::{gather_streamed, Streamed, Tally};
pub use takeovers::{AuditLogReport, LastTakeover, TakeoverIndex};
pub use target_read::{
    gather_target, gather_target_cached, OpenTarget, TargetCache, PROGRESS_EVERY,
};
