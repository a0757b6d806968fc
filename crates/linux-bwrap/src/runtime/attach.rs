//! The `strace` mode's tracer, attached from the host to the sandbox's supervisor just
//! before the task starts, instead of strace running bwrap.
//!
//! Without `--seccomp-bpf` (the mode that also shows the calls the seccomp filter refuses),
//! strace stops at every call. Run around bwrap, it stopped at each of the thousand calls of
//! bwrap's setup (mounting, reading `/proc/self/mountinfo` after each bind) and of the
//! supervisor's start: tens of milliseconds before the task ran. Attached, it follows the
//! task from its fork, as a plain strace inside the sandbox would, and still runs outside
//! the sandbox: the task cannot see it (`TracerPid` reads 0 in its pid namespace) or reach
//! it, and the log travels on a pipe the sandbox never holds.
//!
//! The handshake: the supervisor sends `TRACE_ME` up the signal channel and waits; the
//! message's credentials give its pid here (`SO_PASSCRED`); strace is started with `-p`;
//! once `/proc/PID/status` names strace as the tracer, `TRACED` goes down and the
//! supervisor forks the task, which strace follows (`-f`). If strace cannot attach (Yama's
//! `ptrace_scope` 2 or 3, for one), the sandbox is killed before the task ran and the
//! caller runs the task with strace around bwrap instead.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::Context;
use crate::runtime::{Result, bail};
use crate::trace::{TraceOptions, attach, attach_options, tracer_pid};
use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::runtime::itemized::{Ran, Run};
use crate::runtime::supervise::{
    RunOptions, RunOutcome, pidfd_kill, pidfd_open, run_plan_attached,
};
use crate::runtime::trace_log::{Observer, Reader, Violations};

/// How long strace may take to attach.
const ATTACH_LIMIT: Duration = Duration::from_secs(3);
/// How long strace may take to end after the sandbox has: its tracees are gone by then.
const END_LIMIT: Duration = Duration::from_secs(2);

/// A run with strace attached, and what the trace said.
#[derive(Debug)]
pub struct Attached<O> {
    /// How the task ended.
    pub outcome: RunOutcome,
    /// The observer after the whole trace; `None` when the sandbox failed before asking for
    /// a tracer (nothing was traced) or the trace did not end with the task.
    pub observer: Option<O>,
    /// strace died before the task ended, and the sandbox was stopped: the trace is partial.
    pub tracer_died: bool,
}

/// Runs `plan` with strace attached to its supervisor, the trace parsed into the observer
/// `observer` makes from the cell that holds the supervisor's pid before the trace begins.
/// `None`: strace could not attach (the note is printed), the task did not run, and the
/// caller runs it another way.
pub fn run_observed<O: Observer>(
    plan: &SpawnPlan,
    strace: &AbsPathBuf,
    observer: impl FnOnce(Arc<AtomicU32>) -> O,
    opts: &RunOptions,
    runtime_dir: Option<&Path>,
) -> Result<Option<Attached<O>>> {
    let planned = attach(plan.clone())?;
    let supervisor = Arc::new(AtomicU32::new(0));
    let (log, reader) = Reader::start(observer(supervisor.clone()))?;
    let mut log = Some(log);
    let mut tracer: Option<Child> = None;
    let tracer_died = Arc::new(AtomicBool::new(false));
    let outcome = {
        let mut hook = |pid: u32| -> Result<()> {
            let log = log.take().context("strace is attached once per run")?;
            // Before strace writes its first line: the supervisor's own calls are not the task's.
            supervisor.store(pid, Ordering::SeqCst);
            let child = tracer.insert(start_strace(strace, pid, log)?);
            wait_attached(pid, child)?;
            watch(child, pid, tracer_died.clone())
        };
        run_plan_attached(&planned, opts, runtime_dir, &mut hook)?
    };
    // Never handed to strace (the sandbox failed first): the reader's EOF comes from here.
    drop(log);
    if let Some(child) = tracer.as_mut() {
        end(child);
    }
    if let Some(e) = &outcome.tracer_error {
        opts.notes.push(format!(
            "note: strace could not attach to the sandbox ({e}); tracing bubblewrap instead"
        ));
        return Ok(None);
    }
    let finished = reader.finish();
    if finished.is_none() {
        opts.notes.push("the trace did not end with the task; denials are not itemized");
    }
    let observer = finished.filter(|_| tracer.is_some()).map(|f| f.observer);
    Ok(Some(Attached { outcome, observer, tracer_died: tracer_died.load(Ordering::SeqCst) }))
}

