//! `paddock-supervisor`: the sandbox's pid 1 and the strace shim in a binary of their own.
//!
//! The same code as `paddock __supervise` and `paddock __shim`
//! (`paddock_linux_bwrap::run_hidden_subcommand`), without the CLI around it. Every run
//! starts it inside the sandbox, so its start-up is on every task's path: small, and built
//! statically (`cargo xtask build`), it starts without the dynamic loader's work (loading
//! libc and libgcc_s, relocating, resolving symbols), about 0.4 ms less per run than
//! re-executing the dynamically linked `paddock`. `paddock` uses it when it finds it next to
//! itself, and re-executes itself otherwise.
//!
//! It starts at C's `main`, without std's runtime set-up (which reads `/proc/self/maps` to
//! find the main thread's stack guard, installs a stack-overflow handler on an alternate
//! stack, checks descriptors 0 to 2): nothing of that is needed to exec a task, and it cost
//! 50 us per run. What of it matters is done here: `SIGPIPE` is ignored, so that a relay
//! writing to a closed socket gets `EPIPE` rather than killing the sandbox's pid 1 (the task
//! gets its default back before it execs).

#![no_main]

use std::ffi::{c_char, c_int};

/// musl's allocator is slow to use: see `paddock::allocator`.
#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static ALLOCATOR: paddock::allocator::Allocator = paddock::allocator::Allocator;

// And musl's own allocations (its directory streams): see `paddock::allocator::c_api`.
#[cfg(all(target_os = "linux", target_env = "musl"))]
paddock::c_allocation_functions!();

/// The process entry point, called by the C runtime with the process's arguments.
#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: signal(2) with a valid signal number and SIG_IGN, before any thread runs.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        // SAFETY: C's `main` arguments, as the C runtime passed them.
        let args = unsafe { paddock::cli::args_of_c_main(argc, argv) };
        if let Some(code) = paddock_linux_bwrap::run_hidden_subcommand(&args) {
            return code.clamp(0, 255);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (argc, argv);
    eprintln!("paddock-supervisor runs inside paddock's sandboxes; run `paddock` instead");
    125
}
