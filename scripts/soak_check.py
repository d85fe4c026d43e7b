#!/usr/bin/env python3
"""Independent overlap checker for the fence soak (scripts/soak.sh).

Reads the shared log the soak's commands wrote, one `RUN TIMESTAMP` line per
write (TIMESTAMP: seconds since the epoch, real clock), and checks that the
runs' writes never interleave: sorted by first write, every run's first write
comes after the last write of every run before it. Prints the figures; exits
1 on any overlap, 2 on unusable input.
"""
import sys
from collections import defaultdict


def main(path):
    spans = defaultdict(lambda: [float("inf"), float("-inf"), 0])
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                bad += 1
                continue
            try:
                t = float(parts[1])
            except ValueError:
                bad += 1
                continue
            s = spans[parts[0]]
            s[0] = min(s[0], t)
            s[1] = max(s[1], t)
            s[2] += 1
    if not spans:
        print(f"soak_check: no writes in {path}")
        return 2
    runs = sorted(spans.items(), key=lambda kv: kv[1][0])
    overlaps = []
    gaps = []
    last_tag, last_end = None, float("-inf")
    for tag, (first, end, _) in runs:
        if last_tag is not None:
            if first <= last_end:
                overlaps.append((last_tag, tag, last_end - first))
            else:
                gaps.append(first - last_end)
        if end > last_end:
            last_tag, last_end = tag, end
    lines = sum(s[2] for s in spans.values())
    print(f"soak_check: {len(runs)} runs wrote {lines} lines ({bad} unparsable)")
    if gaps:
        gaps.sort()
        print(
            "soak_check: gap between one writer's last write and the next one's first: "
            f"min {gaps[0]:.3f} s, median {gaps[len(gaps) // 2]:.3f} s"
        )
    for a, b, d in overlaps:
        print(f"soak_check: OVERLAP: {b} started {d:.3f} s before {a} stopped")
    print(f"soak_check: {len(overlaps)} overlaps")
    return 1 if overlaps else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: soak_check.py WRITES_LOG", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
