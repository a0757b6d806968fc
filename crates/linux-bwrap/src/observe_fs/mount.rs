//! The child's side: entering a private namespace ([`crate::private_ns`]) and mounting the
//! observer there, in a forked child just before it executes bwrap, plus the descriptor
//! hand-over.
//!
//! Everything [`ObserverMount::enter`] uses is prepared by [`ObserverMount::new`] before
//! the fork (C strings, map lines, the mount options up to the descriptor number), because
//! between fork and exec only async-signal-safe calls are allowed: no allocation, no lock.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use crate::private_ns::PrivateNamespace;
use crate::vfork::Syscall;

/// The most bytes the mount options can take (`rootmode=...,user_id=...,group_id=...,fd=N`).
const OPTS_MAX: usize = 128;

/// What mounting the observer takes, made before a fork: the C strings and the mount
/// options up to the descriptor number, which only the child knows
/// ([`MountArgs::mount_with`]). The runner's [`ObserverMount`] holds one, and so does a
/// prespawned bwrap's child, which mounts before the plan exists
/// (`crate::runtime::prespawn`).
#[derive(Clone, Debug)]
pub(crate) struct MountArgs {
    mount_dir: CString,
    dev_fuse: CString,
    opts_prefix: Vec<u8>,
}

impl MountArgs {
    /// The observer's mount on `mount_dir`, owned by `uid` and `gid`.
    pub(crate) fn new(mount_dir: &Path, uid: u32, gid: u32) -> Result<MountArgs, String> {
        let opts_prefix = format!("rootmode=40000,user_id={uid},group_id={gid},fd=").into_bytes();
        if opts_prefix.len() + 12 > OPTS_MAX {
            return Err("the mount options are too long".to_owned());
        }
        Ok(MountArgs {
            mount_dir: cstring(mount_dir.as_os_str().as_bytes())?,
            dev_fuse: cstring(super::DEV_FUSE.as_bytes())?,
            opts_prefix,
        })
    }

    /// Where it mounts.
    pub(crate) fn mount_dir(&self) -> &Path {
        Path::new(std::ffi::OsStr::from_bytes(self.mount_dir.as_bytes()))
    }

    /// Opens the FUSE device, mounts it on the mount point (`nosuid,nodev`, no
    /// `allow_other`) and sends the descriptor over `sock`; the child's own copy is closed
    /// (the mount holds the kernel's reference). Every call goes through `sys`, on data
    /// prepared before: no allocation, no lock. The errno of the first call that failed.
    ///
    /// # Safety
    /// `sys` must make system call `nr` with `args` as the kernel takes them.
    pub(crate) unsafe fn mount_with(&self, sock: RawFd, sys: Syscall) -> Result<(), i32> {
        let call = |nr: libc::c_long, args: [usize; 6]| -> Result<usize, i32> {
            // SAFETY: the caller's promise for `sys`; the arguments below are integers or
            // NUL-terminated strings that outlive the call.
            let r = unsafe { sys(nr, args) };
            usize::try_from(r).map_err(|_| i32::try_from(-r).unwrap_or(libc::EIO))
        };
        let flags = (libc::O_RDWR | libc::O_CLOEXEC) as usize;
        let at = libc::AT_FDCWD as usize;
        let dev = call(libc::SYS_openat, [at, self.dev_fuse.as_ptr() as usize, flags, 0, 0, 0])?;
        let mut opts = [0u8; OPTS_MAX];
        let n = self.opts_prefix.len();
        opts[..n].copy_from_slice(&self.opts_prefix);
        // `opts[n + digits]` stays 0: the terminator (the prefix is at most OPTS_MAX - 12
        // bytes, a descriptor number at most 10 digits).
        let _ = paddock_policy::write_decimal(
            i32::try_from(dev).unwrap_or(i32::MAX),
            &mut opts[n..OPTS_MAX - 1],
        );
        let mounted = call(
            libc::SYS_mount,
            [
                c"paddock".as_ptr() as usize,
                self.mount_dir.as_ptr() as usize,
                c"fuse".as_ptr() as usize,
                (libc::MS_NOSUID | libc::MS_NODEV) as usize,
                opts.as_ptr() as usize,
                0,
            ],
        )
        .map(drop)
        .and_then(|()| {
            let dev = i32::try_from(dev).unwrap_or(-1);
            // SAFETY: the caller's promise for `sys`.
            unsafe { crate::fdpass::send_fd_with(sock, dev, sys) }
        });
        let _ = call(libc::SYS_close, [dev, 0, 0, 0, 0, 0]);
        mounted
    }
}

/// What the child needs to mount the observer: see [`ObserverMount::enter`]. Clones share
/// the channel's end (a spawn keeps one in its `pre_exec` closure).
#[derive(Clone, Debug)]
pub struct ObserverMount {
    namespace: PrivateNamespace,
    args: MountArgs,
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
        Ok(ObserverMount {
            namespace: PrivateNamespace::new(uid, gid),
            args: MountArgs::new(mount_dir, uid, gid)?,
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
        // SAFETY: `through_libc` makes the call it is given.
        unsafe { self.args.mount_with(self.sock.as_raw_fd(), crate::vfork::through_libc) }
            .map_err(io::Error::from_raw_os_error)
    }

    /// Where it mounts.
    pub fn mount_dir(&self) -> &Path {
        self.args.mount_dir()
    }

    /// Hands the serving thread a device mounted on [`mount_dir`](Self::mount_dir) before
    /// this observer existed (by a prespawned bwrap's child, in bwrap's namespace), instead
    /// of mounting one.
    pub fn hand_over(&self, dev: &OwnedFd) -> io::Result<()> {
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
        assert_eq!(m.args.opts_prefix, b"rootmode=40000,user_id=1000,group_id=100,fd=");
        assert_eq!(m.mount_dir(), Path::new("/run/p/observe"));
    }
}
