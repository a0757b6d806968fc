//! The host conditions of the container matrix (`cargo xtask matrix`, xtask's
//! `container.rs`): each container run names its scenario in `PADDOCK_E2E_SCENARIO`, and
//! these tests assert what paddock must do there, from `paddock check` and from a real run.
//! Outside the matrix the scenario is `host`: the host the suite runs on must then have what
//! the rest of the suite presupposes.

use std::process::Output;

use serde_json::Value;

use crate::harness::{CANARY, Scratch, require_os_sandbox};

/// The run's scenario (`host` outside the matrix).
fn scenario() -> String {
    std::env::var("PADDOCK_E2E_SCENARIO").unwrap_or_else(|_| "host".to_owned())
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// `paddock check --json`: its exit status and its checks by name.
fn check(s: &Scratch) -> (Option<i32>, Vec<Value>) {
    let out = s.paddock().args(["check", "--json"]).output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("paddock check --json printed no JSON ({e}): {}", shown(&out)));
    let checks = json["checks"].as_array().cloned().unwrap_or_default();
    (out.status.code(), checks)
}

fn shown(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The check named `name`: its status (lowercase), message and fix.
#[track_caller]
fn named<'a>(checks: &'a [Value], name: &str) -> (String, &'a str, &'a str) {
    let c = checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("paddock check has no {name} line: {checks:#?}"));
    (
        c["status"].as_str().unwrap_or("").to_ascii_lowercase(),
        c["message"].as_str().unwrap_or(""),
        c["fix"].as_str().unwrap_or(""),
    )
}

#[test]
fn check_names_what_this_host_lacks_and_the_fix() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("scenario-check");
    let (code, checks) = check(&s);
    let scenario = scenario();
    let (bwrap, bwrap_msg, bwrap_fix) = named(&checks, "bwrap");
    let (userns, _, userns_fix) = named(&checks, "user-namespaces");
    let (sandbox, _, _) = named(&checks, "sandbox");
    let (strace, _, strace_fix) = named(&checks, "strace");
    let (_, itemize, _) = named(&checks, "itemize");
    match scenario.as_str() {
        "no-userns" => {
            assert!(
                userns_fix.contains("user.max_user_namespaces"),
                "the fix must name the sysctl that switches them off here: {checks:#?}"
            );
            if is_root() {
                assert_eq!(userns, "warn", "root works without a user namespace: {checks:#?}");
                assert_eq!(sandbox, "ok", "{checks:#?}");
            } else {
                assert_eq!(userns, "fail", "{checks:#?}");
                assert_ne!(code, Some(0), "check must fail without user namespaces");
            }
        }
        "no-fuse" => {
            assert!(itemize.contains("uses strace"), "auto must fall back to strace: {itemize}");
            assert!(
                itemize.contains("/dev/fuse")
                    || itemize.contains("FUSE")
                    || itemize.contains("fuse"),
                "{itemize}"
            );
        }
        "no-landlock" => {
            assert!(itemize.contains("uses strace"), "auto must fall back to strace: {itemize}");
            assert!(
                itemize.contains("around bubblewrap") && itemize.contains("Landlock"),
                "without Landlock strace cannot run inside the sandbox: {itemize}"
            );
        }
        "no-strace" => {
            assert_eq!(strace, "warn", "{checks:#?}");
            assert!(strace_fix.contains("install strace"), "{strace_fix}");
            assert!(itemize.contains("observes"), "auto must observe without strace: {itemize}");
        }
        "old-bwrap" => {
            assert_eq!(bwrap, "fail", "{checks:#?}");
            assert!(bwrap_msg.contains("bubblewrap 0."), "{bwrap_msg}");
            assert!(bwrap_fix.contains("0.8.0"), "{bwrap_fix}");
        }
        "base" | "root-no-caps" => {
            assert_eq!(code, Some(0), "{checks:#?}");
            assert_eq!(userns, "ok", "{checks:#?}");
            assert!(itemize.contains("observes"), "{itemize}");
        }
        // The host the rest of the suite runs on: a working sandbox.
        _ => {
            assert_eq!(bwrap, "ok", "{checks:#?}");
            assert_eq!(sandbox, "ok", "{checks:#?}");
        }
    }
}

/// Which itemizer a default (`auto`) run uses in this scenario, when the scenario fixes it.
fn auto_itemizer(scenario: &str) -> Option<&'static str> {
    match scenario {
        "no-fuse" | "no-landlock" => Some("strace"),
        "no-strace" | "base" | "root-no-caps" => Some("observe"),
        "no-userns" if is_root() => Some("observe"),
        _ => None,
    }
}

#[test]
fn a_run_keeps_its_walls_or_refuses_with_the_reason() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("scenario-run");
    let scenario = scenario();
    let report = s.root.join("report.json");
    let out = s
        .paddock()
        .env_remove("PADDOCK_ITEMIZE")
        .args(["run", "--itemize", "auto", "--report"])
        .arg(&report)
        .args(["--", "sh", "-c"])
        .arg(
            "echo ok > inside.txt; cat \"$HOME/.ssh/id_canary\"; echo x > /etc/paddock-scenario; \
             echo x > .git/hooks/pre-commit; exit 3",
        )
        .output()
        .unwrap();
    if scenario == "no-userns" && !is_root() {
        assert_eq!(out.status.code(), Some(125), "{}", shown(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("user namespace"), "the refusal must say why: {err}");
        assert!(!s.project.join("inside.txt").exists(), "nothing ran");
        return;
    }
    if scenario == "old-bwrap" && !is_root() {
        assert_eq!(out.status.code(), Some(125), "{}", shown(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("too old") && err.contains("0.8.0"),
            "the refusal must say why: {err}"
        );
        assert!(!s.project.join("inside.txt").exists(), "nothing ran");
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{}", shown(&out));
    assert!(s.project.join("inside.txt").exists(), "the project is writable: {}", shown(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(CANARY), "a secret was read: {}", shown(&out));
    assert!(!std::path::Path::new("/etc/paddock-scenario").exists(), "wrote outside the grants");
    assert!(
        std::fs::metadata(s.project.join(".git/hooks/pre-commit")).is_err(),
        "a protected name was written"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    if let Some(expected) = auto_itemizer(&scenario) {
        assert_eq!(report["itemized_by"], expected, "{report:#}");
        let denied_hook = report["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["path"].as_str().is_some_and(|p| p.ends_with(".git/hooks/pre-commit")));
        assert!(denied_hook, "the refused hook write must be reported: {report:#}");
    }
}
