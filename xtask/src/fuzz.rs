//! `cargo xtask fuzz [--seconds N]`: every fuzz target of the workspace, for N seconds each.
//!
//! The fuzz crates are each crate's `fuzz/` directory (a workspace of its own, built by
//! `cargo fuzz` only). Each target starts from its seed corpus kept in the repository
//! (`fuzz/corpus/<target>/`: real inputs, read only) and a scratch corpus under
//! `target/fuzz/corpus/<target>/`, where libFuzzer writes what it finds, so a run never
//! dirties the checkout. Every target runs with the same limits ([`RSS_LIMIT_MB`], a
//! [`TIMEOUT_SECS`] per input, leaks detected): any crash, leak, timeout or out-of-memory
//! fails the task, which prints the command that reproduces it from the saved input.
//!
//! `cargo fuzz` needs the nightly compiler's `-Z` flags: `cargo +nightly` when a nightly is
//! installed (unless `PADDOCK_FUZZ_NIGHTLY=0`), otherwise the stable one with
//! `RUSTC_BOOTSTRAP=1` (what CI has). cargo-fuzz is installed (`cargo install --locked
//! cargo-fuzz`) when missing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::{run, shown, target_dir};

/// Seconds per target when `--seconds` is not given.
pub const DEFAULT_SECONDS: u64 = 60;
/// libFuzzer's memory limit per target, the same for every target and every run.
const RSS_LIMIT_MB: u64 = 2048;
/// The longest one input may take before libFuzzer reports a timeout.
const TIMEOUT_SECS: u64 = 10;

/// The crates that have a `fuzz/` directory.
const FUZZ_CRATES: &[&str] = &["policy", "strace-parse", "portbridge", "macos-seatbelt"];

/// One fuzz target: its crate's fuzz directory and its name.
struct Target {
    fuzz_dir: PathBuf,
    name: String,
}

/// How to run `cargo fuzz` on this machine.
struct Toolchain {
    nightly: bool,
}

impl Toolchain {
    fn detect() -> Toolchain {
        // `PADDOCK_FUZZ_NIGHTLY=0` takes the stable way where a nightly is installed too (what
        // CI does, which has none).
        if std::env::var_os("PADDOCK_FUZZ_NIGHTLY").is_some_and(|v| v == "0") {
            return Toolchain { nightly: false };
        }
        let nightly = Command::new("cargo")
            .args(["+nightly", "--version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        Toolchain { nightly }
    }

    /// `cargo [+nightly] fuzz ARGS`, with the fuzz crates' own target directory.
    fn cargo_fuzz(&self, root: &Path) -> Command {
        // `cargo` through rustup, not `$CARGO` (which names the stable toolchain's binary).
        let mut cmd = Command::new("cargo");
        if self.nightly {
            cmd.arg("+nightly");
        } else {
            cmd.env("RUSTC_BOOTSTRAP", "1");
        }
        cmd.arg("fuzz").env("CARGO_TARGET_DIR", target_dir(root).join("fuzz"));
        cmd
    }

    /// The reproduction command as the user types it.
    fn shown(&self) -> &'static str {
        if self.nightly { "cargo +nightly fuzz" } else { "RUSTC_BOOTSTRAP=1 cargo fuzz" }
    }
}

/// `cargo xtask fuzz [--seconds N] [TARGET...]`.
pub fn fuzz(root: &Path, args: &[String]) -> Result<()> {
    let mut seconds = DEFAULT_SECONDS;
    let mut only = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                let n = it.next().context("--seconds needs a number of seconds per target")?;
                seconds = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--seconds {n}: expected a positive integer"))?;
            }
            name if !name.starts_with('-') => only.push(name.to_owned()),
            other => {
                bail!("unknown option {other}; usage: cargo xtask fuzz [--seconds N] [TARGET...]")
            }
        }
    }
    run_all(root, seconds, &only)
}

