//! Where the viewer stands: its mount and user namespaces against a pod
//! process's, what it may read of other processes (effective uid,
//! `CAP_SYS_PTRACE`, `CAP_DAC_READ_SEARCH`), and the pod's own paths resolved
//! in the pod's mount namespace.
//!
//! Rules (docs/writer-leases.md, "In Kubernetes"):
//! - a path the operator gives with `--pod-root` and a path a descriptor
//!   names (`/proc/PID/fd/N`) are the *pod's* paths. Where the viewer sees
//!   the file system differently, they are resolved through
//!   `/proc/PID/root` with `openat2(RESOLVE_IN_ROOT)`: an absolute symbolic
//!   link or a `..` inside the pod then stays inside it (a plain walk of
//!   `/proc/PID/root/data` would follow an absolute link in the viewer's
//!   root). A lock file is then known by device and inode;
//! - a process's mount namespace is its `/proc/PID/ns/mnt` link, checked
//!   with its root (`/proc/PID/root` is `/` when it shares the viewer's);
//!   where those may not be read (they need a debugger's rights),
//!   its `mountinfo` is compared with the viewer's: a new mount namespace
//!   gives every mount it copies a new mount id, and the table shows mount
//!   points relative to the process's root, so equal tables mean the same
//!   view of the file system;
//! - a user namespace is compared by its `/proc/PID/ns/user` link, else by
//!   the uid map (readable by anyone, and shown relative to the reader's
//!   namespace: an equal map is taken as the same namespace).

use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::OnceLock;

use super::io_why;
use super::model::NsRelation;
use crate::writer::sanitize;

/// The viewer's user namespace, from `/proc/self/uid_map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserNs {
    /// The initial one (the map is the identity over every uid).
    Initial,
    /// One of its own: its uid 0 is this uid outside (when mapped).
    Own {
        /// The outside uid of uid 0 inside, if uid 0 is mapped.
        root_outside: Option<u32>,
    },
    /// The map could not be read.
    Unknown,
}

/// What this process may read of other processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewerFacts {
    /// The effective uid.
    pub euid: u32,
    /// `CAP_SYS_PTRACE` is effective: needed to read another process's
    /// descriptors, `fdinfo`, root and namespaces when its uid or
    /// capabilities differ from the viewer's.
    pub cap_sys_ptrace: bool,
    /// `CAP_DAC_READ_SEARCH` or `CAP_DAC_OVERRIDE` is effective: needed to
    /// read another user's `/proc/PID/environ` and list its descriptors.
    pub cap_dac_read_search: bool,
    /// The viewer's user namespace.
    pub userns: UserNs,
}

/// `CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH` and `CAP_SYS_PTRACE` (linux/capability.h).
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_SYS_PTRACE: u32 = 19;

impl ViewerFacts {
    /// This process's facts, read once (`/proc/self/status`, `/proc/self/uid_map`).
    pub fn current() -> ViewerFacts {
        static FACTS: OnceLock<ViewerFacts> = OnceLock::new();
        *FACTS.get_or_init(|| {
            let capeff = procfs::process::Process::myself()
                .and_then(|p| p.status())
                .map(|s| s.capeff)
                .unwrap_or(0);
            let has = |bit: u32| capeff & (1u64 << bit) != 0;
            ViewerFacts {
                euid: nix::unistd::geteuid().as_raw(),
                cap_sys_ptrace: has(CAP_SYS_PTRACE),
                cap_dac_read_search: has(CAP_DAC_READ_SEARCH) || has(CAP_DAC_OVERRIDE),
                userns: std::fs::read_to_string("/proc/self/uid_map")
                    .map_or(UserNs::Unknown, |m| user_ns_of_map(&m)),
            }
        })
    }

    /// What to do about processes this viewer could not inspect: run as
    /// their owner or root for a plain user; what is missing, and what gives
    /// it, for root without `CAP_SYS_PTRACE` (a debug container's default) or
    /// in a user namespace of its own; and for root with every right, that not
    /// even root may read them here.
    pub fn remedy(&self) -> String {
        if let UserNs::Own { root_outside } = self.userns {
            let root = match root_outside {
                Some(u) => format!("uid {u}"),
                None => "an unmapped uid".to_string(),
            };
            return format!(
                "this viewer runs in a user namespace of its own, whose root is {root} outside it, and has no rights over processes outside that namespace: run the view in the host's user namespace (kubectl debug node/NODE --profile=sysadmin, or the DaemonSet of deploy/kubernetes)"
            );
        }
        if self.euid != 0 {
            return "run as their owner or root".to_string();
        }
        if !self.cap_sys_ptrace {
            return "this viewer is root without CAP_SYS_PTRACE, which reading another process's descriptors, root and namespaces needs when its uid or capabilities differ from the viewer's: add SYS_PTRACE (kubectl debug --profile=general, or --custom=deploy/kubernetes/debug-profile.yaml for a pod that runs as non-root; docker run --cap-add SYS_PTRACE)".to_string();
        }
        if !self.cap_dac_read_search {
            return "this viewer is root without CAP_DAC_READ_SEARCH (nor CAP_DAC_OVERRIDE), which reading another user's environment and descriptors needs: add DAC_READ_SEARCH".to_string();
        }
        "not even by root here".to_string()
    }
}

