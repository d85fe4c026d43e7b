//! Pod writer leases with real processes, flock and /proc: duties, `writer exec`, the lock file, the pod scan and its JSON.

mod assess;
mod exec;
mod exec_tree;
mod judge;
mod lock_file;
mod namespaces;
mod node;
mod pod;
mod pod_in_question;
mod privacy;
mod snapshot_json;
mod truth;
