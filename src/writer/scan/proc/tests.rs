use super::files::parse_stat;
use super::raw::read_proc;
use super::*;
use crate::writer::{ENABLE, LOCK_NAME};
use crate::FORKS;

#[test]
fn parse_stat_takes_comm_up_to_the_last_paren() {
    let line = b"4711 (a) b (c) S 42 4711 4711 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0\n";
    let s = parse_stat(line).unwrap();
    assert_eq!(s.comm, "a) b (c");
    assert_eq!(s.ppid, 42);
    assert_eq!(s.flags, 4194560);
    assert_eq!(s.starttime, 123456);
    assert!(parse_stat(b"4711 (x) S 42").is_none());
    assert!(parse_stat(b"garbage").is_none());
}

#[test]
fn raw_directory_listing_sees_every_entry_across_many_reads() {
    // 3,000 names of up to 40 bytes: several getdents64 calls of 8 KiB.
    let dir = tempfile::tempdir().unwrap();
    let mut want = BTreeSet::new();
    for i in 0..3000 {
        let name = format!("{i}-{}", "x".repeat(i % 30));
        std::fs::write(dir.path().join(&name), b"").unwrap();
        want.insert(name);
    }
    let fd = open_dir(dir.path()).unwrap();
    let mut got = BTreeSet::new();
    each_entry(&fd, &mut DirentBuf::new(), |n| {
        assert!(
            got.insert(n.to_str().unwrap().to_owned()),
            "listed twice: {n:?}"
        );
    })
    .unwrap();
    assert_eq!(got, want);
}

