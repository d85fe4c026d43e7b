#!/usr/bin/env python3
"""Side-by-side comparisons for PERFORMANCE.md; run through scripts/compare.sh.

Sections (--only picks some):
  s3      leasectl --json vs scripts/boto3_leases.py (32 threads) vs raw HTTP
          (curl for the list pages, wrk for the GETs), N = 1,000 and 10,000
          prefixes on a loopback S3 server: moto (threaded) and s3s-fs.
  pod     the pod scan vs lslocks + ps -eo pid,ppid,comm (hyperfine), with the
          machine topped up to ~1,000 processes.
  idle    the console's CPU over --idle-seconds with nothing changing.
  frame   the console's time to first frame, and to the first frame with rows.
  rtt     latency-realistic: s3s-fs behind examples/rtt_proxy.rs adding a round
          trip (--rtts, default 0,10,30,80 ms) to every request; leasectl --json
          vs boto3 (32 threads) vs s5cmd cp 's3://…/backups/*/LEASE' (256 workers)
          vs raw HTTP (curl list pages + wrk GETs at 32 connections, through the
          proxy) and the computed limit, pages × RTT + ceil(N / c) × RTT; the
          proxy counts each contender's requests. Then leasectl --concurrency K
          at --sweep-rtt (when the binary has the option).
  reqrate the console (--read-only, 200×50 tmux pane) on S3 through the proxy
          (RTT 0) at --reqrate-n prefixes for --idle-seconds: requests per
          minute by kind (proxy counters) and its CPU (/proc/PID/stat). With
          --populations (fresh30, fresh3600, halfstale, stale, absent; default
          "mix", the s3 section's mix) each population in turn, on each of
          --reqrate-servers (s3s-fs, seaweedfs, moto); fresh30 has live
          holders renewing every --renew-every seconds (a thread pool PUTting
          new stamps; the renewals achieved are reported). --reqrate-serve
          measures `leasectl serve` the same way.
  first   time until the console shows its first 1,000 rows (and all of them)
          against --first-server (s3s-fs or seaweedfs) directly at --first-n
          prefixes (tmux polling).

Every tool of a comparison runs in the same run, interleaved (the order rotates
each round), against the same server. Prints a Markdown table and writes
--out (JSON). Processes it starts are stopped by pid.
"""
import argparse
import json
import math
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import boto3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY, SECRET, REGION = "leasectlbench", "leasectlbenchsecret0000", "us-east-1"
ENV = dict(
    os.environ,
    AWS_ACCESS_KEY_ID=KEY,
    AWS_SECRET_ACCESS_KEY=SECRET,
    AWS_REGION=REGION,
    AWS_DEFAULT_REGION=REGION,
    AWS_EC2_METADATA_DISABLED="true",
)
for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
    ENV.pop(k, None)
CONCURRENCY = 32


def log(*a):
    print("compare:", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ servers


SEAWEEDFS_PORTS = ["s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port",
                   "volume.port.grpc", "filer.port", "filer.port.grpc", "webdav.port",
                   "admin.port", "admin.port.grpc"]


class Server:
    def __init__(self, kind, s3s_fs=None):
        self.kind = kind
        self.root = None
        if kind == "seaweedfs":
            # As the tests start it (tests/it/common): `weed mini` on free ports.
            venv = os.environ.get("LEASECTL_VENV_DIR", os.path.join(REPO, ".venv"))
            weed = os.environ.get("WEED", os.path.join(venv, "seaweedfs-4.48", "bin", "weed"))
            self.root = tempfile.mkdtemp(prefix="leasectl-weed-")
            ports = [free_port() for _ in SEAWEEDFS_PORTS]
            port = ports[0]
            self.proc = subprocess.Popen(
                [weed, "mini", f"-dir={self.root}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-volume.max=2000",
                 *[f"-{f}={p}" for f, p in zip(SEAWEEDFS_PORTS, ports)],
                 "-s3.port.iceberg=0", "-s3.port.lance=0",
                 f"-filer.localSocket={self.root}/filer.sock",
                 f"-s3.localSocket={self.root}/s3.sock"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(ENV))
        elif kind == "moto":
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(REPO, "scripts/moto_server.py"), "--threaded"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            port = int(self.proc.stdout.readline())
        else:
            self.root = tempfile.mkdtemp(prefix="leasectl-s3s-")
            port = free_port()
            self.proc = subprocess.Popen(
                [s3s_fs, "--host", "127.0.0.1", "--port", str(port),
                 "--access-key", KEY, "--secret-key", SECRET, self.root],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(os.environ, RUST_LOG="error"),
            )
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port}"
        self.client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name=REGION,
            config=Config(max_pool_connections=32, s3={"addressing_style": "path"}),
        )
        if kind == "seaweedfs":
            # It answers before it can store anything: ready once a write works.
            t0 = time.monotonic()
            while True:
                try:
                    self.client.create_bucket(Bucket="leasectl-ready")
                    self.client.put_object(Bucket="leasectl-ready", Key="ready", Body=b"ready")
                    break
                except Exception:  # noqa: BLE001
                    if time.monotonic() - t0 > 90:
                        sys.exit("SeaweedFS did not start within 90 s")
                    time.sleep(0.5)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)


def lease_body(i, now):
    """A realistic mix: 1 in 20 prefixes has no LEASE, 3 in 20 are stale."""
    if i % 20 == 0:
        return None
    age = 120 if i % 20 in (2, 3, 4) else i % 25
    t = now - timedelta(seconds=age)
    stamp = lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    return json.dumps({
        "instance_id": f"{(i * 0x9E3779B97F4A7C15) % (1 << 128):032x}",
        "acquired_at": stamp(now - timedelta(hours=1)),
        "renewed_at": stamp(t),
        "ttl_s": 3000,
    }).encode()


