//! The e2e suite inside containers built from Debian's packages, under named host
//! conditions: `cargo xtask test-linux --container IMAGE [--scenario NAME]` runs one row,
//! `cargo xtask matrix [--fast]` every row this machine can run, with one table at the end.
//!
//! An image is a rootfs made by `mmdebstrap` from [`PACKAGES`], cached under
//! `target/containers/images/` and keyed by its suite and package list. Each run lays a fresh
//! overlay over it, so nothing a run does reaches the next. The suite's binaries are built on
//! the host and bound read-only into the container (statically linked for images whose C
//! library is older than the host's). The engine is Docker or Podman when they work, else
//! the built-in runner: `unshare --mount --pid --net --fork` and this program's own pid 1
//! ([`init`]), which is what works on a host without a container engine.
//!
//! A [`Scenario`] is a host condition (no user namespaces, no FUSE, no strace, no Landlock,
//! an old bubblewrap, root without `CAP_SYS_ADMIN`) made inside the container, plus what
//! paddock must do there; the suite's `scenario` tests read `PADDOCK_E2E_SCENARIO` and
//! assert it, and the rest of the suite runs under that condition.

pub mod init;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use paddock_test_support::{CI_ENV, FACTS_ENV, Fact, REQUIRE_ENV, required};

use crate::{cargo, is_root, run, target_dir};

/// A Debian release the suite runs on.
#[derive(Clone, Copy, Debug)]
pub struct Image {
    /// `debian-NN`.
    pub name: &'static str,
    /// Debian's code name, for mmdebstrap.
    pub suite: &'static str,
    /// Whether binaries built on this host run there (its C library is at least as new as
    /// Debian 12's); otherwise the suite is built statically linked.
    pub host_binaries: bool,
}

/// The images: the oldest Debian still served, the current one, the next one.
pub const IMAGES: [Image; 3] = [
    Image { name: "debian-11", suite: "bullseye", host_binaries: false },
    Image { name: "debian-12", suite: "bookworm", host_binaries: true },
    Image { name: "debian-13", suite: "trixie", host_binaries: true },
];

/// What the suite needs inside, on top of Debian's `essential` set.
pub const PACKAGES: &[&str] = &[
    "bubblewrap",
    "strace",
    "python3",
    "socat",
    "git",
    "curl",
    "openssl",
    "iproute2",
    "keyutils",
    "openssh-client",
    "ca-certificates",
    "procps",
];

/// The unprivileged user of every image.
const TESTER: (&str, u32) = ("tester", 1000);

/// Bumped when the way an image is made changes, so cached images are rebuilt.
const IMAGE_FORMAT: u32 = 2;

/// Which user runs the suite, in which itemizing mode, and which tests.
#[derive(Clone, Copy, Debug)]
pub struct SuiteRun {
    /// The unprivileged test user rather than root.
    pub unprivileged: bool,
    /// `PADDOCK_E2E_ITEMIZE`: `observe`, `strace` or `auto-strace`.
    pub itemize: &'static str,
    /// A libtest filter (`scenario::` for the scenario's own tests only), or the whole suite.
    pub filter: Option<&'static str>,
}

const fn whole(unprivileged: bool, itemize: &'static str) -> SuiteRun {
    SuiteRun { unprivileged, itemize, filter: None }
}

/// A host condition made inside the container, and what paddock must do there.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Its name (`PADDOCK_E2E_SCENARIO`).
    pub name: &'static str,
    /// The image it needs, when it needs one.
    pub image: Option<&'static str>,
    /// What paddock must do there: the claim the `scenario` tests assert.
    pub expect: &'static str,
    /// Whether `/dev/fuse` is in the container.
    pub fuse: bool,
    /// Whether strace is hidden (`/dev/null` bound over it).
    pub hide_strace: bool,
    /// Whether creating a user namespace fails with `EPERM`.
    pub block_userns: bool,
    /// Whether the Landlock calls fail with `ENOSYS`.
    pub block_landlock: bool,
    /// Whether root runs without `CAP_SYS_ADMIN`.
    pub drop_sys_admin: bool,
    /// The suite's runs.
    pub runs: &'static [SuiteRun],
}

const BASE: Scenario = Scenario {
    name: "base",
    image: None,
    expect: "everything works: `paddock check` passes, `auto` itemizes with the observers",
    fuse: true,
    hide_strace: false,
    block_userns: false,
    block_landlock: false,
    drop_sys_admin: false,
    runs: &[whole(false, "observe"), whole(true, "strace")],
};

