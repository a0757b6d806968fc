//! The binaries as they ship (`cargo xtask build`, `dist`, the benches, the e2e matrix).
//!
//! On x86-64 Linux `paddock` and `paddock-supervisor` are built for musl
//! (`x86_64-unknown-linux-musl`, static by default), and `paddock-supervisor-nolibc` without a C
//! library at all ([`nolibc_supervisor`]). A static glibc spends about 0.55 ms of every start
//! asking the CPU what it is (`cpuid`, each an exit to the hypervisor in a virtual machine:
//! `paddock --version` takes 1.0 ms against musl's 0.44 ms here), and the runner's start is
//! on every run's path: bwrap is started from it. The binaries then use the allocator of
//! `paddock::allocator` (musl's own made the planning twice as slow). Where rustup cannot
//! install the musl target, the glibc build is linked statically instead ([`static_paddock`],
//! [`static_supervisor`]), as before, and this says so.
//!
//! The library is not concerned: a program embedding paddock is built for its own target.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::{cargo, run, target_dir};

/// The target the shipped binaries are built for, where it can be had.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// Builds the shipped binaries (release; see the module doc) and returns `paddock`'s path,
/// the other two beside it. The glibc release build of the package is made too: the library's
/// examples and the test helpers the benches start are built for the host.
pub fn release(root: &Path) -> Result<PathBuf> {
    run(cargo().args(["build", "--release", "-p", "paddock"]))?;
    if let Some(dir) = musl(root, true)? {
        return Ok(dir.join("paddock"));
    }
    static_paddock(true);
    static_supervisor(true);
    nolibc_supervisor(true, None);
    Ok(target_dir(root).join("release/paddock"))
}

/// Builds the three binaries for [`MUSL_TARGET`] (release or debug profile) and returns their
/// directory; `None` (having said why) where that target is not x86-64 Linux's or rustup
/// cannot install it. A failing build is an error.
pub fn musl(root: &Path, release: bool) -> Result<Option<PathBuf>> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Ok(None);
    }
    if !rustup_target(MUSL_TARGET) {
        eprintln!(
            "xtask: the {MUSL_TARGET} target cannot be installed (`rustup target add {MUSL_TARGET}`): paddock is built with a static glibc instead, which starts about 0.5 ms slower"
        );
        return Ok(None);
    }
    let mut cmd = cargo();
    cmd.args(["build", "-p", "paddock", "--bins", "--target", MUSL_TARGET]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    nolibc_supervisor(release, Some(MUSL_TARGET));
    let profile = if release { "release" } else { "debug" };
    Ok(Some(target_dir(root).join(MUSL_TARGET).join(profile)))
}

/// Whether rustup has `target`, installing it when it can (the musl build here, the macOS
/// type-check in `ci`).
pub fn rustup_target(target: &str) -> bool {
    let listed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    if listed.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == target)) {
        return true;
    }
    Command::new("rustup").args(["target", "add", target]).status().is_ok_and(|s| s.success())
}

/// Links `paddock-supervisor` statically (release or debug profile), over the one `cargo
/// build` made. Without glibc's static libraries (Debian: libc6-dev) the dynamic one stays,
/// and this says so.
pub fn static_supervisor(release: bool) {
    if let Err(e) =
        relink(release, None, "paddock-supervisor", &["-C", "target-feature=+crt-static"])
    {
        eprintln!(
            "xtask: paddock-supervisor stays dynamically linked ({e:#}); install glibc's static libraries (libc6-dev) for the static one"
        );
    }
}

/// Links `bin` of the `paddock` package again with `rustc_flags` for it alone (`cargo rustc`),
/// over the one `cargo build` made (release or debug profile, the host's target or `target`).
fn relink(release: bool, target: Option<&str>, bin: &str, rustc_flags: &[&str]) -> Result<()> {
    let mut cmd = cargo();
    cmd.arg("rustc");
    if release {
        cmd.arg("--release");
    }
    if let Some(target) = target {
        cmd.args(["--target", target]);
    }
    cmd.args(["-p", "paddock", "--bin", bin, "--"]).args(rustc_flags);
    run(&mut cmd)
}

/// Links `paddock` statically (release or debug profile), over the one `cargo build` made,
/// when glibc is 2.34 or later: from then on glibc has `/etc/hosts` and DNS built in, the
/// only name services a static paddock uses (see its `main.rs`). Every run then starts
/// without the dynamic loader's work and libgcc_s's constructor (0.6 ms here). Otherwise, or
/// when linking fails, the dynamic one stays, and this says so.
pub fn static_paddock(release: bool) {
    let version = Command::new("getconf").arg("GNU_LIBC_VERSION").output();
    let version =
        version.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let recent = version
        .trim()
        .strip_prefix("glibc 2.")
        .and_then(|minor| minor.split('.').next()?.parse::<u32>().ok())
        .is_some_and(|minor| minor >= 34);
    if !recent {
        eprintln!(
            "xtask: paddock stays dynamically linked: glibc 2.34 or later has the name services a static paddock needs ({})",
            version.trim()
        );
        return;
    }
    if let Err(e) = relink(release, None, "paddock", &["-C", "target-feature=+crt-static"]) {
        eprintln!(
            "xtask: paddock stays dynamically linked ({e:#}); install glibc's static libraries (libc6-dev) for the static one"
        );
    }
}

/// Builds `paddock-supervisor-nolibc` without a C library (release or debug profile), over
/// the std program `cargo build` made of it for the host or `target` (see its module doc):
/// `no_std` by its cfg, the panic strategy `abort` (core has no unwinder without std),
/// non-PIE (nothing relocates it), and linked without start files or libraries (it has its
/// own `_start` and the memory functions the compiler calls). x86-64 Linux only; elsewhere, or when this fails, the std
/// program stays, and this says so.
pub fn nolibc_supervisor(release: bool, target: Option<&str>) {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        eprintln!(
            "xtask: paddock-supervisor-nolibc is built without a C library on x86-64 Linux only"
        );
        return;
    }
    let mut flags = vec![
        ["--cfg", "paddock_nolibc"],
        ["-C", "panic=abort"],
        ["-C", "relocation-model=static"],
        ["-C", "target-feature=+crt-static"],
        ["-C", "link-arg=-nostartfiles"],
        ["-C", "link-arg=-nostdlib"],
    ];
    // Not the start files a musl target brings along either. Only there: on the glibc
    // target rustc links with its own `rust-lld`, which the same flag takes away
    // ("collect2: fatal error: cannot find 'ld'").
    if target == Some(MUSL_TARGET) {
        flags.push(["-C", "link-self-contained=no"]);
    }
    if let Err(e) = relink(release, target, "paddock-supervisor-nolibc", flags.as_flattened()) {
        eprintln!(
            "xtask: paddock-supervisor-nolibc stays linked with the C library ({e:#}); untraced runs start about 0.3 ms later"
        );
    }
}
