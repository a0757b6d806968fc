//! Host-side supervision of a spawned plan: output streaming and capture, timeout, polite
//! signals then a kill after the grace period, bounded drain, and resource usage.
//!
//! The sandbox's lifetime hangs on this process: bwrap runs with `--die-with-parent`, so a
//! `kill -9` of paddock kills bwrap, whose death kills the supervisor (the sandbox's pid 1),
//! whose death tears down the pid namespace. Polite signals (SIGINT, SIGTERM, SIGHUP that
//! paddock receives, and the timeout's SIGTERM) go down the signal pipe to the supervisor,
//! which signals the task's process group; after `grace`, bwrap is killed.
//!
//! Nothing here is process-wide: the caller holds a [`Control`] per run (its polite signals
//! and its kill go down a pipe this loop polls), installs no handler for us, and reads what
//! the run had to say from its [`Notes`].

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::SpawnPlan;

use crate::runtime::exec::{self, Output};

mod channel;
mod teardown;

use channel::Channel;
pub use teardown::Teardown;

/// How to supervise a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Kill the task after this long (exit 124 semantics: `timed_out`).
    pub timeout: Option<Duration>,
    /// Time between the polite signal and the kill.
    pub grace: Duration,
    /// Where the task's stdin, stdout and stderr go; piped ones are captured into the
    /// outcome, at most `capture_limit` bytes each.
    pub stdio: Output,
    /// The most bytes of each piped stream kept; the rest is read and counted, never
    /// blocking the task, and a marker at the end says how much was cut.
    pub capture_limit: usize,
    /// The caller's hold on the run: polite signals, the kill, the sandbox's pid.
    pub control: Control,
    /// What the run has to tell the caller, gathered as it goes.
    pub notes: Notes,
    /// The protected paths this run binds, as [`RuntimeDir::record_uses`] recorded them:
    /// written again before each spawn (a release after an earlier spawn cleared them).
    ///
    /// [`RuntimeDir::record_uses`]: crate::runtime::runtime_dir::RuntimeDir::record_uses
    pub uses: Vec<u8>,
    /// Which itemizing strategies may be used.
    pub toggles: crate::runtime::Toggles,
    /// `paddock-supervisor-nolibc`, when it is here: an untraced plan that needs nothing
    /// else of a supervisor is started by it (`crate::nolibc`).
    pub supervisor_nolibc: Option<std::path::PathBuf>,
    /// `paddock-supervisor`, for an observed plan started by `paddock-supervisor-nolibc`:
    /// its copy nobody may read serves the task's notifications once there are some
    /// (`crate::nolibc::with_notifier`).
    pub notifier: Option<std::path::PathBuf>,
    /// Descriptors the child gets besides the plan's payloads, each at its number (a port
    /// grant's channel: [`crate::runtime::host_bridges::Bridges::inherited`]). Shared: the caller's copy
    /// stays open for a second spawn of the same run.
    pub inherit: Vec<(Arc<OwnedFd>, RawFd)>,
    /// A bwrap started before the plan existed, for the first spawn it fits
    /// ([`crate::runtime::prespawn`]).
    pub prespawned: crate::runtime::prespawn::PrespawnSlot,
    /// A prewarmed run: its task comes after the spawn ([`crate::runtime::warm`]); then
    /// `stdio` and `timeout` are the hand-over's.
    pub deferred: crate::runtime::warm::DeferredSlot,
    /// What the caller does once nothing of the sandbox runs any more ([`AfterTask`]).
    pub after_task: AfterTask,
}

/// Work on the host for the moment nothing of the sandbox runs any more and its
/// placeholders are gone: when the supervisor says so ([`exec::EXITED`]), while the kernel
/// tears the sandbox's namespaces and bwrap down (about 0.5 ms), or else once bwrap is
/// reaped. Given whether the task started; run at most once, by the run or, when the run
/// never got that far, by whoever holds it after ([`AfterTask::run`] again is a no-op).
/// What it finds, it keeps where its maker reads it.
#[derive(Clone, Default)]
pub struct AfterTask(Arc<Mutex<Option<AfterTaskFn>>>);

/// The work of an [`AfterTask`].
type AfterTaskFn = Box<dyn FnOnce(bool) + Send>;

impl AfterTask {
    /// `work`, to run once.
    pub fn new(work: impl FnOnce(bool) + Send + 'static) -> AfterTask {
        AfterTask(Arc::new(Mutex::new(Some(Box::new(work)))))
    }

