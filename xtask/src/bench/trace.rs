//! `cargo xtask bench trace [--rounds N] [--only NAME]`: what itemizing costs.
//!
//! Six workloads, each in its own project: python importing 25 stdlib modules,
//! `find /usr -name '*.h'`, `git status` in a generated 40k-file repository, a tiny offline
//! `cargo check` (a crate with no dependencies, `CARGO_HOME` and target inside it), and two
//! write-heavy ones in the project's write grant (10k files created, written and removed;
//! `cp -r /usr/include` and its removal). Each runs sandboxed:
//!
//! - `untraced`: `--itemize off`;
//! - `observe`: `--itemize observe` (the mechanism that ran, read from `--report`'s
//!   `itemized_by`, is printed: it may fall back to strace);
//! - `strace`: `--itemize strace`;
//! - `auto-strace`: `--itemize auto` with the observers off (`PADDOCK_OBSERVERS=0`), what
//!   a host without FUSE gets: strace with `--seccomp-bpf` (mechanism printed too);
//! - `plain`: plain strace with the flags of the `strace` mode, writing to `/dev/null`,
//!   inside the same sandbox (`--itemize off`), and `plain-bpf` with the flags of an
//!   `auto` that picks strace (`--seccomp-bpf`).
//!
//! Configurations run interleaved, in a shuffled order each round, after one warm-up round;
//! the table gives the median wall time, and ratios of medians to the untraced run and of
//! each strace mode to its plain-strace twin. The mean CPU time of the whole run (paddock,
//! the tracer, the sandbox) is printed too: on a busy machine it moves less than wall time.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use paddock_linux_bwrap::trace::strace_options;

const MODULES: &str = "json, csv, re, os, sys, collections, itertools, functools, pathlib, \
    datetime, decimal, fractions, statistics, random, hashlib, base64, struct, textwrap, \
    string, difflib, heapq, bisect, argparse, logging, typing";

const REPO_FILES: usize = 40_000;

/// One way of running a workload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    Untraced,
    Observe,
    Strace,
    /// `auto` with the observers off (`PADDOCK_OBSERVERS=0`): what a host without FUSE
    /// gets, strace with `--seccomp-bpf`.
    AutoStrace,
    /// strace with the `strace` mode's flags inside the sandbox.
    Plain,
    /// strace with `auto`'s flags (`--seccomp-bpf`) inside the sandbox.
    PlainBpf,
}

const CONFIGS: [Config; 6] = [
    Config::Untraced,
    Config::Observe,
    Config::Strace,
    Config::AutoStrace,
    Config::Plain,
    Config::PlainBpf,
];

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Untraced => "untraced",
            Config::Observe => "observe",
            Config::Strace => "strace",
            Config::AutoStrace => "auto-strace",
            Config::Plain => "plain",
            Config::PlainBpf => "plain-bpf",
        }
    }

    fn itemize(self) -> &'static str {
        match self {
            Config::Observe => "observe",
            Config::Strace => "strace",
            Config::AutoStrace => "auto",
            Config::Untraced | Config::Plain | Config::PlainBpf => "off",
        }
    }
}

struct Workload {
    name: &'static str,
    project: PathBuf,
    argv: Vec<OsString>,
}

/// Measurements of one (workload, config).
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    /// The `itemized_by` values the reports gave.
    by: BTreeSet<String>,
}

impl Samples {
    fn median(&self) -> Duration {
        let mut w = self.wall.clone();
        w.sort();
        w.get(w.len() / 2).copied().unwrap_or_default()
    }

    fn mean_cpu(&self) -> Duration {
        let n = u32::try_from(self.cpu.len()).unwrap_or(u32::MAX).max(1);
        self.cpu.iter().sum::<Duration>() / n
    }
}

struct Options {
    rounds: usize,
    only: Option<String>,
}

fn options() -> Result<Options> {
    let args: Vec<String> = std::env::args().skip_while(|a| a != "trace").skip(1).collect();
    let mut opts = Options { rounds: 5, only: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => {
                opts.rounds = it.next().and_then(|n| n.parse().ok()).context("--rounds N")?;
            }
            "--quick" => opts.rounds = 2,
            "--only" => opts.only = Some(it.next().context("--only NAME")?.clone()),
            other => {
                bail!("bench trace: unknown argument {other}; use --rounds N, --quick, --only NAME")
            }
        }
    }
    Ok(opts)
}

