//! strace inside the sandbox ([`crate::trace::inside`]) as the supervisor's child starts it:
//! prepared before the fork (strace's argv with the shim's and the task's, a copy of the
//! task's BPF program for the shim, the log's write end), executed by the child in the
//! task's place with only those descriptors kept.

use std::ffi::{CString, OsString};

use crate::launch::{self, CArray, die};
use crate::payload::{Bytes, StraceInside};
use crate::supervisor::{EXIT_SUPERVISOR, inherited};
use crate::trace::SHIM_BPF_FD;

/// strace run by the child in place of the task ([`crate::trace::inside`]), prepared
/// before the fork.
pub(super) struct Tracer {
    program: CString,
    /// strace's argv, then the shim's, then the task's.
    argv: CArray,
    /// The runner's memfd holding the task's BPF program (a copy of the seccomp payload's
    /// descriptor), for the shim ([`SHIM_BPF_FD`] in the child, read from its start).
    bpf: std::os::fd::OwnedFd,
    /// The log's write end; close-on-exec here, passed on by the child alone.
    log: std::os::fd::OwnedFd,
}

impl Tracer {
    pub(super) fn prepare(
        si: &StraceInside,
        task_args: &[Bytes],
        bpf_fd: i32,
    ) -> Result<Tracer, String> {
        use std::os::fd::AsRawFd;
        let log = inherited(si.log_fd, "trace log")?;
        if log.as_raw_fd() <= SHIM_BPF_FD {
            return Err(format!("the trace log descriptor {} must be above 3", si.log_fd));
        }
        let argv = std::iter::once(OsString::from("strace"))
            .chain(si.args.iter().chain(task_args).map(|a| a.0.clone()))
            .map(|a| launch::cstring(&a))
            .collect::<Result<Vec<_>, _>>()?;
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor number; a closed one fails with EBADF.
        let bpf = unsafe { libc::fcntl(bpf_fd, libc::F_DUPFD_CLOEXEC, 0) };
        if bpf < 0 {
            return Err(format!(
                "the seccomp descriptor {bpf_fd} is not open: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a fresh descriptor that we now own.
        let bpf = unsafe { std::os::fd::FromRawFd::from_raw_fd(bpf) };
        Ok(Tracer { program: launch::cstring(&si.program.0)?, argv: CArray::new(argv), bpf, log })
    }

    /// The child's exec of strace, in the task's environment and cwd. Never returns.
    pub(super) fn exec(&self, env: &CArray) -> ! {
        use std::os::fd::AsRawFd;
        let (bpf, log) = (self.bpf.as_raw_fd(), self.log.as_raw_fd());
        // SAFETY: dup2, fcntl, lseek and close_range on descriptors of our own process, execve with
        // NUL-terminated arrays prepared before the fork; all async-signal-safe.
        unsafe {
            let kept = if bpf == SHIM_BPF_FD {
                libc::fcntl(bpf, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(bpf, SHIM_BPF_FD) == SHIM_BPF_FD
            } && libc::lseek(SHIM_BPF_FD, 0, libc::SEEK_SET) == 0;
            if !kept || libc::fcntl(log, libc::F_SETFD, 0) != 0 {
                die(
                    EXIT_SUPERVISOR,
                    b"paddock: cannot pass strace its descriptors; the task was not run\n",
                );
            }
            // Everything else above 2 goes (SEC-09): payloads, the signal channel, ...
            for (from, to) in [(SHIM_BPF_FD + 1, log - 1), (log + 1, i32::MAX)] {
                if from <= to
                    && libc::syscall(libc::SYS_close_range, from as u32, to as u32, 0u32) != 0
                {
                    for fd in from..=to.min(1023) {
                        libc::close(fd);
                    }
                }
            }
            libc::execve(self.program.as_ptr(), self.argv.as_ptr(), env.as_ptr());
        }
        die(
            EXIT_SUPERVISOR,
            b"paddock: cannot run strace inside the sandbox; the task was not run\n",
        )
    }
}
