//! `paddock check` on macOS: can this process sandbox a task with seatbelt, and will its
//! denials be itemized? Each failure names its cause and its fix.
//!
//! The checks, in order:
//! - `sandbox-exec`: the program exists and is executable;
//! - `nested`: this process is not already sandboxed (`sandbox_check` on macOS): macOS
//!   refuses to apply a sandbox inside one, whatever the inner profile;
//! - `sandbox-apply`: a trivial profile applies (`sandbox-exec -p '(version 1)(allow
//!   default)' -- true`), its failure read by [`probe_verdict`];
//! - `sandboxed-true`: a real plan of this backend runs `true` to exit 0 (the caller runs
//!   it, with the policy it would run tasks under, and passes the outcome);
//! - `log`: `log stream` starts for a tag of its own (a warning only: without it runs are
//!   enforced the same and reported with `itemized: false`).
//!
//! Like the executor, nothing here is macOS-only but the `sandbox_check` call: the programs'
//! paths are options, so the checks run on Linux against stand-ins.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use paddock_policy::{CheckReport, Status};

use crate::command::command;
use crate::diagnose::probe_verdict;
use crate::error::Error;
use crate::plan::SANDBOX_EXEC;
use crate::run::LogMonitor;
use crate::violation::LOG_PROGRAM;

/// The trivial profile `sandbox-apply` applies.
pub const TRIVIAL_PROFILE: &str = "(version 1)(allow default)";

/// What the checks look at.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// [`SANDBOX_EXEC`] on macOS, a stand-in in tests.
    pub sandbox_exec: PathBuf,
    /// [`LOG_PROGRAM`] on macOS, a stand-in in tests.
    pub log: PathBuf,
    /// What `sandbox-apply` runs under the trivial profile (`/usr/bin/true`).
    pub true_program: PathBuf,
    /// Whether this process runs in a sandbox already: `None` asks macOS (`sandbox_check`;
    /// elsewhere nothing is sandboxed).
    pub nested: Option<bool>,
    /// How long `log stream` may take to say it streams.
    pub log_ready: Duration,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            sandbox_exec: PathBuf::from(SANDBOX_EXEC),
            log: PathBuf::from(LOG_PROGRAM),
            true_program: PathBuf::from("/usr/bin/true"),
            nested: None,
            log_ready: Duration::from_secs(5),
        }
    }
}

/// The outcome of running a real plan's `true` (`sandboxed-true`), as the caller saw it.
#[derive(Clone, Debug)]
pub enum SandboxedTrue {
    /// It was not tried, since an earlier check failed.
    NotTried,
    /// The task's exit code.
    Exited(i32),
    /// paddock's own error (the plan could not be made or run).
    Failed(String),
}

/// The checks before `sandboxed-true`: whether the caller should try a real plan at all is
/// [`CheckReport::ok`] of this.
pub fn check_sandbox(opts: &CheckOptions) -> CheckReport {
    let mut report = check_in_process(opts);
    if !report.ok() {
        return report;
    }
    match apply_trivial(opts) {
        Ok(()) => report.push(
            "sandbox-apply",
            Status::Ok,
            "sandbox-exec applies a profile".to_owned(),
            None,
        ),
        Err(e @ Error::Nested { .. }) => report.push(
            "sandbox-apply",
            Status::Fail,
            e.to_string(),
            Some("run paddock from a shell that is not sandboxed (a plain Terminal window)"),
        ),
        Err(e) => report.push(
            "sandbox-apply",
            Status::Fail,
            e.to_string(),
            Some("sandbox-exec cannot sandbox here; its message above says why"),
        ),
    }
    report
}

