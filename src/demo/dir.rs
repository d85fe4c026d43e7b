//! The demo directory: a fresh temporary directory or `--dir`, its layout
//! (module docs of `crate::demo`), and its removal.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::{DemoError, AUDIT_LOG, PREFIXES, STATE_DIR};
use crate::target::Target;

/// The demo directory: the store root, plus the internal state directory.
#[derive(Debug)]
pub(crate) struct DemoDir {
    root: PathBuf,
    temporary: bool,
}

impl DemoDir {
    /// Prepares the directory. With `dir`, the directory is created if
    /// missing; an existing one must be empty or a previous demo's (it then
    /// starts over: the demo prefixes and the state directory are removed; the
    /// audit log is kept). Without, a new directory `leasectl-demo-*` is made
    /// under the system temporary directory (`$TMPDIR`), mode 0700.
    ///
    /// # Errors
    /// [`DemoError::Dir`] when the directory cannot be made, or holds
    /// something other than a previous demo.
    pub(crate) fn create(dir: Option<&Path>) -> Result<Self, DemoError> {
        let io = |path: &Path, e: std::io::Error| DemoError::Dir {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let (root, temporary) = match dir {
            Some(d) => {
                fs::create_dir_all(d).map_err(|e| io(d, e))?;
                let d = d.canonicalize().map_err(|e| io(d, e))?;
                let previous_demo = d.join(STATE_DIR).is_dir();
                if previous_demo {
                    for p in PREFIXES {
                        let _ = fs::remove_dir_all(d.join(p));
                    }
                    let _ = fs::remove_dir_all(d.join(STATE_DIR));
                    let _ = fs::remove_dir_all(d.join(".leasectl-tmp"));
                } else if fs::read_dir(&d).map_err(|e| io(&d, e))?.next().is_some() {
                    return Err(DemoError::Dir {
                        path: d,
                        message: "not empty and not a previous demo directory; give an empty or new directory".into(),
                    });
                }
                (d, false)
            }
            None => {
                let base = std::env::temp_dir();
                let mut made = None;
                for _ in 0..16 {
                    let p = base.join(format!("leasectl-demo-{:08x}", rand::random::<u32>()));
                    match fs::DirBuilder::new().mode(0o700).create(&p) {
                        Ok(()) => {
                            made = Some(p);
                            break;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(io(&p, e)),
                    }
                }
                let p = made.ok_or_else(|| DemoError::Dir {
                    path: base.clone(),
                    message: "could not make a new directory".into(),
                })?;
                let p = p.canonicalize().map_err(|e| io(&p, e))?;
                (p, true)
            }
        };
        let d = Self { root, temporary };
        for sub in [d.state_dir(), d.pod_dir("healthy"), d.pod_dir("racing")] {
            fs::create_dir_all(&sub).map_err(|e| io(&sub, e))?;
        }
        Ok(d)
    }

    /// The store root (the console's TARGET is `file://{root}/`).
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the directory was made by the demo (and is removed at exit).
    pub(crate) fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The audit log path for takeovers made in the demo: `{dir}/audit.jsonl`.
    pub(crate) fn audit_log(&self) -> PathBuf {
        self.root.join(AUDIT_LOG)
    }

    /// The internal state directory `{dir}/.leasectl-demo/`.
    pub(crate) fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// The data directory of the demo pod `name` (`healthy` or `racing`).
    pub(crate) fn pod_dir(&self, name: &str) -> PathBuf {
        self.state_dir().join("pods").join(name)
    }

    /// The file listing the demo's processes: lines `demo PID`, `watchdog
    /// PID`, `pod NAME PID` (each pod root leads its own process group).
    pub(crate) fn pids_file(&self) -> PathBuf {
        self.state_dir().join("pids")
    }

    /// The demo's log (the engine's and the pods' messages; the terminal
    /// belongs to the console).
    pub(crate) fn log_file(&self) -> PathBuf {
        self.state_dir().join("demo.log")
    }

    /// The TARGET of the demo store.
    pub(crate) fn target(&self) -> Target {
        Target::Local {
            dir: self.root.clone(),
        }
    }

    /// Removes the directory if the demo made it; a `--dir` is left in place.
    pub(crate) fn remove_if_temporary(&self) {
        if self.temporary {
            if let Err(e) = fs::remove_dir_all(&self.root) {
                tracing::warn!(dir = %self.root.display(), "could not remove the demo directory: {e}");
            }
        }
    }
}
