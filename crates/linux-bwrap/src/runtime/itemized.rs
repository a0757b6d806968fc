//! What every itemizing strategy takes and gives back: the run to itemize ([`Run`]) and the
//! finished run with its denials ([`Ran`]). Plain data, so that the strategies and their
//! dispatcher ([`crate::runtime::itemize`]) depend on it and not on each other.

use std::path::Path;

use paddock_policy::{AbsPathBuf, ResolvedPolicy, SpawnPlan, Violation};

use crate::runtime::supervise::{RunOptions, RunOutcome};

/// A run to itemize: the plan, the policy and working directory its trace is classified
/// against, how it is supervised, and the runtime dir its placeholders are recorded in.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// The plan to run.
    pub plan: &'a SpawnPlan,
    /// The policy the denials are classified and filtered by.
    pub policy: &'a ResolvedPolicy,
    /// The task's working directory.
    pub cwd: &'a AbsPathBuf,
    /// Timeout, grace, capture, inherited descriptors.
    pub opts: &'a RunOptions,
    /// The run's runtime dir.
    pub runtime_dir: Option<&'a Path>,
}

/// A finished run and what the trace said.
#[derive(Debug)]
pub struct Ran {
    /// How the task ended.
    pub outcome: RunOutcome,
    /// `Some("strace")` when the run was itemized.
    pub itemized_by: Option<&'static str>,
    /// The reported violations.
    pub violations: Vec<Violation>,
}
