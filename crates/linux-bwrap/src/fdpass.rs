//! Passing a descriptor from a forked child to its parent over a socket pair (`SCM_RIGHTS`):
//! the notification listener (task child to supervisor) and the observer's FUSE device
//! (bwrap's child to the runner). And a record
//! with descriptors: a prewarmed sandbox's task and its streams (runner to supervisor). The child's
//! side allocates nothing (it runs between `fork` and `exec` of a multi-threaded process).

use std::os::fd::{FromRawFd, OwnedFd};

/// A connected pair of close-on-exec `SOCK_SEQPACKET` unix sockets.
pub fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors; the result is checked.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The data byte of [`send_fd`]'s message.
pub const FD_BYTE: u8 = b'L';

/// A control buffer big enough for one descriptor, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// A message of the one byte `iov` points at and the first `control_len` bytes of `control`.
/// The caller keeps both alive while the message is used.
fn message(iov: &mut libc::iovec, control: &mut Control, control_len: usize) -> libc::msghdr {
    // SAFETY: msghdr is plain data, for which all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control_len as _;
    msg
}

/// Sends `fd` over `sock` with one data byte ([`FD_BYTE`]). Returns the errno on failure. No
/// allocation.
pub fn send_fd(sock: i32, fd: i32) -> Result<(), i32> {
    send_fd_with(sock, fd, FD_BYTE)
}

/// [`send_fd`] with the data byte `data`.
pub fn send_fd_with(sock: i32, fd: i32, data: u8) -> Result<(), i32> {
    let mut byte = [data];
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE(4) is well under the 64 bytes of `control`.
    let msg = message(&mut iov, &mut control, unsafe { libc::CMSG_SPACE(4) } as usize);
    // SAFETY: the message's pointers point into `byte`, `iov` and `control`, live stack
    // buffers; the header written is within `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        if cmsg.is_null() {
            return Err(libc::EINVAL);
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::copy_nonoverlapping((&raw const fd).cast::<u8>(), libc::CMSG_DATA(cmsg), 4);
        loop {
            if libc::sendmsg(sock, &raw const msg, libc::MSG_NOSIGNAL) == 1 {
                return Ok(());
            }
            let err = *libc::__errno_location();
            if err != libc::EINTR {
                return Err(err);
            }
        }
    }
}

/// Receives a descriptor sent by [`send_fd`]. `Ok(None)`: the peer closed without sending
/// (the child died before installing its filter).
pub fn recv_fd(sock: i32) -> std::io::Result<Option<OwnedFd>> {
    Ok(recv_fd_with(sock)?.map(|(_, fd)| fd))
}

/// [`recv_fd`], with the message's data byte.
pub fn recv_fd_with(sock: i32) -> std::io::Result<Option<(u8, OwnedFd)>> {
    let mut byte = [0u8];
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let len = control.0.len();
    let mut msg = message(&mut iov, &mut control, len);
    // SAFETY: as in `send_fd`; the received descriptor is taken into an OwnedFd once.
    unsafe {
        let n = loop {
            let n = libc::recvmsg(sock, &raw mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                break n;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        };
        if n == 0 {
            return Ok(None);
        }
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || msg.msg_flags & libc::MSG_CTRUNC != 0
        {
            return Err(std::io::Error::other("no descriptor in the message"));
        }
        let mut fd = -1i32;
        std::ptr::copy_nonoverlapping(libc::CMSG_DATA(cmsg), (&raw mut fd).cast::<u8>(), 4);
        if fd < 0 {
            return Err(std::io::Error::other("an invalid descriptor in the message"));
        }
        Ok(Some((byte[0], OwnedFd::from_raw_fd(fd))))
    }
}

/// Sends `data` (one record: `sock` is a `SOCK_SEQPACKET` socket) and `fds` with it.
pub fn send_with_fds(
    sock: std::os::fd::BorrowedFd<'_>,
    data: &[u8],
    fds: &[std::os::fd::RawFd],
) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let iov = [std::io::IoSlice::new(data)];
    let rights = [ControlMessage::ScmRights(fds)];
    let sent = sendmsg::<()>(
        std::os::fd::AsRawFd::as_raw_fd(&sock),
        &iov,
        &rights,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent != data.len() {
        return Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    Ok(())
}

/// Receives one record of at most `max` bytes and the descriptors sent with it (close-on-
/// exec). A peer that closed its end gives `Ok(None)`.
pub fn recv_with_fds(sock: i32, max: usize) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut data = vec![0u8; max];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 8]);
    let (len, fds, truncated) = {
        let mut iov = [std::io::IoSliceMut::new(&mut data)];
        let msg = recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)?;
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(received) = cmsg {
                // SAFETY: each descriptor was just received and is ours alone.
                fds.extend(received.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        let truncated = msg.flags.intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
        (msg.bytes, fds, truncated)
    };
    if truncated {
        return Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    if len == 0 && fds.is_empty() {
        return Ok(None);
    }
    data.truncate(len);
    Ok(Some((data, fds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, RawFd};

    #[test]
    fn a_descriptor_crosses_the_socket_and_a_closed_peer_ends_the_wait() {
        let (a, b) = socket_pair().unwrap();
        let file = std::fs::File::open("/").unwrap();
        send_fd(a.as_raw_fd(), file.as_raw_fd()).unwrap();
        let got = recv_fd(b.as_raw_fd()).unwrap().expect("a descriptor");
        let same = |fd: RawFd| std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(same(got.as_raw_fd()).ino(), same(file.as_raw_fd()).ino());
        drop(a);
        assert!(recv_fd(b.as_raw_fd()).unwrap().is_none());
    }
}
