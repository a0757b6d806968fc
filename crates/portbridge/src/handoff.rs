//! Inbound port grants by handing the connection over: the host end accepts each client on
//! `127.0.0.1:PORT` and passes the connected socket itself (`SCM_RIGHTS`) over a channel to
//! the sandbox end, which relays it to the task's server on the sandbox's loopback.
//!
//! - [`TcpHandoff`] is the host end: it listens on the granted ports and hands every accepted
//!   connection over. It moves no bytes.
//! - [`HandoffToTcp`] is the sandbox end: it receives the connections and relays each to the
//!   target of the port it was accepted on (read from the socket itself, `getsockname`),
//!   retrying a server that is not listening yet like any relay ([`RelayOptions::connect_wait`]).
//!
//! Against a pair of relays joined by a unix socket, every byte crosses one relay instead of
//! two, and a connection is set up with one connect instead of two.
//!
//! The channel ([`handoff_channel`]) is a `SOCK_SEQPACKET` socket pair: one message, one byte
//! and one descriptor, per connection. It has no path: the runner gives one end to the
//! sandbox's supervisor as an inherited descriptor, closed on exec, so the task can neither
//! reach it nor plant a socket of its own in its place. The sandbox end takes only TCP
//! sockets accepted on a port it was given; anything else it receives is closed.
//!
//! Clients that arrive before the sandbox end reads (the sandbox is still starting) wait in
//! the channel, up to the kernel's queue of `net.unix.max_dgram_qlen` messages (512 by
//! default). A client that finds the queue full, or the sandbox end gone, is closed.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use nix::sys::socket::{self, ControlMessage, ControlMessageOwned, MsgFlags};

use crate::acceptor::Service;
use crate::error::{Error, Result};
use crate::relay::{RelayHandle, RelayOptions, Target};
use crate::stream::{Listener, Stream};
use crate::tracker::Tracker;

/// The byte each handed-over connection travels with (a descriptor needs one).
const MARK: u8 = b'C';

/// A connected pair of `SOCK_SEQPACKET` unix sockets, close-on-exec: the first end for
/// [`TcpHandoff`], the second for [`HandoffToTcp`].
pub fn handoff_channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = platform::SOCKET_CLOEXEC;
    let (host, sandbox) =
        socket::socketpair(socket::AddressFamily::Unix, socket::SockType::SeqPacket, None, flags)?;
    if flags.is_empty() {
        set_cloexec(&host)?;
        set_cloexec(&sandbox)?;
    }
    Ok((host, sandbox))
}

/// Marks `fd` close-on-exec, where the call that made it could not.
fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// Listens on host loopback ports and hands every accepted connection over a channel.
#[derive(Debug)]
pub struct TcpHandoff;

impl TcpHandoff {
    /// Listens on `127.0.0.1:PORT` for each of `ports` (`0` picks a free port; see
    /// [`RelayHandle::local_addrs`]), all or none, and hands every client to the other end of
    /// `channel`. A port another program holds is [`Error::PortBusy`].
    ///
    /// The handle's [`Stats`](crate::Stats) count connections handed over (`accepted`) and
    /// closed because the channel was full or its other end gone (`rejected`); the bytes are
    /// the other end's to count.
    pub fn start(ports: &[u16], channel: OwnedFd) -> Result<RelayHandle> {
        let listeners =
            ports.iter().map(|&port| Listener::bind_loopback(port)).collect::<Result<Vec<_>>>()?;
        let tracker = Tracker::new("pb-handoff");
        let service = Arc::new(HandoffService { channel, tracker: Arc::clone(&tracker) });
        RelayHandle::serve(listeners, service, tracker, "pb-tcp-handoff")
    }
}

/// Receives connections from a channel and relays each to a loopback TCP target chosen by
/// the port it was accepted on.
#[derive(Debug)]
pub struct HandoffToTcp;

