//! `--itemize auto` where the observers are unavailable: strace with `--seccomp-bpf`, run
//! inside the sandbox (`crate::trace::inside`) instead of around bwrap.
//!
//! strace installs its filter only in a process it starts. Around bwrap, it stopped at each
//! of bwrap's traced setup calls (a hundred `openat`s and `mkdir`s, 20 ms and more) before
//! the task ran. Inside, the supervisor's child executes it in place of the task, and it
//! traces from the shim on, as a plain `strace --seccomp-bpf` in the sandbox would.
//!
//! What keeps strace out of the task's reach: the shim puts the task in a Landlock domain
//! that scopes signals, so the task can neither ptrace, read or write strace (no
//! `/proc/PID/mem`, no reopening its log through `/proc/PID/fd`) nor stop or kill it; its
//! log is a pipe only strace holds (the shim closes it before the task runs). A kernel
//! without that scope (before 6.12, or Landlock disabled) gets strace around bwrap. Should
//! the trace still lack the task's end, the run is reported as not itemized.
//!
//! When strace fails before it runs the shim (the task has not run: a policy that hides
//! strace's libraries, for one), the caller traces bwrap instead.

use crate::runtime::Result;
use crate::shim::signal_scoping_available;
use crate::trace::{TraceOptions, inside};
use paddock_strace_parse::{Event, EventKind};

use crate::runtime::itemized::{Ran, Run};
use crate::runtime::supervise::run_plan_with;
use crate::runtime::trace_log::{Observer, Reader, Violations};

/// Runs `plan` with strace inside the sandbox. `None`: the task did not run (the kernel
/// cannot scope signals, or strace failed before running the shim: then a note is
/// printed), and the caller runs it with strace around bwrap.
pub fn run(run: Run<'_>, topts: &TraceOptions) -> Result<Option<Ran>> {
    let Run { plan, policy, cwd, opts, runtime_dir } = run;
    if !signal_scoping_available() {
        // Nothing to say: the kernel decides, as it does for the observers.
        return Ok(None);
    }
    let traced = inside(plan.clone(), &topts.strace)?;
    let observer = TaskEnd::new(Violations::inside(policy.clone(), cwd.as_path()));
    let (log, reader) = Reader::start_unwatched(observer)?;
    let outcome = run_plan_with(&traced.plan, opts, runtime_dir, vec![(log, traced.fd)])?;
    let finished = reader.finish();
    if !finished.as_ref().is_some_and(|f| f.traced_a_call) && !outcome.timed_out {
        // strace never executed the shim, so the task never ran.
        opts.notes.push("note: strace could not start in the sandbox (its message is above); tracing bubblewrap instead");
        return Ok(None);
    }
    let Some(finished) = finished else {
        opts.notes.push("the trace did not end with the task; denials are not itemized");
        return Ok(Some(Ran { outcome, itemized_by: None, violations: Vec::new() }));
    };
    let ended = finished.observer.ended;
    let violations = finished.observer.inner.reported.into_vec();
    if !ended && !outcome.timed_out {
        opts.notes
            .push("strace ended before the task did; the denials seen until then are reported");
        return Ok(Some(Ran { outcome, itemized_by: None, violations }));
    }
    Ok(Some(Ran { outcome, itemized_by: Some("strace"), violations }))
}

/// Passes events on and notes whether the trace showed its first process (the shim, then
/// the task) end: a trace without that end was cut short (strace was killed).
struct TaskEnd {
    inner: Violations,
    first: Option<u32>,
    ended: bool,
}

impl TaskEnd {
    fn new(inner: Violations) -> TaskEnd {
        TaskEnd { inner, first: None, ended: false }
    }
}

impl Observer for TaskEnd {
    fn event(&mut self, event: &Event<'_>) {
        if self.first.is_none() && event.syscall().is_some() {
            self.first = event.pid;
        }
        if self.first.is_some()
            && event.pid == self.first
            && matches!(event.kind, EventKind::Exited { .. } | EventKind::Killed { .. })
        {
            self.ended = true;
        }
        self.inner.event(event);
    }
}
