//! The one dispatcher of the itemizers: the observers are one strategy beside strace's
//! three (inside the sandbox, attached to the supervisor, around bwrap), and this is the
//! only place that chooses among them and falls from one to the next.
//!
//! - [`Mechanism::Observe`]: the observers; when they cannot start, the task runs once,
//!   planned again without them, itemized by strace if it is here.
//! - [`Mechanism::Strace`] with `--seccomp-bpf`: strace inside the sandbox, unless unix
//!   sockets are granted by path (the shim strace runs does not install the supervisor's
//!   notification filter) or the caller turned it off; without `--seccomp-bpf`: strace
//!   attached to the supervisor. Either falls back to strace around bwrap.
//! - `Mechanism::Off`: untraced.

use std::borrow::Cow;

use paddock_policy::{Backend, HostFacts, ItemizeMode, Task};

use crate::runtime::Result;
use crate::runtime::itemized::{Ran, Run};
use crate::runtime::observe::Mechanism;
use crate::trace::TraceOptions;

/// Runs `run` itemized by `mechanism`. `task` and `facts` plan it again when the observers
/// cannot start.
pub fn run(mechanism: Mechanism, run: Run<'_>, task: &Task, facts: &HostFacts) -> Result<Ran> {
    let (plan, trace) = match mechanism {
        Mechanism::Observe => {
            if let Some(ran) =
                crate::runtime::observe::run(run.plan, run.policy, run.opts, run.runtime_dir)?
            {
                return Ok(ran);
            }
            // What `auto` picks on a host without the observers.
            let (trace, _) = crate::runtime::strace::choose(ItemizeMode::Auto, facts);
            run.opts.notes.push(if trace.is_some() {
                "note: itemizing with strace instead"
            } else {
                "note: denials are enforced but not itemized"
            });
            let task = Task { observe: false, ..task.clone() };
            (Cow::Owned(crate::LinuxBwrap.plan(run.policy, &task, facts)?), trace)
        }
        Mechanism::Strace(o) => (Cow::Borrowed(run.plan), Some(o)),
        Mechanism::Off => (Cow::Borrowed(run.plan), None),
    };
    let run = Run { plan: &plan, ..run };
    match trace {
        Some(topts) => strace(run, &topts),
        None => {
            let outcome =
                crate::runtime::strace::run_untraced(run.plan, run.opts, run.runtime_dir)?;
            Ok(Ran { outcome, itemized_by: None, violations: Vec::new() })
        }
    }
}

/// strace's strategies, best first.
fn strace(run: Run<'_>, topts: &TraceOptions) -> Result<Ran> {
    let path_grants = matches!(run.policy.unix_sockets, paddock_policy::UnixSockets::Paths { .. });
    if topts.seccomp_bpf
        && !path_grants
        && run.opts.toggles.strace_inside
        && let Some(ran) = crate::runtime::inside::run(run, topts)?
    {
        return Ok(ran);
    }
    if !topts.seccomp_bpf
        && run.opts.toggles.strace_attach
        && let Some(ran) = crate::runtime::attach::run(run, topts)?
    {
        return Ok(ran);
    }
    crate::runtime::strace::around(run, topts)
}
