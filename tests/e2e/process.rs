//! Processes: exit statuses, signals, timeouts, and nothing left behind (PRC-01, PRC-04, G2).

use std::time::{Duration, Instant};

use crate::harness::*;

/// The value of `key` (`SigIgn`, `Cpus_allowed_list`) in a `/proc/PID/status` text.
fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).map(str::trim)
}

/// `paddock run` in `s` with `--itemize MODE`, or the suite's mechanism for `None`: a fork
/// for the observers, a bwrap started before the plan for `off` (and the suite's strace).
fn run_itemized(s: &Scratch, itemize: Option<&str>) -> std::process::Command {
    let mut cmd = s.paddock();
    cmd.arg("run");
    if let Some(mode) = itemize {
        cmd.args(["--itemize", mode]);
    }
    cmd
}

/// The suite's mechanism, and untraced runs (`--itemize off`), which `paddock-supervisor-nolibc`
/// supervises when it is installed: every process test runs both.
const MODES: [Option<&str>; 2] = [None, Some("off")];

#[test]
fn exit_statuses() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("exit");
    for itemize in MODES {
        let code = |args: &[&str]| {
            let out = run_itemized(&s, itemize).args(args).output().unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        assert_eq!(code(&["--", "sh", "-c", "exit 3"]).0, Some(3), "{itemize:?}");
        assert_eq!(code(&["--", "true"]).0, Some(0), "{itemize:?}");
        assert_eq!(code(&["--", "sh", "-c", "kill -TERM $$"]).0, Some(128 + 15), "{itemize:?}");
        let (status, stderr) = code(&["--", "paddock-no-such-program"]);
        assert_eq!(status, Some(127), "{itemize:?}");
        assert!(stderr.contains("paddock-no-such-program: command not found"), "{stderr}");
        let (status, stderr) = code(&["--", "/etc/hostname"]);
        assert_eq!(status, Some(126), "{itemize:?}");
        assert!(stderr.contains("/etc/hostname: permission denied"), "{stderr}");
        // The working directory comes from the payload: the project, by `-C` too.
        let out = run_itemized(&s, itemize).args(["--", "pwd"]).output().unwrap();
        let cwd = s.project.canonicalize().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), cwd.to_str().unwrap());
    }
}

