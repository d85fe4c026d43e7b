#!/bin/bash
# The safety envelope (README, "The simulator"): violations per TTL, clock offset
# and offset check, 500 seeds a cell. Takes about a minute on one core.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for ttl in 30 6; do
for f in 0 0.041667 0.083333 0.166667 0.333333 0.5; do
 for d in "" "--defect offset-check-off"; do
  out=$(scripts/simulate.sh --seeds 500 --ttl $ttl --offset-ttl-fraction $f $d --quiet 2>&1 | tail -2 | tr '\n' ' ')
  echo "ttl=$ttl F=$f check=$([ -z "$d" ] && echo on || echo off) :: $out"
 done
done
done
