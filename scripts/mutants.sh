#!/usr/bin/env bash
# Mutation testing of the safety path (issue 48 §4): runs shard K of N of
# the mutants .cargo/mutants.toml names, with the unit tests and the
# simulator's CI budget as the judges, and keeps the outcome in
# docs/mutants/shard-K-of-N/: caught.txt, missed.txt, timeout.txt and
# unviable.txt, a mutant a line (cargo-mutants' whole output, with each
# mutant's diff and log, stays in target/mutants/shard-K-of-N/).
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
# Its own outcomes (docs/mutants/) may be left uncommitted between shards.
if [ -n "$(git status --porcelain --untracked-files=no -- . ':!docs/mutants')" ]; then
  echo "scripts/mutants.sh: the worktree has uncommitted changes; mutants are made in place, so commit or stash them first" >&2
  exit 2
fi
name="shard-${shard/\//-of-}"
work="${CARGO_TARGET_DIR:-target}/mutants/$name"
out="docs/mutants/$name"
mkdir -p "$work" "$out"
cargo mutants --in-place --shard "$shard" --output "$work" --no-shuffle "${@:2}" || true
for kind in caught missed timeout unviable; do
  cp "$work/mutants.out/$kind.txt" "$out/$kind.txt" 2>/dev/null || : > "$out/$kind.txt"
done
count() { wc -l < "$out/$1.txt"; }
echo "scripts/mutants.sh: shard $shard: $(count caught) caught, $(count missed) missed, $(count timeout) timed out, $(count unviable) unviable"