/// Every scenario.
pub const SCENARIOS: [Scenario; 7] = [
    BASE,
    Scenario {
        name: "no-userns",
        expect: "no user namespaces (user.max_user_namespaces = 0, creation refused): an \
                 unprivileged `paddock run` exits 125 and `paddock check` fails, \
                 both naming user namespaces and the fix; root still runs every wall without one",
        block_userns: true,
        runs: &[
            whole(false, "observe"),
            SuiteRun { unprivileged: true, itemize: "observe", filter: Some("scenario::") },
        ],
        ..BASE
    },
    Scenario {
        name: "no-fuse",
        expect: "no /dev/fuse: `auto` itemizes with strace (--seccomp-bpf) and `check` says why",
        fuse: false,
        runs: &[whole(false, "auto-strace"), whole(true, "auto-strace")],
        ..BASE
    },
    Scenario {
        name: "no-strace",
        expect: "no strace: `check` names the install line, `auto` observes, `learn` refuses \
                 with the fix",
        hide_strace: true,
        runs: &[whole(false, "observe"), whole(true, "observe")],
        ..BASE
    },
    Scenario {
        name: "no-landlock",
        expect: "Landlock answers ENOSYS and there is no /dev/fuse: `auto` runs bubblewrap under \
                 strace (never the task untraced) and `check` says Landlock is missing",
        fuse: false,
        block_landlock: true,
        runs: &[whole(false, "auto-strace"), whole(true, "auto-strace")],
        ..BASE
    },
    Scenario {
        name: "old-bwrap",
        image: Some("debian-11"),
        expect: "bubblewrap 0.4 (no --disable-userns): `check` flags it with the upgrade; an \
                 unprivileged run is refused (125) naming the version and the upgrade; root \
                 runs keep every wall",
        runs: &[
            whole(false, "observe"),
            SuiteRun { unprivileged: true, itemize: "observe", filter: Some("scenario::") },
        ],
        ..BASE
    },
    Scenario {
        name: "root-no-caps",
        expect: "root without CAP_SYS_ADMIN: bubblewrap goes through a user namespace and every \
                 wall holds",
        drop_sys_admin: true,
        runs: &[whole(false, "observe")],
        ..BASE
    },
];

/// The rows `cargo xtask matrix --fast` (and so CI) runs.
pub const FAST_ROWS: [(&str, &str); 2] = [("debian-13", "base"), ("debian-13", "no-userns")];

/// Every row: each image with no condition, and each condition on the newest image (or the
/// image it needs).
pub fn all_rows() -> Vec<(&'static str, &'static str)> {
    let mut rows: Vec<(&str, &str)> =
        IMAGES.iter().filter(|i| i.host_binaries).map(|i| (i.name, "base")).collect();
    for s in SCENARIOS.iter().filter(|s| s.name != "base") {
        rows.push((s.image.unwrap_or("debian-13"), s.name));
    }
    rows
}

fn image(name: &str) -> Result<Image> {
    IMAGES.iter().copied().find(|i| i.name == name).with_context(|| {
        let names: Vec<&str> = IMAGES.iter().map(|i| i.name).collect();
        format!("no image {name}: pick one of {}", names.join(", "))
    })
}

fn scenario(name: &str) -> Result<Scenario> {
    SCENARIOS.iter().copied().find(|s| s.name == name).with_context(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        format!("no scenario {name}: pick one of {}", names.join(", "))
    })
}

/// What one row gave.
#[derive(Clone, Debug, Default)]
pub struct RowResult {
    /// `image/scenario`.
    pub row: String,
    /// Tests passed, over the row's runs.
    pub passed: u32,
    /// Tests failed.
    pub failed: u32,
    /// Skip reasons with their counts.
    pub skipped: BTreeMap<String, u32>,
    /// Why the row could not run at all.
    pub error: Option<String>,
    /// Wall time.
    pub wall: Duration,
}

