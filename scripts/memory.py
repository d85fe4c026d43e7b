#!/usr/bin/env python3
"""Peak memory of leasectl at many prefixes (PERFORMANCE.md, "Memory").

Builds a local store of N prefix directories (default 50,000; one in twenty
without a LEASE, the others fresh, stale or malformed in turn), then measures:

- `-o prometheus`, `--json` and `-o ndjson`, `--runs` times each (the median
  and the range), under `/usr/bin/time -v` (its "Maximum resident set size");
- `--watch`'s first pass (`--only watch`), `--runs` times: `--watch=5s` with
  stdout to a file (not a terminal), its peak (VmHWM) read once the first
  pass's `heartbeat` line is written, then SIGTERM;
- the console in tmux: the peak (VmHWM) and current (VmRSS) resident set of
  the process once every row is loaded, and again after more refreshes, and
  its CPU (user + system, % of a core) over that settle time;
- `serve --refresh 5s`: its resident set (VmRSS, and the peak VmHWM) after
  `--scrapes` scrapes of /metrics, one every refresh once the first snapshot
  is in, `--runs` times (the median and the range).

Usage: scripts/memory.py [--binary PATH] [--prefixes N] [--settle SECONDS]
                         [--runs N] [--skip-console] [--only FORMAT|watch,...]
                         [--scrapes N]

Environment variables such as MIMALLOC_PURGE_DELAY pass through to leasectl.
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_store(n):
    d = tempfile.mkdtemp(prefix="leasectl-mem-")
    now = datetime.now(timezone.utc)
    for i in range(n):
        p = os.path.join(d, f"db{i:05d}")
        os.makedirs(p)
        if i % 20 == 19:
            continue
        kind = i % 3
        if kind == 2 and i % 60 == 2:
            body = b'{"instance_id": 42'
        else:
            renewed = now if kind != 1 else now - timedelta(minutes=5)
            body = (
                '{"instance_id":"%032x","acquired_at":"%s","renewed_at":"%s","ttl_s":3600}'
                % (i, stamp(renewed - timedelta(hours=1)), stamp(renewed))
            ).encode()
        with open(os.path.join(p, "LEASE"), "wb") as f:
            f.write(body)
    return d


def max_rss_kib(binary, args):
    r = subprocess.run(
        ["/usr/bin/time", "-v", binary, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    if not m:
        sys.exit(f"no RSS from /usr/bin/time for {args}: {r.stderr[-500:]}")
    return int(m.group(1)), r.returncode


def status_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0])
    return out


def watch_first_pass(binary, store):
    """(VmHWM in KiB once the first pass is written, seconds it took, exit)."""
    fd, out = tempfile.mkstemp(prefix="leasectl-watch-", suffix=".ndjson")
    with os.fdopen(fd, "wb") as f:
        p = subprocess.Popen(
            [binary, "--no-pod", "--watch=5s", f"file://{store}/"],
            stdout=f,
            stderr=subprocess.DEVNULL,
        )
    try:
        t0 = time.time()
        while True:
            # The heartbeat is the pass's last line: look at the file's tail.
            with open(out, "rb") as f:
                f.seek(max(0, os.path.getsize(out) - 4096))
                if b'"type":"heartbeat"' in f.read():
                    break
            if p.poll() is not None:
                sys.exit(f"--watch ended with {p.returncode} before its first heartbeat")
            if time.time() - t0 > 600:
                sys.exit("--watch wrote no heartbeat in 600 s")
            time.sleep(0.05)
        took = time.time() - t0
        hwm = status_kib(p.pid)["VmHWM"]
        p.send_signal(signal.SIGTERM)
        return hwm, took, p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.remove(out)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    # utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name.
    return int(fields[11]) + int(fields[12])


def console(binary, store, n, settle):
    sock = f"leasectl-mem-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    pidfile = os.path.join(store, ".pid")
    cmd = (
        f"sh -c 'echo $$ > {pidfile}; exec {binary} --no-pod --refresh 5s "
        f"file://{store}/'"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "200", "-y", "50", cmd], check=True
    )
    try:
        t0 = time.time()
        want = f"/{n} "
        while True:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True
            ).stdout
            if want in screen and "loading" not in screen:
                break
            if time.time() - t0 > 600:
                sys.exit(f"the console did not load {n} rows:\n{screen}")
            time.sleep(0.5)
        loaded = time.time() - t0
        with open(pidfile) as f:
            pid = int(f.read().strip())
        at_load = status_kib(pid)
        t1, c1 = time.time(), cpu_ticks(pid)
        time.sleep(settle)
        later = status_kib(pid)
        cpu = (cpu_ticks(pid) - c1) / os.sysconf("SC_CLK_TCK") / (time.time() - t1)
        return loaded, at_load, later, cpu * 100
    finally:
        subprocess.run([*tmux, "kill-server"], stderr=subprocess.DEVNULL)


def serve(binary, store, scrapes):
    err = os.path.join(store, ".serve.stderr")
    with open(err, "w") as e:
        p = subprocess.Popen(
            [binary, "serve", "--no-pod", "--listen", "127.0.0.1:0",
             "--refresh", "5s", f"file://{store}/"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e,
        )
    try:
        t0 = time.time()
        port = None
        while port is None:
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(err).read())
            port = m and int(m.group(1))
            if time.time() - t0 > 30:
                sys.exit(f"serve did not say where it listens: {open(err).read()}")
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/metrics"
        done, size = 0, 0
        while done < scrapes:
            try:
                with urllib.request.urlopen(url, timeout=120) as r:
                    size = len(r.read())
                done += 1
                time.sleep(5)
            except urllib.error.HTTPError as e:
                if e.code != 503 or time.time() - t0 > 600:
                    raise
                time.sleep(0.5)
        return status_kib(p.pid), size
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="target/release/leasectl")
    ap.add_argument("--prefixes", type=int, default=50_000)
    ap.add_argument("--settle", type=float, default=60.0)
    ap.add_argument("--skip-console", action="store_true")
    ap.add_argument(
        "--scrapes", type=int, default=10,
        help="scrapes of serve before its memory is read (0: serve is not measured)",
    )
    ap.add_argument("--runs", type=int, default=3, help="runs of each one-shot format")
    ap.add_argument(
        "--only",
        default="prometheus,json,ndjson,watch",
        help="one-shot formats and watch to measure (comma-separated; empty: none)",
    )
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    t = time.time()
    store = make_store(a.prefixes)
    print(f"store: {a.prefixes} prefixes in {store} ({time.time() - t:.1f} s)")
    try:
        url = f"file://{store}/"
        formats = {
            "prometheus": ["-o", "prometheus"],
            "json": ["--json"],
            "ndjson": ["-o", "ndjson"],
        }
        for name in filter(None, a.only.split(",")):
            if name == "watch":
                runs = [watch_first_pass(binary, store) for _ in range(a.runs)]
                mib = [kib / 1024 for kib, _, _ in runs]
                print(
                    f"{'--watch=5s':14} peak RSS {statistics.median(mib):7.1f} MiB "
                    f"(median of {a.runs}, {min(mib):.1f}–{max(mib):.1f}) at the first "
                    f"heartbeat, after {statistics.median(t for _, t, _ in runs):.1f} s; "
                    f"exit on SIGTERM {runs[0][2]}"
                )
                continue
            fmt = formats[name]
            runs = [max_rss_kib(binary, ["--no-pod", *fmt, url]) for _ in range(a.runs)]
            mib = [kib / 1024 for kib, _ in runs]
            print(
                f"{' '.join(fmt):14} peak RSS {statistics.median(mib):7.1f} MiB "
                f"(median of {a.runs}, {min(mib):.1f}–{max(mib):.1f}; exit {runs[0][1]})"
            )
        if a.scrapes:
            runs = [serve(binary, store, a.scrapes) for _ in range(a.runs)]
            rss = [r["VmRSS"] / 1024 for r, _ in runs]
            hwm = [r["VmHWM"] / 1024 for r, _ in runs]
            print(
                f"serve          after {a.scrapes} scrapes VmRSS {statistics.median(rss):.1f} MiB "
                f"({min(rss):.1f}–{max(rss):.1f}), VmHWM {statistics.median(hwm):.1f} MiB "
                f"({min(hwm):.1f}–{max(hwm):.1f}); median of {a.runs}; "
                f"exposition {runs[0][1] / 1e6:.1f} MB"
            )
        if not a.skip_console:
            loaded, at_load, later, cpu = console(binary, store, a.prefixes, a.settle)
            print(
                f"console        loaded in {loaded:.1f} s; at load VmHWM "
                f"{at_load['VmHWM'] / 1024:.1f} MiB VmRSS {at_load['VmRSS'] / 1024:.1f} MiB; "
                f"{a.settle:.0f} s later VmHWM {later['VmHWM'] / 1024:.1f} MiB "
                f"VmRSS {later['VmRSS'] / 1024:.1f} MiB; CPU {cpu:.2f} % of a core"
            )
    finally:
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
