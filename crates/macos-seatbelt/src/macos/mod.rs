//! The macOS-only side: the violation monitor ([`LogMonitor`]) and the probe ([`probe()`]).
//!
//! Compiled only for `target_os = "macos"`; CI type-checks it for the darwin targets on
//! Linux. Every process this crate starts is started by the private `command` module, the one
//! place allowed to call `Command::new`.

mod command;
pub mod monitor;
pub mod probe;

pub use monitor::LogMonitor;
pub use probe::{host_facts, probe};
