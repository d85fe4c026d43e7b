//! What the state `serve --module` keeps between probes costs in heap, per
//! TARGET and per prefix, counted by the allocator itself (issue 47 §4;
//! PERFORMANCE.md, "A fleet of buckets").
//!
//! Makes `--targets` local TARGETs (directories) of `--prefixes` prefixes
//! each (one in twenty without a LEASE, three in twenty stale, as
//! scripts/compare.py's mix), probes each of them `--rounds` times through a
//! [`Prober`] (one module allowing them all), and reports the bytes live on
//! the heap per TARGET and per prefix beyond what they were before the first
//! probe, beside the state's own estimate (`leasectl_probe_state_bytes`).
//! A local store stands in for S3: an S3 TARGET's state also shares its
//! bucket's client with the others of the bucket, which is not counted here.
//!
//! ```text
//! cargo run --release --example probe_state_bytes -- --targets 1000 --prefixes 10
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use leasectl::monitor::probe::{
    AllowList, Bounds, ConnectorStores, ProbeAnswer, ProbeModule, ProbeOptions, Prober,
};
use leasectl::snapshot::GatherOptions;
use leasectl::store::s3::S3Options;
use leasectl::target::Connector;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

#[derive(Parser)]
struct Args {
    /// TARGETs.
    #[arg(long, default_value_t = 1000)]
    targets: usize,
    /// Prefixes under each.
    #[arg(long, default_value_t = 10)]
    prefixes: usize,
    /// Probes of each TARGET.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

fn record(i: usize, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    if i.is_multiple_of(20) {
        return None;
    }
    let age = if matches!(i % 20, 2..=4) {
        4000
    } else {
        i % 25
    };
    let t = now - chrono::Duration::seconds(age as i64);
    Some(
        serde_json::json!({
            "instance_id": format!("{:032x}", (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            "acquired_at": (now - chrono::Duration::hours(1)).to_rfc3339(),
            "renewed_at": t.to_rfc3339(),
            "ttl_s": 3000,
        })
        .to_string(),
    )
}

fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let now = chrono::Utc::now();
    let mut urls = Vec::new();
    for t in 0..args.targets {
        let root = dir.path().join(format!("t{t:05}"));
        for p in 0..args.prefixes {
            let d = root.join(format!("p{p:02}"));
            std::fs::create_dir_all(&d).expect("a prefix directory");
            match record(t * args.prefixes + p, now) {
                Some(body) => std::fs::write(d.join("LEASE"), body),
                None => std::fs::write(d.join("chunk-000"), "x"),
            }
            .expect("a LEASE");
        }
        urls.push(format!("file://{}/", root.display()));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let module = ProbeModule {
        stores: Arc::new(ConnectorStores::new(Connector::new(S3Options::default()))),
        gather: GatherOptions::default(),
        best_effort: false,
        allow: AllowList::new(vec![format!("file://{}/", dir.path().display())
            .parse()
            .expect("a TARGET")]),
    };
    let prober = Prober::new(
        BTreeMap::from([("bench".to_owned(), module)]),
        ProbeOptions {
            bounds: Bounds {
                max_targets: usize::MAX,
                max_bytes: usize::MAX,
                forget_after: Duration::from_secs(3600),
            },
            timeout_offset: Duration::from_millis(500),
            max_timeout: Duration::from_secs(30),
        },
        leasectl::clock::SystemClock::shared(),
        None,
    );
    let query = |u: &str| {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("target", u)
            .append_pair("module", "bench")
            .finish()
    };
    // The first TARGET alone first, so that what is set up once (the
    // module's store handles, the runtime's buffers) is not counted.
    let probe = |u: &str, round: usize| match rt.block_on(prober.answer(&query(u), None)) {
        ProbeAnswer::Metrics(_) => {}
        ProbeAnswer::Refused(why) => panic!("round {round}: {why}"),
    };
    for round in 0..args.rounds {
        probe(&urls[0], round);
    }
    let before = counting::live();
    for round in 0..args.rounds {
        for u in &urls[1..] {
            probe(u, round);
        }
    }
    let after = counting::live();
    let per_target = (after - before) as f64 / (args.targets - 1) as f64;

    let estimate = prober.stats().bytes as f64 / args.targets as f64;
    println!(
        "{} TARGETs × {} prefixes, {} probes each: {:.0} bytes live a TARGET, {:.0} a prefix; the state's estimate {:.0} a TARGET, {:.0} a prefix",
        args.targets,
        args.prefixes,
        args.rounds,
        per_target,
        per_target / args.prefixes as f64,
        estimate,
        estimate / args.prefixes as f64
    );
}
