//! One task on macOS from start to report: the policy resolved, a runtime directory of the
//! task's own, the seatbelt plan, and `paddock-macos-seatbelt`'s executor performing it
//! (the log monitor itemizes, the task's `TMPDIR` is made and removed there, a domain list
//! gets the task's own listener on the sandboxes' shared egress proxy).
//!
//! The counterpart of `linux-bwrap`'s `runtime::task`, much shorter: macOS has no mount
//! namespace, so there are no placeholders to share with other runs and no walk of the
//! project before and after. It prints nothing: notes go to the run's `Notes`.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use paddock_linux_bwrap::runtime::host::CachedHost;
use paddock_macos_seatbelt::run::{
    Control, Egress, Notes, Refusal, RunOptions, RunOutcome, Stdio, Stream, TaskRules,
};
use paddock_macos_seatbelt::{LOG_PROGRAM, MacosSeatbelt, SANDBOX_EXEC};
use paddock_policy::{
    AbsPathBuf, Backend, ItemizeMode, ReportFilter, ResolvedPolicy, Task, Violation,
};

use crate::command::StdioKind;
use crate::sandbox::Inner;
use crate::{Command, Error};

/// A finished task: how it ended and everything the report says.
#[derive(Debug)]
pub(crate) struct Finished {
    /// How the task ended.
    pub(crate) outcome: RunOutcome,
    /// `seatbelt-log` when the monitor itemized the run.
    pub(crate) itemized_by: Option<&'static str>,
    /// The task's denials.
    pub(crate) violations: Vec<Violation>,
    /// The policy the task ran under.
    pub(crate) resolved: ResolvedPolicy,
    /// The task's working directory.
    pub(crate) cwd: AbsPathBuf,
}

/// Runs `command` under the sandbox `inner` to its end, taking signals from `control`.
pub(crate) fn run(
    inner: &Inner,
    command: &Command,
    control: Control,
    notes: Notes,
) -> Result<Finished, Error> {
    if command.program.is_empty() {
        return Err(Error::Command { message: "no program to run".into() });
    }
    let stream = |s: crate::Stdio| match s.0 {
        StdioKind::Inherit => Stream::Inherit,
        StdioKind::Null => Stream::Null,
        StdioKind::Piped => Stream::Piped,
    };
    if command.stdin.0 == StdioKind::Piped {
        return Err(Error::Command {
            message: "a task's stdin cannot be piped: paddock writes nothing to it; use Stdio::null() or Stdio::inherit()".into(),
        });
    }

    let ctx = paddock_policy::Context::new(inner.project.clone(), inner.home.clone())
        .with_env(inner.env.clone())
        .with_config_files(inner.config.clone().into_iter().collect());
    let host = CachedHost::with_foreign(Vec::new());
    let (mut resolved, resolution_notes) = paddock_policy::resolve(&inner.policy, &ctx, &host)?;
    for n in inner.notes.iter().chain(&resolution_notes) {
        notes.push(format!("note: {n}"));
    }
    let cwd = paddock_policy::canonicalize(&host, &inner.cwd_of(command.cwd.as_deref()))?.0;
    resolved.env.retain(|(k, _)| {
        !command.env_remove.contains(k) && !command.env.iter().any(|(n, _)| n == k)
    });
    resolved.env.extend(command.env.iter().cloned());

    let runtime = RuntimeDir::create()?;
    let task = Task {
        program: command.program.clone(),
        args: command.args.clone(),
        cwd: cwd.clone(),
        runtime_dir: runtime.path.clone(),
        observe: false,
    };
    let plan = MacosSeatbelt::new().plan(&resolved, &task, &inner.facts)?;
    for d in &plan.diagnostics {
        notes.push(d.clone());
    }
    let mode = inner.itemize.unwrap_or(resolved.report.itemize);
    let opts = RunOptions {
        timeout: command.timeout,
        grace: inner.grace,
        stdio: Stdio {
            stdin: stream(command.stdin),
            stdout: stream(command.stdout),
            stderr: stream(command.stderr),
        },
        capture_limit: inner.capture_limit,
        control,
        notes: notes.clone(),
        sandbox_exec: PathBuf::from(SANDBOX_EXEC),
        log: (mode != ItemizeMode::Off).then(|| PathBuf::from(LOG_PROGRAM)),
        // A domain list: the task's own listener on the sandboxes' shared proxy.
        egress: TaskRules::from_policy(&resolved.network)
            .map(|rules| Egress { proxy: inner.proxy.inner.clone(), rules }),
        ..RunOptions::new()?
    };
    let ran = paddock_macos_seatbelt::run::run_plan(&plan, &task, &opts).map_err(Error::from)?;
    drop(runtime);
    let (mut violations, refused) = (ran.violations, network_violations(ran.refusals, &resolved));
    for line in refused.1 {
        notes.push(format!("note: {line}"));
    }
    violations.extend(refused.0);
    Ok(Finished { outcome: ran.outcome, itemized_by: ran.itemized_by, violations, resolved, cwd })
}

/// The proxy's refusals that `report.ignore` keeps, as network violations, and the lines
/// for those whose reason the summary would not tell.
fn network_violations(
    refusals: Vec<Refusal>,
    resolved: &ResolvedPolicy,
) -> (Vec<Violation>, Vec<String>) {
    let filter = ReportFilter::new(resolved);
    let kept: Vec<Refusal> =
        refusals.into_iter().filter(|r| filter.keep(&r.violation, None)).collect();
    let lines = paddock_portbridge::refusal_notes(&kept);
    (kept.into_iter().map(|r| r.violation).collect(), lines)
}

/// The task's runtime directory under the user's temporary directory: made fresh (0700),
/// removed with everything in it when the run ends.
struct RuntimeDir {
    path: AbsPathBuf,
}

impl RuntimeDir {
    fn create() -> Result<RuntimeDir, Error> {
        let base = std::fs::canonicalize(std::env::temp_dir())?;
        let mut last = None;
        for attempt in 0u32..16 {
            let nanos =
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let name =
                OsString::from(format!("paddock-{}-{:08x}{attempt:x}", std::process::id(), nanos));
            let path = base.join(name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let path = AbsPathBuf::new_lexical(&path).ok_or_else(|| Error::Command {
                        message: format!("{} is not an absolute path", path.display()),
                    })?;
                    return Ok(RuntimeDir { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no runtime directory")).into())
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.path.as_path());
    }
}
