//! The crate's one door to `std::process::Command`.
//!
//! The backend never starts the task (the CLI's exec module performs plans); it starts two
//! helpers of its own, `log stream` for the violation monitor and `sandbox-exec` for the
//! probe, both by absolute path, from here.

use std::process::Command;

/// A command for `program` (an absolute path), with an empty environment apart from what
/// the helper needs to find nothing: the helpers take their whole input from argv.
#[allow(clippy::disallowed_methods)] // The one place this crate starts a helper (see above).
pub(crate) fn command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    cmd
}
