//! Containers stood in for by real kernel namespaces (issue 46): a "pod" is
//! a process tree in a mount namespace of its own (a tmpfs, or a host
//! directory bound, at its data directory), optionally in a PID namespace
//! of its own, a user namespace of its own (its root is host uid 100000, as
//! a rootless runtime or `hostUsers: false` gives), and a cgroup named as a
//! container runtime names it. Viewers stand where an operator does: the
//! host, a `kubectl debug` container (the pod's PID namespace, a mount
//! namespace of its own), the pod itself, and those without
//! `CAP_SYS_PTRACE`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{children, command, leasectl_bin, wait_for, Guard};

/// The host uid a user-namespaced pod's root is.
pub const POD_ROOT_UID: u32 = 100000;

/// Why namespaces cannot be made here, if they cannot: the tests that need
/// them say so and skip.
pub fn cannot_make_namespaces() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root".into());
    }
    let probe = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            "mount -t tmpfs none /mnt",
        ])
        .stderr(Stdio::null())
        .status();
    match probe {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!(
            "unshare --mount --pid with a tmpfs is not permitted ({s})"
        )),
        Err(e) => Some(format!("unshare is not available ({e})")),
    }
}

/// A directory every uid may enter, and the leasectl binary copied into it
/// (mode 0755), so that a pod whose root is host uid 100000 can run it.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub bin: PathBuf,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("leasectl");
        std::fs::copy(leasectl_bin(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch { dir, bin }
    }

    /// A new directory under the scratch one, mode 0777 (a pod whose root
    /// is uid 100000 writes its lock file there).
    pub fn mkdir(&self, name: &str) -> PathBuf {
        let d = self.dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    }

    /// The binary, as a shell word.
    pub fn bin(&self) -> String {
        self.bin.display().to_string()
    }
}

/// What a pod is made of.
#[derive(Clone, Default)]
pub struct PodSpec {
    /// Its data directory: where the volume is mounted inside it.
    pub data: PathBuf,
    /// The host directory bound there; `None`: a tmpfs of its own.
    pub volume: Option<PathBuf>,
    /// No mount namespace of its own: `data` is the host's directory (no
    /// PID or user namespace either).
    pub shared_mounts: bool,
    /// A PID namespace of its own (its root is then pid 1 inside).
    pub pid_ns: bool,
    /// A user namespace of its own: its root is host uid [`POD_ROOT_UID`].
    pub user_ns: bool,
    /// A cgroup directory (`cgroup.procs` in it) the pod is started in.
    pub cgroup: Option<PathBuf>,
    /// Its `HOSTNAME`.
    pub hostname: Option<String>,
    /// A service-account namespace file mounted at
    /// `/var/run/secrets/kubernetes.io/serviceaccount/namespace` (over a
    /// tmpfs at /run of its own).
    pub namespace: Option<String>,
    /// The host pid of a fake node's init ([`FakeNode`]): the pod is started
    /// in that PID namespace.
    pub node: Option<u32>,
    /// The pod root's command, run by `sh -c` after the mounts (with
    /// `CLOUD_WRITER_LEASE` only where it sets it), e.g. `exec leasectl writer exec …`.
    pub script: String,
}

/// A running pod. Dropping it kills its process group.
pub struct NsPod {
    pub guard: Guard,
    /// The pod root's pid on the host.
    pub root: u32,
    /// The pod root's pid as a process of the pod sees it.
    pub inner_root: u32,
    pub spec: PodSpec,
    /// What the pod's setup and script wrote to stderr (shown when it never
    /// gets ready; removed with the pod).
    _stderr: tempfile::NamedTempFile,
}