/// What the sandbox's supervisor is in a run of `mode`, from the task: where
/// `/dev/.paddock-supervisor` is bound from (the root of the bind, within its file system:
/// `paddock-supervisor`), or, where bwrap copied it there (`paddock-supervisor-nolibc`),
/// `copy:` and its checksum and size (see [`copy_of`]).
fn supervisor_source(s: &Scratch, mode: Option<&str>) -> String {
    let script = "cat /proc/self/mountinfo; cksum < /dev/.paddock-supervisor";
    let out = run_itemized(s, mode).args(["--", "sh", "-c", script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.split(' ').nth(4) == Some("/dev/.paddock-supervisor"));
    match line {
        Some(line) => line.split(' ').nth(3).unwrap_or_default().to_owned(),
        None => format!("copy:{}", text.lines().last().unwrap_or_default().trim()),
    }
}

/// [`supervisor_source`] of a copy of `file`.
fn copy_of(file: &std::path::Path) -> String {
    let out = std::process::Command::new("cksum")
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap();
    format!("copy:{}", String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn untraced_runs_are_supervised_without_libc_when_it_is_installed() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("nolibc");
    let beside = paddock_bin().with_file_name("paddock-supervisor-nolibc");
    let untraced = supervisor_source(&s, Some("off"));
    // strace inside the sandbox runs `paddock-supervisor`'s shim.
    if itemizer() == "strace" {
        let traced = supervisor_source(&s, None);
        assert!(!traced.starts_with("copy:"), "bound, not the light one's copy: {traced}");
    }
    if !beside.exists() {
        // The unprivileged runs stage `paddock` alone.
        assert!(!untraced.starts_with("copy:"), "{untraced}");
        skip(
            format!(
                "paddock-supervisor-nolibc is not next to {} (cargo build -p paddock); untraced runs use paddock-supervisor",
                paddock_bin().display()
            ),
            Some(Fact::Unprivileged),
        );
        return;
    }
    assert_eq!(untraced, copy_of(&beside), "a copy of paddock-supervisor-nolibc");
    // Its walls: no_new_privs and the filter on the task, only 0-2 open, a non-dumpable
    // pid 1, the task in a process group of its own.
    let script = "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; ls /proc/self/fd | tr '\\n' ' '; echo; \
        cat /proc/1/environ >/dev/null 2>&1 && echo environ=read || echo environ=refused; \
        cut -d' ' -f1,5 /proc/$$/stat";
    let out = run_itemized(&s, Some("off")).args(["--", "sh", "-c", script]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("NoNewPrivs:\t1") && text.contains("Seccomp:\t2"), "{text}");
    assert!(text.contains("\n0 1 2 3 \n"), "only ls's own descriptor above 2: {text}");
    assert!(text.contains("environ=refused"), "{text}");
    let ids: Vec<&str> = text.lines().last().unwrap_or_default().split_whitespace().collect();
    assert!(ids.len() == 2 && ids[0] == ids[1] && ids[0] != "1", "own process group: {text}");
    // A polite signal to paddock reaches the task (128 + N = its own death by it; a kill of
    // the sandbox would be 137). SIGINT, unless this test was started with it ignored
    // (`nohup ... &`): paddock, like the task, then keeps ignoring it.
    let sig = polite_signal_not_ignored();
    let marker = format!("{}", 800_000 + std::process::id() % 1000);
    let mut child = run_itemized(&s, Some("off")).args(["--", "sleep", &marker]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(&format!("sleep\0{marker}")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
    let status = wait_within(&mut child, Duration::from_secs(60));
    assert_eq!(status.and_then(|s| s.code()), Some(128 + sig), "signal {sig}");
}

/// A task that opens `/proc/1/mem` and `/proc/1/environ` without a pause while pid 1 hands
/// the listener over to the server (which it does after a millisecond of the task's
/// running): pid 1 has no filter, so its memory would be the task's way out of its own. In
/// the shell's own process (a redirection is one `open`, no fork, no notified call), so the
/// loop runs from the shell's first milliseconds. It says what pid 1 was before and after,
/// and how many opens worked.
const RACE_PID1: &str = r#"read -r first </proc/1/cmdline
i=0; o=0
while [ $i -lt 4000 ]; do
  if true 3</proc/1/mem; then o=$((o+1)); fi
  if true 3</proc/1/environ; then o=$((o+1)); fi
  i=$((i+1))
done
read -r last </proc/1/cmdline
echo "first $first"
echo "last $last"
echo "opened $o"
"#;

#[test]
fn an_observed_task_is_started_without_libc_and_never_reaches_the_server_it_gets_later() {
    if !require_os_sandbox() || !require_tool("/bin/sh", "a task that races its pid 1") {
        return;
    }
    let fuse = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse");
    if fuse.is_err() {
        skip("the observers need /dev/fuse read-write", Some(Fact::FuseHidden));
        return;
    }
    let s = Scratch::new("observed-nolibc");
    let beside = ["paddock-supervisor-nolibc", "paddock-supervisor"]
        .map(|name| paddock_bin().with_file_name(name));
    if !beside.iter().all(|b| b.exists()) {
        skip(
            format!(
                "paddock-supervisor and paddock-supervisor-nolibc are not both next to {}; observed runs use paddock-supervisor",
                paddock_bin().display()
            ),
            Some(Fact::Unprivileged),
        );
        return;
    }
    let nolibc = paddock_bin().with_file_name("paddock-supervisor-nolibc");
    assert_eq!(supervisor_source(&s, Some("observe")), copy_of(&nolibc));
    // A run counts when the loop started before the hand-over: most do.
    let mut raced = 0;
    for _ in 0..10 {
        let out = run_itemized(&s, Some("observe"))
            .args(["--", "/bin/sh", "-c", RACE_PID1])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        // Not once, before the server's `main` either: the copy it executes cannot be read.
        assert!(text.contains("opened 0\n"), "{text}");
        // Served by `paddock-supervisor` in the same process once the task has run a while.
        assert!(text.contains("last ") && text.contains("__serve-notify"), "{text}");
        if text.lines().any(|l| l.starts_with("first ") && l.contains("__supervise")) {
            raced += 1;
        }
    }
    assert!(raced > 0, "the loop never started before the hand-over");
    // Its notifications are served: a denied write is reported.
    let out = run_itemized(&s, Some("observe"))
        .args(["--", "sh", "-c", "touch /tmp/x; echo > .bashrc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("denied 1 write to .bashrc"), "{stderr}");
}

/// A child killed when the test ends early: a failed assertion must not leave a paddock
/// waiting behind it (holding the test's output open).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGINT, or SIGTERM when this process inherited SIGINT ignored (a job started with
/// `nohup ... &`): a signal paddock, started from here, catches and relays.
fn polite_signal_not_ignored() -> i32 {
    paddock_test_support::polite_signal_not_ignored().0
}

/// The child's exit status once it has exited, polled until `limit` (then killed: `None`).
fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hang_up_ignored_when_paddock_starts_stays_ignored_for_it_and_the_task() {
    // `nohup paddock run -- ...`: SIGHUP is ignored when paddock starts. paddock must not
    // catch it (a caught hang-up is relayed, then the sandbox killed after the grace, at once
    // on a second one), and the task inherits it ignored.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("nohup");
    let hup = 1u64 << (libc::SIGHUP - 1);
    let script = "grep SigIgn /proc/self/status > ign; : > ready; \
                  while [ ! -e go ]; do sleep 0.02; done; echo survived";
    for itemize in [None, Some("off"), Some("observe")] {
        for f in ["ign", "ready", "go"] {
            let _ = std::fs::remove_file(s.project.join(f));
        }
        let mut cmd = run_itemized(&s, itemize);
        // SAFETY: signal(2) between fork and exec, async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                Ok(())
            });
        }
        cmd.args(["--", "sh", "-c", script]).stdout(std::process::Stdio::piped());
        let mut child = KillOnDrop(cmd.spawn().unwrap());
        let child = &mut child.0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !s.project.join("ready").exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(s.project.join("ready").exists(), "the task never started ({itemize:?})");
        // paddock is running the task now: it ignores the hang-up and catches none.
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let mask = |key| u64::from_str_radix(status_field(&status, key).unwrap(), 16).unwrap();
        assert_eq!(mask("SigCgt") & hup, 0, "paddock catches SIGHUP ({itemize:?})");
        assert_ne!(mask("SigIgn") & hup, 0, "paddock does not ignore SIGHUP ({itemize:?})");
        // Two hang-ups: a caught second one would kill the sandbox at once.
        for _ in 0..2 {
            // SAFETY: kill on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
        }
        std::fs::write(s.project.join("go"), "").unwrap();
        let status = wait_within(child, Duration::from_secs(60));
        let mut stdout = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{itemize:?}: {stdout}");
        assert!(stdout.contains("survived"), "{itemize:?}: {stdout}");
        let ign = std::fs::read_to_string(s.project.join("ign")).unwrap();
        let task = u64::from_str_radix(status_field(&ign, "SigIgn").unwrap(), 16).unwrap();
        assert_ne!(task & hup, 0, "the task does not ignore SIGHUP ({itemize:?}): {ign}");
    }
}

#[test]
fn the_task_starts_with_the_default_signal_dispositions() {
    // paddock and its supervisor are Rust programs, which ignore SIGPIPE; an ignored signal
    // survives execve, and a task that inherited it would see `yes | head -1` end with
    // "Broken pipe" errors instead of a quiet SIGPIPE, as outside the sandbox.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sigpipe");
    let mask_of = |status: &str| {
        status_field(status, "SigIgn").and_then(|mask| u64::from_str_radix(mask, 16).ok())
    };
    // What paddock inherits from this test (which ignores SIGPIPE itself, reset for its
    // children) is what the task must get: nothing more. paddock is started with glibc's
    // internal signals 32 and 33 at their default (std's own posix_spawn child may get them
    // ignored): the task must have them at their default too.
    let glibc_internal: u64 = (1 << 31) | (1 << 32);
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let inherited = mask_of(&own).unwrap() & !(1 << (libc::SIGPIPE - 1)) & !glibc_internal;
    let script = "grep SigIgn /proc/self/status; yes | head -n 1 >/dev/null";
    // Spawned with a fork (the observers), and with posix_spawn (`--itemize off`).
    for itemize in [None, Some("off")] {
        let mut cmd = run_itemized(&s, itemize);
        // SAFETY: rt_sigaction with SIG_DFL on two signal numbers, async-signal-safe (the
        // kernel's struct sigaction: handler, flags, restorer, mask).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                let dfl = [0u64; 4];
                for sig in [32, 33] {
                    libc::syscall(libc::SYS_rt_sigaction, sig, dfl.as_ptr(), 0usize, 8);
                }
                Ok(())
            });
        }
        let out = cmd.args(["--", "sh", "-c", script]).output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let ignored = mask_of(&stdout).unwrap_or_else(|| panic!("no SigIgn line: {out:?}"));
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE is ignored in the task");
        assert_eq!(ignored, inherited, "the task ignores signals ({itemize:?}): {ignored:#x}");
        assert!(!stderr.contains("Broken pipe"), "{stderr}");
    }
}

