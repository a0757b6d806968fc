//! The `paddock` command as a library: config discovery, backend choice, supervision of the
//! sandboxed task, and reports. The binary (`main.rs`) only maps errors to exit statuses.
//!
//! # Example
//!
//! ```no_run
//! use clap::Parser;
//! let cli = paddock::args::Cli::parse_from(["paddock", "plan", "--json", "--", "true"]);
//! let code = paddock::commands::dispatch(&cli)?;
//! assert_eq!(code, 0);
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! # Supported platforms
//!
//! Linux (bubblewrap) runs tasks; `plan` works everywhere, including the macOS plan on
//! Linux (`--backend macos-seatbelt`).

pub mod appeared;
pub mod args;
#[cfg(target_os = "linux")]
pub mod attach;
#[cfg(target_os = "linux")]
pub mod bridges;
#[cfg(target_os = "linux")]
pub mod classify;
pub mod commands;
#[cfg(target_os = "linux")]
pub mod exec;
pub mod hardlinks;
pub mod host;
#[cfg(target_os = "linux")]
pub mod inside;
#[cfg(target_os = "linux")]
pub mod learn;
pub mod links;
pub mod load;
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
pub mod propose;
pub mod report;
#[cfg(target_os = "linux")]
pub mod runtime_dir;
#[cfg(target_os = "linux")]
pub mod spares;
#[cfg(target_os = "linux")]
pub mod supervise;
#[cfg(target_os = "linux")]
pub mod trace;
#[cfg(target_os = "linux")]
pub mod walk;
#[cfg(target_os = "linux")]
pub mod walk_cache;
