//! [`Child`]: a handle on one running sandbox, shaped like `std::process::Child`.
//!
//! Each task runs on a thread of its own that supervises it (output capture, timeout, the
//! polite signal then the kill, itemizing) and ends with its report. The handle reaches
//! that thread through the run's `Control`: a pipe of its own, so that signals and kills of
//! one task never touch another's, and no signal handler is installed.

use crate::{Command, Error, Output, Report, Sandbox};

#[cfg(target_os = "macos")]
use crate::seatbelt::Finished;
#[cfg(target_os = "linux")]
use paddock_linux_bwrap::runtime::{
    supervise::{Control, Notes},
    task::Finished,
};
#[cfg(target_os = "macos")]
use paddock_macos_seatbelt::run::{Control, Notes};

/// A running sandboxed task. Dropping it stops the sandbox (killing it when the task is
/// still running) and releases everything the run holds.
#[derive(Debug)]
pub struct Child {
    pid: u32,
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    control: Control,
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    notes: Notes,
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    thread: Option<std::thread::JoinHandle<Result<Finished, Error>>>,
    /// The outcome once waited for: the report, and the captured output not yet taken.
    done: Option<Result<Output, String>>,
    /// A prewarmed sandbox's task: the sandbox whose pool gets a new warm one once this
    /// task has ended (set up then, it does not compete with the task for the CPU).
    #[cfg(target_os = "linux")]
    refill: Option<std::sync::Weak<crate::sandbox::Inner>>,
}

impl Child {
    /// The pid of the sandbox on the host (bubblewrap, or strace around it; on macOS the
    /// task itself, which `sandbox-exec` became): a process of this one's, in its own
    /// process group.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// A handle that signals or kills this task from another thread while one waits.
    pub fn handle(&self) -> Handle {
        Handle {
            pid: self.pid,
            #[cfg(any(target_os = "linux", target_os = "macos"))]
            control: self.control.handle(),
        }
    }

