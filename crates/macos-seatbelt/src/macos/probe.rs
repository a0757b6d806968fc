//! The probe: can this process sandbox a task with seatbelt?
//!
//! It checks that `/usr/bin/sandbox-exec` exists and that applying a trivial profile works.
//! The second check is the one that matters inside another sandbox: macOS refuses
//! `sandbox_apply` in a process that is already sandboxed, whatever the inner profile (even
//! `(allow default)`) - `sandbox-exec` then exits 71 with `sandbox_apply: Operation not
//! permitted`. No grant fixes that, so the probe names the cause instead of letting a task
//! fail obscurely.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use paddock_policy::HostFacts;

use crate::command::command;
use crate::diagnose::probe_verdict;
use crate::error::Error;
use crate::plan::SANDBOX_EXEC;

/// The trivial profile the probe applies (the one `paddock check` applies).
pub use crate::run::check::TRIVIAL_PROFILE;
/// What the probe runs under it.
pub const TRUE: &str = "/usr/bin/true";

/// Checks that seatbelt can be applied here. `Ok` means a plan of this backend can run.
pub fn probe() -> Result<(), Error> {
    if !Path::new(SANDBOX_EXEC).is_file() {
        return Err(Error::SandboxExecMissing { path: PathBuf::from(SANDBOX_EXEC) });
    }
    let output = command(SANDBOX_EXEC)
        .args(["-p", TRIVIAL_PROFILE, TRUE])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::Spawn {
            program: PathBuf::from(SANDBOX_EXEC),
            message: e.to_string(),
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    probe_verdict(output.status.success(), &output.status.to_string(), &stderr)
}

/// The host facts this backend plans from: whether `sandbox-exec` exists, and paddock's own
/// executable.
pub fn host_facts() -> HostFacts {
    HostFacts {
        sandbox_exec: Path::new(SANDBOX_EXEC).is_file(),
        self_exe: std::env::current_exe().ok(),
        ..HostFacts::default()
    }
}