    /// Runs the work, unless it ran already; `started`: whether the task started.
    pub fn run(&self, started: bool) {
        let work = self.0.lock().ok().and_then(|mut w| w.take());
        if let Some(work) = work {
            work(started);
        }
    }
}

impl std::fmt::Debug for AfterTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pending = self.0.lock().is_ok_and(|w| w.is_some());
        f.debug_struct("AfterTask").field("pending", &pending).finish()
    }
}

/// The default of [`RunOptions::capture_limit`]: 16 MiB of each piped stream.
pub const DEFAULT_CAPTURE_LIMIT: usize = 16 << 20;

impl RunOptions {
    /// No timeout, a grace of 2 s, the runner's own streams, a fresh [`Control`], every
    /// strategy allowed, nothing inherited.
    pub fn new() -> std::io::Result<RunOptions> {
        Ok(RunOptions {
            timeout: None,
            grace: Duration::from_secs(2),
            stdio: Output::INHERIT,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            control: Control::new()?,
            notes: Notes::default(),
            uses: Vec::new(),
            toggles: crate::runtime::Toggles::default(),
            supervisor_nolibc: None,
            notifier: None,
            inherit: Vec::new(),
            prespawned: crate::runtime::prespawn::PrespawnSlot::default(),
            deferred: crate::runtime::warm::DeferredSlot::default(),
            after_task: AfterTask::default(),
        })
    }
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
    /// User + system CPU time of the task and everything of the sandbox its pid 1 reaped
    /// (when the run ended on the supervisor's word; else of bwrap and all it waited for).
    pub cpu_time: Duration,
    /// Peak resident set size of the largest of those processes, in KiB.
    pub max_rss_kib: u64,
    /// Captured stdout (empty unless piped), cut at the capture limit with a marker.
    pub stdout: Vec<u8>,
    /// Captured stderr (empty unless piped), cut at the capture limit with a marker.
    pub stderr: Vec<u8>,
    /// Whether the supervisor reported that the task started (false: the sandbox, or a
    /// tracer wrapping it, failed before the task ran).
    pub started: bool,
    /// The signal that ended the process the run started (bwrap, or the tracer around it),
    /// when a signal did: the caller's kill, or someone else's. `None` when it exited, and
    /// when the run ended on the supervisor's word.
    pub killed_by: Option<i32>,
    /// Why the tracer asked for by the supervisor could not attach ([`run_plan_attached`]);
    /// the task then never ran.
    pub tracer_error: Option<String>,
    /// bwrap, when the run ended on the supervisor's word ([`crate::supervisor::TaskEnd`])
    /// while the kernel was still tearing the sandbox down: reaped when the last clone is
    /// dropped. Dropped once the run's results are handed over, it overlaps their making
    /// with that teardown.
    pub teardown: Option<Arc<Teardown>>,
}

/// Attaches a tracer to the supervisor when it asks ([`exec::TRACE_ME`]), given its pid in
/// this process's pid namespace, and returns once the tracer is attached. An error leaves
/// the task unstarted: the sandbox is killed and the outcome says why.
pub type TracerHook<'a> = &'a mut dyn FnMut(u32) -> Result<()>;

