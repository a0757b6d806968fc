//! strace run inside the sandbox (`--itemize auto` without the observers, forced here with
//! `PADDOCK_OBSERVERS=0`): it itemizes, it is out of the task's reach, and when it cannot
//! start there the run falls back to strace around bwrap without running the task twice.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// Whether strace can run inside the sandbox here; without it `auto` traces bwrap, and
/// these tests have nothing to test.
pub fn signal_scoping() -> bool {
    let scoped = landlock_scopes_signals();
    if !scoped {
        skip(
            "Landlock cannot scope signals here (ABI < 6); strace runs around bwrap",
            Some(Fact::LandlockUnavailable),
        );
    }
    scoped
}

fn inside_run(s: &Scratch) -> std::process::Command {
    let mut c = s.paddock();
    c.env("PADDOCK_OBSERVERS", "0").env("PADDOCK_ITEMIZE", "auto");
    c
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("a report")).unwrap()
}

fn write_paths(report: &Value) -> Vec<String> {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "write")
        .map(|v| v["path"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn strace_inside_the_sandbox_itemizes_and_is_out_of_the_tasks_reach() {
    if !require_strace() || !signal_scoping() {
        return;
    }
    let s = Scratch::new("inside-reach");
    let rep = s.root.join("report.json");
    // The task finds strace (the only process besides pid 1 and itself that is not its
    // own), then tries everything a same-user process could do to it, and makes a denial.
    let script = r#"
S=""
for p in /proc/[0-9]*; do
  [ "$(cat $p/comm 2>/dev/null)" = .paddock-strace ] && S=${p#/proc/}
done
echo "strace=$S"
kill -0 "$S" 2>/dev/null && echo "signal=sent" || echo "signal=refused"
kill -STOP "$S" 2>/dev/null && echo "stop=sent" || echo "stop=refused"
cat /proc/$S/environ >/dev/null 2>&1 && echo "environ=read" || echo "environ=refused"
dd if=/proc/$S/mem of=/dev/null bs=1 count=1 2>/dev/null && echo "mem=read" || echo "mem=refused"
opened=refused
for f in /proc/$S/fd/*; do (echo 1 > "$f") 2>/dev/null && opened=written; done
echo "fd=$opened"
echo x > .bashrc
exit 0
"#;
    // A strace the task could stop would hang the run: the timeout turns that into a
    // failure.
    let out = inside_run(&s)
        .args(["run", "--timeout", "20", "--report"])
        .arg(&rep)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let strace = stdout.lines().find_map(|l| l.strip_prefix("strace=")).unwrap_or("");
    assert!(!strace.is_empty(), "no strace in the sandbox: {out:?}");
    for line in ["signal=refused", "stop=refused", "environ=refused", "mem=refused", "fd=refused"] {
        assert!(stdout.lines().any(|l| l == line), "{line} not in {stdout}; {out:?}");
    }
    let report = report(&rep);
    assert_eq!(report["itemized_by"], "strace", "{report}");
    let bashrc = s.project.join(".bashrc");
    assert_eq!(write_paths(&report), [bashrc.to_string_lossy()], "{report}");
}

#[test]
fn the_shim_runs_the_task_with_its_exit_status_signals_and_path_lookup() {
    if !require_strace() || !signal_scoping() {
        return;
    }
    let s = Scratch::new("inside-status");
    let code = |args: &[&str]| inside_run(&s).arg("run").args(args).output().unwrap().status.code();
    assert_eq!(code(&["--", "sh", "-c", "exit 7"]), Some(7));
    assert_eq!(code(&["--", "sh", "-c", "kill -TERM $$"]), Some(128 + 15));
    assert_eq!(code(&["--", "paddock-no-such-program"]), Some(127));
    assert_eq!(code(&["--", "/etc/hostname"]), Some(126));
    // The task's descriptors are its stdio only: strace's log and the filter's memfd are
    // closed before it runs.
    let out = inside_run(&s)
        .args(["run", "--", "sh", "-c", "ls /proc/self/fd | tr '\\n' ' '"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 1 2 3 ", "{out:?}");
}

/// strace's libraries, found where its loader looks (Debian's multiarch directories).
fn strace_library() -> Option<PathBuf> {
    let name = "libunwind-ptrace.so.0";
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

#[test]
fn strace_that_cannot_start_inside_gives_way_to_strace_around_bwrap_once() {
    if !require_strace() || !signal_scoping() {
        return;
    }
    let Some(lib) = strace_library() else {
        skip("strace's libunwind-ptrace is not where this test looks", None);
        return;
    };
    // A policy that hides one of strace's libraries: strace cannot load inside the sandbox,
    // the task must not run there, and the run goes on with strace on the host.
    let s = Scratch::new("inside-fallback");
    std::fs::write(
        s.project.join("paddock.toml"),
        format!("[deny]\nread = [{:?}]\n", lib.to_string_lossy()),
    )
    .unwrap();
    let rep = s.root.join("report.json");
    let out = inside_run(&s)
        .args(["run", "--report"])
        .arg(&rep)
        .args(["--", "sh", "-c", "echo ran >> runs; echo x > .bashrc; exit 3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(stderr.contains("tracing bubblewrap instead"), "{stderr}");
    assert_eq!(std::fs::read_to_string(s.project.join("runs")).unwrap(), "ran\n", "ran twice");
    let report = report(&rep);
    assert_eq!(report["itemized_by"], "strace", "{report}");
    assert_eq!(write_paths(&report), [s.project.join(".bashrc").to_string_lossy()]);
}
