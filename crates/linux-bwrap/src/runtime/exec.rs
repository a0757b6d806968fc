//! The one place that turns a [`SpawnPlan`] into a process.
//!
//! It creates the plan's placeholders ([`crate::runtime::runtime_dir::placeholders`]), puts each payload in a memfd
//! at the descriptor number the plan names, hands the read end of the signal pipe to the
//! child, marks every other descriptor close-on-exec (FSR-06, ENV-03: no descriptor the
//! runner inherited reaches the sandbox), clears the environment down to the plan's, and
//! spawns the program in its own process group. Nothing else in the CLI spawns processes.

// This module performs plans: it is the CLI's one caller of `Command::new`.
#![allow(clippy::disallowed_methods)]

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use crate::error::Context;
use crate::observe_fs::ObserverMount;
use crate::runtime::{Result, bail};
use paddock_policy::{AbsPathBuf, Placeholder, SpawnPlan};

use crate::runtime::runtime_dir::placeholders::Placeholders;

/// The byte the supervisor sends up the signal channel once the task has started.
pub const STARTED: u8 = crate::supervisor::STARTED;
/// The byte the supervisor sends up the signal channel once the task has exited and nothing
/// else of the sandbox runs.
pub const EXITED: u8 = crate::supervisor::EXITED;
/// The supervisor asks for a tracer (see `supervise::run_plan_attached`).
pub const TRACE_ME: u8 = crate::supervisor::TRACE_ME;
/// The answer once the tracer is attached.
pub const TRACED: u8 = crate::supervisor::TRACED;

/// A spawned plan: the child, the write end of its signal pipe, and the placeholders to
/// remove when it is done.
#[derive(Debug)]
pub struct Spawned {
    /// The child process (bwrap).
    pub child: SpawnedChild,
    /// The runner's end of the signal channel: one byte per polite signal down; one byte
    /// ([`STARTED`]) up once the task has started, one ([`EXITED`]) once it has exited and
    /// nothing else of the sandbox runs. Dropping it tells the supervisor no more signals
    /// will come.
    pub signal_tx: Option<UnixStream>,
    /// Removes the placeholders on drop.
    pub placeholders: Placeholders,
}

/// A spawned child: its pid (to be reaped by the caller, `wait4`) and the read ends of its
/// output pipes when piped ([`Stream::Piped`]).
#[derive(Debug)]
pub struct SpawnedChild {
    /// The child's pid.
    pub pid: libc::pid_t,
    /// Its stdout, piped.
    pub stdout: Option<File>,
    /// Its stderr, piped.
    pub stderr: Option<File>,
}

impl SpawnedChild {
    /// Waits for it to exit (`waitpid`).
    pub fn wait(&self) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own child with a valid status pointer.
            let rc = unsafe { libc::waitpid(self.pid, &raw mut status, 0) };
            if rc >= 0 {
                return Ok(std::process::ExitStatus::from_raw(status));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Reads its piped output to the end, then waits for it, as
    /// `std::process::Child::wait_with_output` does.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        use std::io::Read;
        let err_reader = self.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                e.read_to_end(&mut buf).map(|_| buf)
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut out) = self.stdout.take() {
            out.read_to_end(&mut stdout)?;
        }
        let stderr = match err_reader {
            Some(t) => t.join().map_err(|_| std::io::Error::other("stderr reader panicked"))??,
            None => Vec::new(),
        };
        let status = self.wait()?;
        Ok(std::process::Output { status, stdout, stderr })
    }

    /// Takes over a child spawned by `std::process::Command`; dropping the `Child` neither
    /// waits for nor kills it.
    fn from_std(mut child: Child) -> std::io::Result<SpawnedChild> {
        let pid = libc::pid_t::try_from(child.id())
            .map_err(|_| std::io::Error::other(format!("child pid {} out of range", child.id())))?;
        Ok(SpawnedChild {
            pid,
            stdout: child.stdout.take().map(|o| File::from(OwnedFd::from(o))),
            stderr: child.stderr.take().map(|e| File::from(OwnedFd::from(e))),
        })
    }
}

