//! The `paddock` binary's own parts, beside the library: the command line, config
//! discovery with the flags laid over it, printing, the `--report` file, and the mapping of
//! `PADDOCK_*` variables to builder options. Not a stable API.

pub mod args;
pub mod commands;
#[cfg(target_os = "linux")]
pub mod learn;
pub mod load;
