//! `leasectl takeover --force --yes` of a live holder that renews between
//! the takeover's look and its write (issue 45 §8: refused "changed since you
//! looked" in 2 of 2 scripted runs with a TTL of 6 s). Without
//! `--expect-etag`, a change that is only a renewal — the same holder under
//! the same generation — is looked at again and retried (said on stdout, at
//! most three times); with `--expect-etag`, never. A proxy holds the answer
//! of the takeover's look back for 3 s, longer than the holder's renewal
//! period (2 s), so that the renewal lands in between every time.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::hold::Hold;
use crate::common::proxy::{Mode, Proxy};
use crate::common::{bin, run_with_timeout, sdk_client, text, Moto, Server};

/// The ETag of `bucket`'s `db/LEASE` once a holder has written it.
async fn held_etag(endpoint: &str, bucket: &str) -> String {
    let client = sdk_client(endpoint);
    let t = Instant::now();
    loop {
        if let Ok(o) = client
            .get_object()
            .bucket(bucket)
            .key("db/LEASE")
            .send()
            .await
        {
            return o.e_tag().unwrap_or_default().trim_matches('"').to_owned();
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the holder never acquired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ETag of the held (not released) record at `bucket`'s `db/LEASE`.
async fn current_etag(endpoint: &str, bucket: &str) -> String {
    let client = sdk_client(endpoint);
    let t = Instant::now();
    loop {
        let e = held_etag(endpoint, bucket).await;
        let o = client
            .get_object()
            .bucket(bucket)
            .key("db/LEASE")
            .send()
            .await;
        if let Ok(o) = o {
            let same = o.e_tag().unwrap_or_default().trim_matches('"') == e;
            let body = o.body.collect().await.unwrap().into_bytes();
            if same && !String::from_utf8_lossy(&body).contains("released_at") {
                return e;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no held record");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `leasectl takeover URL --force --yes … EXTRA` through `endpoint`.
async fn takeover(endpoint: &str, url: &str, log: &str, extra: &[&str]) -> std::process::Output {
    let mut c = bin();
    c.env_remove("LEASECTL_LOG")
        .stdin(Stdio::null())
        .args(["--endpoint-url", endpoint, "--path-style", "takeover", url])
        .args([
            "--force",
            "--yes",
            "--reason",
            "look again",
            "--then",
            "release",
        ])
        .args(["--audit-log", log])
        .args(extra);
    tokio::task::spawn_blocking(move || run_with_timeout(c, Duration::from_secs(60)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_looks_again_when_the_holder_only_renewed() {
    let (endpoint, bucket) = Server::Moto(Moto::Conditional).bucket("look-again").await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let log = log.to_str().unwrap();
    let url = format!("s3://{bucket}/db/");
    let cmd = vec!["sleep".to_owned(), "60".to_owned()];

    // Without --expect-etag: looked at again, then taken.
    let mut holder = Hold::spawn(
        dir.path(),
        "h1",
        &endpoint,
        &url,
        &["--ttl", "6s"],
        &cmd,
        &[],
    );
    held_etag(&endpoint, &bucket).await;
    proxy.delay_next_answers_of("GET", "db/LEASE", 1, Duration::from_secs(3));
    let o = takeover(&proxy.endpoint(), &url, log, &[]).await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.contains(" renewed its lease (generation ")
                && l.ends_with("between the look and the write: looking again (1 of 3)")),
        "{out}"
    );
    assert!(out.contains("taken: "), "{out}");
    assert_eq!(
        holder.exit_code(Duration::from_secs(20)).await,
        Some(5),
        "the replaced holder learns it lost: {}",
        holder.stderr()
    );

    // With --expect-etag: the renewal is a refusal, as it names one record.
    // (The ETag is read just before the takeover starts; when the holder
    // renews in between, the look itself refuses, before the write: try
    // again, up to five times, until the renewal falls between the look and
    // the write. Either way it is never looked at again.)
    let mut holder = Hold::spawn(
        dir.path(),
        "h2",
        &endpoint,
        &url,
        &["--ttl", "6s"],
        &cmd,
        &[],
    );
    let mut raced = false;
    for _ in 0..5 {
        let etag = current_etag(&endpoint, &bucket).await;
        proxy.delay_next_answers_of("GET", "db/LEASE", 1, Duration::from_secs(3));
        let o = takeover(&proxy.endpoint(), &url, log, &["--expect-etag", &etag]).await;
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(4), "{out}\n{err}");
        assert!(!out.contains("looking again"), "{out}");
        if err.contains("changed since you looked") {
            raced = true;
            break;
        }
        assert!(err.contains("but --expect-etag is"), "{err}");
    }
    assert!(
        raced,
        "the renewal never fell between the look and the write"
    );
    assert_eq!(
        holder.exit_code(Duration::from_millis(100)).await,
        None,
        "still held"
    );
}
