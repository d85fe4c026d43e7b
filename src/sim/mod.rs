//! The deterministic simulator (issue 32), compiled only with the `sim`
//! feature and never part of the release binary.
//!
//! The real engine ([`crate::bucket::BucketLease`], its keep-alive, fence,
//! probe and race check, and the takeover executor driven by a simulated
//! operator) runs against a simulated store ([`store`]) and
//! simulated host clocks ([`clock`]) on a single-threaded tokio runtime with
//! paused time; one seed fixes every choice ([`world`]). The checker runs at
//! every write and every change of the LEASE: S1 one writer, S2 generation,
//! S3 loss learned, S4 refusal on broken stores, S5 command stopped, L1
//! liveness. The holders' commands run as `bucket hold` runs them
//! ([`command`]). [`defect`]
//! holds the switches that break the engine on purpose.

pub mod clock;
mod command;
pub use crate::bucket::defect;
mod operator;
pub(crate) mod state;
pub(crate) mod store;
pub(crate) mod world;

pub use state::{OffsetScore, Outcome, Property, Variant};
pub use world::{run_seed, Options};
