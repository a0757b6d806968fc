//! The one error type of the macOS backend's OS side: performing a plan, starting the
//! violation monitor and probing `sandbox-exec`.
//!
//! Planning errors are [`paddock_policy::Error`] values (the [`Backend`](paddock_policy::Backend)
//! trait returns them). This type is the same on every OS, so that code handling it compiles
//! everywhere; on Linux only the executor's tests produce it.

use std::path::PathBuf;

/// What can go wrong running the macOS side of the backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A helper program could not be started.
    #[error("could not start {}: {message}", program.display())]
    Spawn {
        /// The program, by absolute path.
        program: PathBuf,
        /// The OS's words.
        message: String,
    },
    /// `log stream` did not say it was streaming within the time allowed, so violations
    /// of a task started now would be lost.
    #[error("`log stream` did not start within {seconds} s{}", framed(stderr))]
    MonitorNotReady {
        /// How long paddock waited.
        seconds: u64,
        /// What `log stream` printed on stderr, if anything.
        stderr: String,
    },
    /// A step of performing a plan failed.
    #[error("cannot {what}: {message}")]
    Run {
        /// What was being done.
        what: String,
        /// The OS's words.
        message: String,
    },
    /// A file operation of the run failed (the task's temporary directory).
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS's error.
        source: std::io::Error,
    },
    /// The plan asks for something this executor does not do; the task did not start.
    #[error("the macOS executor cannot run this plan: {what}")]
    Unsupported {
        /// What the plan asks for.
        what: String,
    },
    /// `/usr/bin/sandbox-exec` is missing.
    #[error("{} is missing; paddock needs macOS's sandbox-exec to sandbox a task", path.display())]
    SandboxExecMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The process is already inside a seatbelt sandbox, and macOS cannot apply a second
    /// one (`sandbox_apply: Operation not permitted`, exit 71). No grant changes this.
    #[error(
        "this process already runs inside a macOS sandbox, and macOS cannot apply a sandbox \
         inside a sandbox (sandbox_apply: Operation not permitted); run paddock from an \
         unsandboxed shell{}",
        framed(stderr)
    )]
    Nested {
        /// What `sandbox-exec` printed.
        stderr: String,
    },
    /// `sandbox-exec` refused a trivial profile for another reason.
    #[error("sandbox-exec could not apply a trivial profile ({status}){}", framed(stderr))]
    ProbeFailed {
        /// The exit status, as text.
        status: String,
        /// What `sandbox-exec` printed.
        stderr: String,
    },
}

/// A child's stderr, framed on its own lines so that it reads as a quotation.
fn framed(stderr: &str) -> String {
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = trimmed.lines().map(|l| format!("  | {l}")).collect();
        format!(":\n{}", quoted.join("\n"))
    }
}
