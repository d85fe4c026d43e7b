//! Reading a `/proc` tree (the root is injectable, see
//! [`super::ScanOptions::proc_root`]): one pass over every process's `stat`,
//! then each process's initial environment (only the two lease variables)
//! and its descriptors on lock files on demand, once each; and the granted
//! FLOCK entries of `/proc/locks`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::FromBufRead;

use super::io_why;
use super::kube::ContainerRef;
use super::model::EnvRead;
use super::model::NsRelation;
use crate::writer::{sanitize, WriterError};
use crate::writer::{ENABLE, HELD, LOCK_NAME};

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

/// From how many processes a prefetching [`ProcTable::read_with`] reads with
/// several threads.
const THREADS_FROM: usize = 128;

/// Linux `PF_KTHREAD` in the `flags` field of `/proc/PID/stat`.
const PF_KTHREAD: u32 = 0x0020_0000;

#[derive(Debug)]
pub(super) struct RawProc {
    pub(super) pid: u32,
    pub(super) ppid: u32,
    /// `comm` from `stat`; the command line is read only for the processes
    /// shown (see [`RawProc::command`]).
    pub(super) comm: String,
    pub(super) starttime: u64,
    /// A kernel thread: no environment, no descriptors, never in a pod.
    pub(super) kthread: bool,
    /// `{root}/PID`.
    pub(super) dir: PathBuf,
}

impl RawProc {
    /// The command line, escaped (`[comm]` when empty). Read on demand: reading
    /// another process's `cmdline` copies from its memory, and most processes
    /// of a machine are not in the pod.
    pub(super) fn command(&self) -> String {
        read_command(&self.dir, &self.comm)
    }
}

/// A one-pass read of every process's `stat` under the proc root; the
/// environment and the descriptors are read on demand, once each.
pub(super) struct ProcTable {
    root: PathBuf,
    pub(super) procs: BTreeMap<u32, RawProc>,
    env_cache: std::cell::RefCell<BTreeMap<u32, EnvEntry>>,
    fd_cache: std::cell::RefCell<BTreeMap<u32, std::rc::Rc<FdsRead>>>,
    cgroup_cache: std::cell::RefCell<BTreeMap<u32, Option<ContainerRef>>>,
    mount_cache: std::cell::RefCell<BTreeMap<u32, (NsRelation, Option<String>)>>,
    user_cache: std::cell::RefCell<BTreeMap<u32, (NsRelation, Option<u32>)>>,
    own_ns: super::ns::OwnNs,
    mnt_id_cache: std::cell::RefCell<BTreeMap<u32, Option<std::ffi::OsString>>>,
}

impl ProcTable {
    /// Every process's `stat` under `root`; descriptors and environments are
    /// read on demand.
    pub(super) fn read(root: &Path) -> Result<ProcTable, WriterError> {
        Self::read_with(root, false, false)
    }

    /// Every process's `stat` under `root`, and with `prefetch` also every
    /// user process's descriptors and initial environment, read by a few
    /// threads side by side (an auto-detected pod reads them all anyway; each
    /// is still read once, and cached as [`ProcTable::fds`] and
    /// [`ProcTable::env`] would cache it); with `cgroups` also every user
    /// process's cgroup (the node view groups every process by pod).
    ///
    /// # Errors
    /// [`WriterError::Proc`] when `root` cannot be listed.
    pub(super) fn read_with(
        root: &Path,
        prefetch: bool,
        cgroups: bool,
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
        // Threads only pay off with enough to read: ~30 µs to start one
        // against ~25 µs of reads per process.
        let threads = if prefetch && pids.len() >= THREADS_FROM {
            reading_threads()
        } else {
            1
        };
        let shares = in_shares(&pids, threads, &|&pid, bufs| {
            read_one(root, pid, prefetch, cgroups, bufs)
        });
        let mut procs = BTreeMap::new();
        let mut env_cache = BTreeMap::new();
        let mut fd_cache = BTreeMap::new();
        let mut cgroup_cache = BTreeMap::new();
        for r in shares {
            if let Some(f) = r.fds {
                fd_cache.insert(r.proc.pid, std::rc::Rc::new(f));
            }
            if let Some(e) = r.env {
                env_cache.insert(r.proc.pid, e);
            }
            if let Some(c) = r.cgroup {
                cgroup_cache.insert(r.proc.pid, c);
            }
            procs.insert(r.proc.pid, r.proc);
        }
        Ok(ProcTable {
            root: root.to_path_buf(),
            procs,
            env_cache: std::cell::RefCell::new(env_cache),
            fd_cache: std::cell::RefCell::new(fd_cache),
            cgroup_cache: std::cell::RefCell::new(cgroup_cache),
            mount_cache: std::cell::RefCell::default(),
            user_cache: std::cell::RefCell::default(),
            own_ns: super::ns::OwnNs::default(),
            mnt_id_cache: std::cell::RefCell::default(),
        })
    }