/// A sandbox's process started before its plan existed, waiting for it
/// ([`crate::runtime::prespawn::Prespawned`]): a spawn that it fits completes it instead of
/// starting one. A trait, so that this module, the one that spawns, does not depend on how
/// such a process was started.
pub trait Waiting: std::fmt::Debug + Send {
    /// Whether it can run `plan` with `output`, the spawn handing what `shape` says.
    fn fits(&self, plan: &SpawnPlan, output: Output, shape: &SpawnShape) -> bool;
    /// Hands it `plan`, with the observer and the self mounts to make before bwrap reads
    /// it: the child and the runner's end of its signal channel. `after_args` runs once
    /// bwrap has its arguments, before the supervisor gets its payload: what only the
    /// supervisor needs (the placeholders `made_after_the_setup` picks) is made while bwrap
    /// works.
    fn complete(
        self: Box<Self>,
        plan: &SpawnPlan,
        observer: Option<&ObserverMount>,
        self_mounts: &crate::private_ns::SelfMounts,
        after_args: &mut dyn FnMut() -> Result<()>,
    ) -> Result<(SpawnedChild, Option<UnixStream>)>;
}

/// What a spawn hands its child besides the plan, for [`Waiting::fits`].
#[derive(Debug)]
pub struct SpawnShape {
    /// The targets of the extra descriptors (a tracer's log, the observers' record pipe).
    pub extra: Vec<RawFd>,
    /// The targets of the inherited channels (port grants).
    pub inherits: Vec<RawFd>,
    /// Whether there is an observer to mount.
    pub observer: bool,
    /// Whether there are paths to mount onto themselves before bwrap.
    pub self_mounts: bool,
}

/// Where one of the child's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The runner's own.
    Inherit,
    /// `/dev/null`.
    Null,
    /// A pipe the runner reads (stdout, stderr) or writes (stdin).
    Piped,
}

/// How the child's stdin, stdout and stderr are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    /// Its stdin.
    pub stdin: Stream,
    /// Its stdout.
    pub stdout: Stream,
    /// Its stderr.
    pub stderr: Stream,
}

impl Output {
    /// All three streams the runner's own.
    pub const INHERIT: Output =
        Output { stdin: Stream::Inherit, stdout: Stream::Inherit, stderr: Stream::Inherit };
    /// stdin the runner's, stdout and stderr piped to the runner.
    pub const PIPED: Output =
        Output { stdin: Stream::Inherit, stdout: Stream::Piped, stderr: Stream::Piped };
}

impl Default for Output {
    fn default() -> Output {
        Output::INHERIT
    }
}

/// What bwrap, or a mount made before it reads its arguments (a self mount, a protected
/// link), uses: each path its arguments and those mounts name, and every directory above
/// one. A placeholder at none of them is only the supervisor's (an inner mount).
fn used_before_the_supervisor(plan: &SpawnPlan) -> HashSet<&Path> {
    let fields = bwrap_fields(plan).filter(|f| f.is_absolute());
    let before = plan
        .self_mounts
        .iter()
        .flat_map(|m| std::iter::once(&m.path).chain(m.source.as_ref()))
        .chain(&plan.link_mounts)
        .map(AbsPathBuf::as_path);
    fields.chain(before).flat_map(Path::ancestors).collect()
}

/// The fields of bwrap's arguments (its setup, NUL-separated), as paths.
fn bwrap_fields(plan: &SpawnPlan) -> impl Iterator<Item = &Path> {
    let args = plan.payloads.iter().filter(|p| p.fd == crate::ARGS_FD);
    args.flat_map(|p| p.bytes.split(|b| *b == 0)).map(|f| Path::new(std::ffi::OsStr::from_bytes(f)))
}

