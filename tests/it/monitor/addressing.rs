//! Issue 35 trip 12: the addressing shown is the one the SDK really uses.
//! `--endpoint-url http://127.0.0.1:…` without `--path-style` is addressed
//! path-style (no bucket can go in front of an IP address): the console's
//! header, `--json` and a writing command's announcement said
//! "virtual-host". Against moto, with the real binary and the real
//! connector.

use std::time::Duration;

use chrono::Utc;
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::s3::S3Options;
use leasectl::store::AddressingStyle;
use leasectl::target::{Connector, Target};
use leasectl::tui::app::{Action, App};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use crate::common::cli::{bin, record};
use crate::common::{self, Moto};

#[tokio::test(flavor = "multi_thread")]
async fn an_ip_endpoint_is_said_to_be_addressed_path_style() {
    let m = common::moto(Moto::Conditional);
    let client = common::sdk_client(&m.endpoint());
    let bucket = common::bucket_name("addressing");
    common::create_bucket(&client, &bucket).await;
    common::put_raw(&client, &bucket, "db/LEASE", record("h", 1, 60).as_bytes()).await;
    let endpoint = m.endpoint();
    assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
    let url = format!("s3://{bucket}/");

    // --json: the lease is read (so the SDK did address it path-style), and
    // the document says path.
    let mut c = bin();
    c.args(["--endpoint-url", &endpoint, "--json", "--no-pod", &url]);
    let out =
        tokio::task::spawn_blocking(move || common::run_with_timeout(c, Duration::from_secs(60)))
            .await
            .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["targets"][0];
    assert!(t["error"].is_null(), "{doc:#}");
    assert_eq!(t["prefixes"][0]["state"], "fresh", "{doc:#}");
    assert_eq!(t["addressing_style"], "path", "{doc:#}");

    // A writing command's announcement on stderr.
    let mut c = bin();
    c.args([
        "--endpoint-url",
        &endpoint,
        "bucket",
        "hold",
        "--ttl",
        "3s",
        &format!("{url}new/"),
        "--",
        "true",
    ]);
    let out =
        tokio::task::spawn_blocking(move || common::run_with_timeout(c, Duration::from_secs(60)))
            .await
            .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("at {endpoint} (region us-east-1, path-style)")),
        "{err}"
    );
    assert!(!err.contains("virtual-host"), "{err}");

    // The console's header, from the connector leasectl uses.
    let connector = Connector::new(S3Options {
        endpoint_url: Some(endpoint.clone()),
        region: Some("us-east-1".into()),
        ..S3Options::default()
    });
    let target: Target = url.parse().unwrap();
    let shown = connector.endpoint(&target).await;
    assert_eq!(shown, format!("{endpoint} (region us-east-1, path-style)"));
    let store = connector.open(&target).await.unwrap();
    assert_eq!(
        store.endpoint_info().addressing_style,
        Some(AddressingStyle::Path)
    );
    let open = vec![OpenTarget {
        target: target.clone(),
        endpoint: shown.clone(),
        store,
    }];
    let clock = leasectl::clock::SystemClock::shared();
    let snap = snapshot::gather(&open, &GatherOptions::default(), &clock).await;
    let mut app = App::new(
        vec![url.parse().unwrap()],
        false,
        Duration::from_secs(5),
        Utc::now(),
    );
    app.update(Action::Snapshot(Box::new(snap)));
    let mut term = Terminal::new(TestBackend::new(200, 20)).unwrap();
    term.draw(|f| leasectl::tui::ui::render(&app, f)).unwrap();
    let buf = term.backend().buffer().clone();
    let head: String = (0..2)
        .flat_map(|y| (0..buf.area.width).map(move |x| (x, y)))
        .map(|(x, y)| buf[(x, y)].symbol().to_owned())
        .collect();
    assert!(head.contains("path-style"), "{head}");
    assert!(!head.contains("virtual-host"), "{head}");

    // A name that can be a host label at a host name stays virtual-host.
    assert_eq!(
        leasectl::store::s3::addressing_used(Some("http://localhost:9000"), "bkt", false),
        AddressingStyle::VirtualHost
    );
    assert_eq!(
        leasectl::store::s3::addressing_used(Some("https://s3.example"), "a.b.c", false),
        AddressingStyle::Path
    );
    assert_eq!(
        leasectl::store::s3::addressing_used(None, "My_Bucket", false),
        AddressingStyle::Path
    );
}
