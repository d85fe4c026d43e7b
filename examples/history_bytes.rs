//! What the session's holder history (`snapshot::history::History`, kept by
//! the console and `serve`) costs in heap per prefix, counted by the
//! allocator itself (issue 50 §4; PERFORMANCE.md, "Memory").
//!
//! Makes one local TARGET of `--prefixes` prefixes in `scripts/memory.py`'s
//! mix (one in twenty without a LEASE, the others fresh, stale or malformed
//! in turn, each holder a 32-hex-digit instance id as leasectl writes),
//! gathers it twice, and reports the bytes live on the heap once both
//! snapshots are observed, beyond what they were before: the history alone
//! (the snapshots are kept and not counted). Requested sizes, not the
//! allocator's size classes.
//!
//! ```text
//! cargo run --release --example history_bytes -- --prefixes 50000
//! ```

use std::sync::Arc;

use clap::Parser;
use leasectl::snapshot::history::{History, PrefixHistory};
use leasectl::snapshot::{gather, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

#[derive(Parser)]
struct Args {
    /// Prefixes under the TARGET.
    #[arg(long, default_value_t = 50_000)]
    prefixes: usize,
}

/// The LEASE body of prefix `i` (`None`: no LEASE), as `scripts/memory.py`.
fn body(i: usize, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    if i % 20 == 19 {
        return None;
    }
    if i % 3 == 2 && i % 60 == 2 {
        return Some(r#"{"instance_id": 42"#.to_owned());
    }
    let renewed = if i % 3 == 1 {
        now - chrono::Duration::minutes(5)
    } else {
        now
    };
    Some(
        serde_json::json!({
            "instance_id": format!("{i:032x}"),
            "acquired_at": (renewed - chrono::Duration::hours(1)).to_rfc3339(),
            "renewed_at": renewed.to_rfc3339(),
            "ttl_s": 3600,
        })
        .to_string(),
    )
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let now = chrono::Utc::now();
    for i in 0..args.prefixes {
        let d = dir.path().join(format!("db{i:05}"));
        std::fs::create_dir_all(&d).expect("a prefix directory");
        if let Some(b) = body(i, now) {
            std::fs::write(d.join("LEASE"), b).expect("a LEASE");
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let open = vec![OpenTarget {
        target: format!("file://{}/", dir.path().display())
            .parse()
            .expect("a TARGET"),
        endpoint: "local".into(),
        store: Arc::new(LocalStore::open(dir.path()).expect("the store")),
    }];
    let clock = leasectl::clock::SystemClock::shared();
    let opts = GatherOptions::default();
    let first = rt.block_on(gather(&open, &opts, &clock));
    let second = rt.block_on(gather(&open, &opts, &clock));
    let rows: usize = second.targets.iter().map(|t| t.prefixes.len()).sum();

    let before = counting::live();
    let mut history = History::new();
    history.observe(&first, &[]);
    history.observe(&second, &[]);
    let after = counting::live();
    let per_prefix = (after - before) as f64 / history.prefixes() as f64;
    println!(
        "{rows} rows, {} prefixes tracked, {} changes kept: {:.1} bytes live a prefix \
         ({} in all); an entry's value {} bytes",
        history.prefixes(),
        history.len(),
        per_prefix,
        after - before,
        std::mem::size_of::<PrefixHistory>(),
    );
    drop((first, second));
}
