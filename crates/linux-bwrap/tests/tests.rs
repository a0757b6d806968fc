//! Real bubblewrap runs of plans made by `LinuxBwrap`, performed by the CLI's own `exec` and
//! `supervise` modules.
//!
//! This binary has its own `main` (no libtest harness) because it plays three roles: the test
//! runner; the sandbox supervisor (`__supervise`, exactly as the paddock binary dispatches
//! it); and the in-sandbox probe (`__probe WHAT`) that prints what it could do, so each test
//! asserts on observations from inside rather than on exit codes alone.
//!
//! Tests skip loudly when bwrap is missing, and panic under `CI=true` or
//! `PADDOCK_REQUIRE_OS_TESTS=1`.

#[cfg(target_os = "linux")]
mod os;

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(os::main());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("0 passed, 0 failed (the bubblewrap tests run on Linux only)");
}