/// `cargo xtask test-linux --container IMAGE [--scenario NAME]`.
pub fn test_linux_container(root: &Path, args: &[String]) -> Result<()> {
    let mut image_name = None;
    let mut scenario_name = "base".to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--container" => image_name = it.next().cloned(),
            "--scenario" => {
                scenario_name = it.next().cloned().context("--scenario needs a name")?
            }
            other => bail!("test-linux: unknown argument {other}"),
        }
    }
    let image_name = image_name.context("--container needs an image name")?;
    let result = run_row(root, &image_name, &scenario_name)?;
    print_table(std::slice::from_ref(&result));
    if result.failed > 0 || result.error.is_some() {
        bail!("the row {} failed", result.row);
    }
    Ok(())
}

/// `cargo xtask matrix [--fast]`: every row (or CI's subset), one table; fails when a row
/// fails.
pub fn matrix(root: &Path, args: &[String]) -> Result<()> {
    let fast = args.iter().any(|a| a == "--fast");
    let rows: Vec<(&str, &str)> = if fast { FAST_ROWS.to_vec() } else { all_rows() };
    let mut results = Vec::new();
    for (image_name, scenario_name) in rows {
        let result = match run_row(root, image_name, scenario_name) {
            Ok(r) => r,
            Err(e) => RowResult {
                row: format!("{image_name}/{scenario_name}"),
                error: Some(format!("{e:#}")),
                ..RowResult::default()
            },
        };
        results.push(result);
    }
    print_table(&results);
    let bad: Vec<&str> = results
        .iter()
        .filter(|r| r.failed > 0 || r.error.is_some())
        .map(|r| r.row.as_str())
        .collect();
    if !bad.is_empty() {
        bail!("matrix rows failed: {}", bad.join(", "));
    }
    Ok(())
}

fn print_table(results: &[RowResult]) {
    println!();
    println!("| row | passed | failed | skipped | wall |");
    println!("|---|---|---|---|---|");
    for r in results {
        let skipped = if let Some(e) = &r.error {
            format!("row did not run: {e}")
        } else if r.skipped.is_empty() {
            "0".to_owned()
        } else {
            let n: u32 = r.skipped.values().sum();
            let reasons: Vec<String> =
                r.skipped.iter().map(|(why, count)| format!("{count}x {why}")).collect();
            format!("{n} ({})", reasons.join("; "))
        };
        println!("| {} | {} | {} | {} | {:.0?} |", r.row, r.passed, r.failed, skipped, r.wall);
    }
}

/// Builds what the row needs and runs its suite runs, each in a fresh container.
fn run_row(root: &Path, image_name: &str, scenario_name: &str) -> Result<RowResult> {
    let started = Instant::now();
    let image = image(image_name)?;
    let scenario = scenario(scenario_name)?;
    if let Some(needed) = scenario.image.filter(|n| *n != image.name) {
        bail!("scenario {} runs on {needed} only", scenario.name);
    }
    if !is_root() {
        bail!("the container runs need root (mounts, namespaces, the test user)");
    }
    let base = target_dir(root).join("containers");
    let rootfs = ensure_image(&base, image)?;
    let stage = stage_binaries(root, &base, image)?;
    eprintln!("xtask: {}/{}: {}", image.name, scenario.name, scenario.expect);
    let mut result =
        RowResult { row: format!("{}/{}", image.name, scenario.name), ..RowResult::default() };
    for (i, suite) in scenario.runs.iter().enumerate() {
        let who = if suite.unprivileged { TESTER.0 } else { "root" };
        eprintln!(
            "xtask: container {} / {}: the suite as {who}, itemizing with {}",
            image.name, scenario.name, suite.itemize
        );
        let log = base.join("logs").join(format!("{}-{}-{i}-{who}.log", image.name, scenario.name));
        let output = run_in_container(&base, &rootfs, &stage, &scenario, suite, &log)?;
        tally(&output, &mut result);
        if !output.contains("test result:") {
            result.failed += 1;
            result.error =
                Some(format!("the suite as {who} reported no result: see {}", log.display()));
        }
    }
    result.wall = started.elapsed();
    Ok(result)
}

/// Adds a run's `test result:` lines and `SKIPPED` lines to the row.
fn tally(output: &str, result: &mut RowResult) {
    for line in output.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("test result:") {
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(kind), Some(n)) = (words.next(), words.next()) else { continue };
                let Ok(n) = n.trim_end_matches('.').parse::<u32>() else { continue };
                match kind {
                    "passed" => result.passed += n,
                    "failed" => result.failed += n,
                    _ => {}
                }
            }
        } else if let Some(why) = line.trim_start().strip_prefix("SKIPPED: ") {
            // `SKIPPED: TEST: REASON [FACT]` (paddock-test-support): counted by reason.
            let why = why.split_once(": ").map_or(why, |(_, reason)| reason).trim();
            *result.skipped.entry(why.to_owned()).or_default() += 1;
        }
    }
}

