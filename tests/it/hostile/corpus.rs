//! A seeded corpus of hostile LEASE bodies and prefix names, run through the
//! `--json` snapshot and the console (TestBackend): no panic, no hang, the
//! right state for every case, and no raw control, format or invisible
//! character (the one rule of `leasectl::text::is_unsafe_char`) in any output.
//!
//! Classes: random bytes, hostile holder ids, hostile unknown fields, deep
//! nesting, bad TTLs, hostile timestamps, invalid UTF-8 in a string, the
//! 64 KiB edge, BOM/NUL/truncation, empty ids and non-objects, ids that
//! show nothing (combining marks alone, blanks, invisible characters), keys
//! given twice — and prefix directories whose names are not UTF-8, each of
//! which must be an error naming its bytes, never dropped.
//!
//! The generator is below and seeded, so a failure is reproducible. CI runs
//! the default slice (520 cases, seed 14). A longer run:
//!
//! ```sh
//! LEASECTL_CORPUS_CASES=20000 LEASECTL_CORPUS_SEED=7 \
//!   cargo test --release --test hostile_corpus -- --nocapture
//! ```

use std::process::Command;
use std::time::Duration;

use crate::common::*;
use chrono::Utc;
use leasectl::clock::{ManualClock, SharedClock};
use leasectl::snapshot::{self, GatherOptions, OpenTarget};
use leasectl::store::local::LocalStore;
use leasectl::store::MAX_BODY_BYTES;
use leasectl::text::is_unsafe_char;
use leasectl::tui::app::{Action, App};
use leasectl::tui::ui::render;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::Value;

/// The state a case must be judged as.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Fresh,
    Suspect,
    Malformed,
}

impl Want {
    fn as_str(self) -> &'static str {
        match self {
            Want::Fresh => "fresh",
            Want::Suspect => "suspect",
            Want::Malformed => "malformed",
        }
    }
}

/// One generated case: a prefix directory name and its LEASE body.
struct Case {
    name: String,
    body: Vec<u8>,
    want: Want,
}

/// Characters at the edges of the Unicode categories that matter: C0, DEL,
/// C1, format (Cf: bidi, zero-width, soft hyphen, tags, Egyptian and musical
/// format controls), separators, odd spaces, fillers, variation selectors,
/// private use, noncharacters, unassigned — and harmless neighbours (letters
/// of several scripts, combining marks, emoji) that must pass through.
const EDGES: &[char] = &[
    '\0',
    '\u{1}',
    '\u{7}',
    '\u{8}',
    '\t',
    '\n',
    '\u{b}',
    '\u{c}',
    '\r',
    '\u{1b}',
    '\u{1f}',
    '\u{7f}',
    '\u{80}',
    '\u{85}',
    '\u{9b}',
    '\u{9f}',
    '\u{a0}',
    '\u{ad}',
    '\u{34f}',
    '\u{61c}',
    '\u{115f}',
    '\u{1160}',
    '\u{17b4}',
    '\u{180e}',
    '\u{2000}',
    '\u{200a}',
    '\u{200b}',
    '\u{200c}',
    '\u{200d}',
    '\u{200e}',
    '\u{200f}',
    '\u{2028}',
    '\u{2029}',
    '\u{202a}',
    '\u{202e}',
    '\u{202f}',
    '\u{205f}',
    '\u{2060}',
    '\u{2064}',
    '\u{2066}',
    '\u{2069}',
    '\u{206f}',
    '\u{3000}',
    '\u{3164}',
    '\u{e000}',
    '\u{f8ff}',
    '\u{fe00}',
    '\u{fe0f}',
    '\u{feff}',
    '\u{ffa0}',
    '\u{fff9}',
    '\u{fffb}',
    '\u{fffe}',
    '\u{ffff}',
    '\u{13430}',
    '\u{1bca0}',
    '\u{1d173}',
    '\u{e0001}',
    '\u{e0041}',
    '\u{e007f}',
    '\u{e0100}',
    '\u{f0000}',
    '\u{10fffd}',
    '\u{10ffff}',
    '\\',
    '"',
    '\'',
    '%',
    '#',
    '?',
    ' ',
    'a',
    'Z',
    'é',
    'ß',
    'Ж',
    'א',
    'ع',
    '中',
    '\u{301}',
    '\u{20dd}',
    '\u{2800}',
    '🙂',
    '\u{fffd}',
];

/// Characters that show nothing once escaped ones are set aside, and that
/// leave a combining mark after them nothing to draw on: an id made only of
/// these looks empty (issue 23 item 17).
const INVISIBLE: &[char] = &[
    '\u{301}',
    '\u{300}',
    '\u{20dd}',
    '\u{2800}',
    '\u{200b}',
    '\u{3164}',
    '\u{115f}',
    '\u{a0}',
    '\u{3000}',
    '\u{1b}',
    '\u{7f}',
    '\u{feff}',
    '\u{fe0f}',
    '\u{34f}',
    '\u{e0041}',
    '\n',
];