/// A task that leaves behind a process writing a protected name, as fast as it can: nothing
/// of the task writes once its run is over. The supervisor kills and reaps every process
/// of the sandbox before it tells the runner the task is done, and only then are the
/// placeholders removed, while the kernel tears the namespaces down (with a process still
/// running, the removed placeholder's bind would be gone and the name writable).
#[test]
fn a_writer_the_task_leaves_behind_never_writes_after_the_run() {
    if !require_os_sandbox() || !require_tool("/bin/sh", "a task that leaves a writer behind") {
        return;
    }
    let s = Scratch::new("left-writer");
    let left = s.project.join(".bashrc");
    for mode in MODES {
        for _ in 0..5 {
            let out = run_itemized(&s, mode)
                .args([
                    "--",
                    "/bin/sh",
                    "-c",
                    "(while :; do echo > .bashrc; done) 2>/dev/null & sleep 0.05",
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{mode:?}: {out:?}");
            assert!(!left.exists(), "{mode:?}: written once the run was over");
            std::thread::sleep(Duration::from_millis(20));
            assert!(!left.exists(), "{mode:?}: written after the run");
        }
    }
}

#[test]
fn timeout_exits_124_and_kills_the_task() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("timeout");
    let started = Instant::now();
    let out = s.paddock().args(["run", "--timeout", "1", "--", "sleep", "30"]).output().unwrap();
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(20), "the timeout did not stop the task");
    assert!(String::from_utf8_lossy(&out.stderr).contains("timeout"));
}