/// `sandbox-exec` present and this process not sandboxed already: the checks that start no
/// process, cheap enough for every `paddock::Sandbox`'s build (`paddock run` builds one per
/// run).
pub fn check_in_process(opts: &CheckOptions) -> CheckReport {
    let mut report = CheckReport::default();
    let exe = &opts.sandbox_exec;
    let executable = std::fs::metadata(exe).is_ok_and(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.is_file() && m.permissions().mode() & 0o111 != 0
    });
    if !executable {
        report.push(
            "sandbox-exec",
            Status::Fail,
            format!("{} is missing or not executable", exe.display()),
            Some(
                "sandbox-exec ships with every macOS in /usr/bin; on a system without it (a stripped image, another OS) this backend cannot run",
            ),
        );
        return report;
    }
    report.push("sandbox-exec", Status::Ok, format!("{} is present", exe.display()), None);

    let nested = opts.nested.unwrap_or_else(already_sandboxed);
    if nested {
        report.push(
            "nested",
            Status::Fail,
            "this process already runs inside a macOS sandbox (an app's sandbox, another tool's seatbelt profile, a coding agent's sandbox), and macOS cannot apply a sandbox inside a sandbox".to_owned(),
            Some("run paddock from a shell that is not sandboxed (a plain Terminal window)"),
        );
        return report;
    }
    report.push("nested", Status::Ok, "this process is not sandboxed".to_owned(), None);
    report
}

/// Adds `sandboxed-true` (what the caller's real plan did) and `log` to `report`.
pub fn check_rest(report: &mut CheckReport, opts: &CheckOptions, sandboxed_true: &SandboxedTrue) {
    match sandboxed_true {
        SandboxedTrue::NotTried => {}
        SandboxedTrue::Exited(0) => report.push(
            "sandboxed-true",
            Status::Ok,
            "true ran to exit 0 under paddock's default profile".to_owned(),
            None,
        ),
        SandboxedTrue::Exited(code) => report.push(
            "sandboxed-true",
            Status::Fail,
            format!("true exited {code} under paddock's default profile"),
            Some(
                "paddock's profile does not run here; please report this macOS version with `paddock plan --backend macos-seatbelt --json -- true`",
            ),
        ),
        SandboxedTrue::Failed(why) => report.push(
            "sandboxed-true",
            Status::Fail,
            format!("a sandboxed true could not run: {why}"),
            Some("the message above names the cause"),
        ),
    }
    match LogMonitor::start_with(&opts.log, "paddock-check", opts.log_ready) {
        Ok(monitor) => {
            let (_, notes) = monitor.finish(Duration::ZERO);
            match notes.first() {
                None => report.push(
                    "log",
                    Status::Ok,
                    "log stream works: denials are itemized".to_owned(),
                    None,
                ),
                Some(note) => report.push(
                    "log",
                    Status::Warn,
                    format!("log stream started but {note}"),
                    Some(LOG_FIX),
                ),
            }
        }
        Err(e) => report.push(
            "log",
            Status::Warn,
            format!("{e}: runs are enforced the same, but not itemized (itemized: false)"),
            Some(LOG_FIX),
        ),
    }
}

const LOG_FIX: &str = "`log stream` needs an administrator: run paddock as a user in the admin group (or with sudo) to itemize denials";

fn apply_trivial(opts: &CheckOptions) -> Result<(), Error> {
    let output = command(&opts.sandbox_exec)
        .arg("-p")
        .arg(TRIVIAL_PROFILE)
        .arg("--")
        .arg(&opts.true_program)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::Spawn { program: opts.sandbox_exec.clone(), message: e.to_string() })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    probe_verdict(output.status.success(), &output.status.to_string(), &stderr)
}

/// Whether this process runs inside a seatbelt sandbox already (`sandbox_check` with no
/// operation: any sandbox at all).
#[cfg(target_os = "macos")]
fn already_sandboxed() -> bool {
    unsafe extern "C" {
        // libsystem_sandbox, part of libSystem: `int sandbox_check(pid_t, const char *,
        // enum sandbox_filter_type, ...)`.
        fn sandbox_check(
            pid: libc::pid_t,
            operation: *const libc::c_char,
            filter: libc::c_int,
            ...
        ) -> libc::c_int;
    }
    // SAFETY: our own pid, a null operation (asks "is it sandboxed at all") and
    // SANDBOX_FILTER_NONE (0) with no variadic arguments, as the header documents; the call
    // reads nothing of ours.
    unsafe { sandbox_check(libc::getpid(), std::ptr::null(), 0) != 0 }
}

/// Off macOS no process is in a seatbelt sandbox.
#[cfg(not(target_os = "macos"))]
fn already_sandboxed() -> bool {
    false
}
