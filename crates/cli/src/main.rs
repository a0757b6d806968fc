//! The `paddock` command: see `paddock --help`. All logic is in the library; this file maps
//! errors to exit statuses (125 for paddock's own), hands the hidden `__supervise` and
//! `__shim` subcommands to the Linux supervisor and shim, and owns the process-wide parts
//! the library leaves to its caller: the signal handlers of `paddock run` (SIGINT, SIGTERM
//! and SIGHUP become bytes on a pipe that `run` forwards to the task; one the process was
//! started with ignored, as under `nohup`, stays ignored, and so ignored for the task).
//!
//! It starts at C's `main`, without std's runtime set-up, which every run would pay for
//! (about 0.1 ms: it reads `/proc/self/maps` through `pthread_getattr_np` to find the main
//! thread's stack guard, and installs a stack-overflow handler on an alternate stack). What
//! of it matters is done here: `SIGPIPE` is ignored (a closed reader is an `EPIPE` error:
//! `paddock plan | head`), descriptors 0 to 2 are open (`/dev/null` for a closed one, so that
//! nothing paddock opens takes their place), and a panic exits 101 with its message rather
//! than unwinding out of `main`. A stack overflow is a plain `SIGSEGV`.
//!
//! `cargo xtask build` links it statically (see `builtin_name_services_only` for what that
//! changes): it then starts without the dynamic loader's work and libgcc_s's constructor
//! (which asks the CPU what it is again), 0.6 ms sooner per run here.

#![cfg_attr(unix, no_main)]

use clap::Parser;

/// musl's allocator is slow to use: see `paddock::allocator`.
#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static ALLOCATOR: paddock::allocator::Allocator = paddock::allocator::Allocator;

// And musl's own allocations (its directory streams): see `paddock::allocator::c_api`.
#[cfg(all(target_os = "linux", target_env = "musl"))]
paddock::c_allocation_functions!();

/// The process entry point, called by the C runtime with the process's arguments.
#[cfg(unix)]
#[unsafe(no_mangle)]
extern "C" fn main(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    // SAFETY: C's `main` arguments, as the C runtime passed them.
    let args = unsafe { paddock::cli::args_of_c_main(argc, argv) };
    // SAFETY: signal(2) with a valid signal number and SIG_IGN, before any thread runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    standard_descriptors_open();
    #[cfg(all(target_os = "linux", target_env = "gnu", target_feature = "crt-static"))]
    builtin_name_services_only();
    match std::panic::catch_unwind(|| run(args)) {
        // `ExitCode` has no accessor: its `Termination` gives the status to exit with.
        Ok(code) => std::ffi::c_int::from(code),
        Err(_) => 101,
    }
}

/// Linked statically (`cargo xtask build`), paddock resolves names (its egress proxy's) through
/// `/etc/hosts` and DNS only, which glibc has built in since 2.34: another name service in
/// `/etc/nsswitch.conf` (mdns, systemd-resolved's, sss) is a module that a static glibc would
/// load with the system's shared C library, a second C library in one process.
#[cfg(all(target_os = "linux", target_env = "gnu", target_feature = "crt-static"))]
fn builtin_name_services_only() {
    unsafe extern "C" {
        fn __nss_configure_lookup(
            database: *const std::ffi::c_char,
            services: *const std::ffi::c_char,
        ) -> std::ffi::c_int;
    }
    // SAFETY: two NUL-terminated strings, before any thread runs.
    unsafe { __nss_configure_lookup(c"hosts".as_ptr(), c"files dns".as_ptr()) };
}

/// Descriptors 0 to 2 that are closed are opened on `/dev/null`, as std's runtime does.
#[cfg(unix)]
fn standard_descriptors_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: poll on a valid array of three pollfd, not waiting.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for pfd in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        // SAFETY: open with a NUL-terminated path; the lowest free number is the closed one.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd != pfd.fd {
            // Something else went wrong: std's runtime aborts here too.
            std::process::abort();
        }
    }
}

#[cfg(not(unix))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(run(std::env::args_os().collect()))
}

/// Runs the command line `args`; returns the exit status.
fn run(args: Vec<std::ffi::OsString>) -> u8 {
    #[cfg(target_os = "linux")]
    let prespawned = {
        if let Some(code) = paddock_linux_bwrap::run_hidden_subcommand(&args) {
            return u8::try_from(code.clamp(0, 255)).unwrap_or(125);
        }
        paddock::cli::commands::prespawn_early(&args)
    };
    let cli = match paddock::cli::args::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // A bwrap started for a `run` that is not one after all goes first.
            #[cfg(target_os = "linux")]
            drop(prespawned);
            let code = if e.use_stderr() { paddock::cli::commands::EXIT_PADDOCK_ERROR } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let signals = match &cli.command {
        #[cfg(target_os = "linux")]
        paddock::cli::args::Command::Run(_) | paddock::cli::args::Command::Learn(_) => {
            signals::catch()
        }
        #[cfg(target_os = "macos")]
        paddock::cli::args::Command::Run(_) => signals::catch(),
        _ => None,
    };
    let start = paddock::cli::commands::Start {
        #[cfg(target_os = "linux")]
        prespawned,
        signals,
    };
    match paddock::cli::commands::dispatch(&cli, start) {
        Ok(code) => code,
        // A reader that stopped reading (`paddock plan | head`) is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                    || c.downcast_ref::<serde_json::Error>()
                        .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
            }) =>
        {
            0
        }
        Err(e) => {
            eprintln!("paddock: {e:#}");
            paddock::cli::commands::EXIT_PADDOCK_ERROR
        }
    }
}

/// The signal handlers of `paddock run` and `paddock learn`: the process's, so the binary's, never the
/// library's.
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod signals {
    use std::os::fd::{IntoRawFd, OwnedFd};
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The write end of the pipe the handler writes to (-1: none).
    static PIPE: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn on_signal(sig: libc::c_int) {
        let fd = PIPE.load(Ordering::Relaxed);
        if fd >= 0 {
            let byte = [u8::try_from(sig).unwrap_or(0)];
            // SAFETY: write is async-signal-safe; the buffer is valid.
            unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
        }
    }

    /// SIGINT, SIGTERM and SIGHUP turned into bytes on a pipe, for the rest of the process;
    /// its read end and a copy of its write end (a run's control takes both). A signal ignored when paddock started (`nohup`, a job a shell started
    /// in the background) stays ignored: by paddock, and so by the task, which inherits the
    /// disposition through every exec.
    pub fn catch() -> Option<(OwnedFd, OwnedFd)> {
        // `pipe` then the flags: macOS has no `pipe2` (nothing else runs yet, so no child can
        // inherit the ends in between).
        let (read, write) = nix::unistd::pipe().ok()?;
        for end in [&read, &write] {
            let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
            let nonblock = nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK);
            nix::fcntl::fcntl(end, cloexec).ok()?;
            nix::fcntl::fcntl(end, nonblock).ok()?;
        }
        // Close-on-exec like the original, so that no child inherits it.
        let copy = nix::unistd::dup(&write).ok()?;
        let _ =
            nix::fcntl::fcntl(&copy, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
        // Kept open for the life of the process: a handler may write to it at any time.
        PIPE.store(write.into_raw_fd(), Ordering::Relaxed);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: zeroed sigaction structs are valid; a query (no new action) only writes
            // `prev`; the handler is an extern "C" fn that only calls write.
            unsafe {
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut prev) != 0
                    || prev.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as *const () as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(sig, &act, std::ptr::null_mut());
            }
        }
        Some((read, copy))
    }
}
