#!/usr/bin/env bash
# Reproduces the measured rows of the README's compatibility table: on moto
# 5.2.5, moto 5.0.14, Ceph RGW 16.2.15, SeaweedFS 4.48 and the non-atomic
# emulation (a proxy in front of moto: check, pause, unconditional write), runs
# `leasectl probe --race --json` $LEASECTL_COMPAT_RUNS times (default 20) and
# prints one Markdown row per server: each step's answers, the race verdict
# over the runs and its cost, and what leasectl does.
# Usage: scripts/compat.sh   (LEASECTL_COMPAT_RUNS=5 scripts/compat.sh for a quick look)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup-test-env.sh"
export LEASECTL_VENV_DIR="${LEASECTL_VENV_DIR:-$repo/.venv}"
export LEASECTL_RGW_DIR="${LEASECTL_RGW_DIR:-$repo/.rgw}"
if ! "$repo/scripts/ceph-rgw.sh" status >/dev/null; then
  trap '"$repo/scripts/ceph-rgw.sh" stop' EXIT
  "$repo/scripts/ceph-rgw.sh" start >/dev/null
fi
cd "$repo"
cargo test --locked --test it bucket::race::compat_table -- --ignored --nocapture --exact 2>/dev/null | grep '^|'
