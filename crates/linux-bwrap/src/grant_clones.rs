//! Write grants attached by the supervisor from the runner's clones
//! ([`SpawnPlan::grant_clones`](paddock_policy::SpawnPlan)), in place of bwrap's `--bind`,
//! which reads and parses the whole mount table (which grants: `crate::ops`'s
//! `clonable_grants`).
//!
//! The runner clones each grant ([`clone_grant`]: `open_tree(OPEN_TREE_CLONE |
//! AT_RECURSIVE)`, never through a symlink at its end, then `nosuid` and `nodev` throughout,
//! as bwrap's bind makes it; the read-only mounts below it stay read-only) while bwrap sets
//! the sandbox up, and sends the clones on the signal channel ([`send`]), one message of one
//! byte ([`GRANT_CLONE_BYTE`]) and one descriptor each, in the plan's order, before any
//! polite signal. The supervisor receives them before its inner mounts ([`receive`], and
//! `paddock-supervisor-nolibc`'s own) and attaches each onto its grant's path, opened
//! without following a link at its end ([`attach`]), first of its inner mounts but the
//! devices. Then the mount identities (SYM-03, `crate::mount_ids`) check each grant as they
//! check bwrap's binds: the path must be the directory the runner recorded before bwrap read
//! its arguments, and a mount point. A clone of anything else (the grant swapped meanwhile)
//! fails that check and the task never runs; a runner that sends too few (it died) leaves
//! the supervisor at the channel's end, which fails closed.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The data byte of each clone's message on the signal channel.
pub const GRANT_CLONE_BYTE: u8 = crate::fdpass::FD_BYTE;

/// `<linux/mount.h>`.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// A detached clone of the directory at `path` with everything mounted below it, `nosuid`
/// and `nodev` throughout (as bwrap's `--bind` leaves a grant), close-on-exec. Fails on a
/// symlink at `path`'s end.
pub fn clone_grant(path: &Path) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
    // SAFETY: a NUL-terminated path; the result is checked.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, name.as_ptr(), flags) };
    let tree = owned(ret)?;
    // `struct mount_attr`: attr_set, attr_clr, propagation, userns_fd.
    let attr: [u64; 4] = [libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV, 0, 0, 0];
    // SAFETY: an empty path relative to our descriptor, and the attributes of their size.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(tree)
}

/// Sends `clones` on the signal channel `sock`, one message each, in order.
pub fn send(sock: RawFd, clones: &[OwnedFd]) -> io::Result<()> {
    for clone in clones {
        crate::fdpass::send_fd(sock, clone.as_raw_fd()).map_err(io::Error::from_raw_os_error)?;
    }
    Ok(())
}

/// In the supervisor: the `count` clones the runner sends on the signal channel `sock`.
pub fn receive(sock: RawFd, count: usize) -> Result<Vec<OwnedFd>, String> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        match crate::fdpass::recv_fd(sock) {
            Ok(Some(fd)) => out.push(fd),
            Ok(None) => {
                return Err(format!(
                    "the runner sent {} of the {count} write grants it was to clone",
                    out.len()
                ));
            }
            Err(e) => return Err(format!("cannot receive the write grants' clones: {e}")),
        }
    }
    Ok(out)
}

/// In the supervisor, in its own mount namespace: attaches the clone `tree` onto the
/// directory at `path`, opened without following a link at its end.
pub fn attach(tree: &OwnedFd, path: &CStr) -> io::Result<()> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; the result is checked.
    let at = owned(libc::c_long::from(unsafe { libc::open(path.as_ptr(), flags) }))?;
    // SAFETY: empty paths relative to our two descriptors; the result is checked.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            at.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The clones of the plan's write grants for the supervisor to attach
/// ([`crate::grant_clones`]), in the plan's order.
pub(crate) fn clone_all(plan: &paddock_policy::SpawnPlan) -> crate::runtime::Result<Vec<OwnedFd>> {
    use crate::error::Context;
    plan.grant_clones
        .iter()
        .map(|grant| {
            clone_grant(grant.as_path())
                .with_context(|| format!("cannot clone the write grant {grant} for the sandbox"))
        })
        .collect()
}

/// Sends `clones` to the supervisor of `child` on the signal channel, before anything else
/// goes there. A channel nobody holds any more (`EPIPE`: the child died before bwrap ran the
/// supervisor, as a tracer that fails on its own does) is left to the caller, who sees the
/// child's end; on any other failure `child` is killed and reaped (its supervisor would
/// wait for them) and the spawn fails.
pub(crate) fn hand_over(
    child: &crate::runtime::exec::SpawnedChild,
    signal_tx: Option<&std::os::unix::net::UnixStream>,
    clones: &[OwnedFd],
) -> crate::runtime::Result<()> {
    use crate::error::Context;
    if clones.is_empty() {
        return Ok(());
    }
    let sent = match signal_tx {
        Some(tx) => send(tx.as_raw_fd(), clones),
        None => Err(std::io::Error::other("the plan has no signal channel")),
    };
    match sent {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)) => Ok(()),
        other => other
            .inspect_err(|_| {
                // SAFETY: kill on our unreaped child's pid.
                unsafe { libc::kill(child.pid, libc::SIGKILL) };
                let _ = child.wait();
            })
            .context("cannot hand the write grants' clones to the sandbox's supervisor"),
    }
}

/// A descriptor a system call returned, or its error.
fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
