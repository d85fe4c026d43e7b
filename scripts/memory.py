#!/usr/bin/env python3
"""Peak memory of leasectl at many prefixes (PERFORMANCE.md, "Memory").

Builds a local store of N prefix directories (default 50,000; one in twenty
without a LEASE, the others fresh, stale or malformed in turn), then measures:

- `-o prometheus`, `--json` and `-o ndjson` once each, under `/usr/bin/time -v`
  (its "Maximum resident set size");
- the console in tmux: the peak (VmHWM) and current (VmRSS) resident set of
  the process once every row is loaded, and again after more refreshes.

Usage: scripts/memory.py [--binary PATH] [--prefixes N] [--settle SECONDS]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
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
        time.sleep(settle)
        later = status_kib(pid)
        return loaded, at_load, later
    finally:
        subprocess.run([*tmux, "kill-server"], stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="target/release/leasectl")
    ap.add_argument("--prefixes", type=int, default=50_000)
    ap.add_argument("--settle", type=float, default=60.0)
    ap.add_argument("--skip-console", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    t = time.time()
    store = make_store(a.prefixes)
    print(f"store: {a.prefixes} prefixes in {store} ({time.time() - t:.1f} s)")
    try:
        url = f"file://{store}/"
        for fmt in (["-o", "prometheus"], ["--json"], ["-o", "ndjson"]):
            kib, rc = max_rss_kib(binary, ["--no-pod", *fmt, url])
            print(f"{' '.join(fmt):14} peak RSS {kib / 1024:7.1f} MiB (exit {rc})")
        if not a.skip_console:
            loaded, at_load, later = console(binary, store, a.prefixes, a.settle)
            print(
                f"console        loaded in {loaded:.1f} s; at load VmHWM "
                f"{at_load['VmHWM'] / 1024:.1f} MiB VmRSS {at_load['VmRSS'] / 1024:.1f} MiB; "
                f"{a.settle:.0f} s later VmHWM {later['VmHWM'] / 1024:.1f} MiB "
                f"VmRSS {later['VmRSS'] / 1024:.1f} MiB"
            )
    finally:
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
