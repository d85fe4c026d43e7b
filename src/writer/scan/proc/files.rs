//! One process's `/proc` files, read into what the scan keeps of them: its
//! `stat` (parent, flags, start time, `comm`), and as asked ([`Want`]) its
//! descriptors on lock files, the lease variables of its initial
//! environment, its command line and its cgroup's container; and the
//! granted FLOCK entries of `/proc/locks`.

use std::io::{BufRead, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::FromBufRead;

use super::raw::{each_entry, open_dir, open_dir_at, read_proc, read_proc_at, DirentBuf};
use super::{EnvEntry, FdsRead, LockFd, RawProc};
use crate::writer::sanitize;
use crate::writer::scan::io_why;
use crate::writer::scan::kube::{container_of, ContainerRef};
use crate::writer::scan::model::EnvRead;
use crate::writer::{ENABLE, HELD, LOCK_NAME};
use std::os::fd::{BorrowedFd, OwnedFd};

/// Linux `PF_KTHREAD` in the `flags` field of `/proc/PID/stat`.
const PF_KTHREAD: u32 = 0x0020_0000;

/// What to read of a process besides its `stat` (kernel threads have none
/// of it: they are never asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::writer::scan) struct Want {
    /// Its descriptors on lock files.
    pub(in crate::writer::scan) fds: bool,
    /// The lease variables of its initial environment.
    pub(in crate::writer::scan) env: bool,
    /// Its command line (a process shown).
    pub(in crate::writer::scan) command: bool,
    /// Its cgroup's container and pod.
    pub(in crate::writer::scan) cgroup: bool,
    /// Its `stat`, where it was left to be read on demand.
    pub(in crate::writer::scan) stat: bool,
}

impl Want {
    /// Nothing but `stat`.
    pub(in crate::writer::scan) const NOTHING: Want = Want {
        fds: false,
        env: false,
        command: false,
        cgroup: false,
        stat: false,
    };
    /// Its descriptors alone (who has a lock file open, who holds it).
    pub(in crate::writer::scan) const FDS: Want = Want {
        fds: true,
        env: false,
        command: false,
        cgroup: false,
        stat: false,
    };
    /// What judging a process needs: its descriptors and environment.
    pub(in crate::writer::scan) const JUDGED: Want = Want {
        fds: true,
        env: true,
        command: false,
        cgroup: false,
        stat: false,
    };
    /// What showing a process adds: its command line and container.
    pub(in crate::writer::scan) const SHOWN: Want = Want {
        fds: false,
        env: false,
        command: true,
        cgroup: true,
        stat: false,
    };

    /// The `stat` alone (that of processes read on demand).
    pub(in crate::writer::scan) const STAT: Want = Want {
        stat: true,
        ..Want::NOTHING
    };

    /// Both wants.
    pub(in crate::writer::scan) fn and(self, o: Want) -> Want {
        Want {
            fds: self.fds || o.fds,
            env: self.env || o.env,
            command: self.command || o.command,
            cgroup: self.cgroup || o.cgroup,
            stat: self.stat || o.stat,
        }
    }

    /// Nothing is wanted.
    pub(super) fn is_nothing(self) -> bool {
        self == Want::NOTHING
    }
}

/// What was read of one process besides its `stat` (`None`: not asked).
#[derive(Debug, Default)]
pub(super) struct Parts {
    pub(super) fds: Option<FdsRead>,
    pub(super) env: Option<EnvEntry>,
    pub(super) command: Option<String>,
    pub(super) cgroup: Option<Option<ContainerRef>>,
}

/// The buffers of one scanning thread, reused from process to process.
pub(super) struct ScanBufs {
    stat: Vec<u8>,
    /// Environments: wiped after each read (see [`read_lease_env`]).
    env: Vec<u8>,
    dents: DirentBuf,
    link: Vec<u8>,
    /// The last `cgroup` file read and what it named: most processes share
    /// their cgroup with the process read before them (a pod's, a
    /// session's), and its text is then not parsed again.
    cgroup: Option<(Vec<u8>, Option<ContainerRef>)>,
}

impl ScanBufs {
    pub(super) fn new() -> Self {
        ScanBufs {
            stat: Vec::with_capacity(1024),
            env: Vec::with_capacity(16 * 1024),
            dents: DirentBuf::new(),
            link: vec![0; 4096],
            cgroup: None,
        }
    }

    /// The container and pod of process `pid` (see [`read_container`]),
    /// the text parsed only when it is not the last one read.
    pub(super) fn container(&mut self, root: ProcRoot, pid: u32) -> Option<ContainerRef> {
        root.read(pid, "cgroup", &mut self.stat).ok()?;
        match &self.cgroup {
            Some((text, c)) if *text == self.stat => c.clone(),
            _ => {
                let c = container_of(&String::from_utf8_lossy(&self.stat));
                self.cgroup = Some((self.stat.clone(), c.clone()));
                c
            }
        }
    }

