//! Reading a `/proc` tree (the root is injectable, see
//! [`super::ScanOptions::proc_root`]): one pass over every process (side by
//! side when there are many), reading its `stat` and what the caller knows
//! it will need of every process (its descriptors and environment for an
//! auto-detected pod, which reads the `stat` of a process in no pod only
//! when asked; its cgroup for the node view); then each process's
//! initial environment (only the lease variables), descriptors on lock
//! files, command line and cgroup on demand, once each — side by side for a
//! set of processes asked at once ([`ProcTable::prefetch`]); and the granted
//! FLOCK entries of `/proc/locks`. The files of one process are read by
//! `files`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::kube::ContainerRef;
use super::model::EnvRead;
use super::model::NsRelation;
use crate::writer::{sanitize, WriterError};

/// What the scan keeps of a process's initial environment: the two lease
/// variables, whether reading was refused, and `HOSTNAME` (a pod's name).
#[derive(Debug, Clone)]
pub(super) struct EnvEntry {
    pub(super) env: EnvRead,
    /// Reading was refused (not: the process exited).
    pub(super) denied: bool,
    /// `HOSTNAME`, cut to 256 bytes; no other variable is kept.
    pub(super) hostname: Option<String>,
}

/// A descriptor on a file named `.writer.lock`.
#[derive(Debug, Clone)]
pub(super) struct LockFd {
    pub(super) dev: u64,
    pub(super) ino: u64,
    /// The escaped path, as the link shows it.
    pub(super) path: String,
    /// `{root}/PID/fd/N`: opening it opens the same file (for the probe).
    pub(super) link: PathBuf,
    /// The link's target, unescaped.
    pub(super) target: PathBuf,
    /// `(maj, min, inode)` of each FLOCK `lock:` line in this fd's fdinfo.
    pub(super) lock_ids: Vec<(u32, u32, u64)>,
    /// The file was deleted (the link ends in ` (deleted)` and the file has
    /// no link left): `target` names where it was.
    pub(super) deleted: bool,
}

/// A process's descriptors on lock files, or why they could not be read.
#[derive(Debug, Default)]
pub(super) struct FdsRead {
    pub(super) fds: Vec<LockFd>,
    /// Why the table (or a lock file's fdinfo) could not be read.
    pub(super) unreadable: Option<String>,
}

/// From how many processes a pass over them reads with several threads:
/// a thread costs ~30 µs to start, a process's `stat` alone ~8 µs to read
/// (its descriptors, environment, command line and cgroup ~30 µs more).
const THREADS_FROM: usize = 32;

#[derive(Debug)]
pub(super) struct RawProc {
    pub(super) pid: u32,
    /// A kernel thread: no environment, no descriptors, never in a pod.
    pub(super) kthread: bool,
    /// `{root}/PID`.
    pub(super) dir: PathBuf,
    /// Its `stat` (parent, `comm`, start time): read with the process, or,
    /// for a process an auto-detected pod's pass found to matter to nobody
    /// yet, on first use ([`RawProc::stat`]); `None` inside when that later
    /// read failed (the process exited meanwhile).
    stat: std::sync::OnceLock<Option<Stat>>,
}

impl RawProc {
    /// Its `stat`, read now if it was not read with the process; `None`
    /// when the process exited before it could be.
    pub(super) fn stat(&self) -> Option<&Stat> {
        self.stat
            .get_or_init(|| {
                let mut buf = Vec::new();
                raw::read_proc(&self.dir.join("stat"), &mut buf).ok()?;
                files::parse_stat(&buf)
            })
            .as_ref()
    }

    /// Its parent's pid (see [`RawProc::stat`]).
    pub(super) fn ppid(&self) -> Option<u32> {
        self.stat().map(|s| s.ppid)
    }
}

