//! Containment: `bucket hold` runs its command in a PID namespace of its
//! own, so that the kernel ends every process of the command when leasectl
//! dies, however it dies (SIGKILL, the OOM killer) and however the command
//! detached (`setsid`, `nohup`, a double fork that closed every descriptor).
//!
//! The shape, three processes where there was one:
//!
//! ```text
//! leasectl ── shim (host PID namespace) ── init (PID 1 of the new one) ── CMD
//! ```
//!
//! - leasectl spawns the **shim** (`/proc/self/exe` with [`INIT_ARG`]) after
//!   `unshare(CLONE_NEWPID)` in the forked child (with `CLONE_NEWUSER` and a
//!   map of the caller's own uid and gid where the caller may not create a
//!   PID namespace alone). The shim dies with leasectl
//!   (`PR_SET_PDEATHSIG(SIGKILL)`, set again after exec and checked against
//!   the expected parent).
//! - The shim forks the **init**, PID 1 of the new namespace, which dies with
//!   the shim (its own parent-death signal, and a pipe that tells it if the
//!   shim was gone before that was set). When PID 1 of a namespace ends, the
//!   kernel SIGKILLs every other process in it (pid_namespaces(7)): that is
//!   the guarantee, and nothing in it waits on leasectl being alive.
//! - The init spawns **CMD** (pid 2 in the namespace), forwards to it the
//!   signals the shim forwards from leasectl, reaps every orphan of the
//!   namespace, and when CMD exits kills what it left (`kill(-1, SIGKILL)`
//!   from PID 1 reaches the whole namespace) and exits with CMD's status
//!   (128 + the signal number when a signal killed it). The shim exits with
//!   the init's.
//!
//! What CMD sees differently: `getpid()` is 2 and `getppid()` is 1 (pids in
//! the namespace); `/proc` is still the host's (nothing is mounted), so
//! `/proc/self` names its host pid. In a user namespace (a caller without
//! `CAP_SYS_ADMIN`), its uid and gid are its own, files of other users show
//! as `nobody`, and set-user-ID programs gain nothing.
//!
//! Where the kernel refuses both namespaces, [`choose`] says why; `bucket
//! hold` then supervises as before (child subreaper, parent-death signal), or
//! with `--containment require` refuses to start.

use std::ffi::{CString, OsString};
use std::fmt;
use std::os::unix::process::CommandExt;

use nix::sys::signal::{SigSet, Signal};
use nix::unistd::Pid;

use super::reap::{wait_pid, Ended};

/// The first argument that makes the `leasectl` binary the containment's
/// shim instead of the command-line tool (`main.rs` checks it before
/// anything else).
pub const INIT_ARG: &str = "__leasectl-contain-init";

/// `--containment`: what `bucket hold` does about containment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainmentMode {
    /// A PID namespace when the kernel allows one; else say why, once, and
    /// supervise as before.
    #[default]
    Auto,
    /// A PID namespace, or refuse to start (exit 125).
    Require,
    /// No namespace: the child subreaper and parent-death signal alone.
    Off,
}

impl ContainmentMode {
    /// The value's name on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            ContainmentMode::Auto => "auto",
            ContainmentMode::Require => "require",
            ContainmentMode::Off => "off",
        }
    }
}

impl std::str::FromStr for ContainmentMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ContainmentMode::Auto),
            "require" => Ok(ContainmentMode::Require),
            "off" => Ok(ContainmentMode::Off),
            other => Err(format!(
                "unknown containment {other:?}: expected auto, require or off"
            )),
        }
    }
}

/// The containment a command runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// A PID namespace of its own (the caller has `CAP_SYS_ADMIN`).
    PidNamespace,
    /// A user namespace (the caller's uid and gid mapped to themselves) and
    /// a PID namespace in it.
    UserPidNamespace,
    /// No namespace: leasectl is a child subreaper and the command dies with
    /// it through its parent-death signal; what the command detached
    /// survives a SIGKILL of leasectl.
    Subreaper,
}

