#!/usr/bin/env python3
"""Independent checker for the fence soak (scripts/soak.sh).

Reads the shared log the soak's commands wrote, one line per write:

    RUN TIMESTAMP GENERATION

TIMESTAMP: seconds since the epoch, real clock; GENERATION: the
LEASECTL_GENERATION the run's command was given (`-` when it had none; a
line of only RUN TIMESTAMP is read the same way). Checks:

1. overlap: the runs' writes never interleave (sorted by first write, every
   run's first write comes after the last write of every run before it);
2. generation order: in time order, no write carries a generation lower
   than one an earlier write carried (a stale holder writing after a newer
   one), each run writes under one generation, and no two runs share one;
3. every write carries a generation (unknown is not checked, so it fails,
   unless --allow-unknown-generation: e.g. a soak with --record-format seed).

Prints the figures; exits 1 on any violation, 2 on unusable input.
`--self-test` checks the checker itself on logs with injected violations.
"""
import os
import sys
import tempfile
from collections import defaultdict


def read(path):
    """[(time, run, generation or None)], unparsable line count."""
    writes, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) not in (2, 3):
                bad += 1
                continue
            try:
                t = float(parts[1])
            except ValueError:
                bad += 1
                continue
            gen = None
            if len(parts) == 3 and parts[2] != "-":
                if not parts[2].isdigit():
                    bad += 1
                    continue
                gen = int(parts[2])
            writes.append((t, parts[0], gen))
    return writes, bad


def overlaps(writes):
    spans = defaultdict(lambda: [float("inf"), float("-inf")])
    for t, run, _ in writes:
        s = spans[run]
        s[0] = min(s[0], t)
        s[1] = max(s[1], t)
    runs = sorted(spans.items(), key=lambda kv: kv[1][0])
    found, gaps = [], []
    last_run, last_end = None, float("-inf")
    for run, (first, end) in runs:
        if last_run is not None:
            if first <= last_end:
                found.append(f"OVERLAP: {run} started {last_end - first:.3f} s before {last_run} stopped")
            else:
                gaps.append(first - last_end)
        if end > last_end:
            last_run, last_end = run, end
    return len(runs), found, gaps


def generation_order(writes):
    """Violations of the generation rules, and how many writes had none."""
    found = []
    unknown = sum(1 for w in writes if w[2] is None)
    per_run = defaultdict(set)
    for _, run, gen in writes:
        if gen is not None:
            per_run[run].add(gen)
    for run, gens in sorted(per_run.items()):
        if len(gens) > 1:
            found.append(f"MIXED GENERATIONS: {run} wrote under {sorted(gens)}")
    owners = defaultdict(set)
    for run, gens in per_run.items():
        for g in gens:
            owners[g].add(run)
    for g, runs in sorted(owners.items()):
        if len(runs) > 1:
            found.append(f"SHARED GENERATION: {g} was written by {sorted(runs)}")
    newest = None  # (generation, run, time) of the highest generation so far
    stale = {}  # (run, newer run) -> [first message, count]
    for t, run, gen in sorted((w for w in writes if w[2] is not None), key=lambda w: w[0]):
        if newest is not None and gen < newest[0]:
            key = (run, newest[1])
            if key not in stale:
                stale[key] = [
                    f"STALE GENERATION: {run} wrote under generation {gen} at {t:.6f}, "
                    f"after {newest[1]} had written under {newest[0]} at {newest[2]:.6f}",
                    0,
                ]
            stale[key][1] += 1
        if newest is None or gen > newest[0]:
            newest = (gen, run, t)
    for msg, n in stale.values():
        found.append(f"{msg} ({n} such write{'s' if n > 1 else ''})")
    return found, unknown


def check(path, allow_unknown=False, out=print):
    writes, bad = read(path)
    if not writes:
        out(f"soak_check: no writes in {path}")
        return 2
    runs, overlap, gaps = overlaps(writes)
    order, unknown = generation_order(writes)
    out(f"soak_check: {runs} runs wrote {len(writes)} lines ({bad} unparsable)")
    if gaps:
        gaps.sort()
        out(
            "soak_check: gap between one writer's last write and the next one's first: "
            f"min {gaps[0]:.3f} s, median {gaps[len(gaps) // 2]:.3f} s"
        )
    gens = sorted({w[2] for w in writes if w[2] is not None})
    if gens:
        out(f"soak_check: {len(gens)} generations, from {gens[0]} to {gens[-1]}")
    for v in overlap + order:
        out(f"soak_check: {v}")
    out(f"soak_check: {len(overlap)} overlaps")
    out(f"soak_check: {len(order)} generation-order violations")
    if unknown:
        how = "allowed" if allow_unknown else "not checked, so this fails"
        out(f"soak_check: {unknown} writes carried no generation (LEASECTL_GENERATION unset): {how}")
    failed = overlap or order or (unknown and not allow_unknown)
    return 1 if failed else 0


def self_test():
    """Each case: log lines, --allow-unknown-generation, expected exit, a word the output must hold."""
    cases = [
        ("in order", ["a-0 1.0 10", "a-0 1.5 10", "b-0 2.0 11", "b-0 2.5 11", "a-1 3.0 20"], False, 0, "0 generation-order"),
        ("overlap", ["a-0 1.0 10", "b-0 1.2 11", "a-0 1.5 10"], False, 1, "OVERLAP"),
        ("stale after newer, no overlap", ["a-0 1.0 10", "b-0 2.0 12", "c-0 3.0 11"], False, 1, "STALE GENERATION"),
        ("mixed in one run", ["a-0 1.0 10", "a-0 1.5 11"], False, 1, "MIXED GENERATIONS"),
        ("shared by two runs", ["a-0 1.0 10", "b-0 2.0 10"], False, 1, "SHARED GENERATION"),
        ("unknown generation", ["a-0 1.0 -", "b-0 2.0"], False, 1, "carried no generation"),
        ("unknown allowed", ["a-0 1.0 -", "b-0 2.0"], True, 0, "allowed"),
        ("unusable", ["garbage", "x y z w"], False, 2, "no writes"),
        ("bad generation", ["a-0 1.0 -3", "a-0 1.1 10"], False, 0, "1 unparsable"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for name, lines, allow, want, word in cases:
            path = os.path.join(d, "writes.log")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            said = []
            got = check(path, allow, said.append)
            text = "\n".join(said)
            if got != want or word not in text:
                failures += 1
                print(f"self-test FAILED: {name}: exit {got} (want {want}), {word!r} in output: {word in text}\n{text}")
    print(f"soak_check self-test: {len(cases) - failures} of {len(cases)} cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(self_test())
    allow = "--allow-unknown-generation" in args
    paths = [a for a in args if a != "--allow-unknown-generation"]
    if len(paths) != 1 or paths[0].startswith("--"):
        print("usage: soak_check.py [--allow-unknown-generation] WRITES_LOG | --self-test", file=sys.stderr)
        sys.exit(2)
    sys.exit(check(paths[0], allow))