fn hostile_char(rng: &mut StdRng) -> char {
    if rng.random_bool(0.7) {
        EDGES[rng.random_range(0..EDGES.len())]
    } else {
        // Anywhere in the code space (surrogates are not chars: retry).
        loop {
            if let Some(c) = char::from_u32(rng.random_range(0..0x11_0000)) {
                return c;
            }
        }
    }
}

fn hostile_string(rng: &mut StdRng, max: usize) -> String {
    let n = rng.random_range(1..=max);
    (0..n).map(|_| hostile_char(rng)).collect()
}

/// Directory names that are not UTF-8 (hostile names with one invalid
/// byte put in at a character boundary), with that byte and its offset.
fn bad_names(seed: u64, n: usize) -> Vec<(Vec<u8>, u8, usize)> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xbad);
    (0..n)
        .map(|i| {
            let name = hostile_name(&mut rng, i);
            let bounds: Vec<usize> = (0..=name.len())
                .filter(|b| name.is_char_boundary(*b))
                .collect();
            let at = bounds[rng.random_range(0..bounds.len())];
            let byte = [0xff, 0xfe, 0xc0, 0x80, 0xed, 0xf5][rng.random_range(0..6)];
            let mut raw = name.as_bytes()[..at].to_vec();
            raw.push(byte);
            raw.extend_from_slice(&name.as_bytes()[at..]);
            (raw, byte, at)
        })
        .collect()
}

/// A directory name: hostile, but one the filesystem takes (no `/` or NUL,
/// at most 255 bytes, not `.`/`..`), unique by its index, and not one of the
/// store's hidden internal names.
fn hostile_name(rng: &mut StdRng, i: usize) -> String {
    let mut s: String = hostile_string(rng, 12)
        .chars()
        .filter(|c| *c != '/' && *c != '\0')
        .collect();
    while s.len() > 200 {
        s.pop();
    }
    format!("{s}-{i}")
}

fn stamp(offset_s: i64) -> String {
    (Utc::now() + chrono::Duration::seconds(offset_s)).to_rfc3339()
}

