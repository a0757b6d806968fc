//! The end-to-end suite against the real `sandbox-exec` (macOS only): each test plans a policy
//! with the backend, runs the plan, and checks the walls from the outside (files present or
//! absent, exit statuses, the violation report).
//!
//! Locally, without a usable `sandbox-exec`, each test says why it skips; with `CI=true` or
//! `PADDOCK_REQUIRE_OS_TESTS=1` it fails instead.
#![cfg(target_os = "macos")]
// Fixture helpers outside `#[test]` functions: a failed setup step is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

// Fixtures: a throw-away home and project, a policy builder, running a plan.
mod util;
// Filesystem walls: hidden reads, write grants, protected names, renames, hostile names,
// globs, /tmp aliases.
mod files;
// Network, loopback, sysctl.
mod net;
// The violation monitor and the nested-sandbox probe.
mod report;
