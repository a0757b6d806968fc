//! What the user is told: the violation report and the nested-sandbox probe.

use std::time::Duration;

use paddock_macos_seatbelt::macos::LogMonitor;
use paddock_macos_seatbelt::{log_tag, probe_verdict};
use paddock_policy::ViolationKind;

use crate::util::*;

#[test]
fn the_monitor_reports_the_tasks_denials() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("monitor");
    let p = f.p0();
    let canary = f.home.join(".ssh/id_canary");
    let script = format!("cat {}", q(&canary));
    let monitor =
        LogMonitor::start(&log_tag(&f.task(&script)), Duration::from_secs(10)).expect("log stream");
    assert_denied(&f.run(&p, &script), "read the canary");
    let (violations, notes) = monitor.finish(Duration::from_secs(3));
    assert!(
        violations.iter().any(|v| v.kind == ViolationKind::Read
            && v.path.as_deref().is_some_and(|p| p.ends_with(".ssh/id_canary"))),
        "no read violation for the canary: {violations:?}\nnotes: {notes:?}"
    );
}

#[test]
fn a_sandbox_inside_the_sandbox_is_named_as_the_cause() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("nested");
    let out = f.run(&f.p0(), "/usr/bin/sandbox-exec -p '(version 1)(allow default)' /usr/bin/true");
    let err = probe_verdict(
        out.status.success(),
        &out.status.to_string(),
        &String::from_utf8_lossy(&out.stderr),
    )
    .expect_err("macOS cannot nest sandboxes");
    assert!(err.to_string().contains("already runs inside a macOS sandbox"), "{err}");
}

#[test]
fn the_executor_runs_a_plan_and_itemizes_its_denials() {
    use paddock_macos_seatbelt::run::{ITEMIZED_BY, RunOptions, Stdio, run_plan};
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("executor");
    let canary = f.home.join(".ssh/id_canary");
    let script = format!("cat {}; echo \"$TMPDIR\"", q(&canary));
    let task = f.task(&script);
    let mut opts = RunOptions::new().expect("control");
    opts.stdio = Stdio::PIPED;
    opts.monitor_grace = Duration::from_secs(3);
    let ran = run_plan(&f.plan(&f.p0(), &script), &task, &opts).expect("run");
    assert_ne!(ran.outcome.exit_code, 0, "the canary was read");
    let stdout = String::from_utf8_lossy(&ran.outcome.stdout).into_owned();
    assert!(!stdout.contains("CANARY"), "{stdout}");
    assert!(!f.runtime.join("tmp").exists(), "the TMPDIR is removed");
    assert_eq!(ran.itemized_by, Some(ITEMIZED_BY), "notes: {:?}", opts.notes.lines());
    assert!(
        ran.violations.iter().any(|v| v.kind == ViolationKind::Read
            && v.path.as_deref().is_some_and(|p| p.ends_with(".ssh/id_canary"))),
        "no read violation for the canary: {:?}\nnotes: {:?}",
        ran.violations,
        opts.notes.lines()
    );
}
