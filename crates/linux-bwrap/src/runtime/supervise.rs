//! Host-side supervision of a spawned plan: output streaming and capture, timeout, polite
//! signals then a kill after the grace period, bounded drain, and resource usage.
//!
//! The sandbox's lifetime hangs on this process: bwrap runs with `--die-with-parent`, so a
//! `kill -9` of paddock kills bwrap, whose death kills the supervisor (the sandbox's pid 1),
//! whose death tears down the pid namespace. Polite signals (SIGINT, SIGTERM, SIGHUP that
//! paddock receives, and the timeout's SIGTERM) go down the signal pipe to the supervisor,
//! which signals the task's process group; after `grace`, bwrap is killed.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::SpawnPlan;

use crate::runtime::exec::{self, Output};

/// How to supervise a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Kill the task after this long (exit 124 semantics: `timed_out`).
    pub timeout: Option<Duration>,
    /// Time between the polite signal and the kill.
    pub grace: Duration,
    /// Keep a copy of stdout and stderr in the outcome (they are streamed either way).
    pub capture: bool,
    /// Descriptors the child gets besides the plan's payloads, each at its number (a port
    /// grant's channel: [`crate::runtime::host_bridges::Bridges::inherited`]). Shared: the caller's copy
    /// stays open for a second spawn of the same run.
    pub inherit: Vec<(Arc<OwnedFd>, RawFd)>,
    /// A bwrap started before the plan existed, for the first spawn it fits
    /// ([`crate::runtime::prespawn`]).
    pub prespawned: crate::runtime::prespawn::PrespawnSlot,
}

/// How a run ended.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// The task's exit code: its own, 128+N when killed by signal N, 124 on timeout.
    pub exit_code: i32,
    /// The signal that ended the task, read from the 128+N convention (as a shell does: a
    /// task that exits 130 by itself reads as SIGINT too).
    pub signal: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Wall time.
    pub duration: Duration,
    /// User + system CPU time of the sandbox and everything it waited for.
    pub cpu_time: Duration,
    /// Peak resident set size of the largest process, in KiB.
    pub max_rss_kib: u64,
    /// Captured stdout (empty unless `capture`).
    pub stdout: Vec<u8>,
    /// Captured stderr (empty unless `capture`).
    pub stderr: Vec<u8>,
    /// Whether the supervisor reported that the task started (false: the sandbox, or a
    /// tracer wrapping it, failed before the task ran).
    pub started: bool,
    /// Why the tracer asked for by the supervisor could not attach ([`run_plan_attached`]);
    /// the task then never ran.
    pub tracer_error: Option<String>,
}

/// Attaches a tracer to the supervisor when it asks ([`exec::TRACE_ME`]), given its pid in
/// this process's pid namespace, and returns once the tracer is attached. An error leaves
/// the task unstarted: the sandbox is killed and the outcome says why.
pub type TracerHook<'a> = &'a mut dyn FnMut(u32) -> Result<()>;

/// How long output is drained after the sandbox exits: a background grandchild that kept
/// the pipes open must not hang the runner.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Runs `plan` to completion. Placeholders are recorded in the runtime dir created last by
/// [`crate::runtime::runtime_dir::RuntimeDir::create`] in this process, if any; use [`run_plan_in`]
/// to name it.
pub fn run_plan(plan: &SpawnPlan, opts: &RunOptions) -> Result<RunOutcome> {
    let dir = crate::runtime::runtime_dir::current();
    run_plan_in(plan, opts, dir.as_deref())
}

/// Runs `plan` to completion, recording its placeholders in `runtime_dir` before creating
/// them (so that a sweep after a crash can remove them).
pub fn run_plan_in(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&std::path::Path>,
) -> Result<RunOutcome> {
    run_plan_with(plan, opts, runtime_dir, Vec::new())
}

