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

use super::observe::EnvRead;
use crate::writer::{sanitize, WriterError};
use crate::writer::{ENABLE, HELD, LOCK_NAME};

/// An I/O error as a short lowercase phrase ("permission denied").
pub(super) fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::NotFound => "not found".to_string(),
        _ => sanitize(&e.to_string()),
    }
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
}

/// A process's descriptors on lock files, or why they could not be read.
#[derive(Debug, Default)]
pub(super) struct FdsRead {
    pub(super) fds: Vec<LockFd>,
    /// Why the table (or a lock file's fdinfo) could not be read.
    pub(super) unreadable: Option<String>,
}

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
    env_cache: std::cell::RefCell<BTreeMap<u32, (EnvRead, bool)>>,
    fd_cache: std::cell::RefCell<BTreeMap<u32, std::rc::Rc<FdsRead>>>,
}

impl ProcTable {
    pub(super) fn read(root: &Path) -> Result<ProcTable, WriterError> {
        let iter = std::fs::read_dir(root).map_err(|e| WriterError::Proc {
            path: root.to_path_buf(),
            message: sanitize(&e.to_string()),
        })?;
        let mut procs = BTreeMap::new();
        let mut buf = Vec::with_capacity(1024);
        for entry in iter.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let dir = root.join(name);
            // Gone meanwhile, or not a process directory.
            if read_proc(&dir.join("stat"), &mut buf).is_err() {
                continue;
            }
            let Some(stat) = parse_stat(&buf) else {
                continue;
            };
            procs.insert(
                pid,
                RawProc {
                    pid,
                    ppid: stat.ppid,
                    comm: stat.comm,
                    starttime: stat.starttime,
                    kthread: stat.flags & PF_KTHREAD != 0,
                    dir,
                },
            );
        }
        Ok(ProcTable {
            root: root.to_path_buf(),
            procs,
            env_cache: Default::default(),
            fd_cache: Default::default(),
        })
    }

    /// The two lease variables of a process's initial environment (cached).
    pub(super) fn env(&self, pid: u32) -> EnvRead {
        self.env_entry(pid).0
    }

    /// Whether reading the environment was refused (not: the process exited).
    pub(super) fn env_denied(&self, pid: u32) -> bool {
        self.env_entry(pid).1
    }

    fn env_entry(&self, pid: u32) -> (EnvRead, bool) {
        if let Some(e) = self.env_cache.borrow().get(&pid) {
            return e.clone();
        }
        let e = match self.procs.get(&pid) {
            Some(p) if p.kthread => (
                EnvRead::Read {
                    enable: None,
                    stamp: None,
                },
                false,
            ),
            Some(p) => read_lease_env(&p.dir),
            None => (EnvRead::Unreadable("the process exited".into()), false),
        };
        self.env_cache.borrow_mut().insert(pid, e.clone());
        e
    }

    /// The descriptors of `pid` on lock files (cached).
    pub(super) fn fds(&self, pid: u32) -> std::rc::Rc<FdsRead> {
        if let Some(f) = self.fd_cache.borrow().get(&pid) {
            return std::rc::Rc::clone(f);
        }
        let f = std::rc::Rc::new(match self.procs.get(&pid) {
            Some(p) if !p.kthread => lock_fds(&self.root, pid),
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

/// Reads a small `/proc` file into `buf` (cleared first): `openat`, as few
/// `read`s as the size needs, `close`. A short read is taken as the end: for
/// `stat`, `cmdline` and `environ` the kernel fills the whole buffer unless
/// the content ends, so the extra `read` returning 0 is saved.
fn read_proc(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    if buf.capacity() < 4096 {
        buf.reserve(4096);
    }
    let mut f = std::fs::File::open(path)?;
    loop {
        let len = buf.len();
        let cap = buf.capacity();
        buf.resize(cap, 0);
        let n = match f.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                buf.truncate(len);
                continue;
            }
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        };
        buf.truncate(len + n);
        if n == 0 || len + n < cap {
            return Ok(());
        }
        buf.reserve(cap);
    }
}

/// Reads `/proc/PID/environ` and keeps only the two lease variables. The raw
/// buffer is overwritten before it is dropped. The flag is true when the read
/// was refused (another user's process), false when it worked or the process
/// exited meanwhile.
fn read_lease_env(dir: &Path) -> (EnvRead, bool) {
    let mut buf = Vec::with_capacity(16 * 1024);
    let res = read_proc(&dir.join("environ"), &mut buf);
    let out = match res {
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ESRCH) =>
        {
            (EnvRead::Unreadable("the process exited".into()), false)
        }
        Err(e) => (EnvRead::Unreadable(io_why(&e)), true),
        Ok(()) => {
            let mut enable = None;
            let mut stamp = None;
            for entry in buf.split(|b| *b == 0) {
                if let Some(v) = entry.strip_prefix(format!("{ENABLE}=").as_bytes()) {
                    enable = Some(String::from_utf8_lossy(v).into_owned());
                } else if let Some(v) = entry.strip_prefix(format!("{HELD}=").as_bytes()) {
                    stamp = Some(String::from_utf8_lossy(v).into_owned());
                }
            }
            (EnvRead::Read { enable, stamp }, false)
        }
    };
    // Overwrite everything the buffer ever held, not just its length.
    let cap = buf.capacity();
    buf.clear();
    buf.resize(cap, 0);
    out
}