/// Runs every target (or those named in `only`) for `seconds` each.
pub fn run_all(root: &Path, seconds: u64, only: &[String]) -> Result<()> {
    let toolchain = Toolchain::detect();
    ensure_cargo_fuzz(&toolchain, root)?;
    let mut targets = Vec::new();
    for krate in FUZZ_CRATES {
        let fuzz_dir = root.join("crates").join(krate).join("fuzz");
        if !fuzz_dir.join("Cargo.toml").is_file() {
            bail!("{} is missing: FUZZ_CRATES in xtask/src/fuzz.rs names it", fuzz_dir.display());
        }
        let out = toolchain
            .cargo_fuzz(root)
            .arg("list")
            .arg("--fuzz-dir")
            .arg(&fuzz_dir)
            .output()
            .context("cannot run `cargo fuzz list`")?;
        if !out.status.success() {
            bail!(
                "`cargo fuzz list --fuzz-dir {}` failed: {}",
                fuzz_dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for name in String::from_utf8_lossy(&out.stdout).lines().map(str::trim) {
            if !name.is_empty() && (only.is_empty() || only.iter().any(|o| o == name)) {
                targets.push(Target { fuzz_dir: fuzz_dir.clone(), name: name.to_owned() });
            }
        }
    }
    if let Some(unknown) = only.iter().find(|o| !targets.iter().any(|t| &t.name == *o)) {
        bail!("no fuzz target named {unknown}");
    }
    let mut summary = Vec::new();
    for target in &targets {
        let runs = run_target(root, &toolchain, target, seconds)?;
        summary.push(format!("{}: {runs} runs in {seconds} s", target.name));
    }
    eprintln!("xtask fuzz: no finding\n  {}", summary.join("\n  "));
    Ok(())
}

/// Installs cargo-fuzz when `cargo fuzz` is not there.
fn ensure_cargo_fuzz(toolchain: &Toolchain, root: &Path) -> Result<()> {
    let have = toolchain
        .cargo_fuzz(root)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        run(Command::new("cargo").args(["install", "--locked", "cargo-fuzz"]))?;
    }
    Ok(())
}

/// Runs one target; returns libFuzzer's count of runs, or fails with the reproduction.
fn run_target(root: &Path, toolchain: &Toolchain, target: &Target, seconds: u64) -> Result<u64> {
    let seeds = target.fuzz_dir.join("corpus").join(&target.name);
    let seed_count = std::fs::read_dir(&seeds)
        .with_context(|| {
            format!(
                "the seed corpus {} is missing: keep a few real inputs for {} there",
                seeds.display(),
                target.name
            )
        })?
        .count();
    if seed_count == 0 {
        bail!("the seed corpus {} is empty", seeds.display());
    }
    let scratch = target_dir(root).join("fuzz/corpus").join(&target.name);
    std::fs::create_dir_all(&scratch)?;
    let log_path = target_dir(root).join("fuzz").join(format!("{}.log", target.name));
    let mut cmd = toolchain.cargo_fuzz(root);
    cmd.arg("run")
        .arg("--fuzz-dir")
        .arg(&target.fuzz_dir)
        .arg(&target.name)
        // The scratch corpus first: libFuzzer adds what it finds to the first directory.
        .arg(&scratch)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-timeout={TIMEOUT_SECS}"))
        .arg("-detect_leaks=1")
        .arg("-print_final_stats=1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("$ {} ({seed_count} seeds)", shown(&cmd));
    let mut child = cmd.spawn().with_context(|| format!("cannot start {}", shown(&cmd)))?;
    // libFuzzer writes to stderr; cargo's build lines too. stdout is drained in a thread.
    let stdout = child.stdout.take().context("no stdout")?;
    let out_thread = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let mut log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut runs = None;
    let mut artifact = None;
    let mut finding = None;
    let stderr = child.stderr.take().context("no stderr")?;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        writeln!(log, "{line}")?;
        if let Some(n) = line.strip_prefix("Done ").and_then(|r| r.split(' ').next()) {
            runs = n.parse().ok();
        }
        if let Some(path) = line.split("Test unit written to ").nth(1) {
            artifact = Some(path.trim().to_owned());
        }
        if finding.is_none() && is_finding(&line) {
            finding = Some(line.clone());
        }
        // Progress lines are many; the log keeps them, the terminal gets the rest.
        if !line.starts_with('#') && !line.trim_start().starts_with("NEW_FUNC") {
            eprintln!("{line}");
        }
    }
    let status = child.wait()?;
    let stdout = out_thread.join().unwrap_or_default();
    write!(log, "{stdout}")?;
    if status.success() && finding.is_none() {
        let runs = runs.with_context(|| {
            format!(
                "{}: libFuzzer printed no `Done N runs` line (see {})",
                target.name,
                log_path.display()
            )
        })?;
        eprintln!("xtask fuzz: {}: {runs} runs in {seconds} s, no finding", target.name);
        return Ok(runs);
    }
    let what = finding.unwrap_or_else(|| format!("`cargo fuzz run` exited with {status}"));
    let reproduce = match &artifact {
        Some(input) => format!(
            "{} run --fuzz-dir {} {} {input}",
            toolchain.shown(),
            rel(root, &target.fuzz_dir),
            target.name
        ),
        None => format!("(no input was saved; the whole output is in {})", log_path.display()),
    };
    bail!("fuzz target {} failed: {what}\n  reproduce with: {reproduce}", target.name)
}

/// libFuzzer's and the sanitizers' report lines.
fn is_finding(line: &str) -> bool {
    line.contains("ERROR: libFuzzer:")
        || line.contains("ERROR: AddressSanitizer")
        || line.contains("ERROR: LeakSanitizer")
        || line.contains("==ERROR:")
        || line.contains("panicked at")
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}
