//! The prespawned bwrap's tests: which one a mode waits with, one that cannot start, one that
//! waits and is killed, and one waiting for the observers in a namespace of its own.

use super::*;

/// The bwrap installed here, or `None` (the test skips, saying why).
fn installed_bwrap() -> Option<AbsPathBuf> {
    let found = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"]
        .iter()
        .find(|p| Path::new(p).exists())
        .and_then(AbsPathBuf::new_lexical);
    if found.is_none() {
        paddock_test_support::skip("bwrap is not installed (apt-get install bubblewrap)", None);
    }
    found
}

#[test]
fn the_mode_decides_which_bwrap_waits() {
    use paddock_policy::ItemizeMode;
    let toggles = crate::runtime::Toggles::default();
    let kind = |mode, observed| PrespawnKind::for_mode(mode, toggles, || observed);
    assert_eq!(kind(Some(ItemizeMode::Off), true), Some(PrespawnKind::Plain));
    assert_eq!(kind(Some(ItemizeMode::Observe), true), Some(PrespawnKind::Observed));
    assert_eq!(kind(None, true), Some(PrespawnKind::Observed), "the config's: auto unless it says");
    assert_eq!(kind(None, false), None, "a host without the observers");
    assert_eq!(kind(Some(ItemizeMode::Auto), false), None);
    assert_eq!(kind(Some(ItemizeMode::Strace), true), Some(PrespawnKind::Plain), "attached");
    let unattached = crate::runtime::Toggles { strace_attach: false, ..toggles };
    let strace = PrespawnKind::for_mode(Some(ItemizeMode::Strace), unattached, || true);
    assert_eq!(strace, None, "strace around bwrap spawns it its own way");
}

#[test]
fn a_bwrap_that_cannot_be_executed_is_reported_and_reaped_not_used() {
    let missing = AbsPathBuf::new_lexical("/nonexistent/paddock-test/bwrap").unwrap();
    let mut pre = Prespawned::start(&missing).unwrap();
    let pid = pre.child.as_ref().unwrap().pid;
    assert!(!pre.started(), "a child whose execve failed is not a bwrap");
    assert!(pre.child.is_none());
    // Reaped: no such child any more.
    // SAFETY: waitpid with WNOHANG on a pid that was our child.
    let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    assert_eq!(r, -1, "reaped already");
    drop(pre);
}

#[test]
fn a_prespawned_bwrap_waits_and_is_killed_when_dropped() {
    let Some(bwrap) = installed_bwrap() else { return };
    let mut pre = Prespawned::start(&bwrap).unwrap();
    assert!(pre.started());
    let pid = pre.child.as_ref().unwrap().pid;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, Path::new(bwrap.as_path()), "bwrap itself, waiting for its setup");
    drop(pre);
    // SAFETY: kill with signal 0 only checks for the process.
    assert_ne!(unsafe { libc::kill(pid, 0) }, 0, "killed and reaped");
}

/// The CPUs a thread of this process may run on (`Cpus_allowed_list`).
fn cpus_of(tid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim().to_owned()
}

#[test]
fn the_runner_kept_off_bwraps_cpus_gets_them_back_with_every_thread_it_started() {
    let Some(bwrap) = installed_bwrap() else { return };
    let mut pre = Prespawned::start(&bwrap).unwrap();
    if pre.affinity.is_none() {
        paddock_test_support::skip("one CPU here: bwrap is not moved, nor the runner kept", None);
        return;
    }
    // SAFETY: gettid has no arguments.
    let me = unsafe { libc::gettid() }.to_string();
    let all = cpus_of(&me);
    pre.keep_runner_off_bwraps_cpus();
    assert!(pre.runner_pinned);
    let kept = cpus_of(&me);
    assert!(!kept.contains([',', '-']), "one CPU: {kept} (of {all})");
    // A thread started meanwhile inherits it, and gets the whole set back too.
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // SAFETY: gettid has no arguments.
        tx.send(unsafe { libc::gettid() }.to_string()).unwrap();
        let _ = done_rx.recv();
    });
    let other = rx.recv().unwrap();
    assert_eq!(cpus_of(&other), kept);
    drop(pre);
    assert_eq!(cpus_of(&me), all, "this thread");
    assert_eq!(cpus_of(&other), all, "the thread started meanwhile");
    drop(done_tx);
    thread.join().unwrap();
}

