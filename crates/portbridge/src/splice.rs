//! Linux fast path for one direction of a relay: `splice(2)` through a pipe moves bytes from
//! socket to socket inside the kernel, without copying them through user space.
//!
//! The pipe starts at the kernel's default size (64 KiB) and grows to [`PIPE_GROWN`] the first
//! time a splice fills it, so a bulk transfer moves more per pair of calls (fewer system calls
//! and wake-ups of the threads on both sides) while a quiet connection keeps the small pipe:
//! pipe pages count against a per-user budget (`/proc/sys/fs/pipe-user-pages-soft`), and a
//! user over it gets tiny pipes for every new one. Larger is not better: on a two-core
//! machine, with the benchmark scheduled ahead of everything else, an inbound grant's chain of
//! two relays ran at about 80% of direct loopback with 1 MiB pipes and unix send buffers,
//! against about 110% with 256 KiB ones: the bytes had left the CPU caches by the time the
//! next thread read them.
//!
//! If the kernel refuses splice for these sockets before any byte moved, [`copy`] returns
//! `None` and the caller falls back to the read/write loop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stream::Stream;

/// The size the pipe of a busy direction grows to. `/proc/sys/fs/pipe-max-size` (1 MiB by
/// default) is the most an unprivileged process may ask.
const PIPE_GROWN: usize = 256 * 1024;

/// The pipe size the kernel gives a new pipe when it cannot say (`F_GETPIPE_SZ` failing).
const PIPE_DEFAULT: usize = 64 * 1024;

/// Copies `from` to `to` until end of stream. `None`: splice is not available here.
pub(crate) fn copy(
    from: &Stream,
    to: &Stream,
    conn: &AtomicU64,
    total: &AtomicU64,
) -> Option<io::Result<()>> {
    let (pipe_r, pipe_w) = pipe().ok()?;
    // SAFETY: F_GETPIPE_SZ on a pipe descriptor we own; it takes no argument.
    let size = unsafe { libc::fcntl(pipe_w.as_raw_fd(), libc::F_GETPIPE_SZ) };
    let mut pipe_len = usize::try_from(size).ok().filter(|n| *n > 0).unwrap_or(PIPE_DEFAULT);
    let mut may_grow = true;
    let (src, dst) = (from.raw_fd(), to.raw_fd());
    let mut moved_any = false;
    loop {
        let n = match splice(src, pipe_w.as_raw_fd(), pipe_len) {
            Ok(0) => return Some(Ok(())),
            Ok(n) => n,
            Err(e) if !moved_any && e.raw_os_error() == Some(libc::EINVAL) => return None,
            Err(e) => return Some(Err(e)),
        };
        moved_any = true;
        if may_grow && n == pipe_len {
            // A full pipe: more was waiting. Grow once; a refusal keeps the current size.
            may_grow = false;
            if let Some(grown) = grow(&pipe_w) {
                pipe_len = grown;
            }
        }
        let mut left = n;
        while left > 0 {
            match splice(pipe_r.as_raw_fd(), dst, left) {
                Ok(0) => return Some(Err(io::ErrorKind::WriteZero.into())),
                Ok(m) => left -= m,
                Err(e) => return Some(Err(e)),
            }
        }
        conn.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Grows the pipe to [`PIPE_GROWN`]; its new size, or `None` if the kernel refused.
fn grow(pipe: &OwnedFd) -> Option<usize> {
    let want = libc::c_int::try_from(PIPE_GROWN).ok()?;
    // SAFETY: F_SETPIPE_SZ on a pipe descriptor we own; the argument is a plain integer.
    // Growing never fails because of the bytes in the pipe (only shrinking can).
    let got = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    usize::try_from(got).ok().filter(|n| *n > 0)
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: both descriptors are open for the call (owned by the caller's streams and
        // pipe); null offsets are what splice expects for sockets and pipes.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE,
            )
        };
        if n >= 0 {
            return Ok(n.unsigned_abs());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
