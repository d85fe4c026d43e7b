//! Issue 44 item 1: the timeline reads every version by default. Histories
//! that bisection hid (it inferred the versions between two reads of one
//! tenure) written with the SDK on a real versioned bucket: two holders
//! renewing in turn for 9, 101 and 1,001 versions, a whole tenure between
//! two of another holder's with its generation going back, one intruder's
//! write in a long run. Each is reported with its overlaps and exit 3
//! without any option; with `--bisect` the versions inferred are counted in
//! the summary and the JSON, and the exit is 1 (the history is not known).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{leasectl, tenure_strs, tenure_u64s};
use crate::common::*;

fn record(id: &str, generation: u64, at: DateTime<Utc>) -> leasectl::bucket::LeaseRecord {
    leasectl::bucket::LeaseRecord {
        instance_id: id.into(),
        acquired_at: at,
        renewed_at: at,
        ttl_s: 30,
        generation: Some(generation),
        released_at: None,
    }
}

/// Writes the versions of `db/LEASE` in order: `(holder, generation)` each,
/// a millisecond apart by their clocks (they all land within seconds of
/// service time, each before the previous holder's fence closed).
async fn write_history(endpoint: &str, bucket: &str, history: &[(&str, u64)]) {
    let client = sdk_client(endpoint);
    let now = Utc::now();
    for (i, (id, g)) in history.iter().enumerate() {
        let at = now + chrono::Duration::milliseconds(i as i64);
        put_raw(&client, bucket, "db/LEASE", &record(id, *g, at).to_body()).await;
    }
}

/// `leasectl timeline s3://BUCKET/db/` with `extra` (no audit log of this
/// host's): exit code, the prefix's JSON and the text report.
fn timeline(endpoint: &str, bucket: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let empty = tempfile::NamedTempFile::new().unwrap();
    let url = format!("s3://{bucket}/db/");
    // A minute a request: two of these tests read a thousand versions from
    // one moto at once, which then answers some reads after more than the
    // default 10 s on a loaded machine (CI: 17 versions unread, exit 1).
    let mut args = vec![
        "--timeout",
        "60s",
        "timeline",
        url.as_str(),
        "--audit-log",
        empty.path().to_str().unwrap(),
    ];
    args.extend(extra);
    let mut json = args.clone();
    json.extend(["-o", "json"]);
    let (code, out, err) = leasectl(endpoint, &json);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let (text_code, text, _) = leasectl(endpoint, &args);
    assert_eq!(text_code, code, "the text run exits as the JSON run");
    (code, doc["prefixes"][0].clone(), text)
}

/// Writes `history`, reads its timeline without options, and asserts exit 3
/// and the tenures of `holders`: the timeline's JSON and text.
async fn three_tenures(
    endpoint: &str,
    bucket: &str,
    history: &[(&str, u64)],
    holders: [&str; 3],
) -> (Value, String) {
    write_history(endpoint, bucket, history).await;
    let (code, p, text) = timeline(endpoint, bucket, &[]);
    assert_eq!(code, Some(3), "{p:#}");
    assert_eq!(tenure_strs(&p, &["holder"]), holders);
    (p, text)
}

fn len(p: &Value, field: &str) -> usize {
    p[field].as_array().map_or(usize::MAX, Vec::len)
}

/// Two holders renewing in turn for `n` versions (A, B, A, …; A under
/// generation 1, B under 2), read without any option: every version read,
/// none inferred; `n` tenures; every new tenure wrote before the previous
/// one's fence closed (n − 1 overlaps) and every tenure from the third on is
/// a holder writing again after the other (n − 2 more); A's generation went
/// back each time it wrote after B ((n − 1) / 2); exit 3.
/// `n` writes alternating between holder-a (generation 1) and holder-b
/// (generation 2), holder-a first.
fn alternating(n: usize) -> Vec<(&'static str, u64)> {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                ("holder-a", 1)
            } else {
                ("holder-b", 2)
            }
        })
        .collect()
}

