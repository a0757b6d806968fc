//! One task from start to report: the run's runtime dir and lock, the sweep of dead runs,
//! resolution settled against other live runs' placeholders, the plan, the host ends of
//! its bridges, the itemized run, and what is found after it (links changed, names that
//! appeared, what the task created that git or a shell would run).
//!
//! This is the order `paddock run` has always kept, now owned by one function that any
//! caller (the library's `Sandbox`, the CLI through it) runs on a thread of its own. It
//! prints nothing: notes are gathered in the run's [`Notes`], the report is returned.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use paddock_policy::{
    AbsPathBuf, Backend, HostFacts, ItemizeMode, ResolvedPolicy, Task, Violation,
};

use crate::error::Context;
use crate::runtime::exec::Output;
use crate::runtime::itemized::Ran;
use crate::runtime::observe::Mechanism;
use crate::runtime::prespawn::{PrespawnSlot, Prespawned};
use crate::runtime::project_walk::Scanned;
use crate::runtime::runtime_dir::RuntimeDir;
use crate::runtime::supervise::{AfterTask, Control, Notes, RunOptions, RunOutcome};
use crate::runtime::warm::{Deferred, DeferredSlot};
use crate::runtime::{Result, Toggles, bail};

/// A policy resolved for one spawn, with what the caller should be told about it.
#[derive(Debug)]
pub struct Resolution {
    /// The resolved policy.
    pub resolved: ResolvedPolicy,
    /// Notes from conversion and resolution.
    pub notes: Vec<String>,
    /// The task's working directory (canonical).
    pub cwd: AbsPathBuf,
    /// The walk of the project at start, for the one after the run.
    pub scanned: Option<Scanned>,
}

/// What to run and how.
#[derive(Debug)]
pub struct Request {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Variables set on top of the policy's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the policy's environment.
    pub env_remove: Vec<OsString>,
    /// The itemizing mode, when the caller overrides the policy's `report.itemize`.
    pub itemize: Option<ItemizeMode>,
    /// Strategies the caller turned off.
    pub toggles: Toggles,
    /// Where the task's standard streams go.
    pub stdio: Output,
    /// The most bytes of each piped stream kept.
    pub capture_limit: usize,
    /// Kill the task after this long.
    pub timeout: Option<Duration>,
    /// Between the polite signal and the kill.
    pub grace: Duration,
    /// A bwrap started before the plan, for the spawn when it fits.
    pub prespawned: Option<Prespawned>,
    /// The caller's hold on the run.
    pub control: Control,
    /// Where the run's notes go.
    pub notes: Notes,
    /// The egress proxy this run shares with others.
    pub proxy: crate::runtime::host_bridges::SharedProxy,
    /// A prewarmed run: `command`, `stdio` and `timeout` are placeholders, and the task
    /// comes on this channel once the sandbox is up ([`crate::runtime::warm`]).
    pub deferred: Option<crossbeam_channel::Receiver<crate::runtime::warm::Handover>>,
}

/// A finished task: how it ended and everything the report says.
#[derive(Debug)]
pub struct Finished {
    /// How the task ended (exit code, signal, timeout, usage, captured output).
    pub outcome: RunOutcome,
    /// Which mechanism itemized its denials, if one did.
    pub itemized_by: Option<&'static str>,
    /// The reported denials: traced or observed, refused by the proxy, created for git or
    /// a shell to run.
    pub violations: Vec<Violation>,
    /// The policy the task ran under (for summaries and hints).
    pub resolved: ResolvedPolicy,
    /// The task's working directory.
    pub cwd: AbsPathBuf,
}

impl Finished {
    /// The same, with bwrap reaped (see [`RunOutcome::teardown`]), for a run on a thread of
    /// its own, which must do it before it ends: bwrap's `--die-with-parent` follows the
    /// thread that started it, and killed while the kernel still tears the sandbox down, it
    /// would leave the sandbox's pid 1 to whichever process reaps orphans (the caller's, if
    /// it is a subreaper).
    pub fn with_bwrap_reaped(mut self) -> Finished {
        self.outcome.teardown = None;
        self
    }
}

