//! The child's side: entering a private namespace and mounting the observer there, in a
//! forked child just before it executes bwrap, plus the descriptor hand-over.
//!
//! Everything [`ObserverMount::enter`] uses is prepared by [`ObserverMount::new`] before
//! the fork (C strings, map lines, the mount options up to the descriptor number), because
//! between fork and exec only async-signal-safe calls are allowed: no allocation, no lock.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// The most bytes the mount options can take (`rootmode=...,user_id=...,group_id=...,fd=N`).
const OPTS_MAX: usize = 128;

/// What the child needs to mount the observer: see [`ObserverMount::enter`]. Clones share
/// the channel's end (a spawn keeps one in its `pre_exec` closure).
#[derive(Clone, Debug)]
pub struct ObserverMount {
    /// Whether the runner is root (no user namespace needed then).
    root: bool,
    mount_dir: CString,
    dev_fuse: CString,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
    /// The options without the descriptor number, which only the child knows.
    opts_prefix: Vec<u8>,
    /// The child's end of the descriptor channel (close-on-exec).
    sock: Arc<OwnedFd>,
}

/// Whether this thread holds `CAP_SYS_ADMIN` in its effective set (capget, version 3).
fn has_sys_admin() -> bool {
    const VERSION_3: u32 = 0x2008_0522;
    let mut header: [u32; 2] = [VERSION_3, 0];
    let mut data = [0u32; 6];
    // SAFETY: capget writes two data words of version 3's layout into `data`, which is large
    // enough; the header is valid.
    let rc = unsafe { libc::syscall(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr()) };
    // Data word 0 holds capabilities 0-31: effective first; CAP_SYS_ADMIN is 21.
    const CAP_SYS_ADMIN: u32 = 21;
    rc == 0 && data[0] & (1 << CAP_SYS_ADMIN) != 0
}

fn cstring(bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| "the path holds a NUL byte".to_owned())
}

impl ObserverMount {
    pub(super) fn new(
        mount_dir: &Path,
        uid: u32,
        gid: u32,
        sock: OwnedFd,
    ) -> Result<ObserverMount, String> {
        let opts_prefix = format!("rootmode=40000,user_id={uid},group_id={gid},fd=").into_bytes();
        if opts_prefix.len() + 12 > OPTS_MAX {
            return Err("the mount options are too long".to_owned());
        }
        Ok(ObserverMount {
            // Root without CAP_SYS_ADMIN (a container that drops it) mounts as a user would,
            // in a user namespace of its own.
            root: uid == 0 && has_sys_admin(),
            mount_dir: cstring(mount_dir.as_os_str().as_bytes())?,
            dev_fuse: cstring(super::DEV_FUSE.as_bytes())?,
            setgroups: cstring(b"/proc/self/setgroups")?,
            uid_map: cstring(b"/proc/self/uid_map")?,
            gid_map: cstring(b"/proc/self/gid_map")?,
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
            opts_prefix,
            sock: Arc::new(sock),
        })
    }

    /// In the forked child just before exec (`pre_exec`), before any descriptor is moved:
    /// enters a new mount namespace (and, when not root, a new user namespace mapping the
    /// runner's uid and gid to themselves, `setgroups` denied), makes `/` recursively
    /// private, opens the FUSE device, mounts it on the mount point (`nosuid,nodev`, no
    /// `allow_other`) and sends the descriptor to the serving thread.
    ///
    /// Async-signal-safe: system calls on data prepared before the fork, no allocation.
    /// The FUSE descriptor is close-on-exec: the mount holds the kernel's reference.
    pub fn enter(&self) -> io::Result<()> {
        if self.root {
            // SAFETY: unshare has no memory arguments.
            check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
        } else {
            // SAFETY: as above. The child is single-threaded (forked), as CLONE_NEWUSER needs.
            check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) })?;
            write_file(&self.setgroups, b"deny")?;
            write_file(&self.uid_map, &self.uid_line)?;
            write_file(&self.gid_map, &self.gid_line)?;
        }
        // SAFETY: a NUL-terminated target; null source, type and data are allowed for a
        // propagation change.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })?;
        // SAFETY: a NUL-terminated path; the result is checked and owned below.
        let dev = unsafe { libc::open(self.dev_fuse.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        check(dev)?;
        // SAFETY: `dev` is a fresh descriptor this function owns.
        let dev = unsafe { OwnedFd::from_raw_fd(dev) };
        let mut opts = [0u8; OPTS_MAX];
        let n = self.opts_prefix.len();
        opts[..n].copy_from_slice(&self.opts_prefix);
        let digits = paddock_policy::write_decimal(dev.as_raw_fd(), &mut opts[n..OPTS_MAX - 1]);
        // `opts[n + digits]` is still 0: the terminator.
        let _ = digits;
        // SAFETY: every pointer is a NUL-terminated string that outlives the call (`opts`
        // ends in a 0 byte: the prefix is at most OPTS_MAX - 12 bytes, a descriptor number
        // at most 10 digits).
        check(unsafe {
            libc::mount(
                c"paddock".as_ptr(),
                self.mount_dir.as_ptr(),
                c"fuse".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            )
        })?;
        crate::fdpass::send_fd(self.sock.as_raw_fd(), dev.as_raw_fd())
            .map_err(io::Error::from_raw_os_error)
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Writes `bytes` to `path` in one `write` (as the kernel wants for id maps).
fn write_file(path: &CString, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    check(fd)?;
    // SAFETY: `fd` is ours; `bytes` is valid for its length.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let err = io::Error::last_os_error();
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    if written < 0 || written as usize != bytes.len() {
        return Err(if written < 0 { err } else { io::Error::from_raw_os_error(libc::EIO) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_maps_are_prepared_before_the_fork() {
        let (a, _b) = crate::fdpass::socket_pair().unwrap();
        let m = ObserverMount::new(Path::new("/run/p/observe"), 1000, 100, a).unwrap();
        assert!(!m.root);
        assert_eq!(m.opts_prefix, b"rootmode=40000,user_id=1000,group_id=100,fd=");
        assert_eq!(m.uid_line, b"1000 1000 1\n");
        assert_eq!(m.gid_line, b"100 100 1\n");
        assert_eq!(m.mount_dir.as_bytes(), b"/run/p/observe");
    }
}
