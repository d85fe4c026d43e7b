#!/usr/bin/env python3
"""The pod scan against `ps -eo pid,ppid,comm`, whole processes, interleaved.

Tops the machine up to --procs processes (sleepers, one in ten with the lease
variable, one `flock` holder and two waiters on a real `.writer.lock`), then
runs each command --runs times in rotating order (after --warmup runs each)
and reports, per command, the median wall time and the median CPU time
(user + system of the child, from wait4's rusage). No hyperfine needed.

  scripts/pod_bench.py --cmd 'after=/path/leasectl pod-scan --json' \\
      --cmd 'before=/other/leasectl pod-scan --json' [--procs 1000] [--runs 30]

`ps -eo pid,ppid,comm` is always one of the commands. Prints a Markdown table.
Processes it starts are stopped by pid.
"""
import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time


def count_procs():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def run_once(argv):
    t0 = time.monotonic()
    devnull = os.open(os.devnull, os.O_WRONLY)
    pid = os.fork()
    if pid == 0:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(devnull)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, code


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cmd", action="append", default=[], help="NAME=COMMAND")
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    cmds = [("ps", ["ps", "-eo", "pid,ppid,comm"])]
    for c in args.cmd:
        name, _, line = c.partition("=")
        cmds.append((name, shlex.split(line)))

    started, groups = [], []
    tmp = tempfile.mkdtemp(prefix="leasectl-podbench-")
    try:
        lock = os.path.join(tmp, ".writer.lock")
        open(lock, "w").close()
        env = dict(os.environ, CLOUD_WRITER_LEASE="1")
        # flock forks the sleeper: each in a process group of its own, so that
        # stopping the group stops both.
        flock = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     start_new_session=True)
        groups = [subprocess.Popen(["flock", lock, "sleep", "900"], **flock)]
        time.sleep(0.2)
        for _ in range(2):
            groups.append(subprocess.Popen(["flock", lock, "sleep", "900"], **flock))
        started.extend(groups)
        need = max(0, args.procs - count_procs())
        for i in range(need):
            e = env if i % 10 == 0 else None
            started.append(subprocess.Popen(["sleep", "900"], env=e, stdin=subprocess.DEVNULL))
        time.sleep(0.5)
        n = count_procs()
        codes = {}
        for name, argv in cmds:
            for _ in range(args.warmup):
                codes[name] = run_once(argv)[2]
        wall = {name: [] for name, _ in cmds}
        cpu = {name: [] for name, _ in cmds}
        for r in range(args.runs):
            k = r % len(cmds)
            for name, argv in cmds[k:] + cmds[:k]:
                w, c, _ = run_once(argv)
                wall[name].append(w)
                cpu[name].append(c)
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        print(f"{n} processes, {args.runs} interleaved runs, load average {' '.join(load)}\n")
        print("| command | wall median | wall min | CPU median | wall / ps | CPU / ps | exit |")
        print("|---|---|---|---|---|---|---|")
        pw, pc = statistics.median(wall["ps"]), statistics.median(cpu["ps"])
        for name, argv in cmds:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            print(f"| {name} | {w * 1000:.1f} ms | {min(wall[name]) * 1000:.1f} ms | "
                  f"{c * 1000:.1f} ms | {w / pw:.2f} | {c / pc:.2f} | {codes[name]} |")
    finally:
        for g in groups:
            try:
                os.killpg(g.pid, 9)
            except ProcessLookupError:
                pass
        for p in started:
            p.kill()
        for p in started:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
