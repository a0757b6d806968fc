//! Performing plans on Linux: spawning bwrap, supervising the sandbox from the host,
//! itemizing its denials (observers or strace), and the run's on-disk state (runtime dir,
//! placeholders, spares), with the host ends of its bridges.
//!
//! Everything here is per run: no module keeps process-wide state, installs signal handlers,
//! prints, or reads `PADDOCK_*` variables. What a caller chooses comes in through
//! [`supervise::RunOptions`] and [`Toggles`]; what a run has to say comes back in its
//! result ([`strace::Ran`]).

pub mod appeared;
#[cfg(target_os = "linux")]
pub mod attach;
#[cfg(target_os = "linux")]
pub mod classify;
#[cfg(target_os = "linux")]
pub mod exec;
pub mod hardlinks;
pub mod host;
#[cfg(target_os = "linux")]
pub mod host_bridges;
#[cfg(target_os = "linux")]
pub mod inside;
pub mod links;
#[cfg(target_os = "linux")]
pub mod new_repos;
#[cfg(target_os = "linux")]
pub mod observe;
#[cfg(target_os = "linux")]
pub mod placeholders;
#[cfg(target_os = "linux")]
pub mod prespawn;
#[cfg(target_os = "linux")]
pub mod project_walk;
#[cfg(target_os = "linux")]
pub mod runtime_dir;
#[cfg(target_os = "linux")]
pub mod spares;
#[cfg(target_os = "linux")]
pub mod strace;
#[cfg(target_os = "linux")]
pub mod supervise;
#[cfg(target_os = "linux")]
pub mod walk;
#[cfg(target_os = "linux")]
pub mod walk_cache;

/// The result of a step of running a task.
pub type Result<T> = std::result::Result<T, crate::Error>;

/// Returns an [`crate::Error::Run`] made from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::Error::run(format!($($arg)*)))
    };
}
pub(crate) use bail;
