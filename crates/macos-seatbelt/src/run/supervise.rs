//! Supervision of a spawned `sandbox-exec`: output capture with a cap, the timeout, polite
//! signals then the kill after a grace period, a bounded drain, and resource usage.
//!
//! `sandbox-exec` applies the profile and executes the task in place, so the process this
//! module spawns *is* the task, the leader of a process group of its own: polite signals
//! and the kill go to that group (the task leads a session of its own, see `run`). There is no pidfd and no signal handler: the loop polls
//! the run's [`Control`] pipe and checks the child with `waitid(WNOHANG | WNOWAIT)` at a
//! short, growing interval (1 ms to [`MAX_POLL`]); the group is killed while its leader is
//! an unreaped zombie, so its id cannot have been reused, and only then reaped with
//! `wait4`, whose usage gives the CPU time and the peak RSS.
//!
//! Nothing here is process-wide: the caller holds a [`Control`] per run and reads what the
//! run had to say from its [`Notes`].

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::plan::SANDBOX_EXEC;
use crate::violation::LOG_PROGRAM;

/// The longest the loop sleeps between two checks of the child.
pub const MAX_POLL: Duration = Duration::from_millis(20);

/// How long output is drained after the task exits: a background grandchild that kept the
/// pipes open must not hang the runner.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// The default of [`RunOptions::capture_limit`]: 16 MiB of each piped stream.
pub const DEFAULT_CAPTURE_LIMIT: usize = 16 << 20;

/// Where one of the task's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Stream {
    /// The runner's own.
    #[default]
    Inherit,
    /// `/dev/null`.
    Null,
    /// A pipe the runner reads (stdout and stderr only).
    Piped,
}

/// How the task's stdin, stdout and stderr are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stdio {
    /// Its stdin (never piped: paddock writes nothing to it).
    pub stdin: Stream,
    /// Its stdout.
    pub stdout: Stream,
    /// Its stderr.
    pub stderr: Stream,
}

impl Stdio {
    /// All three streams the runner's own.
    pub const INHERIT: Stdio =
        Stdio { stdin: Stream::Inherit, stdout: Stream::Inherit, stderr: Stream::Inherit };
    /// stdin the runner's, stdout and stderr piped to the runner.
    pub const PIPED: Stdio =
        Stdio { stdin: Stream::Inherit, stdout: Stream::Piped, stderr: Stream::Piped };
}

/// How to perform and supervise a plan.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Kill the task after this long (exit 124: `timed_out`).
    pub timeout: Option<Duration>,
    /// Time between the polite signal and the kill.
    pub grace: Duration,
    /// Where the task's standard streams go; piped ones are captured into the outcome.
    pub stdio: Stdio,
    /// The most bytes of each piped stream kept; the rest is read and counted, never
    /// blocking the task, and a marker at the end says how much was cut.
    pub capture_limit: usize,
    /// The caller's hold on the run: polite signals, the kill, the task's pid.
    pub control: Control,
    /// What the run has to tell the caller, gathered as it goes.
    pub notes: Notes,
    /// The `sandbox-exec` executed in place of the plan's program path (the plan's argv,
    /// environment and directory are performed as they are): [`SANDBOX_EXEC`] on macOS, a
    /// stand-in in tests.
    pub sandbox_exec: PathBuf,
    /// The `log` whose `stream` itemizes the run's denials ([`LOG_PROGRAM`] on macOS);
    /// `None`: the run is not itemized.
    pub log: Option<PathBuf>,
    /// How long `log stream` may take to announce that it streams before the task starts
    /// anyway (with a note).
    pub monitor_ready: Duration,
    /// How long the monitor keeps listening after the task, for late records.
    pub monitor_grace: Duration,
    /// The egress proxy, for a plan with a domain list (its port in the plan's bridges);
    /// `None` refuses such a plan.
    pub egress: Option<super::Egress>,
}

impl RunOptions {
    /// No timeout, a grace of 2 s, the runner's own streams, a fresh [`Control`], macOS's
    /// own `sandbox-exec` and `log` (10 s to start, 1 s of grace after the task).
    pub fn new() -> std::io::Result<RunOptions> {
        Ok(RunOptions {
            timeout: None,
            grace: Duration::from_secs(2),
            stdio: Stdio::INHERIT,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            control: Control::new()?,
            notes: Notes::default(),
            sandbox_exec: PathBuf::from(SANDBOX_EXEC),
            log: Some(PathBuf::from(LOG_PROGRAM)),
            monitor_ready: Duration::from_secs(10),
            monitor_grace: Duration::from_secs(1),
            egress: None,
        })
    }
}

