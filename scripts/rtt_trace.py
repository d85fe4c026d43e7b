#!/usr/bin/env python3
"""Where the time of `leasectl --json` goes behind the RTT proxy (issue 50 §1).

Seeds N prefixes (default 10,000) on SeaweedFS (`weed mini`) or s3s-fs
(--s3s-fs PATH), puts examples/rtt_proxy.rs in front of it with `--trace`
(and HTTPS with a self-signed CA made here with openssl, trusted through
AWS_CA_BUNDLE, unless --no-tls), and runs each leasectl binary (--leasectl
NAME=PATH, repeatable) at each RTT, the order rotating each round. Each run
is checked (every prefix reported, exit 0 or 3) and the proxy's trace of it
read back: one line per connection (accepted, TLS handshake) and per request
(arrived, forwarded, answer's head from upstream, body passed on whole).

With --s5cmd PATH and --boto3, `s5cmd --numworkers 256 cp` and
scripts/boto3_leases.py (32 threads) run in the same rounds, traced alike
(their limits at their own concurrency).

With --console-runs K, each leasectl's console (read-only, in a 200x50 tmux
pane) is started K times at each RTT after those rounds: the time until its
first frame, and until its title counts 1,000 rows, with the proxy's trace of
when the 1,000th LEASE read was answered.

Printed per binary and RTT (medians over the rounds, and the trace of the
last round): wall time against the limit (pages + ceil(N / c)) x RTT; when
each listing page was asked and answered; when the first GET came; the
connections opened and when; the requests in flight per 100 ms; how long
the server took (the answer's head less the forward) and how long the
client left a connection idle between its answer and its next request.

  ~/.cache/leasectl-venv/moto-5.2.5/bin/python scripts/rtt_trace.py \\
      --leasectl main=/tmp/main/leasectl --leasectl new=target/release/leasectl \\
      --rtt-proxy target/release/examples/rtt_proxy --rtts 30,80 --rounds 3
"""
import argparse
import json
import math
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from compare import ENV, REGION, count_files, lease_body, seed  # noqa: E402


