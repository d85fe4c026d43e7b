#!/usr/bin/env python3
"""The pod scan against `ps -eo pid,ppid,comm`, whole processes, interleaved.

Tops the machine up to --procs processes (sleepers, one in ten with the lease
variable, one `flock` holder and two waiters on a real `.writer.lock`), then
runs each command --runs times in rotating order (after --warmup runs each)
and reports, per command, the median wall time and the median CPU time
(user + system of the child, from wait4's rusage). No hyperfine needed.

  scripts/pod_bench.py --cmd 'after=/path/leasectl pod-scan --json' \\
      --cmd 'before=/other/leasectl pod-scan --json' [--procs 1000] [--runs 30]

With --pods N (root only; issue 46's node view) the processes are N pods
instead: each in a cgroup named as containerd names a container under the
systemd driver (cgroup v2), with mount and PID namespaces of its own, a tmpfs
data directory, `HOSTNAME`, and `leasectl writer exec` (--leasectl) holding
its lock over a shell and sleepers, so that the pods make --procs processes
together (what the machine already runs is not counted):

  scripts/pod_bench.py --pods 50 --procs 1000 --leasectl target/release/leasectl \\
      --cmd 'node=target/release/leasectl --json --node'

`ps -eo pid,ppid,comm` is always one of the commands. Prints a Markdown table.
Processes it starts are stopped by process group, its cgroups removed.
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


def cgroup_base():
    """The cgroup v2 hierarchy (its `unified` mount on a hybrid host)."""
    for b in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(b, "cgroup.procs")) and os.path.exists(
                os.path.join(b, "cgroup.controllers")):
            return b
    raise SystemExit("pod_bench: no cgroup v2 hierarchy here")


def start_pods(n, total, leasectl, tmp):
    """N namespaced pods of about total/N processes each; their process
    groups and the top cgroup to remove."""
    top = os.path.join(cgroup_base(), f"leasectl-bench-{os.getpid()}")
    per_pod = max(4, total // n)
    groups = []
    for i in range(n):
        uid = f"{os.getpid():08x}-{i:04x}-4000-8000-{i * 7919:012x}"
        cid = f"{os.getpid():08x}{i:08x}" + "c0ffee" * 8
        cg = os.path.join(top, "kubepods.slice", "kubepods-besteffort.slice",
                          f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice",
                          f"cri-containerd-{cid}.scope")
        os.makedirs(cg)
        data = os.path.join(tmp, f"data-{i}")
        os.makedirs(data)
        # unshare, writer exec and its shell, then the sleepers.
        sleepers = " ".join(["sleep 900 &"] * (per_pod - 3))
        inner = (f"mount -t tmpfs none {shlex.quote(data)} && CLOUD_WRITER_LEASE=1 exec "
                 f"{shlex.quote(leasectl)} writer exec --data-dir {shlex.quote(data)} --wait 600s -- "
                 f"sh -c {shlex.quote(sleepers + ' wait')}")
        outer = (f"echo 0 > {shlex.quote(cg)}/cgroup.procs && exec unshare --mount --propagation private "
                 f"--pid --fork --mount-proc -- sh -c {shlex.quote(inner)}")
        env = dict(os.environ, HOSTNAME=f"web-{i}")
        groups.append(subprocess.Popen(["sh", "-c", outer], env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True))
    return groups, top


def remove_cgroups(top):
    for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
        for _ in range(50):
            try:
                os.rmdir(dirpath)
                break
            except OSError:
                time.sleep(0.1)


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
    ap.add_argument("--pods", type=int, default=0, help="namespaced pods instead of sleepers (root)")
    ap.add_argument("--leasectl", default="leasectl", help="the binary the pods run")
    args = ap.parse_args()
    cmds = [("ps", ["ps", "-eo", "pid,ppid,comm"])]
    for c in args.cmd:
        name, _, line = c.partition("=")
        cmds.append((name, shlex.split(line)))

    started, groups = [], []
    top = None
    tmp = tempfile.mkdtemp(prefix="leasectl-podbench-")
    try:
        if args.pods:
            before = count_procs()
            groups, top = start_pods(args.pods, args.procs, args.leasectl, tmp)
            deadline = time.monotonic() + 120
            while count_procs() - before < args.procs - args.pods and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(1)
            run_commands(cmds, args, f"{args.pods} pods of {count_procs() - before} processes, ")
            return
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
        run_commands(cmds, args, "")
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
        if top:
            remove_cgroups(top)
        shutil.rmtree(tmp, ignore_errors=True)


def run_commands(cmds, args, what):
    """Each command --runs times, interleaved; a Markdown table of medians."""
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
    print(f"{what}{n} processes on the machine, {args.runs} interleaved runs, "
          f"load average {' '.join(load)}\n")
    print("| command | wall median | wall min | CPU median | wall / ps | CPU / ps | exit |")
    print("|---|---|---|---|---|---|---|")
    pw, pc = statistics.median(wall["ps"]), statistics.median(cpu["ps"])
    for name, argv in cmds:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {w * 1000:.1f} ms | {min(wall[name]) * 1000:.1f} ms | "
              f"{c * 1000:.1f} ms | {w / pw:.2f} | {c / pc:.2f} | {codes[name]} |")


if __name__ == "__main__":
    main()