/// How a run ended.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// The task's exit code: its own, 128+N when killed by signal N, 124 on timeout, 126
    /// or 127 when its program cannot be executed or is not found.
    pub exit_code: i32,
    /// The signal that ended the task, read from the 128+N convention.
    pub signal: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Wall time.
    pub duration: Duration,
    /// User + system CPU time of the task and everything it waited for.
    pub cpu_time: Duration,
    /// Peak resident set size of the largest process, in KiB.
    pub max_rss_kib: u64,
    /// Captured stdout (empty unless piped), cut at the capture limit with a marker.
    pub stdout: Vec<u8>,
    /// Captured stderr (empty unless piped), cut at the capture limit with a marker.
    pub stderr: Vec<u8>,
}

/// Supervises the spawned task `child` (the leader of its own process group) to its end.
pub(crate) fn supervise(
    mut child: Child,
    start: Instant,
    opts: &RunOptions,
) -> Result<RunOutcome, Error> {
    let pid = libc::pid_t::try_from(child.id()).map_err(|_| Error::Run {
        what: "read the task's pid".into(),
        message: format!("{} is out of range", child.id()),
    })?;
    opts.control.spawned(pid);

    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>)>();
    let mut readers = 0;
    if let Some(out) = child.stdout.take() {
        readers += 1;
        capture(out, true, opts.capture_limit, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        readers += 1;
        capture(err, false, opts.capture_limit, tx.clone());
    }
    drop(tx);

    let deadline = opts.timeout.map(|t| start + t);
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let mut nap = Duration::from_millis(1);
    loop {
        let now = Instant::now();
        if kill_at.is_some_and(|k| now >= k) {
            kill_group(pid, libc::SIGKILL);
            kill_at = None;
        }
        if !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            kill_group(pid, libc::SIGTERM);
            kill_at = Some(now + opts.grace);
        }
        let ended = exited(pid).inspect_err(|_| {
            // Nothing is left to supervise it with: it goes.
            kill_group(pid, libc::SIGKILL);
            let _ = wait4(pid);
        })?;
        if ended {
            // The rest of the group goes with the task: its leader is an unreaped zombie,
            // so the group's id is still the task's.
            kill_group(pid, libc::SIGKILL);
            break;
        }
        let next = [deadline.filter(|_| !timed_out), kill_at].into_iter().flatten().min();
        let wait = next.map_or(nap, |n| n.saturating_duration_since(now).min(nap));
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX).max(1);
        nap = (nap * 2).min(MAX_POLL);
        let mut fds =
            [libc::pollfd { fd: opts.control.read_fd(), events: libc::POLLIN, revents: 0 }];
        // SAFETY: a valid array of one pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, wait_ms) };
        if fds[0].revents != 0 {
            for sig in opts.control.drain() {
                if sig == Control::KILL || (kill_at.is_some() && !timed_out) {
                    // The kill, or a second polite signal: no more waiting.
                    kill_group(pid, libc::SIGKILL);
                } else {
                    kill_group(pid, sig);
                    kill_at.get_or_insert(Instant::now() + opts.grace);
                }
            }
        }
    }
    let (raw, rusage) = wait4(pid)?;
    let duration = start.elapsed();

    // Bounded drain: the readers end at EOF, or we stop waiting after DRAIN_LIMIT.
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let drain_end = Instant::now() + DRAIN_LIMIT;
    while readers > 0 {
        let left = drain_end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, chunk)) if chunk.is_empty() => readers -= 1,
            Ok((true, chunk)) => stdout.extend_from_slice(&chunk),
            Ok((false, chunk)) => stderr.extend_from_slice(&chunk),
            Err(_) => break,
        }
    }

    let mut exit_code = if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw)
    } else if libc::WIFSIGNALED(raw) {
        128 + libc::WTERMSIG(raw)
    } else {
        125
    };
    if timed_out {
        exit_code = 124;
    }
    let signal = (!timed_out && (129..=128 + 64).contains(&exit_code)).then_some(exit_code - 128);
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    // Linux reports ru_maxrss in KiB, macOS in bytes.
    let rss = u64::try_from(rusage.ru_maxrss).unwrap_or(0);
    let max_rss_kib = if cfg!(target_vendor = "apple") { rss / 1024 } else { rss };
    Ok(RunOutcome {
        exit_code,
        signal,
        timed_out,
        duration,
        cpu_time: tv(rusage.ru_utime) + tv(rusage.ru_stime),
        max_rss_kib,
        stdout,
        stderr,
    })
}