/// The descriptors of `pid` on a file named `.writer.lock`. One `readlink`
/// per descriptor (procfs's `Process::fd` spends four syscalls on each).
/// A refused read (another user's process) is reported in `unreadable`; a
/// process or descriptor that vanished meanwhile is simply absent.
fn lock_fds(root: &Path, pid: u32) -> FdsRead {
    let dir = root.join(pid.to_string()).join("fd");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FdsRead::default(),
        Err(e) => {
            return FdsRead {
                fds: Vec::new(),
                unreadable: Some(format!("/proc/{pid}/fd: {}", io_why(&e))),
            }
        }
    };
    let mut out = FdsRead::default();
    for e in entries.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let target = match std::fs::read_link(e.path()) {
            Ok(t) => t,
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                out.unreadable = Some(format!("/proc/{pid}/fd/{fd}: permission denied"));
                continue;
            }
            // Gone meanwhile.
            Err(_) => continue,
        };
        // Not a path (socket, pipe, anon inode).
        if !target.is_absolute() {
            continue;
        }
        match lock_fd(root, pid, fd, &target) {
            Ok(Some(l)) => out.fds.push(l),
            Ok(None) => {}
            Err(why) => out.unreadable = Some(why),
        }
    }
    out
}

/// If descriptor `fd` (pointing at `target`) is on a file named
/// `.writer.lock`, its identity and the FLOCK lines of its fdinfo. An error
/// says what could not be read.
fn lock_fd(root: &Path, pid: u32, fd: i32, target: &Path) -> Result<Option<LockFd>, String> {
    let shown = target.to_string_lossy();
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
    }))
}

/// Granted FLOCK entries of `{root}/locks`. Lines starting `->` are blocked
/// requests, not holders, and are dropped before parsing.
pub(super) fn read_proc_locks(root: &Path) -> Vec<procfs::Lock> {
    let Ok(text) = std::fs::read_to_string(root.join("locks")) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_takes_comm_up_to_the_last_paren() {
        let line =
            b"4711 (a) b (c) S 42 4711 4711 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!(s.ppid, 42);
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.starttime, 123456);
        assert!(parse_stat(b"4711 (x) S 42").is_none());
        assert!(parse_stat(b"garbage").is_none());
    }

    #[test]
    fn read_proc_reads_files_larger_than_the_first_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let mut buf = Vec::new();
        read_proc(&p, &mut buf).unwrap();
        assert_eq!(buf, data);
        // And /proc itself: our own stat parses, with our own pid's parent.
        read_proc(Path::new("/proc/self/stat"), &mut buf).unwrap();
        let s = parse_stat(&buf).unwrap();
        assert_eq!(s.ppid, nix::unistd::getppid().as_raw() as u32);
    }
}
