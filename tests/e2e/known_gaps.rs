//! The known-gaps table: hostile cases of `security-cases.md` the design cannot contain yet.
//! Each row's test asserts today's behaviour and prints the gap on every run, so the fix
//! turns it red and the row is removed.

use crate::harness::*;

/// (case id, reason).
pub const GAPS: &[(&str, &str)] = &[(
    "FSR-08",
    "a deny glob covers only files that exist when the task starts (bind-at-start design)",
)];

#[test]
fn fsr08_deny_glob_misses_files_created_later() {
    if !require_os_sandbox() {
        return;
    }
    eprintln!("KNOWN GAP {}: {}", GAPS[0].0, GAPS[0].1);
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
