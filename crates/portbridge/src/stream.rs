//! One type for the two kinds of stream a bridge joins (TCP and unix), and the listeners that
//! produce them.
//!
//! A unix listener owns its socket file: it is created mode 0600 and removed when the listener
//! is dropped, but only if the file at that path is still the one it created (same device and
//! inode), so a stale handle never deletes a newer task's socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// The longest unix socket path `sockaddr_un` holds, without the terminating NUL.
pub(crate) const MAX_SOCKET_PATH: usize = 103;

/// The send buffer asked for on every unix socket a bridge joins (the kernel doubles it, and
/// caps it at `net.core.wmem_max`). A unix stream socket has no receive-side limit: the
/// sender's buffer alone bounds the bytes in flight, and its default (about 200 KiB on Linux,
/// 8 KiB on macOS) makes the relay on the sending side stop and wait for the one on the
/// receiving side often. Each stop is a pair of thread wake-ups, and on a machine with fewer
/// cores than busy relay threads a trip through the scheduler: with this size a chain of two
/// relays and their unix socket switched context about 40% less than with the default.
/// Much larger buffers cut the switches further but slowed the chain down (the bytes had
/// left the CPU caches by the time the next thread read them). TCP sockets keep the
/// kernel's auto-tuned buffers (setting a size turns the tuning off).
pub(crate) const UNIX_SEND_BUFFER: usize = 256 * 1024;

