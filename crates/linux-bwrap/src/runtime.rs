//! Performing plans on Linux: spawning bwrap, supervising the sandbox from the host,
//! itemizing its denials (observers or strace), and the run's on-disk state (runtime dir,
//! placeholders, spares), with the host ends of its bridges.
//!
//! Everything here is per run: no module keeps process-wide state, installs signal handlers,
//! prints, or reads `PADDOCK_*` variables. What a caller chooses comes in through
//! [`supervise::RunOptions`] and [`Toggles`]; what a run has to say comes back in its
//! result ([`itemized::Ran`]).

pub mod appeared;
#[cfg(target_os = "linux")]
pub mod attach;
#[cfg(target_os = "linux")]
pub mod classify;
#[cfg(target_os = "linux")]
pub mod exec;
#[cfg(target_os = "linux")]
pub mod exec_only;
pub mod hardlinks;
pub mod host;
#[cfg(target_os = "linux")]
pub mod host_bridges;
#[cfg(target_os = "linux")]
pub mod inside;
#[cfg(target_os = "linux")]
pub mod itemize;
#[cfg(target_os = "linux")]
pub mod itemized;
pub mod links;
#[cfg(target_os = "linux")]
pub mod new_repos;
#[cfg(target_os = "linux")]
pub mod observe;
#[cfg(target_os = "linux")]
pub mod prespawn;
#[cfg(target_os = "linux")]
pub mod project_walk;
#[cfg(target_os = "linux")]
pub mod runtime_dir;
#[cfg(target_os = "linux")]
pub mod strace;
#[cfg(target_os = "linux")]
pub mod supervise;
#[cfg(target_os = "linux")]
pub mod task;
#[cfg(target_os = "linux")]
pub mod trace_log;
#[cfg(target_os = "linux")]
pub mod walk;
#[cfg(target_os = "linux")]
pub mod warm;

/// Which itemizing strategies a run may use: all of them by default. Turning one off
/// compares strategies, or works around one that misbehaves on some host; it never changes
/// what is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Toggles {
    /// The FUSE and seccomp-notification observers (off: `auto` uses strace, as on a host
    /// without FUSE).
    pub observers: bool,
    /// strace attaches to the supervisor in the `strace` mode (off: strace runs bwrap).
    pub strace_attach: bool,
    /// With `--seccomp-bpf`, strace runs inside the sandbox (off: it traces bwrap).
    pub strace_inside: bool,
}

impl Default for Toggles {
    fn default() -> Toggles {
        Toggles { observers: true, strace_attach: true, strace_inside: true }
    }
}

/// The result of a step of running a task.
pub type Result<T> = std::result::Result<T, crate::Error>;

/// Returns an [`crate::Error::Run`] made from a format string.
#[cfg(target_os = "linux")]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::Error::run(format!($($arg)*)))
    };
}
#[cfg(target_os = "linux")]
pub(crate) use bail;
