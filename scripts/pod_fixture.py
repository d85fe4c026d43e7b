#!/usr/bin/env python3
"""A recorded /proc for the pod scan, and the scans of two builds compared on it
(PERFORMANCE.md, "The pod scan"; issue 50).

  scripts/pod_fixture.py record OUT.json --leasectl BIN [--procs 1000] [--pods 5]
    (root) Starts the harness -- namespaced pods in cgroups named as containerd
    names a container (mount and PID namespaces of their own, a tmpfs data
    directory, HOSTNAME, `writer exec` holding its lock over sleepers, and in
    the first pod a second `writer exec` polling for it); on the host a lock
    held by flock(1) with two blocked waiters, a lock held by `writer exec`
    with a second one polling for it, an invalid CLOUD_WRITER_LEASE, a stamp
    naming a dead pid, a stamp without the lease; and sleepers (one in ten with
    CLOUD_WRITER_LEASE=1) up to --procs processes -- then copies what the scan
    reads of every process into OUT, and stops the harness.

  scripts/pod_fixture.py materialise FIXTURE.json DIR
    Writes the fixture as a proc root, DIR/proc (the lock files under DIR/files).

  scripts/pod_fixture.py compare FIXTURE.json --before B --after A
    `pod-scan --json --proc-root DIR/proc` of both builds in every mode (auto,
    --node, --pod-root 1, --pod-root of the first pod, --data-dir of the host's
    flock(1) lock): the documents, normalised, must be the same, and so must the
    exit codes. Exit 1 on any difference (a unified diff of each).

  scripts/pod_fixture.py bless FIXTURE.json --binary B --out EXPECTED.json
    What the CI test (tests/it/writer/fixture.rs) compares with: per mode the
    exit code, the SHA-256 of the normalised document, its verdicts and counts.

What is kept of a process: `stat`; of its initial environment only
CLOUD_WRITER_LEASE, CLOUD_WRITER_LEASE_HELD and, when the harness started it,
HOSTNAME (the scan keeps no more), and whether it had any other variable
(`environ_other`, false when it had none; when true or absent one made-up
variable stands for them: a kernel thread has no environment, so the scan
may tell a user process by its having one); its command line when the harness started
it (another process's is replaced by its `comm`); `cgroup`, `uid_map`, the `ns/mnt`, `ns/user` and
`root` links; every descriptor's link (an absolute path other than a lock
file's as `/file`), and the `fdinfo` of those on a `.writer.lock`. Each lock
file becomes DIR/files/K/.writer.lock, its device and inode in `locks` and in
`fdinfo` rewritten to the new file's when materialised; a lock file the kernel
said was locked while no process here showed it (a holder in another PID
namespace) is flocked while the scans run. A file the recorder was refused
stands as one the scan cannot read: an `environ` as a directory, an `fd` table
as a file (a refused descriptor makes its whole table refused), a namespace
link as no link. A process that exited meanwhile, or holds a deleted lock
file (which cannot be made again), is left out; `vanished` (added by hand)
lists what processes that exited while the scan read them leave: a
directory with some of its files or none. Normalising: the
fixture's directory becomes `{fixture}`, what the scan tells to do about the
processes it could not inspect `{remedy}`, and `viewer.euid` and
`viewer.cap_sys_ptrace` are dropped (those three are the running scan's own).
"""
import argparse
import difflib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pod_bench import cgroup_base, count_procs, remove_cgroups  # noqa: E402

LOCK = ".writer.lock"
# What stands for the variables of an environment the recorder did not keep.
OTHER = "FIXTURE_OTHER=variables not recorded"
KEEP_ENV = (b"CLOUD_WRITER_LEASE=", b"CLOUD_WRITER_LEASE_HELD=", b"HOSTNAME=")


# ---- the harness -------------------------------------------------------------

