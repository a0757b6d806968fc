//! `paddock check` on macOS, against stand-ins: each failure is named with its fix, and a
//! later check is not tried when an earlier one makes it meaningless.

use super::*;
use paddock_macos_seatbelt::run::check::{
    CheckOptions, SandboxedTrue, TRIVIAL_PROFILE, check_rest, check_sandbox,
};
use paddock_policy::{CheckReport, Status};

fn opts(s: &Stage) -> CheckOptions {
    CheckOptions {
        sandbox_exec: s.sandbox_exec.clone(),
        log: s.log.clone(),
        true_program: PathBuf::from("/bin/true"),
        nested: Some(false),
        log_ready: Duration::from_secs(5),
    }
}

fn statuses(r: &CheckReport) -> Vec<(&'static str, Status)> {
    r.checks.iter().map(|c| (c.name, c.status)).collect()
}

#[test]
fn a_working_host_passes_every_check_and_applies_the_trivial_profile() {
    let s = Stage::new("check-ok");
    s.log_streaming(&s.sh("true"));
    let o = opts(&s);
    let mut r = check_sandbox(&o);
    assert!(r.ok(), "{r:?}");
    check_rest(&mut r, &o, &SandboxedTrue::Exited(0));
    assert_eq!(
        statuses(&r),
        [
            ("sandbox-exec", Status::Ok),
            ("nested", Status::Ok),
            ("sandbox-apply", Status::Ok),
            ("sandboxed-true", Status::Ok),
            ("log", Status::Ok),
        ]
    );
    assert_eq!(s.recorded_argv(), ["-p", TRIVIAL_PROFILE, "--", "/bin/true"]);
}

#[test]
fn a_missing_sandbox_exec_fails_first_with_its_fix() {
    let s = Stage::new("check-missing");
    let mut o = opts(&s);
    o.sandbox_exec = s.root.join("absent");
    let r = check_sandbox(&o);
    assert_eq!(statuses(&r), [("sandbox-exec", Status::Fail)]);
    assert!(r.checks[0].fix.as_deref().unwrap().contains("/usr/bin"), "{r:?}");
}

#[test]
fn running_inside_a_sandbox_is_named_as_the_cause() {
    let s = Stage::new("check-nested");
    let mut o = opts(&s);
    o.nested = Some(true);
    let r = check_sandbox(&o);
    assert_eq!(statuses(&r), [("sandbox-exec", Status::Ok), ("nested", Status::Fail)]);
    assert!(r.checks[1].message.contains("already runs inside a macOS sandbox"), "{r:?}");
    assert!(r.checks[1].fix.as_deref().unwrap().contains("not sandboxed"));
    // The nested refusal sandbox-exec itself prints is read the same way.
    o.nested = Some(false);
    script(
        &s.sandbox_exec,
        "#!/bin/sh\necho 'sandbox-exec: sandbox_apply: Operation not permitted' >&2\nexit 71\n",
    );
    let r = check_sandbox(&o);
    assert_eq!(r.checks[2].name, "sandbox-apply");
    assert_eq!(r.checks[2].status, Status::Fail);
    assert!(r.checks[2].message.contains("already runs inside a macOS sandbox"), "{r:?}");
}

#[test]
fn a_failed_sandboxed_true_fails_and_an_unreadable_log_only_warns() {
    let s = Stage::new("check-log");
    // `log stream` as a non-admin user: it says so and exits.
    script(&s.log, "#!/bin/sh\necho \"log: Must be admin to run 'stream' command\" >&2\nexit 64\n");
    let o = opts(&s);
    let mut r = check_sandbox(&o);
    check_rest(&mut r, &o, &SandboxedTrue::Exited(134));
    let rest = &r.checks[3..];
    assert_eq!(rest[0].name, "sandboxed-true");
    assert_eq!(rest[0].status, Status::Fail);
    assert!(rest[0].message.contains("134"));
    assert_eq!(rest[1].name, "log");
    assert_eq!(rest[1].status, Status::Warn);
    assert!(rest[1].message.contains("itemized: false"), "{:?}", rest[1]);
    assert!(rest[1].fix.as_deref().unwrap().contains("admin"));
    assert!(!r.ok());
    // Only the log failing: the host can sandbox, unitemized.
    let mut r = check_sandbox(&o);
    check_rest(&mut r, &o, &SandboxedTrue::Exited(0));
    assert!(r.ok(), "{r:?}");
}