#[test]
fn prefetched_table_reads_what_the_lazy_one_reads() {
    let _forks = FORKS.read().unwrap_or_else(|e| e.into_inner());
    // A real process with the lease variable and a lock file open on fd 0.
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(LOCK_NAME);
    std::fs::write(&lock, b"").unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env(ENABLE, "1")
        .stdin(std::fs::File::open(&lock).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Enough user processes for the prefetch to use its threads.
    let mut fillers: Vec<_> = (0..THREADS_FROM)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .collect();
    // Until it has exec'd (its environment is then the one given).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let lazy = loop {
        let t = ProcTable::read(Path::new("/proc")).unwrap();
        if t.procs
            .get(&pid)
            .and_then(|p| p.stat())
            .is_some_and(|s| s.comm == "sleep")
        {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "sleep did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let pre = ProcTable::read_with(Path::new("/proc"), Want::JUDGED, false).unwrap();
    let (lazy_env, a) = (lazy.env(pid), lazy.fds(pid));
    // And a table prefetched after the fact, as with --pod-root.
    let late = ProcTable::read(Path::new("/proc")).unwrap();
    let late_users: Vec<u32> = late
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();
    late.prefetch(&late_users, Want::JUDGED);
    for u in &late_users {
        assert!(
            late.fd_cache.borrow().contains_key(u),
            "pid {u} not prefetched"
        );
        assert!(
            late.env_cache.borrow().contains_key(u),
            "pid {u} not prefetched"
        );
    }
    let (late_env, late_fds) = (late.env(pid), late.fds(pid));
    for c in fillers.iter_mut().chain([&mut child]) {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    assert!(pre.procs.len() >= THREADS_FROM);
    // Every user process was prefetched, and reads as the lazy table read it.
    let users: Vec<u32> = pre
        .procs
        .values()
        .filter(|p| !p.kthread)
        .map(|p| p.pid)
        .collect();
    assert!(users.contains(&pid));
    for u in &users {
        assert!(
            pre.fd_cache.borrow().contains_key(u),
            "pid {u} not prefetched"
        );
        assert!(
            pre.env_cache.borrow().contains_key(u),
            "pid {u} not prefetched"
        );
    }
    assert_eq!(
        pre.env(pid),
        EnvRead::Read {
            enable: Some("1".into()),
            stamp: None
        }
    );
    assert_eq!(lazy_env, pre.env(pid));
    assert_eq!(lazy_env, late_env);
    assert_eq!(
        late_fds
            .fds
            .iter()
            .map(|f| (f.dev, f.ino))
            .collect::<Vec<_>>(),
        a.fds.iter().map(|f| (f.dev, f.ino)).collect::<Vec<_>>()
    );
    let b = pre.fds(pid);
    assert_eq!(b.fds.len(), 1, "{b:?}");
    assert_eq!(b.fds[0].target, std::fs::canonicalize(&lock).unwrap());
    assert!(b.fds[0].link.ends_with(format!("{pid}/fd/0")));
    assert_eq!(
        (
            a.fds[0].dev,
            a.fds[0].ino,
            &a.fds[0].path,
            a.unreadable.is_none()
        ),
        (
            b.fds[0].dev,
            b.fds[0].ino,
            &b.fds[0].path,
            b.unreadable.is_none()
        )
    );
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

#[test]
fn stat_read_on_demand_is_the_stat_read_with_the_process() {
    let _forks = FORKS.read().unwrap_or_else(|e| e.into_inner());
    // One process with the lease variable (its `stat` is read with it), one
    // without (read when asked).
    let spawn = |leased: bool| {
        let mut c = std::process::Command::new("sleep");
        c.arg("30");
        if leased {
            c.env(ENABLE, "1");
        }
        c.spawn().unwrap()
    };
    let mut children = [spawn(true), spawn(false)];
    let (leased, plain) = (children[0].id(), children[1].id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let eager = loop {
        let t = ProcTable::read(Path::new("/proc")).unwrap();
        let execd = |pid| {
            t.procs
                .get(&pid)
                .and_then(|p| p.stat())
                .is_some_and(|s| s.comm == "sleep")
        };
        if execd(leased) && execd(plain) {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "sleep did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let lazy = ProcTable::read_with(Path::new("/proc"), Want::JUDGED, true).unwrap();
    let read_with_it = |pid: u32| lazy.procs[&pid].stat.get().is_some();
    assert!(read_with_it(leased), "a process with a lease variable");
    assert!(!read_with_it(plain), "a process in no pod");
    let me = std::process::id();
    for pid in [leased, plain, me] {
        let (a, b) = (eager.procs[&pid].stat(), lazy.procs[&pid].stat());
        let facts = |s: Option<&Stat>| s.map(|s| (s.ppid, s.comm.clone(), s.starttime));
        assert_eq!(facts(a), facts(b), "pid {pid}");
        if pid != me {
            assert_eq!(lazy.procs[&pid].ppid(), Some(me), "pid {pid}'s parent");
        }
    }
    // Kernel threads are told the same way.
    for (pid, p) in &lazy.procs {
        if let Some(e) = eager.procs.get(pid) {
            assert_eq!(p.kthread, e.kthread, "pid {pid}");
        }
    }
    for c in &mut children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn a_process_gone_before_its_stat_is_read_has_no_parent() {
    // A proc root where pid 10 left only its environment (it exited while
    // the scan read it) and pid 11, its child, carries the lease variable.
    let dir = tempfile::tempdir().unwrap();
    let (ten, eleven) = (dir.path().join("10"), dir.path().join("11"));
    for d in [&ten, &eleven] {
        std::fs::create_dir_all(d.join("fd")).unwrap();
        std::fs::create_dir_all(d.join("fdinfo")).unwrap();
    }
    std::fs::write(ten.join("environ"), b"PATH=/bin\0").unwrap();
    std::fs::write(eleven.join("environ"), format!("{ENABLE}=1\0")).unwrap();
    std::fs::write(
        eleven.join("stat"),
        b"11 (sh) S 10 11 11 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0\n",
    )
    .unwrap();
    let t = ProcTable::read_with(dir.path(), Want::JUDGED, true).unwrap();
    assert_eq!(t.procs[&11].ppid(), Some(10));
    assert!(!t.procs[&10].kthread);
    assert!(t.procs[&10].stat().is_none());
    assert_eq!(t.procs[&10].ppid(), None);
    // The line of ancestors ends at the process whose parent is unknown.
    let seeds = BTreeMap::from([(11, "seed".to_string())]);
    let line: Vec<u32> = t.with_ancestors(&seeds).into_keys().collect();
    assert_eq!(line, [10, 11]);
    // Read eagerly, pid 10 is gone as a whole.
    let eager = ProcTable::read(dir.path()).unwrap();
    assert!(!eager.procs.contains_key(&10));
}

#[test]
fn descriptors_read_by_number_are_the_ones_listed() {
    let _forks = FORKS.read().unwrap_or_else(|e| e.into_inner());
    let proc = Path::new("/proc");
    // Before Linux 6.2 a table has no size: both ways then list it.
    if !super::files::counts_fds(proc) {
        eprintln!("this kernel's descriptor tables give no size");
    }
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join(LOCK_NAME);
    std::fs::write(&lock, b"").unwrap();
    // The lock file on descriptor 3 (no gap), and on 7 (3 to 6 closed).
    let spawn = |fd: u32| {
        let script = format!("exec {fd}<\"$0\"; exec sleep 30");
        std::process::Command::new("sh")
            .args(["-c", &script])
            .arg(&lock)
            .spawn()
            .unwrap()
    };
    let mut children = [spawn(3), spawn(7)];
    let read = |pid: u32, counts_fds: bool| {
        let root_fd = super::raw::open_root(proc).unwrap();
        let at = super::files::ProcRoot {
            path: proc,
            counts_fds,
            fd: Some(std::os::fd::AsFd::as_fd(&root_fd)),
        };
        let f = super::files::lock_fds(at, pid, &mut super::files::ScanBufs::new());
        let links: Vec<PathBuf> = f.fds.iter().map(|l| l.link.clone()).collect();
        (links, f.unreadable)
    };
    for (c, fd) in children.iter().zip([3, 7]) {
        let pid = c.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Until `sleep` runs with the lock file open.
        while read(pid, false).0.is_empty() {
            assert!(std::time::Instant::now() < deadline, "no lock file open");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let by_number = read(pid, true);
        assert_eq!(by_number, read(pid, false), "pid {pid}");
        assert_eq!(
            by_number.0,
            [proc.join(format!("{pid}/fd/{fd}"))],
            "pid {pid}"
        );
        assert_eq!(by_number.1, None);
    }
    for c in &mut children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn a_cgroup_like_the_last_one_read_names_what_its_own_reading_names() {
    // Processes 10 and 12 in one pod's container, 11 in another's, 13 in
    // none, 14 without a cgroup file: read one after the other with one
    // set of buffers (the text of the last kept), each must name what it
    // names read alone.
    let dir = tempfile::tempdir().unwrap();
    let scope = |pod: &str, id: char| {
        format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod}.slice/cri-containerd-{}.scope\n",
            id.to_string().repeat(64)
        )
    };
    let a = scope("1111aaaa_2222_3333_4444_555566667777", 'a');
    let b = scope("8888bbbb_2222_3333_4444_555566667777", 'b');
    for (pid, text) in [(10, Some(&a)), (11, Some(&b)), (12, Some(&a)), (13, None)] {
        let d = dir.path().join(pid.to_string());
        std::fs::create_dir(&d).unwrap();
        let text = text.cloned().unwrap_or_else(|| "0::/user.slice\n".into());
        std::fs::write(d.join("cgroup"), text).unwrap();
    }
    std::fs::create_dir(dir.path().join("14")).unwrap();
    let root_fd = super::raw::open_root(dir.path()).unwrap();
    let at = super::files::ProcRoot {
        path: dir.path(),
        counts_fds: false,
        fd: Some(std::os::fd::AsFd::as_fd(&root_fd)),
    };
    let mut bufs = super::files::ScanBufs::new();
    let mut named = Vec::new();
    for pid in [10, 11, 12, 12, 13, 14, 10] {
        let alone = super::files::read_container(at, pid, &mut Vec::new());
        let got = bufs.container(at, pid);
        assert_eq!(got, alone, "pid {pid}");
        named.push(got.and_then(|c| c.pod_uid));
    }
    let (pa, pb) = (
        Some("1111aaaa-2222-3333-4444-555566667777".to_string()),
        Some("8888bbbb-2222-3333-4444-555566667777".to_string()),
    );
    assert_eq!(
        named,
        [pa.clone(), pb, pa.clone(), pa.clone(), None, None, pa]
    );
}
