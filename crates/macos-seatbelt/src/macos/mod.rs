//! The macOS-only side: the violation monitor ([`LogMonitor`]) and the probe ([`probe()`]).
//!
//! Compiled only for `target_os = "macos"`; CI type-checks it for the darwin targets on
//! Linux. The monitor itself lives in the executor (`run::monitor`, every
//! Unix), so that it is tested on Linux against a stand-in `log`.

pub mod probe;

pub use crate::run::monitor::{self, LogMonitor};
pub use probe::{host_facts, probe};
