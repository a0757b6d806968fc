//! The Linux backend of paddock: it enforces a [`ResolvedPolicy`](paddock_policy::ResolvedPolicy)
//! with bubblewrap (mount and namespace walls), a seccomp filter built with `seccompiler`
//! (syscall walls), and a small supervisor that runs inside the sandbox.
//!
//! # Terminology
//!
//! - An **op** ([`ops::BwrapOp`]) is one bubblewrap setup step (`--ro-bind`, `--tmpfs`, ...),
//!   like bubblewrap's own `SetupOp` list. [`ops::mount_ops`] is the one function that
//!   decides their order.
//! - The **plan** is what [`LinuxBwrap`] returns from
//!   [`Backend::plan`](paddock_policy::Backend::plan): bwrap's absolute
//!   path, a short argv, and the payloads (bwrap's real arguments, the supervisor's
//!   instructions, the BPF program) that travel on numbered file descriptors, so that no
//!   secret ever appears in an argv or environment visible inside the sandbox.
//! - The **supervisor** ([`supervisor`], Linux only) is the paddock binary re-executed by
//!   bwrap as the sandbox's pid 1 (`paddock __supervise`). It applies the filter to the task
//!   only, relays polite signals, reaps, and exits with the task's status.
//! - A **bridge** ([`bridges`]) joins the sandbox's loopback and the host through a unix
//!   socket in the runtime dir: port grants both ways and the egress proxy of a domain list.
//!   The host end runs in paddock, the sandbox end (a relay) in the supervisor.
//! - The **probe** ([`probe`], Linux only) collects the [`HostFacts`](paddock_policy::HostFacts)
//!   the plan is made from and explains in the user's terms what is missing.
//!
//! # Example
//!
//! ```
//! use paddock_linux_bwrap::LinuxBwrap;
//! use paddock_policy::Backend;
//!
//! assert_eq!(LinuxBwrap.name(), "linux-bwrap");
//! ```
//!
//! # Supported platforms
//!
//! Planning is pure and compiles everywhere, so argv snapshots run on every OS. The BPF
//! program is compiled on Linux only (a plan made elsewhere says so in its diagnostics);
//! the supervisor and the probe are Linux only.

pub mod bridges;
#[cfg(target_os = "linux")]
pub mod devices;
mod error;
#[cfg(target_os = "linux")]
pub mod fdpass;
#[cfg(target_os = "linux")]
pub mod grant_clones;
#[cfg(target_os = "linux")]
mod launch;
pub mod mount_ids;
pub mod nolibc;
#[cfg(target_os = "linux")]
pub mod notify;
#[cfg(target_os = "linux")]
pub mod observe_fs;
pub mod ops;
pub mod payload;
mod plan;
#[cfg(target_os = "linux")]
pub mod private_ns;
#[cfg(target_os = "linux")]
pub mod probe;
pub mod runtime;
pub mod seccomp;
pub mod seccomp_query;
#[cfg(all(test, target_os = "linux"))]
mod seccomp_tests;
#[cfg(test)]
mod self_mount_tests;
#[cfg(target_os = "linux")]
pub mod shim;
#[cfg(target_os = "linux")]
pub mod supervisor;
#[cfg(test)]
mod tests;
pub mod trace;
#[cfg(target_os = "linux")]
pub mod vfork;
#[cfg(test)]
mod walls_tests;

pub use error::{Context, Error};

/// Runs the hidden subcommand `args[1]` names ([`SUPERVISE_SUBCOMMAND`],
/// [`SERVE_NOTIFY_SUBCOMMAND`], the strace shim's [`trace::SHIM_SUBCOMMAND`]), if it names one, and returns the process's exit code. The
/// `paddock` binary and the dedicated `paddock-supervisor` both start here.
#[cfg(target_os = "linux")]
pub fn run_hidden_subcommand(args: &[std::ffi::OsString]) -> Option<i32> {
    match args.get(1) {
        Some(a) if a == SUPERVISE_SUBCOMMAND => Some(supervisor::main_from_args(&args[2..])),
        Some(a) if a == SERVE_NOTIFY_SUBCOMMAND => Some(supervisor::serve_notify_main(&args[2..])),
        Some(a) if a == trace::SHIM_SUBCOMMAND => Some(shim::main_from_args(&args[2..])),
        _ => None,
    }
}
pub use plan::{
    ARGS_FD, BACKEND_NAME, DEVICES_FD, INBOUND_FD, INNER_MASK_PATH, LinuxBwrap, MASKED_FILE,
    NOTIFIER_EXE_FD, NOTIFY_BPF_FD, RECORD_FD, SECCOMP_FD, SERVE_NOTIFY_SUBCOMMAND, SIGNAL_FD,
    SUPERVISE_SUBCOMMAND, SUPERVISOR_EXE, SUPERVISOR_EXE_FD, SUPERVISOR_FD, SUPERVISOR_PATH,
    bwrap_argv,
};
