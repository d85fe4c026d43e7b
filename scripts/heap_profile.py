#!/usr/bin/env python3
"""Heap profiles of leasectl with heaptrack (issue 38; docs/performance-history.md,
"Issue 38: heap profiles").

heaptrack sees only the system allocator: profile a build without mimalloc,
`cargo build --profile profiling --no-default-features` (for a commit without
that feature, one with its `#[global_allocator]` lines removed, built with
`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`).

  scripts/heap_profile.py run --binary BIN --label after [--prefixes 10000,50000]
      [--only json,console] [--settle 30] [--out-dir /tmp/heap]
    On a local store of N prefixes (scripts/memory.py's make_store): heaptrack of
    `BIN --no-pod --json file://STORE/`, and of the console
    (`BIN --no-pod --refresh 5s file://STORE/` in a 200×50 tmux pane) until
    every row is loaded plus --settle seconds, then `q`. Writes
    OUT/heaptrack.LABEL.{json,console}-N.zst, then prints each file's top ten.

  scripts/heap_profile.py top [--src-root DIR] FILE...
    The ten allocation sites with the most bytes live at the heap's peak: every
    backtrace (heaptrack_print -m 0) named by the first frame outside Rust's
    standard library (the function that allocates: a library's or leasectl's)
    and the innermost leasectl frame that led there (its caller), summed by that
    pair; Markdown. heaptrack_print's own report goes beside FILE (.txt).
    --src-root: the leasectl tree the binary was built from (default: this one),
    to tell its `src/…` frames from other crates' relative paths.
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory import make_store  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = {"B": 1, "K": 1e3, "M": 1e6, "G": 1e9}  # heaptrack_print's units are decimal


def size(text):
    m = re.fullmatch(r"([\d.]+)([BKMG])", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def heaptrack_file(prefix):
    for ext in (".zst", ".gz", ""):
        if os.path.exists(prefix + ext):
            return prefix + ext
    sys.exit(f"heaptrack wrote no {prefix}.*")


def profile_json(binary, store, out):
    with open(os.devnull, "w") as null:
        p = subprocess.run(["heaptrack", "-o", out, binary, "--no-pod", "--json",
                            f"file://{store}/"], stdout=null, stderr=subprocess.PIPE)
    if p.returncode not in (0, 3):
        sys.exit(f"heaptrack --json: exit {p.returncode}: {p.stderr.decode()[-2000:]}")
    return heaptrack_file(out)


def profile_console(binary, store, n, out, settle):
    tmux = ["tmux", "-L", f"leasectl-heap-{os.getpid()}"]
    cmd = f"heaptrack -o {out} {binary} --no-pod --refresh 5s file://{store}/"
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", cmd], check=True)
    try:
        t0 = time.time()
        while True:  # as scripts/memory.py's console(): every row loaded
            screen = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True,
                                    text=True).stdout
            if f"/{n} " in screen and "loading" not in screen:
                break
            if time.time() - t0 > 1800:
                sys.exit(f"the console did not load {n} rows:\n{screen}")
            time.sleep(1)
        print(f"console-{n}: loaded in {time.time() - t0:.0f} s under heaptrack", flush=True)
        time.sleep(settle)
        subprocess.run([*tmux, "send-keys", "q"], check=True)
        t1 = time.time()
        while subprocess.run([*tmux, "has-session"], stderr=subprocess.DEVNULL).returncode == 0:
            if time.time() - t1 > 600:
                sys.exit("the console did not quit")
            time.sleep(1)
    finally:
        subprocess.run([*tmux, "kill-server"], stderr=subprocess.DEVNULL)
    return heaptrack_file(out)


def run(a):
    binary = os.path.abspath(a.binary)
    os.makedirs(a.out_dir, exist_ok=True)
    files = []
    for n in [int(x) for x in a.prefixes.split(",")]:
        store = make_store(n)
        try:
            for what in a.only.split(","):
                out = os.path.join(a.out_dir, f"heaptrack.{a.label}.{what}-{n}")
                t0 = time.time()
                if what == "json":
                    files.append(profile_json(binary, store, out))
                else:
                    files.append(profile_console(binary, store, n, out, a.settle))
                print(f"{files[-1]} ({time.time() - t0:.0f} s)", flush=True)
        finally:
            subprocess.run(["rm", "-rf", store])
    for f in files:
        top(f, a.src_root)


def frames_of(block):
    """[(function, location)] innermost first, from one backtrace of heaptrack_print."""
    out = []
    for line in block:
        if line.startswith("  ") and not line.startswith("   "):
            out.append([line.strip(), ""])
        elif line.strip().startswith("at ") and out:
            out[-1][1] = line.strip()[3:]
    return out


class Tree:
    """Tells leasectl's frames from other crates': heaptrack prints some
    crates' paths relative (`src/client.rs`), as it prints leasectl's."""

    def __init__(self, root):
        self.root, self.cache = root, {}

    def ours(self, func, loc):
        m = re.fullmatch(r"(src/[\w/]+\.rs):(\d+)", loc)
        if not m:
            return False
        path = os.path.join(self.root, m.group(1))
        if path not in self.cache:
            self.cache[path] = open(path).read() if os.path.exists(path) else None
        text = self.cache[path]
        if text is None or int(m.group(2)) > text.count("\n") + 1:
            return False
        name = re.sub(r"<.*", "", func.split("::")[-1])
        return name.startswith("{") or not name.isidentifier() or name in text


def crate_of(loc):
    m = re.search(r"/index\.crates\.io-[^/]+/([^/]+)/(.*)", loc)
    if m:
        return m.group(1), m.group(2)
    m = re.match(r"/rust/deps/([^/]+)/(.*)", loc)  # std's own dependencies
    if m:
        return "std/" + m.group(1), m.group(2)
    return "?", loc


PLUMBING = ("tokio-", "futures-", "std/", "tracing-", "?")


def short(func):
    if func.startswith(("_R", "_ZN")):  # a symbol heaptrack left mangled
        func = subprocess.run(["c++filt", func], capture_output=True, text=True).stdout.strip()
    func = re.sub(r"\[[0-9a-f]{16}\]", "", func)
    return func if len(func) < 60 else func[:57] + "…"


def std_frame(loc):
    return loc.startswith(("/rustc/", "library/")) or not loc


def std_name(func, loc):
    m = re.search(r"library/(\w+)/src/(.*)", loc)
    return f"{m.group(1)} {m.group(2)} {short(func)}" if m else short(func)


def site(frames, tree):
    """(what allocates, its leasectl caller) for one backtrace: the first frame
    outside Rust's standard library (a library's function, with the standard
    library call it made), or, when that frame is leasectl's, the standard
    library call; the caller is the innermost leasectl frame (or, with none,
    the first library frame past the allocating one), and the leasectl frame
    that called it."""
    alloc, hint, caller, library = None, None, None, None
    for func, loc in frames:
        if alloc is None:
            if std_frame(loc):
                if loc and "/alloc/src/alloc.rs" not in loc and "/raw_vec" not in loc:
                    hint = std_name(func, loc)
                continue
            if tree.ours(func, loc):
                alloc, caller = hint or "?", f"{loc} {short(func)}"
                continue
            crate, path = crate_of(loc)
            alloc, alloc_path = f"{crate} {path} {short(func)}", path
            if hint:
                alloc += f" [{hint}]"
            continue
        crate, path = crate_of(loc)
        if alloc.startswith("? ") and crate != "?" \
                and path.split(":")[0] == alloc_path.split(":")[0]:
            alloc = crate + alloc[1:]  # the relative path was this crate's
            continue
        if tree.ours(func, loc):
            if caller is None:
                caller = f"{loc} {short(func)}"
                continue
            caller += f" ← {loc} {short(func)}"
            break
        if caller is None and library is None and not crate.startswith(PLUMBING) \
                and not alloc.startswith(crate + " "):
            library = f"{crate} {path} {short(func)}"
    if caller is None and library:
        caller = f"none; from {library}"
    return alloc or f"std {hint or '?'}", caller or "–"


def top(path, src_root, limit=10):
    raw = re.sub(r"\.(zst|gz)$", "", path) + ".txt"
    with open(raw, "w") as f:
        subprocess.run(["heaptrack_print", "-f", path], stdout=f, check=True)
    p = subprocess.run(["heaptrack_print", "-f", path, "-p", "1", "-a", "0", "-T", "0", "-m", "0",
                        "-n", "5000"], capture_output=True, text=True, check=True)
    lines = p.stdout.splitlines()
    peak = re.search(r"peak heap memory consumption: (\S+)", p.stdout)
    rss = re.search(r"peak RSS \(including heaptrack overhead\): (\S+)", p.stdout)
    tree = Tree(src_root)
    sums, block, cost, seen = {}, [], None, 0.0

    def flush():
        nonlocal seen
        if cost is not None:
            key = site(frames_of(block), tree)
            sums[key] = sums.get(key, 0.0) + cost
            seen += cost

    in_peaks = False
    for line in lines:
        if line.startswith("PEAK MEMORY CONSUMERS"):
            in_peaks = True
            continue
        if not in_peaks:
            continue
        m = re.match(r"(\S+) peak memory consumed over (\d+) calls from", line)
        if m:
            flush()
            cost, block = size(m.group(1)), []
        elif line.startswith("  "):
            block.append(line)
        elif line.strip():
            break
    flush()
    total = size(peak.group(1)) if peak else seen
    print(f"\n{os.path.basename(path)}: peak heap {total / 1e6:.1f} MB, peak RSS with heaptrack "
          f"{rss.group(1) if rss else '?'}; raw report {raw}\n")
    print("| # | peak | what allocates [its std call] | leasectl caller |")
    print("|---|---|---|---|")
    for i, ((alloc, caller), c) in enumerate(sorted(sums.items(), key=lambda kv: -kv[1])[:limit]):
        print(f"| {i + 1} | {c / 1e6:.2f} MB | `{alloc}` | `{caller}` |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--binary", required=True)
    r.add_argument("--label", required=True)
    r.add_argument("--prefixes", default="10000,50000")
    r.add_argument("--only", default="json,console")
    r.add_argument("--settle", type=float, default=30.0)
    r.add_argument("--out-dir", default="/tmp/heap")
    r.add_argument("--src-root", default=REPO)
    t = sub.add_parser("top")
    t.add_argument("--src-root", default=REPO)
    t.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a)
    else:
        for f in a.files:
            top(f, a.src_root)


if __name__ == "__main__":
    main()
