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

pub mod args;
pub mod commands;
#[cfg(target_os = "linux")]
pub mod learn;
pub mod load;
pub mod propose;
pub mod report;