def population_body(pop, i, now):
    """One prefix's LEASE for a population (None: no LEASE, a data object only)."""
    if pop == "mix":
        return lease_body(i, now)
    if pop == "absent":
        return None
    stale = pop == "stale" or (pop == "halfstale" and i % 2 == 0)
    ttl = 30 if pop == "fresh30" else 3600 if pop in ("fresh3600", "halfstale") else 30
    age = 7200 if stale else (i % 10 if ttl == 30 else i % 600)
    t = now - timedelta(seconds=age)
    stamp = lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    return json.dumps({
        "instance_id": f"{(i * 0x9E3779B97F4A7C15) % (1 << 128):032x}",
        "acquired_at": stamp(now - timedelta(hours=3)),
        "renewed_at": stamp(t),
        "ttl_s": ttl,
    }).encode()


class Renewer:
    """Live holders: every LEASE of `bucket` rewritten with a new stamp every
    `every` seconds (best effort, 32 threads); counts the renewals done."""

    def __init__(self, server, bucket, n, every):
        import threading
        self.done, self.stop_ev = 0, threading.Event()
        self.lock = threading.Lock()

        def run():
            pool = ThreadPoolExecutor(32)
            while not self.stop_ev.is_set():
                t0 = time.monotonic()

                def put(i):
                    if self.stop_ev.is_set():
                        return
                    body = population_body("fresh30", i, datetime.now(timezone.utc) +
                                           timedelta(seconds=i % 10))
                    server.client.put_object(Bucket=bucket, Key=f"backups/db{i:05d}/LEASE",
                                             Body=body)
                    with self.lock:
                        self.done += 1

                list(pool.map(put, range(n)))
                self.stop_ev.wait(max(0.0, every - (time.monotonic() - t0)))
            pool.shutdown()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def count(self):
        with self.lock:
            return self.done

    def stop(self):
        self.stop_ev.set()
        self.thread.join(60)


def seed(server, bucket, n, pop="mix"):
    s3 = server.client
    try:
        s3.create_bucket(Bucket=bucket)
    except Exception:  # noqa: BLE001 (already there: seeded again in place)
        pass
    now = datetime.now(timezone.utc)

    def put(i):
        p = f"backups/db{i:05d}/"
        body = population_body(pop, i, now)
        if body is None:
            s3.put_object(Bucket=bucket, Key=p + "chunk-000", Body=b"x")
            if pop != "mix":
                s3.delete_object(Bucket=bucket, Key=p + "LEASE")
        else:
            s3.put_object(Bucket=bucket, Key=p + "LEASE", Body=body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(n)))


def signed(url):
    req = AWSRequest(method="GET", url=url)
    S3SigV4Auth(Credentials(KEY, SECRET), "s3", REGION).add_auth(req)
    h = req.headers
    return h["X-Amz-Date"], h["X-Amz-Content-SHA256"], h["Authorization"]


def raw_requests(server, bucket, n, workdir, base_url=None):
    """The list page URLs (tokens fetched in advance) and the signed GET lines,
    signed for base_url (the server, or a proxy in front of it)."""
    s3 = server.client
    base_url = base_url or server.url
    pages, token = [], None
    while True:
        q = f"list-type=2&delimiter=%2F&prefix=backups%2F"
        kw = dict(Bucket=bucket, Prefix="backups/", Delimiter="/")
        if token:
            from urllib.parse import quote
            q += "&continuation-token=" + quote(token, safe="")
            kw["ContinuationToken"] = token
        pages.append(f"{base_url}/{bucket}?{q}")
        out = s3.list_objects_v2(**kw)
        token = out.get("NextContinuationToken")
        if not token:
            break
    curl = ["curl", "-sS", "-o", "/dev/null"]
    first = True
    for u in pages:
        if not first:
            curl += ["--next", "-sS", "-o", "/dev/null"]
        first = False
        d, sha, auth = signed(u)
        curl += ["-H", f"x-amz-date: {d}", "-H", f"x-amz-content-sha256: {sha}",
                 "-H", f"Authorization: {auth}", u]
    keyfile = os.path.join(workdir, f"keys-{bucket}.tsv")
    with open(keyfile, "w") as f:
        for i in range(n):
            path = f"/{bucket}/backups/db{i:05d}/LEASE"
            d, sha, auth = signed(base_url + path)
            f.write(f"{path}\t{d}\t{sha}\t{auth}\n")
    return curl, keyfile, len(pages)


def timed(cmd, rss=False):
    """Runs cmd; returns (seconds, peak RSS KiB or None, stdout)."""
    rss_file = None
    if rss:
        fd, rss_file = tempfile.mkstemp()
        os.close(fd)
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file] + cmd
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.monotonic() - t0
    peak = None
    if rss_file:
        with open(rss_file) as f:
            lines = [x for x in f.read().split() if x.isdigit()]
        os.unlink(rss_file)
        peak = int(lines[-1]) if lines else None
    return dt, peak, p



def raw_run(curl, wrk, n, samples):
    """One raw-limit run (c): the list pages with curl, then the GETs with wrk.
    The wrk run ends at the N-th answer; a few requests still in flight may be
    answered and counted too. Exits when either failed or an answer was not
    200/404."""
    t1, _, p1 = timed(curl)
    t2, _, p2 = timed(wrk)
    out = p2.stdout.decode()
    got = re.search(r"wrk-answered (\d+) ", out)
    if p1.returncode or p2.returncode or not got or int(got[1]) < n \
            or "wrk-unexpected-status 0" not in out:
        sys.exit(f"raw run failed: {p1.stderr!r} {out!r} {p2.stderr!r}")
    samples["c_list"].append(t1)
    samples["c_get"].append(t2)
    samples["c"].append(t1 + t2)

