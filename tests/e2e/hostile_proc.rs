//! Hostile process, seccomp and terminal cases (security-cases groups PRC, SEC, TTY): host
//! processes out of reach, nested namespaces, no new privileges, the keyring, mount calls,
//! io_uring, 32-bit and x32 entry points, unknown syscall numbers, a filter that fails to
//! load, and TIOCSTI checked with a real terminal (G4).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

const ESRCH: i64 = 3;
const ENOSYS: i64 = 38;
const SIGSYS_EXIT: i32 = 128 + 31;

/// A host process the task must not reach: `sleep MARKER`, killed on drop.
struct HostProcess(Child);

impl HostProcess {
    fn start(marker: &str) -> HostProcess {
        HostProcess(Command::new("sleep").arg(marker).spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn host_processes_cannot_be_killed_prc01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc01h");
    let mut host = HostProcess::start("601");
    let hp = host.pid().to_string();
    let (o, _) = s.probe(&[], &[&format!("kill:{hp}")]);
    assert_denied(&o, "kill", &hp, &[ESRCH]);
    let out = s
        .paddock()
        .args(["run", "--", "sh", "-c", &format!("kill -9 -1; kill -9 {hp}; echo rc=$?")])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("rc=1"), "{out:?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(host.alive(), "the task killed a host process");
}

#[test]
fn host_processes_cannot_be_traced_or_opened_prc02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc02");
    let mut host = HostProcess::start("602");
    let hp = host.pid().to_string();
    let (o, out) = s.probe(
        &[],
        &[
            &format!("ptrace:{hp}"),
            &format!("pidfd:{hp}"),
            &format!("file:/proc/{hp}/environ"),
            // The supervisor (pid 1) is non-dumpable: no ptrace, no /proc/1/mem.
            "ptrace:1",
            "write:/proc/1/mem",
            "file:/proc/1/environ",
        ],
    );
    assert_denied(&o, "ptrace", &hp, &[ESRCH]);
    assert_denied(&o, "pidfd", &hp, &[ESRCH]);
    assert_denied(&o, "file", &format!("/proc/{hp}/environ"), &[ENOENT]);
    assert_denied(&o, "ptrace", "1", &[EPERM]);
    assert_denied(&o, "write", "/proc/1/mem", &[EACCES, EPERM]);
    assert_denied(&o, "file", "/proc/1/environ", &[EACCES, EPERM]);
    assert!(host.alive());
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
}

#[test]
fn nested_namespaces_are_refused_prc05() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc05");
    let ns = ["user", "mnt", "net", "pid", "ipc", "uts", "cgroup"];
    let mut ops: Vec<String> = ns.iter().map(|n| format!("unshare:{n}")).collect();
    ops.extend(ns.iter().map(|n| format!("clone-ns:{n}")));
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, _) = s.probe(&[], &ops);
    for n in ns {
        assert_denied(&o, "unshare", n, &[EPERM]);
        assert_denied(&o, "clone-ns", n, &[EPERM]);
    }
    // The real tool, too: no nested user namespace, alone or with a mount namespace. Each
    // command's status is checked (not only the last one's), and the task itself ran.
    // No `-r`: mapping root also needs CAP_SETFCAP, which the task lacks, so `unshare -Ur`
    // fails even where namespaces are let through. `-Um` asks for two namespaces in one
    // flag word, which the probe's calls (one flag each) never do; its propagation is left
    // as it is (making / private is a mount call, refused on its own).
    let script = "unshare -U true; echo user=$?; \
                  unshare -Um --propagation unchanged true; echo user-mount=$?; echo done";
    let out = s.paddock().args(["run", "--", "sh", "-c", script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_each_failed(&out, &["user", "user-mount"]);
}

/// Asserts the task printed `NAME=STATUS` for each of `names` with a status other than 0,
/// and reached its final `done`.
#[track_caller]
pub fn assert_each_failed(out: &std::process::Output, names: &[&str]) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l == "done"), "the task did not finish: {out:?}");
    for name in names {
        let status = text.lines().find_map(|l| l.strip_prefix(&format!("{name}=")));
        let status = status.unwrap_or_else(|| panic!("no status for {name}: {out:?}"));
        assert_ne!(status, "0", "{name} succeeded in the sandbox: {out:?}");
    }
}

