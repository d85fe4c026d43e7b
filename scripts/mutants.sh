#!/usr/bin/env bash
# Mutation testing of the safety path (issue 48 §4): runs shard K of N of
# the mutants .cargo/mutants.toml names, with the unit tests and the
# simulator's CI budget as the judges, and keeps the outcome in
# docs/mutants/shard-K-of-N/ (cargo-mutants' mutants.out: caught.txt,
# missed.txt, timeout.txt, unviable.txt, outcomes.json).
#
#   scripts/mutants.sh 1/12        # one shard (about 45 mutants, ~1 min each)
#   scripts/mutants.sh --list      # the mutants, one a line
#
# It mutates the files in place (cargo mutants --in-place): run it in a
# worktree of its own, with nothing uncommitted. Needs cargo-mutants
# (`cargo install cargo-mutants`).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--list" ]; then
  exec cargo mutants --list
fi
shard="${1:?usage: scripts/mutants.sh K/N | --list}"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "scripts/mutants.sh: the worktree has uncommitted changes; mutants are made in place, so commit or stash them first" >&2
  exit 2
fi
out="docs/mutants/shard-${shard/\//-of-}"
mkdir -p "$out"
cargo mutants --in-place --shard "$shard" --output "$out" --no-shuffle "${@:2}" || true
echo "scripts/mutants.sh: shard $shard: $(wc -l < "$out/mutants.out/caught.txt" 2>/dev/null || echo 0) caught, $(wc -l < "$out/mutants.out/missed.txt" 2>/dev/null || echo 0) missed, $(wc -l < "$out/mutants.out/timeout.txt" 2>/dev/null || echo 0) timed out, $(wc -l < "$out/mutants.out/unviable.txt" 2>/dev/null || echo 0) unviable"
