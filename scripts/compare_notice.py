#!/usr/bin/env python3
"""Worst time to notice a takeover of an off-screen row: the row was on screen
(read at every refresh) until the operator moved away, then it is taken over;
a filter on the new holder (which puts no row in view until it matches)
shows it once the console has read it again."""
import json
import os
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as c
from datetime import datetime, timezone
# Usage: compare_notice.py SERVER(seaweedfs|moto) N POPULATION LEASECTL "EXTRA OPTIONS"
kind, n, pop, b, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
srv = c.Server(kind)
tm = c.Tmux()
try:
    c.seed(srv, "notice", n, pop)
    tm.window("w", f"exec {b} --read-only {extra} --endpoint-url {srv.url} --path-style --region us-east-1 s3://notice/backups/")
    t0 = time.monotonic()
    while c.rows_shown(tm.capture("w")) < n and time.monotonic() - t0 < 180:
        time.sleep(0.2)
    time.sleep(45)  # the steady state: stale rows in the round robin
    tm.run("send-keys", "-t", "bench:w", "G")  # the last row: db00000 leaves the screen
    time.sleep(6)   # one refresh: the focus moves with it
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    srv.client.put_object(Bucket="notice", Key="backups/db00000/LEASE", Body=json.dumps({
        "instance_id": "takenoverbyp1", "acquired_at": stamp, "renewed_at": stamp, "ttl_s": 3600}).encode())
    t_take = time.monotonic()
    tm.run("send-keys", "-t", "bench:w", "/", "takenoverbyp1", "Enter")
    while time.monotonic() - t_take < 1800:
        scr = tm.capture("w")
        if "takenoverbyp1" in scr and "db00000" in scr:
            break
        time.sleep(0.5)
    c.log(f"{b} {extra} {pop}: takeover of an off-screen row noticed after {time.monotonic() - t_take:.1f} s")
    lines = [l for l in tm.capture("w").splitlines() if l.strip()]
    c.log(lines[-1].strip())
finally:
    tm.stop(); srv.stop()