    /// The lease variables of the initial environment of process `pid`
    /// (see [`read_lease_env`]).
    pub(super) fn lease_env(&mut self, root: ProcRoot, pid: u32) -> EnvEntry {
        read_lease_env(root, pid, &mut self.env).0
    }

    /// Overwrites everything the environment buffer ever held.
    pub(super) fn wipe(&mut self) {
        let cap = self.env.capacity();
        self.env.clear();
        self.env.resize(cap, 0);
        self.env.clear();
    }
}

/// Reads `{root}/PID/stat` and, unless it is a kernel thread, what `want`
/// asks; `None` when the process is gone or `{root}/PID` is not a process
/// directory. With `stat_on_demand` (`want` asks for the environment) the
/// environment is read first, and a process whose environment has bytes
/// (no kernel thread has) has its `stat` read only when it may be in the
/// pod: a lease variable, a lock file open, or descriptors that could not
/// be read (see [`super::ProcTable::read_with`]).
pub(super) fn read_one(
    root: ProcRoot,
    pid: u32,
    want: Want,
    stat_on_demand: bool,
    bufs: &mut ScanBufs,
) -> Option<(RawProc, Parts)> {
    let dir = root.path.join(pid.to_string());
    let mut env = None;
    if stat_on_demand {
        let (e, bytes) = read_lease_env(root, pid, &mut bufs.env);
        if bytes > 0 {
            let fds = want.fds.then(|| lock_fds(root, pid, bufs));
            let leased = matches!(
                &e.env,
                EnvRead::Read { enable, stamp } if enable.is_some() || stamp.is_some()
            );
            let opens = fds
                .as_ref()
                .is_some_and(|f| !f.fds.is_empty() || f.unreadable.is_some());
            let stat = std::sync::OnceLock::new();
            if leased || opens {
                // Gone meanwhile: as if its `stat` had been read first.
                let _ = stat.set(Some(read_stat(root, pid, bufs)?));
            }
            let proc = RawProc {
                pid,
                kthread: false,
                dir,
                stat,
            };
            let rest = Want {
                fds: false,
                env: false,
                ..want
            };
            let parts = Parts {
                fds,
                env: Some(e),
                ..read_parts(root, &proc, rest, bufs)
            };
            return Some((proc, parts));
        }
        // No bytes: a kernel thread, a zombie, a refusal or a process gone;
        // its `stat` tells.
        env = Some(e);
    }
    // Gone meanwhile, or not a process directory.
    let stat = read_stat(root, pid, bufs)?;
    let kthread = stat.flags & PF_KTHREAD != 0;
    let proc = RawProc {
        pid,
        kthread,
        dir,
        stat: std::sync::OnceLock::from(Some(stat)),
    };
    if proc.kthread {
        // What was read of a kernel thread's environment says nothing.
        return Some((proc, Parts::default()));
    }
    let parts = match env {
        Some(e) => Parts {
            env: Some(e),
            ..read_parts(root, &proc, Want { env: false, ..want }, bufs)
        },
        None => read_parts(root, &proc, want, bufs),
    };
    Some((proc, parts))
}

/// The `stat` of process `pid`, read into the stat buffer; `None` when it
/// is gone or `{root}/PID` is not a process directory.
fn read_stat(root: ProcRoot, pid: u32, bufs: &mut ScanBufs) -> Option<Stat> {
    root.read(pid, "stat", &mut bufs.stat).ok()?;
    parse_stat(&bufs.stat)
}

/// Reads what `want` asks of the (user) process `p`.
pub(super) fn read_parts(root: ProcRoot, p: &RawProc, want: Want, bufs: &mut ScanBufs) -> Parts {
    if want.stat {
        // Kept in `p` itself.
        let _ = p.stat();
    }
    let comm = || p.stat().map_or("", |s| s.comm.as_str());
    Parts {
        fds: want.fds.then(|| lock_fds(root, p.pid, bufs)),
        env: want
            .env
            .then(|| read_lease_env(root, p.pid, &mut bufs.env).0),
        command: want
            .command
            .then(|| read_command(root, p.pid, comm(), &mut bufs.stat)),
        cgroup: want.cgroup.then(|| bufs.container(root, p.pid)),
    }
}