/// How long output is drained after the sandbox exits: a background grandchild that kept
/// the pipes open must not hang the runner.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

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
    let mut start = Instant::now();
    if let Some(dir) = runtime_dir {
        crate::runtime::runtime_dir::record_uses_again(dir, &opts.uses)
            .context("cannot write the task's runtime directory")?;
    }
    // A prewarmed run: the supervisor gets the task on a socket of its own, later.
    let deferred = opts.deferred.take();
    let deferred_plan;
    let plan = match deferred {
        Some(_) => {
            deferred_plan = crate::runtime::warm::deferred_plan(plan.clone())?;
            &deferred_plan
        }
        None => plan,
    };
    let mut extra = extra;
    let mut stdio = opts.stdio;
    let task_socket = match &deferred {
        Some(_) => {
            let (ours, theirs) =
                crate::fdpass::socket_pair().context("cannot create the task's socket")?;
            extra.push((theirs, crate::runtime::warm::TASK_FD));
            stdio = Output {
                stdin: exec::Stream::Null,
                stdout: exec::Stream::Null,
                stderr: exec::Stream::Null,
            };
            Some(ours)
        }
        None => None,
    };
    let mut spawned = exec::spawn_with(
        plan,
        stdio,
        runtime_dir,
        extra,
        &opts.inherit,
        observer,
        opts.prespawned.take().map(|p| Box::new(p) as Box<dyn exec::Waiting>),
    )?;
    let pid = spawned.child.pid;
    let pidfd = pidfd_open(pid).context("pidfd_open")?;
    opts.control.spawned(pid);

    let mut timeout = opts.timeout;
    let (mut task_stdout, mut task_stderr) =
        (spawned.child.stdout.take(), spawned.child.stderr.take());
    if let (Some(deferred), Some(socket)) = (deferred, task_socket) {
        match hand_over(plan, &deferred, &socket) {
            Ok(Some((h_timeout, out, err))) => {
                timeout = h_timeout;
                (task_stdout, task_stderr) = (out, err);
                start = Instant::now();
            }
            // Closed unused: the supervisor runs nothing and ends.
            Ok(None) => {}
            Err(e) => {
                let _ = reap_group(pid);
                return Err(e);
            }
        }
    }

    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let mut readers = 0;
    if let Some(out) = task_stdout.take() {
        readers += 1;
        capture(out, true, opts.capture_limit, tx.clone());
    }
    if let Some(err) = task_stderr.take() {
        readers += 1;
        capture(err, false, opts.capture_limit, tx.clone());
    }
    drop(tx);

    let deadline = timeout.map(|t| start + t);
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut started = spawned.signal_tx.is_none();
    let mut tracer_error = None;
    // Removed once the supervisor says nothing of the sandbox runs any more
    // ([`exec::EXITED`]), while the kernel tears its namespaces down; else once bwrap is gone.
    // The caller's after-task work follows them.
    let mut placeholders = Some(spawned.placeholders);
    let mut channel = Channel::new(spawned.signal_tx.take());
    let ended = loop {
        let now = Instant::now();
        if kill_at.is_some_and(|k| now >= k) {
            pidfd_kill(&pidfd, libc::SIGKILL);
            kill_at = None;
        }
        if !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            polite(&mut channel.stream, libc::SIGTERM);
            kill_at = Some(now + opts.grace);
        }
        let next = [deadline.filter(|_| !timed_out), kill_at].into_iter().flatten().min();
        let wait_ms = next.map_or(-1, |n| {
            i32::try_from(n.saturating_duration_since(now).as_millis()).unwrap_or(i32::MAX).max(1)
        });
        let mut fds = [
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: opts.control.read_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd {
                fd: channel.stream.as_ref().map_or(-1, |c| c.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: a valid array of three pollfd; a negative fd is ignored.
        unsafe { libc::poll(fds.as_mut_ptr(), 3, wait_ms) };
        let mut told = None;
        if fds[2].revents != 0 {
            let heard = channel.read();
            started |= heard.started;
            if let Some(end) = heard.ended {
                // Nothing of the sandbox runs any more: the placeholders go and the caller's
                // work is done while the kernel tears the namespaces down.
                started = true;
                if placeholders.is_some() {
                    drop(placeholders.take());
                    opts.after_task.run(started);
                }
                told = Some(end);
            }
            if let Some(supervisor) = heard.trace_me {
                let attached = match (tracer.as_mut(), supervisor) {
                    (Some(attach), Some(pid)) => attach(pid),
                    (None, _) => Err(crate::Error::run("nothing here attaches a tracer")),
                    (_, None) => Err(crate::Error::run("the supervisor's pid is unknown")),
                };
                match attached {
                    Ok(()) => polite(&mut channel.stream, i32::from(exec::TRACED)),
                    Err(e) => {
                        tracer_error = Some(format!("{e}"));
                        pidfd_kill(&pidfd, libc::SIGKILL);
                    }
                }
            }
        }
        if fds[1].revents != 0 {
            for sig in opts.control.drain() {
                if sig == Control::KILL {
                    pidfd_kill(&pidfd, libc::SIGKILL);
                } else if kill_at.is_some() && !timed_out {
                    // A second Ctrl-C: no more waiting.
                    pidfd_kill(&pidfd, libc::SIGKILL);
                } else {
                    polite(&mut channel.stream, sig);
                    kill_at.get_or_insert(Instant::now() + opts.grace);
                }
            }
        }
        // The run is over; bwrap is reaped by whoever holds the outcome, once done with it
        // (also when it has exited already: the report's usage is then the supervisor's
        // word however fast bwrap was).
        if let Some(end) = told {
            break Ended::Told(end);
        }
        if fds[0].revents != 0 {
            let (raw, rusage) = reap_group(pid)?;
            let cpu_time = timeval(rusage.ru_utime) + timeval(rusage.ru_stime);
            break Ended::Reaped(raw, cpu_time, u64::try_from(rusage.ru_maxrss).unwrap_or(0));
        }
    };
    if !started {
        started = channel.read().started;
    }
    drop(channel);
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
    drop(placeholders);
    opts.after_task.run(started);

    let mut killed_by = None;
    let (mut exit_code, cpu_time, max_rss_kib, teardown) = match ended {
        Ended::Reaped(raw, cpu_time, max_rss_kib) => {
            let code = if libc::WIFEXITED(raw) {
                libc::WEXITSTATUS(raw)
            } else if libc::WIFSIGNALED(raw) {
                killed_by = Some(libc::WTERMSIG(raw));
                128 + libc::WTERMSIG(raw)
            } else {
                125
            };
            (code, cpu_time, max_rss_kib, None)
        }
        Ended::Told(end) => (
            i32::from(end.code),
            end.cpu_time,
            end.max_rss_kib,
            Some(Arc::new(Teardown::new(pid, pidfd))),
        ),
    };
    if timed_out {
        exit_code = 124;
    } else if tracer_error.is_some() {
        // The task never ran; the caller says why and runs it another way.
        exit_code = 125;
    } else if !started {
        // bwrap failed before the supervisor forked the task (paddock's own failure), or was
        // killed (by the caller, or by someone else: then with a tracer around it too).
        match killed_by {
            Some(sig) => opts.notes.push(format!(
                "the sandbox was killed by signal {sig} before the task started; the task did not run"
            )),
            None => opts.notes.push(
                "the sandbox could not be set up (bubblewrap's message is above); run `paddock check`",
            ),
        }
        exit_code = 125;
    }
    let signal = (!timed_out && (129..=128 + 64).contains(&exit_code)).then_some(exit_code - 128);
    Ok(RunOutcome {
        exit_code,
        signal,
        timed_out,
        duration,
        cpu_time,
        max_rss_kib,
        stdout,
        stderr,
        started,
        tracer_error,
        killed_by,
        teardown,
    })
}

/// A `timeval` as a duration (negative parts as zero).
fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
        + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
}

