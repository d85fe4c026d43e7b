//! CPU per S3 request at the console's steady state, for PERFORMANCE.md
//! (issue 27, "cheaper requests"): conditional GETs of small LEASE objects
//! (answered `304 Not Modified`) and GETs of absent ones (`404`), through
//! leasectl's own [`S3Store`] (the client, configuration and interceptors the
//! console uses), against a running S3 server.
//!
//! It seeds `--objects` LEASE objects (and as many absent keys), warms the
//! connection pool, then sends `--requests` requests of each kind with
//! `--concurrency` in flight and reports this process's CPU time
//! (`getrusage(RUSAGE_SELF)`, user + system; the server runs in another
//! process, so its CPU is not counted) divided by the number of requests.
//!
//! It allocates with mimalloc, as the `leasectl` binary does, and runs on a
//! current-thread runtime by default, as the console's refresher and
//! `serve`'s gatherer do (`--runtime multi` for the shared multi-threaded
//! runtime the other commands use).
//!
//! ```text
//! AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… cargo run --release --example s3_get_cpu -- \
//!     --endpoint-url http://127.0.0.1:8333 --bucket cpu-bench --requests 5000
//! ```

use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use futures::StreamExt;
use leasectl::store::s3::{S3Options, S3Store};
use leasectl::store::{ObjectRead, ObjectStore, PutCondition, StoreError};

/// The `leasectl` binary's allocator (`src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// The S3 endpoint.
    #[arg(long)]
    endpoint_url: String,
    /// The bucket (created when missing).
    #[arg(long, default_value = "cpu-bench")]
    bucket: String,
    /// LEASE objects to seed (and absent keys to ask for).
    #[arg(long, default_value_t = 100)]
    objects: usize,
    /// Requests of each kind (304 and 404).
    #[arg(long, default_value_t = 5000)]
    requests: usize,
    /// Requests in flight.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// The tokio runtime: `current` (one thread: the console's refresher and
    /// `serve`'s gatherer) or `multi` (one worker per core: the other
    /// commands), to tell what the thread hand-offs cost.
    #[arg(long, default_value = "current")]
    runtime: String,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

async fn measure(
    store: &Arc<S3Store>,
    keys: &[(String, Option<String>)],
    n: usize,
    concurrency: usize,
    want: fn(&Result<leasectl::store::GetOutput, StoreError>) -> bool,
) -> (f64, f64) {
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let bad = futures::stream::iter(0..n)
        .map(|i| {
            let store = Arc::clone(store);
            let (key, etag) = keys[i % keys.len()].clone();
            async move { store.get(&key, etag.as_deref()).await }
        })
        .buffer_unordered(concurrency)
        .filter(|r| std::future::ready(!want(r)))
        .count()
        .await;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    assert_eq!(bad, 0, "{bad} answers were not what was expected");
    (cpu / n as f64 * 1e6, wall / n as f64 * 1e6)
}

fn main() {
    let args = Args::parse();
    let rt = match args.runtime.as_str() {
        "current" => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build()
    .expect("a runtime");
    rt.block_on(run(args));
}

async fn run(args: Args) {
    let opts = S3Options {
        endpoint_url: Some(args.endpoint_url.clone()),
        path_style: true,
        ..Default::default()
    };
    let config = leasectl::store::s3::shared_config(&opts).await;
    let raw = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let _ = raw.create_bucket().bucket(&args.bucket).send().await;
    let store = Arc::new(S3Store::connect(&args.bucket, &opts).await);
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for i in 0..args.objects {
        let key = format!("backups/db{i:05}/LEASE");
        let body = format!(
            "{{\"instance_id\":\"{i:032x}\",\"acquired_at\":\"2026-12-01T00:00:00Z\",\
             \"renewed_at\":\"2026-12-01T00:00:00Z\",\"ttl_s\":3600}}"
        );
        let etag = store
            .put(&key, body.into_bytes(), PutCondition::None)
            .await
            .expect("seeding a LEASE")
            .expect("an ETag");
        present.push((key, Some(etag)));
        absent.push((format!("empty/db{i:05}/LEASE"), None));
    }
    let not_modified = |r: &Result<_, StoreError>| matches!(r, Err(StoreError::NotModified));
    let not_found = |r: &Result<_, StoreError>| matches!(r, Err(StoreError::NotFound(_)));
    // Warm-up: the connection pool and the credential cache.
    measure(&store, &present, 500, args.concurrency, not_modified).await;
    measure(&store, &absent, 500, args.concurrency, not_found).await;
    let (c304, w304) = measure(
        &store,
        &present,
        args.requests,
        args.concurrency,
        not_modified,
    )
    .await;
    let (c404, w404) = measure(&store, &absent, args.requests, args.concurrency, not_found).await;
    println!(
        "{{\"runtime\":\"{}\",\"requests\":{},\"concurrency\":{},\"cpu_us_per_304\":{c304:.1},\"wall_us_per_304\":{w304:.1},\
         \"cpu_us_per_404\":{c404:.1},\"wall_us_per_404\":{w404:.1}}}",
        args.runtime, args.requests, args.concurrency
    );
}
