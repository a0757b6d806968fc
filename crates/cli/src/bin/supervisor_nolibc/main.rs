//! `paddock-supervisor-nolibc`: the sandbox's pid 1 for a task that needs nothing of the
//! supervisor but its walls and, at most, the observers' notifications (no relays, no
//! tracer, no unix sockets granted by path), without a C library.
//!
//! Every process linked with glibc starts by asking the CPU what it is: `init_cpu_features`
//! and the cache-size tables run some 70 `cpuid` instructions, and in a virtual machine each
//! one is an exit to the hypervisor (4 us here). That is 0.3 ms of a static glibc's start
//! before `main`, on every run's path. This supervisor makes its system calls itself
//! (`sys`), allocates by mapping memory (`arena`), and starts at `_start`: started by bwrap,
//! it is at its first system call within microseconds.
//!
//! `paddock` runs it for untraced runs (`--itemize off`) when it sits next to `paddock`
//! (`paddock_linux_bwrap::nolibc`), with a payload of its own format (`payload`), and for
//! runs the observers itemize when `paddock-supervisor` sits there too: the task's child
//! installs the notification filter and sends its listener up, and at the task's first
//! notified call (or once it has run for a millisecond) this process executes `paddock-supervisor` (a copy nobody may read) to
//! serve it from then on. Every other run starts `paddock-supervisor`, which also serves
//! relays and tracers. What it does is what that supervisor does for such a payload
//! (`supervise`), with the same exit codes and messages; tests of the whole run that pass
//! through either hold it to that.
//!
//! Built by `cargo xtask build` with `--cfg paddock_nolibc` (and `-C panic=abort`, no start
//! files, no C library; see xtask's `nolibc_supervisor`), it is `no_std`. Without that cfg,
//! as a plain `cargo build` makes it, the same code runs from std's `main`, linked with the
//! C library as any program: slower to start, otherwise the same, and that is what its unit
//! tests run.

// Only Linux runs it; elsewhere it is built as a stub and its constants go unused.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]
#![cfg_attr(paddock_nolibc, no_std, no_main)]

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod arena;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod devices;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod inner;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod payload;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod supervise;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod sys;

#[cfg(all(paddock_nolibc, target_os = "linux", target_arch = "x86_64"))]
mod start;

/// What this supervisor shares with the runner and with `paddock-supervisor` (checked
/// against `paddock_linux_bwrap` by the tests).
mod constants {
    /// Exit code when the supervisor itself fails and the task never ran.
    pub const EXIT_SUPERVISOR: i32 = 125;
    /// Exit code when the program exists but cannot be executed.
    pub const EXIT_NOT_EXECUTABLE: i32 = 126;
    /// Exit code when the program is not found.
    pub const EXIT_NOT_FOUND: i32 = 127;
    /// The byte sent up the signal channel once the task has been started.
    pub const STARTED: u8 = b'S';
    /// The byte sent up the signal channel once the task has exited and every process of
    /// the sandbox has been killed and reaped, first of the task's end
    /// (`paddock_linux_bwrap::supervisor::TaskEnd`: `supervise::task_end`).
    pub const EXITED: u8 = b'E';
    /// Where the supervisor makes the masked file of the inner masks, and removes it after.
    pub const INNER_MASK_PATH: &core::ffi::CStr = c"/dev/.paddock-masked";
    /// The data byte of a write grant's clone on the signal channel when the runner made
    /// every mount below the grant in it (`c`: `paddock_linux_bwrap::grant_clones::MOUNTED`).
    pub const GRANT_MOUNTED: u8 = b'M';
    /// Where the first clone of the host's device nodes is, for the devices (`v`); the
    /// other five follow.
    pub const DEVICES_FD: i32 = 12;
    /// Where the clone of the terminal the task's stdout is waits, if it is one: the
    /// sandbox's `/dev/console`.
    pub const CONSOLE_FD: i32 = 18;
    /// The argument before `--payload-fd` in bwrap's command line.
    pub const SUPERVISE_SUBCOMMAND: &[u8] = b"__supervise";
    /// The version every payload carries.
    pub const PAYLOAD_VERSION: &str = env!("CARGO_PKG_VERSION");
    /// The signals the runner may relay to the task's group.
    pub const POLITE_SIGNALS: [i32; 6] =
        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];
}

/// Messages for stderr, made without allocating.
mod message {
    /// Text in a fixed buffer; what does not fit is cut off.
    #[derive(Debug)]
    pub struct Message {
        buf: [u8; 1024],
        len: usize,
    }

    impl Message {
        pub fn new() -> Message {
            Message { buf: [0; 1024], len: 0 }
        }

        /// Appends raw bytes (a path that is not UTF-8 stays as it is).
        pub fn bytes(&mut self, bytes: &[u8]) {
            let n = bytes.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
        }

        pub fn as_bytes(&self) -> &[u8] {
            &self.buf[..self.len]
        }

        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        pub fn write_to(&self, fd: i32) {
            let _ = crate::sys::write(fd, self.as_bytes());
        }
    }

    impl core::fmt::Write for Message {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            self.bytes(s.as_bytes());
            Ok(())
        }
    }
}

#[cfg(all(not(paddock_nolibc), target_os = "linux", target_arch = "x86_64"))]
fn main() {
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<std::ffi::CString> = std::env::args_os()
        .map(|a| std::ffi::CString::new(a.as_bytes()).unwrap_or_default())
        .collect();
    let argv: Vec<&std::ffi::CStr> = args.iter().map(|a| a.as_c_str()).collect();
    std::process::exit(supervise::main(&argv))
}

#[cfg(all(not(paddock_nolibc), not(all(target_os = "linux", target_arch = "x86_64"))))]
fn main() {
    eprintln!("paddock-supervisor-nolibc runs inside paddock's sandboxes on x86-64 Linux only");
    std::process::exit(constants::EXIT_SUPERVISOR)
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests;