#[test]
fn no_new_privileges_and_no_capabilities_prc06() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc06");
    let (o, _) = s.probe(
        &[],
        &["file:/proc/self/status", "file:/proc/self/mountinfo", "file:/proc/1/status"],
    );
    let status = assert_allowed(&o, "file", "/proc/self/status");
    let field = |status: &str, name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    assert_eq!(field(&status, "NoNewPrivs:"), "1");
    assert_eq!(field(&status, "Seccomp:"), "2", "the task runs without its filter");
    // The supervisor (pid 1) too: where it makes the protected paths' mounts itself, bwrap
    // leaves it two capabilities, which it drops before the task starts.
    let supervisor = assert_allowed(&o, "file", "/proc/1/status");
    for (who, status) in [("the task", &status), ("the supervisor", &supervisor)] {
        for set in ["CapEff:", "CapPrm:", "CapBnd:", "CapAmb:", "CapInh:"] {
            assert_eq!(field(status, set), "0000000000000000", "{who}'s {set} in {status}");
        }
    }
    let mounts = assert_allowed(&o, "file", "/proc/self/mountinfo");
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (target, opts) = (fields[4], fields[5]);
        if target == "/" || target.starts_with("/usr") || target.starts_with("/home") {
            assert!(opts.contains("nosuid"), "{target} is mounted without nosuid: {line}");
        }
    }
}

#[test]
fn the_session_keyring_is_out_of_reach_prc07() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc07");
    // The runner's session keyring holds a canary (`keyctl add user ... @s`).
    let (ty, desc) = (c"user", c"paddock_e2e_canary");
    // SAFETY: add_key with NUL-terminated strings and a payload buffer of the given length.
    let key = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            ty.as_ptr(),
            desc.as_ptr(),
            CANARY.as_ptr(),
            CANARY.len(),
            -3i64, // KEY_SPEC_SESSION_KEYRING
        )
    };
    if key < 0 {
        skip(
            format!(
                "the runner cannot add a session key here ({})",
                std::io::Error::last_os_error()
            ),
            None,
        );
        return;
    }
    if !require_tool("/usr/bin/keyctl", "reading the keyring from a shell (keyutils)") {
        // SAFETY: KEYCTL_INVALIDATE (21) of the key we added.
        unsafe { libc::syscall(libc::SYS_keyctl, 21, key) };
        return;
    }
    // The control: outside the sandbox, the same command prints the canary.
    let print = "keyctl print %user:paddock_e2e_canary";
    let host = std::process::Command::new("sh").args(["-c", print]).output().unwrap();
    let (o, out) = s.probe(
        &[],
        &["keyctl", "syscall:keyctl", "syscall:add_key", "syscall:request_key", "file:/proc/keys"],
    );
    assert_denied(&o, "keyctl", "", &[EPERM]);
    for call in ["keyctl", "add_key", "request_key"] {
        assert_denied(&o, "syscall", call, &[EPERM]);
    }
    let script = format!("keyctl show @s; echo show=$?; {print}; echo print=$?; echo done");
    let shell = s.paddock().args(["run", "--", "sh", "-c", &script]).output().unwrap();
    // SAFETY: KEYCTL_INVALIDATE (21) of the key we added.
    unsafe { libc::syscall(libc::SYS_keyctl, 21, key) };
    assert!(String::from_utf8_lossy(&host.stdout).contains(CANARY), "control: {host:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
    assert!(!String::from_utf8_lossy(&shell.stdout).contains(CANARY), "{shell:?}");
    assert_eq!(shell.status.code(), Some(0), "{shell:?}");
    assert_each_failed(&shell, &["show", "print"]);
}