/// A one-pass read of every process's `stat` under the proc root; the
/// environment, the descriptors, the command line and the cgroup are read
/// on demand (or prefetched), once each.
pub(super) struct ProcTable {
    root: PathBuf,
    /// The root, open (see [`ProcRoot::fd`]); `None` where it could not be
    /// opened so (its files are then opened by path).
    root_fd: Option<std::os::fd::OwnedFd>,
    /// Its descriptor tables give their number of descriptors as their size.
    counts_fds: bool,
    pub(super) procs: BTreeMap<u32, RawProc>,
    env_cache: RefCell<BTreeMap<u32, EnvEntry>>,
    fd_cache: RefCell<BTreeMap<u32, Rc<FdsRead>>>,
    cgroup_cache: RefCell<BTreeMap<u32, Option<ContainerRef>>>,
    command_cache: RefCell<BTreeMap<u32, String>>,
    mount_cache: RefCell<BTreeMap<u32, (NsRelation, Option<String>)>>,
    user_cache: RefCell<BTreeMap<u32, (NsRelation, Option<u32>)>>,
    own_ns: super::ns::OwnNs,
    mnt_id_cache: RefCell<BTreeMap<u32, Option<std::ffi::OsString>>>,
}

impl ProcTable {
    /// Every process's `stat` under `root`; the rest is read on demand.
    pub(super) fn read(root: &Path) -> Result<ProcTable, WriterError> {
        Self::read_with(root, Want::NOTHING, false)
    }

    /// Every process under `root`, with what `want` asks of every user
    /// process (an auto-detected pod reads every one's descriptors and
    /// environment anyway; the node view every one's cgroup too): read by a
    /// few threads side by side when there are many processes, each file
    /// still read once, and cached as [`ProcTable::fds`], [`ProcTable::env`]
    /// and [`ProcTable::container`] would cache it.
    ///
    /// Every process's `stat` is read with it, except with `stat_on_demand`
    /// (an auto-detected pod, `want` asking for the environment): a process
    /// whose environment has bytes is then a user process (a kernel thread
    /// has none), and its `stat` is read only if it may be in the pod (a
    /// lease variable, a lock file open, descriptors that could not be
    /// read), else on first use ([`RawProc::stat`]: an ancestor of the
    /// pod's). Most processes of a machine are in no pod, and `stat` is the
    /// dearest of their files to read.
    ///
    /// # Errors
    /// [`WriterError::Proc`] when `root` cannot be listed.
    pub(super) fn read_with(
        root: &Path,
        want: Want,
        stat_on_demand: bool,
    ) -> Result<ProcTable, WriterError> {
        let listing_error = |e: std::io::Error| WriterError::Proc {
            path: root.to_path_buf(),
            message: sanitize(&e.to_string()),
        };
        let dir = open_dir(root).map_err(listing_error)?;
        let mut pids = Vec::with_capacity(1024);
        let mut dents = DirentBuf::new();
        each_entry(&dir, &mut dents, |name| {
            if let Some(pid) = std::str::from_utf8(name.to_bytes())
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
            {
                pids.push(pid);
            }
        })
        .map_err(listing_error)?;
        drop(dir);
        let on_demand = stat_on_demand && want.env;
        let root_fd = raw::open_root(root).ok();
        let at = ProcRoot {
            path: root,
            counts_fds: files::counts_fds(root),
            fd: root_fd.as_ref().map(std::os::fd::AsFd::as_fd),
        };
        let shares = in_shares(&pids, threads_for(pids.len()), &|&pid, bufs| {
            read_one(at, pid, want, on_demand, bufs)
        });
        let counts_fds = at.counts_fds;
        let table = ProcTable {
            root: root.to_path_buf(),
            root_fd,
            counts_fds,
            procs: BTreeMap::new(),
            env_cache: RefCell::default(),
            fd_cache: RefCell::default(),
            cgroup_cache: RefCell::default(),
            command_cache: RefCell::default(),
            mount_cache: RefCell::default(),
            user_cache: RefCell::default(),
            own_ns: super::ns::OwnNs::default(),
            mnt_id_cache: RefCell::default(),
        };
        let mut procs = BTreeMap::new();
        for (proc, parts) in shares {
            table.keep(proc.pid, parts);
            procs.insert(proc.pid, proc);
        }
        Ok(ProcTable { procs, ..table })
    }

    /// Puts what was read of `pid` into the caches.
    fn keep(&self, pid: u32, parts: Parts) {
        if let Some(f) = parts.fds {
            self.fd_cache.borrow_mut().insert(pid, Rc::new(f));
        }
        if let Some(e) = parts.env {
            self.env_cache.borrow_mut().insert(pid, e);
        }
        if let Some(c) = parts.cgroup {
            self.cgroup_cache.borrow_mut().insert(pid, c);
        }
        if let Some(c) = parts.command {
            self.command_cache.borrow_mut().insert(pid, c);
        }
    }