/// How the supervising loop ended.
enum Ended {
    /// bwrap exited and was reaped: its wait status, the CPU time and the largest peak
    /// resident set (KiB) of it and everything it waited for.
    Reaped(i32, Duration, u64),
    /// The supervisor told how the task ended; bwrap is still exiting.
    Told(crate::supervisor::TaskEnd),
}

/// The read end of a task's piped stream.
type TaskPipe = std::fs::File;

/// Waits for a prewarmed run's task and hands it to the supervisor waiting on `socket`:
/// the task's timeout and the read ends of its piped streams. `None` when the channel
/// closed first (the run is torn down unused; the socket closes with it).
#[allow(clippy::type_complexity)]
fn hand_over(
    plan: &SpawnPlan,
    deferred: &crate::runtime::warm::Deferred,
    socket: &OwnedFd,
) -> Result<Option<(Option<Duration>, Option<TaskPipe>, Option<TaskPipe>)>> {
    let Ok(h) = deferred.handover.recv() else { return Ok(None) };
    let message = crate::runtime::warm::task_message(plan, &deferred.policy_env, &h)?;
    let streams = crate::runtime::warm::streams(h.stdio)?;
    crate::runtime::warm::hand_over(socket, &message, &streams.task)?;
    Ok(Some((h.timeout, streams.stdout, streams.stderr)))
}

