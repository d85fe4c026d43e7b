//! The guarded, audited takeover: the flow against real servers, its signals, the audit log.

mod audit_log;
mod confirm;
mod flow;
mod look_again;
mod signals;
mod wording;