/// Runs the task `request` describes to its end. `load` resolves the policy, given the
/// placeholders of other live runs (to be taken for missing names); its error comes back
/// as it is. A failure before the spawn leaves nothing behind.
pub fn run<E: From<crate::Error>>(
    request: Request,
    facts: &HostFacts,
    load: impl FnMut(Vec<PathBuf>) -> std::result::Result<Resolution, E>,
) -> std::result::Result<Finished, E> {
    let Request {
        command,
        env,
        env_remove,
        itemize,
        toggles,
        stdio,
        capture_limit,
        timeout,
        grace,
        prespawned,
        control,
        notes,
        proxy,
        deferred,
    } = request;
    // Locked before resolution: a run that may take another's placeholder for the user's
    // file is then alive when that run decides whether to remove it
    // (`runtime_dir::release_placeholders`).
    let runtime = RuntimeDir::create_with_tmp(false).with_context(|| {
        format!(
            "cannot create the task's runtime directory under {} (`paddock check` says why)",
            crate::runtime::runtime_dir::base().display()
        )
    })?;
    // Swept before resolution: a killed run's placeholders should be gone before resolution
    // looks at the project, or they would be taken for the user's own files.
    let own = Some(runtime.path().as_path());
    let foreign = crate::runtime::runtime_dir::sweep_stale(own);
    let mut loaded = crate::runtime::runtime_dir::resolve_settled(own, foreign, load)?;
    for n in loaded.notes.drain(..) {
        notes.push(format!("note: {n}"));
    }
    set_env(&mut loaded.resolved, env, &env_remove);
    // `tmp/` only when the plan mounts the task's tmp there (a grant covers /tmp).
    if !loaded.resolved.private_tmp {
        runtime.make_tmp().context("cannot create the task's tmp directory")?;
    }
    let mode = itemize.unwrap_or(loaded.resolved.report.itemize);
    let prewarmed = deferred.is_some();
    let (mechanism, itemize_note) = crate::runtime::observe::choose(mode, facts, toggles);
    if deferred.is_some() && !matches!(mechanism, Mechanism::Observe | Mechanism::Off) {
        return Err(crate::Error::run(
            "a prewarmed sandbox itemizes with the observers or not at all; strace follows a task from its start",
        )
        .into());
    }
    let task = task(&command, &loaded.cwd, runtime.path(), mechanism.observes())?;
    let plan =
        crate::LinuxBwrap.plan(&loaded.resolved, &task, facts).map_err(crate::Error::from)?;
    for d in &plan.diagnostics {
        notes.push(d.clone());
    }
    // Before the spawn: placeholders of other runs among these must outlive this run.
    let uses = runtime
        .record_uses_of(&loaded.resolved)
        .context("cannot write the task's runtime directory")?;
    // What the task changed on the host, looked at once nothing of the sandbox runs (while
    // bwrap is torn down: `AfterTask`).
    let found = Arc::new(Mutex::new(None));
    let after_task = after_task(&loaded.resolved, loaded.scanned.take(), prewarmed, &found);
    // Host ends of port grants and the egress proxy: a busy port fails here, before the
    // task starts. They stop with the task (or with this process: the sweep takes sockets).
    let bridges = crate::runtime::host_bridges::Bridges::start(&plan, &loaded.resolved, &proxy)?;
    let opts = RunOptions {
        timeout,
        grace,
        stdio,
        capture_limit,
        control,
        notes: notes.clone(),
        uses,
        toggles,
        // The supervisor without a C library cannot wait for a task.
        supervisor_nolibc: facts.supervisor_nolibc_exe.clone().filter(|_| deferred.is_none()),
        notifier: facts.supervisor_exe.clone(),
        inherit: bridges.inherited(),
        prespawned: PrespawnSlot::new(prespawned),
        deferred: DeferredSlot::new(
            deferred.map(|handover| Deferred { handover, policy_env: loaded.resolved.env.clone() }),
        ),
        after_task: after_task.clone(),
    };
    if let Some(note) = itemize_note {
        notes.push(format!("note: {note}"));
    }
    let run = crate::runtime::itemized::Run {
        plan: &plan,
        policy: &loaded.resolved,
        cwd: &loaded.cwd,
        opts: &opts,
        runtime_dir: Some(runtime.path().as_path()),
    };
    let ran = crate::runtime::itemize::run(mechanism, run, &task, facts);
    // Whatever happened, the host ends stop with the task.
    let proxied = bridges.has_proxy();
    let (refused, reasons) = bridges.stop(&loaded.resolved);
    let ran = ran?;
    // The run did it, unless it never got that far.
    after_task.run(ran.outcome.started);
    let found: Found = found.lock().ok().and_then(|mut f| f.take()).unwrap_or_default();
    for line in found.links_changed {
        notes.push(format!("warning: {line}"));
    }
    notes.extend(reasons);
    drop(runtime);
    for line in found.appeared {
        notes.push(format!("note: {line}"));
    }
    let Ran { outcome, itemized_by, mut violations } = ran;
    // The proxy itemizes refused destinations whether or not a tracer ran.
    let itemized_by = itemized_by.or(proxied.then_some("proxy"));
    violations.extend(refused);
    violations.extend(found.created);
    notes.extend(found.walk_lines);
    Ok(Finished { outcome, itemized_by, violations, resolved: loaded.resolved, cwd: loaded.cwd })
}

