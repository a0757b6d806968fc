//! The macOS executor: performs a [`SpawnPlan`] of this backend, from the task's private
//! temporary directory to its violations.
//!
//! [`run_plan`] executes `sandbox-exec` with exactly the plan's argv (`-p PROFILE`, the `-D`
//! parameters, `--`, the task), environment and directory, in a session (so a process
//! group) of its own, and supervises it ([`supervise`]: timeout, polite signals then the
//! kill, capture, usage).
//! Around it: the task's `TMPDIR` (the plan's placeholder) made fresh and removed at the end,
//! one `log stream` per run ([`monitor`]) keyed by the run's log tag, started before the
//! task and stopped after it, whose records become the run's violations, and, for a domain
//! list, the task's own listener of the shared egress proxy ([`Egress`]) on the one loopback
//! port its profile allows, whose refusals become [`Ran::refusals`]. A watchdog (`watchdog`)
//! kills what the run started and removes its directories if the runner itself is killed.
//!
//! Nothing here is macOS-only: the paths of `sandbox-exec` and `log` are options, so that the
//! executor runs on every Unix against stand-ins. Nothing is process-wide either: no signal
//! handler, no global, no printing (notes go to the run's [`Notes`]).

pub mod check;
pub mod monitor;
pub mod supervise;
mod watchdog;

pub use paddock_portbridge::{Refusal, SharedProxy, TaskRules};

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::time::Instant;

use paddock_policy::{BridgeSpec, SpawnPlan, Task, Violation};

pub use monitor::LogMonitor;
pub use supervise::{
    Control, DEFAULT_CAPTURE_LIMIT, NoteHook, Notes, RunOptions, RunOutcome, Stdio, Stream,
};

use crate::command::command;
use crate::error::Error;
use crate::plan::{BACKEND_NAME, log_tag};
use watchdog::Watchdog;

/// What [`Ran::itemized_by`] says when the monitor itemized the run.
pub const ITEMIZED_BY: &str = "seatbelt-log";

/// The `PATH` a task's program is looked up in when the plan sets none (what `execvp` uses).
const DEFAULT_PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";

/// A performed plan: how the task ended and what it was denied.
#[derive(Debug)]
pub struct Ran {
    /// How the task ended.
    pub outcome: RunOutcome,
    /// [`ITEMIZED_BY`] when the monitor ran for the whole task; `None` when it did not
    /// (a note says why) or was not asked for.
    pub itemized_by: Option<&'static str>,
    /// The task's denials, deduplicated.
    pub violations: Vec<Violation>,
    /// What the egress proxy refused the task (network violations with their reasons),
    /// unfiltered: the caller applies `report.ignore`.
    pub refusals: Vec<Refusal>,
}

/// The egress proxy a run with a domain list needs: the shared proxy, and the task's rules.
#[derive(Clone, Debug)]
pub struct Egress {
    /// The proxy the task's listener is added to (started now if no task uses it).
    pub proxy: SharedProxy,
    /// The task's `allow.network` and `deny.network`.
    pub rules: TaskRules,
}

/// The program and argv [`run_plan`] executes for `plan`: `opts.sandbox_exec` with the
/// plan's argv, argv\[0\] included, unchanged.
pub fn command_line(plan: &SpawnPlan, opts: &RunOptions) -> (PathBuf, Vec<OsString>) {
    (opts.sandbox_exec.clone(), plan.argv.clone())
}

