//! When the tracer itself fails or cannot follow the task: the task still runs, and the
//! output says why its denials are not itemized.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;
use crate::violations::require_strace;

/// The note `paddock run` prints before running the task once more untraced.
const RERUN_NOTE: &str = "paddock: strace failed before the task started (its message is above); running the task once more without itemizing denials";

fn strace_bin() -> PathBuf {
    ["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("require_strace found it")
}

/// Runs `cmd` to its end, or kills it after `limit` and fails the test: a hang is the bug.
fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: our own child, which has not been reaped (its waiter is still waiting).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("the run did not end within {limit:?}");
        }
    }
}

/// What the script around paddock prints once paddock has exited, then its status.
const EXITED: &str = "paddock exited: ";

/// Runs `cmd` (bwrap around a script around paddock) until the script says paddock has
/// exited, then kills it (its namespace, with whatever was left in it, dies with it, as
/// bwrap runs with `--die-with-parent`). Fails the test when paddock has not exited within
/// `limit`: a hang is the bug. The output is what came until then, with paddock's exit
/// status as the status.
fn until_paddock_exits(mut cmd: Command, limit: Duration) -> Output {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(bool, String)>();
    for (is_err, pipe) in [
        (false, Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>),
        (true, Box::new(child.stderr.take().unwrap())),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send((is_err, line));
            }
        });
    }
    drop(tx);
    let deadline = Instant::now() + limit;
    let (mut stdout, mut stderr, mut code) = (String::new(), String::new(), None);
    while code.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, line)) if line.starts_with(EXITED) => {
                code = line[EXITED.len()..].trim().parse::<i32>().ok().or(Some(-1));
            }
            Ok((true, line)) => stderr.push_str(&(line + "\n")),
            Ok((false, line)) => stdout.push_str(&(line + "\n")),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("paddock did not exit within {limit:?}: {stderr}");
            }
        }
    }
    use std::os::unix::process::ExitStatusExt;
    let status = match code {
        Some(code) => {
            let _ = child.kill();
            let _ = child.wait();
            std::process::ExitStatus::from_raw(code.clamp(0, 255) << 8)
        }
        // Everything ended without the script's line: bwrap's own status.
        None => child.wait().unwrap(),
    };
    Output { status, stdout: stdout.into_bytes(), stderr: stderr.into_bytes() }
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("a report")).unwrap()
}

/// A task that counts its runs in `runs` and exits 3.
const COUNTING_TASK: &str = "echo ran >> runs; exit 3";

