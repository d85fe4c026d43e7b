#!/usr/bin/env bash
# The fence soak: RUNS (default 200) `leasectl bucket hold` runs on one prefix,
# two slots taking turns, random faults on the holder (503, hanging renewals,
# dropped answers, SIGSTOP 0-15 s, wall clock stepped by ±2 TTL), then an
# independent check of what their commands wrote (scripts/soak_check.py): no
# two runs' writes overlap, and no write stamped with an older
# LEASECTL_GENERATION follows one stamped with a newer one. Takes about 4 s per run. Output: $LEASECTL_SOAK_DIR
# (default /tmp/leasectl-soak): writes.log, runs.txt, one stderr file per run.
#   scripts/soak.sh [RUNS]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup-test-env.sh"
export LEASECTL_VENV_DIR="${LEASECTL_VENV_DIR:-$repo/.venv}"
export LEASECTL_SOAK_RUNS="${1:-200}"
cd "$repo"
cargo test --test it fence_soak -- --ignored --nocapture
