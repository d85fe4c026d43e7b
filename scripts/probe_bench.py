#!/usr/bin/env python3
"""A fleet probed through `serve --module` against today's static `serve`, side by side
(issue 47 §4; PERFORMANCE.md, "A fleet of buckets: /probe").

Starts SeaweedFS 4.48 (`weed mini` on loopback, as scripts/compare.py starts it) behind
examples/rtt_proxy.rs at 0 ms (it counts the requests by kind), and seeds --targets
TARGETs `s3://probe-bench-BB/tTTT/` (--buckets buckets) of --prefixes prefixes each
(`pPP/LEASE`, compare.lease_body's mix: one in twenty without a LEASE, three in twenty
stale, the rest fresh with a 3,000 s TTL). Then, one after the other, for --minutes each
after --warmup seconds:

  static  leasectl serve --no-pod --refresh INTERVAL TARGET…  (every TARGET on the
          command line, one process; its own gathers; /metrics scraped every INTERVAL,
          as Prometheus would), with its default --max-requests, and again with
          --max-requests 1000000/min (no budget worth the name);
  probe   leasectl serve --no-pod --module bench (a context allowing the buckets),
          every TARGET probed once per INTERVAL as Prometheus spreads a job's scrapes:
          TARGET i at i × INTERVAL / N into each cycle, with the scrape timeout header
          (--scrape-timeout), on keep-alive connections from --scrapers threads.

For each: CPU (utime + stime of the serve process over the window), requests to the
store a minute by kind (the proxy's counts over the window), resident memory (VmRSS at
the end, and before the first probe), and, for probe mode, each probe's wall time seen
by the scraper (first round: every LEASE read; later rounds: reading by need) and
leasectl_probe_duration_seconds, CPU per probe, memory per TARGET and per prefix (the
growth of VmRSS from the first half of the TARGETs probed once to all of them after the
warm-up rounds, over the second half), and the state's own estimate
(leasectl_probe_state_bytes). Every answer is checked: each
probe 200 with leasectl_probe_success 1, a row for each of its --prefixes prefixes and as
many not `absent` as it has LEASEs; each /metrics 200.

Prints a Markdown table and writes --out (JSON).

  ~/.cache/leasectl-venv/moto-5.2.5/bin/python scripts/probe_bench.py \\
      --leasectl target/release/leasectl --proxy target/release/examples/rtt_proxy
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from compare import ENV, KEY, REGION, SECRET, Proxy, Server, lease_body, log  # noqa: E402

if "LEASECTL_VENV_DIR" not in os.environ and os.path.basename(sys.prefix).startswith("moto-"):
    os.environ["LEASECTL_VENV_DIR"] = os.path.dirname(sys.prefix)
    ENV["LEASECTL_VENV_DIR"] = os.environ["LEASECTL_VENV_DIR"]

HZ = os.sysconf("SC_CLK_TCK")


def seed(server, buckets, targets, prefixes):
    """The fleet: its TARGET URLs, and how many LEASEs each holds."""
    s3 = server.client
    names = [f"probe-bench-{b:02d}" for b in range(buckets)]
    for n in names:
        try:
            s3.create_bucket(Bucket=n)
        except Exception:  # noqa: BLE001 (seeded before)
            pass
    now = datetime.now(timezone.utc)
    jobs, fleet = [], []
    for t in range(targets):
        bucket = names[t % buckets]
        leases = 0
        for p in range(prefixes):
            i = t * prefixes + p
            body = lease_body(i, now)
            key = f"t{t:04d}/p{p:02d}/"
            jobs.append((bucket, key + ("LEASE" if body else "chunk-000"), body or b"x"))
            leases += body is not None
        fleet.append((f"s3://{bucket}/t{t:04d}/", leases))
    t0 = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda j: s3.put_object(Bucket=j[0], Key=j[1], Body=j[2]), jobs))
    log(f"seeded {len(jobs)} objects in {time.monotonic() - t0:.0f} s")
    return names, fleet


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start_serve(args, extra, env, globals_=()):
    err = tempfile.NamedTemporaryFile(prefix="probe-bench-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [args.leasectl, *globals_, "serve", "--no-pod", "--listen", "127.0.0.1:0", *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
    for _ in range(600):
        with open(err.name) as f:
            m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", f.read())
        if m:
            return proc, int(m.group(1)), err.name
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    with open(err.name) as f:
        sys.exit(f"probe_bench: serve did not start:\n{f.read()}")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def sample(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class Scraper:
    """Keep-alive GETs from one thread."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def get(self, path, headers=None):
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.conn.request("GET", path, headers=headers or {})
                r = self.conn.getresponse()
                return r.status, r.read().decode()
            except (http.client.HTTPException, OSError):
                self.conn = None
        raise RuntimeError(f"GET {path} failed twice")


def window(args, proxy, pid, seconds, tick):
    """Runs `tick(deadline)` until `seconds` have passed; the CPU seconds of
    `pid` and the proxy's counts over that time."""
    proxy.reset()
    cpu0, t0 = cpu_s(pid), time.monotonic()
    tick(t0 + seconds)
    wall = time.monotonic() - t0
    return cpu_s(pid) - cpu0, proxy.stats(), wall