#[test]
fn strace_refused_by_an_outer_tracer_runs_the_task_once_more_untraced() {
    if !require_strace() {
        return;
    }
    // paddock itself under `strace -f` (someone debugging it): the outer tracer follows into
    // paddock's strace and its child, so the inner strace cannot trace (a process has one
    // tracer) and exits before bwrap ever runs.
    let s = Scratch::new("tf-refused");
    let rep = s.root.join("report.json");
    let mut outer = Command::new(strace_bin());
    outer
        .args(["-f", "-qq", "-o", "/dev/null", "--"])
        .arg(paddock_bin())
        .args(["run", "--itemize", "strace"])
        .arg("--report")
        .arg(&rep)
        .args(["--", "sh", "-c", COUNTING_TASK])
        .current_dir(&s.project)
        .env_clear()
        .env("HOME", &s.home)
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    let out = output_within(outer, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the task's own status: {stderr}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n", "{stderr}");
    // strace's own message comes first, then the note.
    let note = stderr.find(RERUN_NOTE).unwrap_or_else(|| panic!("no note in {stderr}"));
    assert!(stderr[..note].contains("strace: "), "{stderr}");
    let r = report(&rep);
    assert_eq!(r["itemized"], false, "{r}");
    assert_eq!(r["exit_code"], 3, "{r}");
}

#[test]
fn a_task_whose_last_stderr_line_is_a_strace_failure_is_not_run_again() {
    if !require_strace() {
        return;
    }
    let s = Scratch::new("tf-forged");
    let rep = s.root.join("report.json");
    let task = "echo ran >> runs; \
        echo 'strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted' >&2; exit 3";
    let mut cmd = s.paddock();
    cmd.args(["run", "--itemize", "strace"])
        .arg("--report")
        .arg(&rep)
        .args(["--", "sh", "-c", task]);
    let out = output_within(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The task's line reaches the caller (strace may add warnings of its own around it:
    // "ptrace_syscall_info.op" under load in a container without CAP_SYS_ADMIN).
    assert!(
        stderr.contains("strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted"),
        "{stderr}"
    );
    assert!(!stderr.contains("once more"), "{stderr}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n");
    let r = report(&rep);
    assert_eq!((&r["itemized"], &r["itemized_by"]), (&true.into(), &"strace".into()), "{r}");
}

/// Whether nested user and pid namespaces work here (`bwrap --unshare-user --unshare-pid`).
fn nested_namespaces() -> bool {
    Command::new("bwrap")
        .args(["--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A pid above every host pid, for a nested namespace's pid counter.
fn past_host_pids() -> u64 {
    let read = |p: &str| std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse().ok());
    let pid_max: u64 = read("/proc/sys/kernel/pid_max").unwrap_or(4_194_304);
    if pid_max < 3_000_000 {
        // The host can never have this pid; a nested namespace's own limit is higher.
        return pid_max + 10;
    }
    let highest = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(1);
    (highest + 200_000).min(pid_max - 1000)
}

/// Inside `bwrap --unshare-pid --dev-bind / /`, /proc is still the host's: bwrap 0.8 then
/// reads `/proc/CHILD/ns` of a pid that means something else there, and fails when no such
/// host pid exists, after its child was made and before that child armed
/// `--die-with-parent`. The child waits for its dead parent forever; `strace -f` waited
/// for the child, and paddock for strace. The run must end, saying why.
///
/// Where the outer namespace's pid counter can be moved past every host pid
/// (`ns_last_pid`: root), bwrap fails every time. Elsewhere it depends on the pids (and as
/// a user, paddock refuses helpers whose owner reads as nobody in the nested namespace):
/// whatever happens, the run must end, and a bwrap failure must come with the note.
#[test]
fn a_pid_namespace_showing_the_hosts_proc_does_not_hang_a_traced_run() {
    if !require_strace() {
        return;
    }
    if !nested_namespaces() {
        skip(
            "nested user and pid namespaces are not available here",
            Some(Fact::UsernsUnavailable),
        );
        return;
    }
    // paddock's own exit is what must come: bwrap's stuck children (of the run, or of the
    // probe's helpers where its answer is not cached, as with bubblewrap 0.4) live until
    // this namespace ends, which the test then ends.
    let script = format!(
        "if echo {} > /proc/sys/kernel/ns_last_pid 2>/dev/null; then echo moved >&2; fi; \
         \"$0\" \"$@\"; echo \"{EXITED}$?\" >&2",
        past_host_pids()
    );
    // strace attached to the supervisor (the default) never starts: bwrap fails first. strace
    // running bwrap is the case the watch exists for.
    for attach in ["1", "0"] {
        hostproc_run(&script, attach);
    }
}

fn hostproc_run(script: &str, attach: &str) {
    let s = Scratch::new(&format!("tf-hostproc-{attach}"));
    let rep = s.root.join("report.json");
    let mut cmd = Command::new("bwrap");
    cmd.args(["--unshare-user", "--unshare-pid", "--die-with-parent", "--dev-bind", "/", "/"])
        .arg("--")
        .args(["sh", "-c", script])
        .arg(paddock_bin())
        .args(["run", "--itemize", "strace"])
        .arg("--report")
        .arg(&rep)
        .args(["--", "sh", "-c", COUNTING_TASK])
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .env_remove("PADDOCK_LOG")
        .env("PADDOCK_STRACE_ATTACH", attach)
        .stdin(Stdio::null());
    let start = Instant::now();
    let out = until_paddock_exits(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("ended in {:?}: {stderr}", start.elapsed());
    let moved = stderr.starts_with("moved\n");
    if moved && stderr.contains("cannot mount a fresh /proc") {
        // Where the probe's answer is not cached (root without a user namespace, as with
        // bubblewrap 0.4), it runs here, its helpers fail the same way, and the run is
        // refused before bwrap or strace start, saying why.
        assert_eq!(out.status.code(), Some(125), "{stderr}");
        assert!(stderr.contains("weaker-when-nested"), "{stderr}");
        assert!(!s.project.join("runs").exists(), "{stderr}");
    } else if moved || stderr.contains("ns failed") {
        assert!(stderr.contains("ns failed"), "bwrap's own message: {stderr}");
        let note = if attach == "1" {
            "paddock: the sandbox could not be set up"
        } else {
            "paddock: bubblewrap failed and left a process behind that strace kept waiting \
             for; strace was stopped"
        };
        assert!(stderr.contains(note), "{stderr}");
        assert_eq!(out.status.code(), Some(125), "{stderr}");
        // The task never ran, and the report says the run was not itemized.
        assert!(!s.project.join("runs").exists(), "{stderr}");
        assert_eq!(report(&rep)["itemized"], false);
    } else {
        // bwrap found a host process of its child's pid (or paddock refused the helpers):
        // the task ran with its own status, or paddock said why it could not.
        eprintln!("NOTE: the pid counter could not be moved; bwrap did not fail this time");
        assert!(matches!(out.status.code(), Some(3 | 125)), "{stderr}");
    }
}
