//! The typed confirmation of `leasectl takeover` in a real terminal (tmux):
//! the question names what to type — the prefix, as the README's tutorial
//! says (`db1/`), or the URL of a TARGET that is the lease's own directory —
//! and typing it takes the lease over (issue 45 §8: it asked for the "prefix
//! URL" while the README said to type `db1/`).

use std::time::Duration;

use crate::common::tmux::Tmux;
use crate::common::{bin_path, bucket_name, create_bucket, file_url, moto, put_raw, record};
use crate::common::{sdk_client, write_lease, Moto};

/// Runs `takeover URL` in tmux (`env` before it: credentials), checks the
/// question asks for `expect`, types `answer`, and returns the takeover's exit
/// status and what it showed.
fn confirm(env: &str, url: &str, log: &str, expect: &str, answer: &str) -> (i32, String) {
    let tmux = Tmux::start(200, 30);
    let run = tmux.run(&format!(
        "env -u LEASECTL_LOG {env} {} takeover {url} --reason confirm-test --then release --audit-log {log}",
        bin_path(),
    ));
    let screen = tmux.wait_shown(&run, Duration::from_secs(30), "the question", |s| {
        s.contains("to confirm:")
    });
    let question = screen
        .lines()
        .find(|l| l.contains("to confirm:"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        question.ends_with(&format!("Type the {expect} to confirm:")),
        "the question names what to type ({expect}):\n{screen}"
    );
    tmux.answer(&run, answer);
    tmux.wait_exit(&run, Duration::from_secs(30))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_names_the_prefix_to_type_and_typing_it_confirms() {
    let endpoint = moto(Moto::Conditional).endpoint();
    let bucket = bucket_name("confirm");
    let client = sdk_client(&endpoint);
    create_bucket(&client, &bucket).await;
    let stale = record("gone-holder", 100, 30);
    put_raw(&client, &bucket, "db1/LEASE", stale.as_bytes()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let env =
        "AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing-secret AWS_REGION=us-east-1 \
               LEASECTL_CONFIG=/nonexistent/leasectl-tests/config.toml";
    let url = format!("--endpoint-url {endpoint} --path-style s3://{bucket}/db1/");
    let (code, screen) = tokio::task::spawn_blocking(move || {
        confirm(env, &url, log.to_str().unwrap(), "prefix (db1/)", "db1/")
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("taken: "), "{screen}");

    // A TARGET that is the lease's own directory: its URL is asked for.
    let dir = tempfile::tempdir().unwrap();
    write_lease(dir.path(), "db7", &record("gone-holder", 100, 30));
    let url = format!("{}db7/", file_url(dir.path()));
    let log = dir.path().join("audit.jsonl");
    let (code, screen) = tokio::task::spawn_blocking(move || {
        confirm(
            "",
            &url,
            log.to_str().unwrap(),
            &format!("URL ({url})"),
            &url,
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{screen}");
}