/// What the task changed on the host, found after it ([`after_task`]).
#[derive(Debug, Default)]
struct Found {
    /// Protected links pointing elsewhere than at the start.
    links_changed: Vec<String>,
    /// Deny targets missing at start that hold something now.
    appeared: Vec<String>,
    /// What the task created that git or a shell would run.
    created: Vec<Violation>,
    /// Lines about it (hooks disarmed).
    walk_lines: Vec<String>,
}

/// The work for once nothing of the sandbox runs any more: the protected links read again,
/// the deny targets that appeared, and the project walked again through its cache (only the
/// directories that changed are listed) for what the task created that git or a shell would
/// run. Its finding goes into `found`. A prewarmed sandbox torn down unused ran nothing:
/// what changed meanwhile is another run's (or the user's) to answer for.
fn after_task(
    policy: &ResolvedPolicy,
    scanned: Option<Scanned>,
    prewarmed: bool,
    found: &Arc<Mutex<Option<Found>>>,
) -> AfterTask {
    let links = crate::runtime::links::ProtectedLinks::record(policy);
    let missing = crate::runtime::appeared::Missing::of(policy);
    let found = Arc::clone(found);
    AfterTask::new(move |started| {
        let mut f = Found {
            links_changed: links.changed(),
            appeared: missing.appeared(),
            ..Found::default()
        };
        if let Some(scanned) = scanned.filter(|_| !prewarmed || started) {
            (f.created, f.walk_lines) = crate::runtime::project_walk::after_run(&scanned);
        }
        if let Ok(mut slot) = found.lock() {
            *slot = Some(f);
        }
    })
}

/// The caller's variables over the policy's environment.
fn set_env(resolved: &mut ResolvedPolicy, env: Vec<(OsString, OsString)>, remove: &[OsString]) {
    resolved.env.retain(|(k, _)| !remove.contains(k) && !env.iter().any(|(n, _)| n == k));
    resolved.env.extend(env);
}

fn task(
    command: &[OsString],
    cwd: &AbsPathBuf,
    runtime_dir: &AbsPathBuf,
    observe: bool,
) -> Result<Task> {
    let Some((program, args)) = command.split_first() else { bail!("no program to run") };
    Ok(Task {
        program: program.clone(),
        args: args.to_vec(),
        cwd: cwd.clone(),
        runtime_dir: runtime_dir.clone(),
        observe,
    })
}
