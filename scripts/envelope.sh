#!/bin/bash
# The safety envelope (docs/simulator.md): violations per TTL, clock offset
# and offset check, 500 seeds a cell (SEEDS=N for another count), with the
# holders' offset estimates against the truth. Violations on a broken store
# (not-atomic, ignores-preconditions) are named with it: they are the race
# check's, not the clocks'. About a minute on one core (release build).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seeds=${SEEDS:-500}
for ttl in 30 6; do
for f in 0 0.041667 0.083333 0.166667 0.333333 0.5; do
 for d in "" "--defect offset-check-off"; do
  out=$(scripts/simulate.sh --seeds "$seeds" --ttl $ttl --offset-ttl-fraction $f $d --quiet 2>&1)
  echo "ttl=$ttl F=$f check=$([ -z "$d" ] && echo on || echo off) :: $(grep 'violations by property' <<<"$out" | sed 's/.*violations by property: //') :: $(tail -1 <<<"$out")"
  grep '^offset estimate' <<<"$out" | sed 's/^/    /'
 done
done
done