/// The image's rootfs, made by mmdebstrap unless a cached one matches its package list.
fn ensure_image(base: &Path, image: Image) -> Result<PathBuf> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (IMAGE_FORMAT, image.suite, PACKAGES).hash(&mut hasher);
    let key = format!("{}-{:016x}", image.name, hasher.finish());
    let images = base.join("images");
    let dir = images.join(&key);
    if dir.join(".paddock-image").exists() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&images)?;
    // Older images of this name are stale now.
    for entry in std::fs::read_dir(&images)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{}-", image.name)) && name != key {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    if Command::new("mmdebstrap").arg("--version").output().is_err() {
        bail!("mmdebstrap is not installed: `apt-get install -y mmdebstrap`");
    }
    let partial = images.join(format!("{key}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    eprintln!("xtask: building the {} rootfs with mmdebstrap", image.name);
    run(Command::new("mmdebstrap")
        .args(["--quiet", "--variant=essential", "--mode=root"])
        .arg(format!("--include={}", PACKAGES.join(",")))
        .arg(image.suite)
        .arg(&partial))
    .with_context(|| {
        format!(
            "building the {} image (does Debian's mirror still serve {}?)",
            image.name, image.suite
        )
    })?;
    add_tester(&partial)?;
    // What a container engine writes into every container: the minimal images have none,
    // and the suite's labs and `localhost` need them.
    std::fs::write(
        partial.join("etc/hosts"),
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    )?;
    std::fs::write(partial.join(".paddock-image"), key.as_bytes())?;
    std::fs::rename(&partial, &dir)?;
    Ok(dir)
}

/// Adds the unprivileged test user to the rootfs (the `essential` variant has no useradd).
fn add_tester(rootfs: &Path) -> Result<()> {
    use std::io::Write;
    let (name, id) = TESTER;
    let append = |file: &str, line: String| -> Result<()> {
        let mut f = std::fs::OpenOptions::new().append(true).open(rootfs.join(file))?;
        f.write_all(line.as_bytes())?;
        Ok(())
    };
    append("etc/passwd", format!("{name}:x:{id}:{id}::/home/{name}:/bin/sh\n"))?;
    append("etc/group", format!("{name}:x:{id}:\n"))?;
    let home = rootfs.join("home").join(name);
    std::fs::create_dir_all(&home)?;
    std::os::unix::fs::chown(&home, Some(id), Some(id))?;
    Ok(())
}

/// The binaries the suite needs, staged where the test user can read them: the host's
/// build, or a static build for an image with an older C library.
fn stage_binaries(root: &Path, base: &Path, image: Image) -> Result<PathBuf> {
    let (bin_dir, suite) = if image.host_binaries {
        run(cargo().args(["build", "-p", "paddock", "-p", "paddock-tests"]))?;
        (target_dir(root).join("debug"), crate::e2e::suite_binary()?)
    } else {
        static_build(root)?
    };
    let stage = base.join(format!("stage-{}", if image.host_binaries { "host" } else { "static" }));
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)?;
    std::fs::copy(&suite, stage.join("e2e"))
        .with_context(|| format!("staging {}", suite.display()))?;
    for name in ["paddock", "paddock-supervisor", "paddock-supervisor-nolibc", "paddock-probe"] {
        let src = bin_dir.join(name);
        if src.exists() {
            std::fs::copy(&src, stage.join(name))
                .with_context(|| format!("staging {}", src.display()))?;
        }
    }
    run(Command::new("chmod").args(["-R", "a+rX,go-w"]).arg(&stage))?;
    Ok(stage)
}

/// The target the static build names, so that build scripts and proc macros stay dynamic.
const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";