    /// Reads, side by side, what `want` asks of each process of `pids` that
    /// is not cached yet, into the caches that [`ProcTable::fds`],
    /// [`ProcTable::env`], [`ProcTable::command`] and
    /// [`ProcTable::container`] answer from. Kernel threads and pids not in
    /// the table are left to those (they read nothing), and so is
    /// everything when there is too little to read for threads.
    pub(super) fn prefetch(&self, pids: &[u32], want: Want) {
        let mut todo: BTreeMap<u32, Want> = BTreeMap::new();
        for &pid in pids {
            if self.procs.get(&pid).is_none_or(|p| p.kthread) {
                continue;
            }
            let need = Want {
                fds: want.fds && !self.fd_cache.borrow().contains_key(&pid),
                env: want.env && !self.env_cache.borrow().contains_key(&pid),
                command: want.command && !self.command_cache.borrow().contains_key(&pid),
                cgroup: want.cgroup && !self.cgroup_cache.borrow().contains_key(&pid),
                stat: want.stat && self.procs[&pid].stat.get().is_none(),
            };
            if !need.is_nothing() {
                let w = todo.entry(pid).or_default();
                *w = w.and(need);
            }
        }
        if todo.len() < THREADS_FROM {
            return;
        }
        let todo: Vec<(u32, Want)> = todo.into_iter().collect();
        let (root, procs) = (self.at(), &self.procs);
        let got = in_shares(&todo, threads_for(todo.len()), &|&(pid, w), bufs| {
            Some((pid, read_parts(root, procs.get(&pid)?, w, bufs)))
        });
        for (pid, parts) in got {
            self.keep(pid, parts);
        }
    }

    /// The two lease variables of a process's initial environment (cached).
    pub(super) fn env(&self, pid: u32) -> EnvRead {
        self.with_env(pid, |e| e.env.clone())
    }

    /// Whether reading the environment was refused (not: the process exited).
    pub(super) fn env_denied(&self, pid: u32) -> bool {
        self.with_env(pid, |e| e.denied)
    }

    /// `HOSTNAME` of a process's initial environment (cached), unescaped.
    pub(super) fn hostname(&self, pid: u32) -> Option<String> {
        self.with_env(pid, |e| e.hostname.clone())
    }

    /// `f` of the process's environment entry, read once.
    fn with_env<T>(&self, pid: u32, f: impl FnOnce(&EnvEntry) -> T) -> T {
        if let Some(e) = self.env_cache.borrow().get(&pid) {
            return f(e);
        }
        let e = match self.procs.get(&pid) {
            Some(p) if p.kthread => EnvEntry {
                env: EnvRead::Read {
                    enable: None,
                    stamp: None,
                },
                denied: false,
                hostname: None,
            },
            Some(p) => {
                let mut bufs = ScanBufs::new();
                let e = bufs.lease_env(self.at(), p.pid);
                bufs.wipe();
                e
            }
            None => EnvEntry {
                env: EnvRead::Unreadable("the process exited".into()),
                denied: false,
                hostname: None,
            },
        };
        let out = f(&e);
        self.env_cache.borrow_mut().insert(pid, e);
        out
    }

    /// The command line of a process, escaped (`[comm]` when empty; empty
    /// for a pid not in the table), read once. Read for the processes shown
    /// only: reading another process's `cmdline` copies from its memory,
    /// and most processes of a machine are not in the pod.
    pub(super) fn command(&self, pid: u32) -> String {
        if let Some(c) = self.command_cache.borrow().get(&pid) {
            return c.clone();
        }
        let Some(p) = self.procs.get(&pid) else {
            return String::new();
        };
        let comm = p.stat().map_or("", |s| s.comm.as_str());
        let c = files::read_command(self.at(), pid, comm, &mut Vec::new());
        self.command_cache.borrow_mut().insert(pid, c.clone());
        c
    }

