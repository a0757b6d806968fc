//! The known-gaps table: hostile cases of `security-cases.md` the design cannot contain yet.
//! Each row's test asserts today's behaviour and prints the gap on every run (`gap("ID")`),
//! so the fix turns it red and the row is removed. The table checks itself: a row without a
//! test calling `gap` with its id, or a call naming no row, fails
//! `every_gap_has_its_test_and_every_test_its_row`. Gaps asserted elsewhere in the suite
//! (NET-11, UNX-01b) call `crate::known_gaps::gap` from their own tests.

use crate::harness::*;

/// (case id, reason).
pub const GAPS: &[(&str, &str)] = &[
    (
        "FSR-08",
        "a deny glob covers only files that exist when the task starts (bind-at-start design)",
    ),
    (
        "FSR-09",
        "/sys is the host's (read-only): /sys/class/net lists the host's interfaces and MACs",
    ),
    (
        "FSW-13",
        "/dev is a private writable tmpfs: a task can create plain files named like devices \
         there (no host device is reached, nothing reaches the host)",
    ),
    (
        "PRC-09b",
        "without the observers, `auto` runs strace inside the sandbox (--seccomp-bpf needs to \
         start the task): the task sees a TracerPid; it cannot stop, kill, trace or read strace \
         (Landlock scopes it out), and reports still come from strace's pipe alone",
    ),
    (
        "UNX-04",
        "a unix socket granted by path is enforced by the supervisor (seccomp notifications, \
         pidfd_getfd, /proc), not by mounts and a network namespace: where that cannot work \
         (no fresh /proc, strace inside the sandbox, Linux before 5.6) the grant is refused \
         with exit 125, never widened",
    ),
    (
        "TTY-04",
        "TIOCLINUX needs a virtual console to test end to end; only the filter's refusal is \
         asserted (stdin is /dev/null, so the EPERM can only come from seccomp)",
    ),
    ("TTY-05", "no task pseudo-terminal: `allow.pty = true` is refused with exit 125"),
    (
        "NET-11",
        "the bridge socket is not the only unix socket the task sees: host sockets under \
         readable paths are listed (not connectable: socket(AF_UNIX) is refused)",
    ),
    (
        "UNX-01b",
        "under strace --seccomp-bpf (auto without the observers), socket(AF_UNIX) refused by the \
         filter is enforced but not itemized: the kernel ranks SECCOMP_RET_ERRNO above \
         SECCOMP_RET_TRACE",
    ),
    (
        "UNX-03c",
        "--network on shares the host network namespace, so with unix sockets allowed a task \
         reaches the host's abstract unix sockets (X11, dbus, containerd)",
    ),
];

/// Prints the row of `id` and returns it. Written to the stderr handle directly, not with
/// `eprintln!`, so that the test harness does not capture it: a gap shows on every run.
pub(crate) fn gap(id: &str) -> &'static str {
    use std::io::Write;
    let (_, reason) = GAPS.iter().find(|(g, _)| *g == id).unwrap();
    let _ = writeln!(std::io::stderr(), "KNOWN GAP {id}: {reason}");
    reason
}