/// The placeholders that may be made once bwrap has its arguments, while it works: those
/// only the supervisor mounts (at no path [`used_before_the_supervisor`]) whose directory
/// is the root of a write grant bwrap binds (`--bind SRC DEST`) or the supervisor attaches
/// from the runner's clone ([`SpawnPlan::grant_clones`]): the user's own directory, which no
/// run removes. One in any other directory is made before the stamps: that
/// directory may be another run's placeholder (`.git` made by a run, `.git/hooks` this
/// run's), kept from removal under this run's stamp of it only by this run's placeholder
/// inside; made later, the other run's release could take the directory away first (the
/// e2e crowd test saw `.git` disappear in one run of eight, under load). Nor is one with
/// another placeholder below it: that one is made first, and needs its directory.
fn made_after_the_setup(plan: &SpawnPlan) -> impl Fn(&Placeholder) -> bool + '_ {
    let used = used_before_the_supervisor(plan);
    // A grant the supervisor attaches from the runner's clone is one too (bwrap makes its
    // directory alone).
    let mut grant_roots: HashSet<&Path> =
        plan.grant_clones.iter().map(|g| g.path.as_path()).collect();
    let mut fields = bwrap_fields(plan);
    while let Some(field) = fields.next() {
        if field == Path::new("--bind") {
            let _source = fields.next();
            grant_roots.extend(fields.next());
        }
    }
    move |p: &Placeholder| {
        let path = p.path.as_path();
        !used.contains(path)
            && path.parent().is_some_and(|dir| grant_roots.contains(dir))
            && !plan.placeholders.iter().any(|q| q.path != p.path && q.path.starts_with(&p.path))
    }
}

/// Spawns `plan`. `runtime_dir`, when given, receives the placeholder manifest before any
/// placeholder is created.
pub fn spawn(plan: &SpawnPlan, output: Output, runtime_dir: Option<&Path>) -> Result<Spawned> {
    spawn_with(plan, output, runtime_dir, Vec::new(), &[], None, None)
}