impl Containment {
    /// The name in logs and outputs: `pid-namespace`,
    /// `user-pid-namespace` or `subreaper`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Containment::PidNamespace => "pid-namespace",
            Containment::UserPidNamespace => "user-pid-namespace",
            Containment::Subreaper => "subreaper",
        }
    }

    /// True for the namespaces (the kernel ends the command's tree).
    pub const fn is_contained(self) -> bool {
        !matches!(self, Containment::Subreaper)
    }

    const fn flags(self) -> libc::c_int {
        match self {
            Containment::PidNamespace => libc::CLONE_NEWPID,
            Containment::UserPidNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWPID,
            Containment::Subreaper => 0,
        }
    }
}

impl fmt::Display for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the kernel refused a PID namespace: the last attempt and its error.
#[derive(Debug, Clone)]
pub struct Refused {
    /// What was tried last (`user-pid-namespace` or `pid-namespace`).
    pub tried: Containment,
    /// The kernel's answer.
    pub error: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the kernel refused a PID namespace for the command (unshare for a {}: {}; user namespaces may be switched off in /proc/sys/user/max_user_namespaces, or a seccomp profile or a container without CAP_SYS_ADMIN forbids them)",
            self.tried, self.error
        )
    }
}

/// The sentence `bucket hold` logs once when it goes on without a namespace.
pub fn what_is_lost(refused: &Refused) -> String {
    format!("{refused}: going on without containment, so a daemon CMD starts in a new session (setsid, nohup, a double fork) survives a SIGKILL of leasectl and may write after the lease is taken by another holder; --containment require refuses to start instead")
}

/// Decides the containment for `mode`, trying what the kernel allows: a PID
/// namespace alone as root, else a user namespace with a PID namespace in it.
/// Each candidate is tried for real (a forked child enters it and exits).
///
/// # Errors
/// [`Refused`] when `mode` is [`ContainmentMode::Require`] and the kernel
/// refused every candidate. With `Auto`, a refusal is `Ok` with
/// [`Containment::Subreaper`] and the reason.
pub fn choose(mode: ContainmentMode) -> Result<(Containment, Option<Refused>), Refused> {
    if mode == ContainmentMode::Off {
        return Ok((Containment::Subreaper, None));
    }
    let candidates: &[Containment] = if nix::unistd::geteuid().is_root() {
        &[Containment::PidNamespace, Containment::UserPidNamespace]
    } else {
        &[Containment::UserPidNamespace]
    };
    let mut last = None;
    for &c in candidates {
        match try_enter(c) {
            Ok(()) => return Ok((c, None)),
            Err(e) => {
                last = Some(Refused {
                    tried: c,
                    error: e.to_string(),
                })
            }
        }
    }
    let refused = last.unwrap_or(Refused {
        tried: Containment::PidNamespace,
        error: "no candidate".into(),
    });
    match mode {
        ContainmentMode::Require => Err(refused),
        _ => Ok((Containment::Subreaper, Some(refused))),
    }
}

/// Forks a child that enters `c` and exits at once (it never execs): the
/// kernel's real answer, with no trace left.
fn try_enter(c: Containment) -> std::io::Result<()> {
    let mut enter = enter_hook(c);
    let mut probe = std::process::Command::new("/proc/self/exe");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook calls only async-signal-safe functions (unshare,
    // open, write, close, _exit) in the forked child.
    unsafe {
        probe.pre_exec(move || {
            enter()?;
            libc::_exit(0)
        });
    }
    let status = probe.spawn()?.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "the probe ended with {status}"
        )))
    }
}