/// `paddock`, its supervisors, the probe and the suite linked statically, for images whose
/// C library is older than the host's.
fn static_build(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let dir = target_dir(root).join("static");
    let flags = [("RUSTFLAGS", "-C target-feature=+crt-static")];
    run(cargo()
        .args(["build", "--target", STATIC_TARGET, "-p", "paddock", "-p", "paddock-tests"])
        .env("CARGO_TARGET_DIR", &dir)
        .envs(flags))?;
    let extra: Vec<(String, String)> = vec![
        ("CARGO_TARGET_DIR".to_owned(), dir.display().to_string()),
        ("RUSTFLAGS".to_owned(), flags[0].1.to_owned()),
    ];
    let suite = crate::e2e::suite_binary_with(&["--target", STATIC_TARGET], &extra)?;
    Ok((dir.join(STATIC_TARGET).join("debug"), suite))
}

/// Runs one suite run in a fresh container; returns its output (also written to `log`).
fn run_in_container(
    base: &Path,
    rootfs: &Path,
    stage: &Path,
    scenario: &Scenario,
    suite: &SuiteRun,
    log: &Path,
) -> Result<String> {
    let scratch = base.join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let (uid, home) = if suite.unprivileged {
        (TESTER.1, format!("/home/{}", TESTER.0))
    } else {
        (0, "/root".to_owned())
    };
    let stage_in = init::STAGE_MOUNT;
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".to_owned(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
        ),
        ("HOME".to_owned(), home.clone()),
        (
            "USER".to_owned(),
            if suite.unprivileged { TESTER.0.to_owned() } else { "root".to_owned() },
        ),
        ("PADDOCK_BIN".to_owned(), format!("{stage_in}/paddock")),
        ("PADDOCK_PROBE".to_owned(), format!("{stage_in}/paddock-probe")),
        ("PADDOCK_E2E_TMP".to_owned(), format!("{home}/e2e")),
        ("PADDOCK_E2E_ITEMIZE".to_owned(), suite.itemize.to_owned()),
        ("PADDOCK_E2E_SCENARIO".to_owned(), scenario.name.to_owned()),
    ];
    // The conditions this run sets up on purpose: a test they stop may skip even under CI
    // (paddock-test-support's facts); any other skip fails where tests are required.
    let mut facts = vec![Fact::ToolchainAbsent];
    for (on, fact) in [
        (suite.unprivileged, Fact::Unprivileged),
        (scenario.hide_strace, Fact::StraceHidden),
        (!scenario.fuse, Fact::FuseHidden),
        (scenario.block_userns, Fact::UsernsUnavailable),
        (scenario.block_landlock, Fact::LandlockUnavailable),
        (scenario.drop_sys_admin && !suite.unprivileged, Fact::NoSysAdmin),
        (scenario.name == "old-bwrap", Fact::OldBwrap),
    ] {
        if on {
            facts.push(fact);
        }
    }
    let names: Vec<&str> = facts.iter().map(|f| f.name()).collect();
    env.push((FACTS_ENV.to_owned(), names.join(",")));
    if required() {
        env.push((CI_ENV.to_owned(), "true".to_owned()));
        env.push((REQUIRE_ENV.to_owned(), "1".to_owned()));
    }
    let mut argv =
        vec![format!("{stage_in}/e2e"), "--test-threads=2".to_owned(), "--nocapture".to_owned()];
    argv.extend(suite.filter.map(str::to_owned));
    let spec = init::InitSpec {
        rootfs: rootfs.to_path_buf(),
        scratch: scratch.clone(),
        stage: stage.to_path_buf(),
        fuse: scenario.fuse,
        hide: if scenario.hide_strace {
            ["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"].map(str::to_owned).to_vec()
        } else {
            Vec::new()
        },
        block_userns: scenario.block_userns,
        block_landlock: scenario.block_landlock,
        drop_sys_admin: scenario.drop_sys_admin && !suite.unprivileged,
        uid,
        cwd: home,
        env,
        argv,
    };
    let xtask = std::env::current_exe().context("cannot find xtask's own binary")?;
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child", "--"])
        .arg(&xtask)
        .arg("__container-init")
        .args(spec.to_args())
        .stdin(Stdio::null());
    std::fs::create_dir_all(log.parent().unwrap_or(base))?;
    let out = cmd.output().context("cannot start unshare (util-linux)")?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    std::fs::write(log, &text)?;
    let _ = std::fs::remove_dir_all(&scratch);
    if !out.status.success() {
        // The tail says what failed; the whole log is kept.
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for line in tail.iter().rev() {
            eprintln!("  {line}");
        }
        eprintln!("xtask: the suite failed ({}); its log: {}", out.status, log.display());
    }
    Ok(text)
}
