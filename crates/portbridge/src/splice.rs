//! Linux fast path for one direction of a relay: `splice(2)` through a pipe moves bytes from
//! socket to socket inside the kernel, without copying them through user space.
//!
//! If the kernel refuses splice for these sockets before any byte moved, [`copy`] returns
//! `None` and the caller falls back to the read/write loop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::pump::BUFFER;
use crate::stream::Stream;

/// Bytes moved per splice call; the pipe is grown to hold them. Pipes count against the
/// per-user pipe page budget, so this stays modest: two per connection.
const PIPE: usize = BUFFER;

/// Copies `from` to `to` until end of stream. `None`: splice is not available here.
pub(crate) fn copy(
    from: &Stream,
    to: &Stream,
    conn: &AtomicU64,
    total: &AtomicU64,
) -> Option<io::Result<()>> {
    let (pipe_r, pipe_w) = pipe().ok()?;
    // A larger pipe moves more per call; the default (64 KiB) is used if this is refused
    // (an unprivileged process is limited by /proc/sys/fs/pipe-max-size).
    // SAFETY: F_SETPIPE_SZ on a pipe descriptor we own; the argument is a plain integer.
    let grown = unsafe { libc::fcntl(pipe_w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE as libc::c_int) };
    let pipe_len = usize::try_from(grown).ok().filter(|n| *n > 0).unwrap_or(BUFFER / 2);
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
