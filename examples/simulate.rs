//! The deterministic simulator's runner (issue 32): `scripts/simulate.sh`
//! runs it. Build with `--features sim`.
//!
//! ```text
//! simulate [--seeds N] [--first S] [--seed S] [--defect NAME] [--history]
//!          [--duration SECONDS] [--offset-ttl-fraction F] [--ttl SECONDS] [--store NAME]
//!          [--best-effort] [--quiet]
//! ```
//!
//! Runs seeds `first .. first + N` (or the one `--seed`), checks every
//! property after every step, prints each failing seed with the command that
//! replays it, and ends with `N seeds, L lifetimes, W writes, V violations`.
//! Exit status 0 when V is 0, 1 otherwise, 2 on a usage error.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use leasectl::sim::{defect, run_seed, OffsetScore, Options, Variant};

fn usage(msg: &str) -> ExitCode {
    eprintln!("simulate: {msg}");
    eprintln!(
        "usage: simulate [--seeds N] [--first S] [--seed S] [--defect NAME] [--history] \
         [--duration SECONDS] [--offset-ttl-fraction F] [--ttl SECONDS] [--store NAME] [--best-effort] [--quiet]"
    );
    eprintln!(
        "defects: {}",
        defect::ALL
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // The engine's log, on stderr, when asked for (`LEASECTL_LOG=leasectl=info`).
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("LEASECTL_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let mut seeds = 100u64;
    let mut first = 0u64;
    let mut one: Option<u64> = None;
    let mut defect_name: Option<String> = None;
    let mut history = false;
    let mut quiet = false;
    let mut duration: Option<u64> = None;
    let mut fraction: Option<f64> = None;
    let mut ttl: Option<u64> = None;
    let mut store: Option<Variant> = None;
    let mut best_effort = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let parsed = match a.as_str() {
            "--seeds" => value("--seeds").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--seeds {v}: {e}"))
                    .map(|v| seeds = v)
            }),
            "--first" => value("--first").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--first {v}: {e}"))
                    .map(|v| first = v)
            }),
            "--seed" => value("--seed").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--seed {v}: {e}"))
                    .map(|v| one = Some(v))
            }),
            "--duration" => value("--duration").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--duration {v}: {e}"))
                    .map(|v| duration = Some(v))
            }),
            "--offset-ttl-fraction" => value("--offset-ttl-fraction").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--offset-ttl-fraction {v}: {e}"))
                    .map(|v| fraction = Some(v))
            }),
            "--ttl" => value("--ttl").and_then(|v| {
                v.parse()
                    .map_err(|e| format!("--ttl {v}: {e}"))
                    .map(|v| ttl = Some(v))
            }),
            "--defect" => value("--defect").map(|v| defect_name = Some(v)),
            "--store" => value("--store").and_then(|v| {
                Variant::by_name(&v)
                    .ok_or_else(|| {
                        format!(
                            "--store {v}: one of {}",
                            Variant::NAMED.map(|v| v.as_str()).join(", ")
                        )
                    })
                    .map(|v| store = Some(v))
            }),
            "--history" => {
                history = true;
                Ok(())
            }
            "--best-effort" => {
                best_effort = true;
                Ok(())
            }
            "--quiet" => {
                quiet = true;
                Ok(())
            }
            other => Err(format!("unknown argument {other}")),
        };
        if let Err(e) = parsed {
            return usage(&e);
        }
    }
    let defect = match defect_name.as_deref() {
        None | Some("none") => None,
        Some(n) => match defect::by_name(n) {
            Some(d) => Some(d),
            None => return usage(&format!("no defect named {n}")),
        },
    };
    let list: Vec<u64> = match one {
        Some(s) => vec![s],
        None => (first..first.saturating_add(seeds)).collect(),
    };
    let started = Instant::now();
    let (mut lifetimes, mut writes, mut violations) = (0u64, 0u64, 0u64);
    let mut lies = 0u64;
    let (mut lost_updates, mut overlaps) = (0u64, Vec::<u64>::new());
    let mut failing = 0u64;
    let mut by_property: std::collections::BTreeMap<String, u64> = Default::default();
    let mut offsets = OffsetScore::default();
    for &seed in &list {
        let mut opts = Options::new(seed);
        opts.defect = defect;
        if let Some(d) = duration {
            opts.duration_s = d;
        }
        if let Some(f) = fraction {
            opts.max_offset_ttl_fraction = f;
        }
        opts.ttl_s = ttl;
        opts.store = store;
        opts.best_effort = best_effort;
        let mut out = run_seed(opts);
        offsets.merge(std::mem::take(&mut out.offset));
        lies += out.lies;
        lost_updates += out.lost_updates;
        overlaps.extend(out.overlaps_ms.iter().copied());
        lifetimes += out.lifetimes;
        writes += out.writes;
        violations += out.violations.len() as u64;
        // A broken store's findings are told apart from the clocks': the
        // envelope's cells are about the clocks.
        let variant = match out.variant {
            Some(v) if v != Variant::Healthy => format!(" ({} store)", v.as_str()),
            _ => String::new(),
        };
        for v in &out.violations {
            *by_property
                .entry(format!("{:?}{variant}", v.property))
                .or_default() += 1;
        }
        let mut stdout = std::io::stdout().lock();
        if history {
            let _ = stdout.write_all(out.history.as_bytes());
        }
        if !out.violations.is_empty() {
            failing += 1;
            if !quiet || failing <= 3 {
                let v = &out.violations[0];
                let _ = writeln!(
                    stdout,
                    "seed {seed}: {} violation(s), first {:?} at {}.{:03} s: {}",
                    out.violations.len(),
                    v.property,
                    v.at_ms / 1000,
                    v.at_ms % 1000,
                    v.what
                );
                let mut replay = format!("scripts/simulate.sh --seed {seed}");
                if let Some(n) = defect_name.as_deref() {
                    replay.push_str(&format!(" --defect {n}"));
                }
                if let Some(d) = duration {
                    replay.push_str(&format!(" --duration {d}"));
                }
                if let Some(f) = fraction {
                    replay.push_str(&format!(" --offset-ttl-fraction {f}"));
                }
                if let Some(t) = ttl {
                    replay.push_str(&format!(" --ttl {t}"));
                }
                if let Some(v) = store {
                    replay.push_str(&format!(" --store {}", v.as_str()));
                }
                if best_effort {
                    replay.push_str(" --best-effort");
                }
                let _ = writeln!(stdout, "  replay: {replay} --history");
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{lies} writes the store carried out though their precondition did not hold");
    if best_effort {
        report_best_effort(
            lost_updates,
            &mut overlaps,
            list.len() as u64 * duration.unwrap_or(240),
            lifetimes,
        );
    }
    eprintln!(
        "{:.1} s of one core, {:.0} lifetimes per minute, {failing} failing seed(s), violations by property: {}",
        secs,
        lifetimes as f64 / secs.max(1e-9) * 60.0,
        if by_property.is_empty() {
            "none".to_owned()
        } else {
            by_property
                .iter()
                .map(|(p, n)| format!("{p} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    eprintln!("{}", offset_line(&offsets));
    println!(
        "{} seeds, {lifetimes} lifetimes, {writes} writes, {violations} violations",
        list.len()
    );
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What best-effort exclusion cost: lost updates (a holder's record replaced
/// while its command ran), how many of them let two holders write, per
/// simulated hour (`simulated_s` seconds in all) and per thousand lifetimes,
/// and how long the second writer overlapped the first (from the
/// replacement to the loser's last write).
fn report_best_effort(lost: u64, overlaps: &mut [u64], simulated_s: u64, lifetimes: u64) {
    overlaps.sort_unstable();
    let hours = simulated_s as f64 / 3600.0;
    let q = |p: f64| {
        overlaps
            .get(((overlaps.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    eprintln!(
        "best-effort: {lost} lost updates ({:.1} per simulated hour, {:.1} per 1000 lifetimes); \
         {} let two holders write ({:.1} per hour); overlap median {} ms, 90th percentile {} ms, max {} ms",
        lost as f64 / hours.max(1e-9),
        lost as f64 * 1000.0 / (lifetimes.max(1) as f64),
        overlaps.len(),
        overlaps.len() as f64 / hours.max(1e-9),
        q(0.5),
        q(0.9),
        overlaps.last().copied().unwrap_or(0)
    );
}

/// The estimates of the service's clock against the truth, over every
/// reading the engine made: for the lease's holder (its keep-alive's checks
/// and aims) and for the others (contenders' and takeovers' checks), the
/// error's median, 99th percentile and worst, and the bound each claimed
/// (±); then how many bounds missed the truth (0 if the estimator is right).
fn offset_line(o: &OffsetScore) -> String {
    fn ms(mut v: Vec<u32>) -> String {
        if v.is_empty() {
            return "none".to_owned();
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize] as f64 / 1e3;
        format!(
            "median {:.1} ms, p99 {:.1} ms, worst {:.1} ms",
            at(0.5),
            at(0.99),
            at(1.0)
        )
    }
    let part = |v: &[u32], holding: bool| -> Vec<u32> {
        v.iter()
            .zip(&o.holding)
            .filter(|(_, &h)| h == holding)
            .map(|(&x, _)| x)
            .collect()
    };
    let side = |holding: bool| {
        format!(
            "{} readings, |estimate - truth| {}; bound ± {}",
            part(&o.error_us, holding).len(),
            ms(part(&o.error_us, holding)),
            ms(part(&o.bound_us, holding))
        )
    };
    format!(
        "offset estimate, holders: {}\noffset estimate, others: {}\noffset estimate: truth outside the bound in {} of {} readings",
        side(true),
        side(false),
        o.outside,
        o.error_us.len()
    )
}