async fn alternation(server: Server, n: usize) {
    let (endpoint, b) = versioned_bucket_on(server, &format!("tl-alternation-{n}")).await;
    let history = alternating(n);
    write_history(&endpoint, &b, &history).await;
    let started = std::time::Instant::now();
    let (code, p, text) = timeline(&endpoint, &b, &[]);
    eprintln!(
        "{} alternating versions on {}: two runs in {:?}",
        n,
        server.name(),
        started.elapsed()
    );
    assert_eq!(code, Some(3), "{p:#}");
    assert_eq!(p["sources"]["versions_listed"], n, "{p:#}");
    assert_eq!(p["sources"]["versions_read"], n, "{p:#}");
    assert_eq!(p["sources"]["versions_inferred"], 0, "{p:#}");
    assert_eq!(len(&p, "problems"), 0, "{p:#}");
    let want: Vec<&str> = history.iter().map(|h| h.0).collect();
    assert_eq!(tenure_strs(&p, &["holder"]), want);
    let (overlaps, back) = (2 * n - 3, (n - 1) / 2);
    assert_eq!(len(&p, "overlaps"), overlaps);
    assert_eq!(len(&p, "generations_back"), back);
    let first = text.lines().next().unwrap();
    assert!(
        first.contains(&format!(
            "{overlaps} overlap(s), {back} generation(s) back, {n} tenure(s)"
        )) && first.contains(&format!("{n} read"))
            && !first.contains("INFERRED"),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_holders_alternating_for_9_versions_are_found() {
    alternation(Server::Moto(Moto::Conditional), 9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_holders_alternating_for_101_versions_are_found() {
    alternation(Server::Moto(Moto::Conditional), 101).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_holders_alternating_for_1001_versions_are_found() {
    alternation(Server::Moto(Moto::Conditional), 1001).await;
}

/// A writes 6 versions under generation 10, B takes over under 11 and
/// writes 6, A comes back with its old generation for 6 more: three
/// tenures, A's generation going back, and three overlaps (B before A's
/// fence, A before B's, A writing again after B); exit 3 without any option.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hidden_tenure_and_a_generation_back_are_found() {
    let (endpoint, b) = versioned_bucket_on(Server::Moto(Moto::Conditional), "tl-hidden").await;
    let mut history = vec![("holder-a", 10); 6];
    history.extend([("holder-b", 11); 6]);
    history.extend([("holder-a", 10); 6]);
    let holders = ["holder-a", "holder-b", "holder-a"];
    let (p, text) = three_tenures(&endpoint, &b, &history, holders).await;
    let writes = tenure_u64s(&p, &["writes"]);
    assert_eq!(writes, [6, 6, 6]);
    assert_eq!(len(&p, "generations_back"), 1, "{p:#}");
    let back = &p["generations_back"][0];
    assert_eq!(
        (&back["before"], &back["after"], &back["holder"]),
        (&Value::from(11), &Value::from(10), &Value::from("holder-a"))
    );
    assert_eq!(len(&p, "overlaps"), 3, "{p:#}");
    assert!(
        text.contains("GENERATION WENT BACK: holder-a wrote 10 after holder-b had written 11"),
        "{text}"
    );
}

/// One intruder's write (under generation 99) in the middle of holder A's
/// 201 versions: found without any option (A replaced while fresh, the
/// intruder's tenure, A writing again: exit 3). With `--bisect` the two ends
/// are read and the 199 versions between are inferred as A's renewals, the
/// intruder among them: the summary and the JSON say how many were
/// inferred, a problem says what that means, and the exit is 1, never 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_intruder_write_in_a_long_run_is_found() {
    let (endpoint, b) = versioned_bucket_on(Server::Moto(Moto::Conditional), "tl-intruder").await;
    let mut history = vec![("holder-a", 10); 201];
    history[100] = ("intruder", 99);
    let holders = ["holder-a", "intruder", "holder-a"];
    let (p, text) = three_tenures(&endpoint, &b, &history, holders).await;
    assert_eq!(p["tenures"][0]["ending"]["kind"], "replaced");
    assert_eq!(p["tenures"][0]["ending"]["while_fresh"], true);
    assert_eq!(len(&p, "overlaps"), 3, "{p:#}");
    assert_eq!(len(&p, "generations_back"), 1, "{p:#}");
    assert!(text.contains("REPLACED WHILE FRESH by intruder"), "{text}");

    let (code, p, text) = timeline(&endpoint, &b, &["--bisect"]);
    assert_eq!(code, Some(1), "an inferred history is not known: {p:#}");
    let read = p["sources"]["versions_read"].as_u64().unwrap();
    let inferred = p["sources"]["versions_inferred"].as_u64().unwrap();
    assert_eq!((read, inferred), (2, 199), "{p:#}");
    // What bisection hides: the intruder is not seen.
    assert_eq!(tenure_strs(&p, &["holder"]), ["holder-a"]);
    let problems: Vec<&str> = p["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        problems.iter().any(|s| s.starts_with(
            "199 of the 201 version(s) of db/LEASE were inferred by bisection, not read"
        )),
        "{problems:?}"
    );
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("2 read, 199 INFERRED by bisection, not read"),
        "{first}"
    );
    assert!(
        text.contains("UNKNOWN: 199 of the 201 version(s)"),
        "{text}"
    );
}