    /// The container and pod of a process, from its cgroup (cached); `None`
    /// when its cgroup names neither, or could not be read.
    pub(super) fn container(&self, pid: u32) -> Option<ContainerRef> {
        if let Some(c) = self.cgroup_cache.borrow().get(&pid) {
            return c.clone();
        }
        let c = self
            .procs
            .get(&pid)
            .filter(|p| !p.kthread)
            .and_then(|p| files::read_container(self.at(), p.pid, &mut Vec::new()));
        self.cgroup_cache.borrow_mut().insert(pid, c.clone());
        c
    }

    /// How a process's view of the file system relates to the viewer's
    /// (cached; see [`super::ns::mount_relation`]).
    pub(super) fn mount_relation(&self, pid: u32) -> (NsRelation, Option<String>) {
        if let Some(r) = self.mount_cache.borrow().get(&pid) {
            return r.clone();
        }
        let r = super::ns::mount_relation(&self.root, &self.own_ns, pid);
        self.mount_cache.borrow_mut().insert(pid, r.clone());
        r
    }

    /// How a process's user namespace relates to the viewer's, and its uid
    /// 0 as a uid here (cached; see [`super::ns::user_relation`]).
    pub(super) fn user_relation(&self, pid: u32) -> (NsRelation, Option<u32>) {
        if let Some(r) = self.user_cache.borrow().get(&pid) {
            return *r;
        }
        let r = super::ns::user_relation(&self.root, &self.own_ns, pid);
        self.user_cache.borrow_mut().insert(pid, r);
        r
    }

    /// A process's mount namespace as its `ns/mnt` link names it (cached;
    /// `None` when it may not be read). `0` is the viewer's own
    /// (`{root}/self`).
    pub(super) fn mnt_id(&self, pid: u32) -> Option<std::ffi::OsString> {
        if let Some(r) = self.mnt_id_cache.borrow().get(&pid) {
            return r.clone();
        }
        let who = if pid == 0 {
            "self".to_string()
        } else {
            pid.to_string()
        };
        let r = std::fs::read_link(self.root.join(who).join("ns/mnt"))
            .ok()
            .map(PathBuf::into_os_string);
        self.mnt_id_cache.borrow_mut().insert(pid, r.clone());
        r
    }

    /// The proc root this table was read from.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// The proc root, for reading a process's files.
    fn at(&self) -> ProcRoot<'_> {
        ProcRoot {
            path: &self.root,
            counts_fds: self.counts_fds,
            fd: self.root_fd.as_ref().map(std::os::fd::AsFd::as_fd),
        }
    }

    /// The descriptors of `pid` on lock files (cached).
    pub(super) fn fds(&self, pid: u32) -> Rc<FdsRead> {
        if let Some(f) = self.fd_cache.borrow().get(&pid) {
            return Rc::clone(f);
        }
        let f = Rc::new(match self.procs.get(&pid) {
            Some(p) if !p.kthread => files::lock_fds(self.at(), pid, &mut ScanBufs::new()),
            _ => FdsRead::default(),
        });
        self.fd_cache.borrow_mut().insert(pid, Rc::clone(&f));
        f
    }

    pub(super) fn descendants(&self, root: u32) -> BTreeSet<u32> {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for p in self.procs.values() {
            if let Some(ppid) = p.ppid() {
                children.entry(ppid).or_default().push(p.pid);
            }
        }
        let mut out = BTreeSet::new();
        let mut stack = vec![root];
        while let Some(pid) = stack.pop() {
            if out.insert(pid) {
                if let Some(c) = children.get(&pid) {
                    stack.extend(c);
                }
            }
        }
        out
    }

    /// The seeds with their reasons, plus their ancestors ("an ancestor of
    /// pid N").
    pub(super) fn with_ancestors(&self, seeds: &BTreeMap<u32, String>) -> BTreeMap<u32, String> {
        let mut out = seeds.clone();
        for &s in seeds.keys() {
            let mut pid = s;
            loop {
                // A parent that exited before its `stat` was read ends the
                // line, as one gone before the scan would.
                match self.procs.get(&pid).and_then(RawProc::ppid) {
                    Some(ppid) if ppid != 0 && self.procs.contains_key(&ppid) => {
                        pid = ppid;
                        if out.contains_key(&pid) {
                            break;
                        }
                        out.insert(pid, format!("an ancestor of pid {s}"));
                    }
                    _ => break,
                }
            }
        }
        out
    }
}