/// [`run_plan_in`], also handing the child the `extra` descriptors (see
/// [`exec::spawn_with`]: a tracer's log pipe).
pub fn run_plan_with(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&std::path::Path>,
    extra: Vec<(OwnedFd, RawFd)>,
) -> Result<RunOutcome> {
    run_plan_observed(plan, opts, runtime_dir, extra, None)
}

/// [`run_plan_with`] for an `--itemize observe` plan: the child mounts the observer
/// filesystem (`observer`) in its own mount namespace before it executes bwrap.
pub fn run_plan_observed(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&std::path::Path>,
    extra: Vec<(OwnedFd, RawFd)>,
    observer: Option<&crate::observe_fs::ObserverMount>,
) -> Result<RunOutcome> {
    run_plan_full(plan, opts, runtime_dir, extra, observer, None)
}

/// [`run_plan_in`] for a plan whose supervisor waits for a tracer
/// (`crate::trace::attach`): `tracer` attaches one when it asks.
pub fn run_plan_attached(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&std::path::Path>,
    tracer: TracerHook<'_>,
) -> Result<RunOutcome> {
    run_plan_full(plan, opts, runtime_dir, Vec::new(), None, Some(tracer))
}

fn run_plan_full(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&std::path::Path>,
    extra: Vec<(OwnedFd, RawFd)>,
    observer: Option<&crate::observe_fs::ObserverMount>,
    mut tracer: Option<TracerHook<'_>>,
) -> Result<RunOutcome> {
    let start = Instant::now();
    let signals = SignalCatcher::install().context("cannot install signal handlers")?;
    let output = if opts.capture { Output::Piped } else { Output::Inherit };
    let mut spawned = exec::spawn_with(
        plan,
        output,
        runtime_dir,
        extra,
        &opts.inherit,
        observer,
        opts.prespawned.take(),
    )?;
    let pid = spawned.child.pid;
    let pidfd = pidfd_open(pid).context("pidfd_open")?;

    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let mut readers = 0;
    if let Some(out) = spawned.child.stdout.take() {
        readers += 1;
        tee(out, std::io::stdout(), true, tx.clone());
    }
    if let Some(err) = spawned.child.stderr.take() {
        readers += 1;
        tee(err, std::io::stderr(), false, tx.clone());
    }
    drop(tx);

    let deadline = opts.timeout.map(|t| start + t);
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut started = spawned.signal_tx.is_none();
    let mut tracer_error = None;
    let status = loop {
        let now = Instant::now();
        if kill_at.is_some_and(|k| now >= k) {
            pidfd_kill(&pidfd, libc::SIGKILL);
            kill_at = None;
        }
        if !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            polite(&mut spawned.signal_tx, libc::SIGTERM);
            kill_at = Some(now + opts.grace);
        }
        let next = [deadline.filter(|_| !timed_out), kill_at].into_iter().flatten().min();
        let wait_ms = next.map_or(-1, |n| {
            i32::try_from(n.saturating_duration_since(now).as_millis()).unwrap_or(i32::MAX).max(1)
        });
        let channel = spawned.signal_tx.as_ref().filter(|_| !started).map_or(-1, |c| c.as_raw_fd());
        let mut fds = [
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: signals.read_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: channel, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: a valid array of three pollfd; a negative fd is ignored.
        unsafe { libc::poll(fds.as_mut_ptr(), 3, wait_ms) };
        if fds[2].revents != 0 {
            match read_channel(&mut spawned.signal_tx) {
                Channel::Started => started = true,
                Channel::TraceMe(supervisor) => {
                    let attached = match (tracer.as_mut(), supervisor) {
                        (Some(attach), Some(pid)) => attach(pid),
                        (None, _) => Err(crate::Error::run("nothing here attaches a tracer")),
                        (_, None) => Err(crate::Error::run("the supervisor's pid is unknown")),
                    };
                    match attached {
                        Ok(()) => polite(&mut spawned.signal_tx, i32::from(exec::TRACED)),
                        Err(e) => {
                            tracer_error = Some(format!("{e}"));
                            pidfd_kill(&pidfd, libc::SIGKILL);
                        }
                    }
                }
                Channel::Nothing => {}
            }
        }
        if fds[1].revents != 0 {
            for sig in signals.drain() {
                if kill_at.is_some() && !timed_out {
                    // A second Ctrl-C: no more waiting.
                    pidfd_kill(&pidfd, libc::SIGKILL);
                } else {
                    polite(&mut spawned.signal_tx, sig);
                    kill_at.get_or_insert(Instant::now() + opts.grace);
                }
            }
        }
        if fds[0].revents != 0 {
            // The child's whole process group goes with it: a tracer's children outlive it if
            // it dies before they exec (strace's child waits stopped for the attach), and a
            // bwrap that fails after forking leaves its child waiting for a parent that is
            // gone. The task is never in this group (bwrap's --new-session), and once the
            // supervisor is gone the kernel has emptied the sandbox's pid namespace.
            // SAFETY: killpg with integers. The group is the child's own (process_group(0))
            // and its leader is an unreaped zombie now, so the id cannot have been reused.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
            break wait4(pid)?;
        }
    };
    if !started {
        started = matches!(read_channel(&mut spawned.signal_tx), Channel::Started);
    }
    drop(spawned.signal_tx.take());
    let duration = start.elapsed();

    // Bounded drain: the readers end at EOF, or we stop waiting after DRAIN_LIMIT.
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let drain_end = Instant::now() + DRAIN_LIMIT;
    while readers > 0 {
        let left = drain_end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, chunk)) if chunk.is_empty() => readers -= 1,
            Ok((false, chunk)) if chunk.is_empty() => readers -= 1,
            Ok((true, chunk)) => stdout.extend_from_slice(&chunk),
            Ok((false, chunk)) => stderr.extend_from_slice(&chunk),
            Err(_) => break,
        }
    }
    drop(signals);
    drop(spawned.placeholders);

    let (raw, rusage) = status;
    let mut exit_code = if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw)
    } else if libc::WIFSIGNALED(raw) {
        128 + libc::WTERMSIG(raw)
    } else {
        125
    };
    if timed_out {
        exit_code = 124;
    } else if tracer_error.is_some() {
        // The task never ran; the caller says why and runs it another way.
        exit_code = 125;
    } else if !started {
        // bwrap failed before the supervisor forked the task: paddock's own failure.
        eprintln!(
            "paddock: the sandbox could not be set up (bubblewrap's message is above); run `paddock check`"
        );
        exit_code = 125;
    }
    let signal = (!timed_out && (129..=128 + 64).contains(&exit_code)).then_some(exit_code - 128);
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok(RunOutcome {
        exit_code,
        signal,
        timed_out,
        duration,
        cpu_time: tv(rusage.ru_utime) + tv(rusage.ru_stime),
        max_rss_kib: u64::try_from(rusage.ru_maxrss).unwrap_or(0),
        stdout,
        stderr,
        started,
        tracer_error,
    })
}