/// [`spawn`], also handing the child each `(descriptor, target)` of `extra` (a tracer's log
/// pipe) and of `inherit` (a port grant's channel, shared with the caller). A child given
/// `extra` descriptors is a tracer wrapping the sandbox: it gets
/// `SIGKILL` when the runner dies (`PR_SET_PDEATHSIG`), as bwrap does with
/// `--die-with-parent`, so that a `kill -9` of paddock takes the tracer and the sandbox.
///
/// With `observer` (`--itemize observe`), the child first enters the observer's private
/// namespace and mounts it ([`ObserverMount::enter`]), before any descriptor is moved, so
/// that bwrap starts nested in that namespace.
///
/// `prespawned` (a bwrap started before the plan existed, see [`crate::runtime::prespawn`]) gets the
/// plan when it fits; otherwise it is killed and the plan spawned as usual.
pub fn spawn_with(
    plan: &SpawnPlan,
    output: Output,
    runtime_dir: Option<&Path>,
    extra: Vec<(OwnedFd, RawFd)>,
    inherit: &[(Arc<OwnedFd>, RawFd)],
    observer: Option<&ObserverMount>,
    prespawned: Option<Box<dyn Waiting>>,
) -> Result<Spawned> {
    let self_mounts = crate::private_ns::SelfMounts::new(&plan.link_mounts, &plan.self_mounts)
        .map_err(crate::Error::run)?;
    let shape = SpawnShape {
        extra: extra.iter().map(|e| e.1).collect(),
        inherits: inherit.iter().map(|e| e.1).collect(),
        observer: observer.is_some(),
        self_mounts: !self_mounts.is_empty(),
    };
    let fits = prespawned.as_ref().is_some_and(|pre| pre.fits(plan, output, &shape));
    // An unfitting one is killed first: it never sees this plan's placeholders.
    let prespawned = prespawned.filter(|_| fits);
    // A waiting bwrap reads its arguments before the supervisor reads its payload: the
    // placeholders only the supervisor mounts, at a grant's root, are made in between,
    // while bwrap works.
    let (later, now): (Vec<Placeholder>, Vec<Placeholder>) = match prespawned {
        Some(_) if !plan.placeholders.is_empty() => {
            plan.placeholders.iter().cloned().partition(made_after_the_setup(plan))
        }
        _ => (Vec::new(), plan.placeholders.clone()),
    };
    let mut placeholders = Placeholders::begin(&plan.placeholders, runtime_dir)?;
    placeholders.make(&now)?;
    if later.is_empty() {
        placeholders.finish()?;
    }
    // What the bound paths are, recorded now, before bwrap can read its arguments: the
    // supervisor checks them once everything is mounted (SYM-03). After the placeholders:
    // a concurrent run's placeholder this plan binds is only kept from removal once it is
    // borrowed there. (The placeholders made later are not among these paths.)
    let plan = &*crate::mount_ids::stamped_plan(plan).map_err(crate::Error::run)?;
    if let Some(pre) = prespawned {
        // What it was handed (the record pipe's write end) it has at its place already.
        drop(extra);
        // The write grants' clones too, while bwrap works (it never reads them).
        let mut clones = Vec::new();
        let mut make_later = || -> Result<()> {
            if !later.is_empty() {
                placeholders.make(&later)?;
                placeholders.finish()?;
            }
            clones = crate::grant_clones::clone_all(plan)?;
            Ok(())
        };
        let (child, signal_tx) = pre.complete(plan, observer, &self_mounts, &mut make_later)?;
        crate::grant_clones::hand_over(&child, signal_tx.as_ref(), &clones)?;
        return Ok(Spawned { child, signal_tx, placeholders });
    }
    let clones = crate::grant_clones::clone_all(plan)?;

    // The descriptors the child gets, as (source, target) pairs.
    let mut keep: Vec<OwnedFd> = Vec::new();
    let mut pairs: Vec<(RawFd, RawFd)> = Vec::new();
    let die_with_parent = !extra.is_empty();
    for (fd, target) in extra {
        pairs.push((fd.as_raw_fd(), target));
        keep.push(fd);
    }
    pairs.extend(inherit.iter().map(|(fd, target)| (fd.as_raw_fd(), *target)));
    for payload in &plan.payloads {
        let fd = memfd_with(&payload.name, &payload.bytes)
            .with_context(|| format!("cannot prepare the {} payload", payload.name))?;
        pairs.push((fd.as_raw_fd(), payload.fd));
        keep.push(fd);
    }
    if let Some(first) = plan.device_fds {
        let clones = crate::devices::clone_host_devices()
            .context("cannot clone the host's device nodes for the sandbox's /dev")?;
        for (target, fd) in (first..).zip(clones) {
            pairs.push((fd.as_raw_fd(), target));
            keep.push(fd);
        }
        // The task's stdout, a terminal: its `/dev/console`, as bwrap's `--dev` makes one.
        let terminal = (output.stdout == Stream::Inherit)
            .then(crate::devices::stdout_terminal)
            .flatten()
            .and_then(|path| crate::devices::clone_terminal(&path).ok());
        if let Some(fd) = terminal {
            pairs.push((fd.as_raw_fd(), crate::devices::CONSOLE_FD));
            keep.push(fd);
        }
    }
    for file in &plan.file_fds {
        let fd = open_read_only(file.path.as_path())
            .with_context(|| format!("cannot open {} for the sandbox", file.path))?;
        pairs.push((fd.as_raw_fd(), file.fd));
        keep.push(fd);
    }
    let mut signal_tx = None;
    if let Some(target) = plan.signal_fd {
        // A stream socket pair rather than a pipe: the supervisor reads polite signals from
        // it and writes back one byte once the task has started, which is how a sandbox
        // that failed to set up (bwrap's own error, exit 1) is told from a task exiting 1.
        let (ours, theirs) = signal_channel()?;
        pairs.push((theirs.as_raw_fd(), target));
        keep.push(OwnedFd::from(theirs));
        signal_tx = Some(ours);
    }
    let mut targets: Vec<RawFd> = pairs.iter().map(|p| p.1).collect();
    targets.sort_unstable();
    if targets.windows(2).any(|w| w[0] == w[1]) || targets.iter().any(|t| *t < 3) {
        bail!("the plan hands two payloads the same descriptor, or one below 3");
    }
    let max_target = targets.last().copied().unwrap_or(2);

    // Without anything to do between fork and exec but moving descriptors, the child is
    // spawned without a copy of this process: see `spawn_posix`.
    if observer.is_none() && !die_with_parent && self_mounts.is_empty() {
        let child = spawn_posix(plan, output, &pairs, max_target).map_err(|source| {
            crate::Error::Spawn { program: plan.program.as_path().to_path_buf(), source }
        })?;
        drop(keep);
        crate::grant_clones::hand_over(&child, signal_tx.as_ref(), &clones)?;
        return Ok(Spawned { child, signal_tx, placeholders });
    }

    let mut cmd = Command::new(plan.program.as_path());
    if let Some((argv0, rest)) = plan.argv.split_first() {
        cmd.arg0(argv0).args(rest);
    }
    cmd.env_clear().envs(plan.env.iter().map(|(k, v)| (k, v))).current_dir(plan.cwd.as_path());
    let std_stdio = |s: Stream| match s {
        Stream::Inherit => Stdio::inherit(),
        Stream::Null => Stdio::null(),
        Stream::Piped => Stdio::piped(),
    };
    // A piped stdin gets nothing written: it reads as `/dev/null` does.
    let stdin = if output.stdin == Stream::Piped { Stream::Null } else { output.stdin };
    cmd.stdin(std_stdio(stdin)).stdout(std_stdio(output.stdout)).stderr(std_stdio(output.stderr));
    cmd.process_group(0);
    let observer = observer.cloned();
    // The observer's mount enters the private namespace; protected links and the paths
    // mounted onto themselves need it too.
    let namespace = (observer.is_none() && !self_mounts.is_empty())
        .then(crate::private_ns::PrivateNamespace::for_this_process);
    // SAFETY: the closure makes only async-signal-safe syscalls (the namespaces' unshare,
    // open, write and mount, the links' open_tree, mount_setattr and move_mount, the
    // observer's sendmsg; prctl, fcntl, dup2, close_range) on data prepared before the
    // fork, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(observer) = &observer {
                observer.enter()?;
            } else if let Some(namespace) = &namespace {
                namespace.enter()?;
            }
            self_mounts.mount()?;
            if die_with_parent {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            }
            place_fds(&pairs, max_target)
        });
    }
    let child = cmd.spawn().map_err(|source| {
        let source = if plan.link_mounts.is_empty() && plan.self_mounts.is_empty() {
            source
        } else {
            let paths: Vec<String> = plan
                .link_mounts
                .iter()
                .chain(plan.self_mounts.iter().map(|m| &m.path))
                .map(|l| l.to_string())
                .collect();
            std::io::Error::new(
                source.kind(),
                format!(
                    "{source} (before it, the protected links and paths {} are mounted on themselves)",
                    paths.join(", ")
                ),
            )
        };
        crate::Error::Spawn { program: plan.program.as_path().to_path_buf(), source }
    })?;
    drop(keep);
    let child = SpawnedChild::from_std(child).map_err(|source| crate::Error::Spawn {
        program: plan.program.as_path().to_path_buf(),
        source,
    })?;
    crate::grant_clones::hand_over(&child, signal_tx.as_ref(), &clones)?;
    Ok(Spawned { child, signal_tx, placeholders })
}