/// Whether the child `pid` has ended, without reaping it (`WNOWAIT`): its id stays
/// reserved.
pub(crate) fn exited(pid: libc::pid_t) -> Result<bool, Error> {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value to be overwritten.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let id = libc::id_t::try_from(pid).unwrap_or(0);
        // SAFETY: waitid on our own child with a valid pointer; WNOWAIT leaves it waitable.
        let rc = unsafe {
            libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
        };
        if rc == 0 {
            // With WNOHANG and nothing to report the zeroed siginfo stays zero.
            return Ok(info.si_signo == libc::SIGCHLD);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(Error::Run { what: "wait for the task".into(), message: err.to_string() });
        }
    }
}

fn wait4(pid: libc::pid_t) -> Result<(i32, libc::rusage), Error> {
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
            return Err(Error::Run { what: "reap the task".into(), message: err.to_string() });
        }
    }
}

/// Sends `sig` to the task's process group.
fn kill_group(pgid: libc::pid_t, sig: i32) {
    // SAFETY: killpg with integers. The group is the task's own (setsid) and its
    // leader is not reaped before the last call, so the id is still the task's.
    unsafe { libc::killpg(pgid, sig) };
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
    // fail (EPIPE) rather than block, and the drain sees its sender gone.
    let _ = std::thread::Builder::new().name(name.into()).spawn(reader);
}

/// The caller's hold on one run: polite signals and the kill go down a socket pair (or a
/// pipe the caller made) the supervision loop polls, and the loop publishes the task's pid
/// here once it spawned it. Cloned handles share the one channel; nothing is process-wide.
#[derive(Clone, Debug)]
pub struct Control {
    read: Arc<File>,
    write: Arc<File>,
    pid: Arc<AtomicI32>,
}

impl Control {
    /// The byte that asks for the kill (signal numbers are 1 to 64).
    const KILL: i32 = 0;

    /// A new hold on a run not yet started.
    pub fn new() -> std::io::Result<Control> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        Ok(Control::from_pipe(OwnedFd::from(read), OwnedFd::from(write)))
    }

    /// A hold on a run over a pipe the caller made: a caller's signal handler writes signal
    /// numbers to its write end (one byte each, as [`Control::signal`] does) and the run
    /// takes them as polite signals. Both ends should be close-on-exec; the read end may be
    /// non-blocking (it is read only when `poll` says it is readable).
    pub fn from_pipe(read: OwnedFd, write: OwnedFd) -> Control {
        Control {
            read: Arc::new(File::from(read)),
            write: Arc::new(File::from(write)),
            pid: Arc::new(AtomicI32::new(0)),
        }
    }

    /// Another handle on the same run.
    pub fn handle(&self) -> Control {
        self.clone()
    }

    /// Asks for a polite signal to the task's process group; a second one while the
    /// first's grace period runs kills it.
    pub fn signal(&self, sig: i32) -> std::io::Result<()> {
        if !(1..=64).contains(&sig) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{sig} is not a signal number"),
            ));
        }
        self.send(sig)
    }

    /// Asks for the task's process group to be killed at once.
    pub fn kill(&self) -> std::io::Result<()> {
        self.send(Control::KILL)
    }

    /// The pid of the task (`sandbox-exec`, which becomes the task); 0 before it was
    /// spawned.
    pub fn pid(&self) -> i32 {
        self.pid.load(Ordering::SeqCst)
    }

    fn send(&self, byte: i32) -> std::io::Result<()> {
        use std::io::Write;
        let byte = [u8::try_from(byte).unwrap_or(0)];
        (&*self.write).write_all(&byte)
    }

    fn spawned(&self, pid: i32) {
        self.pid.store(pid, Ordering::SeqCst);
    }

    fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    fn drain(&self) -> Vec<i32> {
        let mut buf = [0u8; 64];
        let n = (&*self.read).read(&mut buf).unwrap_or(0);
        buf[..n].iter().map(|b| i32::from(*b)).collect()
    }
}

pub use paddock_policy::{NoteHook, Notes};