    /// Sends `signal` politely to the task's process group, through the sandbox's
    /// supervisor (the sandbox itself is not signalled); the whole sandbox is killed when
    /// the task outlives the sandbox's grace period. A second signal while that grace
    /// period runs kills it at once: the behaviour of a second Ctrl-C.
    pub fn signal(&self, signal: i32) -> Result<(), Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if self.thread.is_some() {
            return self.control.signal(signal).map_err(Error::from);
        }
        let _ = signal;
        Ok(())
    }

    /// Kills the whole sandbox at once: its pid namespace goes with it. A task already
    /// finished is left as it is.
    pub fn kill(&self) -> Result<(), Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if self.thread.is_some() {
            return self.control.kill().map_err(Error::from);
        }
        Ok(())
    }

    /// The notes the run has made so far (the policy's, the plan's), as the report will
    /// have them.
    pub fn notes(&self) -> Vec<String> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        return self.notes.lines();
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        Vec::new()
    }

    /// Waits for the task to end; its report. Captured output is kept for
    /// [`Child::wait_with_output`].
    pub fn wait(&mut self) -> Result<Report, Error> {
        self.finish()?;
        self.report()
    }

    /// The report if the task has ended, without waiting.
    pub fn try_wait(&mut self) -> Result<Option<Report>, Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            return Ok(None);
        }
        self.finish()?;
        self.report().map(Some)
    }

    /// Waits for the task to end; its report and its captured stdout and stderr.
    pub fn wait_with_output(mut self) -> Result<Output, Error> {
        self.finish()?;
        match self.done.take() {
            Some(Ok(output)) => Ok(output),
            Some(Err(message)) => Err(Error::Command { message }),
            None => Err(Error::Command { message: "the task has no outcome".into() }),
        }
    }

    fn report(&self) -> Result<Report, Error> {
        match &self.done {
            Some(Ok(output)) => Ok(output.report.clone()),
            // The first wait returned the error itself; later ones its words.
            Some(Err(message)) => Err(Error::Command { message: message.clone() }),
            None => Err(Error::Command { message: "the task has no outcome".into() }),
        }
    }

    /// The handle on a run already going on its thread (a prewarmed sandbox's).
    #[cfg(target_os = "linux")]
    pub(crate) fn from_run(
        pid: u32,
        control: Control,
        notes: Notes,
        thread: Option<std::thread::JoinHandle<Result<Finished, Error>>>,
        refill: std::sync::Weak<crate::sandbox::Inner>,
    ) -> Child {
        Child { pid, control, notes, thread, done: None, refill: Some(refill) }
    }

    /// Starts the warm sandbox that replaces this task's, once.
    #[cfg(target_os = "linux")]
    fn refill(&mut self) {
        if let Some(weak) = self.refill.take()
            && let Some(inner) = weak.upgrade()
        {
            inner.warm.fill(&weak);
        }
    }

    /// [`Child::finish`], for a run that ended before it had a sandbox.
    #[cfg(target_os = "linux")]
    pub(crate) fn finish_now(&mut self) -> Result<(), Error> {
        self.finish()
    }

    /// Joins the run's thread once, keeping its outcome; the first caller after a failure
    /// gets the error itself.
    fn finish(&mut self) -> Result<(), Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if let Some(thread) = self.thread.take() {
            let finished = thread.join().unwrap_or_else(|_| {
                Err(Error::Command { message: "the task's thread panicked".into() })
            });
            #[cfg(target_os = "linux")]
            self.refill();
            match finished {
                Ok(f) => {
                    let notes = self.notes.take();
                    self.done = Some(Ok(output_of(f, notes)));
                }
                Err(e) => {
                    self.done = Some(Err(e.to_string()));
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// Signals or kills a [`Child`]'s task from another thread ([`Child::handle`]); cheap to
/// clone. Once the task has ended it does nothing.
#[derive(Clone, Debug)]
pub struct Handle {
    pid: u32,
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    control: Control,
}

impl Handle {
    /// The pid of the sandbox on the host, as [`Child::id`].
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// As [`Child::signal`].
    pub fn signal(&self, signal: i32) -> Result<(), Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        return self.control.signal(signal).map_err(Error::from);
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let _ = signal;
            Ok(())
        }
    }

    /// As [`Child::kill`].
    pub fn kill(&self) -> Result<(), Error> {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        return self.control.kill().map_err(Error::from);
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        Ok(())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if let Some(thread) = self.thread.take() {
            let _ = self.control.kill();
            let _ = thread.join();
            #[cfg(target_os = "linux")]
            self.refill();
        }
    }
}

/// The report and output of a finished run.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn output_of(f: Finished, notes: Vec<String>) -> Output {
    let Finished { outcome, itemized_by, violations, resolved, cwd } = f;
    let mut summary = paddock_policy::summarize(&violations, &resolved);
    summary.extend(
        paddock_policy::cwd_hint(&resolved, &cwd, outcome.exit_code, violations.len())
            .map(|h| format!("hint: {h}")),
    );
    let report = Report {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        itemized: itemized_by.is_some(),
        itemized_by,
        cpu_ms: u64::try_from(outcome.cpu_time.as_millis()).unwrap_or(u64::MAX),
        max_rss_kib: outcome.max_rss_kib,
        violations,
        notes,
        summary,
    };
    Output { report, stdout: outcome.stdout, stderr: outcome.stderr }
}

/// What the `paddock` binary adds to a run: a bwrap started before the command line was
/// read, its signal pipe as the run's control, and notes printed as they come.
#[cfg(target_os = "linux")]
#[derive(Default)]
pub struct Extras {
    /// A bwrap started early; used when it fits, else killed.
    pub prespawned: Option<paddock_linux_bwrap::runtime::prespawn::Prespawned>,
    /// The read and write ends of a pipe the caller's signal handler writes signal numbers
    /// to: the run takes them as polite signals (see `Control::from_pipe`).
    pub control_pipe: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// Handed each note as it comes.
    pub on_note: Option<paddock_linux_bwrap::runtime::supervise::NoteHook>,
}

#[cfg(target_os = "linux")]
impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras").field("prespawned", &self.prespawned).finish_non_exhaustive()
    }
}

/// A bwrap started now for `command` under `sandbox`, when its run will spawn one that can
/// wait (`PrespawnKind::for_run`): its start-up (loading its libraries, ~1 ms) overlaps the
/// policy's resolution and the plan.
#[cfg(target_os = "linux")]
fn prespawn(
    sandbox: &Sandbox,
    command: &Command,
) -> Option<paddock_linux_bwrap::runtime::prespawn::Prespawned> {
    let inner = &sandbox.inner;
    use paddock_linux_bwrap::runtime::prespawn::{PrespawnKind, Prespawned};
    let kind = PrespawnKind::for_run(inner.itemize, inner.toggles, &inner.facts)?;
    let bwrap = inner.facts.bwrap.as_deref().and_then(paddock_policy::AbsPathBuf::new_lexical)?;
    let notifier = paddock_linux_bwrap::probe::notifier_of(&inner.facts);
    let private_network =
        !matches!(inner.policy.allow.network.value, paddock_policy::NetworkRule::On);
    let nolibc = inner.facts.supervisor_nolibc_exe.as_deref();
    Prespawned::start_for(
        &bwrap,
        kind.observed(),
        streams(command),
        notifier,
        nolibc,
        private_network,
    )
    .ok()
}

