//! bwrap started before its plan exists, so that its start-up overlaps the runner's.
//!
//! bwrap spends about 0.65 ms after its exec (loading its libraries, reading the kernel's
//! overflow ids, probing SELinux) before it reads its arguments from [`ARGS_FD`]; the runner
//! spends about as long after its own start loading the config, resolving the policy,
//! planning and placing the placeholders. Every plan has the same bwrap command line
//! ([`paddock_linux_bwrap::bwrap_argv`]) and payload descriptors, so bwrap can start first
//! and wait, blocked on an empty pipe at [`ARGS_FD`], with empty memfds at the payload
//! descriptors and the signal channel at [`SIGNAL_FD`]. Once planned, the payloads are
//! written into the memfds, then the arguments into the pipe, which is closed: bwrap goes
//! on. A plan that needs anything else (an observer namespace, a tracer around bwrap,
//! inherited channels, piped output) is spawned as usual and the waiting bwrap is killed.
//!
//! The overlap needs the two on different CPUs. After a spawn the kernel often wakes the
//! runner on the CPU the new child runs on (half of the runs on a 2-CPU machine with
//! `posix_spawn`), where they take turns while another CPU idles, and the runner cannot move
//! the child away since it does not get to run. So bwrap is started by a `vfork`-style child
//! of our own ([`paddock_linux_bwrap::vfork`]) that first moves itself to the runner's other
//! CPUs, while the runner pins itself to its own CPU until the child has executed (a vfork
//! parent is woken where the child runs); the runner then works beside it. Before it hands
//! over the setup
//! (bwrap is blocked reading it then) the runner gives bwrap its whole affinity back, so the
//! sandbox, which bwrap forks once it has read its setup, has the affinity paddock had.
//!
//! A runner killed before it has written everything leaves bwrap reading arguments cut
//! short: the supervisor's bind is the last of them, and bwrap's command is the supervisor,
//! so nothing runs (and the supervisor refuses to run anything unless it is the sandbox's
//! pid 1). Arguments up to the pipe's capacity are written with one `write`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use paddock_linux_bwrap::{ARGS_FD, SECCOMP_FD, SIGNAL_FD, SUPERVISOR_FD};
use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::exec::{Output, SpawnedChild};

/// A bwrap waiting for its arguments. Dropped unused, it is killed and reaped.
pub struct Prespawned {
    child: Option<SpawnedChild>,
    program: AbsPathBuf,
    /// The write end of the pipe bwrap reads its arguments from.
    args: Option<File>,
    /// The runner's ends of the payload memfds, with the descriptor each is at in bwrap.
    payloads: Vec<(RawFd, File)>,
    signal_tx: Option<UnixStream>,
    /// The runner's CPU affinity, given back to bwrap before its setup, when it started on
    /// fewer CPUs.
    affinity: Option<libc::cpu_set_t>,
}

