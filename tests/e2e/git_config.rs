//! `allow.git-config = true`: `git config --local` works inside, the hooks stay read-only,
//! and every run warns that the task can configure programs git runs on the host.

use std::path::Path;
use std::process::Command;

use crate::harness::*;

/// The host's git, or `None` (skipping loudly; a failure when OS tests are required).
fn git() -> Option<&'static str> {
    let found = ["/usr/bin/git", "/usr/local/bin/git"].into_iter().find(|p| Path::new(p).exists());
    if found.is_none() {
        let required = std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1")
            || std::env::var_os("PADDOCK_REQUIRE_OS_TESTS").is_some();
        assert!(!required, "OS tests are required here, but git is not installed");
        eprintln!("SKIPPED: git is not installed (apt-get install git)");
    }
    found
}

/// Runs `sh -c SCRIPT` in the project under `paddock run`; returns stdout and stderr.
fn run(sc: &Scratch, script: &str) -> (String, String) {
    let out = sc.paddock().args(["run", "--", "sh", "-c", script]).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SCRIPT: &str = "git config --local x.y 1; echo config=$?; \
    echo 'echo pwned' > .git/hooks/pre-commit; echo hook=$?";

#[test]
fn git_config_true_lets_git_config_write_and_keeps_hooks_read_only() {
    if !require_os_sandbox() {
        return;
    }
    let Some(git) = git() else { return };
    let sc = Scratch::new("gitcfg");
    let init = Command::new(git).arg("init").arg("-q").arg(&sc.project).output().unwrap();
    assert!(init.status.success(), "{init:?}");
    let config = sc.project.join(".git/config");
    let hook = sc.project.join(".git/hooks/pre-commit");

    // The default: .git/config is protected, and nothing is said about it.
    let (stdout, stderr) = run(&sc, SCRIPT);
    assert!(!stdout.contains("config=0"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("hook=0"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("git-config"), "{stderr}");
    assert!(!std::fs::read_to_string(&config).unwrap().contains("[x]"));

    std::fs::write(sc.project.join("paddock.toml"), "[allow]\ngit-config = true\n").unwrap();
    for _ in 0..2 {
        let (stdout, stderr) = run(&sc, SCRIPT);
        assert!(stdout.contains("config=0"), "{stdout}\n{stderr}");
        assert!(!stdout.contains("hook=0"), "{stdout}\n{stderr}");
        // Every run, not once.
        assert!(
            stderr.contains("allow.git-config = true: warning:")
                && stderr.contains("programs that git runs on the host"),
            "{stderr}"
        );
    }
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("[x]") && text.contains("y = 1"), "{text}");
    assert!(!hook.exists(), "a hook was planted");
}
