#!/usr/bin/env bash
# Side-by-side performance comparisons, one run, this machine (see PERFORMANCE.md):
#   1. leasectl --json vs a 32-thread boto3 script vs raw HTTP (curl + wrk), on a
#      loopback moto server seeded with 1,000 and 10,000 prefixes;
#   2. the pod scan vs `lslocks` + `ps -eo pid,ppid,comm` (hyperfine), ~1,000 processes;
#   3. the console's idle CPU over 60 s, and its time to first frame (tmux).
# Installs wrk, hyperfine, GNU time and tmux with apt when missing, moto into
# $LEASECTL_VENV_DIR (default .venv/) with scripts/setup-test-env.sh, and the
# s3s-fs 0.14.1 server (a fast Rust S3 server on a directory; needs Rust 1.92+)
# with cargo install into $LEASECTL_VENV_DIR/s3s-fs-0.14.1 unless $S3S_FS names
# a binary already. Both servers are measured unless --server moto|s3s-fs.
# Arguments go to scripts/compare.py (e.g. --ns 1000 --runs 3 --only s3).
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

echo "compare: building leasectl (release)" >&2
cargo build --release --quiet --bin leasectl
target_dir="${CARGO_TARGET_DIR:-$repo/target}"

exec "$venv_dir/moto-5.2.5/bin/python" "$repo/scripts/compare.py" \
  --leasectl "$target_dir/release/leasectl" "$@"