def start_pods(n, per_pod, leasectl, tmp, top):
    """n pods as scripts/pod_bench.py makes them; the first with a second
    `writer exec` polling for the lock."""
    groups = []
    for i in range(n):
        uid = f"{os.getpid():08x}-{i:04x}-4000-8000-{i * 7919:012x}"
        cid = f"{os.getpid():08x}{i:08x}" + "c0ffee" * 8
        cg = os.path.join(top, "kubepods.slice", "kubepods-besteffort.slice",
                          f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice",
                          f"cri-containerd-{cid}.scope")
        os.makedirs(cg)
        data = os.path.join(tmp, f"pod-{i}")
        os.makedirs(data)
        sleepers = " ".join(["sleep 900 &"] * max(1, per_pod - 3))
        hold = (f"{shlex.quote(leasectl)} writer exec --data-dir {shlex.quote(data)} --wait 900s -- "
                f"sh -c {shlex.quote(sleepers + ' wait')}")
        inner = f"mount -t tmpfs none {shlex.quote(data)} && "
        if i == 0:
            inner += f"(CLOUD_WRITER_LEASE=1 {hold} &) && sleep 1 && "
        inner += f"CLOUD_WRITER_LEASE=1 exec {hold}"
        outer = (f"echo 0 > {shlex.quote(cg)}/cgroup.procs && exec unshare --mount --propagation private "
                 f"--pid --fork --mount-proc -- sh -c {shlex.quote(inner)}")
        env = dict(os.environ, HOSTNAME=f"web-{i}")
        groups.append(subprocess.Popen(["sh", "-c", outer], env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True))
    return groups


def start_host(leasectl, tmp):
    """The host's holders, waiters and odd environments; their process groups."""
    groups = []

    def spawn(argv, **env):
        e = dict(os.environ)
        e.update(env)
        groups.append(subprocess.Popen(argv, env=e, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True))

    flocked = os.path.join(tmp, "host-flock")
    os.makedirs(flocked)
    lock = os.path.join(flocked, LOCK)
    open(lock, "w").close()
    spawn(["flock", lock, "sleep", "900"], CLOUD_WRITER_LEASE="1")
    time.sleep(0.3)
    for _ in range(2):
        spawn(["flock", lock, "sleep", "900"], CLOUD_WRITER_LEASE="1")
    execd = os.path.join(tmp, "host-exec")
    os.makedirs(execd)
    for _ in range(2):
        spawn([leasectl, "writer", "exec", "--data-dir", execd, "--wait", "900s", "--",
               "sleep", "900"], CLOUD_WRITER_LEASE="1")
        time.sleep(0.5)
    spawn(["sleep", "900"], CLOUD_WRITER_LEASE="maybe")
    dead = subprocess.Popen(["true"])
    dead.wait()
    spawn(["sleep", "900"], CLOUD_WRITER_LEASE="1", CLOUD_WRITER_LEASE_HELD=str(dead.pid))
    spawn(["sleep", "900"], CLOUD_WRITER_LEASE_HELD="1")
    return groups, flocked


# ---- recording ---------------------------------------------------------------

def read(path, limit=None):
    with open(path, "rb") as f:
        return f.read() if limit is None else f.read(limit)