#[test]
fn an_observed_prespawn_waits_in_a_namespace_of_its_own_where_the_mounts_are_made() {
    let Some(bwrap) = installed_bwrap() else { return };
    let mut pre = match Prespawned::start_observed(&bwrap) {
        Ok(pre) => pre,
        Err(e) => panic!("{e}"),
    };
    if !pre.started() {
        // The namespace could not be made here (no user namespaces for this user).
        paddock_test_support::skip("no private namespace for a prespawned bwrap", None);
        return;
    }
    assert!(pre.is_observed());
    let pid = pre.child.as_ref().unwrap().pid;
    let ns = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/mnt")).unwrap();
    assert_ne!(ns(&pid.to_string()), ns("self"), "bwrap waits in a mount namespace of its own");
    // bwrap has the record pipe's write end at its place.
    let (_, write) = pre.record.as_ref().unwrap();
    let ours = std::fs::read_link(format!("/proc/self/fd/{}", write.as_raw_fd())).unwrap();
    let its = std::fs::read_link(format!("/proc/{pid}/fd/{RECORD_FD}")).unwrap();
    assert_eq!(ours, its);
    // A path mounted onto itself there is read-only there, and nothing changes here.
    let dir = std::env::temp_dir().join(format!("paddock-prespawn-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mounts = crate::private_ns::SelfMounts::new(
        &[],
        &[paddock_policy::SelfMount {
            path: AbsPathBuf::new_lexical(&dir).unwrap(),
            read_only: true,
            source: None,
        }],
    )
    .unwrap();
    pre.mount_in_namespace(None, &mounts).unwrap();
    let listed = |who: &str| {
        std::fs::read_to_string(format!("/proc/{who}/mountinfo"))
            .unwrap()
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(dir.to_str().unwrap()))
    };
    assert!(listed(&pid.to_string()), "mounted in bwrap's namespace");
    assert!(!listed("self"), "not in ours");
    drop(pre);
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn an_observed_prespawn_holds_the_notifiers_copy_and_takes_a_plan_without_libc() {
    use crate::runtime::exec::{SpawnShape, Waiting};
    let Some(bwrap) = installed_bwrap() else { return };
    // A stand-in for `paddock-supervisor`, of a name of its own: its copy goes to this
    // user's runtime base, beside the real one's.
    let dir =
        std::env::temp_dir().join(format!("paddock-prespawn-notifier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("paddock-test-notifier");
    std::fs::write(&source, format!("{}", std::process::id())).unwrap();
    // And for `paddock-supervisor-nolibc`, which bwrap copies into the sandbox.
    let nolibc_file = dir.join("paddock-supervisor-nolibc");
    std::fs::write(&nolibc_file, b"").unwrap();
    let mut pre = Prespawned::start_for(
        &bwrap,
        true,
        Output::INHERIT,
        Some(&source),
        Some(&nolibc_file),
        false,
    )
    .unwrap();
    let copy = {
        let (_, fd) = pre.notifier.as_ref().expect("the copy was made and opened");
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
    };
    let cleanup = || {
        let _ = std::fs::remove_file(&copy);
        let _ = std::fs::remove_dir_all(&dir);
    };
    if !pre.started() {
        cleanup();
        paddock_test_support::skip("no private namespace for a prespawned bwrap", None);
        return;
    }
    let pid = pre.child.as_ref().unwrap().pid;
    // bwrap has the copy at its place, and a memfd for the notification filter.
    let its = std::fs::read_link(format!("/proc/{pid}/fd/{NOTIFIER_EXE_FD}")).unwrap();
    assert_eq!(its, copy);
    let bpf = std::fs::read_link(format!("/proc/{pid}/fd/{NOTIFY_BPF_FD}")).unwrap();
    assert!(bpf.to_string_lossy().contains("notify-bpf"), "{}", bpf.display());
    let exe = std::fs::read_link(format!("/proc/{pid}/fd/{}", crate::SUPERVISOR_EXE_FD)).unwrap();
    assert_eq!(exe, nolibc_file);
    // An observed plan started without libc fits it, handing the record pipe and the copy.
    let task = paddock_policy::Task { observe: true, ..crate::tests::task() };
    let plan = paddock_policy::Backend::plan(
        &crate::LinuxBwrap,
        &crate::tests::policy(),
        &task,
        &crate::tests::facts(),
    )
    .unwrap();
    // Not with another supervisor than the one it has open.
    let elsewhere = AbsPathBuf::new_lexical("/opt/paddock/paddock-supervisor-nolibc").unwrap();
    let other = crate::nolibc::with_notifier(&plan, &elsewhere).unwrap();
    let nolibc = AbsPathBuf::new_lexical(&nolibc_file).unwrap();
    let light = crate::nolibc::with_notifier(&plan, &nolibc).unwrap();
    let slot = PrespawnSlot::new(Some(pre));
    assert!(slot.notifier_for(&dir.join("another")).is_none());
    let given = slot.notifier_for(&source).expect("the waiting bwrap's copy");
    let given = std::fs::read_link(format!("/proc/self/fd/{}", given.as_raw_fd())).unwrap();
    assert_eq!(given, copy);
    assert!(slot.take_record_for(&other, Output::INHERIT).is_none());
    assert!(slot.take_record_for(&light, Output::INHERIT).is_some());
    let pre = slot.take().unwrap();
    let shape = |extra: Vec<i32>| SpawnShape {
        extra,
        inherits: Vec::new(),
        observer: true,
        self_mounts: false,
    };
    assert!(pre.fits(&light, Output::INHERIT, &shape(vec![RECORD_FD, NOTIFIER_EXE_FD])));
    assert!(pre.fits(&light, Output::INHERIT, &shape(vec![RECORD_FD])));
    assert!(!pre.fits(&light, Output::INHERIT, &shape(vec![RECORD_FD, 12])));
    drop(pre);
    cleanup();
}

#[test]
fn a_plan_keeps_the_network_namespace_its_bwrap_waits_in_unless_it_is_on_the_hosts() {
    let args = |words: &[&str]| words.iter().flat_map(|w| [w.as_bytes(), b"\0"].concat()).collect();
    let private: Vec<u8> = args(&["--unshare-all", "--as-pid-1", "--ro-bind", "/", "/"]);
    let kept = with_network_kept(&private).expect("a private network is kept");
    assert_eq!(kept, args(&["--unshare-all", "--share-net", "--as-pid-1", "--ro-bind", "/", "/"]));
    let host: Vec<u8> = args(&["--unshare-all", "--share-net", "--as-pid-1"]);
    assert_eq!(with_network_kept(&host), None, "the host's network");
    let other: Vec<u8> = args(&["--as-pid-1", "--unshare-all"]);
    assert_eq!(with_network_kept(&other), None, "not in the order a plan has");
    // A path that merely ends like the option is not it.
    let path: Vec<u8> = args(&["--unshare-all", "--ro-bind", "/x--share-net", "/y"]);
    assert!(with_network_kept(&path).is_some());
}

/// The plan of the unit tests' task under `policy`, for the `bwrap` installed here.
fn plan_with(bwrap: &AbsPathBuf, policy: paddock_policy::ResolvedPolicy) -> SpawnPlan {
    let facts =
        paddock_policy::HostFacts { bwrap: Some(bwrap.as_path().into()), ..crate::tests::facts() };
    paddock_policy::Backend::plan(&crate::LinuxBwrap, &policy, &crate::tests::task(), &facts)
        .unwrap()
}

/// Whether the loopback device of the network namespace at `ns` is up, looked at from a
/// thread of its own that joins it (a network namespace is a thread's).
fn loopback_up_in(ns: std::path::PathBuf) -> bool {
    std::thread::spawn(move || {
        let ns = File::open(ns).unwrap();
        // SAFETY: setns on a descriptor we own, for this thread only.
        assert_eq!(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        // SAFETY: socket with integer arguments; the result is checked.
        let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(sock >= 0);
        // SAFETY: an all-zero ifreq is valid; ioctl gets a pointer to it, then the socket is
        // closed.
        let flags = unsafe {
            let mut req: libc::ifreq = std::mem::zeroed();
            req.ifr_name[0] = b'l' as libc::c_char;
            req.ifr_name[1] = b'o' as libc::c_char;
            let ok = libc::ioctl(sock, libc::SIOCGIFFLAGS as _, &mut req) == 0;
            libc::close(sock);
            assert!(ok, "SIOCGIFFLAGS: {}", std::io::Error::last_os_error());
            req.ifr_ifru.ifru_flags
        };
        flags & libc::IFF_UP as libc::c_short != 0
    })
    .join()
    .unwrap()
}

#[test]
fn a_bwrap_waiting_in_a_network_of_its_own_has_loopback_up_and_fits_only_plans_off_the_host() {
    let Some(bwrap) = installed_bwrap() else { return };
    if !crate::private_ns::PrivateNamespace::for_this_process().is_root() {
        paddock_test_support::skip("not root: a plain bwrap waits on the runner's network", None);
        return;
    }
    let mut pre = Prespawned::start_for(&bwrap, false, Output::INHERIT, None, None, true).unwrap();
    assert!(pre.started());
    assert!(pre.private_network);
    let pid = pre.child.as_ref().unwrap().pid;
    let ns = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/net")).unwrap();
    assert_ne!(ns(&pid.to_string()), ns("self"), "bwrap waits in a network namespace of its own");
    assert!(loopback_up_in(format!("/proc/{pid}/ns/net").into()), "its loopback is up");
    let shape = crate::runtime::exec::SpawnShape {
        extra: Vec::new(),
        inherits: Vec::new(),
        observer: false,
        self_mounts: false,
    };
    let plan_for = |network| {
        plan_with(&bwrap, paddock_policy::ResolvedPolicy { network, ..crate::tests::policy() })
    };
    use crate::runtime::exec::Waiting;
    use paddock_policy::NetworkPolicy;
    let off = plan_for(NetworkPolicy::Off);
    assert!(pre.fits(&off, Output::INHERIT, &shape), "a plan of its own network fits");
    let on = plan_for(NetworkPolicy::On);
    assert!(!pre.fits(&on, Output::INHERIT, &shape), "the host's network does not");
    drop(pre);
    // SAFETY: kill with signal 0 only checks for the process.
    assert_ne!(unsafe { libc::kill(pid, 0) }, 0, "killed and reaped");
    // Not asked for, bwrap waits on the runner's network.
    let mut plain = Prespawned::start(&bwrap).unwrap();
    assert!(plain.started());
    let pid = plain.child.as_ref().unwrap().pid;
    assert_eq!(ns(&pid.to_string()), ns("self"));
    assert!(plain.fits(&on, Output::INHERIT, &shape));
}

#[test]
fn a_failure_after_bwrap_has_its_arguments_kills_it_and_hands_the_supervisor_nothing() {
    let Some(bwrap) = installed_bwrap() else { return };
    let mut pre = Prespawned::start(&bwrap).unwrap();
    assert!(pre.started());
    let pid = pre.child.as_ref().unwrap().pid;
    let plan = plan_with(&bwrap, crate::tests::policy());
    let mut asked = false;
    let mut fail = || -> Result<()> {
        asked = true;
        // bwrap has its arguments: its payload pipe is still empty and open (unless bwrap,
        // set up for paths this machine lacks, has failed and exited already).
        if let Ok(its) = std::fs::read_link(format!("/proc/{pid}/fd/{SUPERVISOR_FD}")) {
            assert!(its.to_string_lossy().starts_with("pipe:"), "{}", its.display());
        }
        Err(crate::Error::run("a placeholder could not be made"))
    };
    let pre: Box<dyn crate::runtime::exec::Waiting> = Box::new(pre);
    let mounts = crate::private_ns::SelfMounts::default();
    let err = pre.complete(&plan, None, &mounts, &mut fail).unwrap_err();
    assert!(asked);
    assert!(err.to_string().contains("a placeholder could not be made"), "{err}");
    // SAFETY: kill with signal 0 only checks for the process.
    assert_ne!(unsafe { libc::kill(pid, 0) }, 0, "killed and reaped");
}

#[test]
fn the_caught_signals_are_read_from_the_status_line() {
    let status =
        b"Name:\tpaddock\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180004002\nCapInh:\t0\n";
    assert_eq!(sig_caught_in(status), Some(0x0000_0001_8000_4002));
    assert_eq!(sig_caught_in(b"Name:\tx\nSigCgt:\t00001\n"), None, "cut short");
    assert_eq!(sig_caught_in(b"Name:\tx\n"), None);
}

#[test]
fn the_caught_signals_read_are_those_with_handlers() {
    extern "C" fn handler(_: libc::c_int) {}
    // SAFETY: a handler that does nothing, for a signal nothing here sends.
    unsafe { libc::signal(libc::SIGURG, handler as *const () as libc::sighandler_t) };
    let mut expected = 0u64;
    for sig in 1..=64usize {
        // The kernel's view (the C library's `sigaction` hides its own signals), as the
        // child's fallback queries it.
        let mut old = [0u64; 4];
        // SAFETY: a query only, into a buffer of the kernel's sigaction size.
        let queried = unsafe {
            libc::syscall(libc::SYS_rt_sigaction, sig, std::ptr::null::<u64>(), old.as_mut_ptr(), 8)
        } == 0;
        if queried && old[0] != libc::SIG_DFL as u64 && old[0] != libc::SIG_IGN as u64 {
            expected |= 1 << (sig - 1);
        }
    }
    assert_ne!(expected & 1 << (libc::SIGURG - 1), 0);
    assert_eq!(caught_signals(), Some(expected));
}

#[test]
fn a_plan_that_wants_the_device_clones_fits_only_a_bwrap_that_holds_them() {
    let Some(bwrap) = installed_bwrap() else { return };
    let mut pre = Prespawned::start(&bwrap).unwrap();
    assert!(pre.started());
    assert_eq!(pre.devices, crate::devices::for_a_prespawn(), "cloned where a plan may want them");
    let pid = pre.child.as_ref().unwrap().pid;
    if pre.devices {
        // Each clone waits at its descriptor, the device it stands for.
        use std::os::unix::fs::MetadataExt;
        for (fd, (name, major, minor)) in (crate::DEVICES_FD..).zip(crate::devices::DEVICES) {
            let at = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")).unwrap();
            assert_eq!(at.rdev(), libc::makedev(major, minor), "{name:?}");
        }
    }
    let shape = crate::runtime::exec::SpawnShape {
        extra: Vec::new(),
        inherits: Vec::new(),
        observer: false,
        self_mounts: false,
    };
    use crate::runtime::exec::Waiting;
    let mut plan = plan_with(&bwrap, crate::tests::policy());
    plan.device_fds = None;
    assert!(pre.fits(&plan, Output::INHERIT, &shape), "the clones are left to the supervisor");
    plan.device_fds = Some(crate::DEVICES_FD);
    assert_eq!(pre.fits(&plan, Output::INHERIT, &shape), pre.devices);
    pre.devices = false;
    assert!(!pre.fits(&plan, Output::INHERIT, &shape), "no clones, no fit");
}
