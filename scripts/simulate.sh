#!/usr/bin/env bash
# The deterministic simulator (issue 32): runs the real lease engine against a
# simulated store, clocks and operators, one world per seed, and checks S1-S5
# and L1 (B1 in best-effort worlds) after every step (docs/simulator.md).
#
#   scripts/simulate.sh [--seeds N] [--first S] [--seed S] [--defect NAME]
#                       [--history] [--duration SECONDS] [--offset-ttl-fraction F] [--ttl SECONDS]
#                       [--store NAME] [--best-effort] [--quiet]
#
# Ends with `N seeds, L lifetimes, W writes, V violations`; exit 0 when V is 0.
# A failing seed prints the command that replays it (with --history: every
# event of that world, byte for byte the same on every run).
# SIMULATE_PROFILE=release builds optimised (a full release build of the
# dependencies with the `sim` feature the first time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
profile=()
if [[ "${SIMULATE_PROFILE:-dev}" == release ]]; then
    profile=(--release)
fi
exec cargo run --quiet "${profile[@]}" --features sim --example simulate -- "$@"