def harness_pids(root_pid):
    """The recorder and its descendants (their command lines are kept)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = read(f"/proc/{d}/stat").decode("latin-1")
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root_pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(children.get(p, []))
    return out


class Recorder:
    def __init__(self):
        self.lock_files = []   # {"path", "id": (maj, min, ino)}
        self.by_key = {}       # (dev, ino) -> K

    def lock_index(self, dev, ino, path):
        k = self.by_key.get((dev, ino))
        if k is None:
            k = len(self.lock_files)
            self.by_key[(dev, ino)] = k
            self.lock_files.append({"path": path, "kernel": "%02x:%02x:%d" % (
                os.major(dev), os.minor(dev), ino)})
        return k

    def process(self, pid, ours):
        """What the scan reads of one process (None where it may not be
        read); None when it exited or is not whole."""
        d = f"/proc/{pid}"
        p = {"stat": read(f"{d}/stat").decode("latin-1")}
        comm = p["stat"][p["stat"].index("(") + 1:p["stat"].rindex(")")]
        kthread = int(p["stat"][p["stat"].rindex(")") + 2:].split()[6]) & 0x200000
        if kthread:
            return p  # the scan reads nothing else of a kernel thread
        keep = KEEP_ENV if pid in ours else KEEP_ENV[:2]
        env = refused(lambda: [e for e in read(f"{d}/environ").split(b"\0") if e])
        p["environ"] = None if env is None else [e.decode("latin-1") for e in env if e.startswith(keep)]
        if env is not None and len(env) == len(p["environ"]):
            p["environ_other"] = False
        cmd = read(f"{d}/cmdline")
        p["cmdline"] = (cmd if pid in ours or not cmd else comm.encode("latin-1") + b"\0").decode("latin-1")
        p["cgroup"] = read(f"{d}/cgroup").decode("latin-1")
        p["uid_map"] = read(f"{d}/uid_map").decode("latin-1")
        p["ns"] = {n: refused(lambda n=n: os.readlink(f"{d}/ns/{n}")) for n in ("mnt", "user")}
        p["root"] = refused(lambda: os.readlink(f"{d}/root"))
        if None in p["ns"].values() or p["root"] is None:
            # The scan compares mount tables where the links may not be read.
            p["mountinfo"] = read(f"{d}/mountinfo").decode("latin-1")
        p["fd"], p["fdinfo"] = refused(lambda: self.fds(d)) or (None, {})
        if p["fd"] is not None and None in p["fd"].values():
            return None  # a deleted lock file cannot be made again
        return p

    def fds(self, d):
        fds, fdinfo = {}, {}
        for fd in os.listdir(f"{d}/fd"):
            try:
                t = os.readlink(f"{d}/fd/{fd}")
            except FileNotFoundError:
                continue
            name = t[:-len(" (deleted)")] if t.endswith(" (deleted)") else t
            if t.startswith("/") and os.path.basename(name) == LOCK:
                if t != name:
                    fds[fd] = None
                    continue
                st = os.stat(f"{d}/fd/{fd}")
                k = self.lock_index(st.st_dev, st.st_ino, t)
                fds[fd] = f"@LOCK{k}@"
                fdinfo[fd] = read(f"{d}/fdinfo/{fd}").decode("latin-1")
            else:
                fds[fd] = "/file" if t.startswith("/") else t
        return fds, fdinfo

    def finish(self, doc):
        """Device and inode of each lock file as placeholders; other lines'
        as a device no file has."""
        ids = {f["kernel"]: k for k, f in enumerate(self.lock_files)}

        def sub(text):
            return re.sub(r"\b([0-9a-f]{2,}:[0-9a-f]{2,}:\d+)\b",
                          lambda m: f"@ID{ids[m.group(1)]}@" if m.group(1) in ids
                          else "00:00:" + m.group(1).rsplit(":", 1)[1], text)

        doc["locks"] = sub(doc["locks"])
        for p in doc["processes"].values():
            if p.get("fdinfo"):
                p["fdinfo"] = {fd: sub(t) for fd, t in p["fdinfo"].items()}
            else:
                p.pop("fdinfo", None)
        for f in self.lock_files:
            del f["kernel"]


def refused(f):
    """f(), or None when reading was refused (the process is still there)."""
    try:
        return f()
    except PermissionError:
        return None


def probe_locked(path):
    with open(path, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def record(args):
    if os.geteuid() != 0:
        sys.exit("record: the harness needs root (namespaces, cgroups)")
    tmp = tempfile.mkdtemp(prefix="leasectl-fixture-")
    top = os.path.join(cgroup_base(), f"leasectl-fixture-{os.getpid()}")
    leasectl = os.path.abspath(args.leasectl)
    groups, sleepers = [], []
    try:
        groups += start_pods(args.pods, 20, leasectl, tmp, top)
        host, _ = start_host(leasectl, tmp)
        groups += host
        # The pods' processes first (each takes its lock, then starts its
        # sleepers), then sleepers up to --procs.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = count_procs()
            time.sleep(1)
            if count_procs() == before:
                break
        env = dict(os.environ, CLOUD_WRITER_LEASE="1")
        for i in range(max(0, args.procs - count_procs())):
            sleepers.append(subprocess.Popen(["sleep", "900"], env=env if i % 10 == 0 else None,
                                             stdin=subprocess.DEVNULL))
        time.sleep(1)
        doc = snapshot()
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=0, sort_keys=True)
            f.write("\n")
        print(f"recorded {len(doc['processes'])} processes ({doc['left_out']} left out), "
              f"{len(doc['lock_files'])} lock files, into {args.out}")
    finally:
        for g in groups:
            try:
                os.killpg(g.pid, 9)
            except ProcessLookupError:
                pass
        for p in sleepers:
            p.kill()
        for p in sleepers + groups:
            p.wait()
        if os.path.isdir(top):
            remove_cgroups(top)
        shutil.rmtree(tmp, ignore_errors=True)


def snapshot():
    me = os.getpid()
    ours = harness_pids(me)
    rec = Recorder()
    doc = {"self": str(me), "processes": {}, "left_out": 0,
           "kernel": os.uname().release}
    for d in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
        if not d.isdigit():
            continue
        try:
            p = rec.process(int(d), ours)
        except OSError:
            p = None
        if p is None:
            doc["left_out"] += 1
            print(f"left out: pid {d} (it exited, or holds a deleted lock file)", file=sys.stderr)
            continue
        doc["processes"][d] = p
    doc["self_mountinfo"] = read(f"/proc/{me}/mountinfo").decode("latin-1")
    doc["locks"] = read("/proc/locks").decode("latin-1")
    doc["uptime"] = read("/proc/uptime").decode("latin-1")
    if doc["self"] not in doc["processes"]:
        sys.exit("record: the recorder itself could not be read")
    rec.finish(doc)
    # Whether a lock file no process here shows locked is locked, asked of the
    # kernel (a holder in a PID namespace not visible here is in no /proc file).
    for k, f in enumerate(rec.lock_files):
        mark = f"@ID{k}@"
        shown = mark in doc["locks"] or any(
            mark in t for p in doc["processes"].values() for t in p.get("fdinfo", {}).values())
        pid, fd = next((pid, fd) for pid, p in doc["processes"].items()
                       for fd, t in (p.get("fd") or {}).items() if t == f"@LOCK{k}@")
        f["locked"] = not shown and probe_locked(f"/proc/{pid}/fd/{fd}")
    doc["lock_files"] = rec.lock_files
    # Texts most processes share (cgroups, uid maps, namespace links), once.
    texts, index = [], {}
    for p in doc["processes"].values():
        for key in ("cgroup", "uid_map", "root"):
            if isinstance(p.get(key), str):
                if p[key] not in index:
                    index[p[key]] = len(texts)
                    texts.append(p[key])
                p[key] = index[p[key]]
        for n, t in (p.get("ns") or {}).items():
            if t is not None:
                if t not in index:
                    index[t] = len(texts)
                    texts.append(t)
                p["ns"][n] = index[t]
    doc["texts"] = texts
    return doc


# ---- materialising, scanning, comparing ---------------------------------------

def materialise(doc, out):
    """DIR/proc and DIR/files; the open, flocked lock files to keep open while
    the scans run."""
    proc, files = os.path.join(out, "proc"), os.path.join(out, "files")
    held, ids, paths = [], {}, {}
    for k, f in enumerate(doc["lock_files"]):
        d = os.path.join(files, str(k))
        os.makedirs(d)
        path = os.path.join(d, LOCK)
        open(path, "w").close()
        st = os.stat(path)
        ids[k] = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
        paths[k] = path
        if f["locked"]:
            h = open(path, "rb")
            fcntl.flock(h, fcntl.LOCK_EX)
            held.append(h)

    def fill(text):
        text = re.sub(r"@ID(\d+)@", lambda m: ids[int(m.group(1))], text)
        return re.sub(r"@LOCK(\d+)@", lambda m: paths[int(m.group(1))], text)

    os.makedirs(proc)
    for name in ("locks", "uptime"):
        with open(os.path.join(proc, name), "w", encoding="latin-1") as f:
            f.write(fill(doc[name]))
    os.symlink(doc["self"], os.path.join(proc, "self"))
    for pid, files in doc.get("vanished", {}).items():
        os.makedirs(os.path.join(proc, pid))
        for name, t in files.items():
            with open(os.path.join(proc, pid, name), "w", encoding="latin-1") as f:
                f.write(t)
    texts = doc["texts"]

    def text(v):
        return texts[v] if isinstance(v, int) else v

    for pid, p in doc["processes"].items():
        d = os.path.join(proc, pid)
        os.makedirs(d)
        p = {k: text(v) for k, v in p.items()}
        if "ns" in p:
            p["ns"] = {n: text(t) for n, t in p["ns"].items()}

        def write(name, text, d=d):
            with open(os.path.join(d, name), "w", encoding="latin-1") as f:
                f.write(text)

        write("stat", p["stat"])
        for name in ("cmdline", "cgroup", "uid_map", "mountinfo"):
            if name in p:
                write(name, p[name])
        if pid == doc["self"]:
            write("mountinfo", doc["self_mountinfo"])
        if "environ" in p:
            # A directory cannot be read as a file: it stands for a refusal.
            if p["environ"] is None:
                os.makedirs(os.path.join(d, "environ"))
            else:
                other = [OTHER] if p.get("environ_other", True) else []
                write("environ", "".join(e + "\0" for e in p["environ"] + other))
        if "ns" in p:
            os.makedirs(os.path.join(d, "ns"))
            for n, t in p["ns"].items():
                if t is not None:
                    os.symlink(t, os.path.join(d, "ns", n))
        if p.get("root") is not None:
            os.symlink(p["root"], os.path.join(d, "root"))
        if "fd" in p:
            # A file cannot be listed as a directory: it stands for a refusal.
            if p["fd"] is None:
                write("fd", "")
            else:
                os.makedirs(os.path.join(d, "fd"))
                for fd, t in p["fd"].items():
                    os.symlink(fill(t), os.path.join(d, "fd", fd))
        os.makedirs(os.path.join(d, "fdinfo"))
        for fd, t in p.get("fdinfo", {}).items():
            write(os.path.join("fdinfo", fd), fill(t))
    return held, paths


def modes(doc, paths):
    """Each mode's name and `pod-scan` arguments."""
    out = [("auto", []), ("node", ["--node"]), ("pod_root_1", ["--pod-root", "1"])]
    # The first pod's root: its `unshare`.
    texts = doc["texts"]
    roots = sorted(int(pid) for pid, p in doc["processes"].items()
                   if "cgroup" in p and "cri-containerd-" in texts[p["cgroup"]]
                   and p["cmdline"].startswith("unshare\0"))
    if roots:
        out.append(("pod_root_pod", ["--pod-root", str(roots[0])]))
    flocked = [k for k, f in enumerate(doc["lock_files"]) if "/host-flock/" in f["path"]]
    if flocked:
        out.append(("data_dir", ["--data-dir", os.path.dirname(paths[flocked[0]])]))
    return out