def per_min(stats, wall):
    kinds = stats.get("by_kind", {})
    return {"total": stats.get("requests", 0) * 60 / wall,
            **{k: v * 60 / wall for k, v in kinds.items()}}


def run_static(args, proxy, fleet, env, budget):
    extra = ["--refresh", f"{args.interval}s", *([f"--max-requests={budget}"] if budget else []),
             *[t for t, _ in fleet]]
    proc, port, errlog = start_serve(args, extra, env,
                                     ("--endpoint-url", proxy.url, "--path-style"))
    s = Scraper(port)
    label = f"static, --max-requests {budget or 'default (1200/min)'}"
    log(f"{label}: warming up {args.warmup} s")
    time.sleep(args.warmup)
    rss0 = rss_kib(proc.pid)
    scrapes = []

    def tick(deadline):
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            code, body = s.get("/metrics")
            assert code == 200, body[:300]
            scrapes.append(time.monotonic() - t0)
            time.sleep(max(0.0, min(args.interval - (time.monotonic() - t0),
                                    deadline - time.monotonic())))

    cpu, stats, wall = window(args, proxy, proc.pid, args.minutes * 60, tick)
    rss = rss_kib(proc.pid)
    code, body = s.get("/metrics")
    rows = len(re.findall(r'^leasectl_lease_state\{.*state="fresh"\}', body, re.M))
    stop(proc)
    gets = stats.get("by_kind", {}).get("get", 0)
    return {
        "mode": label, "cpu_s": cpu, "wall_s": wall, "cpu_pct": 100 * cpu / wall,
        "requests_per_min": per_min(stats, wall),
        "cpu_ms_per_get": 1000 * cpu / gets if gets else None,
        "rss_mib": rss / 1024, "rss_mib_after_warmup": rss0 / 1024,
        "scrape_s_median": statistics.median(scrapes) if scrapes else None,
        "rows": rows, "log": errlog,
    }


def run_probe(args, proxy, fleet, env):
    proc, port, errlog = start_serve(args, ["--module", "bench"], env)
    rss_before = rss_kib(proc.pid)
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": str(args.scrape_timeout)}
    n = len(fleet)
    local = threading.local()
    lock = threading.Lock()
    results = []  # (round, wall_s, probe_duration_s, first probe of its TARGET)
    probed = set()

    def probe(i, rnd):
        if not hasattr(local, "s"):
            local.s = Scraper(port)
        target, leases = fleet[i]
        q = urllib.parse.urlencode({"target": target, "module": "bench"})
        t0 = time.monotonic()
        code, body = local.s.get(f"/probe?{q}", headers)
        wall = time.monotonic() - t0
        assert code == 200, body[:300]
        assert sample(body, "leasectl_probe_success") == 1, body[-2000:]
        # A row per prefix (one without a LEASE is `absent`), a LEASE each but those.
        rows = len(re.findall(r'^leasectl_lease_state\{.*,state="fresh"\}', body, re.M))
        absent = len(re.findall(r'^leasectl_lease_state\{.*,state="absent"\} 1$', body, re.M))
        assert (rows, rows - absent) == (args.prefixes, leases), (target, rows, absent, leases)
        with lock:
            results.append((rnd, wall, sample(body, "leasectl_probe_duration_seconds"),
                            i not in probed))
            probed.add(i)

    def rounds(first, count, deadline=None):
        pool = ThreadPoolExecutor(args.scrapers)
        rnd = first
        while (deadline is None and rnd < first + count) or \
                (deadline is not None and time.monotonic() < deadline):
            start = time.monotonic()
            futures = []
            for i in range(n):
                at = start + i * args.interval / n
                time.sleep(max(0.0, at - time.monotonic()))
                futures.append(pool.submit(probe, i, rnd))
            for f in futures:
                f.result()
            time.sleep(max(0.0, start + args.interval - time.monotonic()))
            rnd += 1
        pool.shutdown()
        return rnd

    # The first half of the fleet alone, then every TARGET: what a TARGET
    # costs is the growth from the one to the other (the process's fixed
    # costs, a store per bucket among them, come with the first half).
    half = n // 2
    with ThreadPoolExecutor(args.scrapers) as pool:
        list(pool.map(lambda i: probe(i, -1), range(half)))
    time.sleep(2)
    rss_half = rss_kib(proc.pid)
    log(f"probe: {args.warmup_rounds} warm-up round(s) of {n} probes, {args.interval} s each")
    nxt = rounds(0, args.warmup_rounds)
    rss_warm = rss_kib(proc.pid)
    s = Scraper(port)
    cpu, stats, wall = window(args, proxy, proc.pid, args.minutes * 60,
                              lambda deadline: rounds(nxt, 0, deadline))
    rss = rss_kib(proc.pid)
    code, metrics = s.get("/metrics")
    stop(proc)
    steady = [r for r in results if r[0] >= nxt]
    first = [r for r in results if r[3]]
    pct = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else None  # noqa: E731
    return {
        "mode": "probe", "cpu_s": cpu, "wall_s": wall, "cpu_pct": 100 * cpu / wall,
        "requests_per_min": per_min(stats, wall),
        "probes": len(steady),
        "cpu_ms_per_probe": 1000 * cpu / len(steady) if steady else None,
        "rss_mib": rss / 1024, "rss_mib_before": rss_before / 1024,
        "rss_mib_half": rss_half / 1024, "rss_mib_after_warmup": rss_warm / 1024,
        "bytes_per_target": (rss_warm - rss_half) * 1024 / (n - half),
        "bytes_per_prefix": (rss_warm - rss_half) * 1024 / ((n - half) * args.prefixes),
        "state_bytes_estimate": sample(metrics, "leasectl_probe_state_bytes"),
        "state_targets": sample(metrics, "leasectl_probe_state_targets"),
        "first_ms": {q: 1000 * pct([r[1] for r in first], v)
                     for q, v in (("median", 0.5), ("p90", 0.9), ("p99", 0.99))},
        "steady_ms": {q: 1000 * pct([r[1] for r in steady], v)
                      for q, v in (("median", 0.5), ("p90", 0.9), ("p99", 0.99))},
        "steady_probe_duration_ms_median":
            1000 * statistics.median([r[2] for r in steady]) if steady else None,
        "log": errlog,
    }


