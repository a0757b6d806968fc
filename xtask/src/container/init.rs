//! The built-in container runner's pid 1 (`xtask __container-init`): started by `unshare
//! --mount --pid --net --fork` on the host, it lays a fresh overlay of the image's rootfs,
//! mounts `/proc`, `/sys`, a minimal `/dev`, `/tmp` and `/run`, binds the staged test
//! binaries read-only at [`STAGE_MOUNT`], pivots into the rootfs, then starts the suite with
//! the scenario's conditions (a seccomp filter, dropped capabilities, another user) and reaps
//! every orphan until it exits.
//!
//! Everything is done here, in Rust, rather than by a shell script: the images are Debian's
//! `essential` variant, which has no `mount`, and the host's tools are gone after the pivot.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid, pivot_root, setgroups, setresgid, setresuid};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Where the staged binaries appear inside the container.
pub const STAGE_MOUNT: &str = "/opt/paddock";

/// The devices the suite uses, bound from the host into the container's `/dev`.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// What the pid 1 is asked to do; passed as arguments by [`InitSpec::to_args`].
#[derive(Clone, Debug, Default)]
pub struct InitSpec {
    /// The image's rootfs (read-only lower layer).
    pub rootfs: PathBuf,
    /// An empty directory for this run's overlay (upper, work and merged directories).
    pub scratch: PathBuf,
    /// The staged binaries.
    pub stage: PathBuf,
    /// Whether `/dev/fuse` is in the container.
    pub fuse: bool,
    /// Paths inside the rootfs over which `/dev/null` is bound (a missing tool).
    pub hide: Vec<String>,
    /// No user namespaces, as on a host with `user.max_user_namespaces = 0`: that sysctl
    /// reads 0 in the container (a bind over its `/proc` file, so that bubblewrap's
    /// `--unshare-all` does not insist on one), and `clone`/`unshare` with `CLONE_NEWUSER`
    /// fail with `EPERM` (`clone3`: `ENOSYS`) by a seccomp filter on the suite.
    pub block_userns: bool,
    /// Answer the Landlock system calls with `ENOSYS`, as a kernel without Landlock does.
    pub block_landlock: bool,
    /// Drop `CAP_SYS_ADMIN` from every capability set, bounding set included.
    pub drop_sys_admin: bool,
    /// The user the suite runs as (0 or the image's test user).
    pub uid: u32,
    /// The suite's working directory inside the container.
    pub cwd: String,
    /// The suite's whole environment.
    pub env: Vec<(String, String)>,
    /// The command.
    pub argv: Vec<String>,
}

impl InitSpec {
    /// The arguments of `xtask __container-init` that [`InitSpec::parse`] reads back.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            "--rootfs".into(),
            self.rootfs.clone().into(),
            "--scratch".into(),
            self.scratch.clone().into(),
            "--stage".into(),
            self.stage.clone().into(),
            "--uid".into(),
            self.uid.to_string().into(),
            "--cwd".into(),
            self.cwd.clone().into(),
        ];
        for (flag, on) in [
            ("--fuse", self.fuse),
            ("--block-userns", self.block_userns),
            ("--block-landlock", self.block_landlock),
            ("--drop-sys-admin", self.drop_sys_admin),
        ] {
            if on {
                out.push(flag.into());
            }
        }
        for h in &self.hide {
            out.extend(["--hide".into(), h.into()]);
        }
        for (k, v) in &self.env {
            out.extend(["--env".into(), format!("{k}={v}").into()]);
        }
        out.push("--".into());
        out.extend(self.argv.iter().map(OsString::from));
        out
    }

    /// Reads what [`InitSpec::to_args`] wrote.
    pub fn parse(args: &[String]) -> Result<InitSpec> {
        let mut spec = InitSpec::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().cloned().with_context(|| format!("{a} needs a value"));
            match a.as_str() {
                "--rootfs" => spec.rootfs = value()?.into(),
                "--scratch" => spec.scratch = value()?.into(),
                "--stage" => spec.stage = value()?.into(),
                "--uid" => spec.uid = value()?.parse()?,
                "--cwd" => spec.cwd = value()?,
                "--fuse" => spec.fuse = true,
                "--block-userns" => spec.block_userns = true,
                "--block-landlock" => spec.block_landlock = true,
                "--drop-sys-admin" => spec.drop_sys_admin = true,
                "--hide" => spec.hide.push(value()?),
                "--env" => {
                    let kv = value()?;
                    let (k, v) = kv.split_once('=').context("--env takes NAME=VALUE")?;
                    spec.env.push((k.to_owned(), v.to_owned()));
                }
                "--" => {
                    spec.argv = it.by_ref().cloned().collect();
                    break;
                }
                other => bail!("__container-init: unknown argument {other}"),
            }
        }
        if spec.argv.is_empty() {
            bail!("__container-init: no command");
        }
        Ok(spec)
    }
}

