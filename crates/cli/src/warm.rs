//! Prewarmed sandboxes ([`SandboxBuilder::prewarm`]): up to `n` sandboxes of a policy set
//! up ahead, each waiting for the one task it will run.
//!
//! A warm sandbox is a run like any other (`task::run` on a thread of its own: runtime
//! dir, resolution, plan, bwrap, the observers), whose supervisor waits for its task once
//! everything is mounted and checked (`paddock_linux_bwrap::runtime::warm`). A spawn that
//! finds one hands it the task (command, environment, working directory, streams, timeout)
//! and gets the run's `Child`; a new warm sandbox starts in its place, on its own thread,
//! once that task has ended (set up while the task runs, it would take the CPU from it). A warm sandbox is used by one task only. When the last clone of the `Sandbox`
//! goes, the warm ones still waiting are told there is no task (their supervisors end
//! without running anything) and their threads are joined: nothing is left behind.
//!
//! Their threads hold the sandbox weakly: only resolution, at their start, needs it.
//!
//! [`SandboxBuilder::prewarm`]: crate::SandboxBuilder::prewarm

use std::collections::VecDeque;
use std::sync::{Mutex, Weak};

use paddock_linux_bwrap::runtime::exec::{Output as Streams, Stream};
use paddock_linux_bwrap::runtime::supervise::{Control, Notes};
use paddock_linux_bwrap::runtime::task::{Finished, Request};
use paddock_linux_bwrap::runtime::warm::Handover;
use paddock_policy::AbsPathBuf;

use crate::sandbox::Inner;
use crate::{Child, Command, Error};

/// One sandbox set up ahead.
struct Warm {
    handover: Option<crossbeam_channel::Sender<Handover>>,
    spawned: crossbeam_channel::Receiver<i32>,
    control: Control,
    notes: Notes,
    thread: Option<std::thread::JoinHandle<Result<Finished, Error>>>,
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm").finish_non_exhaustive()
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        // No task: its supervisor ends without running anything, and its run with it.
        drop(self.handover.take());
        if let Some(thread) = self.thread.take() {
            // The last hold on the sandbox may be this very thread's (it resolves with one):
            // it ends on its own once it returns, and cannot be joined from itself.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// The warm sandboxes of one `Sandbox`.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    size: usize,
    warm: Mutex<VecDeque<Warm>>,
}

impl Pool {
    /// A pool keeping `size` sandboxes warm (none started yet: see [`Pool::fill`]).
    pub(crate) fn new(size: usize) -> Pool {
        Pool { size, warm: Mutex::new(VecDeque::new()) }
    }

    /// Whether this pool keeps any.
    pub(crate) fn is_on(&self) -> bool {
        self.size > 0
    }

    /// Starts warm sandboxes until there are `size`.
    pub(crate) fn fill(&self, inner: &Weak<Inner>) {
        let Ok(mut warm) = self.warm.lock() else { return };
        while warm.len() < self.size {
            match start(inner) {
                Ok(w) => warm.push_back(w),
                Err(_) => break,
            }
        }
    }

    /// Runs `command` in a warm sandbox when one is ready for it, starting another in its
    /// place; `None` when there is none (the caller spawns as usual).
    pub(crate) fn spawn(
        &self,
        inner: &Weak<Inner>,
        command: &Command,
        cwd: &std::path::Path,
    ) -> Option<Result<Child, Error>> {
        // Canonical, as resolution makes it; a cwd that does not resolve is the usual
        // spawn's to report.
        let cwd = AbsPathBuf::new_lexical(std::fs::canonicalize(cwd).ok()?)?;
        let mut warm = loop {
            let mut w = self.warm.lock().ok()?.pop_front()?;
            // One whose run already ended (its setup failed) is dropped, not used.
            if w.thread.as_ref().is_some_and(|t| !t.is_finished()) {
                break w;
            }
            drop(w.handover.take());
        };
        let stream = |s: crate::Stdio| match s.0 {
            crate::command::StdioKind::Inherit => Stream::Inherit,
            crate::command::StdioKind::Null => Stream::Null,
            crate::command::StdioKind::Piped => Stream::Piped,
        };
        let handover = Handover {
            command: std::iter::once(command.program.clone())
                .chain(command.args.iter().cloned())
                .collect(),
            env: command.env.clone(),
            env_remove: command.env_remove.clone(),
            cwd,
            stdio: Streams {
                stdin: stream(command.stdin),
                stdout: stream(command.stdout),
                stderr: stream(command.stderr),
            },
            timeout: command.timeout,
        };
        let sent = warm.handover.take().map(|tx| tx.send(handover));
        if !matches!(sent, Some(Ok(()))) {
            // Its run ended meanwhile: the usual spawn instead.
            return None;
        }
        let pid = warm.spawned.recv().unwrap_or(0);
        let mut child = Child::from_run(
            u32::try_from(pid).unwrap_or(0),
            warm.control.handle(),
            std::mem::take(&mut warm.notes),
            warm.thread.take(),
            inner.clone(),
        );
        if pid == 0 {
            // The run ended without a sandbox: its outcome (the error) is the task's.
            if let Err(e) = child.finish_now() {
                return Some(Err(e));
            }
        }
        Some(Ok(child))
    }
}

/// Starts one warm sandbox: its run's thread, waiting for a task once it is set up.
fn start(weak: &Weak<Inner>) -> Result<Warm, Error> {
    let inner = weak.upgrade().ok_or(Error::Command { message: "the sandbox is gone".into() })?;
    let (spawned_tx, spawned) = crossbeam_channel::unbounded();
    let control = Control::notifying(spawned_tx)?;
    let handle = control.handle();
    let notes = Notes::default();
    let (handover_tx, handover_rx) = crossbeam_channel::bounded(1);
    let request = Request {
        // Placeholders: the hand-over brings the task's.
        command: vec!["true".into()],
        env: Vec::new(),
        env_remove: Vec::new(),
        itemize: inner.itemize,
        toggles: inner.toggles,
        stdio: Streams { stdin: Stream::Null, stdout: Stream::Null, stderr: Stream::Null },
        capture_limit: inner.capture_limit,
        timeout: None,
        grace: inner.grace,
        prespawned: None,
        control,
        notes: notes.clone(),
        proxy: inner.proxy.inner.clone(),
        deferred: Some(handover_rx),
    };
    let facts = inner.facts.clone();
    let project = inner.project.clone();
    drop(inner);
    let weak = weak.clone();
    let thread = std::thread::Builder::new().name("paddock-warm".into()).spawn(move || {
        paddock_linux_bwrap::runtime::task::run(request, &facts, |foreign| {
            let inner =
                weak.upgrade().ok_or(Error::Command { message: "the sandbox is gone".into() })?;
            inner.resolve(&project, foreign)
        })
        .map(Finished::with_bwrap_reaped)
    })?;
    Ok(Warm { handover: Some(handover_tx), spawned, control: handle, notes, thread: Some(thread) })
}
