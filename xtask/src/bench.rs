//! `cargo xtask bench spawn`: whole-process timing of `paddock run -- true` (default and
//! `--itemize off`, in an empty project and in one with 50 protected names and 20 deny
//! entries) against the simplest bubblewrap sandbox a user would write instead
//! ([`SIMPLEST_BWRAP`]), the equivalent bare `bwrap` invocation (the same mount arguments,
//! taken from the plan) and bare `true`, and a task that writes a file at once by default
//! against the simplest sandbox running it ([`WRITES_A_FILE`]: its first write starts the
//! notifications' server), interleaved rounds, printed as median, min and max and as ratios
//! to the simplest sandbox; in the same rounds the library's spawn + wait of `true` timed
//! inside a task runner's process (cold: its first; warm: its second); then a prewarmed
//! sandbox's. `bench unix-socket`:
//! a connect to a unix socket granted by path against a plain one ([`unix_socket`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, run};

mod trace;
mod unix_socket;

/// Rounds of `bench spawn`: on a virtual machine whose CPUs are shared, medians of 80 moved
/// by 0.05x between runs a minute apart; 200 take about 15 s.
const RUNS: usize = 200;

/// The simplest bubblewrap sandbox: what a user would pick instead of paddock.
pub const SIMPLEST_BWRAP: &[&str] = &[
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--",
    "/bin/true",
];

/// A task that writes a file in its private `/tmp` as it starts (the shell's redirection is
/// its first write).
const WRITES_A_FILE: &[&str] = &["/bin/sh", "-c", "echo > /tmp/paddock-bench-written"];

/// Dispatches `bench NAME`.
pub fn run_bench(root: &Path, name: Option<&str>) -> Result<()> {
    match name {
        Some("spawn") => spawn(root),
        Some("trace") => trace::trace(root),
        Some("bridge") => bridge(root),
        Some("scale") => scale(root),
        Some("unix-socket") => unix_socket::unix_socket(root),
        _ => bail!("usage: cargo xtask bench spawn|trace|bridge|scale|unix-socket"),
    }
}

/// `bench scale`: the start-up walk of the project on a generated project of 100,000 files
/// with 50 nested repositories, without and through its cache (the `scale_bench` example of
/// paddock).
fn scale(root: &Path) -> Result<()> {
    run(cargo().current_dir(root).args([
        "run",
        "--release",
        "-p",
        "paddock",
        "--example",
        "scale_bench",
    ]))
}

/// `bench bridge`: bulk throughput and connection setup rate through portbridge's relays
/// against direct loopback (and socat when installed), printed as ratios by the
/// `bridge_bench` example of paddock-portbridge.
fn bridge(root: &Path) -> Result<()> {
    run(cargo().current_dir(root).args([
        "run",
        "--release",
        "-p",
        "paddock-portbridge",
        "--example",
        "bridge_bench",
    ]))
}

/// min, median and max of one configuration's rounds.
#[derive(Clone, Copy, Debug)]
struct Stats {
    min: Duration,
    median: Duration,
    max: Duration,
}

impl Stats {
    fn of(mut times: Vec<Duration>) -> Stats {
        times.sort();
        Stats {
            min: times.first().copied().unwrap_or_default(),
            median: times.get(times.len() / 2).copied().unwrap_or_default(),
            max: times.last().copied().unwrap_or_default(),
        }
    }

    /// `self / base`, each of min, median and max against the same of `base`.
    fn ratio(&self, base: &Stats) -> String {
        let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        format!(
            "{:.2}x (min {:.2}x, max {:.2}x)",
            r(self.median, base.median),
            r(self.min, base.min),
            r(self.max, base.max)
        )
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>9.2?}  (min {:.2?}, max {:.2?})", self.median, self.min, self.max)
    }
}

/// Names the `paddock` binary `bench spawn` runs instead of building this checkout's.
const BENCH_PADDOCK_ENV: &str = "PADDOCK_BENCH_PADDOCK";

/// One configuration of a round: run once, it gives the time of each series it measures (a
/// whole process: one, [`timed`]; the library's example: its spawns, timed inside it).
type Measure<'a> = &'a mut dyn FnMut() -> Result<Vec<Duration>>;

