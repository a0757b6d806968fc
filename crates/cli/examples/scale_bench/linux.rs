//! `cargo xtask bench scale`: the start-up walk of the project on a generated project of
//! 100,000 files with 50 nested repositories (and protected names below the root): the
//! walk without its cache (targets: under 30 ms), a second run through the cache (under
//! 5 ms), the whole resolution with the walk and its walls, and the walk of a small project
//! through its cache (what every run of an ordinary project pays).
//!
//! The project is generated once under `target/scale-bench/` and reused; every figure is
//! the median of many rounds, with the file system's caches warm.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;

const FILES: usize = 100_000;
const TOP: usize = 50;
const SUB: usize = 20;
const REPOS: usize = 50;
const ROUNDS: usize = 41;

fn generate(root: &Path) -> std::io::Result<()> {
    let done = root.join(".generated");
    if done.exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(root);
    let per_dir = FILES / (TOP * SUB);
    for t in 0..TOP {
        for s in 0..SUB {
            let dir = root.join(format!("src{t:02}/mod{s:02}"));
            std::fs::create_dir_all(&dir)?;
            for f in 0..per_dir {
                std::fs::write(dir.join(format!("file{f:03}.rs")), b"")?;
            }
        }
        if t % 10 == 0 {
            std::fs::create_dir_all(root.join(format!("src{t:02}/.vscode")))?;
            std::fs::write(root.join(format!("src{t:02}/.vscode/settings.json")), b"{}")?;
        }
    }
    for r in 0..REPOS {
        let git = root.join(format!("src{:02}/vendor/repo{r:02}/.git", r % TOP));
        for d in ["hooks", "objects/pack", "refs/heads", "info"] {
            std::fs::create_dir_all(git.join(d))?;
        }
        std::fs::write(git.join("HEAD"), b"ref: refs/heads/main\n")?;
        std::fs::write(git.join("config"), b"[core]\n\tbare = false\n")?;
    }
    std::fs::create_dir_all(root.join(".git/hooks"))?;
    std::fs::write(root.join(".git/HEAD"), b"ref: refs/heads/main\n")?;
    std::fs::write(root.join(".git/config"), b"[core]\n")?;
    std::fs::write(root.join(".gitignore"), b"vendor/\n")?;
    std::fs::write(&done, b"")?;
    Ok(())
}

/// The CPU time this process (all its threads) has used.
fn cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The median wall time of `f`, and its median CPU time: on a machine whose CPUs are
/// shared and busy, the wall time includes waiting for a CPU; the CPU time is the walk's
/// own cost.
fn median_cpu(mut f: impl FnMut()) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(ROUNDS);
    let mut cpus = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let (t, c) = (Instant::now(), cpu());
        f();
        times.push(t.elapsed());
        cpus.push(cpu().saturating_sub(c));
    }
    times.sort();
    cpus.sort();
    (times[ROUNDS / 2], cpus[ROUNDS / 2])
}