/// A record with these field values as JSON text (already encoded).
fn record_json(id: &str, renewed: &str, ttl: &str) -> String {
    format!(
        r#"{{"instance_id":{id},"acquired_at":"{a}","renewed_at":{renewed},"ttl_s":{ttl}}}"#,
        a = stamp(-60)
    )
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// The seeded generator: case `i` of seed `seed`.
fn generate(seed: u64, n: usize) -> Vec<Case> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let name = hostile_name(&mut rng, i);
        let (body, want): (Vec<u8>, Want) = match i % 14 {
            // Random bytes (never a record).
            0 => {
                let len = rng.random_range(0..300);
                (
                    (0..len).map(|_| rng.random::<u8>()).collect(),
                    Want::Malformed,
                )
            }
            // A valid record whose holder id is hostile text with something
            // visible in it (an id that shows nothing is class 12).
            1 | 2 => {
                let mut id: Vec<char> = hostile_string(&mut rng, 40).chars().collect();
                let at = rng.random_range(0..=id.len());
                id.insert(at, 'h');
                let id: String = id.into_iter().collect();
                (
                    record_json(&js(&id), &js(&stamp(0)), "30").into_bytes(),
                    Want::Fresh,
                )
            }
            // Unknown fields with hostile keys and values: ignored.
            3 => {
                let mut v: serde_json::Map<String, Value> =
                    serde_json::from_str(&record_json(&js("holder"), &js(&stamp(0)), "30"))
                        .unwrap();
                for _ in 0..rng.random_range(1..5) {
                    v.insert(
                        hostile_string(&mut rng, 10),
                        Value::String(hostile_string(&mut rng, 30)),
                    );
                }
                (serde_json::to_vec(&v).unwrap(), Want::Fresh)
            }
            // Deep nesting, inside and outside a field.
            4 => {
                let depth = [10, 127, 128, 129, 1000, 30_000][rng.random_range(0..6)];
                let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                let body = if rng.random_bool(0.5) {
                    deep
                } else {
                    record_json(&deep, &js(&stamp(0)), "30")
                };
                (body.into_bytes(), Want::Malformed)
            }
            // Huge, negative, fractional and non-numeric TTLs.
            5 => {
                let ttl = [
                    "1e400",
                    "18446744073709551616",
                    "-1",
                    "0",
                    "1.5",
                    "-0",
                    "1e2",
                    "\"30\"",
                    "null",
                    "99999999999999999999999999999999999999",
                ][rng.random_range(0..10)];
                (
                    record_json(&js("h"), &js(&stamp(0)), ttl).into_bytes(),
                    Want::Malformed,
                )
            }
            // A TTL over an hour: suspect, not malformed.
            6 => (
                record_json(&js("h"), &js(&stamp(0)), "3601").into_bytes(),
                Want::Suspect,
            ),
            // A hostile timestamp.
            7 => (
                record_json(&js("h"), &js(&hostile_string(&mut rng, 30)), "30").into_bytes(),
                Want::Malformed,
            ),
            // Invalid UTF-8 inside a string.
            8 => {
                let mut b = record_json(&js("h"), &js(&stamp(0)), "30").into_bytes();
                let at = b.iter().position(|c| *c == b'h').unwrap();
                b[at] = [0xff, 0xc0, 0x80, 0xed][rng.random_range(0..4)];
                (b, Want::Malformed)
            }
            // Size edges: exactly the cap is read; one byte more is malformed.
            9 => {
                let over = rng.random_bool(0.5);
                let mut b = record_json(&js("h"), &js(&stamp(0)), "30").into_bytes();
                b.resize(MAX_BODY_BYTES + usize::from(over), b' ');
                (b, if over { Want::Malformed } else { Want::Fresh })
            }
            // A BOM, a NUL or a truncated document.
            10 => {
                let full = record_json(&js("h"), &js(&stamp(0)), "30");
                let b = match rng.random_range(0..3) {
                    0 => format!("\u{feff}{full}").into_bytes(),
                    1 => format!("{full}\0").into_bytes(),
                    _ => full.as_bytes()[..rng.random_range(0..full.len())].to_vec(),
                };
                (b, Want::Malformed)
            }
            // A holder id that shows nothing: combining marks with nothing to
            // draw on, blanks, invisible characters, or plain spaces.
            12 => {
                let id: String = if rng.random_bool(0.15) {
                    " ".repeat(rng.random_range(1..4))
                } else {
                    (0..rng.random_range(1..7))
                        .map(|_| INVISIBLE[rng.random_range(0..INVISIBLE.len())])
                        .collect()
                };
                (
                    record_json(&js(&id), &js(&stamp(0)), "30").into_bytes(),
                    Want::Malformed,
                )
            }
            // A key given twice (either value first; a known field or an
            // unknown one): its meaning would depend on the reader.
            13 => {
                let (key, a, b) = [
                    ("ttl_s", "30".to_owned(), "999999".to_owned()),
                    ("ttl_s", "999999".to_owned(), "30".to_owned()),
                    ("instance_id", js("h"), js("other")),
                    ("renewed_at", js(&stamp(0)), js(&stamp(-3600))),
                    ("acquired_at", js(&stamp(-60)), js(&stamp(-60))),
                    ("extra", "1".to_owned(), "1".to_owned()),
                ][rng.random_range(0..6)]
                .clone();
                let full = record_json(&js("h"), &js(&stamp(0)), "30");
                let body = format!(
                    "{},{}:{a},{}:{b}}}",
                    &full[..full.len() - 1],
                    js(key),
                    js(key)
                );
                (body.into_bytes(), Want::Malformed)
            }
            // An empty holder id, or a record that is not an object.
            _ => {
                let b = match rng.random_range(0..3) {
                    0 => record_json(&js(""), &js(&stamp(0)), "30"),
                    1 => js(&hostile_string(&mut rng, 20)),
                    _ => "[]".to_owned(),
                };
                (b.into_bytes(), Want::Malformed)
            }
        };
        out.push(Case { name, body, want });
    }
    out
}