/// The user namespace a uid map describes: the identity over every uid is
/// the initial namespace.
pub(crate) fn user_ns_of_map(map: &str) -> UserNs {
    let lines: Vec<Vec<u64>> = map
        .lines()
        .map(|l| {
            l.split_ascii_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .filter(|f: &Vec<u64>| f.len() == 3)
        .collect();
    if lines.len() == 1 && lines[0] == [0, 0, 4_294_967_295] {
        return UserNs::Initial;
    }
    let root_outside = lines
        .iter()
        .find(|f| f[0] == 0 && f[2] > 0)
        .and_then(|f| u32::try_from(f[1]).ok());
    UserNs::Own { root_outside }
}

/// The viewer's own namespace links, mount table and uid map (under the
/// proc root's `self`), read once each, for comparing with every process's.
#[derive(Debug, Default)]
pub(super) struct OwnNs {
    mnt: std::cell::OnceCell<Option<std::ffi::OsString>>,
    user: std::cell::OnceCell<Option<std::ffi::OsString>>,
    mountinfo: std::cell::OnceCell<Option<Vec<u8>>>,
    uid_map: std::cell::OnceCell<Option<String>>,
}

/// A `/proc` link's target, or `None` when it may not be read.
fn link(p: &Path) -> Option<std::ffi::OsString> {
    std::fs::read_link(p).ok().map(|l| l.into_os_string())
}

/// How process `pid`'s view of the file system relates to the viewer's
/// (`own`), and why when it is unknown (see the module documentation).
pub(super) fn mount_relation(
    proc_root: &Path,
    own: &OwnNs,
    pid: u32,
) -> (NsRelation, Option<String>) {
    let theirs = proc_root.join(pid.to_string());
    let mine = own.mnt.get_or_init(|| link(&proc_root.join("self/ns/mnt")));
    match (mine, link(&theirs.join("ns/mnt"))) {
        (Some(a), Some(b)) if *a != b => return (NsRelation::Different, None),
        (Some(_), Some(_)) => match std::fs::read_link(theirs.join("root")) {
            Ok(r) if r == Path::new("/") => return (NsRelation::Same, None),
            Ok(_) => return (NsRelation::Different, None),
            Err(_) => {}
        },
        _ => {}
    }
    // The links may not be read: compare the mount tables.
    let mine = own
        .mountinfo
        .get_or_init(|| std::fs::read(proc_root.join("self/mountinfo")).ok());
    match (mine, std::fs::read(theirs.join("mountinfo"))) {
        (Some(a), Ok(b)) if *a == b => (NsRelation::Same, None),
        (Some(_), Ok(_)) => (NsRelation::Different, None),
        (_, Err(e)) => (
            NsRelation::Unknown,
            Some(format!(
                "/proc/{pid}/ns/mnt and /proc/{pid}/mountinfo could not be read ({})",
                io_why(&e)
            )),
        ),
        (None, Ok(_)) => (
            NsRelation::Unknown,
            Some("the viewer's own mount table could not be read".to_string()),
        ),
    }
}

/// How process `pid`'s user namespace relates to the viewer's (`own`): by
/// its link, else its uid map; and its uid 0 as a uid of the viewer's
/// namespace when it has one of its own.
pub(super) fn user_relation(proc_root: &Path, own: &OwnNs, pid: u32) -> (NsRelation, Option<u32>) {
    let theirs = proc_root.join(pid.to_string());
    let map = std::fs::read_to_string(theirs.join("uid_map")).ok();
    let root_here = map.as_deref().and_then(|m| match user_ns_of_map(m) {
        UserNs::Own { root_outside } => root_outside,
        _ => None,
    });
    let mine = own
        .user
        .get_or_init(|| link(&proc_root.join("self/ns/user")));
    if let (Some(a), Some(b)) = (mine, link(&theirs.join("ns/user"))) {
        let rel = if *a == b {
            NsRelation::Same
        } else {
            NsRelation::Different
        };
        return (rel, root_here);
    }
    let mine = own
        .uid_map
        .get_or_init(|| std::fs::read_to_string(proc_root.join("self/uid_map")).ok());
    match (mine, map) {
        (Some(a), Some(b)) if *a == b => (NsRelation::Same, None),
        (Some(_), Some(_)) => (NsRelation::Different, root_here),
        _ => (NsRelation::Unknown, None),
    }
}

/// Opens `{proc_root}/PID/root`, the pod process's root directory in its own
/// mount namespace (`O_PATH`).
///
/// # Errors
/// Permission denied without a debugger's rights over `pid`; not found when
/// it exited.
pub(super) fn open_root(proc_root: &Path, pid: u32) -> std::io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    nix::fcntl::open(
        &proc_root.join(pid.to_string()).join("root"),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)
}

/// Opens `path` inside the root `root` (from [`open_root`]) as the process
/// whose root it is would: `openat2` with `RESOLVE_IN_ROOT` (absolute links
/// and `..` stay inside) and `RESOLVE_NO_MAGICLINKS` (no `/proc` link leads
/// out). `flags` are the open flags (e.g. `O_PATH | O_DIRECTORY`).
///
/// # Errors
/// The error of `openat2` (not found, not a directory, permission denied,
/// `ELOOP` for a last component that is a link under `O_NOFOLLOW`).
pub(super) fn open_in_root(
    root: &OwnedFd,
    path: &Path,
    flags: nix::fcntl::OFlag,
) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    nix::fcntl::openat2(root, path, how).map_err(std::io::Error::from)
}

