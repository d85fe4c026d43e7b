//! Hostile and bad input: bodies, store entries, URLs, flags, audit junk, small faults.

mod audit_junk;
mod bad_input;
mod corpus;
mod small_faults;
mod store;
mod urls;