/// Where `command`'s standard streams go.
#[cfg(target_os = "linux")]
fn streams(command: &Command) -> paddock_linux_bwrap::runtime::exec::Output {
    use crate::command::StdioKind;
    use paddock_linux_bwrap::runtime::exec::{Output as Streams, Stream};
    let stream = |s: crate::Stdio| match s.0 {
        StdioKind::Inherit => Stream::Inherit,
        StdioKind::Null => Stream::Null,
        StdioKind::Piped => Stream::Piped,
    };
    Streams {
        stdin: stream(command.stdin),
        stdout: stream(command.stdout),
        stderr: stream(command.stderr),
    }
}

/// The request for `command` under `sandbox`, with `control` and `notes`.
#[cfg(target_os = "linux")]
fn request(
    sandbox: &Sandbox,
    command: &Command,
    prespawned: Option<paddock_linux_bwrap::runtime::prespawn::Prespawned>,
    control: Control,
    notes: Notes,
) -> Result<paddock_linux_bwrap::runtime::task::Request, Error> {
    use crate::command::StdioKind;

    if command.stdin.0 == StdioKind::Piped {
        return Err(Error::Command {
            message: "a task's stdin cannot be piped: paddock writes nothing to it; use Stdio::null() or Stdio::inherit()".into(),
        });
    }
    if command.program.is_empty() {
        return Err(Error::Command { message: "no program to run".into() });
    }
    let inner = &sandbox.inner;
    Ok(paddock_linux_bwrap::runtime::task::Request {
        command: std::iter::once(command.program.clone())
            .chain(command.args.iter().cloned())
            .collect(),
        env: command.env.clone(),
        env_remove: command.env_remove.clone(),
        itemize: inner.itemize,
        toggles: inner.toggles,
        stdio: streams(command),
        capture_limit: inner.capture_limit,
        timeout: command.timeout,
        grace: inner.grace,
        prespawned,
        control,
        notes,
        proxy: inner.proxy.inner.clone(),
        deferred: None,
    })
}

/// Starts `command` under `sandbox`: the run's thread does everything, from the runtime
/// dir to the report; this returns once the sandbox's process exists, or with the error
/// that kept it from existing.
#[cfg(target_os = "linux")]
pub(crate) fn spawn(
    sandbox: &Sandbox,
    command: &Command,
    prespawned: Option<paddock_linux_bwrap::runtime::prespawn::Prespawned>,
) -> Result<Child, Error> {
    if command.stdin.0 != crate::command::StdioKind::Piped
        && !command.program.is_empty()
        && sandbox.inner.warm.is_on()
    {
        let cwd = sandbox.inner.cwd_of(command.cwd.as_deref());
        let weak = std::sync::Arc::downgrade(&sandbox.inner);
        if let Some(child) = sandbox.inner.warm.spawn(&weak, command, &cwd) {
            return child;
        }
    }
    let (spawned_tx, spawned_rx) = crossbeam_channel::unbounded();
    let control = Control::notifying(spawned_tx)?;
    let handle = control.handle();
    let notes = Notes::default();
    let prespawned = prespawned.or_else(|| prespawn(sandbox, command));
    let request = request(sandbox, command, prespawned, control, notes.clone())?;
    let inner = sandbox.inner.clone();
    let cwd = inner.cwd_of(command.cwd.as_deref());
    let thread = std::thread::Builder::new().name("paddock-task".into()).spawn(move || {
        paddock_linux_bwrap::runtime::task::run(request, &inner.facts, |foreign| {
            inner.resolve(&cwd, foreign)
        })
        .map(Finished::with_bwrap_reaped)
    })?;
    // The first pid, or the end of a run that never spawned (its sender dropped with it).
    let mut child =
        Child { pid: 0, control: handle, notes, thread: Some(thread), done: None, refill: None };
    match spawned_rx.recv() {
        Ok(pid) => {
            child.pid = u32::try_from(pid).unwrap_or(0);
            Ok(child)
        }
        Err(_) => {
            child.finish()?;
            // It ended without a spawn and without an error: a run that never started.
            Ok(child)
        }
    }
}

