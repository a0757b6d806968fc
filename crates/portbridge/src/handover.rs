//! Handing a connected TCP socket over a unix socket (`SCM_RIGHTS`), so that an inbound port
//! grant is one relay instead of two.
//!
//! The host end of an inbound grant accepts the client on the host's loopback and, instead of
//! relaying its bytes into the sandbox through a unix socket (and the sandbox end relaying
//! them again to the task's port), sends the accepted socket itself to the sandbox end, which
//! relays it to the task's port: the bytes cross one relay, not two. The socket keeps its
//! host network namespace; it is already connected, so whoever holds it can only talk to the
//! client that connected, which is what the relay does anyway.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::stream::Stream;

/// The one byte sent with the descriptor (a message needs data to carry its control part).
const TAG: u8 = b'T';

/// Sends `fd` over the connected unix socket `via`.
pub(crate) fn send(via: &Stream, fd: RawFd) -> io::Result<()> {
    let mut byte = TAG;
    let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    let fd_len = std::mem::size_of::<RawFd>() as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_len) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero msghdr is valid; its pointers are set below to buffers that outlive
    // the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` bytes, room for one header and one descriptor, so
    // CMSG_FIRSTHDR is non-null and CMSG_DATA lies within the buffer.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::other("no room for the control message"));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: msg and everything it points to are valid for the call.
    let sent = unsafe { libc::sendmsg(via.raw_fd(), &msg, 0) };
    if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Receives a TCP socket sent with [`send`] on `via`, waiting at most `wait`. Anything else
/// (no descriptor, more than one, not a stream socket of the internet families) is refused:
/// whoever reaches the unix socket could send any descriptor.
pub(crate) fn receive(via: &Stream, wait: Duration) -> io::Result<Stream> {
    via.set_read_timeout(Some(wait))?;
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    let fd_len = std::mem::size_of::<RawFd>() as u32;
    // Room for two descriptors, so that a second one is seen (and closed), not truncated.
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(2 * fd_len) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: as in `send`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    #[cfg(target_os = "linux")]
    let flags = libc::MSG_CMSG_CLOEXEC;
    #[cfg(not(target_os = "linux"))]
    let flags = 0;
    // SAFETY: msg and its buffers are valid for the call.
    let got = unsafe { libc::recvmsg(via.raw_fd(), &mut msg, flags) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR/NXTHDR walk it within
    // msg_controllen, and each SCM_RIGHTS payload holds (cmsg_len - CMSG_LEN(0)) / 4
    // descriptors that are now ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let n = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / fd_len as usize;
                for i in 0..n {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if got != 1 || byte != TAG || fds.len() != 1 || msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a handed-over socket"));
    }
    let Some(fd) = fds.pop() else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a handed-over socket"));
    };
    if !is_inet_stream(fd.as_raw_fd()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the descriptor is not a TCP socket",
        ));
    }
    Stream::Tcp(TcpStream::from(fd)).prepare()
}

fn is_inet_stream(fd: RawFd) -> bool {
    let int_opt = |name| {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    if int_opt(libc::SO_TYPE) != Some(libc::SOCK_STREAM) {
        return false;
    }
    // SAFETY: an all-zero sockaddr_storage is valid; getsockname writes at most `len` bytes.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: as above.
    let rc = unsafe {
        libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_storage).cast(), &mut len)
    };
    rc == 0 && matches!(i32::from(addr.ss_family), libc::AF_INET | libc::AF_INET6)
}
