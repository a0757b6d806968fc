//! strace's ways of itemizing that need no other module: choosing whether and how to trace,
//! running untraced, and strace around bwrap (`trace::wrap`), the way every other falls
//! back to. strace attached to the supervisor is [`crate::runtime::attach`], strace inside
//! the sandbox [`crate::runtime::inside`]; [`crate::runtime::itemize`] picks among them.

use std::path::Path;

use paddock_policy::{AbsPathBuf, HostFacts, ItemizeMode, SpawnPlan};

use crate::runtime::Result;
use crate::runtime::itemized::{Ran, Run};
use crate::runtime::supervise::{RunOptions, RunOutcome, run_plan_in, run_plan_with};
use crate::runtime::trace_log::{Reader, Violations};
use crate::trace::{TraceOptions, wrap};

/// How (and whether) to trace, from the policy's `report.itemize` and the host. The second
/// value is a note for the user when the choice differs from what was asked.
pub fn choose(mode: ItemizeMode, facts: &HostFacts) -> (Option<TraceOptions>, Option<String>) {
    let strace = facts.strace.as_ref().and_then(AbsPathBuf::new_lexical);
    match (mode, strace) {
        (ItemizeMode::Off, _) => (None, None),
        (ItemizeMode::Strace | ItemizeMode::Observe, None) => (
            None,
            Some(
                "strace was not found: denials are enforced but not itemized (run `paddock check`)"
                    .into(),
            ),
        ),
        (ItemizeMode::Auto, None) => (None, None),
        // `strace`: every syscall stop, so calls the seccomp filter refuses show too.
        (ItemizeMode::Strace, Some(strace)) => {
            (Some(TraceOptions { strace, seccomp_bpf: false }), None)
        }
        (ItemizeMode::Observe, Some(strace)) => (
            Some(TraceOptions { strace, seccomp_bpf: facts.strace_seccomp_bpf }),
            Some("--itemize observe is not available yet; itemizing with strace".into()),
        ),
        (ItemizeMode::Auto, Some(strace)) => {
            (Some(TraceOptions { strace, seccomp_bpf: facts.strace_seccomp_bpf }), None)
        }
    }
}

/// Runs `plan` with nobody tracing it: started by `paddock-supervisor-nolibc` when that is
/// next to paddock and the plan needs nothing else of a supervisor
/// (`crate::nolibc`), else as planned.
pub fn run_untraced(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&Path>,
) -> Result<RunOutcome> {
    let without_libc = (plan.backend == crate::BACKEND_NAME)
        .then(|| opts.supervisor_nolibc.clone())
        .flatten()
        .and_then(AbsPathBuf::new_lexical)
        .and_then(|exe| crate::nolibc::without_libc(plan, &exe));
    run_plan_in(without_libc.as_ref().unwrap_or(plan), opts, runtime_dir)
}

/// Runs `plan` with strace around bwrap (everything before the supervisor's `execve` is
/// setup and is not classified). When strace fails on its own (it exited, the task never
/// started and strace traced no call, not even bwrap's `execve`), the task is run once more
/// untraced, and the notes say so. Only the supervisor's word, strace's pipe and how strace
/// ended decide this, never the task's output: a task printing a strace-like last line is
/// not run again, and a strace killed by a signal (the caller's kill, or anyone's) did not
/// fail on its own: its sandbox goes with it and nothing runs in its place.
pub fn around(run: Run<'_>, topts: &TraceOptions) -> Result<Ran> {
    let Run { plan, policy, cwd, opts, runtime_dir } = run;
    let traced = wrap(plan.clone(), topts);
    let (write, reader) = Reader::start(Violations::new(policy.clone(), cwd.as_path()))?;
    let outcome = run_plan_with(&traced.plan, opts, runtime_dir, vec![(write, traced.fd)])?;
    let finished = reader.finish();
    let traced_a_call = finished.as_ref().is_some_and(|f| f.traced_a_call);
    if !outcome.started && !outcome.timed_out && !traced_a_call && outcome.killed_by.is_none() {
        opts.notes.push("strace failed before the task started (its message is above); running the task once more without itemizing denials");
        let outcome = run_untraced(plan, opts, runtime_dir)?;
        return Ok(Ran { outcome, itemized_by: None, violations: Vec::new() });
    }
    match finished {
        Some(f) if f.stopped_stuck_tracer => {
            opts.notes.push("bubblewrap failed and left a process behind that strace kept waiting for; strace was stopped (is /proc here another pid namespace's? run `paddock check`)");
            Ok(Ran { outcome, itemized_by: None, violations: Vec::new() })
        }
        Some(f) => Ok(Ran {
            outcome,
            itemized_by: Some("strace"),
            violations: f.observer.reported.into_vec(),
        }),
        None => {
            opts.notes.push("the trace did not end with the task; denials are not itemized");
            Ok(Ran { outcome, itemized_by: None, violations: Vec::new() })
        }
    }
}
