//! The macOS backend of paddock: a policy becomes a seatbelt profile (SBPL) run with
//! `/usr/bin/sandbox-exec`, and the kernel's deny records become paddock [`Violation`](paddock_policy::Violation)s.
//!
//! Planning is pure and works on every OS: [`MacosSeatbelt`] implements
//! [`paddock_policy::Backend`], turning a [`ResolvedPolicy`](paddock_policy::ResolvedPolicy)
//! and a [`Task`](paddock_policy::Task) into a [`SpawnPlan`](paddock_policy::SpawnPlan) whose
//! argv is `sandbox-exec -p PROFILE -D NAME=VALUE ... -- PROGRAM ARGS...`. User paths reach
//! the profile only as `-D` parameters (the text says `(param "NAME")`); the few values
//! written into the text (mach service names) are checked and refused, never escaped, if
//! they could change its meaning (DESIGN decision 9). The parser of deny records
//! ([`parse_log_line`]) is pure too. Performing a plan is module `run` (every Unix: the
//! paths of `sandbox-exec` and `log` are options, so it is tested on Linux against
//! stand-ins); probing `sandbox-exec` is macOS-only (module `macos`).
//!
//! # Example
//!
//! ```
//! use paddock_macos_seatbelt::{MacosSeatbelt, parse_log_line, LogLine};
//! use paddock_policy::{Backend, ViolationKind};
//! # use paddock_policy::*;
//! # let abs = |p: &str| AbsPathBuf::new_lexical(p).unwrap();
//! # let policy = ResolvedPolicy {
//! #     project_dir: abs("/Users/u/proj"), home: abs("/Users/u"), read_deny: vec![],
//! #     write: vec![], protected: vec![], pinned: vec![], globs: vec![],
//! #     network: NetworkPolicy::Off, unix_sockets: UnixSockets::None, local_ports: vec![],
//! #     host_ports: vec![], pty: false, git_config: false, system_info: false,
//! #     mach_lookup: vec![], weaker_when_nested: false, private_tmp: true, env: vec![],
//! #     report: ReportScope { within: vec![], linked: vec![], itemize: ItemizeMode::Auto },
//! #     ignore: IgnoreRules::default() };
//! # let task = Task { program: "make".into(), args: vec![], cwd: abs("/Users/u/proj"),
//! #     runtime_dir: abs("/tmp/pdk-1"), observe: false };
//! // `policy` is a resolved policy and `task` a task (see paddock-policy).
//! let plan = MacosSeatbelt::new().plan(&policy, &task, &HostFacts::default())?;
//! assert_eq!(plan.program.as_path(), std::path::Path::new("/usr/bin/sandbox-exec"));
//! assert_eq!(plan.argv[1], "-p");
//!
//! let line = "Sandbox: cat(4242) deny(1) file-read-data /Users/u/.ssh/id_rsa";
//! let LogLine::Denial(v) = parse_log_line(line) else { panic!() };
//! assert_eq!(v.kind, ViolationKind::Read);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Terminology
//!
//! - A **profile** ([`Profile`]) is the SBPL text plus its **parameters** (`-D NAME=VALUE`).
//! - A **rule** is one `(allow ...)` or `(deny ...)` form: operations (`file-read*`,
//!   `mach-lookup`) and filters (`subpath`, `literal`, `regex`). SBPL is last-match-wins: a
//!   rule that narrows another comes after it ([`profile`] documents the order).
//! - A **deny anchor** is a path whose subtree is hidden unless an exception re-opens part
//!   of it; a **protected path** stays read-only inside a write grant even if missing; a
//!   **pinned** directory cannot be renamed.
//! - The **log tag** ([`log_tag`]) marks every denial of one task in the system log, so the
//!   **monitor** collects that task's denials and no one else's.
//!
//! # Supported platforms
//!
//! Planning, golden tests and the deny-record parser: every OS. The executor and the
//! violation monitor (`run`): every Unix, enforcing only on macOS. The probe: macOS only
//! (`cfg(target_os = "macos")`); the crate is type-checked for `x86_64-apple-darwin` and
//! `aarch64-apple-darwin` on Linux CI. The end-to-end suite (`tests/`) runs on a Mac; see
//! [`E2E_COMMANDS`].
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]

#[cfg(unix)]
mod command;
mod diagnose;
mod env;
mod error;
mod glob;
mod inline;
mod params;
mod plan;
pub mod profile;
#[cfg(unix)]
pub mod run;
mod violation;

#[cfg(target_os = "macos")]
pub mod macos;

#[cfg(test)]
mod tests;

pub use diagnose::probe_verdict;
pub use error::Error;
pub use params::{Param, canonical as canonical_path};
pub use plan::{
    BACKEND_NAME, MacosSeatbelt, PROXY_PORT_BASE, PROXY_PORT_SPAN, SANDBOX_EXEC, log_tag,
    proxy_port, task_tmpdir,
};
pub use profile::Profile;
pub use violation::{LOG_PROGRAM, LogLine, log_stream_args, parse_log_line, parse_log_stream};

/// What `cargo xtask test-macos` runs on a Mac, in order: the unit, golden and property
/// tests, the executor against its stand-ins, then this crate's end-to-end suite against
/// the real `sandbox-exec` with `CI=true` (so a missing tool fails instead of skipping).
/// Each entry is one command's argv.
pub const E2E_COMMANDS: &[&[&str]] = &[
    &["cargo", "test", "-p", "paddock-macos-seatbelt", "--lib"],
    &["cargo", "test", "-p", "paddock-macos-seatbelt", "--test", "exec"],
    &["cargo", "test", "-p", "paddock-macos-seatbelt", "--test", "tests"],
];
