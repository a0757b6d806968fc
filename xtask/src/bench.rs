//! `cargo xtask bench spawn`: whole-process timing of `paddock run -- true` against the
//! equivalent bare `bwrap` invocation (the same mount arguments, taken from the plan) and
//! bare `true`, median of many runs, printed as ratios.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, run};

mod trace;

const RUNS: usize = 60;

/// Dispatches `bench NAME`.
pub fn run_bench(root: &Path, name: Option<&str>) -> Result<()> {
    match name {
        Some("spawn") => spawn(root),
        Some("trace") => trace::trace(root),
        Some("bridge") => bridge(root),
        _ => bail!("usage: cargo xtask bench spawn|trace|bridge"),
    }
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

fn median(cmd: &mut dyn FnMut() -> Command) -> Result<Duration> {
    median_of(RUNS, cmd)
}

/// The median wall time of `runs` runs of `cmd` (after 3 warm-up runs), output discarded.
fn median_of(runs: usize, cmd: &mut dyn FnMut() -> Command) -> Result<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs + 3 {
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
        times.push(elapsed);
    }
    times.drain(..3); // warm-up
    times.sort();
    Ok(times[times.len() / 2])
}

fn spawn(root: &Path) -> Result<()> {
    run(cargo().args(["build", "--release", "-p", "paddock"]))?;
    let paddock = crate::target_dir(root).join("release/paddock");
    let project = std::env::temp_dir().join("paddock-bench-project");
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
    let payloads = json["plan"]["payloads"].as_array().context("the plan has no payloads")?;
    let args_text = payloads
        .iter()
        .find(|p| p["name"].as_str().is_some_and(|n| n.contains("bwrap")))
        .and_then(|p| p["bytes"].as_str())
        .context("the plan has no bwrap argument payload")?;
    let mut bwrap_args: Vec<String> =
        args_text.split('\u{2400}').filter(|a| !a.is_empty()).map(str::to_owned).collect();
    // Replace the supervisor command after `--` by plain `true`: the baseline is bwrap with
    // the same mounts and nothing of paddock's.
    if let Some(i) = bwrap_args.iter().position(|a| a == "--") {
        bwrap_args.truncate(i);
    }
    // Mounts fed from paddock's file descriptors become the same mounts from /dev/null.
    let mut baseline = Vec::with_capacity(bwrap_args.len());
    let mut i = 0;
    while i < bwrap_args.len() {
        match bwrap_args[i].as_str() {
            "--perms" => i += 2,
            "--ro-bind-data" | "--bind-data" | "--file" if i + 2 < bwrap_args.len() => {
                baseline.extend([
                    "--ro-bind".to_owned(),
                    "/dev/null".to_owned(),
                    bwrap_args[i + 2].clone(),
                ]);
                i += 3;
            }
            _ => {
                baseline.push(bwrap_args[i].clone());
                i += 1;
            }
        }
    }
    let mut bwrap_args = baseline;
    bwrap_args.push("--".to_owned());
    bwrap_args.push("/bin/true".to_owned());
    let bare = median(&mut || Command::new("/bin/true"))?;
    // paddock first, with the project as the user has it: it makes and removes its
    // placeholders (mount points for missing protected names) on every run.
    let ours = median(&mut || {
        let mut c = Command::new(&paddock);
        c.args(["run", "--itemize", "off", "-C"])
            .arg(&project)
            .args(["--", "true"])
            .current_dir(&project);
        c
    })?;
    // And as run by default: itemized by the observers where the host has them (a FUSE
    // mount in a namespace of the child's own, the notify filter).
    let observed = median(&mut || {
        let mut c = Command::new(&paddock);
        c.args(["run", "-C"])
            .arg(&project)
            .args(["--", "true"])
            .current_dir(&project)
            .env_remove("PADDOCK_ITEMIZE");
        c
    })?;
    // The baseline needs the same mount points to exist; they are made once for it.
    // Everything made here is removed again, also when making the next one fails; parents
    // are made too (the masked file lives in the plan's runtime dir, which no run created).
    let mut made: Vec<std::path::PathBuf> = Vec::new();
    let mut make = || -> Result<()> {
        for p in json["plan"]["placeholders"].as_array().into_iter().flatten() {
            let Some(path) = p["path"].as_str() else { continue };
            let path = std::path::PathBuf::from(path);
            let mut missing: Vec<std::path::PathBuf> = path
                .ancestors()
                .skip(1)
                .take_while(|a| !a.exists())
                .map(Path::to_path_buf)
                .collect();
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
    };
    let made_ok = make();
    let bare_bwrap = made_ok.and_then(|()| {
        median(&mut || {
            let mut c = Command::new(&bwrap);
            c.args(&bwrap_args).current_dir(&project);
            c
        })
    });
    for path in made.iter().rev() {
        let _ = std::fs::remove_dir(path).or_else(|_| std::fs::remove_file(path));
    }
    let bare_bwrap = bare_bwrap?;
    println!("bench spawn, median of {RUNS} runs:");
    println!("  bare true:          {bare:>10.2?}");
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
    println!("  ratio paddock / bare true:  {:.1}x", ours.as_secs_f64() / bare.as_secs_f64());
    Ok(())
}
