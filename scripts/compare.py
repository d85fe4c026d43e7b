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

Every tool of a comparison runs in the same run, interleaved (the order rotates
each round), against the same server. Prints a Markdown table and writes
--out (JSON). Processes it starts are stopped by pid.
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
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


class Server:
    def __init__(self, kind, s3s_fs=None):
        self.kind = kind
        self.root = None
        if kind == "moto":
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


def seed(server, bucket, n):
    s3 = server.client
    s3.create_bucket(Bucket=bucket)
    now = datetime.now(timezone.utc)

    def put(i):
        p = f"backups/db{i:05d}/"
        body = lease_body(i, now)
        if body is None:
            s3.put_object(Bucket=bucket, Key=p + "chunk-000", Body=b"x")
        else:
            s3.put_object(Bucket=bucket, Key=p + "LEASE", Body=body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(n)))


def signed(url):
    req = AWSRequest(method="GET", url=url)
    S3SigV4Auth(Credentials(KEY, SECRET), "s3", REGION).add_auth(req)
    h = req.headers
    return h["X-Amz-Date"], h["X-Amz-Content-SHA256"], h["Authorization"]


def raw_requests(server, bucket, n, workdir):
    """The list page URLs (tokens fetched in advance) and the signed GET lines."""
    s3 = server.client
    pages, token = [], None
    while True:
        q = f"list-type=2&delimiter=%2F&prefix=backups%2F"
        kw = dict(Bucket=bucket, Prefix="backups/", Delimiter="/")
        if token:
            from urllib.parse import quote
            q += "&continuation-token=" + quote(token, safe="")
            kw["ContinuationToken"] = token
        pages.append(f"{server.url}/{bucket}?{q}")
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
            d, sha, auth = signed(server.url + path)
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
                                t1, _, p1 = timed(curl)
                                t2, _, p2 = timed(wrk)
                                out = p2.stdout.decode()
                                # The run ends at the N-th answer; a few requests still
                                # in flight may be answered and counted too.
                                got = re.search(r"wrk-answered (\d+) ", out)
                                if p1.returncode or p2.returncode or not got or int(got[1]) < n \
                                        or "wrk-unexpected-status 0" not in out:
                                    sys.exit(f"raw run failed: {p1.stderr!r} {out!r} {p2.stderr!r}")
                                samples["c_list"].append(t1)
                                samples["c_get"].append(t2)
                                samples["c"].append(t1 + t2)
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
    for n in args.idle_ns:
        d = local_store(n)
        try:
            name = f"idle{n}"
            pid = tmux.window(name, f"exec {args.leasectl} --read-only file://{d}/")
            time.sleep(8)  # start-up and the first gathers are not idle
            if f"leases 1/{n}" not in tmux.capture(name):
                sys.exit(f"console did not show {n} rows:\n{tmux.capture(name)}")
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            time.sleep(args.idle_seconds)
            t1, c1 = time.monotonic(), cpu_ticks(pid)
            tmux.kill_window(name)
            pct = 100.0 * (c1 - c0) / hz / (t1 - t0)
            log(f"idle n={n}: {pct:.2f}% of a core")
            out.append({"prefixes": n, "seconds": round(t1 - t0, 1), "cpu_pct": pct})
        finally:
            shutil.rmtree(d, ignore_errors=True)
    results["idle"] = out


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


# ------------------------------------------------------------------ report


def report(results):
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
        print("| prefixes | window | CPU (% of one core) |")
        print("|---|---|---|")
        for r in results["idle"]:
            print(f"| {r['prefixes']:,} | {r['seconds']} s | {r['cpu_pct']:.2f} % |")
    if "frame" in results:
        f = results["frame"]
        print(f"\n### Console first frame ({f['runs']} runs, tmux polling, local store of "
              f"{f['prefixes']:,} prefixes)\n")
        print("| first frame (median) | first frame (min) | first frame with rows (median) |")
        print("|---|---|---|")
        print(f"| {ms(f['first_frame_median_s'])} | {ms(f['first_frame_min_s'])} "
              f"| {ms(f['first_rows_median_s'])} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leasectl", required=True)
    ap.add_argument("--only", default="s3,pod,idle,frame")
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
    ap.add_argument("--out", default=os.path.join(REPO, "target", "compare.json"))
    args = ap.parse_args()
    args.ns = [int(x) for x in args.ns.split(",")]
    args.idle_ns = [int(x) for x in args.idle_ns.split(",")]
    only = set(args.only.split(","))
    if args.server != "moto" and not args.s3s_fs:
        sys.exit("--server s3s-fs needs --s3s-fs PATH (or S3S_FS); see PERFORMANCE.md")

    results = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release},
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if "s3" in only:
        s3_section(args, results)
    if "pod" in only:
        pod_section(args, results)
    if only & {"idle", "frame"}:
        tmux = Tmux()
        try:
            if "idle" in only:
                idle_section(args, results, tmux)
            if "frame" in only:
                frame_section(args, results, tmux)
        finally:
            tmux.stop()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    report(results)
    log(f"results written to {args.out}")


if __name__ == "__main__":
    main()