impl HandoffToTcp {
    /// Receives the connections [`TcpHandoff`] sends on the other end of `channel`. A
    /// connection accepted on port `P` is relayed to the target `targets` gives for `P`
    /// (each must be a loopback address); one of another port is closed.
    pub fn start(
        channel: OwnedFd,
        targets: &[(u16, SocketAddr)],
        options: RelayOptions,
    ) -> Result<RelayHandle> {
        if let Some((_, addr)) = targets.iter().find(|(_, addr)| !addr.ip().is_loopback()) {
            return Err(Error::NotLoopback { addr: *addr });
        }
        set_nonblocking(&channel)
            .map_err(|source| Error::Start { what: "handoff channel", source })?;
        RelayHandle::start(
            Listener::Handoff(channel),
            Target::ByPort(targets.to_vec()),
            options,
            "pb-handoff-to-tcp",
        )
    }
}

struct HandoffService {
    channel: OwnedFd,
    tracker: Arc<Tracker>,
}

impl Service for HandoffService {
    fn serve(&self, conn: Stream) {
        // Never blocks the accept thread: a full queue closes this client instead.
        let sent = send(self.channel.as_raw_fd(), conn.raw_fd());
        self.tracker.tally(sent.is_ok());
        // Our copy closes here; the other end holds the connection now.
    }
}

fn send(channel: RawFd, conn: RawFd) -> io::Result<()> {
    let fds = [conn];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let iov = [IoSlice::new(&[MARK])];
    loop {
        match socket::sendmsg::<()>(
            channel,
            &iov,
            &cmsg,
            MsgFlags::MSG_DONTWAIT | platform::NO_SIGNAL,
            None,
        ) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receives one handed-over connection from `channel` (non-blocking): `WouldBlock` when none
/// is queued, `UnexpectedEof` once the host end is closed, `ConnectionAborted` for a message
/// that carries no TCP socket (whatever it carried is closed).
pub(crate) fn receive(channel: &OwnedFd) -> io::Result<Stream> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let msg = loop {
        match socket::recvmsg::<()>(
            channel.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_DONTWAIT | platform::RECEIVE_CLOEXEC,
        ) {
            Ok(msg) => break msg,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    let mut received: Vec<OwnedFd> = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            // SAFETY: the kernel installed these descriptors in this process for this
            // message; nothing else owns them.
            received.extend(fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
        }
    }
    if msg.bytes == 0 && received.is_empty() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    // One descriptor per message: extra ones (and a truncated set) are closed with `received`.
    let aborted = || io::Error::from(io::ErrorKind::ConnectionAborted);
    if received.len() != 1 || msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err(aborted());
    }
    let fd = received.remove(0);
    if platform::RECEIVE_CLOEXEC.is_empty() {
        set_cloexec(&fd).map_err(|_| aborted())?;
    }
    let is_stream =
        matches!(socket::getsockopt(&fd, socket::sockopt::SockType), Ok(socket::SockType::Stream));
    let tcp = std::net::TcpStream::from(fd);
    // An inet address (std refuses the others): with the stream type, a TCP socket.
    if !is_stream || tcp.local_addr().is_err() {
        return Err(aborted());
    }
    Stream::Tcp(tcp).prepare().map_err(|_| aborted())
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// The flags that exist on Linux only; elsewhere the close-on-exec flag is set after the
/// call ([`set_cloexec`]), and SIGPIPE is ignored (Rust programs ignore it from their start).
#[cfg(any(target_os = "linux", target_os = "android"))]
mod platform {
    use nix::sys::socket::{MsgFlags, SockFlag};
    pub(super) const SOCKET_CLOEXEC: SockFlag = SockFlag::SOCK_CLOEXEC;
    pub(super) const NO_SIGNAL: MsgFlags = MsgFlags::MSG_NOSIGNAL;
    pub(super) const RECEIVE_CLOEXEC: MsgFlags = MsgFlags::MSG_CMSG_CLOEXEC;
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod platform {
    use nix::sys::socket::{MsgFlags, SockFlag};
    pub(super) const SOCKET_CLOEXEC: SockFlag = SockFlag::empty();
    pub(super) const NO_SIGNAL: MsgFlags = MsgFlags::empty();
    pub(super) const RECEIVE_CLOEXEC: MsgFlags = MsgFlags::empty();
}