/// [`run_observed`] for `paddock run`: the reported violations.
pub fn run(run: Run<'_>, topts: &TraceOptions) -> Result<Option<Ran>> {
    let Run { plan, policy, cwd, opts, runtime_dir } = run;
    let observer = |pid| Violations::attached(policy.clone(), cwd.as_path(), pid);
    let Some(ran) = run_observed(plan, &topts.strace, observer, opts, runtime_dir)? else {
        return Ok(None);
    };
    // Nothing is traced when the sandbox failed before the supervisor asked.
    let itemized = ran.outcome.started && ran.observer.is_some();
    let violations = ran.observer.map(|o| o.reported.into_vec()).unwrap_or_default();
    if ran.tracer_died {
        opts.notes.push("strace ended before the task did; the sandbox was stopped, and the denials seen until then are reported");
        return Ok(Some(Ran { outcome: ran.outcome, itemized_by: None, violations }));
    }
    Ok(Some(Ran { outcome: ran.outcome, itemized_by: itemized.then_some("strace"), violations }))
}

/// Starts `strace -p pid` writing its log to `log` (see [`crate::runtime::exec::spawn_tracer`]).
fn start_strace(strace: &AbsPathBuf, pid: u32, log: OwnedFd) -> Result<Child> {
    let args = attach_options(pid, format!("/proc/self/fd/{}", log.as_raw_fd()).as_ref());
    crate::runtime::exec::spawn_tracer(strace, &args, log)
}

/// Waits until `/proc/PID/status` names `strace` as the tracer, or strace ends.
fn wait_attached(pid: u32, strace: &mut Child) -> Result<()> {
    let status = format!("/proc/{pid}/status");
    let deadline = Instant::now() + ATTACH_LIMIT;
    loop {
        let text = std::fs::read_to_string(&status)
            .with_context(|| format!("the supervisor (pid {pid}) is gone"))?;
        if tracer_pid(&text) == Some(strace.id()) {
            return Ok(());
        }
        if let Some(exit) = strace.try_wait()? {
            bail!("strace ended ({exit}) without attaching; its message is above");
        }
        if Instant::now() >= deadline {
            bail!("strace did not attach within {ATTACH_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Stops the sandbox if strace ends before the supervisor does, as it would end with a
/// strace running bwrap: a run is itemized to its end or not at all. `died` says it did.
/// The supervisor is still waiting for the go-ahead, so its pid is its own.
fn watch(strace: &Child, supervisor: u32, died: Arc<AtomicBool>) -> Result<()> {
    let strace = pidfd_open(i32::try_from(strace.id())?)?;
    let sandbox = pidfd_open(i32::try_from(supervisor)?)?;
    std::thread::Builder::new()
        .name("paddock-tracer-watch".into())
        .spawn(move || {
            let mut fds = [
                libc::pollfd { fd: strace.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: sandbox.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: a valid array of two pollfd.
            while unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    return;
                }
            }
            if fds[0].revents != 0 && fds[1].revents == 0 {
                died.store(true, Ordering::SeqCst);
                pidfd_kill(&sandbox, libc::SIGKILL);
            }
        })
        .context("cannot start the tracer's watch")?;
    Ok(())
}

/// Reaps strace, which ends with its last tracee; one that does not is killed.
fn end(strace: &mut Child) {
    if let Ok(pidfd) = i32::try_from(strace.id()).map_err(crate::Error::from).and_then(pidfd_open) {
        let mut fd = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(END_LIMIT.as_millis()).unwrap_or(2000);
        // SAFETY: one valid pollfd; readable once strace has exited.
        unsafe { libc::poll(&mut fd, 1, ms) };
    }
    if !matches!(strace.try_wait(), Ok(None)) {
        return;
    }
    let _ = strace.kill();
    let _ = strace.wait();
}