    /// Reads, side by side, the descriptors of the processes `fds` and the
    /// environments of `env` that are not cached yet, into the caches that
    /// [`ProcTable::fds`] and [`ProcTable::env`] answer from. Kernel threads
    /// and pids not in the table are left to those (they read nothing), and
    /// so is everything when there is too little to read for threads.
    pub(super) fn prefetch(&self, fds: &[u32], env: &[u32]) {
        let mut want: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
        let user = |pid: &u32| self.procs.get(pid).is_some_and(|p| !p.kthread);
        for pid in fds.iter().filter(|p| user(p)) {
            if !self.fd_cache.borrow().contains_key(pid) {
                want.entry(*pid).or_default().0 = true;
            }
        }
        for pid in env.iter().filter(|p| user(p)) {
            if !self.env_cache.borrow().contains_key(pid) {
                want.entry(*pid).or_default().1 = true;
            }
        }
        if want.len() < THREADS_FROM {
            return;
        }
        let want: Vec<(u32, bool, bool)> = want.into_iter().map(|(p, (f, e))| (p, f, e)).collect();
        let (root, procs) = (&self.root, &self.procs);
        let got = in_shares(&want, reading_threads(), &|&(pid, f, e), bufs| {
            let dir = &procs.get(&pid)?.dir;
            let fds = f.then(|| lock_fds(root, pid, bufs));
            let env = e.then(|| read_lease_env(dir, &mut bufs.env));
            Some((pid, fds, env))
        });
        for (pid, fds, env) in got {
            if let Some(f) = fds {
                self.fd_cache.borrow_mut().insert(pid, std::rc::Rc::new(f));
            }
            if let Some(e) = env {
                self.env_cache.borrow_mut().insert(pid, e);
            }
        }
    }

    /// The two lease variables of a process's initial environment (cached).
    pub(super) fn env(&self, pid: u32) -> EnvRead {
        self.env_entry(pid).env
    }

    /// Whether reading the environment was refused (not: the process exited).
    pub(super) fn env_denied(&self, pid: u32) -> bool {
        self.env_entry(pid).denied
    }

    /// `HOSTNAME` of a process's initial environment (cached), unescaped.
    pub(super) fn hostname(&self, pid: u32) -> Option<String> {
        self.env_entry(pid).hostname
    }

    fn env_entry(&self, pid: u32) -> EnvEntry {
        if let Some(e) = self.env_cache.borrow().get(&pid) {
            return e.clone();
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
                let e = read_lease_env(&p.dir, &mut bufs.env);
                bufs.wipe();
                e
            }
            None => EnvEntry {
                env: EnvRead::Unreadable("the process exited".into()),
                denied: false,
                hostname: None,
            },
        };
        self.env_cache.borrow_mut().insert(pid, e.clone());
        e
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
            .and_then(|p| read_container(&p.dir, &mut Vec::new()));
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

    /// The descriptors of `pid` on lock files (cached).
    pub(super) fn fds(&self, pid: u32) -> std::rc::Rc<FdsRead> {
        if let Some(f) = self.fd_cache.borrow().get(&pid) {
            return std::rc::Rc::clone(f);
        }
        let f = std::rc::Rc::new(match self.procs.get(&pid) {
            Some(p) if !p.kthread => lock_fds(&self.root, pid, &mut ScanBufs::new()),
            _ => FdsRead::default(),
        });
        self.fd_cache
            .borrow_mut()
            .insert(pid, std::rc::Rc::clone(&f));
        f
    }

