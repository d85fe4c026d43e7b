use super::config::profile_wants_path_style_in;
use super::*;
use crate::store::Unlisted;

#[tokio::test]
async fn a_profile_can_ask_for_path_style() {
    use aws_types::os_shim_internal::{Env, Fs};
    let config =
        "[profile minio]\ns3 =\n  addressing_style = path\n\n[profile aws]\nregion = eu-west-1\n";
    let fs = Fs::from_slice(&[("/home/u/.aws/config", config)]);
    let env = Env::from_slice(&[("HOME", "/home/u")]);
    assert!(profile_wants_path_style_in(&fs, &env, Some("minio")).await);
    assert!(!profile_wants_path_style_in(&fs, &env, Some("aws")).await);
    assert!(!profile_wants_path_style_in(&fs, &env, None).await);
}

#[test]
fn endpoint_credentials_are_redacted() {
    let (shown, secrets) = redact_url("http://user:supersecret@127.0.0.1:9000/?token=abcdef");
    assert_eq!(shown, "http://***:***@127.0.0.1:9000/?***");
    assert!(!shown.contains("supersecret") && !shown.contains("abcdef"));
    assert_eq!(
        scrub(
            "GET http://user:supersecret@h/?token=abcdef failed".into(),
            &secrets
        ),
        "GET http://***:***@h/?*** failed"
    );
    assert_eq!(
        redact_url("http://127.0.0.1:9000").0,
        "http://127.0.0.1:9000"
    );
}

#[test]
fn endpoints_that_are_not_plain_urls_are_redacted_too() {
    for (raw, secret) in [
        ("minio.internal:secretpass@x", "secretpass"),
        ("https://h:9000#secretfrag", "secretfrag"),
        (
            "https://h:9000/?X-Amz-Security-Token=secrettoken",
            "secrettoken",
        ),
        ("http://AKIA:abc@h:9000/", "abc"),
    ] {
        let (shown, secrets) = redact_url(raw);
        assert!(!shown.contains(secret), "{raw} → {shown}");
        assert!(shown.contains("***"), "{raw} → {shown}");
        let msg = scrub(format!("failed for {raw}"), &secrets);
        assert!(!msg.contains(secret), "{msg}");
    }
    assert_eq!(redact_url("minio.internal:secretpass@x").0, "***:***@x");
    assert_eq!(
        redact_url("https://h:9000#secretfrag").0,
        "https://h:9000#***"
    );
}

#[test]
fn dns_failures_name_the_host_asked_for() {
    let dns = "dispatch failure: io error: dns error: failed to lookup address information";
    // AWS's own endpoint: its real host, no --path-style hint.
    let m = classify_transport(
        dns,
        "AWS S3 (us-east-1)",
        "bkt.s3.us-east-1.amazonaws.com",
        false,
        false,
    );
    assert!(
        m.contains("cannot resolve the host name bkt.s3.us-east-1.amazonaws.com"),
        "{m}"
    );
    assert!(
        !m.contains("--path-style") && !m.contains("AWS S3 ("),
        "{m}"
    );
    // A custom endpoint with virtual hosts: the hint.
    let m = classify_transport(
        dns,
        "http://minio.internal:9000",
        "bkt.minio.internal",
        true,
        false,
    );
    assert!(
        m.contains("bkt.minio.internal") && m.contains("--path-style"),
        "{m}"
    );
}

/// A service that sends an answer's headers and part of its body, then
/// nothing: `get` gives up at the request deadline with a timeout (the
/// SDK's stalled-stream watch, now off, waited 20 s).
#[tokio::test]
async fn a_body_that_stalls_is_a_timeout_at_the_deadline() {
    use aws_sdk_s3::config::{Credentials, Region, SharedCredentialsProvider};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed before its request ended");
            seen.extend_from_slice(&buf[..n]);
        }
        conn.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"abc\"\r\n\
              Content-Type: application/json\r\n\r\n{\"instance_id\":",
        )
        .await
        .unwrap();
        conn.flush().await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(conn);
    });
    let config = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDTEST",
            "test-secret",
            None,
            None,
            "test",
        )))
        .build();
    let opts = S3Options {
        path_style: true,
        request_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let store = S3Store::with_config(&config, "bkt", &opts);
    let t0 = std::time::Instant::now();
    let got = store.get("p/LEASE", None).await;
    let took = t0.elapsed();
    server.abort();
    assert!(
        matches!(&got, Err(StoreError::Timeout(d, _)) if *d == Duration::from_secs(1)),
        "{got:?}"
    );
    assert!(took < Duration::from_secs(5), "gave up after {took:?}");
    let msg = got.unwrap_err().to_string();
    assert!(msg.contains("reading the body of p/LEASE"), "{msg}");
}

#[test]
fn listed_keys_are_url_decoded() {
    assert_eq!(decode_key("esc%1Bx/").unwrap(), "esc\u{1b}x/");
    assert_eq!(decode_key("a+b%2Bc/").unwrap(), "a b+c/");
    // Bytes that are not UTF-8 are given back as bytes, never as U+FFFD
    // (a key that would name another object).
    assert_eq!(decode_key("bad%FFutf8/").unwrap_err(), b"bad\xffutf8/");
    let u = Unlisted::not_utf8(b"bad\xffutf8/", "key prefix");
    assert_eq!(u.prefix, "bad\u{fffd}utf8/");
    assert!(
        u.problem.contains("(0xFF at byte 3; shown as U+FFFD)"),
        "{}",
        u.problem
    );
    let u = Unlisted::not_utf8(b"a\xc0\x80b\xff/", "directory");
    assert!(
        u.problem.contains("(0xC0 0x80 at byte 1, 0xFF at byte 4;"),
        "{}",
        u.problem
    );
}