#[test]
fn mount_calls_are_refused_and_root_is_read_only_prc08() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc08");
    let calls = ["mount", "umount2", "pivot_root", "chroot"];
    let mut ops: Vec<String> = calls.iter().map(|c| format!("syscall:{c}")).collect();
    ops.push("write:/paddock-pwn".to_owned());
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, _) = s.probe(&[], &ops);
    for c in calls {
        assert_denied(&o, "syscall", c, &[EPERM]);
    }
    assert_denied(&o, "write", "/paddock-pwn", &[EROFS, EACCES]);
    // Calls that work once the walls are gone (the filter's refusal, no capabilities, the
    // task's user namespace not owning its mount namespace): a fresh tmpfs over the task's
    // own /tmp, and the unmount of it. Detaching or rebinding `/` would fail on its locked
    // mounts even then, so they prove nothing about these walls.
    let script = "mount -t tmpfs paddock /tmp; echo mount=$?; umount -l /tmp; echo umount=$?; \
                  chroot / true; echo chroot=$?; echo done";
    let out = s.paddock().args(["run", "--", "sh", "-c", script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_each_failed(&out, &["umount", "mount", "chroot"]);
    assert!(!std::path::Path::new("/paddock-pwn").exists());
}

#[test]
fn io_uring_and_high_bit_arguments_are_refused_sec01_sec02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sec01");
    let (o, _) = s.probe(
        &[],
        &[
            "syscall:io_uring_setup",
            "syscall:io_uring_enter",
            "syscall:io_uring_register",
            "unix-hi",
            "tiocsti-hi",
        ],
    );
    for c in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
        assert_denied(&o, "syscall", c, &[EPERM]);
    }
    assert_denied(&o, "unix-hi", "", &[EPERM]);
    assert_denied(&o, "tiocsti-hi", "", &[EPERM]);
    // With unix sockets granted io_uring stays off: it would bypass any socket filtering.
    let (o, _) = s.probe(&["--allow-unix-sockets"], &["syscall:io_uring_setup"]);
    assert_denied(&o, "syscall", "io_uring_setup", &[EPERM]);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_and_x32_entry_points_are_refused_sec03_sec05() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sec03");
    for op in ["int80-socket", "int80-socketcall", "int80-getpid"] {
        let (o, out) = s.probe(&[], &[op]);
        let code = out.status.code();
        let refused = code == Some(SIGSYS_EXIT)
            || o.iter().any(|v| v["op"] == op && v["ok"] == false && v["errno"] == EPERM);
        assert!(refused, "{op} was not refused (killed by SIGSYS or EPERM): {out:?}");
        assert!(o.iter().all(|v| v["ok"] != true), "{op} got a result: {out:?}");
    }
    // x32: the filter's prelude answers EPERM (the kernel alone would say ENOSYS when x32 is
    // compiled out, and run the call when it is in).
    let (o, _) = s.probe(&[], &["x32-socket", "x32-getpid"]);
    assert_denied(&o, "x32-socket", "", &[EPERM]);
    assert_denied(&o, "x32-getpid", "", &[EPERM]);
}

#[test]
fn new_and_unknown_syscalls_are_refused_sec06() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sec06");
    let denied = [
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "userfaultfd",
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "request_key",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "setns",
        "unshare",
    ];
    let mut ops: Vec<String> = denied.iter().map(|c| format!("syscall:{c}")).collect();
    ops.push("syscall:clone3".to_owned());
    let unknown = ["467", "468", "469", "500", "1000", "1073741823"];
    ops.extend(unknown.iter().map(|n| format!("nr:{n}")));
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, _) = s.probe(&[], &ops);
    for c in denied {
        assert_denied(&o, "syscall", c, &[EPERM]);
    }
    // clone3 answers ENOSYS so that libc falls back to clone, whose flags are filtered.
    assert_denied(&o, "syscall", "clone3", &[ENOSYS]);
    for n in unknown {
        assert_denied(&o, "nr", n, &[ENOSYS]);
    }
}