/// The command line of process `pid`, escaped (`[comm]` when empty), read
/// into `buf`.
pub(super) fn read_command(root: ProcRoot, pid: u32, comm: &str, buf: &mut Vec<u8>) -> String {
    let ok = root.read(pid, "cmdline", buf).is_ok();
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

/// A process's container and pod from `{root}/PID/cgroup`, read into `buf`.
pub(super) fn read_container(root: ProcRoot, pid: u32, buf: &mut Vec<u8>) -> Option<ContainerRef> {
    root.read(pid, "cgroup", buf).ok()?;
    container_of(&String::from_utf8_lossy(buf))
}

/// The fields of `/proc/PID/stat` the scanner uses.
#[derive(Debug)]
pub(in crate::writer::scan) struct Stat {
    pub(in crate::writer::scan) ppid: u32,
    pub(in crate::writer::scan) comm: String,
    pub(in crate::writer::scan) flags: u32,
    /// Clock ticks after boot.
    pub(in crate::writer::scan) starttime: u64,
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid … flags … starttime …`.
/// The command name may contain spaces and parentheses, so it ends at the
/// *last* `)`.
pub(super) fn parse_stat(buf: &[u8]) -> Option<Stat> {
    let open = buf.iter().position(|b| *b == b'(')?;
    let close = buf.iter().rposition(|b| *b == b')')?;
    let comm = String::from_utf8_lossy(buf.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(buf.get(close + 1..)?).ok()?;
    // After ") ": state(0) ppid(1) pgrp session tty_nr tpgid flags(6) minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads itrealvalue starttime(19).
    let mut f = rest.split_ascii_whitespace();
    let ppid = f.nth(1)?.parse().ok()?;
    let flags = f.nth(4)?.parse().ok()?;
    let starttime = f.nth(12)?.parse().ok()?;
    Some(Stat {
        ppid,
        comm,
        flags,
        starttime,
    })
}

/// Reads `/proc/PID/environ` into `buf` and keeps only the two lease
/// variables and `HOSTNAME`. The bytes read are overwritten before this
/// returns, so no other variable outlives the call. `denied` is true when the
/// read was refused (another user's process), false when it worked or the
/// process exited meanwhile. With it, how many bytes were read (0 when the
/// read failed).
fn read_lease_env(root: ProcRoot, pid: u32, buf: &mut Vec<u8>) -> (EnvEntry, usize) {
    let res = root.read(pid, "environ", buf);
    let bytes = if res.is_ok() { buf.len() } else { 0 };
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
    (out, bytes)
}

/// A proc root, and whether its descriptor tables give how many
/// descriptors are open as their size (procfs since Linux 6.2; see
/// [`counts_fds`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct ProcRoot<'a> {
    pub(super) path: &'a Path,
    pub(super) counts_fds: bool,
    /// The proc root, open: a process's files are opened relative to it
    /// (`PID/stat`), a walk of two names instead of `/proc/PID/stat`'s
    /// three and the crossing into the proc mount; by path where `None`.
    pub(super) fd: Option<BorrowedFd<'a>>,
}

impl ProcRoot<'_> {
    /// `PID/NAME` as a C string, in `buf`.
    fn name<'b>(pid: u32, name: &str, buf: &'b mut [u8; 64]) -> &'b std::ffi::CStr {
        use std::io::Write;
        let mut cur = std::io::Cursor::new(&mut buf[..]);
        // A pid and the longest name the scan reads fit in 64 bytes.
        let _ = write!(cur, "{pid}/{name}\0");
        let end = cur.position() as usize;
        std::ffi::CStr::from_bytes_with_nul(&buf[..end]).unwrap_or(c"")
    }

    /// Reads `{root}/PID/NAME` into `buf` (see [`read_proc`]).
    pub(super) fn read(&self, pid: u32, name: &str, buf: &mut Vec<u8>) -> std::io::Result<()> {
        match self.fd {
            Some(fd) => read_proc_at(Some(fd), Self::name(pid, name, &mut [0; 64]), buf),
            None => read_proc(&self.path.join(pid.to_string()).join(name), buf),
        }
    }

    /// Opens the directory `{root}/PID/NAME` for its entries.
    fn open_dir(&self, pid: u32, name: &str) -> std::io::Result<OwnedFd> {
        match self.fd {
            Some(fd) => open_dir_at(Some(fd), Self::name(pid, name, &mut [0; 64])),
            None => open_dir(&self.path.join(pid.to_string()).join(name)),
        }
    }
}

/// Whether the descriptor tables under `root` give how many descriptors
/// are open as their size: `root` is a procfs (not a directory made to look
/// like one) and this process's own table, open, has a size.
pub(super) fn counts_fds(root: &Path) -> bool {
    let procfs = nix::sys::statfs::statfs(root)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
    procfs
        && open_dir(&root.join("self/fd"))
            .and_then(|t| nix::sys::stat::fstat(&t).map_err(std::io::Error::from))
            .is_ok_and(|st| st.st_size > 0)
}

/// The descriptors of `pid` on a file named `.writer.lock`: one
/// `readlinkat` per descriptor relative to the open table (no path walk
/// through `/proc/PID/fd` each time), and a path allocated only for a
/// descriptor on a lock file. Where the table's size says how many are open
/// ([`ProcRoot::counts_fds`]), descriptors 0, 1, 2… are read by number
/// while each is there, and the table is listed (raw `getdents64`) only for
/// those after the first missing one: listing makes the kernel build an
/// entry for every descriptor, and most processes' are numbered without a
/// gap. A refused read (another user's process) is reported in
/// `unreadable`; a process or descriptor that vanished meanwhile is simply
/// absent. The kernel allows reading a process's descriptor links for all
/// of them or for none (its ptrace check of the process), so once one is
/// refused the others are not asked: the last descriptor listed is named as
/// refused, as asking each would have named it.
pub(super) fn lock_fds(root: ProcRoot, pid: u32, bufs: &mut ScanBufs) -> FdsRead {
    let table = match root.open_dir(pid, "fd") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FdsRead::default(),
        Err(e) => {
            return FdsRead {
                fds: Vec::new(),
                unreadable: Some(format!("/proc/{pid}/fd: {}", io_why(&e))),
            }
        }
    };
    let at = FdTable {
        root: root.path,
        pid,
        table: &table,
    };
    let mut out = FdsRead::default();
    let link = &mut bufs.link;
    // Descriptors below `next` were read by number.
    let mut next: i32 = 0;
    if root.counts_fds {
        let open = nix::sys::stat::fstat(&table).map_or(0, |st| st.st_size);
        let mut name = [0u8; 16];
        while i64::from(next) < open {
            // A gap, a refusal or the process gone: the listing tells.
            if at.read(fd_name(next, &mut name), next, link, &mut out) != Link::Read {
                break;
            }
            next += 1;
        }
        if i64::from(next) == open {
            return out;
        }
    }
    let mut refused = false;
    // Entries read before an error (the process exited) are kept, as
    // `read_dir` did.
    let _ = each_entry(&table, &mut bufs.dents, |name| {
        let Some(fd) = std::str::from_utf8(name.to_bytes())
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
            .filter(|fd| *fd >= next)
        else {
            return;
        };
        if refused || at.read(name, fd, link, &mut out) == Link::Refused {
            out.unreadable = Some(format!("/proc/{pid}/fd/{fd}: permission denied"));
            refused = true;
        }
    });
    out
}

/// The open descriptor table of `pid` (`{root}/PID/fd`).
struct FdTable<'a> {
    root: &'a Path,
    pid: u32,
    table: &'a std::os::fd::OwnedFd,
}

/// What reading a descriptor's link gave.
#[derive(Debug, PartialEq, Eq)]
enum Link {
    Read,
    Refused,
    /// Closed, or the process exited.
    Gone,
}

impl FdTable<'_> {
    /// Reads the link of descriptor `fd` (named `name`) into `link`, and
    /// adds the descriptor to `out` when it is on a lock file.
    fn read(&self, name: &std::ffi::CStr, fd: i32, link: &mut [u8], out: &mut FdsRead) -> Link {
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: `name` is NUL-terminated; the kernel writes at most
        // `link.len()` bytes.
        let n = unsafe {
            libc::readlinkat(
                self.table.as_raw_fd(),
                name.as_ptr(),
                link.as_mut_ptr().cast(),
                link.len(),
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::PermissionDenied {
                return Link::Refused;
            }
            return Link::Gone;
        }
        if n as usize == link.len() {
            // Possibly cut short: ask again with a buffer as large as needed.
            let path = self.root.join(format!("{}/fd/{fd}", self.pid));
            return match std::fs::read_link(path) {
                Ok(t) => {
                    check_lock_fd(self.root, self.pid, fd, t.as_os_str().as_bytes(), out);
                    Link::Read
                }
                Err(_) => Link::Gone,
            };
        }
        check_lock_fd(self.root, self.pid, fd, &link[..n as usize], out);
        Link::Read
    }
}

/// `fd` in decimal, NUL-terminated, in `buf`.
fn fd_name(fd: i32, buf: &mut [u8; 16]) -> &std::ffi::CStr {
    use std::io::Write;
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    // Eleven bytes at most and the NUL: it fits.
    let _ = write!(cur, "{fd}\0");
    let end = cur.position() as usize;
    std::ffi::CStr::from_bytes_with_nul(&buf[..end]).unwrap_or(c"")
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
pub(in crate::writer::scan) fn read_proc_locks(root: &Path) -> Vec<procfs::Lock> {
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