fn median(f: impl FnMut()) -> Duration {
    median_cpu(f).0
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

pub fn main() -> anyhow::Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let root = target.join("scale-bench/project");
    let t = Instant::now();
    generate(&root)?;
    let root = root.canonicalize()?;
    eprintln!(
        "project: {} ({FILES} files, {REPOS} nested repositories), ready in {:.1} s",
        root.display(),
        t.elapsed().as_secs_f64()
    );
    // Stamps younger than the racy window are listed again on every walk.
    std::thread::sleep(Duration::from_secs(3));

    let policy = paddock_policy::default_policy();
    let names = paddock_linux_bwrap::runtime::walk::Names::new(
        paddock_linux_bwrap::runtime::project_walk::depth_names(&policy),
    );
    let cache_dir = target.join("scale-bench/cache");
    let _ = std::fs::remove_dir_all(&cache_dir);
    let cache = paddock_linux_bwrap::runtime::walk::cache::file_for(&cache_dir, &root);

    let first = paddock_linux_bwrap::runtime::walk::walk(&root, &names, None);
    let repos = first.hits.iter().filter(|h| h.path.ends_with(".git")).count();
    println!(
        "walk found {} .git ({} nested), {} protected names below the root, in {} directories",
        repos,
        repos.saturating_sub(1),
        first.hits.len() - repos,
        first.dirs
    );
    let (full, full_cpu) = median_cpu(|| {
        let w = paddock_linux_bwrap::runtime::walk::walk(&root, &names, None);
        assert_eq!(w.hits.len(), first.hits.len());
    });
    let _ = std::fs::remove_file(&cache);
    let _ = paddock_linux_bwrap::runtime::walk::walk(&root, &names, Some(&cache));
    let (cached, cached_cpu) = median_cpu(|| {
        let w = paddock_linux_bwrap::runtime::walk::walk(&root, &names, Some(&cache));
        assert!(w.cached && w.listed == 0, "{w:?}");
        assert_eq!(w.hits.len(), first.hits.len());
    });
    // One directory changed since the last run (a file made), as after most tasks.
    let touched = root.join("src07/mod03/new-file");
    let one_changed = median(|| {
        std::fs::write(&touched, b"").ok();
        let w = paddock_linux_bwrap::runtime::walk::walk(&root, &names, Some(&cache));
        std::fs::remove_file(&touched).ok();
        assert!(w.cached);
    });
    // The baseline, interleaved in spirit: `find` listing the same tree (no stat but
    // directories'), on the same machine, now.
    #[allow(clippy::disallowed_methods)] // The benchmark starts find, what it compares with.
    let find = median(|| {
        let ok = std::process::Command::new("find")
            .arg(&root)
            .args(["-name", ".git", "-prune", "-o", "-type", "d", "-printf", ""])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "find failed");
    });
    println!("baseline: find over the same tree: {}", ms(find));
    println!(
        "walk, no cache:              {} (target: under 30 ms; {:.2}x find)",
        ms(full),
        full.as_secs_f64() / find.as_secs_f64()
    );
    println!("walk, no cache, CPU time (both threads): {}", ms(full_cpu));
    println!("walk, second run (cache):    {} (target: under 5 ms)", ms(cached));
    println!("walk, second run (cache), CPU time: {}", ms(cached_cpu));
    println!("walk, cache, one dir changed: {}", ms(one_changed));

    // The whole start-up of `paddock plan` up to the plan: config, resolution, the walk
    // through the runtime base's cache, the walls for what it found.
    let cli = paddock::cli::args::Cli::parse_from([
        "paddock",
        "plan",
        "-C",
        root.to_str().unwrap_or("."),
        "--",
        "true",
    ]);
    let paddock::cli::args::Command::Plan(args) = &cli.command else { anyhow::bail!("not a plan") };
    let loaded = paddock::cli::load::load(&args.policy)?;
    let load = median(|| {
        let l = paddock::cli::load::load(&args.policy).ok();
        assert!(l.is_some());
    });
    println!(
        "load (resolve + walk through the cache + walls): {} ({} protected paths, {} pinned)",
        ms(load),
        loaded.resolved.protected.len(),
        loaded.resolved.pinned.len()
    );

    // A small project: what an ordinary run pays for the walk on the spawn path.
    let small = target.join("scale-bench/small");
    for d in ["src", ".git/hooks", "tests"] {
        std::fs::create_dir_all(small.join(d))?;
    }
    std::fs::write(small.join("src/main.rs"), b"fn main() {}\n")?;
    let small = small.canonicalize()?;
    let small_cache = paddock_linux_bwrap::runtime::walk::cache::file_for(&cache_dir, &small);
    std::thread::sleep(Duration::from_secs(3));
    let _ = paddock_linux_bwrap::runtime::walk::walk(&small, &names, Some(&small_cache));
    let small_cached = median(|| {
        let w = paddock_linux_bwrap::runtime::walk::walk(&small, &names, Some(&small_cache));
        assert!(w.cached);
    });
    // A run's placeholders change the project root: it is listed again and the records
    // written back, before and after the task.
    let marker = small.join(".bashrc");
    let small_root_changed = median(|| {
        std::fs::write(&marker, b"").ok();
        let w = paddock_linux_bwrap::runtime::walk::walk(&small, &names, Some(&small_cache));
        std::fs::remove_file(&marker).ok();
        assert!(w.cached);
    });
    println!("walk of a small project (4 dirs), cache: {:.1} us", small_cached.as_secs_f64() * 1e6);
    println!(
        "walk of a small project, root changed (listed, records written): {:.1} us",
        small_root_changed.as_secs_f64() * 1e6
    );
    Ok(())
}