/// Reads a child pipe to its end, sending each chunk on (true for stdout) until `limit`
/// bytes were sent, then only counting; an empty chunk means EOF, after a marker saying how
/// much was cut. The pipe is always read, so a task is never blocked on output nobody reads.
fn capture<R: Read + Send + 'static>(
    mut from: R,
    is_stdout: bool,
    limit: usize,
    tx: mpsc::Sender<(bool, Vec<u8>)>,
) {
    let reader = move || {
        let mut buf = vec![0u8; 64 * 1024];
        let (mut kept, mut cut) = (0usize, 0u64);
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
                Ok(n) => {
                    let keep = n.min(limit - kept);
                    kept += keep;
                    cut += (n - keep) as u64;
                    if keep > 0 && tx.send((is_stdout, buf[..keep].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        if cut > 0 {
            let marker =
                format!("\n[paddock: {cut} more bytes cut; the capture limit is {limit} bytes]\n");
            let _ = tx.send((is_stdout, marker.into_bytes()));
        }
        let _ = tx.send((is_stdout, Vec::new()));
    };
    let name = if is_stdout { "paddock-stdout" } else { "paddock-stderr" };
    // Without a thread the pipe's read end closes with the closure: the task's writes then
    // fail (EPIPE) rather than block, and the drain below sees its sender gone.
    let _ = std::thread::Builder::new().name(name.into()).spawn(reader);
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

/// Kills the process group of our child `pid` and reaps the child: its wait status and
/// usage. The whole group goes with it: a tracer's children outlive it if it dies before
/// they exec (strace's child waits stopped for the attach), and a bwrap that fails after
/// forking leaves its child waiting for a parent that is gone. The task is never in this
/// group (bwrap's `--new-session`), and once the supervisor is gone the kernel has emptied
/// the sandbox's pid namespace.
fn reap_group(pid: i32) -> Result<(i32, libc::rusage)> {
    // SAFETY: killpg with integers. The group is our child's own (process_group(0)), and
    // the child is not reaped yet (alive, or a zombie leader), so the id cannot have been
    // reused.
    unsafe { libc::killpg(pid, libc::SIGKILL) };
    wait4(pid)
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

/// The caller's hold on one run: polite signals and the kill go down a pipe the supervision
/// loop polls, and the loop publishes the sandbox's pid here once it spawned it. Cloned
/// handles share the one pipe; nothing is process-wide.
#[derive(Clone, Debug)]
pub struct Control {
    read: Arc<OwnedFd>,
    write: Arc<OwnedFd>,
    pid: Arc<AtomicI32>,
    spawned: Option<crossbeam_channel::Sender<i32>>,
}

impl Control {
    /// The byte that asks for the kill (signal numbers are 1 to 64).
    const KILL: i32 = 0;

    /// A new hold on a run not yet started.
    pub fn new() -> std::io::Result<Control> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(Control {
            read: Arc::new(read),
            write: Arc::new(write),
            pid: Arc::new(AtomicI32::new(0)),
            spawned: None,
        })
    }

    /// A hold on a run over a pipe the caller made: a caller's signal handler writes signal
    /// numbers to its write end (one byte each, as [`Control::signal`] does) and the run
    /// takes them as polite signals, with no thread between. Both ends should be
    /// close-on-exec; the read end may be non-blocking.
    pub fn from_pipe(read: OwnedFd, write: OwnedFd) -> Control {
        Control {
            read: Arc::new(read),
            write: Arc::new(write),
            pid: Arc::new(AtomicI32::new(0)),
            spawned: None,
        }
    }

    /// [`Control::new`], also telling `spawned` each pid the run spawns.
    pub fn notifying(spawned: crossbeam_channel::Sender<i32>) -> std::io::Result<Control> {
        Ok(Control { spawned: Some(spawned), ..Control::new()? })
    }

    /// A handle on the same run that does not keep its spawn notifications open: a
    /// notified caller sees the channel close when the run ends, even while it holds this.
    pub fn handle(&self) -> Control {
        Control { spawned: None, ..self.clone() }
    }

    /// Asks for a polite signal to the task's process group (through the supervisor); a
    /// second one while the first's grace period runs kills the sandbox.
    pub fn signal(&self, sig: i32) -> std::io::Result<()> {
        if !(1..=64).contains(&sig) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{sig} is not a signal number"),
            ));
        }
        self.send(sig)
    }

    /// Asks for the sandbox to be killed at once.
    pub fn kill(&self) -> std::io::Result<()> {
        self.send(Control::KILL)
    }

    /// The pid of the sandbox (bwrap, or the tracer around it) on the host; 0 before it
    /// was spawned.
    pub fn pid(&self) -> i32 {
        self.pid.load(Ordering::SeqCst)
    }

    fn send(&self, byte: i32) -> std::io::Result<()> {
        let byte = [u8::try_from(byte).unwrap_or(0)];
        nix::unistd::write(&*self.write, &byte)?;
        Ok(())
    }

    fn spawned(&self, pid: i32) {
        self.pid.store(pid, Ordering::SeqCst);
        if let Some(tx) = &self.spawned {
            let _ = tx.send(pid);
        }
    }

    fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    fn drain(&self) -> Vec<i32> {
        let mut buf = [0u8; 64];
        let n = nix::unistd::read(&*self.read, &mut buf).unwrap_or(0);
        buf[..n].iter().map(|b| i32::from(*b)).collect()
    }
}

pub use paddock_policy::{NoteHook, Notes};
