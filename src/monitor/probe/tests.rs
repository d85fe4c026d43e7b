//! The prober on real local stores: the families of a probed target, its
//! state kept between probes, refusals that read nothing.

use super::*;
use crate::clock::SystemClock;
use crate::store::s3::S3Options;

fn lease(holder: &str, age_s: i64) -> String {
    lease_ttl(holder, age_s, 30)
}

fn lease_ttl(holder: &str, age_s: i64, ttl_s: u64) -> String {
    let t = chrono::Utc::now() - chrono::Duration::seconds(age_s);
    serde_json::json!({
        "instance_id": holder,
        "acquired_at": t.to_rfc3339(),
        "renewed_at": t.to_rfc3339(),
        "ttl_s": ttl_s,
    })
    .to_string()
}

fn write(root: &std::path::Path, prefix: &str, body: &str) {
    std::fs::create_dir_all(root.join(prefix)).unwrap();
    std::fs::write(root.join(prefix).join("LEASE"), body).unwrap();
}

fn url(dir: &std::path::Path) -> String {
    format!("file://{}/", dir.display())
}

fn prober(allow: &[&str]) -> Prober {
    let module = ProbeModule {
        stores: Arc::new(ConnectorStores::new(Connector::new(S3Options::default()))),
        gather: GatherOptions::default(),
        best_effort: false,
        allow: AllowList::new(allow.iter().map(|a| a.parse().unwrap()).collect()),
    };
    Prober::new(
        BTreeMap::from([("local".to_owned(), module)]),
        ProbeOptions {
            bounds: Bounds {
                max_targets: 100,
                max_bytes: 1 << 20,
                forget_after: Duration::from_secs(600),
            },
            timeout_offset: Duration::from_millis(500),
            max_timeout: Duration::from_secs(10),
        },
        SystemClock::shared(),
        None,
    )
}

fn query(target: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("target", target)
        .append_pair("module", "local")
        .finish()
}

async fn text(p: &Prober, q: &str, timeout: Option<&str>) -> Result<String, String> {
    match p.answer(q, timeout).await {
        ProbeAnswer::Metrics(e) => {
            let mut s = String::new();
            e.write_to(&mut s).unwrap();
            Ok(s)
        }
        ProbeAnswer::Refused(why) => Err(why),
    }
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[tokio::test]
async fn a_probe_answers_its_targets_families_and_its_own() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "db", &lease("h1", 1));
    write(dir.path(), "logs", &lease("h2", 90));
    let t = url(dir.path());
    let p = prober(&[&t]);
    let out = text(&p, &query(&t), Some("2")).await.unwrap();
    for line in [
        format!("leasectl_lease_state{{target=\"{t}\",prefix=\"db/\",state=\"fresh\"}} 1"),
        format!("leasectl_lease_state{{target=\"{t}\",prefix=\"logs/\",state=\"stale\"}} 1"),
        format!("leasectl_target_up{{target=\"{t}\"}} 1"),
        "leasectl_probe_success 1".to_owned(),
    ] {
        assert!(has(&out, &line), "{line} in\n{out}");
    }
    assert!(out.contains("\nleasectl_probe_duration_seconds "), "{out}");
    assert!(
        out.contains("# TYPE leasectl_lease_holder_changes counter"),
        "{out}"
    );
    assert!(out.ends_with("# EOF\n"), "{out}");
    // The process's own families are on /metrics, not in a probe.
    for not in [
        "leasectl_http_requests",
        "leasectl_pod_",
        "leasectl_audit_log_ok",
    ] {
        assert!(!out.contains(not), "{not} in\n{out}");
    }
    assert_eq!(p.stats().targets, 1);
}

/// A fresh lease is read again when it could turn stale (reading by
/// need): a 2 s lease, replaced by another holder's, is read again at the
/// first probe after its expiry, and the change counted.
#[tokio::test]
async fn state_between_probes_counts_a_holder_change() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "db", &lease_ttl("h1", 0, 2));
    let t = url(dir.path());
    let p = prober(&[&t]);
    let changed = format!(
        "leasectl_lease_holder_changes_total{{target=\"{t}\",prefix=\"db/\",how=\"after_expiry\"}} 1"
    );
    let first = text(&p, &query(&t), None).await.unwrap();
    assert!(!has(&first, &changed), "{first}");
    write(dir.path(), "db", &lease("h2", 0));
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let second = text(&p, &query(&t), None).await.unwrap();
    assert!(has(&second, &changed), "{second}");
    assert!(has(&second, "leasectl_gathers_total 2"), "{second}");
    assert!(has(&second, "leasectl_store_requests_total 4"), "{second}");
}

#[tokio::test]
async fn a_target_that_cannot_be_read_fails_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let t = url(&gone);
    let p = prober(&[&url(dir.path())]);
    let out = text(&p, &query(&t), None).await.unwrap();
    assert!(has(&out, "leasectl_probe_success 0"), "{out}");
    assert!(
        has(&out, &format!("leasectl_target_up{{target=\"{t}\"}} 0")),
        "{out}"
    );
    assert!(!out.contains("leasectl_lease_state{"), "{out}");
}

#[tokio::test]
async fn refused_requests_read_nothing_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "db", &lease("h1", 1));
    let inside = dir.path().join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    let p = prober(&[&url(&inside), "s3://fleet-a/tenants/"]);
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        ("module=local".into(), None, "no `target`"),
        (
            "target=s3%3A%2F%2Ffleet-a%2Ftenants%2F&module=prod".into(),
            None,
            "no module `prod`",
        ),
        (query(&url(dir.path())), None, "may not read"),
        (query("s3://fleet-a/tenants-old/"), None, "may not read"),
        (query("s3://fleet-a/"), None, "may not read"),
        (
            query("s3://AKIAEXAMPLE:s3cr3t@fleet-a/tenants/"),
            None,
            "cannot carry credentials",
        ),
        (query("s3://fleet-a/tenants/?x=1"), None, "bad TARGET"),
        (query("http://fleet-a/tenants/"), None, "bad TARGET"),
        (query(&url(&inside)), Some("soon"), "not a positive number"),
    ];
    for (q, timeout, want) in cases {
        let why = text(&p, &q, timeout).await.unwrap_err();
        assert!(why.contains(want), "{q}: {why}");
        assert!(!why.contains("s3cr3t"), "{why}");
    }
    assert_eq!(p.stats().targets, 0);
    // Allowed: answered.
    assert!(text(&p, &query(&url(&inside)), None).await.is_ok());
}