/// Performs `plan`, made by [`MacosSeatbelt`](crate::MacosSeatbelt) for `task`, to its end.
///
/// Errors are paddock's own (exit 125 for a caller): a plan this executor cannot run, a
/// `TMPDIR` that cannot be made, a `sandbox-exec` that cannot be started. A program that is
/// not found or not executable is the task's failure: exit 127 or 126 with a note, and
/// nothing is started.
pub fn run_plan(plan: &SpawnPlan, task: &Task, opts: &RunOptions) -> Result<Ran, Error> {
    let start = Instant::now();
    check(plan, task, opts)?;
    if let Some(code) = missing_program(plan, &opts.notes) {
        let outcome =
            RunOutcome { exit_code: code, duration: start.elapsed(), ..RunOutcome::default() };
        return Ok(Ran {
            outcome,
            itemized_by: None,
            violations: Vec::new(),
            refusals: Vec::new(),
        });
    }
    let dirs = TaskDirs::create(plan, task)?;
    // The proxy listens before the task starts: a busy port fails the run here, never hands
    // the task another's proxy.
    let egress = start_egress(plan, opts)?;
    // Before any process of the run: whatever it starts is killed, and its directories
    // removed, if the runner dies.
    let mut watchdog = Watchdog::start(&dirs.paths())?;

    let monitor = match &opts.log {
        None => None,
        Some(log) => match LogMonitor::start_with(log, &log_tag(task), opts.monitor_ready) {
            Ok(m) => {
                watchdog.watch(m.id());
                Some(m)
            }
            Err(e) => {
                opts.notes.push(format!("note: violations are not itemized: {e}"));
                None
            }
        },
    };

    let (program, argv) = command_line(plan, opts);
    let mut cmd = command(&program);
    if let Some((arg0, rest)) = argv.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    cmd.envs(plan.env.iter().map(|(k, v)| (k, v)))
        .current_dir(plan.cwd.as_path())
        .stdin(stdio(opts.stdio.stdin))
        .stdout(stdio(opts.stdio.stdout))
        .stderr(stdio(opts.stdio.stderr));
    // A session of its own (as bwrap's `--new-session` on Linux), so a process group of its
    // own that no terminal's job control stops: in the caller's session a background group
    // reading the terminal would be stopped (SIGTTIN) and the run would wait for ever. The
    // caller's Ctrl-C reaches the task only through the run's control.
    // The task's group is announced to the watchdog by the child itself, before exec: a
    // runner killed right after the fork leaves no task behind.
    let watchdog_fd = watchdog.fd();
    // SAFETY: the closure runs in the child between fork and exec and calls only setsid,
    // getpid and write, which are async-signal-safe, and reads errno.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            watchdog::announce_self(watchdog_fd);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| Error::Spawn { program, message: e.to_string() })?;
    let outcome = supervise::supervise(child, start, opts);

    // The monitor stops after the task, whatever happened to it.
    let (itemized_by, violations) = match monitor {
        Some(m) => {
            let (violations, notes) = m.finish(opts.monitor_grace);
            opts.notes.extend(notes.into_iter().map(|n| format!("note: {n}")));
            (Some(ITEMIZED_BY), violations)
        }
        None => (None, Vec::new()),
    };
    for line in dirs.remove() {
        opts.notes.push(format!("warning: {line}"));
    }
    let refusals = egress.map(paddock_portbridge::TaskHandle::stop).unwrap_or_default();
    watchdog.done();
    Ok(Ran { outcome: outcome?, itemized_by, violations, refusals })
}

/// The task's listener on the shared egress proxy, when the plan has one.
fn start_egress(
    plan: &SpawnPlan,
    opts: &RunOptions,
) -> Result<Option<paddock_portbridge::TaskHandle>, Error> {
    let Some(port) = plan.bridges.iter().find_map(|b| match b {
        BridgeSpec::Proxy { port, .. } => Some(*port),
        _ => None,
    }) else {
        return Ok(None);
    };
    let Some(egress) = &opts.egress else {
        return Err(Error::Unsupported {
            what: "a domain list needs the egress proxy (RunOptions::egress)".to_owned(),
        });
    };
    let proxy = egress.proxy.get().map_err(|e| Error::Run {
        what: "start the egress proxy".to_owned(),
        message: e.to_string(),
    })?;
    let handle =
        proxy.add_task_on_loopback(port, egress.rules.clone()).map_err(|e| Error::Run {
            what: format!("serve the egress proxy on 127.0.0.1:{port}"),
            message: e.to_string(),
        })?;
    Ok(Some(handle))
}

/// Refuses what this executor does not do, before anything exists.
fn check(plan: &SpawnPlan, task: &Task, opts: &RunOptions) -> Result<(), Error> {
    let unsupported = |what: &str| Err(Error::Unsupported { what: what.to_owned() });
    if plan.backend != BACKEND_NAME {
        return unsupported(&format!("the plan is {}'s, not {BACKEND_NAME}'s", plan.backend));
    }
    if plan.bridges.iter().any(|b| !matches!(b, BridgeSpec::Proxy { .. })) {
        return unsupported("port bridges need a network namespace; macOS has none");
    }
    if !plan.payloads.is_empty() || plan.signal_fd.is_some() || plan.observer.is_some() {
        return unsupported("the plan hands the sandbox descriptors");
    }
    if opts.stdio.stdin == Stream::Piped {
        return unsupported("a task's stdin cannot be piped: paddock writes nothing to it");
    }
    // The monitor selects the run's denials by its tag: the profile must carry it.
    let tag = log_tag(task);
    if !plan.argv.iter().any(|a| a.to_string_lossy().contains(&tag)) {
        return unsupported("the plan was made for another task (its log tag differs)");
    }
    Ok(())
}