/// The descriptors a child's standard streams are given from (`/dev/null` or a pipe's write
/// end, with the stream's number; an inherited stream has none), and the runner's read ends
/// of the piped ones. A piped stdin reads as `/dev/null` does: the runner writes nothing.
#[derive(Debug, Default)]
pub(crate) struct StreamFds {
    /// (descriptor, 0, 1 or 2).
    pub given: Vec<(OwnedFd, RawFd)>,
    /// The read end of a piped stdout.
    pub stdout: Option<File>,
    /// The read end of a piped stderr.
    pub stderr: Option<File>,
}

impl StreamFds {
    /// Opens what `output` asks for.
    pub(crate) fn open(output: Output) -> std::io::Result<StreamFds> {
        let mut out = StreamFds::default();
        for (fd, stream) in [(0, output.stdin), (1, output.stdout), (2, output.stderr)] {
            let given = match stream {
                Stream::Inherit => continue,
                Stream::Null | Stream::Piped if fd == 0 => {
                    OwnedFd::from(std::fs::OpenOptions::new().read(true).open("/dev/null")?)
                }
                Stream::Null => {
                    OwnedFd::from(std::fs::OpenOptions::new().write(true).open("/dev/null")?)
                }
                Stream::Piped => {
                    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                    *if fd == 1 { &mut out.stdout } else { &mut out.stderr } = Some(File::from(r));
                    w
                }
            };
            out.given.push((given, fd));
        }
        Ok(out)
    }
}

