#!/usr/bin/env python3
"""How long `leasectl bucket hold` takes to start its command on a healthy
store (moto 5.2.5, single-threaded, on loopback): the acquire with its checks
(the probe after the write, conditional DELETE learned, the race check, the
confirmation) until the command runs, and the whole run until leasectl exits
after the release (issue 48: the start time may grow at most 2x).

Starts moto as the tests do (scripts/moto_server.py), creates one bucket, then
runs, --runs rounds, each binary once per round (the order rotating), every run
a new process (the once-per-process checks run every time) on one prefix:

  leasectl --endpoint-url URL --path-style bucket hold s3://B/db/ -- \\
      sh -c 'date +%s.%N > FILE'

The start time is the command's own timestamp minus the moment leasectl was
launched. Prints the median, min and max of the start time and of the whole
run per binary, the ratio of medians to the first binary, and the requests
one run sent (moto's request log, counted per run).

  ~/.cache/leasectl-venv/moto-5.2.5/bin/python scripts/hold_start.py \\
      --leasectl NAME=PATH [--leasectl NAME=PATH ...] [--runs 20]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import boto3

HERE = os.path.dirname(os.path.abspath(__file__))


def start_moto(log):
    p = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "moto_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    port = int(p.stdout.readline().strip())
    return p, f"http://127.0.0.1:{port}"


def logged_requests(log_path):
    """Requests moto has logged so far (one line each: `"METHOD /path HTTP/1.1" status`)."""
    with open(log_path, errors="replace") as f:
        return sum(1 for line in f if '" ' in line and "HTTP/1.1" in line)


def env():
    e = dict(os.environ)
    e.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing-secret",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    e.pop("AWS_ENDPOINT_URL", None)
    e.pop("AWS_PROFILE", None)
    return e


def one_run(binary, url, bucket, stamp):
    if os.path.exists(stamp):
        os.unlink(stamp)
    cmd = [
        binary,
        "--endpoint-url",
        url,
        "--path-style",
        "bucket",
        "hold",
        f"s3://{bucket}/db/",
        "--",
        "sh",
        "-c",
        f"date +%s.%N > {stamp}",
    ]
    t0 = time.time()
    out = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=120)
    t1 = time.time()
    if out.returncode != 0 or not os.path.exists(stamp):
        raise SystemExit(f"{binary}: exit {out.returncode}: {out.stderr[-2000:]}")
    with open(stamp) as f:
        started = float(f.read().strip())
    return started - t0, t1 - t0


def summary(xs):
    return f"median {statistics.median(xs) * 1000:7.1f} ms (min {min(xs) * 1000:6.1f}, max {max(xs) * 1000:6.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leasectl", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    bins = []
    for spec in args.leasectl:
        name, _, path = spec.partition("=")
        bins.append((name, path or name))
    log_file = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log", delete=False)
    moto, url = start_moto(log_file)
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing-secret",
            region_name="us-east-1",
        )
        bucket = "hold-start"
        s3.create_bucket(Bucket=bucket)
        results = {name: ([], [], []) for name, _ in bins}
        with tempfile.TemporaryDirectory() as d:
            stamp = os.path.join(d, "started")
            # One warm-up run each (page cache, moto's first requests).
            for _, path in bins:
                one_run(path, url, bucket, stamp)
            for r in range(args.runs):
                order = bins[r % len(bins):] + bins[: r % len(bins)]
                for name, path in order:
                    before = logged_requests(log_file.name)
                    start, total = one_run(path, url, bucket, stamp)
                    time.sleep(0.05)  # moto logs a request after answering it
                    results[name][0].append(start)
                    results[name][1].append(total)
                    results[name][2].append(logged_requests(log_file.name) - before)
        base = statistics.median(results[bins[0][0]][0])
        print(f"{args.runs} runs each, load average {os.getloadavg()[0]:.2f}")
        for name, _ in bins:
            starts, totals, requests = results[name]
            ratio = statistics.median(starts) / base
            print(
                f"{name:>16}: start {summary(starts)}  x{ratio:.2f}; whole run {summary(totals)}; "
                f"requests per run median {statistics.median(requests):.0f} (min {min(requests)}, max {max(requests)})"
            )
    finally:
        moto.stdin.close()
        moto.wait(timeout=10)
        os.unlink(log_file.name)


if __name__ == "__main__":
    main()
