//! `cargo xtask bench trace`: what itemizing costs. Three open-heavy workloads (python
//! importing 25 stdlib modules, `find /usr -name '*.h'`, `git status` in a generated
//! 40k-file repository), each run sandboxed untraced (`--itemize off`), traced by paddock
//! (`--itemize auto`: strace on a pipe parsed while the task runs), and under plain strace
//! with the same flags writing to `/dev/null` inside the same sandbox. Prints medians and the
//! ratios traced/untraced and traced/plain strace (target: <= 1.05x).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use paddock_linux_bwrap::trace::TRACED_SYSCALLS;

use super::median_of;
use crate::{cargo, run};

const MODULES: &str = "json, csv, re, os, sys, collections, itertools, functools, pathlib, \
    datetime, decimal, fractions, statistics, random, hashlib, base64, struct, textwrap, \
    string, difflib, heapq, bisect, argparse, logging, typing";

const REPO_FILES: usize = 40_000;

pub fn trace(root: &Path) -> Result<()> {
    run(cargo().args(["build", "--release", "-p", "paddock"]))?;
    let paddock = crate::target_dir(root).join("release/paddock");
    let strace = ["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .context("strace is not installed: nothing to measure")?;
    let python = Path::new("/usr/bin/python3");
    // Not under /tmp: every task gets a private /tmp.
    let base = crate::target_dir(root).join("bench-trace");
    let repo = base.join("repo");
    make_repo(&repo)?;
    let imports = format!("import {MODULES}");
    let workloads: Vec<(&str, Vec<String>)> = vec![
        ("python imports", vec![python.display().to_string(), "-S".into(), "-c".into(), imports]),
        // find exits 1 for the directories the sandbox cannot list (root-only ones).
        (
            "find /usr -name '*.h'",
            vec!["sh".into(), "-c".into(), "find /usr -name '*.h' 2>/dev/null; true".into()],
        ),
        ("git status (40k files)", vec!["git".into(), "status".into(), "--porcelain".into()]),
    ];
    println!("bench trace: median wall time of each workload in the sandbox");
    println!(
        "  {:<24} {:>10} {:>10} {:>12} {:>9} {:>9}",
        "workload", "untraced", "paddock", "plain strace", "p/untr", "p/strace"
    );
    for (name, argv) in &workloads {
        if argv[0].starts_with('/') && !Path::new(&argv[0]).exists() {
            println!("  {name:<24} skipped: {} is not installed", argv[0]);
            continue;
        }
        let runs = if name.starts_with("python") { 15 } else { 7 };
        let sandboxed = |itemize: &str, prefix: &[String]| {
            let mut c = Command::new(&paddock);
            c.args(["run", "--itemize", itemize, "-C"]).arg(&repo).arg("--");
            c.args(prefix).args(argv).current_dir(&repo);
            c
        };
        let plain_prefix: Vec<String> = [
            strace.display().to_string(),
            "-f".into(),
            "--seccomp-bpf".into(),
            "-qq".into(),
            "-y".into(),
            "-e".into(),
            "signal=none".into(),
            "-e".into(),
            format!("trace={TRACED_SYSCALLS}"),
            "-o".into(),
            "/dev/null".into(),
        ]
        .into();
        let untraced = median_of(runs, &mut || sandboxed("off", &[]))?;
        let traced = median_of(runs, &mut || sandboxed("auto", &[]))?;
        let plain = median_of(runs, &mut || sandboxed("off", &plain_prefix))?;
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "  {name:<24} {untraced:>10.1?} {traced:>10.1?} {plain:>12.1?} {:>8.2}x {:>8.2}x",
            r(traced, untraced),
            r(traced, plain)
        );
    }
    println!("  (p/strace target: <= 1.05x)");
    Ok(())
}

/// A git repository with [`REPO_FILES`] committed files, made once and reused.
fn make_repo(repo: &Path) -> Result<()> {
    let done = repo.join(".git/paddock-bench-done");
    if done.exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(repo);
    for i in 0..REPO_FILES {
        let dir = repo.join(format!("d{:03}/e{:02}", i / 400, (i / 20) % 20));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n"))?;
    }
    let git = |args: &[&str]| -> Result<()> {
        let status = Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"])
            .args(args)
            .current_dir(repo)
            .status()
            .context("cannot run git")?;
        if !status.success() {
            bail!("git {args:?} failed: {status}");
        }
        Ok(())
    };
    git(&["init", "-q"])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "bench"])?;
    std::fs::write(done, "")?;
    Ok(())
}
