#!/usr/bin/env python3
"""What `leasectl timeline` costs over a day of renewals (issue 44; docs/timeline.md, "Cost").

Writes a day of renewals of one LEASE, one every 10 s: 8,640 versions, five holders in
turn (the new ones at versions 1,000, 1,003, 4,000 and 7,777, as tests/it/timeline's day),
with boto3, one after the other, into a versioned bucket on each of --servers (moto,
seaweedfs; started as scripts/compare.py starts them). Then, through examples/rtt_proxy.rs
adding each of --rtts (ms) to every request, it runs

  leasectl --endpoint-url PROXY --path-style timeline s3://B/db/ -o json --audit-log EMPTY

as it runs by default (every version read) and with --bisect, --runs times each, and
reports for each run the requests by kind (the proxy's counts: `list` is the listing's
pages and the versioning status, `get` the versions' bodies), the seconds (wall, and
leasectl's own CPU), and the bytes of the answers' bodies. Every run is checked: five
tenures, 8,640 versions listed; by default 8,640 read and none inferred (exit 3: the
holders wrote within a minute of service time, each before the previous one's fence
closed), with --bisect the rest inferred (exit 1).

Prints a Markdown table (medians) and writes --out (JSON).

  ~/.cache/leasectl-venv/moto-5.2.5/bin/python scripts/timeline_day.py \\
      --leasectl target/release/leasectl --proxy target/release/examples/rtt_proxy
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ENV, REGION, Proxy, Server, log  # noqa: E402

if "LEASECTL_VENV_DIR" not in os.environ and os.path.basename(sys.prefix).startswith("moto-"):
    # Run by the moto virtualenv's python: SeaweedFS is installed beside it.
    os.environ["LEASECTL_VENV_DIR"] = os.path.dirname(sys.prefix)
    ENV["LEASECTL_VENV_DIR"] = os.environ["LEASECTL_VENV_DIR"]

VERSIONS = 8640
BOUNDS = [0, 1000, 1003, 4000, 7777, VERSIONS]


def body(i, start):
    """Version `i`'s record: its holder's, renewed 10 s after the one before."""
    k = next(j for j in range(5) if BOUNDS[j] <= i < BOUNDS[j + 1])
    stamp = lambda t: t.isoformat(timespec="microseconds").replace("+00:00", "Z")  # noqa: E731
    return json.dumps({
        "instance_id": f"holder-{k}",
        "acquired_at": stamp(start + timedelta(seconds=10 * BOUNDS[k])),
        "renewed_at": stamp(start + timedelta(seconds=10 * i)),
        "ttl_s": 30,
        "generation": 100 + k,
    }).encode()


def seed(server, bucket):
    s3 = server.client
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    start = datetime.now(timezone.utc) - timedelta(days=1)
    t0 = time.monotonic()
    for i in range(VERSIONS):
        s3.put_object(Bucket=bucket, Key="db/LEASE", Body=body(i, start))
        if i % 1000 == 999:
            log(f"{server.kind}: {i + 1} versions written ({time.monotonic() - t0:.0f} s)")
    return time.monotonic() - t0


def run_once(args, proxy, bucket, bisect, audit):
    cmd = [args.leasectl, "--endpoint-url", proxy.url, "--path-style", "--no-pod",
           "timeline", f"s3://{bucket}/db/", "-o", "json", "--audit-log", audit]
    if bisect:
        cmd.append("--bisect")
    proxy.reset()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = proxy.stats()
    doc = json.loads(out.stdout)
    p = doc["prefixes"][0]
    src = p["sources"]
    holders = [t["holder"] for t in p["tenures"]]
    want_exit = 1 if bisect else 3
    if out.returncode != want_exit or holders != [f"holder-{k}" for k in range(5)] \
            or src["versions_listed"] != VERSIONS \
            or (not bisect and (src["versions_read"] != VERSIONS or src["versions_inferred"])):
        sys.exit(f"unexpected report (exit {out.returncode}): {json.dumps(p)[:2000]}\n"
                 f"{out.stderr.decode()[:2000]}")
    return {
        "bisect": bisect,
        "exit": out.returncode,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "requests": stats["requests"],
        "by_kind": stats["by_kind"],
        "answer_body_bytes": stats["answer_body_bytes"],
        "versions_read": src["versions_read"],
        "versions_inferred": src["versions_inferred"],
        "list_requests": src["list_requests"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leasectl", required=True)
    ap.add_argument("--proxy", required=True, help="the rtt_proxy example's binary")
    ap.add_argument("--servers", default="moto,seaweedfs")
    ap.add_argument("--rtts", default="0,30", help="round trips added, ms (comma-separated)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="timeline_day.json")
    args = ap.parse_args()
    results = []
    audit = tempfile.NamedTemporaryFile(prefix="leasectl-audit-", suffix=".jsonl")
    for kind in args.servers.split(","):
        server = Server(kind)
        proxy = None
        try:
            bucket = f"timeline-day-{int(time.time())}"
            seeded = seed(server, bucket)
            log(f"{kind}: {VERSIONS} versions written in {seeded:.0f} s")
            proxy = Proxy(args.proxy, server.url)
            for rtt in [int(r) for r in args.rtts.split(",")]:
                proxy.config(rtt_ms=rtt)
                for bisect in (False, True):
                    runs = [run_once(args, proxy, bucket, bisect, audit.name)
                            for _ in range(args.runs)]
                    for r in runs:
                        log(f"{kind} rtt {rtt} ms {'--bisect' if bisect else 'default'}: "
                            f"{r['wall_s']:.2f} s, {r['requests']} requests, "
                            f"{r['answer_body_bytes']} bytes")
                    results.append({"server": kind, "rtt_ms": rtt, "bisect": bisect,
                                    "seed_s": seeded, "runs": runs})
        finally:
            if proxy:
                proxy.stop()
            server.stop()
    print("| server | RTT | run | requests (list + get) | seconds (median, range) | "
          "leasectl CPU s | answer bytes | inferred | exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        runs = r["runs"]
        walls = [x["wall_s"] for x in runs]
        first = runs[0]
        kinds = first["by_kind"]
        print(f"| {r['server']} | {r['rtt_ms']} ms | {'`--bisect`' if r['bisect'] else 'default'} "
              f"| {first['requests']} ({kinds.get('list', 0)} + {kinds.get('get', 0)}) "
              f"| {statistics.median(walls):.2f} ({min(walls):.2f}–{max(walls):.2f}) "
              f"| {statistics.median(x['cpu_s'] for x in runs):.2f} "
              f"| {first['answer_body_bytes']:,} | {first['versions_inferred']} | {first['exit']} |")
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{VERSIONS} versions, region {REGION}")
    with open(args.out, "w") as f:
        json.dump({"results": results, "load": load, "leasectl": args.leasectl}, f, indent=1)


if __name__ == "__main__":
    main()