/// Single-quoted for `sh`.
pub fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl NsPod {
    /// Starts the pod; `ready` is asked with its root's host pid until it
    /// says yes (10 s), and the pod's process tree is shown when it never does.
    pub fn start(spec: PodSpec, ready: impl Fn(u32) -> bool) -> NsPod {
        let d = spec.data.display().to_string();
        let mut inner = String::from("set -e; ");
        match &spec.volume {
            _ if spec.shared_mounts => {}
            Some(v) => {
                inner += &format!("mount --bind {} {}; ", sq(&v.display().to_string()), sq(&d))
            }
            None => inner += &format!("mount -t tmpfs -o mode=0777 none {}; ", sq(&d)),
        }
        if let Some(ns) = &spec.namespace {
            inner += &format!(
                "mount -t tmpfs none /run; mkdir -p /run/secrets/kubernetes.io/serviceaccount; \
                 printf %s {} > /run/secrets/kubernetes.io/serviceaccount/namespace; ",
                sq(ns)
            );
        }
        inner += "set +e; ";
        inner += &spec.script;
        let mut unshare = String::from("unshare ");
        if spec.user_ns {
            unshare += "--user --map-root-user ";
        }
        unshare += "--mount --propagation private ";
        if spec.pid_ns {
            unshare += "--pid --fork --mount-proc ";
        }
        let mut outer = String::new();
        if let Some(cg) = &spec.cgroup {
            outer += &format!(
                "echo 0 > {}/cgroup.procs && ",
                sq(&cg.display().to_string())
            );
        }
        outer += "exec ";
        if spec.user_ns {
            outer += &format!(
                "setpriv --reuid={POD_ROOT_UID} --regid={POD_ROOT_UID} --clear-groups -- "
            );
        }
        if spec.shared_mounts {
            outer += &format!("sh -c {}", sq(&inner));
        } else {
            outer += &format!("{unshare} -- sh -c {}", sq(&inner));
        }
        if let Some(n) = spec.node {
            outer = format!("exec nsenter --target {n} --pid -- sh -c {}", sq(&outer));
        }
        let stderr = tempfile::NamedTempFile::new().expect("a temporary file");
        let mut c = command("sh");
        c.args(["-c", &outer])
            .stdout(Stdio::null())
            .stderr(stderr.reopen().map_or_else(|_| Stdio::null(), Stdio::from));
        if let Some(h) = &spec.hostname {
            c.env("HOSTNAME", h);
        }
        let guard = Guard::spawn(c);
        let top = guard.pid;
        let root = wait_for(Duration::from_secs(20), || {
            // nsenter --pid forks, and so does unshare --pid.
            let mut r = top;
            if spec.node.is_some() {
                r = *children(r).first()?;
            }
            if spec.pid_ns {
                r = *children(r).first()?;
            }
            ready(r).then_some(r)
        })
        .unwrap_or_else(|| {
            let tree = Command::new("ps")
                .args(["-eo", "pgid,pid,ppid,stat,args"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let group = top.to_string();
            let mine: Vec<&str> = tree
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(group.as_str()))
                .collect();
            let said = std::fs::read_to_string(stderr.path()).unwrap_or_default();
            panic!(
                "pod {top} never got ready; its group:\n{}\nits stderr:\n{said}",
                mine.join("\n")
            )
        });
        let inner_root = if spec.pid_ns { 1 } else { root };
        NsPod {
            guard,
            root,
            inner_root,
            spec,
            _stderr: stderr,
        }
    }
}

/// Whether process `pid` holds a flock, as `/proc/locks` shows it.
pub fn holds_flock(pid: u32) -> bool {
    let p = pid.to_string();
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("->"))
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"FLOCK") && f.get(4) == Some(&p.as_str())
        })
}

/// Whether process `pid` has a `.writer.lock` open.
pub fn has_lock_open(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy().contains(".writer.lock"))
            })
        })
        .unwrap_or(false)
}

/// Where a viewer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// The host: its own mount, PID and user namespaces, root.
    Host,
    /// `kubectl debug --target`: the pod's PID namespace (a /proc of it),
    /// a mount namespace of its own whose data directory is another tmpfs
    /// (with a free lock file in it: what a path looked up there finds).
    Debug,
    /// The same without CAP_SYS_PTRACE (the legacy and baseline profiles).
    DebugNoPtrace,
    /// Inside the pod: its PID, mount (and user) namespaces.
    Pod,
    /// A rootless viewer: root of a user namespace of its own (host uid
    /// 100001), in the host's PID namespace.
    Rootless,
}

impl Viewer {
    pub const ALL: [Viewer; 5] = [
        Viewer::Host,
        Viewer::Debug,
        Viewer::DebugNoPtrace,
        Viewer::Pod,
        Viewer::Rootless,
    ];