/// The pid 1: sets the container up, runs the suite, reaps, and exits with the suite's
/// status.
pub fn main(args: &[String]) -> Result<()> {
    let spec = InitSpec::parse(args)?;
    if std::process::id() != 1 {
        bail!("__container-init must be the pid 1 of a new pid namespace (unshare --pid --fork)");
    }
    enter_rootfs(&spec)?;
    bring_loopback_up();
    // Compiled before the fork: the child only installs them.
    let filters = scenario_filters(&spec)?;
    let mut cmd = Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..]).env_clear().envs(spec.env.iter().cloned()).current_dir(&spec.cwd);
    let uid = spec.uid;
    let drop_sys_admin = spec.drop_sys_admin;
    // SAFETY: the closure runs in the forked child of this single-threaded process before
    // exec; it installs precompiled filters, changes credentials and capability sets, and
    // allocates nothing but what those calls need (no lock can be held by another thread).
    unsafe {
        cmd.pre_exec(move || {
            for f in &filters {
                seccompiler::apply_filter(f).map_err(std::io::Error::other)?;
            }
            if uid != 0 {
                let (u, g) = (Uid::from_raw(uid), Gid::from_raw(uid));
                setgroups(&[g])?;
                setresgid(g, g, g)?;
                setresuid(u, u, u)?;
            } else if drop_sys_admin {
                let cap = caps::Capability::CAP_SYS_ADMIN;
                caps::drop(None, caps::CapSet::Bounding, cap).map_err(std::io::Error::other)?;
                for set in
                    [caps::CapSet::Inheritable, caps::CapSet::Effective, caps::CapSet::Permitted]
                {
                    caps::drop(None, set, cap).map_err(std::io::Error::other)?;
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("cannot start {}", spec.argv[0]))?;
    let child = Pid::from_raw(child.id() as i32);
    // As pid 1, reap every orphan too; exit with the suite's own status.
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => std::process::exit(code),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                std::process::exit(128 + sig as i32)
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => bail!("waiting for the suite: {e}"),
        }
    }
}

/// Mounts the overlay and the pseudo filesystems, binds the stage, and pivots into the new
/// root; the old root is detached.
fn enter_rootfs(spec: &InitSpec) -> Result<()> {
    let none: Option<&str> = None;
    // Nothing mounted here may propagate back to the host.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .context("making / private")?;
    let (upper, work, merged) =
        (spec.scratch.join("upper"), spec.scratch.join("work"), spec.scratch.join("merged"));
    for d in [&upper, &work, &merged] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        spec.rootfs.display(),
        upper.display(),
        work.display()
    );
    mount(Some("overlay"), &merged, Some("overlay"), MsFlags::empty(), Some(options.as_str()))
        .context("mounting the rootfs overlay")?;
    let at = |p: &str| merged.join(p.trim_start_matches('/'));
    mount(Some("proc"), &at("/proc"), Some("proc"), MsFlags::empty(), none)
        .context("mounting /proc")?;
    if spec.block_userns {
        let zero = spec.scratch.join("max_user_namespaces");
        std::fs::write(&zero, b"0\n")?;
        bind(&zero, &at("/proc/sys/user/max_user_namespaces"), true)?;
    }
    mount(Some("sysfs"), &at("/sys"), Some("sysfs"), MsFlags::MS_RDONLY, none)
        .context("mounting /sys")?;
    let tmpfs = |dir: &Path, mode: &str| -> Result<()> {
        std::fs::create_dir_all(dir)?;
        mount(Some("tmpfs"), dir, Some("tmpfs"), MsFlags::empty(), Some(mode))
            .with_context(|| format!("mounting a tmpfs on {}", dir.display()))
    };
    tmpfs(&at("/dev"), "mode=0755")?;
    tmpfs(&at("/tmp"), "mode=1777")?;
    tmpfs(&at("/run"), "mode=0755")?;
    tmpfs(&at("/dev/shm"), "mode=1777")?;
    let mut devices: Vec<&str> = DEVICES.to_vec();
    if spec.fuse {
        devices.push("fuse");
    }
    for d in devices {
        let target = at(&format!("/dev/{d}"));
        std::fs::write(&target, b"")?;
        bind(Path::new(&format!("/dev/{d}")), &target, false)?;
    }
    std::fs::create_dir_all(at("/dev/pts"))?;
    mount(
        Some("devpts"),
        &at("/dev/pts"),
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .context("mounting /dev/pts")?;
    for (link, to) in [
        ("/dev/ptmx", "pts/ptmx"),
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, at(link))?;
    }
    std::fs::create_dir_all(at(STAGE_MOUNT))?;
    bind(&spec.stage, &at(STAGE_MOUNT), true)?;
    for h in &spec.hide {
        let target = at(h);
        if target.exists() {
            bind(Path::new("/dev/null"), &target, true)?;
        }
    }
    let old = merged.join(".oldroot");
    std::fs::create_dir_all(&old)?;
    pivot_root(&merged, &old).context("pivot_root into the rootfs")?;
    std::env::set_current_dir("/")?;
    umount2("/.oldroot", MntFlags::MNT_DETACH).context("detaching the old root")?;
    let _ = std::fs::remove_dir("/.oldroot");
    Ok(())
}