/// A classic BPF program: on x86_64, `seccomp(2)` and `prctl(PR_SET_SECCOMP, ...)` fail with
/// EPERM; everything else is allowed.
#[cfg(target_arch = "x86_64")]
fn no_seccomp_filter() -> Vec<libc::sock_filter> {
    const LD_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const RET: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM_RET: u32 = 0x0005_0001;
    let prog: [(u16, u8, u8, u32); 10] = [
        (LD_ABS, 0, 0, 4),        // 0: arch
        (JEQ, 1, 0, 0xc000_003e), // 1: x86_64 -> 3
        (RET, 0, 0, ALLOW),       // 2
        (LD_ABS, 0, 0, 0),        // 3: nr
        (JEQ, 4, 0, 317),         // 4: seccomp -> 9
        (JEQ, 0, 2, 157),         // 5: prctl -> 6, else 8
        (LD_ABS, 0, 0, 16),       // 6: args[0] (low half)
        (JEQ, 1, 0, 22),          // 7: PR_SET_SECCOMP -> 9
        (RET, 0, 0, ALLOW),       // 8
        (RET, 0, 0, EPERM_RET),   // 9
    ];
    prog.iter().map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k }).collect()
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_filter_that_cannot_load_fails_closed_sec08() {
    if !require_os_sandbox() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let s = Scratch::new("sec08");
    let marker = s.project.join("RAN");
    // paddock starts under a parent filter that refuses to stack another one, as in a
    // container whose seccomp profile blocks seccomp(2).
    let mut filter = no_seccomp_filter();
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
    let prog_addr = &prog as *const libc::sock_fprog as usize;
    let mut cmd = s.paddock();
    cmd.args(["run", "--", "touch"]).arg(&marker);
    // SAFETY: between fork and exec the child only calls prctl, which is async-signal-safe;
    // `prog` and `filter` outlive the spawn, which copies the child's memory.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    prog_addr as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    drop(filter);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!marker.exists(), "the task ran without its filter: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("seccomp") && err.contains("not run"), "no explanation: {err}");
}

/// Runs `command` (a shell line) inside `script`, a real terminal, followed by a read of
/// whatever was queued on it (G4). Returns everything the terminal showed.
pub(crate) fn in_terminal(s: &Scratch, command: &str) -> String {
    let line = format!("{command}; read -t1 L && echo LEAK:$L");
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep stdin open (an EOF would end `read` early) until the command is done.
    let stdin = child.stdin.take();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "script did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stdin);
    let mut text = String::new();
    child.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    text
}

pub(crate) fn quote(p: &std::path::Path) -> String {
    format!("'{}'", p.display())
}

#[test]
fn tiocsti_cannot_inject_into_the_callers_terminal_tty01_tty03() {
    if !require_os_sandbox() {
        return;
    }
    if !require_tool("/usr/bin/script", "a terminal for the task (util-linux)") {
        return;
    }
    let s = Scratch::new("tty01");
    let probe = quote(&probe_bin());
    // Control: outside the sandbox the same injection reaches the terminal, when the kernel
    // allows TIOCSTI at all (legacy_tiocsti=1, or CAP_SYS_ADMIN).
    let control = in_terminal(&s, &format!("{probe} 'tiocsti-str:echo CONTROL\\n'"));
    let harness_sees = control.contains("LEAK:echo CONTROL");
    if !harness_sees {
        eprintln!(
            "NOTE: TIOCSTI is refused by this kernel for this user; G4 is a weaker check here"
        );
    }
    let pwn = s.root.join("TIOCSTI_PWN");
    let text = in_terminal(
        &s,
        &format!(
            "{} run -- {probe} 'tiocsti-str:touch {}\\n' tiocsti-hi tiocsti",
            quote(&paddock_bin()),
            pwn.display()
        ),
    );
    let obs: Vec<Value> =
        text.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect();
    assert_denied(&obs, "tiocsti-str", &format!("touch {}\\n", pwn.display()), &[EPERM]);
    assert_denied(&obs, "tiocsti-hi", "", &[EPERM]);
    assert_denied(&obs, "tiocsti", "", &[EPERM]);
    assert!(!text.contains("LEAK:"), "the task injected input into the caller's terminal: {text}");
    assert!(!pwn.exists());
}
