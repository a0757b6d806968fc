//! paddock runs a command with exactly the files, network and sockets its policy grants,
//! and afterwards says precisely what the command was denied.
//!
//! This crate is the library a task runner embeds, shaped like `std::process`: a
//! [`Sandbox`] is a project and its policy, built once; [`Sandbox::spawn`] runs a
//! [`Command`] in a sandbox of its own and returns a [`Child`]; [`Child::wait`] returns the
//! task's [`Report`], with every denial a [`Violation`].
//!
//! ```no_run
//! use paddock::{Command, Report, Sandbox, Stdio};
//!
//! let sandbox = Sandbox::builder("/path/to/project")
//!     .policy_toml("[allow]\nnetwork = \"off\"\n")?
//!     .home("/home/me")
//!     .build()?;
//! let mut child = sandbox.spawn(
//!     Command::new("cargo")
//!         .args(["test"])
//!         .current_dir("sub")
//!         .env("K", "V")
//!         .stdin(Stdio::null())
//!         .stdout(Stdio::piped())
//!         .stderr(Stdio::piped())
//!         .timeout(std::time::Duration::from_secs(600)),
//! )?;
//! println!("sandbox pid {}", child.id());
//! let out = child.wait_with_output()?;
//! let report: Report = out.report;
//! for v in &report.violations {
//!     println!("denied: {v:?}");
//! }
//! # Ok::<(), paddock::Error>(())
//! ```
//!
//! # Many tasks, one process
//!
//! A `Sandbox` is `Send + Sync + Clone`; any number of tasks may run at once, from any
//! thread. The library keeps no process-wide state: no globals, no signal handlers (a
//! caller forwards its own signals with [`Child::signal`]), nothing printed (notes are in
//! [`Report::notes`] and [`Child::notes`]), no `PADDOCK_*` variables read (the `paddock`
//! binary maps them to [`SandboxBuilder`] options), no CPU pinning of the caller's threads.
//! Each task's runtime directory, placeholders, bridges and processes are its own and are
//! gone when its `Child` is waited for or dropped.
//!
//! # Supported platforms
//!
//! Linux runs tasks with bubblewrap and a seccomp filter; macOS with a generated seatbelt
//! profile under `sandbox-exec` (see the README for what differs there, such as domain
//! lists). Elsewhere [`Sandbox::spawn`] returns [`Error::Unavailable`]; `paddock plan`
//! shows a plan on every OS.

#![deny(missing_docs)]

pub(crate) mod child;
#[doc(hidden)]
pub use child::Extras;
mod command;
pub mod config;
mod error;
mod report;
mod sandbox;
#[cfg(target_os = "macos")]
mod seatbelt;
#[cfg(target_os = "linux")]
mod warm;

#[cfg(target_os = "linux")]
#[doc(hidden)]
pub mod allocator;
#[doc(hidden)]
pub mod cli;

pub use child::{Child, Handle};
pub use command::{Command, Stdio};
pub use error::Error;
pub use paddock_linux_bwrap::runtime::Toggles;
pub use paddock_policy::{ItemizeMode, Violation, ViolationKind};
pub use report::{Output, Report};
pub use sandbox::{DEFAULT_CAPTURE_LIMIT, Sandbox, SandboxBuilder, SharedProxy};

/// Runs this process as a sandbox's supervisor when it was started as one, and returns the
/// exit status to exit with; `None` otherwise. A program that sandboxes with
/// [`SandboxBuilder::supervise_with_current_exe`] calls it first thing in `main`:
///
/// ```no_run
/// if let Some(code) = paddock::run_supervisor_if_asked() {
///     std::process::exit(code);
/// }
/// // ... the program, building sandboxes with `supervise_with_current_exe()`.
/// ```
pub fn run_supervisor_if_asked() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().take(2).collect();
        if args.get(1).is_some_and(|a| a.as_encoded_bytes().starts_with(b"__")) {
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            return paddock_linux_bwrap::run_hidden_subcommand(&args);
        }
    }
    None
}