    pub(super) fn descendants(&self, root: u32) -> BTreeSet<u32> {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for p in self.procs.values() {
            children.entry(p.ppid).or_default().push(p.pid);
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
                match self.procs.get(&pid) {
                    Some(p) if p.ppid != 0 && self.procs.contains_key(&p.ppid) => {
                        pid = p.ppid;
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

fn read_command(dir: &Path, comm: &str) -> String {
    let mut buf = Vec::new();
    let ok = read_proc(&dir.join("cmdline"), &mut buf).is_ok();
    let args: Vec<String> = if ok {
        buf.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| sanitize(&String::from_utf8_lossy(a)))
            .collect()
    } else {
        Vec::new()
    };
    if args.is_empty() {
        format!("[{}]", sanitize(comm))
    } else {
        args.join(" ")
    }
}

/// The fields of `/proc/PID/stat` the scanner uses.
struct Stat {
    ppid: u32,
    comm: String,
    flags: u32,
    starttime: u64,
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid … flags … starttime …`.
/// The command name may contain spaces and parentheses, so it ends at the
/// *last* `)`.
fn parse_stat(buf: &[u8]) -> Option<Stat> {
    let open = buf.iter().position(|b| *b == b'(')?;
    let close = buf.iter().rposition(|b| *b == b')')?;
    let comm = String::from_utf8_lossy(buf.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(buf.get(close + 1..)?).ok()?;
    // After ") ": state(0) ppid(1) pgrp session tty_nr tpgid flags(6) minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads itrealvalue starttime(19).
    let f: Vec<&str> = rest.split_ascii_whitespace().take(20).collect();
    Some(Stat {
        ppid: f.get(1)?.parse().ok()?,
        comm,
        flags: f.get(6)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
    })
}

/// How many threads read `/proc` side by side: one per core, at most 4.
fn reading_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// `f` over `items` with `threads` threads (this one included), each taking
/// every `threads`-th item with buffers of its own (wiped when it is done);
/// the results of the items `f` kept, in no particular order. A thread that
/// cannot be started leaves its share to this one.
fn in_shares<I: Sync, T: Send>(
    items: &[I],
    threads: usize,
    f: &(dyn Fn(&I, &mut ScanBufs) -> Option<T> + Sync),
) -> Vec<T> {
    let share = |k: usize| -> Vec<T> {
        let mut bufs = ScanBufs::new();
        let out = items
            .iter()
            .skip(k)
            .step_by(threads)
            .filter_map(|i| f(i, &mut bufs))
            .collect();
        bufs.wipe();
        out
    };
    if threads <= 1 {
        return share(0);
    }
    std::thread::scope(|s| {
        let share = &share;
        let others: Vec<_> = (1..threads)
            .map(|k| {
                let h = std::thread::Builder::new()
                    .name("pod-scan".into())
                    .spawn_scoped(s, move || share(k));
                (k, h)
            })
            .collect();
        let mut out = share(0);
        for (k, h) in others {
            // A thread that could not start, or whose share panicked: the
            // share is read again here (a panic then surfaces here, as it
            // would have without threads).
            match h.map_err(drop).and_then(|h| h.join().map_err(drop)) {
                Ok(v) => out.extend(v),
                Err(()) => out.extend(share(k)),
            }
        }
        out
    })
}

/// One process as [`ProcTable::read_with`] read it: its `stat`, and when
/// prefetched its descriptors on lock files, its environment and its cgroup.
struct ReadProc {
    proc: RawProc,
    fds: Option<FdsRead>,
    env: Option<EnvEntry>,
    cgroup: Option<Option<ContainerRef>>,
}

/// Reads `{root}/PID/stat`, and with `prefetch` (and not a kernel thread)
/// the descriptors and the environment, with `cgroups` its cgroup; `None`
/// when the process is gone or `{root}/PID` is not a process directory.
fn read_one(
    root: &Path,
    pid: u32,
    prefetch: bool,
    cgroups: bool,
    bufs: &mut ScanBufs,
) -> Option<ReadProc> {
    let dir = root.join(pid.to_string());
    // Gone meanwhile, or not a process directory.
    read_proc(&dir.join("stat"), &mut bufs.stat).ok()?;
    let stat = parse_stat(&bufs.stat)?;
    let kthread = stat.flags & PF_KTHREAD != 0;
    let (fds, env) = if prefetch && !kthread {
        (
            Some(lock_fds(root, pid, bufs)),
            Some(read_lease_env(&dir, &mut bufs.env)),
        )
    } else {
        (None, None)
    };
    let cgroup = (cgroups && !kthread).then(|| read_container(&dir, &mut bufs.stat));
    Some(ReadProc {
        proc: RawProc {
            pid,
            ppid: stat.ppid,
            comm: stat.comm,
            starttime: stat.starttime,
            kthread,
            dir,
        },
        fds,
        env,
        cgroup,
    })
}

/// A process's container and pod from `{dir}/cgroup`, read into `buf`.
fn read_container(dir: &Path, buf: &mut Vec<u8>) -> Option<ContainerRef> {
    read_proc(&dir.join("cgroup"), buf).ok()?;
    super::kube::container_of(&String::from_utf8_lossy(buf))
}

/// The buffers of one scanning thread, reused from process to process.
struct ScanBufs {
    stat: Vec<u8>,
    /// Environments: wiped after each read (see [`read_lease_env`]).
    env: Vec<u8>,
    dents: DirentBuf,
    link: Vec<u8>,
}

impl ScanBufs {
    fn new() -> Self {
        ScanBufs {
            stat: Vec::with_capacity(1024),
            env: Vec::with_capacity(16 * 1024),
            dents: DirentBuf::new(),
            link: vec![0; 4096],
        }
    }

    /// Overwrites everything the environment buffer ever held.
    fn wipe(&mut self) {
        let cap = self.env.capacity();
        self.env.clear();
        self.env.resize(cap, 0);
        self.env.clear();
    }
}

/// Reads `/proc/PID/environ` into `buf` and keeps only the two lease
/// variables and `HOSTNAME`. The bytes read are overwritten before this
/// returns, so no other variable outlives the call. `denied` is true when the
/// read was refused (another user's process), false when it worked or the
/// process exited meanwhile.
fn read_lease_env(dir: &Path, buf: &mut Vec<u8>) -> EnvEntry {
    let res = read_proc(&dir.join("environ"), buf);
    let unreadable = |why: String, denied: bool| EnvEntry {
        env: EnvRead::Unreadable(why),
        denied,
        hostname: None,
    };
    let out = match res {
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ESRCH) =>
        {
            unreadable("the process exited".into(), false)
        }
        Err(e) => unreadable(io_why(&e), true),
        Ok(()) => {
            let enable_eq = format!("{ENABLE}=");
            let held_eq = format!("{HELD}=");
            let mut enable = None;
            let mut stamp = None;
            let mut hostname = None;
            for entry in buf.split(|b| *b == 0) {
                if let Some(v) = entry.strip_prefix(enable_eq.as_bytes()) {
                    enable = Some(String::from_utf8_lossy(v).into_owned());
                } else if let Some(v) = entry.strip_prefix(held_eq.as_bytes()) {
                    stamp = Some(String::from_utf8_lossy(v).into_owned());
                } else if let Some(v) = entry.strip_prefix(b"HOSTNAME=") {
                    let v = &v[..v.len().min(256)];
                    hostname = Some(String::from_utf8_lossy(v).into_owned());
                }
            }
            EnvEntry {
                env: EnvRead::Read { enable, stamp },
                denied: false,
                hostname,
            }
        }
    };
    // Overwrite what was read (earlier reads into this buffer were wiped
    // the same way).
    buf.fill(0);
    buf.clear();
    out
}

/// The descriptors of `pid` on a file named `.writer.lock`: the table listed
/// with raw `getdents64`, one `readlinkat` per descriptor relative to the
/// open table (no path walk through `/proc/PID/fd` each time), and a path
/// allocated only for a descriptor on a lock file. A refused read (another
/// user's process) is reported in `unreadable`; a process or descriptor that
/// vanished meanwhile is simply absent.
fn lock_fds(root: &Path, pid: u32, bufs: &mut ScanBufs) -> FdsRead {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let dir = root.join(pid.to_string()).join("fd");
    let table = match open_dir(&dir) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FdsRead::default(),
        Err(e) => {
            return FdsRead {
                fds: Vec::new(),
                unreadable: Some(format!("/proc/{pid}/fd: {}", io_why(&e))),
            }
        }
    };
    let mut out = FdsRead::default();
    let link = &mut bufs.link;
    // Entries read before an error (the process exited) are kept, as
    // `read_dir` did.
    let _ = each_entry(&table, &mut bufs.dents, |name| {
        let Some(fd) = std::str::from_utf8(name.to_bytes())
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            return;
        };
        // SAFETY: `name` is NUL-terminated; the kernel writes at most
        // `link.len()` bytes.
        let n = unsafe {
            libc::readlinkat(
                table.as_raw_fd(),
                name.as_ptr(),
                link.as_mut_ptr().cast(),
                link.len(),
            )
        };
        let target: &[u8] = if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::PermissionDenied {
                out.unreadable = Some(format!("/proc/{pid}/fd/{fd}: permission denied"));
            }
            // Else gone meanwhile.
            return;
        } else if n as usize == link.len() {
            // Possibly cut short: ask again with a buffer as large as needed.
            match std::fs::read_link(dir.join(fd.to_string())) {
                Ok(t) => {
                    check_lock_fd(root, pid, fd, t.as_os_str().as_bytes(), &mut out);
                    return;
                }
                Err(_) => return,
            }
        } else {
            &link[..n as usize]
        };
        check_lock_fd(root, pid, fd, target, &mut out);
    });
    out
}

/// Adds descriptor `fd` of `pid` (its link's target `target`) to `out` when
/// it is on a lock file; a path that is not absolute (socket, pipe, anon
/// inode) is not.
fn check_lock_fd(root: &Path, pid: u32, fd: i32, target: &[u8], out: &mut FdsRead) {
    use std::os::unix::ffi::OsStrExt;
    if target.first() != Some(&b'/') {
        return;
    }
    let target = Path::new(std::ffi::OsStr::from_bytes(target));
    match lock_fd(root, pid, fd, target) {
        Ok(Some(l)) => out.fds.push(l),
        Ok(None) => {}
        Err(why) => out.unreadable = Some(why),
    }
}

/// If descriptor `fd` (pointing at `target`) is on a file named
/// `.writer.lock`, its identity and the FLOCK lines of its fdinfo. An error
/// says what could not be read.
fn lock_fd(root: &Path, pid: u32, fd: i32, target: &Path) -> Result<Option<LockFd>, String> {
    let shown = target.to_string_lossy();
    let marked_deleted = shown.ends_with(" (deleted)");
    let trimmed = shown.strip_suffix(" (deleted)").unwrap_or(&shown);
    if Path::new(trimmed)
        .file_name()
        .is_none_or(|n| n != LOCK_NAME)
    {
        return Ok(None);
    }
    let link = root.join(pid.to_string()).join("fd").join(fd.to_string());
    let md = match std::fs::metadata(&link) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(format!("/proc/{pid}/fd/{fd}: permission denied"))
        }
        Err(_) => return Ok(None),
    };
    let fdinfo = root
        .join(pid.to_string())
        .join("fdinfo")
        .join(fd.to_string());
    let f = match std::fs::File::open(fdinfo) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("/proc/{pid}/fdinfo/{fd}: {}", io_why(&e))),
    };
    let lines: String = std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("lock:").map(|s| s.trim().to_string()))
        .map(|l| l + "\n")
        .collect();
    let lock_ids = procfs::Locks::from_buf_read(lines.as_bytes())
        .map(|parsed| {
            parsed
                .0
                .into_iter()
                .filter(|l| l.lock_type == procfs::LockType::FLock)
                .map(|l| (l.devmaj, l.devmin, l.inode))
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(LockFd {
        dev: md.dev(),
        ino: md.ino(),
        path: sanitize(&shown),
        link,
        target: PathBuf::from(trimmed),
        lock_ids,
        // A file really named `.writer.lock (deleted)` still has a link.
        deleted: marked_deleted && md.nlink() == 0,
    }))
}

/// Granted FLOCK entries of `{root}/locks`. Lines starting `->` are blocked
/// requests, not holders, and are dropped before parsing.
pub(super) fn read_proc_locks(root: &Path) -> Vec<procfs::Lock> {
    // Read to the end (a seq_file read returns about a page at a time), into
    // room reserved beforehand: no 32-byte probe reads.
    let mut raw = Vec::with_capacity(16 * 1024);
    let read = std::fs::File::open(root.join("locks")).and_then(|mut f| f.read_to_end(&mut raw));
    let Some(text) = read.ok().and_then(|_| String::from_utf8(raw).ok()) else {
        return Vec::new();
    };
    let granted: String = text
        .lines()
        .filter(|l| !l.contains(" -> ") && !l.contains(":->"))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    procfs::Locks::from_buf_read(granted.as_bytes())
        .map(|l| l.0)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.lock_type == procfs::LockType::FLock)
        .collect()
}

mod raw;
#[cfg(test)]
mod tests;

use raw::{each_entry, open_dir, read_proc, DirentBuf};