/// Spawns `plan` with `posix_spawn`, which glibc implements with a `CLONE_VM | CLONE_VFORK`
/// child: nothing of this process is copied, where a fork copies its page tables and the
/// child's exec tears the copy down again (0.38 ms more per spawn, measured with an 8 MiB
/// heap). What the forked path's `pre_exec` does is done by spawn attributes and file
/// actions: every descriptor of this process is close-on-exec first (inherited ones too:
/// FSR-06, ENV-03), each payload is duplicated above every target and from there onto its
/// target (which clears close-on-exec there), the child gets its own process group, an
/// empty signal mask, `SIGPIPE` at its default (Rust ignores it, and an ignored signal
/// survives exec; glibc resets every handled one), and the plan's cwd.
fn spawn_posix(
    plan: &SpawnPlan,
    output: Output,
    pairs: &[(RawFd, RawFd)],
    max_target: RawFd,
) -> std::io::Result<SpawnedChild> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use nix::sys::signal::{SigSet, Signal};
    use nix::unistd::Pid;

    let cstr = |b: &[u8]| {
        CString::new(b).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let program = cstr(plan.program.as_os_str().as_bytes())?;
    let mut argv: Vec<CString> =
        plan.argv.iter().map(|a| cstr(a.as_bytes())).collect::<std::io::Result<_>>()?;
    if argv.is_empty() {
        argv.push(program.clone());
    }
    let envp: Vec<CString> = plan
        .env
        .iter()
        .map(|(k, v)| cstr(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<std::io::Result<_>>()?;
    let cwd = cstr(plan.cwd.as_os_str().as_bytes())?;

    let mut actions = PosixSpawnFileActions::init()?;
    // The streams' descriptors are moved above every target with the payloads: one opened
    // at a payload's number would be overwritten there before it reached its stream.
    let streams = StreamFds::open(output)?;
    let mut all: Vec<(RawFd, RawFd)> = pairs.to_vec();
    all.extend(streams.given.iter().map(|(fd, dst)| (fd.as_raw_fd(), *dst)));
    let mut moved: Vec<OwnedFd> = Vec::with_capacity(all.len());
    for (high, dst) in moved_above(&all, max_target)? {
        actions.add_dup2(high.as_raw_fd(), dst)?;
        moved.push(high);
    }
    unshared_descriptors(&mut actions, &all, max_target)?;
    let readers = (streams.stdout, streams.stderr);
    // SAFETY: `PosixSpawnFileActions` is `repr(transparent)` over the libc type; the path
    // is a valid NUL-terminated string that outlives the call (glibc copies it).
    let rc = unsafe {
        libc::posix_spawn_file_actions_addchdir_np(
            std::ptr::from_mut(&mut actions).cast::<libc::posix_spawn_file_actions_t>(),
            cwd.as_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut default = SigSet::empty();
    default.add(Signal::SIGPIPE);
    // glibc's child sets its two internal signals (32 and 33, blocked around the clone) to
    // SIG_IGN unless they are in this set, and an ignored signal survives every exec down to
    // the task: those this process has at their default stay there (one it inherited
    // ignored stays ignored, as a fork would pass it on). glibc's own sigaddset refuses
    // them, so their bits are set by hand.
    let mut default: libc::sigset_t = *default.as_ref();
    // SAFETY: glibc's sigset_t is an array of unsigned longs, signal N at bit N-1.
    let words = unsafe {
        std::slice::from_raw_parts_mut(
            std::ptr::from_mut(&mut default).cast::<libc::c_ulong>(),
            std::mem::size_of::<libc::sigset_t>() / std::mem::size_of::<libc::c_ulong>(),
        )
    };
    let bits = libc::c_ulong::BITS as usize;
    for sig in [32usize, 33] {
        if !ignored_here(sig) {
            words[(sig - 1) / bits] |= 1 << ((sig - 1) % bits);
        }
    }
    // SAFETY: `PosixSpawnAttr` is `repr(transparent)` over the libc type; the set is valid.
    let rc = unsafe {
        libc::posix_spawnattr_setsigdefault(
            std::ptr::from_mut(&mut attr).cast::<libc::posix_spawnattr_t>(),
            &default,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let pid = posix_spawn(program.as_c_str(), &actions, &attr, &argv, &envp)?;
    drop(moved);
    Ok(SpawnedChild { pid: pid.as_raw(), stdout: readers.0, stderr: readers.1 })
}

/// The `posix_spawn` child's part of the descriptor sweep (FSR-06, ENV-03), after its
/// descriptors are placed: with glibc, every other one above 2 is closed there, those above
/// the targets by one action (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34) and
/// those between them one by one (closing one that is not open is no error there). Other C
/// libraries have no such action: this process's descriptors are marked close-on-exec
/// instead, which the `paddock` binary built for musl may do (its process is all its own).
fn unshared_descriptors(
    actions: &mut nix::spawn::PosixSpawnFileActions,
    pairs: &[(RawFd, RawFd)],
    max_target: RawFd,
) -> std::io::Result<()> {
    #[cfg(target_env = "gnu")]
    {
        for fd in (3..=max_target).filter(|fd| !pairs.iter().any(|p| p.1 == *fd)) {
            actions.add_close(fd)?;
        }
        // SAFETY: `PosixSpawnFileActions` is `repr(transparent)` over the libc type.
        let rc = unsafe {
            libc::posix_spawn_file_actions_addclosefrom_np(
                std::ptr::from_mut(actions).cast::<libc::posix_spawn_file_actions_t>(),
                max_target + 1,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = (actions, pairs, max_target);
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes flags.
        let rc = unsafe {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC)
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// For a child spawned without a fork of its own (`posix_spawn`, a `vfork`-style child):
/// duplicates each source of `pairs` above every target, close-on-exec. Returns each copy
/// with its target, for the child to `dup2` there (which clears close-on-exec there): a
/// source sitting on another's target is never clobbered. Every other descriptor is the
/// child's to close or mark ([`unshared_descriptors`]), never this process's: a task runner
/// embedding the library keeps the ones it means its own children to inherit (a make
/// jobserver's), which a mark in its own table would take from them.
pub(crate) fn moved_above(
    pairs: &[(RawFd, RawFd)],
    max_target: RawFd,
) -> std::io::Result<Vec<(OwnedFd, RawFd)>> {
    let mut moved = Vec::with_capacity(pairs.len());
    for (src, dst) in pairs {
        // SAFETY: duplicating a descriptor we own to a free number above every target.
        let high = unsafe { libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, max_target + 1) };
        if high < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fcntl returned a fresh descriptor that we now own.
        moved.push((unsafe { OwnedFd::from_raw_fd(high) }, *dst));
    }
    Ok(moved)
}

/// Starts a tracer (strace attaching with `-p`) with `args`, writing its log to `log`: the
/// one descriptor it keeps besides stdin (null), stdout (null) and stderr (ours, for its
/// messages). In a process group of its own (a Ctrl-C at the terminal is the runner's to
/// pass on, not the tracer's to act on), with a scrubbed environment, and killed if the
/// runner dies.
pub fn spawn_tracer(
    program: &AbsPathBuf,
    args: &[std::ffi::OsString],
    log: OwnedFd,
) -> Result<Child> {
    let fd = log.as_raw_fd();
    let mut cmd = Command::new(program.as_path());
    cmd.arg0("strace")
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0);
    // SAFETY: fcntl and prctl with integer arguments, async-signal-safe; nothing allocated.
    unsafe {
        cmd.pre_exec(move || {
            // The log descriptor is close-on-exec everywhere but in the tracer.
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| crate::Error::Spawn {
        program: program.as_path().to_path_buf(),
        source,
    })?;
    drop(log);
    Ok(child)
}

/// In the forked child: moves each source descriptor to its target (first out of the way,
/// so that a source sitting on another's target is not clobbered), then marks every other
/// descriptor above 2 close-on-exec. std's own exec-error pipe is already close-on-exec and
/// keeps working until the exec.
fn place_fds(pairs: &[(RawFd, RawFd)], max_target: RawFd) -> std::io::Result<()> {
    let mut high = [(-1, -1); 64];
    if pairs.len() > high.len() {
        return Err(std::io::Error::from_raw_os_error(libc::EMFILE));
    }
    for (i, (src, dst)) in pairs.iter().enumerate() {
        // SAFETY: duplicating a descriptor we own to a free number above every target.
        let moved = unsafe { libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, max_target + 1) };
        if moved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        high[i] = (moved, *dst);
    }
    for (moved, dst) in high.iter().take(pairs.len()) {
        // SAFETY: dup2 onto the target clears close-on-exec there, which is the point.
        if unsafe { libc::dup2(*moved, *dst) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // Everything in 3..=max_target that is not a target, and everything above it.
    for fd in 3..=max_target {
        if !pairs.iter().any(|p| p.1 == fd) {
            // SAFETY: fcntl on an arbitrary number; EBADF for a closed one is fine.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    let first = u32::try_from(max_target + 1).unwrap_or(3);
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes flags.
    let rc =
        unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if rc != 0 {
        // Kernels before 5.11: mark them one by one.
        for fd in (max_target + 1)..65536 {
            // SAFETY: as above.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}

/// This process's handler for signal `sig` (`SIG_DFL`, `SIG_IGN` or a function), asked of
/// the kernel itself: glibc's sigaction refuses its internal signals. Async-signal-safe.
pub(crate) fn handler_of(sig: usize) -> Option<u64> {
    // The kernel's `struct sigaction` on 64-bit Linux is at most four words, the handler
    // first; it writes the whole struct.
    let mut old = [0u64; 4];
    // SAFETY: rt_sigaction with no new action only writes the old one into a buffer large
    // enough for it; the mask size is the kernel's (8 bytes).
    let rc = unsafe {
        libc::syscall(libc::SYS_rt_sigaction, sig, std::ptr::null::<u64>(), old.as_mut_ptr(), 8)
    };
    (rc == 0).then_some(old[0])
}

fn ignored_here(sig: usize) -> bool {
    handler_of(sig) == Some(libc::SIG_IGN as u64)
}

/// The signal channel: a stream socket pair, the runner's end first. Messages up carry the
/// sender's credentials, its pid translated into our pid namespace: how a supervisor that
/// asks for a tracer is found.
pub(crate) fn signal_channel() -> Result<(UnixStream, UnixStream)> {
    let (ours, theirs) = UnixStream::pair().context("cannot create the signal channel")?;
    nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::PassCred, &true)
        .context("cannot set up the signal channel")?;
    Ok((ours, theirs))
}

/// A memfd named `paddock-NAME` holding `bytes`, read from its start.
pub(crate) fn memfd_with(name: &str, bytes: &[u8]) -> Result<OwnedFd> {
    let cname = CString::new(format!("paddock-{name}")).unwrap_or_default();
    // SAFETY: a valid NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: memfd_create returned a fresh descriptor that we now own.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// `path` opened read-only for a child to have ([`SpawnPlan::file_fds`]), closed on exec in
/// this process.
pub(crate) fn open_read_only(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(OwnedFd::from(std::fs::File::open(path)?))
}

#[cfg(test)]
mod tests;