/// The `pre_exec` hook that enters `c` in the forked child: `unshare` and,
/// for a user namespace, `setgroups` denied and the caller's uid and gid
/// mapped to themselves (`/proc/self/{setgroups,uid_map,gid_map}`). Every
/// string is built before the fork; the hook allocates nothing.
pub fn enter_hook(c: Containment) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let user = c == Containment::UserPidNamespace;
    let files: Vec<(CString, Vec<u8>)> = if user {
        vec![
            (cstr("/proc/self/setgroups"), b"deny".to_vec()),
            (
                cstr("/proc/self/uid_map"),
                format!("{uid} {uid} 1\n").into_bytes(),
            ),
            (
                cstr("/proc/self/gid_map"),
                format!("{gid} {gid} 1\n").into_bytes(),
            ),
        ]
    } else {
        Vec::new()
    };
    let flags = c.flags();
    move || {
        if flags == 0 {
            return Ok(());
        }
        // SAFETY: unshare takes flags only.
        if unsafe { libc::unshare(flags) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        for (path, data) in &files {
            write_file(path, data)?;
        }
        Ok(())
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap_or_default()
}

/// open, write, close: async-signal-safe.
fn write_file(path: &CString, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated path and plain flags.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a valid fd and a buffer of data.len() bytes.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the fd opened above.
    unsafe { libc::close(fd) };
    if n != data.len() as isize {
        return Err(err);
    }
    Ok(())
}

/// The shim's command line: `/proc/self/exe` (this very binary, even if its
/// file was replaced since) with [`INIT_ARG`], the expected parent's pid,
/// `--` and the command.
pub fn shim_command(command: &[OsString]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("/proc/self/exe");
    cmd.arg0("leasectl")
        .arg(INIT_ARG)
        .arg(std::process::id().to_string())
        .arg("--")
        .args(command);
    cmd
}

/// The shim's arguments when this process was started as one: `(parent,
/// command)`; `None` for the command-line tool.
pub fn init_args() -> Option<(i32, Vec<OsString>)> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != INIT_ARG {
        return None;
    }
    let parent = args.next()?.to_str()?.parse().ok()?;
    if args.next()? != "--" {
        return None;
    }
    let command: Vec<OsString> = args.collect();
    (!command.is_empty()).then_some((parent, command))
}

/// The exit status of a process that could not start the command or lost
/// its supervisor before it could: 125, as `bucket hold`'s own failures.
const CANNOT_START: i32 = 125;

/// The shim's and the init's whole life (see the module doc). Never returns.
pub fn init_main(parent: i32, command: Vec<OsString>) -> ! {
    // Dies with leasectl. Set again here: entering a user namespace clears
    // the parent-death signal set before it; and if leasectl is already
    // gone, nobody would kill us, so we do not start.
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
        || nix::unistd::getppid().as_raw() != parent
    {
        std::process::exit(CANNOT_START);
    }
    let mut signals = super::signals::forwarded();
    signals.push(libc::SIGCHLD);
    let set = super::signals::sigset(&signals);
    if set.thread_block().is_err() {
        std::process::exit(CANNOT_START);
    }
    // The init learns from this pipe whether the shim was alive when its
    // parent-death signal was set: the shim holds the write end until it dies.
    let Ok((life_r, life_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        std::process::exit(CANNOT_START);
    };
    // SAFETY: this process is single-threaded (the shim starts no thread).
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(life_w);
            namespace_init(command, &signals, set, life_r)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(life_r);
            shim(child, set, life_w)
        }
        Err(e) => {
            tracing::error!("cannot start the command's PID namespace (fork: {e})");
            std::process::exit(CANNOT_START)
        }
    }
}