/// Runs `command` under `sandbox` to its end on this thread.
#[cfg(target_os = "linux")]
pub(crate) fn run_here(
    sandbox: &Sandbox,
    command: &Command,
    extras: Extras,
) -> Result<Output, Error> {
    let control = match extras.control_pipe {
        Some((read, write)) => Control::from_pipe(read, write),
        None => Control::new()?,
    };
    let notes = match extras.on_note {
        Some(echo) => Notes::echoing(echo),
        None => Notes::default(),
    };
    let prespawned = extras.prespawned.or_else(|| prespawn(sandbox, command));
    let request = request(sandbox, command, prespawned, control, notes.clone())?;
    let inner = &sandbox.inner;
    let cwd = inner.cwd_of(command.cwd.as_deref());
    let finished = paddock_linux_bwrap::runtime::task::run(request, &inner.facts, |foreign| {
        inner.resolve(&cwd, foreign)
    })?;
    Ok(output_of(finished, notes.take()))
}

/// On this OS tasks do not run yet.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn run_here(sandbox: &Sandbox, command: &Command, _: Extras) -> Result<Output, Error> {
    spawn(sandbox, command, None).map(|_| unreachable!())
}

/// What the binary adds to a run (nothing, on this OS).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[derive(Debug, Default)]
pub struct Extras {}

/// What the `paddock` binary adds to a run on macOS: its signal pipe as the run's control,
/// and notes printed as they come.
#[cfg(target_os = "macos")]
#[derive(Default)]
pub struct Extras {
    /// The read and write ends of a pipe the caller's signal handler writes signal numbers
    /// to: the run takes them as polite signals (see `Control::from_pipe`).
    pub control_pipe: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// Handed each note as it comes.
    pub on_note: Option<paddock_macos_seatbelt::run::NoteHook>,
}

#[cfg(target_os = "macos")]
impl std::fmt::Debug for Extras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras").finish_non_exhaustive()
    }
}

/// On this OS tasks do not run yet.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn spawn(sandbox: &Sandbox, command: &Command, _: Option<()>) -> Result<Child, Error> {
    let _ = (sandbox, command);
    Err(Error::Unavailable {
        diagnosis: "paddock runs tasks on Linux (bubblewrap); the macOS runner is not built yet, `paddock plan` shows the seatbelt profile it will use".into(),
    })
}

/// Starts `command` under `sandbox` with seatbelt: the run's thread does everything, from
/// the task's runtime dir to the report; this returns once the task's process exists, or
/// the run has ended without one.
#[cfg(target_os = "macos")]
pub(crate) fn spawn(sandbox: &Sandbox, command: &Command, _: Option<()>) -> Result<Child, Error> {
    let control = Control::new()?;
    let handle = control.handle();
    let notes = Notes::default();
    let inner = sandbox.inner.clone();
    let command = command.clone();
    let run_notes = notes.clone();
    let thread = std::thread::Builder::new()
        .name("paddock-task".into())
        .spawn(move || crate::seatbelt::run(&inner, &command, control, run_notes))?;
    // The task's pid, or the end of a run that never spawned one.
    while handle.pid() == 0 && !thread.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let pid = u32::try_from(handle.pid()).unwrap_or(0);
    let mut child = Child { pid, control: handle, notes, thread: Some(thread), done: None };
    if pid == 0 {
        child.finish()?;
    }
    Ok(child)
}

/// Runs `command` under `sandbox` with seatbelt to its end on this thread.
#[cfg(target_os = "macos")]
pub(crate) fn run_here(
    sandbox: &Sandbox,
    command: &Command,
    extras: Extras,
) -> Result<Output, Error> {
    let control = match extras.control_pipe {
        Some((read, write)) => Control::from_pipe(read, write),
        None => Control::new()?,
    };
    let notes = match extras.on_note {
        Some(echo) => Notes::echoing(echo),
        None => Notes::default(),
    };
    let finished = crate::seatbelt::run(&sandbox.inner, command, control, notes.clone())?;
    Ok(output_of(finished, notes.take()))
}
