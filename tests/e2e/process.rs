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

fn code(s: &Scratch, args: &[&str]) -> Option<i32> {
    s.paddock().arg("run").args(args).output().unwrap().status.code()
}

#[test]
fn exit_statuses() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("exit");
    assert_eq!(code(&s, &["--", "sh", "-c", "exit 3"]), Some(3));
    assert_eq!(code(&s, &["--", "true"]), Some(0));
    assert_eq!(code(&s, &["--", "sh", "-c", "kill -TERM $$"]), Some(128 + 15));
    assert_eq!(code(&s, &["--", "paddock-no-such-program"]), Some(127));
    assert_eq!(code(&s, &["--", "/etc/hostname"]), Some(126));
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

fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline"))
            && String::from_utf8_lossy(&cmd).contains(marker)
        {
            out.push(pid);
        }
    }
    out
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
    let out = s.paddock().args(["run", "--", "sh", "-c", &script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        processes_with(&format!("sleep\0{marker}")).is_empty(),
        "a task process outlived paddock"
    );
}

#[test]
fn kill_9_of_paddock_takes_the_sandbox_with_it() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("kill9");
    let marker = format!("{}", 700_000 + std::process::id() % 1000);
    let mut child = s.paddock().args(["run", "--", "sleep", &marker]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(&format!("sleep\0{marker}")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!processes_with(&format!("sleep\0{marker}")).is_empty(), "the task never started");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        processes_with(&format!("sleep\0{marker}")).is_empty(),
        "the task outlived a kill -9 of paddock"
    );
}

#[test]
fn host_processes_are_invisible_prc01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("prc01");
    let me = std::process::id();
    let out = s
        .paddock()
        .args(["run", "--", "sh", "-c", &format!("kill -9 {me}; echo rc=$?")])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("rc=1") || !out.status.success());
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
    let out = s.paddock().args(["run", "--itemize", "off", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("allow.write"), "{stderr}");
    for stray in ["bwrap", "supervisor", "pid 1"] {
        assert!(!stderr.contains(stray), "{stray}: {stderr}");
    }
    // A plan that needs more than the waiting bwrap has (a port grant's channel) is
    // spawned as usual; the task runs once.
    std::fs::remove_file(s.project.join("paddock.toml")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = s
        .paddock()
        .args(["run", "--itemize", "off", "--allow-local-port", &port.to_string()])
        .args(["--", "sh", "-c", "echo ran >> runs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("bwrap"), "{out:?}");
}