/// Binds `from` onto `to`, read-only (and nosuid, nodev) when asked: a second, remounting
/// call, since a bind ignores those flags.
fn bind(from: &Path, to: &Path, read_only: bool) -> Result<()> {
    let none: Option<&str> = None;
    mount(Some(from), to, none, MsFlags::MS_BIND | MsFlags::MS_REC, none)
        .with_context(|| format!("binding {} on {}", from.display(), to.display()))?;
    if read_only {
        // nosuid and nodev too, as the host's suite hides strace: the sandbox's own mounts
        // are checked for nosuid (PRC-06).
        let flags = MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV;
        mount(none, to, none, flags, none)
            .with_context(|| format!("making {} read-only", to.display()))?;
    }
    Ok(())
}

/// The container's network namespace starts with `lo` down; the suite's servers listen
/// on loopback.
fn bring_loopback_up() {
    for ip in ["/usr/sbin/ip", "/sbin/ip", "/bin/ip", "/usr/bin/ip"] {
        if Path::new(ip).exists() {
            let _ = Command::new(ip).args(["link", "set", "lo", "up"]).status();
            return;
        }
    }
    eprintln!("xtask: no `ip` in the image: loopback stays down");
}

/// The scenario's seccomp filters, compiled (one per errno).
fn scenario_filters(spec: &InitSpec) -> Result<Vec<BpfProgram>> {
    let arch = TargetArch::x86_64;
    let mut out = Vec::new();
    if spec.block_userns {
        let newuser = libc::CLONE_NEWUSER as u64;
        let flag = |arg: u8| -> Result<Vec<SeccompRule>> {
            let cond = SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(newuser),
                newuser,
            )?;
            Ok(vec![SeccompRule::new(vec![cond])?])
        };
        let rules: BTreeMap<i64, Vec<SeccompRule>> =
            [(libc::SYS_unshare, flag(0)?), (libc::SYS_clone, flag(0)?)].into_iter().collect();
        out.push(compile(rules, libc::EPERM, arch)?);
        // clone3 passes its flags in memory, out of a filter's sight: refuse it whole, and
        // the C library falls back to clone.
        out.push(compile([(libc::SYS_clone3, vec![])].into_iter().collect(), libc::ENOSYS, arch)?);
    }
    if spec.block_landlock {
        let rules = [
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ]
        .into_iter()
        .map(|n| (n, vec![]))
        .collect();
        out.push(compile(rules, libc::ENOSYS, arch)?);
    }
    Ok(out)
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<BpfProgram> {
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno as u32), arch)?;
    Ok(filter.try_into()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_survives_its_arguments() {
        let spec = InitSpec {
            rootfs: "/r".into(),
            scratch: "/s".into(),
            stage: "/st".into(),
            fuse: true,
            hide: vec!["/usr/bin/strace".into()],
            block_userns: true,
            block_landlock: false,
            drop_sys_admin: true,
            uid: 1000,
            cwd: "/home/tester".into(),
            env: vec![("A".into(), "b=c".into())],
            argv: vec!["/opt/paddock/e2e".into(), "--test-threads=2".into()],
        };
        let args: Vec<String> =
            spec.to_args().into_iter().map(|a| a.into_string().unwrap()).collect();
        let back = InitSpec::parse(&args).unwrap();
        assert_eq!(format!("{back:?}"), format!("{spec:?}"));
    }
}
