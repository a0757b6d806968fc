//! The child's side: entering a private namespace ([`crate::private_ns`]) and mounting the
//! observer there, in a forked child just before it executes bwrap, plus the descriptor
//! hand-over.
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

use crate::private_ns::{PrivateNamespace, check};

/// The most bytes the mount options can take (`rootmode=...,user_id=...,group_id=...,fd=N`).
const OPTS_MAX: usize = 128;

/// What the child needs to mount the observer: see [`ObserverMount::enter`]. Clones share
/// the channel's end (a spawn keeps one in its `pre_exec` closure).
#[derive(Clone, Debug)]
pub struct ObserverMount {
    namespace: PrivateNamespace,
    mount_dir: CString,
    dev_fuse: CString,
    /// The options without the descriptor number, which only the child knows.
    opts_prefix: Vec<u8>,
    /// The child's end of the descriptor channel (close-on-exec).
    sock: Arc<OwnedFd>,
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
            namespace: PrivateNamespace::new(uid, gid),
            mount_dir: cstring(mount_dir.as_os_str().as_bytes())?,
            dev_fuse: cstring(super::DEV_FUSE.as_bytes())?,
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
        self.namespace.enter()?;
        self.mount_here()
    }

    /// [`enter`](Self::enter) without entering a namespace: in a child that joined one made
    /// before (a prespawned bwrap's, `crate::runtime::prespawn`). The same rules hold.
    pub fn mount_here(&self) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_maps_are_prepared_before_the_fork() {
        let (a, _b) = crate::fdpass::socket_pair().unwrap();
        let m = ObserverMount::new(Path::new("/run/p/observe"), 1000, 100, a).unwrap();
        assert!(!m.namespace.is_root());
        assert_eq!(m.opts_prefix, b"rootmode=40000,user_id=1000,group_id=100,fd=");
        assert_eq!(m.mount_dir.as_bytes(), b"/run/p/observe");
    }
}
