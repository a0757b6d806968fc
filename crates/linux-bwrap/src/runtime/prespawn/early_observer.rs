//! The observer's mount made before the plan exists: the child that starts an observed
//! run's bwrap mounts the observer filesystem in bwrap's namespace just before it executes
//! bwrap, and sends the device up. The runner hands it to the observer's serving thread
//! once planned ([`EarlyObserver::hand_to`]), instead of joining bwrap's namespace with a
//! helper process to mount it then, which took a default run about 0.3 ms while bwrap
//! waited for its arguments.
//!
//! The mount point is the runtime base's, shared by every run ([`crate::plan::OBSERVER_DIR`]),
//! so it is known before the run's runtime dir and plan are. The device is opened by the
//! child, in bwrap's user namespace: the kernel takes a FUSE descriptor only from the one
//! that mounts it. A mount that fails here is made by the helper as before; a device whose
//! run does not use this bwrap goes with it (the mount with its namespace).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use crate::observe_fs::{MountArgs, ObserverMount};
use crate::vfork::Syscall;

/// The runner's side: where the observer is mounted in the waiting bwrap's namespace, and
/// the socket its device arrives on.
pub(super) struct EarlyObserver {
    mount_dir: PathBuf,
    sock: OwnedFd,
}

/// The child's side, made before it starts.
pub(super) struct ChildMount {
    args: MountArgs,
    /// The child's end of the socket (close-on-exec: bwrap never has it).
    sock: OwnedFd,
}

/// Both sides for an observed run's bwrap; `None` when the mount point cannot be made (the
/// observer is then mounted once planned, which says why it cannot).
pub(super) fn prepare() -> Option<(EarlyObserver, ChildMount)> {
    use std::os::unix::fs::DirBuilderExt;
    let base = crate::runtime::runtime_dir::base();
    crate::runtime::runtime_dir::ensure_private_dir(&base).ok()?;
    let mount_dir = base.join(crate::plan::OBSERVER_DIR);
    match std::fs::DirBuilder::new().mode(0o700).create(&mount_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    if !std::fs::symlink_metadata(&mount_dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let args = MountArgs::new(&mount_dir, uid, gid).ok()?;
    let (ours, theirs) = crate::fdpass::socket_pair().ok()?;
    Some((EarlyObserver { mount_dir, sock: ours }, ChildMount { args, sock: theirs }))
}

impl ChildMount {
    /// In the child, in bwrap's namespace, before it executes bwrap: mounts the observer
    /// and sends the device up. A failure is left to the runner, which mounts once planned.
    ///
    /// # Safety
    /// `sys` must make system call `nr` with `args` as the kernel takes them.
    pub(super) unsafe fn mount(&self, sys: Syscall) {
        // SAFETY: the caller's promise for `sys`.
        let _ = unsafe { self.args.mount_with(self.sock.as_raw_fd(), sys) };
    }
}

impl EarlyObserver {
    /// After bwrap has been executed: hands the device to `observer`'s serving thread when
    /// the child mounted it where `observer` mounts. Whether it did: if not, `observer` is
    /// still to be mounted.
    pub(super) fn hand_to(self, observer: &ObserverMount) -> std::io::Result<bool> {
        if observer.mount_dir() != self.mount_dir {
            return Ok(false);
        }
        match crate::fdpass::recv_fd_now(self.sock.as_raw_fd())? {
            Some(dev) => observer.hand_over(&dev).map(|()| true),
            None => Ok(false),
        }
    }
}