/// Runs each configuration once per round for [`RUNS`] rounds after three warm-up rounds:
/// every configuration sees the same machine state. Each round has an order of its own
/// (shuffled from a fixed seed, so two runs of the benchmark use the same orders): what a
/// command follows changes its time (a `paddock run` right after another was 0.12-0.14 ms
/// faster than one right after bare bwrap), and a fixed order gives each configuration the
/// same predecessor every round. The statistics of each configuration's series, in order.
fn interleaved(measures: &mut [Measure<'_>]) -> Result<Vec<Stats>> {
    let mut times: Vec<Vec<Vec<Duration>>> = vec![Vec::new(); measures.len()];
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut order: Vec<usize> = (0..measures.len()).collect();
    for round in 0..RUNS + 3 {
        rng.shuffle(&mut order);
        for &i in &order {
            let samples = measures[i]()?;
            if round < 3 {
                continue;
            }
            let series = &mut times[i];
            series.resize_with(samples.len().max(series.len()), Vec::new);
            for (s, t) in series.iter_mut().zip(samples) {
                s.push(t);
            }
        }
    }
    Ok(times.into_iter().flatten().map(Stats::of).collect())
}

/// A whole process's time, `cmd` run with its output discarded; an error if it fails.
fn timed(mut c: Command) -> Result<Vec<Duration>> {
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let t = Instant::now();
    let status = c.status()?;
    let elapsed = t.elapsed();
    if !status.success() {
        bail!(
            "benchmark command failed: {status}: {:?} {:?}",
            c.get_program(),
            c.get_args().collect::<Vec<_>>()
        );
    }
    Ok(vec![elapsed])
}

/// The library's spawn + wait of `true`, timed inside one process (the `spawn_timing`
/// example): the process's first spawn (cold) and its second (warm).
fn library_round(example: &Path, supervisor: &Path, project: &Path) -> Result<Vec<Duration>> {
    let micros = example_micros(example, project, "2", supervisor, &[])?;
    let [first, second] = micros[..] else { bail!("spawn_timing printed {micros:?}") };
    Ok(vec![Duration::from_micros(first), Duration::from_micros(second)])
}

/// The library's spawn+wait of `true` from a sandbox with two prewarmed (the
/// `spawn_timing` example with `prewarm`): every spawn after the first two of each process.
/// Apart from the interleaved rounds: each process pauses 50 ms before each spawn (for the
/// sandbox made again in the background), and the sandboxes it leaves are torn down as it
/// ends, work the kernel finishes in the background (the network namespaces), which would
/// land on whatever runs next.
fn prewarmed_rounds(example: &Path, supervisor: &Path, project: &Path) -> Result<Stats> {
    let mut times = Vec::new();
    for _ in 0..RUNS / 20 + 1 {
        let micros = example_micros(example, project, "12", supervisor, &["prewarm"])?;
        times.extend(micros.iter().skip(2).map(|m| Duration::from_micros(*m)));
    }
    Ok(Stats::of(times))
}

/// The microseconds the `spawn_timing` example printed, one per spawn.
fn example_micros(
    example: &Path,
    project: &Path,
    count: &str,
    supervisor: &Path,
    extra: &[&str],
) -> Result<Vec<u64>> {
    let out = Command::new(example)
        .arg(project)
        .arg(count)
        .arg(supervisor)
        .args(extra)
        .output()
        .context("cannot run the spawn_timing example")?;
    if !out.status.success() {
        bail!("spawn_timing {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// A project with a policy a large repository has: 50 protected names present below the
/// root (`.vscode` of 50 packages) and 20 `deny.read` entries, each an existing file.
fn make_big_project(dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let mut deny = Vec::new();
    for i in 0..50 {
        std::fs::create_dir_all(dir.join(format!("pkg{i}/.vscode")))?;
        std::fs::write(dir.join(format!("pkg{i}/.vscode/settings.json")), b"{}")?;
    }
    for i in 0..20 {
        std::fs::create_dir_all(dir.join(format!("conf{i}")))?;
        std::fs::write(dir.join(format!("conf{i}/secret.env")), b"K=V\n")?;
        deny.push(format!("\"conf{i}/secret.env\""));
    }
    std::fs::write(dir.join("paddock.toml"), format!("[deny]\nread = [{}]\n", deny.join(", ")))?;
    Ok(())
}

/// The bwrap arguments of `plan` (`paddock plan --json`) as bare bwrap runs them: the mounts
/// fed from paddock's descriptors become the same mounts from /dev/null, the supervisor
/// after `--` becomes `/bin/true`, and paths in `project` move to `baseline` (the same
/// mounts, with mount points that stay there for the whole benchmark).
fn bare_bwrap_args(
    plan: &serde_json::Value,
    project: &Path,
    baseline: &Path,
) -> Result<Vec<String>> {
    let payloads = plan["plan"]["payloads"].as_array().context("the plan has no payloads")?;
    let args_text = payloads
        .iter()
        .find(|p| p["name"].as_str().is_some_and(|n| n.contains("bwrap")))
        .and_then(|p| p["bytes"].as_str())
        .context("the plan has no bwrap argument payload")?;
    let mut args: Vec<String> =
        args_text.split('\u{2400}').filter(|a| !a.is_empty()).map(str::to_owned).collect();
    if let Some(i) = args.iter().position(|a| a == "--") {
        args.truncate(i);
    }
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--perms" => i += 2,
            "--ro-bind-data" | "--bind-data" | "--file" if i + 2 < args.len() => {
                out.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), args[i + 2].clone()]);
                i += 3;
            }
            _ => {
                out.push(args[i].clone());
                i += 1;
            }
        }
    }
    let moved = |a: &str| match Path::new(a).strip_prefix(project) {
        Ok(rest) => baseline.join(rest).display().to_string(),
        Err(_) => a.to_owned(),
    };
    let mut out: Vec<String> = out.iter().map(|a| moved(a)).collect();
    out.push("--".to_owned());
    out.push("/bin/true".to_owned());
    Ok(out)
}