def s3_section(args, results):
    kinds = ["moto", "s3s-fs"] if args.server == "both" else [args.server]
    workdir = tempfile.mkdtemp(prefix="leasectl-compare-")
    try:
        for kind in kinds:
            server = Server(kind, args.s3s_fs)
            try:
                for n in args.ns:
                    bucket = f"bench-{n}"
                    log(f"{kind}: seeding {n} prefixes")
                    t0 = time.monotonic()
                    seed(server, bucket, n)
                    log(f"{kind}: seeded in {time.monotonic() - t0:.1f}s")
                    curl, keyfile, npages = raw_requests(server, bucket, n, workdir)
                    target = f"s3://{bucket}/backups/"
                    tools = {
                        "a": [args.leasectl, "--json", "--no-pod", "--endpoint-url",
                              server.url, "--path-style", "--region", REGION, target],
                        "b": [sys.executable, os.path.join(REPO, "scripts/boto3_leases.py"),
                              "--endpoint-url", server.url, "--threads", str(CONCURRENCY),
                              target],
                    }
                    wrk = ["wrk", "-t", "1", "-c", str(CONCURRENCY), "-d", "600s",
                           "--timeout", "30s", "-s", os.path.join(REPO, "scripts/compare_wrk.lua"),
                           server.url, "--", keyfile, "1"]
                    samples = {"a": [], "b": [], "c": [], "c_list": [], "c_get": []}
                    rss = {"a": [], "b": []}
                    order = ["a", "b", "c"]
                    runs = min(args.runs, args.moto_runs) if kind == "moto" else args.runs
                    for r in range(runs):
                        for tool in order[r % 3:] + order[: r % 3]:
                            if tool == "c":
                                raw_run(curl, wrk, n, samples)
                                continue
                            dt, peak, p = timed(tools[tool], rss=True)
                            doc = json.loads(p.stdout or b"{}")
                            got = (len(doc["targets"][0]["prefixes"]) if tool == "a"
                                   else doc.get("prefixes"))
                            if p.returncode not in (0, 3) or got != n:
                                sys.exit(f"({tool}) failed: exit {p.returncode}, {got} prefixes, "
                                         f"{p.stderr.decode()[-2000:]}")
                            samples[tool].append(dt)
                            rss[tool].append(peak)
                        log(f"{kind} n={n} round {r + 1}: "
                            + " ".join(f"{t}={samples[t][-1]:.3f}s" for t in "abc"))
                    med = {k: statistics.median(v) for k, v in samples.items()}
                    results.setdefault("s3", []).append({
                        "server": kind, "n": n, "runs": runs, "list_pages": npages,
                        "median_s": med,
                        "min_s": {k: min(v) for k, v in samples.items()},
                        "peak_rss_kib": {k: max(v) for k, v in rss.items()},
                        "a_over_b": med["a"] / med["b"],
                        "a_over_c": med["a"] / med["c"],
                    })
            finally:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------ RTT proxy


class Proxy:
    """examples/rtt_proxy.rs in front of a server; counters over HTTP."""

    def __init__(self, binary, upstream, rtt_ms=0, extra=(), ctx=None, timeout=10):
        """`extra`: more of the proxy's options; `ctx`: the SSL context of a
        proxy serving HTTPS (its control requests go the same way)."""
        self.ctx, self.timeout = ctx, timeout
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--upstream", upstream,
             "--rtt-ms", str(rtt_ms), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        scheme = "https" if ctx else "http"
        self.url = f"{scheme}://" + self.proc.stdout.readline().decode().strip()

    def _raw(self, method, path):
        req = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(req, timeout=self.timeout, context=self.ctx) as r:
            return r.read()

    def _call(self, method, path):
        body = self._raw(method, path)
        return json.loads(body) if body else None

    def config(self, rtt_ms=None, slowdown_above=None):
        q = []
        if rtt_ms is not None:
            q.append(f"rtt_ms={rtt_ms}")
        if slowdown_above is not None:
            q.append(f"slowdown_above={slowdown_above}")
        self._call("POST", "/__proxy/config?" + "&".join(q))

    def reset(self):
        self._call("POST", "/__proxy/reset")

    def stats(self):
        return self._call("GET", "/__proxy/stats")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def has_option(binary, option):
    out = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return option in out.stdout.decode()


def count_files(d):
    return sum(len(files) for _, _, files in os.walk(d))