fn stdio(stream: Stream) -> std::process::Stdio {
    match stream {
        Stream::Inherit => std::process::Stdio::inherit(),
        Stream::Null => std::process::Stdio::null(),
        Stream::Piped => std::process::Stdio::piped(),
    }
}

/// The task's program: the argv element after the first `--`.
fn program_of(plan: &SpawnPlan) -> Option<&OsStr> {
    let at = plan.argv.iter().skip(1).position(|a| a == "--")? + 1;
    plan.argv.get(at + 1).map(OsString::as_os_str)
}

/// 127 (not found) or 126 (not executable) with a note, as a shell says, when the task's
/// program cannot run: looked up as `execvp` will, in the plan's `PATH` and directory.
fn missing_program(plan: &SpawnPlan, notes: &Notes) -> Option<i32> {
    let program = program_of(plan)?;
    let shown = program.to_string_lossy();
    let candidates: Vec<PathBuf> = if program.as_encoded_bytes().contains(&b'/') {
        vec![plan.cwd.as_path().join(program)]
    } else {
        let path = plan
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or_else(|| OsString::from(DEFAULT_PATH), |(_, v)| v.clone());
        std::env::split_paths(&path)
            .map(|dir| {
                let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
                plan.cwd.as_path().join(dir).join(program)
            })
            .collect()
    };
    let mut found = None;
    for candidate in &candidates {
        match std::fs::metadata(candidate) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => return None,
            Ok(_) => found = found.or(Some(candidate)),
            Err(_) => {}
        }
    }
    match found {
        Some(path) => {
            notes
                .push(format!("{shown}: permission denied ({} is not executable)", path.display()));
            Some(126)
        }
        None => {
            notes.push(format!("{shown}: command not found"));
            Some(127)
        }
    }
}

/// The task's runtime directory (made when missing) and the plan's placeholders in it (the
/// private `TMPDIR`), made fresh (mode 0700) and removed when the run ends or fails.
#[derive(Debug)]
struct TaskDirs {
    made: Vec<PathBuf>,
    runtime: Option<PathBuf>,
}

impl TaskDirs {
    fn create(plan: &SpawnPlan, task: &Task) -> Result<TaskDirs, Error> {
        let runtime = task.runtime_dir.as_path();
        let mut dirs = TaskDirs { made: Vec::new(), runtime: None };
        if std::fs::symlink_metadata(runtime).is_err() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(runtime).map_err(
                |source| Error::Io {
                    what: "create the task's runtime directory",
                    path: runtime.to_path_buf(),
                    source,
                },
            )?;
            dirs.runtime = Some(runtime.to_path_buf());
        }
        for placeholder in &plan.placeholders {
            let path = placeholder.path.as_path();
            if !placeholder.dir {
                return Err(Error::Unsupported {
                    what: format!("a placeholder file ({})", path.display()),
                });
            }
            // Not recursive: a directory already there is not this run's own.
            std::fs::DirBuilder::new().mode(0o700).create(path).map_err(|source| Error::Io {
                what: "create the task's temporary directory",
                path: path.to_path_buf(),
                source,
            })?;
            dirs.made.push(path.to_path_buf());
        }
        Ok(dirs)
    }

    /// What the run made, for the watchdog to remove if the runner dies.
    fn paths(&self) -> Vec<PathBuf> {
        self.made.iter().chain(&self.runtime).cloned().collect()
    }

    /// Removes what was made; what could not be removed, one line each.
    fn remove(mut self) -> Vec<String> {
        self.remove_all()
    }

    fn remove_all(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        for dir in self.made.drain(..).rev() {
            // Never follows a link the task left there.
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                lines.push(format!("cannot remove the task's {}: {e}", dir.display()));
            }
        }
        if let Some(runtime) = self.runtime.take()
            && let Err(e) = std::fs::remove_dir(&runtime)
        {
            lines.push(format!("cannot remove the task's {}: {e}", runtime.display()));
        }
        lines
    }
}

impl Drop for TaskDirs {
    fn drop(&mut self) {
        let _ = self.remove_all();
    }
}
