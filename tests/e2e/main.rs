//! End-to-end suites through the built `paddock` binary. Each test builds a throw-away home
//! with canaries and a git project, runs `paddock run` on it with `paddock-probe` inside, and
//! asserts on the probe's JSON and on the host afterwards.
//!
//! Without bubblewrap the suite skips loudly; under `CI=true` (or
//! `PADDOCK_REQUIRE_OS_TESTS=1`) a missing bubblewrap is a failure.

// The suites drive Linux sandboxes and make Linux system calls.
#![cfg(target_os = "linux")]
// A test harness: a failed setup step should stop the test with its error.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The suite's job is to spawn `paddock` and look at it from outside.
#![allow(clippy::disallowed_methods)]

#[cfg(target_os = "linux")]
mod deny_pins;
mod fs_walls;
#[cfg(target_os = "linux")]
mod git_config;
#[cfg(target_os = "linux")]
mod grant_race;
mod hard_links;
mod harness;
#[cfg(target_os = "linux")]
mod hostile_fs;
#[cfg(target_os = "linux")]
mod hostile_ipc;
#[cfg(target_os = "linux")]
mod hostile_policy;
#[cfg(target_os = "linux")]
mod hostile_proc;
mod learn;
#[cfg(target_os = "linux")]
mod nested_walls;
mod network;
mod process;
/// The container matrix's host conditions (`cargo xtask matrix`).
#[cfg(target_os = "linux")]
mod scenario;
#[cfg(target_os = "linux")]
mod strace_inside;
mod trace_failures;
#[cfg(target_os = "linux")]
mod unix_sockets;
mod violations;
#[cfg(target_os = "linux")]
mod walls_policy;

/// Known gaps: hostile cases the design cannot contain yet. Each test asserts today's
/// behaviour and prints the gap on every run, so that the fix turns it red.
mod known_gaps;
