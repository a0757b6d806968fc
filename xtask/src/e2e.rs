//! The end-to-end suite's runs: as root and as an unprivileged user, itemizing denials with
//! the observers (also with strace hidden, to prove they need none) and with strace.
//!
//! The suite is built once; each run executes the test binary with `PADDOCK_E2E_ITEMIZE`
//! set (see tests/e2e/harness.rs). strace is hidden by bind-mounting `/dev/null` over it in a
//! private mount namespace (`unshare --mount`), so nothing changes on the host. The
//! unprivileged runs use the user `paddock-test`, created on first use, and a staged copy of
//! the binaries it can read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use paddock_test_support::Fact;

use crate::skips::Pass;
use crate::{E2E_ITEMIZE, cargo, is_root, run, target_dir};

/// The unprivileged runs' user.
const TEST_USER: &str = "paddock-test";

/// One run of the suite.
#[derive(Clone, Copy, Debug)]
pub struct SuiteRun {
    /// For the log.
    pub name: &'static str,
    /// As [`TEST_USER`] rather than the current user.
    pub unprivileged: bool,
    /// `observe` or `strace`.
    pub itemize: &'static str,
    /// With strace hidden.
    pub hide_strace: bool,
    /// With `/dev/fuse` hidden (by an unreadable file: only for the unprivileged user), so
    /// that `--itemize auto` falls back to strace with `--seccomp-bpf`.
    pub hide_fuse: bool,
}

impl SuiteRun {
    /// What this run sets up on purpose, which its tests may skip for (see `skips.rs`).
    fn facts(&self) -> Vec<Fact> {
        let mut facts = Vec::new();
        if self.hide_strace {
            facts.push(Fact::StraceHidden);
        }
        if self.hide_fuse {
            facts.push(Fact::FuseHidden);
        }
        if self.unprivileged {
            facts.push(Fact::Unprivileged);
        }
        facts
    }
}

/// What CI runs after `cargo test --workspace` (which runs the suite as root, observing).
pub const CI_RUNS: [SuiteRun; 5] = [
    SuiteRun {
        name: "root, strace",
        unprivileged: false,
        itemize: "strace",
        hide_strace: false,
        hide_fuse: false,
    },
    // strace attaches to a supervisor in a user namespace the test user owns.
    SuiteRun {
        name: "unprivileged, strace",
        unprivileged: true,
        itemize: "strace",
        hide_strace: false,
        hide_fuse: false,
    },
    // What a host without /dev/fuse gets by default: strace with --seccomp-bpf.
    SuiteRun {
        name: "unprivileged, auto without observers (strace --seccomp-bpf)",
        unprivileged: true,
        itemize: "auto-strace",
        hide_strace: false,
        hide_fuse: true,
    },
    SuiteRun {
        name: "root, observers, no strace",
        unprivileged: false,
        itemize: "observe",
        hide_strace: true,
        hide_fuse: false,
    },
    SuiteRun {
        name: "unprivileged, observers, no strace",
        unprivileged: true,
        itemize: "observe",
        hide_strace: true,
        hide_fuse: false,
    },
];

/// `cargo xtask test-linux`: the CI runs and the plain root run with the observers.
pub const ALL_RUNS: [SuiteRun; 6] = [
    SuiteRun {
        name: "root, observers",
        unprivileged: false,
        itemize: "observe",
        hide_strace: false,
        hide_fuse: false,
    },
    CI_RUNS[0],
    CI_RUNS[1],
    CI_RUNS[2],
    CI_RUNS[3],
    CI_RUNS[4],
];

/// Where strace may be (the probe's list).
const STRACE_PATHS: &[&str] = &["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"];

