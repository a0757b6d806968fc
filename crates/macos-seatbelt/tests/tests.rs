//! The end-to-end suite against the real `sandbox-exec` (macOS only).
#![cfg(target_os = "macos")]