/// Copies a child pipe to our stream, sending each chunk on (true for stdout); an empty
/// chunk means EOF.
fn tee<R: Read + Send + 'static, W: Write + Send + 'static>(
    mut from: R,
    mut to: W,
    is_stdout: bool,
    tx: mpsc::Sender<(bool, Vec<u8>)>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let _ = to.write_all(&buf[..n]);
                    let _ = to.flush();
                    if tx.send((is_stdout, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = tx.send((is_stdout, Vec::new()));
    });
}

/// What the supervisor said up the channel.
enum Channel {
    /// [`exec::STARTED`]: the task runs.
    Started,
    /// [`exec::TRACE_ME`], with the supervisor's pid in this namespace when the message
    /// carried credentials (`SO_PASSCRED` on our end).
    TraceMe(Option<u32>),
    Nothing,
}

/// Reads what the supervisor sent up the channel. A closed or failed channel is dropped.
fn read_channel(channel: &mut Option<UnixStream>) -> Channel {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
    let Some(c) = channel.as_mut() else { return Channel::Nothing };
    let mut buf = [0u8; 16];
    let mut space = nix::cmsg_space!(UnixCredentials);
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let got = recvmsg::<()>(c.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_DONTWAIT).map(
        |msg| {
            let pid = msg.cmsgs().ok().into_iter().flatten().find_map(|m| match m {
                ControlMessageOwned::ScmCredentials(cred) => u32::try_from(cred.pid()).ok(),
                _ => None,
            });
            (msg.bytes, pid)
        },
    );
    match got {
        Ok((0, _)) => {
            *channel = None;
            Channel::Nothing
        }
        Ok((n, pid)) if buf[..n].contains(&exec::TRACE_ME) => Channel::TraceMe(pid),
        Ok((n, _)) if buf[..n].contains(&exec::STARTED) => Channel::Started,
        Ok(_) | Err(_) => Channel::Nothing,
    }
}

