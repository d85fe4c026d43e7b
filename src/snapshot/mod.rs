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

pub(crate) mod deeper;
pub(crate) mod delta;
pub(crate) mod discovery;
pub mod gather;
pub mod history;
pub(crate) mod model;
pub(crate) mod options;
pub(crate) mod recipe;
pub(crate) mod schedule;
pub(crate) mod streamed;
pub(crate) mod takeovers;
pub(crate) mod target_read;

pub(crate) use deeper::look_deeper;
pub(crate) use delta::{Delta, RowUpdate};
pub use discovery::observe;
pub(crate) use gather::DEFAULT_MAX_REQUESTS;
pub use gather::{gather, Gatherer, Progress, Refresh};
pub(crate) use model::{attention_sentence, PrefixReport, TargetReport};
pub use model::{ExclusionReport, ReaderClock, Snapshot, SCHEMA_VERSION};
pub use options::GatherOptions;
pub(crate) use options::DEFAULT_CONCURRENCY;
pub(crate) use recipe::{AuditSource, Recipe};
pub(crate) use schedule::OffScreen;
pub(crate) use streamed::{gather_streamed, Streamed, Tally};
pub(crate) use takeovers::{AuditLogReport, LastTakeover};
pub use target_read::{gather_target, OpenTarget};