/// The path the kernel gives an open descriptor of this process
/// (`/proc/self/fd/N`): for one opened through another mount namespace's
/// root, the path in that namespace.
pub(super) fn fd_path(fd: &OwnedFd) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// One line for each of the viewer's namespaces (mount, user) that is not
/// pod root `pid`'s or cannot be told; none when both are the viewer's.
pub(super) fn pod_root_lines(
    pid: u32,
    mount: (NsRelation, Option<&str>),
    user: (NsRelation, Option<u32>),
) -> Vec<String> {
    let mut lines = Vec::new();
    match mount {
        (NsRelation::Different, _) => lines.push(format!(
            "The viewer's mount namespace is not pod root {pid}'s: --data-dir and the paths descriptors name are the pod's, resolved through /proc/{pid}/root, and a lock file is known by device and inode."
        )),
        (NsRelation::Unknown, why) => lines.push(format!(
            "Whether the viewer's mount namespace is pod root {pid}'s is unknown ({}): --data-dir is resolved through /proc/{pid}/root.",
            sanitize(why.unwrap_or("not readable"))
        )),
        (NsRelation::Same, _) => {}
    }
    match user {
        (NsRelation::Different, root) => {
            let map = match root {
                Some(u) => format!(" (its uid 0 is uid {u} here)"),
                None => String::new(),
            };
            lines.push(format!(
                "Pod root {pid} is in another user namespace than the viewer{map}: root in one is not root in the other."
            ));
        }
        (NsRelation::Unknown, _) => lines.push(format!(
            "Whether pod root {pid} shares the viewer's user namespace is unknown (its uid map could not be read)."
        )),
        (NsRelation::Same, _) => {}
    }
    lines
}

/// Whether an error from a look through another process's `/proc` entry means
/// the viewer lacks the rights (not that the thing is absent).
pub(super) fn denied(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_maps_tell_the_namespace() {
        assert_eq!(
            user_ns_of_map("         0          0 4294967295\n"),
            UserNs::Initial
        );
        assert_eq!(
            user_ns_of_map("         0     100000      65536\n"),
            UserNs::Own {
                root_outside: Some(100000)
            }
        );
        assert_eq!(
            user_ns_of_map("      1000          0          1\n"),
            UserNs::Own { root_outside: None }
        );
        assert_eq!(user_ns_of_map(""), UserNs::Own { root_outside: None });
    }

    #[test]
    fn the_remedy_names_what_is_missing() {
        let root = ViewerFacts {
            euid: 0,
            cap_sys_ptrace: true,
            cap_dac_read_search: true,
            userns: UserNs::Initial,
        };
        assert_eq!(root.remedy(), "not even by root here");
        let user = ViewerFacts { euid: 1000, ..root };
        assert_eq!(user.remedy(), "run as their owner or root");
        let debug = ViewerFacts {
            cap_sys_ptrace: false,
            ..root
        };
        assert!(debug.remedy().contains("without CAP_SYS_PTRACE"));
        assert!(debug.remedy().contains("--profile=general"));
        let nested = ViewerFacts {
            userns: UserNs::Own {
                root_outside: Some(100000),
            },
            ..root
        };
        assert!(nested.remedy().contains("whose root is uid 100000 outside"));
        let no_dac = ViewerFacts {
            cap_dac_read_search: false,
            ..root
        };
        assert!(no_dac.remedy().contains("CAP_DAC_READ_SEARCH"));
    }
}
