//! `cargo xtask bench spawn`: whole-process timing of `paddock run -- true` against the
//! simplest bubblewrap sandbox a user would write instead ([`SIMPLEST_BWRAP`]), the
//! equivalent bare `bwrap` invocation (the same mount arguments, taken from the plan) and
//! bare `true`, median of many interleaved rounds, printed as ratios. `bench unix-socket`:
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

/// Runs each command once per round, round after round (`RUNS` rounds after 3 warm-up
/// rounds), output discarded, and returns each one's median wall time. Interleaved, so that
/// a machine that gets slower or faster meanwhile moves every configuration alike.
fn interleaved_medians(cmds: &mut [&mut dyn FnMut() -> Command]) -> Result<Vec<Duration>> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(RUNS); cmds.len()];
    for round in 0..RUNS + 3 {
        for (i, cmd) in cmds.iter_mut().enumerate() {
            let mut c = cmd();
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
            if round >= 3 {
                times[i].push(elapsed);
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort();
            t[t.len() / 2]
        })
        .collect())
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
    let paddock = crate::build_release(root)?;
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
    let medians = made_ok.and_then(|()| {
        interleaved_medians(&mut [
            &mut || Command::new("/bin/true"),
            &mut || {
                let mut c = Command::new(&bwrap);
                c.args(SIMPLEST_BWRAP);
                c
            },
            &mut || {
                let mut c = Command::new(&bwrap);
                c.args(&bwrap_args).current_dir(&baseline);
                c
            },
            // paddock with the project as the user has it: it places and removes its
            // placeholders (mount points for missing protected names) on every run.
            &mut || {
                let mut c = Command::new(&paddock);
                c.args(["run", "--itemize", "off", "-C"])
                    .arg(&project)
                    .args(["--", "true"])
                    .current_dir(&project);
                c
            },
            // And as run by default: itemized by the observers where the host has them (a
            // FUSE mount in a namespace of the child's own, the notify filter).
            &mut || {
                let mut c = Command::new(&paddock);
                c.args(["run", "-C"])
                    .arg(&project)
                    .args(["--", "true"])
                    .current_dir(&project)
                    .env_remove("PADDOCK_ITEMIZE");
                c
            },
        ])
    });
    for path in made.iter().rev() {
        let _ = std::fs::remove_dir(path).or_else(|_| std::fs::remove_file(path));
    }
    let [bare, simplest, bare_bwrap, ours, observed] = medians?[..] else {
        bail!("one median per configuration expected");
    };
    println!("bench spawn, median of {RUNS} interleaved rounds:");
    println!("  bare true:          {bare:>10.2?}");
    println!("  simplest bwrap sandbox:   {simplest:>10.2?}");
    println!("  bare bwrap (same mounts): {bare_bwrap:>10.2?}");
    println!("  paddock run --itemize off: {ours:>10.2?}");
    println!("  paddock run (default: itemized): {observed:>10.2?}");
    println!(
        "  ratio paddock --itemize off / bare bwrap: {:.2}x   (target <= 1.30x)",
        ours.as_secs_f64() / bare_bwrap.as_secs_f64()
    );
    println!(
        "  ratio paddock itemized / bare bwrap:      {:.2}x",
        observed.as_secs_f64() / bare_bwrap.as_secs_f64()
    );
    println!(
        "  ratio paddock --itemize off / simplest bwrap: {:.2}x",
        ours.as_secs_f64() / simplest.as_secs_f64()
    );
    println!(
        "  ratio paddock itemized / simplest bwrap:      {:.2}x",
        observed.as_secs_f64() / simplest.as_secs_f64()
    );
    println!("  ratio paddock / bare true:  {:.1}x", ours.as_secs_f64() / bare.as_secs_f64());
    Ok(())
}
