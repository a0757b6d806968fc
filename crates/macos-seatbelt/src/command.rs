//! The crate's one door to `std::process::Command`.
//!
//! The backend starts three programs, all by the absolute path its caller gives (on macOS
//! the constants [`SANDBOX_EXEC`](crate::SANDBOX_EXEC) and [`LOG_PROGRAM`](crate::LOG_PROGRAM)):
//! `sandbox-exec` performing a plan (`run`), `log stream` for the violation monitor, and
//! `sandbox-exec` for the probe.

use std::ffi::OsStr;
use std::process::Command;

/// A command for `program` (an absolute path), with an empty environment: the helpers take
/// their whole input from argv, and a plan sets the task's environment itself.
#[allow(clippy::disallowed_methods)] // The one place this crate starts a process (see above).
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    cmd
}
