#!/usr/bin/env python3
"""CPU per S3 request of two builds of examples/s3_get_cpu.rs, side by side.

Starts SeaweedFS on loopback (as scripts/compare.py does), then runs each
build on each runtime (`multi`, `current`) in turn, the order rotating every
round, and prints a Markdown table of medians (PERFORMANCE.md, issue 27,
target 2):

    LEASECTL_VENV_DIR=.venv .venv/moto-5.2.5/bin/python scripts/get_cpu_ab.py \
        --before OLD/s3_get_cpu --after target/release/examples/s3_get_cpu --rounds 6
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the s3_get_cpu binary to compare against")
    ap.add_argument("--after", required=True, help="the s3_get_cpu binary of this build")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    variants = [(f"{label}, {rt}", binary, rt)
                for label, binary in (("before", args.before), ("after", args.after))
                for rt in ("multi", "current")]
    server = compare.Server("seaweedfs")
    results = {v[0]: ([], []) for v in variants}
    try:
        for r in range(args.rounds):
            k = r % len(variants)
            for label, binary, rt in variants[k:] + variants[:k]:
                out = subprocess.run(
                    [binary, "--endpoint-url", server.url, "--requests", str(args.requests),
                     "--runtime", rt],
                    env=compare.ENV, capture_output=True, text=True, timeout=600, check=True)
                j = json.loads(out.stdout.strip().splitlines()[-1])
                results[label][0].append(j["cpu_us_per_304"])
                results[label][1].append(j["cpu_us_per_404"])
                compare.log(f"round {r} {label}: {j['cpu_us_per_304']} µs per 304, "
                            f"{j['cpu_us_per_404']} µs per 404")
    finally:
        server.stop()
    print("| build, runtime | µs CPU per 304, median (min–max) | µs CPU per 404, median (min–max) |")
    print("|---|---|---|")
    for label, (a, b) in results.items():
        print(f"| {label} | {statistics.median(a):.1f} ({min(a):.0f}–{max(a):.0f}) "
              f"| {statistics.median(b):.1f} ({min(b):.0f}–{max(b):.0f}) |")


if __name__ == "__main__":
    main()