def make_ca(d):
    """A CA and a certificate for 127.0.0.1 signed by it (PEM files in d)."""
    def run(*a):
        subprocess.run(a, cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=rtt_trace CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return os.path.join(d, "ca.pem"), os.path.join(d, "server.pem"), os.path.join(d, "server.key")


class TracingProxy(compare.Proxy):
    """The RTT proxy with --trace (and TLS); control requests over HTTP(S)."""

    def __init__(self, binary, upstream, rtt_ms, tls, connect_rtts):
        extra = ["--trace", "--connect-rtts", str(connect_rtts)]
        ctx = None
        if tls:
            ca, cert, key = tls
            extra += ["--tls-cert", cert, "--tls-key", key]
            ctx = ssl.create_default_context(cafile=ca)
        super().__init__(binary, upstream, rtt_ms, extra=extra, ctx=ctx, timeout=30)

    def trace(self):
        body = self._raw("GET", "/__proxy/trace").decode()
        return [json.loads(x) for x in body.splitlines() if x.strip()]


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def analyse(trace, wall_ms, n, rtt, concurrency):
    """The trace of one run as a dict of figures (milliseconds from the
    proxy's reset, which the run started just after)."""
    reqs = sorted((x for x in trace if x["ev"] == "req"), key=lambda x: x["in"])
    conns = sorted((x for x in trace if x["ev"] == "conn"), key=lambda x: x["accept"])
    lists = [r for r in reqs if r["kind"] == "list"]
    gets = [r for r in reqs if r["kind"] == "get"]
    pages = len(lists)
    limit = (pages + math.ceil(n / concurrency)) * rtt
    # The round trip the proxy delivered (its timer wakes late by a
    # millisecond or so, more under load): the limit at that round trip.
    delivered = statistics.fmean(r["fwd"] - r["in"] for r in reqs) if reqs else float(rtt)
    limit_delivered = (pages + math.ceil(n / concurrency)) * delivered
    # In flight per 100 ms: the mean number of requests between arrival and end.
    end = max((r["end"] for r in reqs), default=0)
    buckets = [0.0] * (int(end // 100) + 1)
    for r in reqs:
        a, b = r["in"], r["end"]
        i = int(a // 100)
        while i * 100 < b:
            lo, hi = max(a, i * 100), min(b, (i + 1) * 100)
            buckets[i] += max(0.0, hi - lo) / 100
            i += 1
    # The client's idle time on a connection: its next request's arrival
    # less the end of the one before (requests on one connection).
    by_conn = {}
    for r in reqs:
        by_conn.setdefault(r["conn"], []).append(r)
    idle = []
    for rs in by_conn.values():
        rs.sort(key=lambda r: r["seq"])
        idle += [b["in"] - a["end"] for a, b in zip(rs, rs[1:])]
    server = [r["head"] - r["fwd"] for r in reqs]
    body = [r["end"] - r["head"] for r in reqs]
    # The wall time spread over `concurrency` lanes: what the requests held
    # (the round trip, the server, the body passed on), the client's idle
    # time between an answer and the next request on its connection, and
    # lanes not used at all (ramp-up, the tail, fewer requests in flight).
    start = reqs[0]["in"] if reqs else 0.0
    lanes = concurrency * (end - start)
    held_rtt = sum(r["fwd"] - r["in"] for r in reqs)
    held_server = sum(server)
    held_body = sum(body)
    breakdown = {
        "before_first_request": start,
        "after_last_answer": wall_ms - end,
        "rtt": held_rtt / concurrency,
        "server": held_server / concurrency,
        "body": held_body / concurrency,
        "client_idle": sum(idle) / concurrency,
        "unused_lanes": (lanes - held_rtt - held_server - held_body - sum(idle)) / concurrency,
    }
    return {
        "wall_ms": wall_ms, "limit_ms": limit, "pages": pages, "gets": len(gets),
        "delivered_rtt_ms": delivered, "limit_delivered_ms": limit_delivered,
        "first_request": reqs[0]["in"] if reqs else None,
        "list_pages": [(round(r["in"]), round(r["end"])) for r in lists],
        "first_get": gets[0]["in"] if gets else None,
        "last_end": end,
        "connections": len(conns),
        "conn_accept": [round(c["accept"]) for c in conns],
        "tls_ms": [round(c["tls_end"] - c["tls_start"], 1) for c in conns if "tls_end" in c],
        "in_flight_100ms": [round(b) for b in buckets],
        "server_ms": {"p50": pct(server, .5), "p90": pct(server, .9), "max": max(server)},
        "server_list_ms": [round(r["head"] - r["fwd"]) for r in lists],
        "body_ms_p90": pct(body, .9),
        "idle_ms": {"p50": pct(idle, .5), "p90": pct(idle, .9), "p99": pct(idle, .99),
                    "mean": statistics.fmean(idle) if idle else 0.0},
        "server_mean_ms": statistics.fmean(server) if server else 0.0,
        "breakdown_ms": {k: round(v) for k, v in breakdown.items()},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leasectl", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--rtt-proxy", required=True)
    ap.add_argument("--s3s-fs", help="use s3s-fs (this binary) instead of SeaweedFS")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--rtts", default="30,80")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=128,
                    help="leasectl's requests in flight, for the limit (its default: 128)")
    ap.add_argument("--flags", default="", help="more leasectl flags, space-separated")
    ap.add_argument("--no-tls", action="store_true")
    ap.add_argument("--connect-rtts", type=int, default=0,
                    help="round trips a new connection waits (the proxy's --connect-rtts)")
    ap.add_argument("--json-out", help="write every run's figures here")
    ap.add_argument("--console-runs", type=int, default=0,
                    help="also the console's time to 1,000 rows, this many runs each")
    ap.add_argument("--s5cmd", help="also s5cmd cp (256 workers), this binary")
    ap.add_argument("--boto3", action="store_true",
                    help="also scripts/boto3_leases.py (32 threads)")
    ap.add_argument("--wrap", default="",
                    help="a command each leasectl run goes under, space-separated "
                         "(e.g. 'perf record -g -o FILE')")
    args = ap.parse_args()
    binaries = [tuple(a.split("=", 1)) for a in args.leasectl]
    if args.s5cmd:
        binaries.append(("s5cmd", args.s5cmd))
    if args.boto3:
        binaries.append(("boto3", sys.executable))
    workdir = tempfile.mkdtemp(prefix="leasectl-rtt-trace-")
    tls = None if args.no_tls else make_ca(workdir)
    if args.s3s_fs:
        server = compare.Server("s3s-fs", args.s3s_fs)
    else:
        server = compare.Server("seaweedfs")
    proxy = TracingProxy(args.rtt_proxy, server.url, 0, tls, args.connect_rtts)
    env = dict(ENV)
    if tls:
        env["AWS_CA_BUNDLE"] = tls[0]
        env["SSL_CERT_FILE"] = tls[0]  # s5cmd (Go)
    runs, consoles = [], []
    try:
        bucket = f"trace-{args.n}"
        compare.log(f"seeding {args.n} prefixes on {server.kind}")
        seed(server, bucket, args.n)
        target = f"s3://{bucket}/backups/"
        leases = sum(1 for i in range(args.n) if lease_body(i, datetime.now(timezone.utc)))
        for rtt in [int(x) for x in args.rtts.split(",")]:
            proxy.config(rtt)
            for r in range(args.rounds):
                order = binaries[r % len(binaries):] + binaries[:r % len(binaries)]
                for name, path in order:
                    proxy.reset()
                    outdir = tempfile.mkdtemp(dir=workdir)
                    c = args.concurrency
                    if name == "s5cmd":
                        cmd, c = [path, "--endpoint-url", proxy.url, "--numworkers", "256", "cp",
                                  f"s3://{bucket}/backups/*/LEASE", outdir + "/"], 256
                    elif name == "boto3":
                        cmd, c = [path, os.path.join(compare.REPO, "scripts/boto3_leases.py"),
                                  "--endpoint-url", proxy.url, "--threads", "32", target], 32
                    else:
                        cmd = [*args.wrap.split(), path, "--json", "--no-pod", "--endpoint-url",
                               proxy.url, "--path-style", "--region", REGION,
                               *args.flags.split(), target]
                    t0 = time.monotonic()
                    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    wall = (time.monotonic() - t0) * 1000
                    doc = json.loads(p.stdout or b"{}") if name != "s5cmd" else {}
                    if name == "s5cmd":
                        got, errors, want = count_files(outdir), 0, leases
                    elif name == "boto3":
                        got, errors, want = doc.get("prefixes"), 0, args.n
                    else:
                        rows = doc.get("targets", [{}])[0].get("prefixes", [])
                        got, want = len(rows), args.n
                        errors = sum(1 for x in rows if x.get("error"))
                    shutil.rmtree(outdir, ignore_errors=True)
                    if p.returncode not in (0, 3) or got != want or errors:
                        sys.exit(f"{name} failed: exit {p.returncode}, {got} of {want}, "
                                 f"{errors} errors, {p.stderr.decode()[-2000:]}")
                    with open("/proc/loadavg") as f:
                        load = float(f.read().split()[0])
                    a = analyse(proxy.trace(), wall, args.n, rtt, c)
                    a.update(name=name, rtt=rtt, round=r, load=load)
                    runs.append(a)
                    compare.log(f"rtt={rtt} round {r + 1} {name}: {wall:.0f} ms "
                                f"({wall / a['limit_ms']:.2f}x limit {a['limit_ms']} ms), "
                                f"load {load}")
            for name, path in binaries:
                if args.console_runs and name not in ("s5cmd", "boto3"):
                    consoles.append(console_runs(args, proxy, env, name, path, target, rtt))
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if consoles:
        print("\n| RTT | console | first frame | 1,000 rows shown, median (min–max) "
              "| 1,000th read answered (proxy) | load avg |")
        print("|---|---|---|---|---|---|")
        for c in consoles:
            print(f"| {c['rtt']} ms | {c['name']} | {statistics.median(c['frame']):.0f} ms "
                  f"| {statistics.median(c['rows']):.0f} ms ({min(c['rows']):.0f}–"
                  f"{max(c['rows']):.0f}) | {statistics.median(c['read']):.0f} ms "
                  f"| {min(c['load']):.1f}–{max(c['load']):.1f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(runs, f, indent=1)
    print(f"\n{args.n} prefixes on {server.kind} behind the RTT proxy "
          f"({'HTTPS, AWS_CA_BUNDLE' if tls else 'plain HTTP'}, connect-rtts "
          f"{args.connect_rtts}), {args.rounds} rounds, rotating\n")
    print("| RTT | binary | wall median (min–max) | limit | / limit | RTT delivered "
          "| / limit at it | load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for rtt in sorted({r["rtt"] for r in runs}):
        for name, _ in binaries:
            rs = [r for r in runs if r["rtt"] == rtt and r["name"] == name]
            w = [r["wall_ms"] for r in rs]
            lim = rs[-1]["limit_ms"]
            dl = statistics.median(r["limit_delivered_ms"] for r in rs)
            dr = statistics.median(r["delivered_rtt_ms"] for r in rs)
            print(f"| {rtt} ms | {name} | {statistics.median(w):.0f} ms ({min(w):.0f}–{max(w):.0f}) "
                  f"| {lim} ms | {statistics.median(w) / lim:.2f} | {dr:.2f} ms "
                  f"| {statistics.median(w) / dl:.2f} | "
                  f"{min(r['load'] for r in rs):.1f}–{max(r['load'] for r in rs):.1f} |")
    for r in runs:
        if r["round"] != args.rounds - 1:
            continue
        print(f"\n### {r['name']}, RTT {r['rtt']} ms (last round)\n")
        for k in ("wall_ms", "limit_ms", "delivered_rtt_ms", "first_request", "list_pages", "server_list_ms",
                  "first_get", "last_end", "gets", "connections", "server_ms", "server_mean_ms",
                  "body_ms_p90", "idle_ms", "breakdown_ms"):
            print(f"- {k}: {r[k]}")
        acc = r["conn_accept"]
        print(f"- connections accepted: first {acc[:1]}, last {acc[-1:]}; "
              f"per 100 ms: {bucket_counts(acc)}")
        if r["tls_ms"]:
            print(f"- TLS handshakes (ms): p50 {pct(r['tls_ms'], .5)}, max {max(r['tls_ms'])}")
        print(f"- in flight per 100 ms: {r['in_flight_100ms']}")


def console_runs(args, proxy, env, name, path, target, rtt):
    """The console's first frame and its first 1,000 rows, `args.console_runs` times."""
    tmux = compare.Tmux()
    out = {"name": name, "rtt": rtt, "frame": [], "rows": [], "read": [], "load": []}
    try:
        for r in range(args.console_runs):
            win = f"c{r}"
            proxy.reset()
            t0 = time.monotonic()
            tmux.window(win, f"exec env AWS_CA_BUNDLE={env.get('AWS_CA_BUNDLE', '')} {path} "
                             f"--read-only --no-pod --endpoint-url {proxy.url} --path-style "
                             f"--region {REGION} {target}")
            frame = rows = None
            while time.monotonic() - t0 < 60:
                screen = tmux.capture(win)
                now = (time.monotonic() - t0) * 1000
                if frame is None and "leasectl" in screen:
                    frame = now
                if compare.rows_shown(screen) >= min(1000, args.n):
                    rows = now
                    break
            tmux.kill_window(win)
            if frame is None or rows is None:
                sys.exit(f"{name}'s console did not show 1,000 rows within 60 s")
            gets = sorted(x["end"] for x in proxy.trace() if x["ev"] == "req" and x["kind"] == "get")
            with open("/proc/loadavg") as f:
                out["load"].append(float(f.read().split()[0]))
            out["frame"].append(frame)
            out["rows"].append(rows)
            out["read"].append(gets[min(999, len(gets) - 1)] if gets else float("nan"))
            compare.log(f"console {name} rtt={rtt} run {r + 1}: frame {frame:.0f} ms, "
                        f"1,000 rows {rows:.0f} ms, 1,000th read {out['read'][-1]:.0f} ms")
            time.sleep(0.5)
    finally:
        tmux.stop()
    return out


def bucket_counts(ts):
    if not ts:
        return []
    out = [0] * (int(max(ts) // 100) + 1)
    for t in ts:
        out[int(t // 100)] += 1
    return out


if __name__ == "__main__":
    main()