/// The 1,001 on SeaweedFS: its own listing of versions (pages, order).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_holders_alternating_for_1001_versions_are_found_seaweedfs() {
    alternation(Server::Seaweed, 1001).await;
}

/// A service that answers every seventh GET `503 SlowDown` (a proxy in front
/// of moto): each throttled read is sent again after a back-off, so every
/// version is still read and nothing is reported unread (exit 3 for the
/// alternation, not 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttled_reads_are_sent_again() {
    use crate::common::proxy::{Mode, Proxy};
    let (endpoint, b) = versioned_bucket_on(Server::Moto(Moto::Conditional), "tl-throttled").await;
    write_history(&endpoint, &b, &alternating(41)).await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    proxy.slow_down_every(7);
    let (code, p, _) = timeline(&proxy.endpoint(), &b, &[]);
    assert!(
        proxy.slowed_down() >= 5,
        "{} slowed down",
        proxy.slowed_down()
    );
    assert_eq!(code, Some(3), "{p:#}");
    assert_eq!(p["sources"]["versions_read"], 41, "{p:#}");
    assert_eq!(len(&p, "problems"), 0, "{p:#}");
    assert_eq!(tenure_strs(&p, &["holder"]).len(), 41);
}

/// Every version's GET refused (a proxy answers 403 to each, the listing
/// passes): nothing is taken for read, the problem counts them all and names
/// the first five, the exit is 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_that_cannot_be_read_are_counted() {
    use crate::common::proxy::{Mode, Proxy};
    let (endpoint, b) = versioned_bucket_on(Server::Moto(Moto::Conditional), "tl-refused").await;
    write_history(&endpoint, &b, &[("holder-a", 1); 12]).await;
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port, Mode::Pass).await;
    proxy.fail_requests("GET", "/db/LEASE", 403);
    let (code, p, text) = timeline(&proxy.endpoint(), &b, &[]);
    assert_eq!(code, Some(1), "{p:#}");
    let problem = p["problems"][0].as_str().unwrap();
    assert!(
        problem.starts_with("12 version(s) of db/LEASE could not be read (version ")
            && problem.matches("; version ").count() == 4
            && problem.contains("; and 7 more)"),
        "{problem}"
    );
    assert_eq!(len(&p, "tenures"), 0, "{p:#}");
    assert!(text.contains("UNKNOWN: 12 version(s)"), "{text}");
}
