//! Project automation, run as `cargo xtask TASK`.
//!
//! - `ci`: everything CI checks: fmt, clippy `-D warnings`, the tests, the tidy checks, the
//!   purity of the pure crates, the macOS type-check, and every fuzz target for a minute; on
//!   a Mac, what applies there (`ci_macos`: the checks, the tests and `test-macos`).
//! - `test-linux`: the end-to-end suite as root and as an unprivileged user, itemizing with
//!   the observers (also with strace hidden) and with strace.
//! - `test-macos`: the end-to-end suite against sandbox-exec (on macOS only).
//! - `build`: the binaries as they ship: `paddock` and `paddock-supervisor` built for musl
//!   (or linked statically with glibc), `paddock-supervisor-nolibc` without a C library
//!   (see `build.rs`).
//! - `bench spawn`: `paddock run -- true` against bare bwrap and bare `true`.
//! - `bench trace`: what itemizing costs (untraced, the observers, strace, plain strace) on six
//!   workloads, three open-heavy, a tiny `cargo check` and two write-heavy.
//! - `bench scale`: the start-up walk of a generated project of 100,000 files with 50 nested
//!   repositories, without and through its cache.
//! - `bench bridge`: throughput and connection rate through port bridges, as ratios to
//!   direct loopback (and to socat when installed).
//! - `bench unix-socket`: a connect to a unix socket granted by path against a plain one.
//! - `dist [--out DIR]`: the release binaries, shell completions and man pages in one
//!   directory, `target/dist` by default (see `dist.rs`).
//! - `tidy`: the repository's own rules (a `//!` doc atop every module).
//! - `fuzz [--seconds N] [TARGET...]`: every fuzz target for N seconds (default 60) from its
//!   seed corpus; fails on any finding and prints how to reproduce it (see `fuzz.rs`).

// xtask is the project's shell script in Rust: spawning tools is what it is for.
#![allow(clippy::disallowed_methods)]

mod bench;
mod build;
#[cfg(target_os = "linux")]
mod container;
/// Containers are Linux's: elsewhere each entry point says so.
#[cfg(not(target_os = "linux"))]
mod container {
    use std::path::Path;

    const LINUX: &str = "the container runner needs Linux namespaces; run it on Linux";

    pub fn test_linux_container(_: &Path, _: &[String]) -> anyhow::Result<()> {
        anyhow::bail!(LINUX)
    }

    pub fn matrix(_: &Path, _: &[String]) -> anyhow::Result<()> {
        anyhow::bail!(LINUX)
    }

    pub mod init {
        pub fn main(_: &[String]) -> anyhow::Result<()> {
            anyhow::bail!(super::LINUX)
        }
    }
}
mod dist;
mod e2e;
mod fuzz;
mod skips;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use paddock_test_support::Fact;

use crate::skips::Pass;

fn main() -> std::process::ExitCode {
    // The error alone, never a backtrace of xtask itself (CI environments set
    // RUST_BACKTRACE): the last lines of a failed run must be what failed.
    match run_xtask() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_xtask() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = project_root();
    // Where `cargo xtask` was started: paths given on its command line are relative to it.
    let cwd = std::env::current_dir()?;
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("ci") => ci(&root),
        Some("tidy") => tidy::check(&root),
        Some("test-linux") if args.len() > 1 => {
            without_skip_logs(container::test_linux_container(&root, &args[1..]))
        }
        Some("test-linux") => without_skip_logs(test_linux(&root)),
        Some("matrix") => without_skip_logs(container::matrix(&root, &args[1..])),
        // The built-in container runner's pid 1 (see container/init.rs).
        Some("__container-init") => container::init::main(&args[1..]),
        Some("test-macos") => test_macos(),
        Some("demo") => demo(&root, &args[1..]),
        Some("build") => {
            build::release(&root).map(|exe| eprintln!("xtask: built {}", exe.display()))
        }
        Some("dist") => dist::dist(&root, &cwd, &args[1..]),
        Some("bench") => bench::run_bench(&root, args.get(1).map(String::as_str)),
        Some("fuzz") => fuzz::fuzz(&root, &args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|build|dist [--out DIR]|demo|tidy|test-linux [--container IMAGE [--scenario NAME]]|matrix [--fast]|test-macos|bench spawn|trace|bridge|scale|unix-socket|fuzz [--seconds N]>"
            );
            std::process::exit(2)
        }
    }
}

