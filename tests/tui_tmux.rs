//! End to end in a real terminal (tmux): the console starts on a local store,
//! shows the rows, quits with `q` and leaves the shell usable.

mod common;

use std::time::Duration;

use common::tmux::Tmux;

#[test]
fn console_shows_rows_and_quits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let now = chrono::Utc::now();
    for (p, age, ttl) in [("alpha", 2, 30), ("beta", 300, 30)] {
        let d = dir.path().join(p);
        std::fs::create_dir_all(&d).unwrap();
        let t = (now - chrono::Duration::seconds(age)).to_rfc3339();
        std::fs::write(
            d.join("LEASE"),
            format!(r#"{{"instance_id":"holder-{p}","acquired_at":"{t}","renewed_at":"{t}","ttl_s":{ttl}}}"#),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.path().join("gamma")).unwrap();

    let tmux = Tmux::start(120, 30);
    tmux.type_line(&format!(
        "{} file://{}/ ; echo EXIT=$?",
        env!("CARGO_BIN_EXE_leasectl"),
        dir.path().display()
    ));
    let screen = tmux.wait_for(Duration::from_secs(15), "the lease rows", |s| {
        s.contains("holder-alpha") && s.contains("stale") && s.contains("absent")
    });
    assert!(
        screen.contains("alpha/") && screen.contains("fresh"),
        "{screen}"
    );
    tmux.send(&["Down"]);
    tmux.send(&["q"]);
    let screen = tmux.wait_for(Duration::from_secs(10), "the console to exit", |s| {
        s.contains("EXIT=0")
    });
    assert!(
        !screen.contains("PREFIX"),
        "alternate screen left behind:\n{screen}"
    );
    // The terminal is sane again: the shell echoes and runs a command.
    tmux.type_line("echo sane-$((40+2))");
    tmux.wait_for(Duration::from_secs(5), "the shell to answer", |s| {
        s.contains("sane-42")
    });
}