#[test]
fn report_file_has_the_contract_keys() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("report");
    let report = s.root.join("report.json");
    let out = s
        .paddock()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    for key in ["exit_code", "signal", "timed_out", "duration_ms", "itemized", "violations"] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["exit_code"], 4);
    assert_eq!(v["timed_out"], false);
}

/// The processes whose command line starts with `argv` (NUL-separated): the task, not
/// the paddock whose own command line ends with it.
fn processes_with(argv: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && cmd.starts_with(argv.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// Whether no process's command line starts with `argv` any more, polled until `limit`:
/// the kernel tears a pid namespace down asynchronously, so "gone" is awaited, not slept for.
fn gone_within(argv: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if processes_with(argv).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn daemons_do_not_survive_the_task_prc04() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc04");
    let marker = format!("{}", 600_000 + std::process::id() % 1000);
    let script = format!(
        "setsid sleep {marker} >/dev/null 2>&1 & (trap '' HUP TERM; exec sleep {marker}) & exit 0"
    );
    for itemize in MODES {
        let out = run_itemized(&s, itemize).args(["--", "sh", "-c", &script]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            gone_within(&format!("sleep\0{marker}"), Duration::from_secs(10)),
            "a task process outlived paddock ({itemize:?})"
        );
    }
}

#[test]
fn kill_9_of_paddock_takes_the_sandbox_with_it() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("kill9");
    let marker = format!("{}", 700_000 + std::process::id() % 1000);
    for itemize in MODES {
        let mut child = run_itemized(&s, itemize)
            .args(["--", "sleep", &marker])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while processes_with(&format!("sleep\0{marker}")).is_empty()
            && Instant::now() < deadline
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        if processes_with(&format!("sleep\0{marker}")).is_empty() {
            let _ = child.kill();
            panic!("never started ({itemize:?}): {:?}", child.wait_with_output().unwrap());
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            gone_within(&format!("sleep\0{marker}"), Duration::from_secs(10)),
            "the task outlived a kill -9 of paddock ({itemize:?})"
        );
    }
}

#[test]
fn host_processes_are_invisible_prc01() {
    // The task runs (exit 0), does not see a host process in its /proc, and cannot signal
    // it. (It passed on any failure of paddock before: a sandbox that did not start
    // "protected" the host too.)
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc01");
    let mut victim = std::process::Command::new("sleep").arg("120").spawn().unwrap();
    let pid = victim.id();
    let script = format!(
        "if [ -e /proc/{pid} ]; then echo visible; else echo absent; fi; kill -9 {pid}; echo rc=$?"
    );
    let out = s.paddock().args(["run", "--", "sh", "-c", &script]).output().unwrap();
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("absent"), "the host pid {pid} is in the task's /proc: {stdout}");
    assert!(stdout.contains("rc=1"), "kill -9 of a host pid did not fail: {stdout}");
    assert!(alive, "the task killed a host process");
}