#[test]
fn fsr08_deny_glob_misses_files_created_later() {
    if !require_os_sandbox() {
        return;
    }
    gap("FSR-08");
    let s = Scratch::new("fsr08");
    std::fs::write(s.project.join("early.pem"), "early").unwrap();
    let late = s.project.join("late.pem");
    let out = s
        .paddock()
        .args(["run", "--deny-read", "*.pem", "--", "sh", "-c"])
        .arg(format!("echo late > {0}; cat {0}; cat early.pem", late.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Today: the late file is readable (the gap); the early one is hidden.
    assert!(text.contains("late"), "gap closed? update the table: {out:?}");
    assert!(!text.contains("early"), "the early match must stay hidden: {out:?}");
}

#[test]
fn fsr09_sys_shows_the_hosts_network_interfaces() {
    if !require_os_sandbox() {
        return;
    }
    gap("FSR-09");
    let s = Scratch::new("fsr09");
    let mut host: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    host.sort();
    let (o, _) = s.probe(&[], &["ls:/sys/class/net", "ls:/proc"]);
    // Today: the host's list (the gap). A masked /sys would show none or only `lo`.
    assert_eq!(assert_allowed(&o, "ls", "/sys/class/net"), host.join(","), "gap closed?");
    // What must hold meanwhile: ps shows only the sandbox.
    let pids = assert_allowed(&o, "ls", "/proc");
    assert!(pids.split(',').filter(|n| n.parse::<u32>().is_ok()).count() <= 4, "{pids}");
}

#[test]
fn fsw13_dev_is_a_writable_private_tmpfs() {
    if !require_os_sandbox() {
        return;
    }
    gap("FSW-13");
    use std::os::unix::fs::FileTypeExt;
    let s = Scratch::new("fsw13gap");
    let host_kmsg = std::fs::metadata("/dev/kmsg").ok().map(|m| m.file_type().is_char_device());
    let (o, _) = s.probe(&[], &["write:/dev/kmsg", "write:/dev/paddock-gap"]);
    // Today: a plain file appears in the task's own /dev (the gap); a read-only /dev fixes it.
    assert_allowed(&o, "write", "/dev/kmsg");
    assert_allowed(&o, "write", "/dev/paddock-gap");
    // What must hold meanwhile: nothing reaches the host's /dev.
    assert!(!std::path::Path::new("/dev/paddock-gap").exists());
    let after = std::fs::metadata("/dev/kmsg").ok().map(|m| m.file_type().is_char_device());
    assert_eq!(host_kmsg, after);
}

#[test]
fn unx04_path_grants_are_refused_without_a_fresh_proc() {
    if !require_os_sandbox() || !require_masking_proc() {
        return;
    }
    gap("UNX-04");
    let s = Scratch::new("unx04gap");
    std::fs::write(s.project.join("paddock.toml"), "weaker-when-nested = true\n").unwrap();
    let sock = s.project.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let sock = sock.to_str().unwrap();
    // Today: refused, naming the fix. Enforcing it here (by mounts) turns this red.
    let out = without_fresh_proc(&s, &["run", "--allow-unix-socket", sock, "--", "echo", "ran"]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("fresh /proc"), "{out:?}");
    // The same grant with a fresh /proc runs.
    let out = s
        .paddock()
        .args(["run", "--allow-unix-socket", sock, "--", "echo", "ran"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn tty04_tioclinux_is_refused_by_the_filter() {
    if !require_os_sandbox() {
        return;
    }
    gap("TTY-04");
    let s = Scratch::new("tty04");
    let (o, _) = s.probe(&[], &["tioclinux", "file:/dev/tty0", "file:/dev/console"]);
    assert_denied(&o, "tioclinux", "", &[EPERM]);
    // Today: no virtual console in the sandbox to test TIOCLINUX against (the gap); giving
    // the task one, to test end to end, turns this red.
    assert_denied(&o, "file", "/dev/tty0", &[ENOENT]);
    assert_denied(&o, "file", "/dev/console", &[ENOENT]);
}

/// The suite's sources, where tests call [`gap`].
const SOURCES: &[(&str, &str)] = &[
    ("known_gaps.rs", include_str!("known_gaps.rs")),
    ("network.rs", include_str!("network.rs")),
    ("violations.rs", include_str!("violations.rs")),
];

/// The ids passed to `gap` inside `#[test]` functions of `text` (a test ends at the first
/// `}` in column 0).
fn gap_calls_in_tests(text: &str) -> Vec<&str> {
    let mut ids = Vec::new();
    for chunk in text.split("#[test]").skip(1) {
        let body = &chunk[..chunk.find("\n}\n").unwrap_or(chunk.len())];
        for call in body.split("gap(\"").skip(1) {
            ids.extend(call.split('"').next());
        }
    }
    ids
}

#[test]
fn every_gap_has_its_test_and_every_test_its_row() {
    let calls: Vec<(&str, &str)> = SOURCES
        .iter()
        .flat_map(|(file, text)| gap_calls_in_tests(text).into_iter().map(move |id| (*file, id)))
        .collect();
    for (id, _) in GAPS {
        assert!(
            calls.iter().any(|(_, called)| called == id),
            "the known gap {id} has no test: a row needs a test that calls gap({id:?})"
        );
    }
    for (file, id) in &calls {
        assert!(GAPS.iter().any(|(row, _)| row == id), "{file}: gap({id:?}) names no row");
    }
    // Every row once: one test asserts it.
    for (id, _) in GAPS {
        assert_eq!(GAPS.iter().filter(|(row, _)| row == id).count(), 1, "{id} twice");
    }
}

#[test]
fn tty05_a_task_pty_is_refused() {
    if !require_os_sandbox() {
        return;
    }
    gap("TTY-05");
    let s = Scratch::new("tty05");
    std::fs::write(s.project.join("paddock.toml"), "[allow]\npty = true\n").unwrap();
    let marker = s.project.join("RAN");
    let out = s.paddock().args(["run", "--", "touch"]).arg(&marker).output().unwrap();
    // Today: refused (the gap); supporting a pty turns this red.
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow.pty"), "{out:?}");
    assert!(!marker.exists());
}

#[cfg(target_os = "linux")]
#[test]
fn unx03c_network_on_reaches_host_abstract_sockets() {
    if !require_os_sandbox() {
        return;
    }
    gap("UNX-03c");
    let s = Scratch::new("unx03c");
    let name = format!("paddock-e2e-gap-{}", std::process::id());
    abstract_canary(&name);
    let (o, _) =
        s.probe(&["--network", "on", "--allow-unix-sockets"], &[&format!("abstract:{name}")]);
    // Today: reachable (the gap); a fix refuses this combination or filters abstract connects.
    assert_eq!(assert_allowed(&o, "abstract", &name), CANARY, "gap closed? update the table");
}

#[test]
fn prc09b_strace_inside_the_sandbox_is_visible_but_out_of_reach() {
    if !require_strace() || !crate::strace_inside::signal_scoping() {
        return;
    }
    gap("PRC-09b");
    let s = Scratch::new("prc09b");
    let out = s
        .paddock()
        .env("PADDOCK_OBSERVERS", "0")
        .args(["run", "--itemize", "auto", "--timeout", "20", "--", "sh", "-c"])
        .arg("grep TracerPid /proc/self/status; kill -9 -1; echo x > .bashrc; echo alive")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Today: the tracer is visible (the gap) ...
    assert!(!text.contains("TracerPid:\t0"), "gap closed? update the table: {out:?}");
    // ... and survives the task's attempt to kill everything, so the run is itemized.
    assert!(text.contains("alive"), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("denied 1 write to .bashrc"), "{stderr}");
}