def rtt_section(args, results):
    """The latency-realistic comparison (s3s-fs behind the RTT proxy)."""
    workdir = tempfile.mkdtemp(prefix="leasectl-rtt-")
    server = Server("s3s-fs", args.s3s_fs)
    proxy = Proxy(args.rtt_proxy, server.url)
    rows, sweep = [], []
    sweep_ok = has_option(args.leasectl, "--concurrency")
    try:
        for n in args.rtt_ns:
            bucket = f"rtt-{n}"
            log(f"rtt: seeding {n} prefixes")
            seed(server, bucket, n)
            leases = sum(1 for i in range(n) if lease_body(i, datetime.now(timezone.utc)))
            target = f"s3://{bucket}/backups/"
            for rtt in args.rtts:
                proxy.config(rtt_ms=rtt)
                curl, keyfile, npages = raw_requests(server, bucket, n, workdir,
                                                     base_url=proxy.url)
                lc = [args.leasectl, "--json", "--no-pod", "--endpoint-url", proxy.url,
                      "--path-style", "--region", REGION, target]
                tools = {
                    "a": lc,
                    "b": [sys.executable, os.path.join(REPO, "scripts/boto3_leases.py"),
                          "--endpoint-url", proxy.url, "--threads", str(CONCURRENCY), target],
                    "s": [args.s5cmd, "--endpoint-url", proxy.url, "--numworkers", "256",
                          "cp", f"s3://{bucket}/backups/*/LEASE"],
                }
                wrk = ["wrk", "-t", "1", "-c", str(CONCURRENCY), "-d", "600s",
                       "--timeout", "30s", "-s", os.path.join(REPO, "scripts/compare_wrk.lua"),
                       proxy.url, "--", keyfile, "1"]
                samples = {k: [] for k in ("a", "b", "s", "c", "c_list", "c_get")}
                reqs = {}
                order = ["a", "b", "s", "c"]
                for r in range(args.rtt_runs):
                    for tool in order[r % 4:] + order[: r % 4]:
                        proxy.reset()
                        if tool == "c":
                            raw_run(curl, wrk, n, samples)
                        elif tool == "s":
                            outdir = tempfile.mkdtemp(dir=workdir)
                            dt, _, p = timed(tools["s"] + [outdir + "/"])
                            got = count_files(outdir)
                            shutil.rmtree(outdir, ignore_errors=True)
                            if p.returncode or got != leases:
                                sys.exit(f"(s5cmd) failed: exit {p.returncode}, {got} files of "
                                         f"{leases}, {p.stderr.decode()[-2000:]}")
                            samples["s"].append(dt)
                        else:
                            dt, _, p = timed(tools[tool])
                            doc = json.loads(p.stdout or b"{}")
                            got = (len(doc["targets"][0]["prefixes"]) if tool == "a"
                                   else doc.get("prefixes"))
                            if p.returncode not in (0, 3) or got != n:
                                sys.exit(f"({tool}) failed: exit {p.returncode}, {got} prefixes, "
                                         f"{p.stderr.decode()[-2000:]}")
                            samples[tool].append(dt)
                        st = proxy.stats()
                        reqs[tool] = {"by_kind": st["by_kind"], "by_status": st["by_status"],
                                      "max_in_flight": st["max_in_flight"],
                                      "connections": st["connections"]}
                    log(f"rtt n={n} rtt={rtt}ms round {r + 1}: "
                        + " ".join(f"{t}={samples[t][-1]:.3f}s" for t in "absc"))
                med = {k: statistics.median(v) for k, v in samples.items()}
                sec = rtt / 1000
                limit = {c: npages * sec + math.ceil(n / c) * sec
                         for c in (args.leasectl_concurrency, 256)}
                rows.append({"n": n, "rtt_ms": rtt, "runs": args.rtt_runs, "list_pages": npages,
                             "median_s": med, "min_s": {k: min(v) for k, v in samples.items()},
                             "limit_s": limit, "requests": reqs,
                             "a_over_s": med["a"] / med["s"], "a_over_b": med["a"] / med["b"],
                             "a_over_c": med["a"] / med["c"]})
            if n == args.sweep_n:
                proxy.config(rtt_ms=args.sweep_rtt)
                if not sweep_ok:
                    log("rtt: this leasectl has no --concurrency option; sweep skipped")
                    continue
                ks = args.sweep
                samples = {k: [] for k in ks}
                reqs = {}
                for r in range(args.rtt_runs):
                    for k in ks[r % len(ks):] + ks[: r % len(ks)]:
                        proxy.reset()
                        dt, _, p = timed([args.leasectl, "--concurrency", str(k), "--json",
                                          "--no-pod", "--endpoint-url", proxy.url, "--path-style",
                                          "--region", REGION, target])
                        doc = json.loads(p.stdout or b"{}")
                        if p.returncode not in (0, 3) or len(doc["targets"][0]["prefixes"]) != n:
                            sys.exit(f"(sweep {k}) failed: exit {p.returncode}, "
                                     f"{p.stderr.decode()[-2000:]}")
                        samples[k].append(dt)
                        st = proxy.stats()
                        reqs[k] = {"max_in_flight": st["max_in_flight"],
                                   "by_status": st["by_status"]}
                    log(f"sweep round {r + 1}: "
                        + " ".join(f"{k}={samples[k][-1]:.3f}s" for k in ks))
                sec = args.sweep_rtt / 1000
                npages = math.ceil(n / 1000)
                for k in ks:
                    lim = npages * sec + math.ceil(n / k) * sec
                    sweep.append({"n": n, "rtt_ms": args.sweep_rtt, "concurrency": k,
                                  "median_s": statistics.median(samples[k]), "limit_s": lim,
                                  "requests": reqs[k]})
            if n == args.sweep_n and args.slowdown_above:
                # S3 answers 503 SlowDown past its per-prefix rates: leasectl
                # should slow down and still report every prefix.
                # At the sweep's largest concurrency, so that the limit is reached.
                k = ["--concurrency", str(max(args.sweep))] if sweep_ok else []
                proxy.config(rtt_ms=args.sweep_rtt, slowdown_above=args.slowdown_above)
                proxy.reset()
                dt, _, p = timed([args.leasectl, *k, "--json", "--no-pod", "--endpoint-url",
                                  proxy.url, "--path-style", "--region", REGION, target])
                st = proxy.stats()
                proxy.config(slowdown_above=0)
                try:
                    got = len(json.loads(p.stdout)["targets"][0]["prefixes"])
                except (ValueError, KeyError, IndexError):
                    got = 0
                slowdown = {"n": n, "rtt_ms": args.sweep_rtt, "limit_per_s": args.slowdown_above,
                            "concurrency": max(args.sweep) if sweep_ok else None,
                            "seconds": dt, "exit": p.returncode, "prefixes": got,
                            "by_status": st["by_status"],
                            "stderr_lines": len(p.stderr.decode().splitlines())}
                log(f"slowdown: {slowdown}")
                results["slowdown"] = slowdown
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    results["rtt"] = rows
    results["sweep"] = {"available": sweep_ok, "rows": sweep, "n": args.sweep_n,
                        "rtt_ms": args.sweep_rtt}


# ------------------------------------------------------------------ pod scan