/// Makes the plan's placeholders (moved from `project` to `baseline`) and their missing
/// parents, for bare bwrap to bind; everything made is pushed on `made`, parents first.
fn make_mount_points(
    plan: &serde_json::Value,
    project: &Path,
    baseline: &Path,
    made: &mut Vec<PathBuf>,
) -> Result<()> {
    for p in plan["plan"]["placeholders"].as_array().into_iter().flatten() {
        let Some(path) = p["path"].as_str() else { continue };
        let path = match Path::new(path).strip_prefix(project) {
            Ok(rest) => baseline.join(rest),
            Err(_) => PathBuf::from(path),
        };
        let mut missing: Vec<PathBuf> =
            path.ancestors().skip(1).take_while(|a| !a.exists()).map(Path::to_path_buf).collect();
        missing.reverse();
        for dir in missing {
            std::fs::create_dir(&dir)?;
            made.push(dir);
        }
        if path.exists() {
            continue;
        }
        if p["dir"].as_bool() == Some(true) {
            std::fs::create_dir(&path)?;
        } else {
            std::fs::write(&path, b"")?;
        }
        made.push(path);
    }
    Ok(())
}

fn spawn(root: &Path) -> Result<()> {
    // Another build's binaries (with their supervisors beside them), to compare two builds
    // in the same harness: the library's rows stay this checkout's.
    let paddock = match std::env::var_os(BENCH_PADDOCK_ENV) {
        Some(path) => {
            println!("bench spawn: {BENCH_PADDOCK_ENV}={}", Path::new(&path).display());
            PathBuf::from(path)
        }
        None => crate::build::release(root)?,
    };
    let project = std::env::temp_dir().join("paddock-bench-project");
    let baseline = std::env::temp_dir().join("paddock-bench-baseline");
    std::fs::create_dir_all(&project)?;
    let plan = Command::new(&paddock)
        .args(["plan", "--json", "--itemize", "off", "-C"])
        .arg(&project)
        .args(["--", "true"])
        .output()
        .context("cannot run paddock plan")?;
    if !plan.status.success() {
        bail!("paddock plan failed: {}", String::from_utf8_lossy(&plan.stderr));
    }
    let json: serde_json::Value = serde_json::from_slice(&plan.stdout)?;
    let bwrap = json["plan"]["program"].as_str().context("the plan has no program")?.to_owned();
    let bwrap_args = bare_bwrap_args(&json, &project, &baseline)?;
    // The baseline binds the same mount points, made once in a project of its own (paddock
    // makes and removes its own on every run, in the user's project). Everything made is
    // removed again, also when making the next one fails; parents are made too (the masked
    // file lives in the plan's runtime dir, which no run created).
    let mut made: Vec<PathBuf> = Vec::new();
    if !baseline.exists() {
        std::fs::create_dir(&baseline)?;
        made.push(baseline.clone());
    }
    let made_ok = make_mount_points(&json, &project, &baseline, &mut made);
    let big = std::env::temp_dir().join("paddock-bench-big-project");
    let paddock_task = |dir: &Path, off: bool, task: &[&str]| {
        let mut c = Command::new(&paddock);
        c.arg("run");
        if off {
            c.args(["--itemize", "off"]);
        }
        c.arg("-C").arg(dir).arg("--").args(task).current_dir(dir).env_remove("PADDOCK_ITEMIZE");
        c
    };
    let paddock_run = |dir: &Path, off: bool| paddock_task(dir, off, &["true"]);
    run(cargo().args(["build", "--release", "-p", "paddock", "--example", "spawn_timing"]))?;
    let example = crate::target_dir(root).join("release/examples/spawn_timing");
    // The shipped supervisor (`build.rs`), as an installed library user would point to.
    let supervisor = paddock.with_file_name("paddock-supervisor");
    let stats = made_ok.and_then(|()| make_big_project(&big)).and_then(|()| {
        interleaved(&mut [
            &mut || timed(Command::new("/bin/true")),
            // The runner's own start and exit, doing nothing else: a floor no run goes under.
            &mut || {
                let mut c = Command::new(&paddock);
                c.arg("--version");
                timed(c)
            },
            &mut || {
                let mut c = Command::new(&bwrap);
                c.args(SIMPLEST_BWRAP);
                timed(c)
            },
            &mut || {
                let mut c = Command::new(&bwrap);
                c.args(&bwrap_args).current_dir(&baseline);
                timed(c)
            },
            // paddock with the project as the user has it: it places and removes its
            // placeholders (mount points for missing protected names) on every run.
            &mut || timed(paddock_run(&project, true)),
            // And as run by default: itemized by the observers where the host has them (a
            // FUSE mount in a namespace of the child's own, the notify filter).
            &mut || timed(paddock_run(&project, false)),
            // The same two in a project with 50 protected names and 20 deny entries.
            &mut || timed(paddock_run(&big, true)),
            &mut || timed(paddock_run(&big, false)),
            // A task that writes a file at once, in the simplest sandbox and by default: its
            // first write is a notified call, which starts the notifications' server.
            &mut || {
                let mut c = Command::new(&bwrap);
                c.args(&SIMPLEST_BWRAP[..SIMPLEST_BWRAP.len() - 1]).args(WRITES_A_FILE);
                timed(c)
            },
            &mut || timed(paddock_task(&project, false, WRITES_A_FILE)),
            // The library in a task runner's process, in the same rounds: its first spawn
            // and its second (two series).
            &mut || library_round(&example, &supervisor, &project),
        ])
    });
    for path in made.iter().rev() {
        let _ = std::fs::remove_dir(path).or_else(|_| std::fs::remove_file(path));
    }
    let stats = stats?;
    let [
        bare,
        runner,
        simplest,
        bare_bwrap,
        off,
        default,
        big_off,
        big_default,
        simplest_writes,
        default_writes,
        cold,
        warm,
    ] = stats[..]
    else {
        bail!("one result per series expected");
    };
    let prewarmed = prewarmed_rounds(&example, &supervisor, &project)?;
    let _ = std::fs::remove_dir_all(&big);
    println!(
        "bench spawn: {RUNS} interleaved rounds (prewarmed: {} processes after), median (min, max):",
        RUNS / 20 + 1
    );
    println!("  bare true:                         {bare}");
    println!("  paddock --version (runner alone):  {runner}");
    println!("  simplest bwrap sandbox (baseline): {simplest}");
    println!("  bare bwrap, paddock's bwrap setup: {bare_bwrap}");
    println!("  paddock run --itemize off:         {off}");
    println!("  paddock run (default, itemized):   {default}");
    println!("  big policy, --itemize off:         {big_off}");
    println!("  big policy, default:               {big_default}");
    println!("  simplest bwrap, a task that writes: {simplest_writes}");
    println!("  paddock run, a task that writes:   {default_writes}");
    println!("  library spawn+wait, cold:          {cold}");
    println!("  library spawn+wait, warm:          {warm}");
    println!("  library spawn+wait, prewarmed:     {prewarmed}");
    println!("against the simplest bwrap sandbox:");
    println!("  paddock run --itemize off:   {}  (target <= 1.25x)", off.ratio(&simplest));
    println!("  paddock run (default):       {}  (target <= 1.5x)", default.ratio(&simplest));
    println!("  big policy, --itemize off:   {}", big_off.ratio(&simplest));
    println!("  big policy, default:         {}", big_default.ratio(&simplest));
    println!(
        "  a task that writes, default: {}  (against the simplest sandbox running it)",
        default_writes.ratio(&simplest_writes)
    );
    println!("  library spawn+wait, cold:    {}", cold.ratio(&simplest));
    println!(
        "  library spawn+wait, warm:    {}  (a second spawn, not prewarmed)",
        warm.ratio(&simplest)
    );
    println!("  library spawn+wait, prewarmed: {}  (target <= 1.0x)", prewarmed.ratio(&simplest));
    println!(
        "  bare bwrap, paddock's bwrap setup: {}  (the supervisor's inner mounts not in it)",
        bare_bwrap.ratio(&simplest)
    );
    println!("  bare true:                   {}", bare.ratio(&simplest));
    // The runner starts bwrap once it runs itself: its own start and exit come on top of any
    // bwrap's, whatever it plans. The floor says how much of a target that leaves.
    let floor = (simplest.median + runner.median).as_secs_f64() / simplest.median.as_secs_f64();
    println!(
        "  runner alone: {}; the floor of any run, the baseline plus it: {floor:.2}x",
        runner.ratio(&simplest)
    );
    Ok(())
}