/// Cargo's target directory (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs a command, echoing it, failing with its status.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {}", shown(cmd));
    let status = cmd.status().with_context(|| format!("cannot start {}", shown(cmd)))?;
    if !status.success() {
        bail!("`{}` failed: {status}", shown(cmd));
    }
    Ok(())
}

pub(crate) fn shown(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The e2e suite's itemizer (`observe` or `strace`; see tests/e2e/harness.rs).
const E2E_ITEMIZE: &str = "PADDOCK_E2E_ITEMIZE";

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Where each pass's skip log is written (readable by the unprivileged runs' user).
pub fn skip_log_dir() -> PathBuf {
    std::env::temp_dir().join(format!("paddock-xtask-skips-{}", std::process::id()))
}

/// `result`, once the passes' skip logs are gone: each pass has read its own by then, and
/// nothing of a test command stays in the temporary directory, however it ended.
fn without_skip_logs(result: Result<()>) -> Result<()> {
    let _ = std::fs::remove_dir_all(skip_log_dir());
    result
}

fn ci(root: &Path) -> Result<()> {
    let started = std::time::Instant::now();
    // Under `cargo xtask ci` every test is required, wherever it is started from: a test
    // that cannot run fails unless its pass names what stops it (see `skips.rs`).
    if !paddock_test_support::required() {
        // SAFETY: single-threaded here; nothing reads the environment concurrently.
        unsafe { std::env::set_var(paddock_test_support::CI_ENV, "true") };
    }
    if cfg!(target_os = "macos") {
        return ci_macos(root, started);
    }
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    tidy::check(root)?;
    purity()?;
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    // The library's documentation (the API a task runner compiles against), warnings denied.
    run(cargo()
        .args(["doc", "--no-deps", "-p", "paddock", "-p", "paddock-linux-bwrap"])
        .args(["-p", "paddock-macos-seatbelt", "-p", "paddock-portbridge", "-p", "paddock-policy"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    // The end-to-end suite drives the built binary: build it first so it is never stale.
    run(cargo().args(["build", "-p", "paddock", "-p", "paddock-tests"]))?;
    // The supervisor untraced runs start, as a release build has it: the OS suite runs its
    // tests with it a second time.
    build::nolibc_supervisor(false, None);
    // Every test, with the e2e suite itemizing through the observers (strace is present).
    let mut facts = Vec::new();
    if !skips::strace_corpus(root).is_dir() {
        facts.push(Fact::StraceCorpusAbsent);
    }
    let pass = Pass::new(&skip_log_dir(), "cargo test --workspace", &facts)?;
    let mut cmd = cargo();
    // No backtraces: a failing assertion's message is what CI's last lines must show.
    cmd.args(["test", "--workspace", "--no-fail-fast"])
        .env(E2E_ITEMIZE, "observe")
        .env("RUST_BACKTRACE", "0");
    pass.apply(&mut cmd);
    run(&mut cmd)?;
    pass.finish()?;
    let mut checks = Pass::new(&skip_log_dir(), "darwin check", &[])?;
    darwin_check(&mut checks)?;
    checks.finish()?;
    // Every fuzz target, for a bounded time each (about 2 minutes of building and 60 s of
    // fuzzing per target); `cargo xtask fuzz --seconds 300` is the longer run.
    fuzz::run_all(root, fuzz::DEFAULT_SECONDS, &[])?;
    e2e::matrix(root, &e2e::CI_RUNS)?;
    // Other distributions and host conditions, in containers (mounts, namespaces: root).
    let mut containers = Pass::new(&skip_log_dir(), "container matrix (--fast)", &[])?;
    if is_root() {
        container::matrix(root, &["--fast".to_owned()])?;
    } else {
        containers.skip("cargo xtask matrix --fast", "the container runs need root", None)?;
    }
    containers.finish()?;
    let _ = std::fs::remove_dir_all(skip_log_dir());
    eprintln!("xtask ci: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// `cargo xtask ci` on a Mac: what applies there. The formatting, tidy and purity checks,
/// clippy with `-D warnings` on the whole workspace for this Mac's own target, every test
/// that is not Linux's (the Linux backend's OS suites and the bubblewrap end-to-end suite
/// are `cfg`-gated to Linux), then `test-macos`: the seatbelt backend's suites and its
/// end-to-end checks against the real `/usr/bin/sandbox-exec`.
fn ci_macos(root: &Path, started: std::time::Instant) -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    tidy::check(root)?;
    purity()?;
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    let pass = Pass::new(&skip_log_dir(), "cargo test --workspace (macOS)", &[])?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--no-fail-fast"]).env("RUST_BACKTRACE", "0");
    pass.apply(&mut cmd);
    run(&mut cmd)?;
    pass.finish()?;
    test_macos()?;
    let _ = std::fs::remove_dir_all(skip_log_dir());
    eprintln!("xtask ci (macOS): all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

/// The pure crates have no libc/nix in their normal dependency tree.
fn purity() -> Result<()> {
    for krate in ["paddock-policy", "paddock-strace-parse"] {
        for forbidden in ["libc", "nix"] {
            let out =
                cargo().args(["tree", "-p", krate, "-e", "normal", "-i", forbidden]).output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && text.contains(forbidden) {
                bail!("{krate} must stay pure, but depends on {forbidden}:\n{text}");
            }
        }
    }
    eprintln!("xtask: pure crates have no libc or nix");
    Ok(())
}

/// Type-checks and lints the whole workspace for darwin, tests included (`--all-targets`:
/// tests that `cfg` removes on Linux are at least compiled, and the library compiles for
/// macOS), with clippy's `-D warnings` as on Linux.
fn darwin_check(pass: &mut Pass) -> Result<()> {
    let mut targets = Vec::new();
    for target in ["x86_64-apple-darwin", "aarch64-apple-darwin"] {
        if build::rustup_target(target) {
            targets.push(target);
        } else {
            pass.skip(
                &format!("`cargo check --target {target}`"),
                "rustup cannot install the target here",
                None,
            )?;
        }
    }
    for target in targets {
        // clippy type-checks as `check` does, and holds the macOS code to the same lints.
        run(cargo().args([
            "clippy",
            "--all-targets",
            "--target",
            target,
            "--workspace",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    Ok(())
}

/// Installs the system packages paddock needs (when root and they are missing), builds
/// paddock and runs a command sandboxed on the default policy in a scratch project.
fn demo(root: &Path, command: &[String]) -> Result<()> {
    install_system_packages(&["bubblewrap", "strace"])?;
    let paddock = build::release(root)?;
    let project = std::env::temp_dir().join("paddock-demo");
    std::fs::create_dir_all(&project)?;
    let mut cmd = Command::new(paddock);
    cmd.args(["run", "-C"]).arg(&project).arg("--").current_dir(&project);
    if command.is_empty() {
        cmd.args(["sh", "-c", "echo hi > out.txt && cat out.txt && echo x > /etc/paddock-demo"]);
    } else {
        cmd.args(command);
    }
    eprintln!("$ cd {} && paddock run -- ...", project.display());
    let status = cmd.status()?;
    eprintln!(
        "xtask demo: the task exited with {status} (a write outside the project fails: that is the point)"
    );
    Ok(())
}

/// `apt-get install`s the packages that are missing, when running as root on Debian.
fn install_system_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg").args(["-s", p]).output().is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "paddock needs {}: install them with `sudo apt-get install -y {}`",
            missing.join(", "),
            missing.join(" ")
        );
    }
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn test_linux(root: &Path) -> Result<()> {
    e2e::matrix(root, &e2e::ALL_RUNS)
}

fn test_macos() -> Result<()> {
    if !cfg!(target_os = "macos") {
        bail!(
            "test-macos runs the end-to-end suite against /usr/bin/sandbox-exec and needs macOS; run it on a macOS CI runner"
        );
    }
    // The seatbelt backend's own suites: golden profiles and properties, the executor
    // against its stand-ins, then real plans through /usr/bin/sandbox-exec (the Linux e2e
    // suite drives bubblewrap and is not run).
    run(cargo().args(["test", "-p", "paddock-macos-seatbelt", "--lib"]))?;
    run(cargo().args(["test", "-p", "paddock-macos-seatbelt", "--test", "exec"]))?;
    run(cargo().args(["test", "-p", "paddock-macos-seatbelt", "--test", "tests"]).env("CI", "true"))
}