def report(rows, args):
    out = ["| mode | CPU (% of a core) | store requests / min (list, get) | VmRSS MiB | per probe | probe wall ms (first round; later: median / p99) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        rq = r["requests_per_min"]
        reqs = f"{rq['total']:.0f} ({rq.get('list', 0):.0f}, {rq.get('get', 0):.0f})"
        if r["mode"] == "probe":
            per = (f"{r['cpu_ms_per_probe']:.2f} ms CPU; {r['bytes_per_target']:.0f} B a TARGET, "
                   f"{r['bytes_per_prefix']:.0f} B a prefix (estimate {r['state_bytes_estimate'] / r['state_targets'] / args.prefixes:.0f})")
            wall = (f"{r['first_ms']['median']:.1f} (p99 {r['first_ms']['p99']:.1f}); "
                    f"{r['steady_ms']['median']:.1f} / {r['steady_ms']['p99']:.1f} "
                    f"(probe_duration {r['steady_probe_duration_ms_median']:.1f})")
        else:
            per = (f"{r['cpu_ms_per_get']:.2f} ms CPU a GET" if r["cpu_ms_per_get"] else "–")
            wall = f"/metrics {1000 * r['scrape_s_median']:.0f} ms"
        out.append(f"| {r['mode']} | {r['cpu_pct']:.2f} | {reqs} | {r['rss_mib']:.1f} | {per} | {wall} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--leasectl", required=True)
    ap.add_argument("--proxy", required=True, help="target/release/examples/rtt_proxy")
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--prefixes", type=int, default=10)
    ap.add_argument("--buckets", type=int, default=10)
    ap.add_argument("--interval", type=int, default=30, help="scrape interval, seconds")
    ap.add_argument("--scrape-timeout", type=float, default=10)
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--warmup", type=int, default=90, help="static mode: seconds before measuring")
    ap.add_argument("--warmup-rounds", type=int, default=2, help="probe mode: rounds before measuring")
    ap.add_argument("--scrapers", type=int, default=8)
    ap.add_argument("--only", default="static,static-unbounded,probe")
    ap.add_argument("--out", default="target/probe_bench.json")
    args = ap.parse_args()

    server = Server("seaweedfs")
    proxy = Proxy(args.proxy, server.url, 0)
    workdir = tempfile.mkdtemp(prefix="probe-bench-")
    try:
        names, fleet = seed(server, args.buckets, args.targets, args.prefixes)
        config = os.path.join(workdir, "config.toml")
        with open(config, "w") as f:
            allow = ", ".join(f'"s3://{b}/"' for b in names)
            f.write(f'[contexts.bench]\nendpoint_url = "{proxy.url}"\npath_style = true\n'
                    f'region = "{REGION}"\nallow = [{allow}]\n')
        env = dict(ENV, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION,
                   LEASECTL_CONFIG=config, HOME=workdir, XDG_DATA_HOME=workdir)
        rows = []
        only = args.only.split(",")
        if "static" in only:
            rows.append(run_static(args, proxy, fleet, env, None))
        if "static-unbounded" in only:
            rows.append(run_static(args, proxy, fleet, env, "1000000/min"))
        if "probe" in only:
            rows.append(run_probe(args, proxy, fleet, env))
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        table = report(rows, args)
        print(table)
        print(f"\nload average {' '.join(load)}; {args.targets} TARGETs × {args.prefixes} prefixes, "
              f"scraped every {args.interval} s, {args.minutes} min measured")
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "load": load, "rows": rows}, f, indent=2)
    finally:
        proxy.stop()
        server.stop()


if __name__ == "__main__":
    main()