pub fn trace(root: &Path) -> Result<()> {
    let opts = options()?;
    let paddock = crate::build::release(root)?;
    let strace = ["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .context("strace is not installed: nothing to measure")?;
    // Not under /tmp: every task gets a private /tmp.
    let base = crate::target_dir(root).join("bench-trace");
    let workloads: Vec<Workload> = workloads(&base)?
        .into_iter()
        .filter(|w| opts.only.as_deref().is_none_or(|o| w.name.contains(o)))
        .collect();
    let plain = |seccomp_bpf| {
        let mut argv = vec![strace.clone().into_os_string()];
        argv.extend(strace_options(seccomp_bpf, OsStr::new("/dev/null")));
        argv
    };
    let plain_strace = plain(false);
    let plain_bpf = plain(true);
    let report = base.join("report.json");
    let mut samples: Vec<Vec<Samples>> =
        workloads.iter().map(|_| CONFIGS.iter().map(|_| Samples::default()).collect()).collect();
    let started = Instant::now();
    let mut seed = u64::from(std::process::id()) | 1;
    for round in 0..=opts.rounds {
        eprintln!("round {round}/{} ({:.0?} so far)", opts.rounds, started.elapsed());
        for (wi, w) in workloads.iter().enumerate() {
            let mut order = CONFIGS;
            shuffle(&mut order, &mut seed);
            for config in order {
                let mut c = Command::new(&paddock);
                if matches!(config, Config::AutoStrace) {
                    c.env("PADDOCK_OBSERVERS", "0");
                }
                c.args(["run", "--itemize", config.itemize(), "-C"]).arg(&w.project);
                let reported = !matches!(config, Config::Plain | Config::PlainBpf);
                if reported {
                    let _ = std::fs::remove_file(&report);
                    c.arg("--report").arg(&report);
                }
                c.arg("--");
                match config {
                    Config::Plain => c.args(&plain_strace),
                    Config::PlainBpf => c.args(&plain_bpf),
                    _ => &mut c,
                };
                c.args(&w.argv).current_dir(&w.project);
                let (wall, cpu) =
                    timed(&mut c).with_context(|| format!("{} under {}", w.name, config.name()))?;
                if round == 0 {
                    continue; // warm-up
                }
                let s = &mut samples[wi][config as usize];
                s.wall.push(wall);
                s.cpu.push(cpu);
                if reported {
                    let by = std::fs::read(&report)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                        .map(|v| v["itemized_by"].as_str().unwrap_or("none").to_owned())
                        .unwrap_or_else(|| "no report".into());
                    s.by.insert(by);
                }
            }
        }
    }
    print_table(&workloads, &samples, opts.rounds, started.elapsed());
    Ok(())
}

fn print_table(workloads: &[Workload], samples: &[Vec<Samples>], rounds: usize, took: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "bench trace: {rounds} interleaved rounds after a warm-up ({took:.0?}); median wall ms, \
         mean cpu ms in brackets"
    );
    print!("  {:<22}", "workload");
    for c in CONFIGS {
        print!(" {:>17}", c.name());
    }
    println!();
    for (w, s) in workloads.iter().zip(samples) {
        print!("  {:<22}", w.name);
        for c in CONFIGS {
            let x = &s[c as usize];
            print!(" {:>8.1} [{:>6.1}]", ms(x.median()), ms(x.mean_cpu()));
        }
        println!();
    }
    println!("  ratios (wall medians; cpu in brackets):");
    println!(
        "  {:<22} {:>15} {:>15} {:>15} {:>15} {:>17}  mechanisms",
        "workload",
        "observe/untr",
        "strace/untr",
        "auto-s/untr",
        "strace/plain",
        "auto-s/plain-bpf"
    );
    for (w, s) in workloads.iter().zip(samples) {
        let g = |c: Config| &s[c as usize];
        let pair = |a: Config, b: Config| {
            format!(
                "{:.2}x [{:.2}x]",
                r(g(a).median(), g(b).median()),
                r(g(a).mean_cpu(), g(b).mean_cpu())
            )
        };
        let by = |c: Config| g(c).by.iter().cloned().collect::<Vec<_>>().join("+");
        println!(
            "  {:<22} {:>15} {:>15} {:>15} {:>15} {:>17}  observe: {}, auto-strace: {}",
            w.name,
            pair(Config::Observe, Config::Untraced),
            pair(Config::Strace, Config::Untraced),
            pair(Config::AutoStrace, Config::Untraced),
            pair(Config::Strace, Config::Plain),
            pair(Config::AutoStrace, Config::PlainBpf),
            by(Config::Observe),
            by(Config::AutoStrace),
        );
    }
    println!(
        "  targets: observe <= 1.15x untraced (<= 1.2x on the write-heavy two); a strace mode \
         <= 1.05x its plain strace"
    );
}