/// A connected stream of either kind.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    /// Shuts one or both directions down. "Not connected" (the peer is already gone) is not an
    /// error here: the goal, no more traffic that way, is reached.
    pub(crate) fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }

    pub(crate) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
        }
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    /// The local port of a TCP stream.
    pub(crate) fn local_port(&self) -> Option<u16> {
        match self {
            Stream::Tcp(s) => s.local_addr().ok().map(|a| a.port()),
            Stream::Unix(_) => None,
        }
    }

    /// Prepares a fresh stream: blocking (an accepted socket inherits `O_NONBLOCK` from its
    /// listener on macOS), no SIGPIPE on macOS, no Nagle delay for TCP, and for a unix
    /// socket a send buffer of [`UNIX_SEND_BUFFER`].
    pub(crate) fn prepare(self) -> io::Result<Stream> {
        self.set_nonblocking(false)?;
        match &self {
            Stream::Tcp(s) => s.set_nodelay(true)?,
            // Best effort: the kernel caps it (net.core.wmem_max) and a refusal leaves the
            // default, which is slower but correct.
            Stream::Unix(s) => drop(set_send_buffer(s.as_raw_fd(), UNIX_SEND_BUFFER)),
        }
        no_sigpipe(self.raw_fd())?;
        Ok(self)
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            // std sends on TCP sockets with MSG_NOSIGNAL already.
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => send_no_signal(s.as_raw_fd(), buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Asks for a socket send buffer of `bytes`.
fn set_send_buffer(fd: RawFd, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is an open socket; the option value points at a live `c_int` whose size is
    // passed alongside it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// `send` that reports a closed peer as `EPIPE` instead of raising SIGPIPE, which would kill
/// a host process that has not ignored it.
fn send_no_signal(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = libc::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = 0; // SO_NOSIGPIPE is set on the socket instead (see `no_sigpipe`).
    loop {
        // SAFETY: `fd` is an open socket owned by the caller's stream for the whole call, and
        // `buf` is a valid readable slice of `buf.len()` bytes.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
        if n >= 0 {
            return Ok(n.unsigned_abs());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
fn no_sigpipe(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `fd` is an open socket; the option value points at a live `c_int` whose size is
    // passed alongside it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_NOSIGPIPE,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(not(any(target_os = "macos", target_os = "ios", target_os = "freebsd")))]
fn no_sigpipe(_fd: RawFd) -> io::Result<()> {
    Ok(())
}

/// Connects to a unix socket path.
pub(crate) fn connect_unix(path: &Path) -> io::Result<Stream> {
    Stream::Unix(UnixStream::connect(path)?).prepare()
}

/// Connects to a unix socket path whose last component must be the socket itself, never a
/// symlink: for a socket in a directory someone less trusted can write (a sandbox's), who
/// could otherwise swap it for a link to a socket only the connecting side can reach. On
/// Linux the socket is opened `O_PATH | O_NOFOLLOW` and connected to through
/// `/proc/self/fd`, so nothing can be swapped between the check and the connect; elsewhere
/// the check is an `lstat` just before the connect.
pub(crate) fn connect_unix_no_follow(path: &Path) -> io::Result<Stream> {
    let not_socket = || {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a socket (a symlink?); refusing to follow it", path.display()),
        )
    };
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: open with a valid NUL-terminated path; the result is checked.
        let fd = unsafe {
            libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that we now own (closed on drop).
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        if !std::os::unix::fs::FileTypeExt::is_socket(&file.metadata()?.file_type()) {
            return Err(not_socket());
        }
        let via = format!("/proc/self/fd/{fd}");
        let stream = UnixStream::connect(via);
        drop(file);
        Stream::Unix(stream?).prepare()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let meta = std::fs::symlink_metadata(path)?;
        if !std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
            return Err(not_socket());
        }
        connect_unix(path)
    }
}

/// Connects to a TCP address within `timeout`.
pub(crate) fn connect_tcp(addr: SocketAddr, timeout: Duration) -> io::Result<Stream> {
    Stream::Tcp(TcpStream::connect_timeout(&addr, timeout)?).prepare()
}

/// A listening socket of either kind, non-blocking (the acceptor polls it).
#[derive(Debug)]
pub(crate) enum Listener {
    Tcp(TcpListener),
    Unix(UnixSocketFile),
    /// The receiving end of a handoff channel: "accepting" takes the next connection
    /// handed over (see `handoff`).
    Handoff(std::os::fd::OwnedFd),
}

impl Listener {
    /// Listens on `127.0.0.1:port` (`0` picks a free port). A busy port is [`Error::PortBusy`].
    pub(crate) fn bind_loopback(port: u16) -> Result<Listener> {
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|source| {
            if source.kind() == io::ErrorKind::AddrInUse {
                Error::PortBusy { port }
            } else {
                Error::TcpBind { port, source }
            }
        })?;
        listener.set_nonblocking(true).map_err(|source| Error::TcpBind { port, source })?;
        Ok(Listener::Tcp(listener))
    }

    /// Serves a unix socket at `path`, which must not exist yet.
    pub(crate) fn bind_unix(path: &Path) -> Result<Listener> {
        Ok(Listener::Unix(UnixSocketFile::bind(path)?))
    }

    /// Accepts one connection, or `WouldBlock` when none is pending.
    pub(crate) fn accept(&self) -> io::Result<Stream> {
        let stream = match self {
            Listener::Tcp(l) => Stream::Tcp(l.accept()?.0),
            Listener::Unix(u) => Stream::Unix(u.listener.accept()?.0),
            // Prepared already.
            Listener::Handoff(channel) => return crate::handoff::receive(channel),
        };
        stream.prepare()
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(u) => u.listener.as_raw_fd(),
            Listener::Handoff(channel) => channel.as_raw_fd(),
        }
    }

    /// The TCP address, for a TCP listener.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(_) | Listener::Handoff(_) => None,
        }
    }
}

/// A unix listener that removes its socket file when dropped.
#[derive(Debug)]
pub(crate) struct UnixSocketFile {
    listener: UnixListener,
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl UnixSocketFile {
    fn bind(path: &Path) -> Result<UnixSocketFile> {
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(Error::SocketPathTooLong {
                path: path.to_owned(),
                len,
                max: MAX_SOCKET_PATH,
            });
        }
        if path.symlink_metadata().is_ok() {
            return Err(Error::SocketExists { path: path.to_owned() });
        }
        let err = |source| Error::UnixBind { path: path.to_owned(), source };
        let listener = UnixListener::bind(path).map_err(err)?;
        let mut file = UnixSocketFile { listener, path: path.to_owned(), identity: None };
        // The runtime dir is private already; 0600 also keeps the socket to its owner where
        // it is not (NET-18). `file` removes the socket if a step below fails.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        let meta = path.symlink_metadata().map_err(err)?;
        file.listener.set_nonblocking(true).map_err(err)?;
        file.identity = Some((meta.dev(), meta.ino()));
        Ok(file)
    }
}

impl Drop for UnixSocketFile {
    fn drop(&mut self) {
        let ours = match (self.path.symlink_metadata(), self.identity) {
            (Ok(meta), Some(id)) => (meta.dev(), meta.ino()) == id,
            // Bound but not yet identified: only `bind` itself can be here, right after
            // creating the file.
            (Ok(_), None) => true,
            (Err(_), _) => false,
        };
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_buffer(fd: RawFd) -> usize {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `fd` is an open socket; value and len point at live locals of the right size.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&raw mut value).cast(),
                &raw mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        usize::try_from(value).unwrap()
    }

    #[test]
    fn a_prepared_unix_stream_sends_with_a_larger_buffer() {
        let (plain, other) = UnixStream::pair().unwrap();
        let default = send_buffer(plain.as_raw_fd());
        let prepared = Stream::Unix(other).prepare().unwrap();
        let grown = send_buffer(prepared.raw_fd());
        // The kernel may cap the size (net.core.wmem_max), never below what was asked of a
        // default-sized buffer unless the cap is below the default itself.
        assert!(grown > default || grown >= UNIX_SEND_BUFFER, "{default} -> {grown}");
    }
}