fn cases() -> (u64, usize) {
    let n = std::env::var("LEASECTL_CORPUS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(520);
    let seed = std::env::var("LEASECTL_CORPUS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(14);
    (seed, n)
}

fn write_store(dir: &std::path::Path, cases: &[Case], bad: &[(Vec<u8>, u8, usize)]) {
    use std::os::unix::ffi::OsStrExt;
    for c in cases {
        let d = dir.join(&c.name);
        std::fs::create_dir(&d).unwrap_or_else(|e| panic!("{:?}: {e}", c.name));
        std::fs::write(d.join("LEASE"), &c.body).unwrap();
    }
    for (raw, _, _) in bad {
        let d = dir.join(std::ffi::OsStr::from_bytes(raw));
        std::fs::create_dir(&d).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        let body = record_json(&js("h"), &js(&stamp(-600)), "30");
        std::fs::write(d.join("LEASE"), body).unwrap();
    }
}

/// Every name that is not UTF-8 is one error, naming its byte and offset;
/// none is a row, none is dropped.
fn assert_bad_names_reported(errors: &[(String, String)], bad: &[(Vec<u8>, u8, usize)], seed: u64) {
    assert_eq!(errors.len(), bad.len(), "seed {seed}: {errors:#?}");
    for (raw, byte, at) in bad {
        let prefix = format!("{}/", String::from_utf8_lossy(raw));
        let (_, e) = errors
            .iter()
            .find(|(p, _)| *p == prefix)
            .unwrap_or_else(|| panic!("seed {seed}: no error for {raw:?}"));
        let want = format!("0x{byte:02X} at byte {at};");
        assert!(e.contains(&want), "seed {seed} {raw:?}: {e}");
    }
}

/// The first unsafe character in `s` (a newline is the JSON's own layout).
fn first_unsafe(s: &str, allow_newline: bool) -> Option<(usize, char)> {
    s.char_indices()
        .find(|(_, c)| is_unsafe_char(*c) && !(allow_newline && *c == '\n'))
}

#[test]
fn corpus_through_json_snapshot() {
    let (seed, n) = cases();
    let corpus = generate(seed, n);
    let bad = bad_names(seed, n / 20 + 1);
    let dir = tempfile::tempdir().unwrap();
    write_store(dir.path(), &corpus, &bad);
    let mut c = Command::new(env!("CARGO_BIN_EXE_leasectl"));
    c.args(["--json", "--no-pod", &file_url(dir.path())]);
    let o = run_with_timeout(c, Duration::from_secs(120));
    let stdout = String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if let Some((at, ch)) = first_unsafe(&stdout, true) {
        panic!(
            "raw U+{:04X} in --json at byte {at}: {:?}",
            ch as u32,
            &stdout[at.saturating_sub(60)..(at + 60).min(stdout.len())]
        );
    }
    if let Some((at, ch)) = first_unsafe(&stderr, true) {
        panic!("raw U+{:04X} on stderr at {at}", ch as u32);
    }
    let v: Value = serde_json::from_str(&stdout).expect("--json is JSON");
    let rows = v["targets"][0]["prefixes"].as_array().unwrap();
    assert_eq!(rows.len(), corpus.len(), "every prefix listed");
    let errors: Vec<(String, String)> = v["targets"][0]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["prefix"].as_str().unwrap().to_owned(),
                e["error"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_bad_names_reported(&errors, &bad, seed);
    assert_eq!(
        o.status.code(),
        Some(1),
        "unread prefixes: the answer is incomplete"
    );
    for case in &corpus {
        // Lossless: the escaped JSON parses back to the exact name.
        let prefix = format!("{}/", case.name);
        let row = rows
            .iter()
            .find(|r| r["prefix"] == prefix.as_str())
            .unwrap_or_else(|| panic!("no row for {:?} (seed {seed})", case.name));
        assert_eq!(
            row["state"],
            case.want.as_str(),
            "seed {seed} case {:?}: {row:#}",
            case.name
        );
    }
    eprintln!("{} cases (seed {seed}) through --json", corpus.len());
}

#[tokio::test]
async fn corpus_through_the_console() {
    let (seed, n) = cases();
    let corpus = generate(seed ^ 0x5eed, n);
    let bad = bad_names(seed ^ 0x5eed, n / 20 + 1);
    let dir = tempfile::tempdir().unwrap();
    write_store(dir.path(), &corpus, &bad);
    let now = Utc::now();
    let clock: SharedClock = std::sync::Arc::new(ManualClock::new(now));
    let store = std::sync::Arc::new(LocalStore::open(dir.path()).unwrap());
    let open = vec![OpenTarget {
        target: file_url(dir.path()).parse().unwrap(),
        endpoint: "local".into(),
        store,
    }];
    let snap = snapshot::gather(&open, &GatherOptions::default(), &clock).await;
    assert_eq!(snap.targets[0].prefixes.len(), corpus.len());
    let errors: Vec<(String, String)> = snap.targets[0]
        .errors
        .iter()
        .map(|e| (e.prefix.clone(), e.error.clone()))
        .collect();
    assert_bad_names_reported(&errors, &bad, seed);
    let mut app = App::new(
        vec![file_url(dir.path()).parse().unwrap()],
        false,
        Duration::from_secs(5),
        now,
    );
    app.update(Action::Snapshot(Box::new(snap)));
    let (w, h) = (110, 32);
    app.update(Action::Resize(w, h));
    app.update(Action::ToggleDetail);
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    for i in 0..corpus.len() {
        // Every 25th row also opens the takeover dialog.
        let dialog = i % 25 == 0;
        if dialog {
            app.update(Action::StartTakeover);
        }
        term.draw(|f| render(&app, f)).unwrap();
        let buf = term.backend().buffer();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                let sym = buf[(x, y)].symbol();
                if let Some((_, ch)) = first_unsafe(sym, false) {
                    panic!(
                        "raw U+{:04X} drawn at ({x},{y}) on row {i} (seed {seed})",
                        ch as u32
                    );
                }
            }
        }
        if dialog {
            app.update(Action::Cancel);
        }
        app.update(Action::Down);
    }
    eprintln!("{} cases (seed {seed}) through the console", corpus.len());
}