/// A small deterministic shuffle (xorshift): no dependency for one permutation per round.
fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = usize::try_from(*seed % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}

/// Runs `cmd` (output discarded); its wall time and the CPU time of it and everything it
/// waited for. CPU comes from this process's children totals in `/proc/self/stat`, in
/// clock ticks (10 ms), which is why the table gives means.
fn timed(cmd: &mut Command) -> Result<(Duration, Duration)> {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let before = children_cpu();
    let t = Instant::now();
    let out = cmd.output()?;
    let wall = t.elapsed();
    let cpu = children_cpu().saturating_sub(before);
    if !out.status.success() {
        bail!(
            "benchmark command failed: {}: {:?} {:?}\n{}",
            out.status,
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok((wall, cpu))
}

fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with the last ')'): cutime and cstime are
    // the 16th and 17th fields of the line, the 14th and 15th after the name.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let ticks = f.get(12).copied().unwrap_or(0) + f.get(13).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn sh(script: String) -> Vec<OsString> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// The workloads, making their projects once (kept between runs of the bench).
fn workloads(base: &Path) -> Result<Vec<Workload>> {
    let repo = base.join("repo");
    make_repo(&repo)?;
    let mut out = Vec::new();
    let python = Path::new("/usr/bin/python3");
    if python.exists() {
        out.push(Workload {
            name: "python imports",
            project: repo.clone(),
            argv: vec![python.into(), "-S".into(), "-c".into(), format!("import {MODULES}").into()],
        });
        let writes = base.join("writes");
        std::fs::create_dir_all(writes.join("w"))?;
        out.push(Workload {
            name: "10k file creates",
            project: writes,
            argv: vec![
                python.into(),
                "-S".into(),
                "-c".into(),
                "import os\nfor i in range(10000):\n    with open(f'w/f{i}', 'w') as f: f.write('x')\n\
                 for i in range(10000):\n    os.unlink(f'w/f{i}')"
                    .into(),
            ],
        });
    } else {
        eprintln!("skipping python workloads: /usr/bin/python3 is not installed");
    }
    // find exits 1 for the directories the sandbox cannot list (root-only ones).
    out.push(Workload {
        name: "find /usr -name '*.h'",
        project: repo.clone(),
        argv: sh("find /usr -name '*.h' 2>/dev/null; true".into()),
    });
    out.push(Workload {
        name: "git status (40k)",
        project: repo.clone(),
        argv: vec!["git".into(), "status".into(), "--porcelain".into()],
    });
    match make_crate(&base.join("tinycrate")) {
        Ok((dir, script)) => {
            out.push(Workload { name: "cargo check (tiny)", project: dir, argv: sh(script) })
        }
        Err(e) => eprintln!("skipping cargo check: {e:#}"),
    }
    let copies = base.join("copies");
    std::fs::create_dir_all(&copies)?;
    out.push(Workload {
        name: "cp -r /usr/include",
        project: copies,
        argv: sh("rm -rf inc && cp -r /usr/include inc && rm -rf inc".into()),
    });
    Ok(out)
}

/// A crate with no dependencies, checked offline with its own `CARGO_HOME` and target dir;
/// the toolchain is the one running this bench (`CARGO`, its `rustc` beside it). Returns the
/// crate's directory and the script that touches its source and checks it.
fn make_crate(dir: &Path) -> Result<(PathBuf, String)> {
    let cargo_bin = PathBuf::from(std::env::var_os("CARGO").context("CARGO is not set")?);
    let rustc = cargo_bin.with_file_name("rustc");
    if !rustc.exists() {
        bail!("no rustc beside {}", cargo_bin.display());
    }
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )?;
    std::fs::write(dir.join("src/main.rs"), "fn main() {\n    println!(\"tiny\");\n}\n")?;
    let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let script = format!(
        "touch src/main.rs && CARGO_HOME={} CARGO_TARGET_DIR={} RUSTC={} {} check --offline -q",
        q(&dir.join(".cargo-home")),
        q(&dir.join("target")),
        q(&rustc),
        q(&cargo_bin),
    );
    // Once outside the sandbox, so that the measured runs are incremental.
    let status = Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir)
        .status()
        .context("cannot run cargo check")?;
    if !status.success() {
        bail!("cargo check of the tiny crate failed: {status}");
    }
    Ok((dir.to_path_buf(), script))
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