impl std::fmt::Debug for Prespawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prespawned")
            .field("child", &self.child)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl Prespawned {
    /// Starts `bwrap` with every plan's command line and descriptors, waiting for its
    /// arguments.
    pub fn start(bwrap: &AbsPathBuf) -> Result<Prespawned> {
        let (args_r, args_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot create bwrap's argument pipe")?;
        let mut keep: Vec<OwnedFd> = vec![args_r];
        let mut pairs: Vec<(RawFd, RawFd)> = vec![(keep[0].as_raw_fd(), ARGS_FD)];
        let mut payloads = Vec::new();
        for (name, fd) in [("supervisor", SUPERVISOR_FD), ("seccomp-bpf", SECCOMP_FD)] {
            let memfd = crate::exec::memfd_with(name, &[])?;
            pairs.push((memfd.as_raw_fd(), fd));
            payloads.push((fd, File::from(memfd)));
        }
        let (ours, theirs) = crate::exec::signal_channel()?;
        pairs.push((theirs.as_raw_fd(), SIGNAL_FD));
        keep.push(OwnedFd::from(theirs));
        let max_target = pairs.iter().map(|p| p.1).max().unwrap_or(2);
        let (pid, affinity) = spawn_elsewhere(bwrap, &pairs, max_target)
            .with_context(|| format!("cannot start {}", bwrap))?;
        drop(keep);
        let child = SpawnedChild { pid, stdout: None, stderr: None };
        Ok(Prespawned {
            affinity,
            child: Some(child),
            program: bwrap.clone(),
            args: Some(File::from(args_w)),
            payloads,
            signal_tx: Some(ours),
        })
    }

    /// Whether `plan` can be handed to this bwrap: the same program and command line, no
    /// environment, `/` as cwd, payloads only at the descriptors it has, the signal channel
    /// at its place, output inherited, and nothing else for the child (`simple`: no extra
    /// or inherited descriptors, no observer).
    pub fn fits(&self, plan: &SpawnPlan, output: Output, simple: bool) -> bool {
        let descriptors = plan
            .payloads
            .iter()
            .all(|p| p.fd == ARGS_FD || self.payloads.iter().any(|(fd, _)| *fd == p.fd));
        simple
            && output == Output::Inherit
            && plan.program == self.program
            && plan.argv == paddock_linux_bwrap::bwrap_argv()
            && plan.env.is_empty()
            && plan.cwd.as_path() == Path::new("/")
            && plan.signal_fd == Some(SIGNAL_FD)
            && plan.observer.is_none()
            && descriptors
    }

    /// Writes `plan`'s payloads into the memfds, then its arguments into the pipe and closes
    /// it: bwrap goes on. Returns the child and the runner's end of the signal channel.
    pub fn complete(mut self, plan: &SpawnPlan) -> Result<(SpawnedChild, Option<UnixStream>)> {
        for payload in &plan.payloads {
            if payload.fd == ARGS_FD {
                continue;
            }
            if let Some((_, file)) = self.payloads.iter_mut().find(|(fd, _)| *fd == payload.fd) {
                // The memfd's offset is shared with bwrap's copy: back to the start for the
                // supervisor's read.
                file.write_all(&payload.bytes)
                    .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
                    .with_context(|| format!("cannot prepare the {} payload", payload.name))?;
            }
        }
        if let (Some(set), Some(child)) = (&self.affinity, &self.child) {
            // bwrap waits for its setup: it forks the sandbox once it has read it.
            // SAFETY: sched_setaffinity on our own child with a valid set.
            unsafe {
                libc::sched_setaffinity(child.pid, std::mem::size_of::<libc::cpu_set_t>(), set)
            };
        }
        let args = plan.payloads.iter().find(|p| p.fd == ARGS_FD).map_or(&[][..], |p| &p.bytes);
        let mut pipe = self.args.take().context("bwrap's arguments were written already")?;
        pipe.write_all(args).context("cannot hand bwrap its arguments")?;
        drop(pipe);
        let child = self.child.take().context("bwrap is gone")?;
        Ok((child, self.signal_tx.take()))
    }
}

impl Drop for Prespawned {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            // Killed before it reads its (never written) arguments, then reaped.
            // SAFETY: kill on our own child, not reaped yet, so the pid is still its.
            unsafe { libc::kill(child.pid, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
}

/// Starts `bwrap` (with every plan's command line, its descriptors at `pairs`' targets) from
/// a `vfork`-style child that first moves itself to this process's other CPUs, if it has
/// any; returns its pid and this process's affinity when it did move. What the child does
/// before it executes is what `posix_spawn` would: its own process group, `/` as cwd, the
/// descriptors moved (every other one is close-on-exec: `exec::moved_above`), signal
/// handlers back to their default (`SIGPIPE` too; glibc's internal signals as they are
/// here), an empty signal mask.
fn spawn_elsewhere(
    bwrap: &AbsPathBuf,
    pairs: &[(RawFd, RawFd)],
    max_target: RawFd,
) -> Result<(libc::pid_t, Option<libc::cpu_set_t>)> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicI32, Ordering};

    let cstr = |b: &[u8]| CString::new(b).context("a NUL byte in bwrap's command line");
    let program = cstr(bwrap.as_os_str().as_bytes())?;
    let argv: Vec<CString> = paddock_linux_bwrap::bwrap_argv()
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let root = c"/";

    let moved =
        crate::exec::moved_above(pairs, max_target).context("cannot hand bwrap its descriptors")?;
    let targets: Vec<(RawFd, RawFd)> =
        moved.iter().map(|(fd, dst)| (fd.as_raw_fd(), *dst)).collect();

    // The CPUs but this one, when there are others.
    let set_size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: an all-zero cpu_set_t is the empty set; the calls get valid pointers and sizes.
    let (before, others) = unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        let ok = libc::sched_getaffinity(0, set_size, &mut before) == 0;
        let cpu = libc::sched_getcpu();
        let mut others = before;
        let mut here: libc::cpu_set_t = std::mem::zeroed();
        if let Ok(cpu) = usize::try_from(cpu) {
            libc::CPU_CLR(cpu, &mut others);
            libc::CPU_SET(cpu, &mut here);
        }
        let any = ok && cpu >= 0 && libc::CPU_COUNT(&others) > 0;
        // The kernel wakes a vfork parent where the child runs: pinned to its own CPU
        // until the child has executed, this process stays beside it.
        if any {
            libc::sched_setaffinity(0, set_size, &here);
        }
        (before, any.then_some(others))
    };
    let failed = AtomicI32::new(0);

    // No signal reaches the child before it has reset the handlers it shares with this
    // process (they would run on our memory).
    // SAFETY: sigfillset and pthread_sigmask with valid pointers.
    let old_mask = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let spawned = paddock_linux_bwrap::vfork::spawn(|| {
        if let Some(set) = &others {
            // SAFETY: sched_setaffinity on this child with a set prepared before the clone.
            unsafe { libc::sched_setaffinity(0, set_size, set) };
        }
        for sig in 1..=64usize {
            let handled = crate::exec::handler_of(sig)
                .is_some_and(|h| h != libc::SIG_DFL as u64 && h != libc::SIG_IGN as u64);
            if handled || sig == libc::SIGPIPE as usize {
                crate::exec::set_default(sig);
            }
        }
        // SAFETY: syscalls on this child's own state with data prepared before the clone;
        // nothing allocates.
        unsafe {
            libc::setpgid(0, 0);
            let ok = libc::chdir(root.as_ptr()) == 0
                && targets.iter().all(|(fd, dst)| libc::dup2(*fd, *dst) == *dst);
            if ok {
                let empty: libc::sigset_t = std::mem::zeroed();
                libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp.as_ptr());
            }
            failed.store(*libc::__errno_location(), Ordering::SeqCst);
            libc::_exit(127)
        }
    });
    // SAFETY: restoring this thread's own mask and affinity.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
        if others.is_some() {
            libc::sched_setaffinity(0, set_size, &before);
        }
    }
    drop(moved);
    let pid = spawned.context("clone")?;
    let errno = failed.load(Ordering::SeqCst);
    if errno != 0 {
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(std::io::Error::from_raw_os_error(errno)).context("exec");
    }
    Ok((pid, others.map(|_| before)))
}

/// Where a run's prespawned bwrap waits for the spawn that uses it (the first one that fits).
#[derive(Clone, Debug, Default)]
pub struct PrespawnSlot(Arc<Mutex<Option<Prespawned>>>);

impl PrespawnSlot {
    /// A slot holding `pre`.
    pub fn new(pre: Option<Prespawned>) -> PrespawnSlot {
        PrespawnSlot(Arc::new(Mutex::new(pre)))
    }

    /// Takes the waiting bwrap, if there still is one.
    pub fn take(&self) -> Option<Prespawned> {
        self.0.lock().ok().and_then(|mut p| p.take())
    }
}