def count_procs():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def pod_section(args, results):
    started = []
    tmp = tempfile.mkdtemp(prefix="leasectl-pod-")
    try:
        lock = os.path.join(tmp, ".writer.lock")
        open(lock, "w").close()
        env = dict(os.environ, CLOUD_WRITER_LEASE="1")
        # One holder and two waiters on a real lock file, a share of processes
        # with the lease variables, the rest plain sleepers.
        started.append(subprocess.Popen(["flock", lock, "sleep", "900"], env=env))
        time.sleep(0.2)
        for _ in range(2):
            started.append(subprocess.Popen(["flock", lock, "sleep", "900"], env=env))
        need = max(0, args.procs - count_procs())
        for i in range(need):
            e = env if i % 10 == 0 else None
            started.append(subprocess.Popen(["sleep", "900"], env=e,
                                            stdin=subprocess.DEVNULL))
        time.sleep(0.5)
        n = count_procs()
        log(f"pod: {n} processes on the machine")
        out = os.path.join(tmp, "hyperfine.json")
        cmds = [
            ("leasectl_auto", f"{args.leasectl} --json"),
            ("leasectl_all", f"{args.leasectl} --json --pod-root 1"),
            ("lslocks", "lslocks"),
            ("ps", "ps -eo pid,ppid,comm"),
        ]
        hf = ["hyperfine", "-N", "-i", "--warmup", "3", "--runs", str(args.pod_runs),
              "--export-json", out, "--style", "none"]
        for name, c in cmds:
            hf += ["-n", name, c]
        subprocess.run(hf, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            data = json.load(f)
        med = {r["command"]: r["median"] for r in data["results"]}
        base = med["lslocks"] + med["ps"]
        results["pod"] = {
            "processes": n,
            "median_s": med,
            "lslocks_plus_ps_s": base,
            "auto_over_base": med["leasectl_auto"] / base,
            "all_over_base": med["leasectl_all"] / base,
        }
    finally:
        for p in started:
            p.kill()
        for p in started:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ console


def local_store(n):
    d = tempfile.mkdtemp(prefix="leasectl-store-")
    now = datetime.now(timezone.utc)
    for i in range(n):
        p = os.path.join(d, f"db{i:05d}")
        os.makedirs(p)
        b = lease_body(i, now)
        if b is not None:
            with open(os.path.join(p, "LEASE"), "wb") as f:
                f.write(b)
    return d


class Tmux:
    def __init__(self):
        self.sock = f"leasectl-bench-{os.getpid()}"
        self.run("new-session", "-d", "-s", "bench", "-x", "200", "-y", "50", "sleep 3600")

    def run(self, *a):
        return subprocess.run(["tmux", "-L", self.sock, *a], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=ENV).stdout.decode()

    def window(self, name, cmd):
        return self.run("new-window", "-d", "-P", "-F", "#{pane_pid}", "-t", "bench",
                        "-n", name, cmd).strip()

    def capture(self, name):
        return self.run("capture-pane", "-p", "-t", f"bench:{name}")

    def kill_window(self, name):
        self.run("kill-window", "-t", f"bench:{name}")

    def stop(self):
        self.run("kill-server")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def idle_section(args, results, tmux):
    out = []
    hz = os.sysconf("SC_CLK_TCK")
    for label, binary in consoles(args):
        for n in args.idle_ns:
            out.append(idle_one(args, tmux, hz, label, binary, n))
    results["idle"] = out


def idle_one(args, tmux, hz, label, binary, n):
    d = local_store(n)
    try:
        name = f"idle{n}"
        pid = tmux.window(name, f"exec {binary} --read-only file://{d}/")
        t0 = time.monotonic()
        while rows_shown(tmux.capture(name)) < n and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        time.sleep(8)  # start-up and the first gathers are not idle
        if rows_shown(tmux.capture(name)) < n:
            sys.exit(f"console did not show {n} rows:\n{tmux.capture(name)}")
        t0, c0 = time.monotonic(), cpu_ticks(pid)
        time.sleep(args.idle_seconds)
        t1, c1 = time.monotonic(), cpu_ticks(pid)
        tmux.kill_window(name)
        pct = 100.0 * (c1 - c0) / hz / (t1 - t0)
        log(f"idle {label} n={n}: {pct:.2f}% of a core")
        return {"console": label, "prefixes": n, "seconds": round(t1 - t0, 1),
                "cpu_pct": pct}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def frame_section(args, results, tmux):
    n = args.frame_n
    d = local_store(n)
    first, full = [], []
    try:
        for r in range(args.frame_runs):
            name = f"ff{r}"
            t0 = time.monotonic()
            tmux.window(name, f"exec {args.leasectl} --read-only file://{d}/")
            t_first = t_full = None
            while time.monotonic() - t0 < 10:
                screen = tmux.capture(name)
                now = time.monotonic() - t0
                if t_first is None and "leasectl" in screen and "view" in screen:
                    t_first = now
                if f"leases 1/{n}" in screen:
                    t_full = now
                    break
            tmux.kill_window(name)
            if t_first is None or t_full is None:
                sys.exit("the console drew nothing within 10 s")
            first.append(t_first)
            full.append(t_full)
            time.sleep(0.3)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    results["frame"] = {
        "prefixes": n,
        "runs": args.frame_runs,
        "first_frame_median_s": statistics.median(first),
        "first_rows_median_s": statistics.median(full),
        "first_frame_min_s": min(first),
    }


ROWS_RE = re.compile(r"leases\s+\d+/([\d,]+)")


def rows_shown(screen):
    """The row count of the leases view's title (`leases 1/N`), or 0."""
    m = ROWS_RE.search(screen)
    return int(m[1].replace(",", "")) if m else 0


def consoles(args):
    """The console builds to measure: (label, binary), the baseline first."""
    out = [("baseline", args.baseline_leasectl)] if args.baseline_leasectl else []
    return out + [("this build", args.leasectl)]


def reqrate_section(args, results, tmux):
    """The console (and serve) watching S3 through the proxy: requests per minute, CPU."""
    n = args.reqrate_n
    hz = os.sysconf("SC_CLK_TCK")
    out = []
    for kind in args.reqrate_servers:
        server = Server(kind, args.s3s_fs)
        proxy = Proxy(args.rtt_proxy, server.url, rtt_ms=args.reqrate_rtt)
        try:
            bucket = f"watch-{n}"
            for pop in args.populations:
                log(f"reqrate {kind}: seeding {n} prefixes, population {pop}")
                seed(server, bucket, n, pop)
                for label, binary in consoles(args):
                    for front in (["console", "serve"] if args.reqrate_serve else ["console"]):
                        row = reqrate_one(args, tmux, hz, server, proxy, bucket, n, pop,
                                          label, binary, front)
                        out.append(row)
                        time.sleep(1)
        finally:
            proxy.stop()
            server.stop()
    results["reqrate"] = out


def reqrate_one(args, tmux, hz, server, proxy, bucket, n, pop, label, binary, front):
    common = (f"--endpoint-url {proxy.url} --path-style --region {REGION} "
              f"s3://{bucket}/backups/")
    renewer = Renewer(server, bucket, n, args.renew_every) if pop == "fresh30" else None
    name = "reqrate"
    serve_proc = None
    try:
        if front == "console":
            pid = tmux.window(name, f"exec {binary} --read-only {common}")
            t0 = time.monotonic()
            while rows_shown(tmux.capture(name)) < n:
                if time.monotonic() - t0 > 180:
                    sys.exit(f"console did not show {n} rows:\n{tmux.capture(name)}")
                time.sleep(0.2)
        else:
            port = free_port()
            serve_proc = subprocess.Popen(
                [binary, "serve", "--no-pod", "--listen", f"127.0.0.1:{port}",
                 *common.split()], env=ENV, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            pid = serve_proc.pid
            t0 = time.monotonic()
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5):
                        break
                except Exception:  # noqa: BLE001 (503 until the first snapshot)
                    if time.monotonic() - t0 > 180:
                        sys.exit("serve gave no metrics within 180 s")
                    time.sleep(0.5)
        time.sleep(8)  # the first gathers are not the steady state
        proxy.reset()
        r0 = renewer.count() if renewer else 0
        t0, c0 = time.monotonic(), cpu_ticks(pid)
        time.sleep(args.idle_seconds)
        t1, c1 = time.monotonic(), cpu_ticks(pid)
        st = proxy.stats()
        renewed = (renewer.count() - r0) if renewer else 0
        screen = tmux.capture(name) if front == "console" else ""
    finally:
        if front == "console":
            tmux.kill_window(name)
        if serve_proc:
            serve_proc.terminate()
            serve_proc.wait(10)
        if renewer:
            renewer.stop()
    minutes = (t1 - t0) / 60
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    row = {
        "console": label, "front": front, "server": server.kind, "population": pop,
        "prefixes": n, "rtt_ms": args.reqrate_rtt,
        "seconds": round(t1 - t0, 1), "requests_per_min": st["requests"] / minutes,
        "per_min_by_kind": {k: v / minutes for k, v in st["by_kind"].items()},
        "by_status": st["by_status"], "max_in_flight": st["max_in_flight"],
        "cpu_pct": 100.0 * (c1 - c0) / hz / (t1 - t0),
        "renewals_per_min": renewed / minutes,
        "status_bar": lines[-1] if lines else "",
    }
    log(f"reqrate {server.kind} {pop} {label} {front}: {row['requests_per_min']:.0f} "
        f"requests/min, {row['cpu_pct']:.2f}% CPU"
        + (f", {row['renewals_per_min']:.0f} renewals/min" if renewer else ""))
    return row


def first_section(args, results, tmux):
    """Time until the console shows its first 1,000 rows, s3s-fs directly."""
    n = args.first_n
    server = Server(args.first_server, args.s3s_fs)
    rows = []
    try:
        bucket = f"first-{n}"
        log(f"first: seeding {n} prefixes")
        seed(server, bucket, n)
        for label, binary in consoles(args):
            rows.append(first_runs(args, tmux, label, binary, server, bucket, n))
    finally:
        server.stop()
    results["first"] = rows


def first_runs(args, tmux, label, binary, server, bucket, n):
    first, thousand, full = [], [], []
    for r in range(args.frame_runs):
        name = f"first{r}"
        t0 = time.monotonic()
        tmux.window(name, f"exec {binary} --read-only --endpoint-url {server.url} "
                          f"--path-style --region {REGION} s3://{bucket}/backups/")
        t_first = t_1000 = t_full = None
        while time.monotonic() - t0 < 60:
            screen = tmux.capture(name)
            now = time.monotonic() - t0
            shown = rows_shown(screen)
            if t_first is None and "leasectl" in screen and "view" in screen:
                t_first = now
            if t_1000 is None and shown >= min(1000, n):
                t_1000 = now
            if shown >= n:
                t_full = now
                break
        tmux.kill_window(name)
        if None in (t_first, t_1000, t_full):
            sys.exit(f"the console did not show {n} rows within 60 s")
        first.append(t_first)
        thousand.append(t_1000)
        full.append(t_full)
        log(f"first {label} run {r + 1}: frame {t_first:.3f}s, 1,000 rows {t_1000:.3f}s, "
            f"all {t_full:.3f}s")
        time.sleep(0.3)
    return {
        "console": label, "prefixes": n, "runs": args.frame_runs,
        "first_frame_median_s": statistics.median(first),
        "rows_1000_median_s": statistics.median(thousand),
        "rows_1000_min_s": min(thousand),
        "all_rows_median_s": statistics.median(full),
    }


# ------------------------------------------------------------------ report


def report(results, args):
    ms = lambda s: f"{s * 1000:.0f} ms" if s >= 0.1 else f"{s * 1000:.1f} ms"  # noqa: E731
    print("\n### S3: leasectl (a) vs boto3 32 threads (b) vs raw HTTP (c)\n")
    print("| server | N | runs | (a) leasectl | (b) boto3 | (c) raw: list + GETs | (a)/(b) | (a)/(c) "
          "| (a) peak RSS | (b) peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results.get("s3", []):
        m = r["median_s"]
        print(f"| {r['server']} | {r['n']:,} | {r['runs']} | {ms(m['a'])} | {ms(m['b'])} | {ms(m['c'])} "
              f"({ms(m['c_list'])} + {ms(m['c_get'])}) | {r['a_over_b']:.2f} "
              f"({1 / r['a_over_b']:.1f}× faster) | {r['a_over_c']:.2f} "
              f"| {r['peak_rss_kib']['a'] / 1024:.1f} MiB | {r['peak_rss_kib']['b'] / 1024:.1f} MiB |")
    if "pod" in results:
        p = results["pod"]
        m = p["median_s"]
        print(f"\n### Pod scan, {p['processes']} processes (hyperfine medians)\n")
        print("| leasectl --json (auto pod) | leasectl --json --pod-root 1 | lslocks | ps -eo pid,ppid,comm "
              "| lslocks + ps | auto / (lslocks+ps) | all / (lslocks+ps) |")
        print("|---|---|---|---|---|---|---|")
        print(f"| {ms(m['leasectl_auto'])} | {ms(m['leasectl_all'])} | {ms(m['lslocks'])} "
              f"| {ms(m['ps'])} | {ms(p['lslocks_plus_ps_s'])} | {p['auto_over_base']:.2f} "
              f"| {p['all_over_base']:.2f} |")
    if "idle" in results:
        print("\n### Console idle CPU (read-only, local store, pod scan on, refresh 5 s)\n")
        print("| console | prefixes | window | CPU (% of one core) |")
        print("|---|---|---|---|")
        for r in results["idle"]:
            print(f"| {r.get('console', '')} | {r['prefixes']:,} | {r['seconds']} s "
                  f"| {r['cpu_pct']:.2f} % |")
    if "frame" in results:
        f = results["frame"]
        print(f"\n### Console first frame ({f['runs']} runs, tmux polling, local store of "
              f"{f['prefixes']:,} prefixes)\n")
        print("| first frame (median) | first frame (min) | first frame with rows (median) |")
        print("|---|---|---|")
        print(f"| {ms(f['first_frame_median_s'])} | {ms(f['first_frame_min_s'])} "
              f"| {ms(f['first_rows_median_s'])} |")
    if "rtt" in results:
        lc = results["rtt"][0]["limit_s"] if results["rtt"] else {}
        c0 = min(lc, key=int) if lc else CONCURRENCY
        print("\n### Latency-realistic: s3s-fs behind the RTT proxy (medians)\n")
        print(f"(a) leasectl --json --no-pod, (b) boto3 32 threads, (s) s5cmd cp 256 workers, "
              f"(c) raw HTTP measured: curl list pages + wrk GETs at {CONCURRENCY} connections; "
              f"limit(c) = list pages × RTT + ceil(N / c) × RTT.\n")
        print(f"| N | RTT | runs | (a) leasectl | (b) boto3 | (s) s5cmd | (c) raw measured "
              f"| limit c={c0} | limit c=256 | (a)/(s) | (a)/(b) | (a)/(c) | (a)/limit c={c0} |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in results["rtt"]:
            m, lim = r["median_s"], r["limit_s"]
            l0, l256 = lim[min(lim, key=int)], lim[max(lim, key=int)]
            ratio = f"{m['a'] / l0:.2f}" if l0 else "–"
            print(f"| {r['n']:,} | {r['rtt_ms']} ms | {r['runs']} | {ms(m['a'])} | {ms(m['b'])} "
                  f"| {ms(m['s'])} | {ms(m['c'])} ({ms(m['c_list'])} + {ms(m['c_get'])}) "
                  f"| {ms(l0) if l0 else '0'} | {ms(l256) if l256 else '0'} "
                  f"| {r['a_over_s']:.2f} | {r['a_over_b']:.2f} | {r['a_over_c']:.2f} | {ratio} |")
        print("\nRequests per run as the proxy counted them (last round; kind: count; "
              "max in flight; connections):\n")
        print("| N | RTT | contender | requests | max in flight | connections | statuses |")
        print("|---|---|---|---|---|---|---|")
        names = {"a": "leasectl", "b": "boto3", "s": "s5cmd", "c": "raw (wrk)"}
        for r in results["rtt"]:
            for t, q in sorted(r["requests"].items()):
                kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(q["by_kind"].items()))
                stat = ", ".join(f"{k}: {v:,}" for k, v in sorted(q["by_status"].items()))
                print(f"| {r['n']:,} | {r['rtt_ms']} ms | {names[t]} | {kinds} "
                      f"| {q['max_in_flight']} | {q['connections']} | {stat} |")
    if "sweep" in results:
        sw = results["sweep"]
        print(f"\n### leasectl --concurrency K, N = {sw['n']:,}, RTT {sw['rtt_ms']} ms (medians)\n")
        print("| K | leasectl | limit (pages × RTT + ceil(N/K) × RTT) | ratio | max in flight |")
        print("|---|---|---|---|---|")
        if not sw["available"]:
            print("| TODO | this leasectl has no `--concurrency` option yet | | | |")
        for r in sw["rows"]:
            print(f"| {r['concurrency']} | {ms(r['median_s'])} | {ms(r['limit_s'])} "
                  f"| {r['median_s'] / r['limit_s']:.2f} | {r['requests']['max_in_flight']} |")
    if "slowdown" in results:
        q = results["slowdown"]
        stat = ", ".join(f"{k}: {v:,}" for k, v in sorted(q["by_status"].items()))
        print(f"\n### 503 SlowDown past {q['limit_per_s']:,} requests/s (N = {q['n']:,}, "
              f"RTT {q['rtt_ms']} ms, --concurrency {q.get('concurrency')})\n")
        print("| leasectl exit | prefixes reported | wall time | answers | stderr lines |")
        print("|---|---|---|---|---|")
        print(f"| {q['exit']} | {q['prefixes']:,} | {ms(q['seconds'])} | {stat} "
              f"| {q['stderr_lines']} |")
    if "reqrate" in results:
        print("\n### Console and serve watching S3 (read-only, 200×50, proxy in front of the "
              "server; requests counted by the proxy)\n")
        print("| server | population | build | front end | requests per minute | by kind "
              "| statuses | CPU (% of one core) | renewals/min |")
        print("|---|---|---|---|---|---|---|---|---|")
        for q in results["reqrate"]:
            kinds = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(q["per_min_by_kind"].items()))
            stat = ", ".join(f"{k}: {v:,}" for k, v in sorted(q["by_status"].items()))
            print(f"| {q.get('server', 's3s-fs')} | {q.get('population', 'mix')} | {q['console']} "
                  f"| {q.get('front', 'console')} | {q['requests_per_min']:,.0f} | {kinds} | {stat} "
                  f"| {q['cpu_pct']:.2f} % | {q.get('renewals_per_min', 0):,.0f} |")
        for q in results["reqrate"]:
            if q.get("status_bar"):
                print(f"\nStatus bar of {q['console']} ({q.get('server')}, {q.get('population')}) "
                      f"at the end: `{q['status_bar']}`")
    if "first" in results:
        print(f"\n### Console first answer ({args.first_server} directly, RTT 0, tmux polling)\n")
        print("| console | prefixes | runs | first frame (median) | first 1,000 rows (median) "
              "| (min) | all rows (median) |")
        print("|---|---|---|---|---|---|---|")
        for f in results["first"]:
            print(f"| {f['console']} | {f['prefixes']:,} | {f['runs']} "
                  f"| {ms(f['first_frame_median_s'])} | {ms(f['rows_1000_median_s'])} "
                  f"| {ms(f['rows_1000_min_s'])} | {ms(f['all_rows_median_s'])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leasectl", required=True)
    ap.add_argument("--only", default="s3,rtt,pod,idle,frame,reqrate,first")
    ap.add_argument("--server", choices=["moto", "s3s-fs", "both"], default="both")
    ap.add_argument("--s3s-fs", default=os.environ.get("S3S_FS"),
                    help="path of the s3s-fs binary (for --server s3s-fs|both)")
    ap.add_argument("--ns", default="1000,10000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--moto-runs", type=int, default=3, help="moto is slow: fewer rounds")
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--pod-runs", type=int, default=30)
    ap.add_argument("--idle-ns", default="100,10000")
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--frame-n", type=int, default=10000)
    ap.add_argument("--frame-runs", type=int, default=10)
    ap.add_argument("--rtt-proxy", default=os.environ.get("RTT_PROXY"),
                    help="path of the examples/rtt_proxy binary (rtt, reqrate)")
    ap.add_argument("--baseline-leasectl", default=os.environ.get("LEASECTL_BASELINE"),
                    help="an older leasectl binary measured beside this one in the console "
                         "sections (idle, reqrate, first)")
    ap.add_argument("--s5cmd", default=os.environ.get("S5CMD", "s5cmd"))
    ap.add_argument("--rtt-ns", default="1000,10000")
    ap.add_argument("--rtts", default="0,10,30,80", help="round-trip times in ms")
    ap.add_argument("--rtt-runs", type=int, default=3)
    ap.add_argument("--leasectl-concurrency", type=int, default=32,
                    help="leasectl's default requests in flight, for the limit column")
    ap.add_argument("--sweep", default="32,64,128,256")
    ap.add_argument("--sweep-n", type=int, default=10000)
    ap.add_argument("--sweep-rtt", type=int, default=30)
    ap.add_argument("--slowdown-above", type=int, default=1000,
                    help="rtt: one more leasectl run with the proxy answering 503 SlowDown "
                         "beyond this many requests per second (0: skip)")
    ap.add_argument("--reqrate-n", type=int, default=10000)
    ap.add_argument("--reqrate-rtt", type=int, default=0)
    ap.add_argument("--first-n", type=int, default=10000)
    ap.add_argument("--first-server", choices=["s3s-fs", "seaweedfs"], default="s3s-fs")
    ap.add_argument("--reqrate-servers", default="s3s-fs",
                    help="comma-separated: s3s-fs, seaweedfs, moto")
    ap.add_argument("--populations", default="mix",
                    help="comma-separated: mix, fresh30, fresh3600, halfstale, stale, absent")
    ap.add_argument("--renew-every", type=float, default=10.0,
                    help="fresh30: seconds between two renewals of each LEASE (TTL/3)")
    ap.add_argument("--reqrate-serve", action="store_true",
                    help="reqrate: measure `leasectl serve` too")
    ap.add_argument("--out", default=os.path.join(REPO, "target", "compare.json"))
    args = ap.parse_args()
    args.ns = [int(x) for x in args.ns.split(",")]
    args.idle_ns = [int(x) for x in args.idle_ns.split(",")]
    args.rtt_ns = [int(x) for x in args.rtt_ns.split(",")]
    args.rtts = [int(x) for x in args.rtts.split(",")]
    args.sweep = [int(x) for x in args.sweep.split(",")]
    args.reqrate_servers = args.reqrate_servers.split(",")
    args.populations = args.populations.split(",")
    only = set(args.only.split(","))
    needs_s3s = (args.server != "moto" and only & {"s3"}) or "rtt" in only \
        or ("reqrate" in only and "s3s-fs" in args.reqrate_servers) \
        or ("first" in only and args.first_server == "s3s-fs")
    if needs_s3s and not args.s3s_fs:
        sys.exit("--server s3s-fs needs --s3s-fs PATH (or S3S_FS); see PERFORMANCE.md")

    results = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if "s3" in only:
        s3_section(args, results)
    if "rtt" in only:
        rtt_section(args, results)
    if "pod" in only:
        pod_section(args, results)
    if only & {"idle", "frame", "reqrate", "first"}:
        tmux = Tmux()
        try:
            if "idle" in only:
                idle_section(args, results, tmux)
            if "frame" in only:
                frame_section(args, results, tmux)
            if "reqrate" in only:
                reqrate_section(args, results, tmux)
            if "first" in only:
                first_section(args, results, tmux)
        finally:
            tmux.stop()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    report(results, args)
    log(f"results written to {args.out}")


if __name__ == "__main__":
    main()