    /// `leasectl --json ARGS` as this viewer of `pod`; `args` may name the
    /// pod root with `{root}`, which becomes the pid the viewer sees.
    pub fn command(self, s: &Scratch, pod: &NsPod, args: &[&str]) -> Command {
        let sees_root = match self {
            Viewer::Host | Viewer::Rootless => pod.root,
            Viewer::Debug | Viewer::DebugNoPtrace | Viewer::Pod => pod.inner_root,
        };
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{root}", &sees_root.to_string()))
            .map(|a| sq(&a))
            .collect();
        let run = format!("exec {} --json {}", s.bin(), args.join(" "));
        let d = sq(&pod.spec.data.display().to_string());
        let target = pod.root.to_string();
        let mut c = command("sh");
        match self {
            Viewer::Host => {
                c.args(["-c", &run]);
            }
            Viewer::Debug | Viewer::DebugNoPtrace => {
                let drop = if self == Viewer::DebugNoPtrace {
                    "setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace -- "
                } else {
                    ""
                };
                let script = format!(
                    "mount -t proc proc /proc && mount -t tmpfs none {d} && touch {d}/.writer.lock && {drop}sh -c {}",
                    sq(&run)
                );
                c.args(["-c", &format!(
                    "exec nsenter --target {target} --pid -- unshare --mount --propagation private -- sh -c {}",
                    sq(&script)
                )]);
            }
            Viewer::Pod => {
                let user = if pod.spec.user_ns { "--user " } else { "" };
                let mount_pid = if pod.spec.pid_ns { "--pid " } else { "" };
                c.args([
                    "-c",
                    &format!(
                        "exec nsenter --target {target} {user}{mount_pid}--mount -- sh -c {}",
                        sq(&run)
                    ),
                ]);
            }
            Viewer::Rootless => {
                c.args(["-c", &format!(
                    "exec setpriv --reuid=100001 --regid=100001 --clear-groups -- unshare --user --map-root-user -- sh -c {}",
                    sq(&run)
                )]);
            }
        }
        c.env("LEASECTL_LOG", "warn")
            .env("HOME", s.dir.path())
            .env("XDG_DATA_HOME", s.dir.path());
        c
    }
}

/// A cgroup made for a test, removed (after its processes are gone) on drop.
pub struct TestCgroup(pub PathBuf);

impl TestCgroup {
    /// `relative` under the cgroup v2 hierarchy (`/sys/fs/cgroup`, or its
    /// `unified` mount on a hybrid host) or, with `v1`, under the named
    /// `systemd` v1 hierarchy; `None` when neither can be made here.
    pub fn make(relative: &str, v1: bool) -> Option<TestCgroup> {
        let base = if v1 {
            PathBuf::from("/sys/fs/cgroup/systemd")
        } else if Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
            PathBuf::from("/sys/fs/cgroup/unified")
        } else {
            PathBuf::from("/sys/fs/cgroup")
        };
        base.join("cgroup.procs").exists().then_some(())?;
        let d = base.join(relative);
        std::fs::create_dir_all(&d).ok()?;
        Some(TestCgroup(d))
    }

    /// Whether cgroups can be made here (v2, and v1 when asked).
    pub fn possible(v1: bool) -> Option<String> {
        let name = format!("leasectl-probe-{}", std::process::id());
        match TestCgroup::make(&name, v1) {
            Some(_) => None,
            None => Some(format!(
                "cannot make a cgroup{} here",
                if v1 {
                    " in the v1 systemd hierarchy"
                } else {
                    ""
                }
            )),
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Deepest first; a cgroup with processes left waits a little.
        let mut dirs = vec![self.0.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(rd) = std::fs::read_dir(&dirs[i]) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        dirs.push(e.path());
                    }
                }
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            let _ = wait_for(Duration::from_secs(3), || std::fs::remove_dir(d).ok());
        }
    }
}

/// A node stood in for by a PID namespace of its own (with a /proc of it in
/// a mount namespace of its own): its processes are the node's, and a
/// viewer entering it sees nothing else.
pub struct FakeNode {
    pub guard: Guard,
    /// Its init's host pid.
    pub init: u32,
}

impl FakeNode {
    pub fn start() -> FakeNode {
        let mut c = command("unshare");
        c.args([
            "--pid",
            "--fork",
            "--mount",
            "--propagation",
            "private",
            "--mount-proc",
            "sleep",
            "600",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let guard = Guard::spawn(c);
        let init = wait_for(Duration::from_secs(10), || {
            children(guard.pid).first().copied()
        })
        .expect("the node's init");
        FakeNode { guard, init }
    }

    /// `leasectl ARGS` run inside the node (its PID namespace and its /proc).
    pub fn leasectl(&self, s: &Scratch, args: &[&str]) -> Command {
        let mut c = command("nsenter");
        c.args(["--target", &self.init.to_string(), "--pid", "--mount", "--"])
            .arg(&s.bin)
            .args(args)
            .env("LEASECTL_LOG", "warn")
            .env("HOME", s.dir.path())
            .env("XDG_DATA_HOME", s.dir.path());
        c
    }
}
