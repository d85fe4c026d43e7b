#!/usr/bin/env python3
"""`leasectl --json` against `s5cmd cp` through the RTT proxy, interleaved.

Issue 27, target 5: at N prefixes (default 1,000) and each RTT (default 30
and 80 ms), `leasectl --json --no-pod` at its DEFAULT concurrency (no
--concurrency flag) against `s5cmd --numworkers 256 cp 's3://B/backups/*/LEASE'`,
the order alternating each round, on SeaweedFS (`weed mini`, started here from
$LEASECTL_VENV_DIR/seaweedfs-4.48) or s3s-fs (--s3s-fs PATH) behind
examples/rtt_proxy.rs. Seeding, the proxy and the checks are those of
scripts/compare.py (every prefix reported; every LEASE file downloaded).
Extra leasectl binaries (--also NAME=PATH, e.g. a build of an older commit)
run in the same rounds. Prints a Markdown table: medians of wall time, the
requests the proxy counted, connections opened and most in flight.

  .venv/moto-5.2.5/bin/python scripts/rtt_s5cmd.py --leasectl target/release/leasectl \\
      --rtt-proxy target/release/examples/rtt_proxy --s5cmd PATH [--rounds 5]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from compare import KEY, REGION, SECRET, Proxy, count_files, lease_body, seed, timed  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

PORT_FLAGS = ["s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port",
              "volume.port.grpc", "filer.port", "filer.port.grpc", "webdav.port",
              "admin.port", "admin.port.grpc"]


class Seaweed:
    """`weed mini` on loopback with the benchmark's credentials."""

    def __init__(self, weed):
        self.root = tempfile.mkdtemp(prefix="leasectl-rtt-sw-")
        ports = [compare.free_port() for _ in PORT_FLAGS]
        args = [weed, "mini", f"-dir={self.root}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-volume.max=2000",
                *[f"-{f}={p}" for f, p in zip(PORT_FLAGS, ports)],
                "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-filer.localSocket={self.root}/filer.sock",
                f"-s3.localSocket={self.root}/s3.sock"]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET)
        env.pop("S3_BUCKET", None)
        self.log = open(os.path.join(self.root, "weed.log"), "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{ports[0]}"
        self.client = boto3.client(
            "s3", endpoint_url=self.url, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
            region_name=REGION,
            config=Config(max_pool_connections=32, s3={"addressing_style": "path"}))
        deadline = time.monotonic() + 90
        while True:
            try:
                self.client.create_bucket(Bucket="ready-check")
                self.client.put_object(Bucket="ready-check", Key="k", Body=b"x")
                break
            except Exception:  # noqa: BLE001 - not ready yet
                if time.monotonic() > deadline:
                    sys.exit("SeaweedFS did not start; see " + self.log.name)
                time.sleep(0.5)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leasectl", required=True)
    ap.add_argument("--also", action="append", default=[], help="NAME=PATH of another leasectl")
    ap.add_argument("--rtt-proxy", required=True)
    ap.add_argument("--s5cmd", required=True)
    ap.add_argument("--s3s-fs", help="use s3s-fs (this binary) instead of SeaweedFS")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rtts", default="30,80")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.s3s_fs:
        server = compare.Server("s3s-fs", args.s3s_fs)
        kind = "s3s-fs 0.14.1"
    else:
        venv = os.environ.get("LEASECTL_VENV_DIR", os.path.join(compare.REPO, ".venv"))
        server = Seaweed(os.path.join(venv, "seaweedfs-4.48", "bin", "weed"))
        kind = "SeaweedFS 4.48"
    proxy = Proxy(args.rtt_proxy, server.url)
    workdir = tempfile.mkdtemp(prefix="leasectl-rtt-s5-")
    leasectls = [("leasectl", args.leasectl)] + [tuple(a.split("=", 1)) for a in args.also]
    rows = []
    try:
        bucket = f"rtt-{args.n}"
        compare.log(f"seeding {args.n} prefixes on {kind}")
        seed(server, bucket, args.n)
        leases = sum(1 for i in range(args.n) if lease_body(i, datetime.now(timezone.utc)))
        target = f"s3://{bucket}/backups/"
        for rtt in [int(x) for x in args.rtts.split(",")]:
            proxy.config(rtt_ms=rtt)
            names = [n for n, _ in leasectls] + ["s5cmd"]
            samples = {n: [] for n in names}
            reqs = {}
            for r in range(args.rounds):
                order = names if r % 2 == 0 else names[::-1]
                for name in order:
                    proxy.reset()
                    if name == "s5cmd":
                        outdir = tempfile.mkdtemp(dir=workdir)
                        dt, _, p = timed([args.s5cmd, "--endpoint-url", proxy.url,
                                          "--numworkers", "256", "cp",
                                          f"s3://{bucket}/backups/*/LEASE", outdir + "/"])
                        got = count_files(outdir)
                        shutil.rmtree(outdir, ignore_errors=True)
                        if p.returncode or got != leases:
                            sys.exit(f"s5cmd failed: exit {p.returncode}, {got} of {leases}, "
                                     f"{p.stderr.decode()[-2000:]}")
                    else:
                        binary = dict(leasectls)[name]
                        dt, _, p = timed([binary, "--json", "--no-pod", "--endpoint-url",
                                          proxy.url, "--path-style", "--region", REGION,
                                          target])
                        doc = json.loads(p.stdout or b"{}")
                        got = len(doc["targets"][0]["prefixes"])
                        if p.returncode not in (0, 3) or got != args.n:
                            sys.exit(f"{name} failed: exit {p.returncode}, {got} prefixes, "
                                     f"{p.stderr.decode()[-2000:]}")
                    samples[name].append(dt)
                    st = proxy.stats()
                    reqs[name] = st
                compare.log(f"rtt={rtt}ms round {r + 1}: "
                            + " ".join(f"{k}={v[-1]:.3f}s" for k, v in samples.items()))
            rows.append((rtt, samples, reqs))
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"\n{args.n} prefixes on {kind} behind the RTT proxy, {args.rounds} rounds, "
          f"load average at the end {load}\n")
    print("| RTT | contender | median | min | / s5cmd | requests (by kind) | connections | most in flight |")
    print("|---|---|---|---|---|---|---|---|")
    for rtt, samples, reqs in rows:
        s5 = statistics.median(samples["s5cmd"])
        for name, v in samples.items():
            med = statistics.median(v)
            st = reqs[name]
            kinds = ", ".join(f"{k} {c}" for k, c in sorted(st["by_kind"].items()) if c)
            print(f"| {rtt} ms | {name} | {med * 1000:.0f} ms | {min(v) * 1000:.0f} ms | "
                  f"{med / s5:.2f} | {kinds} | {st['connections']} | {st['max_in_flight']} |")


if __name__ == "__main__":
    main()
