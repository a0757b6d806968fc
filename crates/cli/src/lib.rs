//! placeholder
#[cfg(target_os = "linux")]
pub mod exec;
#[cfg(target_os = "linux")]
pub mod runtime_dir;
#[cfg(target_os = "linux")]
pub mod supervise;