fn polite(tx: &mut Option<UnixStream>, sig: i32) {
    if let Some(pipe) = tx {
        let byte = [u8::try_from(sig).unwrap_or(libc::SIGTERM as u8)];
        if pipe.write_all(&byte).is_err() {
            *tx = None;
        }
    }
}

pub(crate) fn pidfd_open(pid: i32) -> Result<OwnedFd> {
    // SAFETY: pidfd_open on our own child; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(RawFd::try_from(fd)?) })
}

pub(crate) fn pidfd_kill(pidfd: &OwnedFd, sig: i32) {
    // SAFETY: pidfd_send_signal through a pidfd cannot hit a recycled pid.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<u8>(),
            0,
        )
    };
}

fn wait4(pid: i32) -> Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child with valid pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
        if rc == pid {
            return Ok((status, rusage));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err).context("wait4");
        }
    }
}

/// The write end of the self-pipe the signal handler writes to (-1: none).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = [u8::try_from(sig).unwrap_or(0)];
        // SAFETY: write is async-signal-safe; the buffer is valid.
        unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
    }
}

/// SIGINT, SIGTERM and SIGHUP turned into bytes on a self-pipe for the run's duration; the
/// previous handlers come back on drop. A signal ignored when paddock started (`nohup`, a
/// job started in the background by a shell) stays ignored: by paddock, and so by the task,
/// which inherits the disposition through every exec (a hang-up must not end a task its user
/// started with hang-ups ignored).
struct SignalCatcher {
    read: OwnedFd,
    write: OwnedFd,
    old: Vec<(i32, libc::sigaction)>,
}

impl SignalCatcher {
    const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    fn install() -> Result<SignalCatcher> {
        let mut fds = [0; 2];
        // SAFETY: a valid two-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: two fresh descriptors that we now own.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        SIGNAL_PIPE.store(write.as_raw_fd(), Ordering::Relaxed);
        let mut old = Vec::new();
        for sig in Self::SIGNALS {
            // SAFETY: zeroed sigaction structs are valid; a query (no new action) only writes
            // `prev`; the handler is an extern "C" fn that only calls write.
            unsafe {
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0
                    || prev.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as *const () as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                if libc::sigaction(sig, &act, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(SignalCatcher { read, write, old })
    }

    fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    fn drain(&self) -> Vec<i32> {
        let mut buf = [0u8; 64];
        // SAFETY: reading into a valid buffer from a non-blocking pipe.
        let n = unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        buf[..usize::try_from(n).unwrap_or(0)].iter().map(|b| i32::from(*b)).collect()
    }
}

impl Drop for SignalCatcher {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the handler that was there before.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        if SIGNAL_PIPE.load(Ordering::Relaxed) == self.write.as_raw_fd() {
            SIGNAL_PIPE.store(-1, Ordering::Relaxed);
        }
    }
}