/// How many threads read `/proc` side by side: one per core, at most 4.
fn reading_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// How many threads read `n` processes: [`reading_threads`] from
/// [`THREADS_FROM`] processes, else this one alone.
fn threads_for(n: usize) -> usize {
    if n >= THREADS_FROM {
        reading_threads()
    } else {
        1
    }
}

/// `f` over `items` with `threads` threads (this one included), each with
/// buffers of its own (wiped when it is done) and each taking the next item
/// no thread has taken yet: a thread slowed down (a process with thousands
/// of descriptors, or a core taken by other work) leaves more to the
/// others. The results of the items `f` kept, in no particular order. A
/// thread that cannot be started leaves its items to the others; the items
/// of one whose `f` panicked are read again here (a panic then surfaces
/// here, as it would have without threads).
fn in_shares<I: Sync, T: Send>(
    items: &[I],
    threads: usize,
    f: &(dyn Fn(&I, &mut ScanBufs) -> Option<T> + Sync),
) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if threads <= 1 {
        let mut bufs = ScanBufs::new();
        let out = items.iter().filter_map(|i| f(i, &mut bufs)).collect();
        bufs.wipe();
        return out;
    }
    let next = AtomicUsize::new(0);
    // The indices a thread took, and the results of those `f` kept.
    let take = || -> (Vec<usize>, Vec<T>) {
        let mut bufs = ScanBufs::new();
        let (mut taken, mut out) = (Vec::new(), Vec::new());
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(i) = items.get(k) else { break };
            taken.push(k);
            out.extend(f(i, &mut bufs));
        }
        bufs.wipe();
        (taken, out)
    };
    std::thread::scope(|s| {
        let take = &take;
        let others: Vec<_> = (1..threads)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("pod-scan".into())
                    .spawn_scoped(s, take)
                    .ok()
            })
            .collect();
        let (mut done, mut out) = take();
        let mut lost = false;
        for h in others {
            match h.join() {
                Ok((taken, v)) => {
                    done.extend(taken);
                    out.extend(v);
                }
                Err(_) => lost = true,
            }
        }
        if lost {
            let mut seen = vec![false; items.len()];
            for k in done {
                seen[k] = true;
            }
            let mut bufs = ScanBufs::new();
            for (k, i) in items.iter().enumerate() {
                if !seen[k] {
                    out.extend(f(i, &mut bufs));
                }
            }
            bufs.wipe();
        }
        out
    })
}

/// The granted FLOCK entries of `{root}/locks` ([`read_proc_locks`]), read
/// by a thread of their own while the scan reads the processes: the kernel
/// makes the first reader of `/proc/locks` in a while wait for an RCU grace
/// period (the writer side of its file-lock list's lock: 10–20 ms on a
/// loaded machine, off the CPU), which then passes meanwhile. Dropped
/// unasked (no lock file to look for), the thread ends on its own.
pub(super) struct ProcLocksSoon {
    root: PathBuf,
    reading: Option<std::thread::JoinHandle<Vec<procfs::Lock>>>,
}

impl ProcLocksSoon {
    /// Starts reading `{root}/locks`.
    pub(super) fn start(root: &Path) -> ProcLocksSoon {
        let owned = root.to_path_buf();
        let reading = std::thread::Builder::new()
            .name("proc-locks".into())
            .spawn(move || read_proc_locks(&owned))
            .ok();
        ProcLocksSoon {
            root: root.to_path_buf(),
            reading,
        }
    }

    /// The entries, once read (read here if the thread could not start or
    /// failed).
    pub(super) fn get(self) -> Vec<procfs::Lock> {
        match self.reading.map(std::thread::JoinHandle::join) {
            Some(Ok(locks)) => locks,
            _ => read_proc_locks(&self.root),
        }
    }
}

mod files;
mod raw;
#[cfg(test)]
mod tests;

use files::{read_one, read_parts, Parts, ProcRoot, ScanBufs};
pub(super) use files::{read_proc_locks, Stat, Want};
use raw::{each_entry, open_dir, DirentBuf};
use std::cell::RefCell;
use std::rc::Rc;
