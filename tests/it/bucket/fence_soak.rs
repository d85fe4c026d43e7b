//! The fence soak (issue 11): many `leasectl bucket hold` runs on one prefix,
//! two slots taking turns — whenever one slot's holder lets go or is fenced,
//! the other slot's contender (waiting with `--wait`) takes over — while
//! random faults hit the holder: renewals answered 503, renewals hanging,
//! answers dropped, its process group stopped for 0–15 s, its wall clock
//! stepped by ±2 TTL. Every run's command appends `RUN TIMESTAMP GENERATION`
//! lines (real clock; the `LEASECTL_GENERATION` it was given) to one shared
//! log; `scripts/soak_check.py` then checks that no two runs' writes overlap
//! and that no write stamped with an older generation follows one stamped
//! with a newer generation.
//!
//! Not part of the test suite (it takes many minutes): run it with
//! `scripts/soak.sh [RUNS]` (default 200).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::hold::*;
use crate::common::proxy::{Mode, Proxy};
use crate::common::*;
use rand::Rng;

const TTL_S: u64 = 3;

#[derive(Debug, Clone, Copy)]
enum Fault {
    None,
    Fail503,
    Hang,
    DropAnswers,
    Stop(Duration),
    ClockStep(i64),
}

fn pick_fault(rng: &mut impl Rng) -> Fault {
    match rng.random_range(0..10) {
        0..=2 => Fault::None,
        3 => Fault::Fail503,
        4 => Fault::Hang,
        5 => Fault::DropAnswers,
        6 | 7 => Fault::Stop(Duration::from_millis(rng.random_range(0..15_000))),
        _ => {
            let two_ttl = 2 * TTL_S as i64;
            Fault::ClockStep(if rng.random_bool(0.5) {
                two_ttl
            } else {
                -two_ttl
            })
        }
    }
}

/// [`tagged_writer`] whose lines are `TAG TIMESTAMP GENERATION`: the
/// generation its `bucket hold` gave it (`-` when none).
fn stamped_writer(log: &Path, tag: &str, ignore_term: bool, lines: u32) -> Vec<String> {
    let trap = if ignore_term {
        "trap 'echo TERM ignored >&2' TERM; "
    } else {
        ""
    };
    let script = format!(
        "{trap}i=0; while [ $i -lt {lines} ]; do echo {tag} $(env -u LD_PRELOAD date +%s.%N) ${{LEASECTL_GENERATION:--}} >> {}; sleep 0.1; i=$((i+1)); done",
        log.display()
    );
    crate::common::hold::unpreloaded_sh(script)
}

struct Slot {
    name: &'static str,
    proxy: Proxy,
    clock_file: PathBuf,
}

/// Runs one slot: `runs` holds one after another; returns one summary line per run.
async fn slot_loop(
    slot: Slot,
    runs: usize,
    url: String,
    dir: PathBuf,
    log: PathBuf,
) -> Vec<String> {
    let mut summary = Vec::new();
    for n in 0..runs {
        let tag = format!("{}-{n}", slot.name);
        let (fault, hold_for_lines, delay_ms) = {
            let mut rng = rand::rng();
            (
                pick_fault(&mut rng),
                rng.random_range(10..60u32),
                rng.random_range(0..3000u64),
            )
        };
        slot.proxy.clear_faults();
        std::fs::write(&slot.clock_file, "+0\n").unwrap();
        let mut hold = Hold::spawn(
            &dir,
            &tag,
            &slot.proxy.endpoint(),
            &url,
            &[
                "--ttl",
                &format!("{TTL_S}s"),
                "--wait",
                "120s",
                "--grace",
                "5s",
            ],
            &stamped_writer(&log, &tag, n % 2 == 0, hold_for_lines),
            &faketime_env(&slot.clock_file),
        );
        // Wait until this run holds the lease (its first line), or ends.
        let mut held = false;
        for _ in 0..6000 {
            if std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with(&format!("{tag} ")))
            {
                held = true;
                break;
            }
            if hold.child.try_wait().unwrap().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if held {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            match fault {
                Fault::None => {}
                Fault::Fail503 => slot.proxy.fail_requests("PUT", "/LEASE", 503),
                Fault::Hang => slot.proxy.hang_requests("PUT", "/LEASE"),
                Fault::DropAnswers => slot.proxy.drop_next_answers("PUT", 2),
                Fault::Stop(d) => {
                    signal_group(hold.pgid(), libc::SIGSTOP);
                    tokio::time::sleep(d).await;
                    signal_group(hold.pgid(), libc::SIGCONT);
                }
                Fault::ClockStep(s) => {
                    std::fs::write(&slot.clock_file, format!("{s:+}\n")).unwrap();
                }
            }
        }
        let code = hold.exit_code(Duration::from_secs(180)).await;
        summary.push(format!("{tag} fault={fault:?} held={held} exit={code:?}"));
    }
    summary
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a soak of many minutes: scripts/soak.sh"]
async fn soak() {
    let runs = crate::bucket::runs_from_env("LEASECTL_SOAK_RUNS", 200);
    let out: PathBuf = std::env::var_os("LEASECTL_SOAK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("leasectl-soak"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let server = moto(Moto::Conditional);
    let b = bucket_name("soak");
    create_bucket(&sdk_client(&server.endpoint()), &b).await;
    let url = format!("s3://{b}/soak/");
    let log = out.join("writes.log");
    let mut tasks = Vec::new();
    for name in ["a", "b"] {
        let slot = Slot {
            name,
            proxy: Proxy::start(server.port, Mode::Pass).await,
            clock_file: out.join(format!("clock-{name}")),
        };
        tasks.push(tokio::spawn(slot_loop(
            slot,
            runs / 2,
            url.clone(),
            out.clone(),
            log.clone(),
        )));
    }
    let mut lines = Vec::new();
    for t in tasks {
        lines.extend(t.await.unwrap());
    }
    std::fs::write(out.join("runs.txt"), lines.join("\n") + "\n").unwrap();
    let held = lines.iter().filter(|l| l.contains("held=true")).count();
    eprintln!(
        "soak: {} runs, {held} held the lease; log {}",
        lines.len(),
        log.display()
    );
    let check = std::process::Command::new("python3")
        .arg(repo().join("scripts/soak_check.py"))
        .arg(&log)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&check.stdout));
    assert!(
        check.status.success(),
        "overlap, generation order violated or generations missing: see {}",
        out.display()
    );
    assert!(Path::new(&log).exists());
}

/// The soak's checker catches what it is there to catch: on logs with an
/// injected overlap, a stale generation written after a newer one, a run
/// under two generations, two runs under one, and writes without a
/// generation, it exits 1 naming each; an unusable log is 2; a clean one 0.
#[test]
fn the_soak_checker_catches_injected_violations() {
    let out = std::process::Command::new("python3")
        .arg(repo().join("scripts/soak_check.py"))
        .arg("--self-test")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("9 of 9 cases passed"), "{text}");
}
