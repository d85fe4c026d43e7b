//! The one `/proc` walk: the descendants of a process.

use std::collections::BTreeMap;
use std::path::Path;

/// Every process whose chain of parents reaches `root` (not `root` itself),
/// from the real `/proc`. See [`descendants_in`].
pub(crate) fn descendants(root: i32) -> Vec<i32> {
    descendants_in(Path::new("/proc"), root)
}

/// Every process whose chain of parents reaches `root` (not `root` itself),
/// read from the proc filesystem mounted at `proc_root`, nearest first.
/// Processes that vanish meanwhile are skipped; an unreadable `proc_root`
/// gives none.
pub(crate) fn descendants_in(proc_root: &Path, root: i32) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes_with_root(proc_root) else {
        return Vec::new();
    };
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in all.flatten() {
        if let Ok(s) = p.stat() {
            children.entry(s.ppid).or_default().push(s.pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(c) = children.get(&pid) {
            for &k in c {
                if !out.contains(&k) && k != root {
                    out.push(k);
                    stack.push(k);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::FORKS;

    /// A fake proc root: `pid/stat` files naming each parent.
    fn fake_proc(procs: &[(i32, i32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for &(pid, ppid) in procs {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} (sh) S {ppid} {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn walks_the_injected_proc_root() {
        let p = fake_proc(&[(1, 0), (10, 1), (11, 10), (12, 11), (20, 1), (30, 99)]);
        let mut d = descendants_in(p.path(), 10);
        d.sort();
        assert_eq!(d, vec![11, 12]);
        let mut all = descendants_in(p.path(), 1);
        all.sort();
        assert_eq!(all, vec![10, 11, 12, 20]);
        assert!(descendants_in(p.path(), 12).is_empty());
    }

    #[test]
    fn an_unreadable_proc_root_gives_none() {
        assert!(descendants_in(Path::new("/nonexistent/proc"), 1).is_empty());
    }

    #[test]
    fn finds_a_real_child() {
        let _forks = FORKS.read().unwrap_or_else(|e| e.into_inner());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let d = descendants(std::process::id() as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert!(d.contains(&(child.id() as i32)), "{d:?}");
    }
}