/// Builds the suite and runs it once per entry of `runs`; every run must pass.
pub fn matrix(root: &Path, runs: &[SuiteRun]) -> Result<()> {
    run(cargo().args(["build", "-p", "paddock", "-p", "paddock-tests"]))?;
    // These runs start the binaries as they ship (see `build.rs`: built for musl, or a
    // static glibc's), with the supervisor for untraced runs without a C library; the test
    // run before them had them dynamic, for glibc. The unprivileged runs stage `paddock`
    // alone, which then re-executes itself as the supervisor.
    let bins = match crate::build::musl(root, false)? {
        Some(dir) => dir,
        None => {
            crate::build::static_paddock(false);
            crate::build::static_supervisor(false);
            crate::build::nolibc_supervisor(false, None);
            target_dir(root).join("debug")
        }
    };
    let paddock = bins.join("paddock");
    eprintln!("xtask: the e2e runs start {}", paddock.display());
    let exe = suite_binary()?;
    let mut staged: Option<PathBuf> = None;
    // `XTASK_E2E_ONLY=unprivileged` (say) runs only the runs whose name contains it.
    let only = std::env::var("XTASK_E2E_ONLY").ok();
    for r in runs.iter().filter(|r| only.as_deref().is_none_or(|o| r.name.contains(o))) {
        let mut pass = Pass::new(&crate::skip_log_dir(), &format!("e2e: {}", r.name), &r.facts())?;
        if (r.unprivileged || r.hide_strace || r.hide_fuse) && !is_root() {
            pass.skip(
                &format!("the e2e run \"{}\"", r.name),
                "it needs root (a test user, a mount namespace)",
                None,
            )?;
            pass.finish()?;
            continue;
        }
        eprintln!("xtask: e2e run \"{}\"", r.name);
        let mut argv: Vec<String> = Vec::new();
        // No backtraces: a failing assertion's message is what CI's last lines must show.
        let mut env: Vec<(String, String)> = vec![
            (E2E_ITEMIZE.to_owned(), r.itemize.to_owned()),
            ("RUST_BACKTRACE".to_owned(), "0".to_owned()),
        ];
        env.extend(pass.env());
        let test_binary = if r.unprivileged {
            let stage = match &staged {
                Some(s) => s.clone(),
                None => {
                    let s = stage(root, &exe, &paddock)?;
                    staged = Some(s.clone());
                    s
                }
            };
            env.extend([
                ("PADDOCK_BIN".to_owned(), stage.join("paddock").display().to_string()),
                ("PADDOCK_PROBE".to_owned(), stage.join("paddock-probe").display().to_string()),
                ("HOME".to_owned(), format!("/home/{TEST_USER}")),
                ("PADDOCK_E2E_TMP".to_owned(), format!("/home/{TEST_USER}/e2e")),
                ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ]);
            argv.extend(
                [
                    "setpriv",
                    "--reuid",
                    TEST_USER,
                    "--regid",
                    TEST_USER,
                    "--init-groups",
                    "--reset-env",
                    "env",
                ]
                .map(str::to_owned),
            );
            argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
            stage.join("e2e")
        } else {
            exe.clone()
        };
        argv.push(test_binary.display().to_string());
        argv.push("--test-threads=2".to_owned());
        let mut cmd = if r.hide_strace || r.hide_fuse {
            // sh -c 'SCRIPT' sh ARGV...: in a mount namespace of its own, bind /dev/null over
            // each strace and an unreadable file over /dev/fuse, then exec ARGV.
            let mut script = String::new();
            if r.hide_strace {
                script += &format!(
                    "for p in {}; do [ -e \"$p\" ] && mount --bind -o ro,nosuid,nodev /dev/null \"$p\"; done; ",
                    STRACE_PATHS.join(" ")
                );
            }
            if r.hide_fuse {
                let blank = std::env::temp_dir().join("paddock-e2e-no-fuse");
                std::fs::write(&blank, b"")?;
                std::fs::set_permissions(&blank, std::fs::Permissions::from_mode(0o000))?;
                script +=
                    &format!("mount --bind -o ro,nosuid,nodev {} /dev/fuse; ", blank.display());
            }
            script += "exec \"$@\"";
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--", "sh", "-c"]).arg(script);
            c.arg("sh").args(&argv);
            c
        } else {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        };
        if !r.unprivileged {
            cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            cmd.env("PADDOCK_BIN", &paddock);
        }
        // Not under /tmp: every task gets a private /tmp, where the probe would be invisible.
        cmd.current_dir(if r.unprivileged { PathBuf::from("/tmp") } else { root.join("tests") });
        run(&mut cmd).with_context(|| format!("the e2e run \"{}\" failed", r.name))?;
        pass.finish()?;
    }
    if let Some(stage) = staged {
        let _ = std::fs::remove_dir_all(stage);
    }
    Ok(())
}

/// The e2e test binary cargo built.
pub fn suite_binary() -> Result<PathBuf> {
    suite_binary_with(&[], &[])
}

/// The e2e test binary cargo built with more arguments and environment (another target, a
/// static link).
pub fn suite_binary_with(args: &[&str], env: &[(String, String)]) -> Result<PathBuf> {
    let out = cargo()
        .args(["test", "-p", "paddock-tests", "--test", "e2e", "--no-run", "--message-format=json"])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()?;
    if !out.status.success() {
        bail!("building the e2e suite failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains("\"executable\"") && l.contains("\"e2e\""))
        .filter_map(|l| l.split("\"executable\":\"").nth(1).and_then(|r| r.split('"').next()))
        .next_back()
        .map(PathBuf::from)
        .context("cannot find the e2e test binary")
}

/// Creates the test user if needed and copies the binaries (the suite `exe`, `paddock` and
/// the probe) where it can read them.
fn stage(root: &Path, exe: &Path, paddock: &Path) -> Result<PathBuf> {
    let exists = Command::new("id").arg(TEST_USER).output().is_ok_and(|o| o.status.success());
    if !exists {
        run(Command::new("useradd").args(["--create-home", "--shell", "/bin/sh", TEST_USER]))?;
    }
    let stage = PathBuf::from("/var/tmp/paddock-e2e-unprivileged");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)?;
    for (src, name) in [
        (exe.to_path_buf(), "e2e"),
        (paddock.to_path_buf(), "paddock"),
        (target_dir(root).join("debug/paddock-probe"), "paddock-probe"),
    ] {
        std::fs::copy(&src, stage.join(name))
            .with_context(|| format!("cannot stage {}", src.display()))?;
    }
    run(Command::new("chmod").args(["-R", "a+rX"]).arg(&stage))?;
    Ok(stage)
}