NOTE_HEAD = "1 process could not be inspected ("
NOTE_TAIL = "): its duty or lock is unknown and no verdict is built on it."


def remedy_of(binary):
    """What `binary`, run as this user, tells to do about processes it could
    not inspect (it depends on the viewer's rights, not on the fixture): the
    note of a scan of one process whose environment is refused."""
    tmp = tempfile.mkdtemp(prefix="leasectl-remedy-")
    try:
        d = os.path.join(tmp, "100")
        for sub in ("environ", "fd", "fdinfo"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "stat"), "w") as f:
            f.write("100 (fake) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n")
        with open(os.path.join(d, "cmdline"), "w") as f:
            f.write("fake\0")
        for name in ("locks", "uptime"):
            with open(os.path.join(tmp, name), "w") as f:
                f.write("" if name == "locks" else "100.0 50.0\n")
        p = subprocess.run([binary, "pod-scan", "--json", "--proc-root", tmp, "--pod-root", "100"],
                           capture_output=True, text=True)
        for n in json.loads(p.stdout).get("notes", []):
            if n.startswith(NOTE_HEAD) and n.endswith(NOTE_TAIL):
                return n[len(NOTE_HEAD):-len(NOTE_TAIL)]
        sys.exit(f"{binary}: no note about the process it could not inspect: {p.stdout}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def strings(v, f):
    """v with f applied to every string in it."""
    if isinstance(v, str):
        return f(v)
    if isinstance(v, list):
        return [strings(x, f) for x in v]
    if isinstance(v, dict):
        return {k: strings(x, f) for k, x in v.items()}
    return v


def normalise(text, fixture, remedy):
    """The document with the running scan's own facts taken out."""
    doc = strings(json.loads(text),
                  lambda s: s.replace(fixture, "{fixture}").replace(remedy, "{remedy}"))
    viewer = doc.get("viewer")
    if isinstance(viewer, dict):
        viewer.pop("euid", None)
        viewer.pop("cap_sys_ptrace", None)
    return doc


def canonical(doc):
    """The form the CI test hashes: keys sorted, no space, UTF-8 (what
    serde_json writes of a `Value`)."""
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def pretty(doc):
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def scan(binary, proc, args, fixture, remedy):
    p = subprocess.run([binary, "pod-scan", "--json", "--proc-root", proc, *args],
                       capture_output=True, text=True, env=dict(os.environ, LEASECTL_LOG="warn"))
    if not p.stdout.strip():
        sys.exit(f"{binary} pod-scan {' '.join(args)}: exit {p.returncode}, no document: {p.stderr}")
    return p.returncode, normalise(p.stdout, fixture, remedy)


def summary(doc):
    """What a reader looks at first: the verdicts (kind and pids), the lock
    files (path, state, holders), how many processes are shown and how many
    could not be inspected."""
    words = lambda *xs: " ".join(str(x) for x in xs)  # noqa: E731
    return {
        "verdicts": [words(v["kind"], *v["pids"]) for v in doc.get("verdicts", [])],
        "locks": [words(l["path"], l["state"], *l["holders"]) for l in doc.get("locks", [])],
        "processes": len(doc.get("processes", [])),
        "uninspected": len(doc.get("uninspected", [])),
    }


def with_fixture(path, f):
    with open(path) as fh:
        doc = json.load(fh)
    # On a tmpfs where there is one: some 12,000 files and links are made.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="leasectl-fixture-", dir=shm)
    try:
        held, paths = materialise(doc, tmp)
        try:
            return f(doc, tmp, paths)
        finally:
            for h in held:
                h.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compare(args):
    def run(doc, tmp, paths):
        proc, bad = os.path.join(tmp, "proc"), 0
        rb, ra = remedy_of(args.before), remedy_of(args.after)
        for name, margs in modes(doc, paths):
            (bc, b), (ac, a) = (scan(args.before, proc, margs, tmp, rb),
                                scan(args.after, proc, margs, tmp, ra))
            s = summary(a)
            same = (bc, canonical(b)) == (ac, canonical(a))
            print(f"{name:13} {'same' if same else 'DIFFERENT'}: exit {bc} / {ac}, "
                  f"{s['processes']} processes, {len(s['locks'])} lock files, verdicts "
                  f"{', '.join(v.split()[0] for v in s['verdicts']) or 'none'}, "
                  f"{len(canonical(b))} bytes")
            if not same:
                bad += 1
                sys.stdout.writelines(difflib.unified_diff(
                    pretty(b).splitlines(True), pretty(a).splitlines(True),
                    f"before {name}", f"after {name}"))
        return bad

    bad = with_fixture(args.fixture, run)
    sys.exit(1 if bad else 0)


def bless(args):
    def run(doc, tmp, paths):
        out, remedy = {}, remedy_of(args.binary)
        for name, margs in modes(doc, paths):
            code, doc = scan(args.binary, os.path.join(tmp, "proc"), margs, tmp, remedy)
            out[name] = {"args": [a.replace(tmp, "{fixture}") for a in margs], "exit": code,
                         "sha256": hashlib.sha256(canonical(doc).encode()).hexdigest(),
                         **summary(doc)}
        return out

    expected = with_fixture(args.fixture, run)
    with open(args.out, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {args.out}: {', '.join(expected)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--leasectl", required=True)
    r.add_argument("--procs", type=int, default=1000)
    r.add_argument("--pods", type=int, default=5)
    m = sub.add_parser("materialise")
    m.add_argument("fixture")
    m.add_argument("dir")
    c = sub.add_parser("compare")
    c.add_argument("fixture")
    c.add_argument("--before", required=True)
    c.add_argument("--after", required=True)
    b = sub.add_parser("bless")
    b.add_argument("fixture")
    b.add_argument("--binary", required=True)
    b.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "record":
        record(a)
    elif a.cmd == "materialise":
        with open(a.fixture) as fh:
            held, _ = materialise(json.load(fh), a.dir)
        for h in held:
            h.close()
        print(f"{a.dir}/proc (lock files that were held elsewhere are not held now)")
    elif a.cmd == "compare":
        compare(a)
    else:
        bless(a)


if __name__ == "__main__":
    main()