#[test]
fn the_task_gets_the_cpus_of_its_runner() {
    // bwrap may be started before the plan exists and run beside the runner; whatever the
    // runner does about CPUs, the task's affinity is the one paddock was started with.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("cpus");
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let own = status_field(&status, "Cpus_allowed_list").unwrap();
    for itemize in [None, Some("off")] {
        let out = run_itemized(&s, itemize).args(["--", "cat", "/proc/self/status"]).output();
        let out = out.unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(status_field(&text, "Cpus_allowed_list"), Some(own), "{itemize:?}");
    }
}

#[test]
fn a_bwrap_started_before_the_plan_is_gone_when_the_plan_fails_or_does_not_fit() {
    // With `--itemize off` bwrap starts first and waits for its arguments. A bad config
    // then ends the run with paddock's own error alone: the waiting bwrap is killed before
    // it reads anything (a bwrap left waiting would run its command unsandboxed once its
    // argument pipe closed: the supervisor's refusal would show on stderr).
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prespawn");
    std::fs::write(s.project.join("paddock.toml"), "[allow]\nwrite = 3\n").unwrap();
    // Not itemized, and the suite's mechanism (the observers wait with a bwrap of their
    // own, in a namespace of its own).
    for itemize in MODES {
        let out = run_itemized(&s, itemize).args(["--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{itemize:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("allow.write"), "{stderr}");
        for stray in ["bwrap", "supervisor", "pid 1"] {
            assert!(!speaks_of(&stderr, stray), "{itemize:?}, {stray}: {stderr}");
        }
    }
    // No mode given: the bwrap is started for the observers, where the host has them, and
    // the config then says otherwise: it is killed, and the task runs once, as the config
    // says.
    std::fs::write(s.project.join("paddock.toml"), "[report]\nitemize = \"off\"\n").unwrap();
    let report = s.home.join("prespawn-report.json");
    let out = s
        .paddock()
        .env_remove("PADDOCK_ITEMIZE")
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--", "sh", "-c", "echo ran >> runs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(r["itemized_by"].is_null(), "not itemized, as the config says: {r}");
    assert!(!speaks_of(&String::from_utf8_lossy(&out.stderr), "bwrap"), "{out:?}");
    std::fs::remove_file(s.project.join("runs")).unwrap();
    // A plan that needs more than the waiting bwrap has (a port grant's channel) is
    // spawned as usual; the task runs once.
    std::fs::remove_file(s.project.join("paddock.toml")).unwrap();
    let port = paddock_test_support::free_port();
    let out = s
        .paddock()
        .args(["run", "--itemize", "off", "--allow-local-port", &port.to_string()])
        .args(["--", "sh", "-c", "echo ran >> runs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n");
    assert!(!speaks_of(&String::from_utf8_lossy(&out.stderr), "bwrap"), "{out:?}");
}

/// Whether a line of paddock's `stderr` mentions `word`, but for the note root without user
/// namespaces gets on every run (it names bwrap).
fn speaks_of(stderr: &str, word: &str) -> bool {
    stderr
        .lines()
        .filter(|l| !l.starts_with("paddock: no user namespace: "))
        .any(|l| l.contains(word))
}

#[test]
fn a_closed_standard_descriptor_is_dev_null_for_paddock_and_the_task() {
    // paddock starts without std's runtime set-up, so it opens `/dev/null` on a closed
    // descriptor 0 to 2 itself: nothing it opens later (a lock file, a payload) takes that
    // number, which the sandbox would then inherit as the task's stdin.
    if !require_os_sandbox() {
        return;
    }
    use std::os::unix::process::CommandExt;
    let s = Scratch::new("closed-stdin");
    for itemize in MODES {
        let mut cmd = run_itemized(&s, itemize);
        cmd.args(["--", "readlink", "/proc/self/fd/0"]);
        // SAFETY: close(2) between fork and exec, async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::close(0);
                Ok(())
            })
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{itemize:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "/dev/null", "{itemize:?}");
    }
}

#[test]
fn dash_c_makes_the_project_the_tasks_working_directory() {
    // `paddock run -C ~/proj -- make`, as with `git -C` and `make -C`: started from
    // elsewhere, the task works in the project (where it may write), not in the caller's
    // directory.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("dash-c");
    let out = s
        .paddock()
        .current_dir(&s.home)
        .arg("run")
        .arg("-C")
        .arg(&s.project)
        .args(["--", "sh", "-c", "pwd; echo made > made-here"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), s.project.to_str().unwrap());
    assert_eq!(std::fs::read_to_string(s.project.join("made-here")).unwrap(), "made\n");
    assert!(!s.home.join("made-here").exists());
    // A relative -C is taken from the caller's directory.
    let out =
        s.paddock().current_dir(&s.home).args(["run", "-C", "proj", "--", "pwd"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), s.project.to_str().unwrap());
}