/// The shim: forwards signals to the init and exits with its status.
fn shim(init: Pid, set: SigSet, _life: std::os::fd::OwnedFd) -> ! {
    loop {
        let sig = super::signals::wait(&set);
        if sig != libc::SIGCHLD {
            // SAFETY: kill(2) of our own child, the init.
            unsafe { libc::kill(init.as_raw(), sig) };
            continue;
        }
        match wait_pid(init.as_raw(), libc::WNOHANG) {
            Ok(Some((_, Ended::Exited(code)))) => std::process::exit(code),
            Ok(Some((_, Ended::Signaled(sig)))) => std::process::exit(128 + sig),
            Ok(None) | Err(nix::Error::EINTR) => {}
            Err(_) => std::process::exit(CANNOT_START),
        }
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// PID 1 of the namespace: starts the command, forwards signals to it, reaps
/// every orphan, and once the command exits kills what it left and exits
/// with the command's status.
fn namespace_init(
    command: Vec<OsString>,
    signals: &[i32],
    set: SigSet,
    life: std::os::fd::OwnedFd,
) -> ! {
    use std::os::fd::AsFd;
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() {
        std::process::exit(CANNOT_START);
    }
    // The shim died before the parent-death signal was set: nobody would
    // end this namespace, so it ends now.
    let mut fds = [nix::poll::PollFd::new(
        life.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    if nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap_or(1) > 0 {
        std::process::exit(CANNOT_START);
    }
    // PID 1 of a namespace gets a signal from the shim only if it has a
    // handler for it (pid_namespaces(7)); the handler never runs, as the
    // signals stay blocked and are taken by sigwait.
    // (libc's sigaction: nix's names no real-time signal.)
    for &s in signals {
        // SAFETY: a handler that does nothing, an empty mask, no flags.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(s, &action, std::ptr::null_mut());
        }
    }
    // The handlers above end at exec; the mask is inherited, so the
    // command's child unblocks what this process blocked.
    let mut spawn = std::process::Command::new(&command[0]);
    spawn.args(&command[1..]);
    // SAFETY: sigprocmask only, in the forked child.
    unsafe {
        spawn.pre_exec(move || Ok(set.thread_unblock()?));
    }
    let child = match spawn.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "cannot run {}: {e}",
                crate::text::sanitize(&command[0].to_string_lossy())
            );
            std::process::exit(crate::exit::Exit::spawn_failed(&e).code());
        }
    };
    let cmd = child.id() as i32;
    loop {
        let sig = super::signals::wait(&set);
        if sig != libc::SIGCHLD {
            // SAFETY: kill(2) of our own child, the command.
            unsafe { libc::kill(cmd, sig) };
            continue;
        }
        loop {
            // Raw statuses: a command killed by a real-time signal is reaped
            // with its status, never lost (nix's would fail after reaping).
            match wait_pid(-1, libc::WNOHANG) {
                Ok(None) => break,
                Ok(Some((pid, end))) if pid == cmd => finish(end),
                Ok(Some(_)) | Err(nix::Error::EINTR) => {}
                Err(_) => break,
            }
        }
    }
}

/// The command ended with `status`: kill what it left in the namespace, reap
/// it, exit with the command's status.
fn finish(status: Ended) -> ! {
    let me = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<i32>().ok()));
    let left = me.map(|me| super::descendants(me).len()).unwrap_or(0);
    // From PID 1, -1 is every other process of the namespace.
    let _ = nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
    if left > 0 {
        tracing::warn!(
            "the command exited but left {left} process(es) running (e.g. daemonized); they were killed before the lease was released"
        );
    }
    // Every child reaped, until none is left (ECHILD).
    while let Err(nix::Error::EINTR) | Ok(_) = wait_pid(-1, 0) {}
    std::process::exit(match status {
        Ended::Exited(code) => code,
        Ended::Signaled(sig) => 128 + sig,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_name_and_off_never_tries() {
        for m in [
            ContainmentMode::Auto,
            ContainmentMode::Require,
            ContainmentMode::Off,
        ] {
            assert_eq!(m.as_str().parse::<ContainmentMode>(), Ok(m));
        }
        let e = "yes".parse::<ContainmentMode>().unwrap_err();
        assert!(e.contains("auto, require or off"), "{e}");
        let (c, why) = choose(ContainmentMode::Off).unwrap();
        assert_eq!(c, Containment::Subreaper);
        assert!(why.is_none());
    }

    #[test]
    fn a_refusal_says_what_is_lost_and_how_to_require() {
        let r = Refused {
            tried: Containment::UserPidNamespace,
            error: "Operation not permitted (os error 1)".into(),
        };
        let s = what_is_lost(&r);
        assert!(s.contains("Operation not permitted"), "{s}");
        assert!(s.contains("survives a SIGKILL of leasectl"), "{s}");
        assert!(s.contains("--containment require"), "{s}");
    }
}
