//! Write grants attached by the supervisor from the runner's clones
//! ([`SpawnPlan::grant_clones`]), in place of bwrap's `--bind`, which reads and parses the
//! whole mount table (which grants: `crate::ops`'s `clonable_grants`).
//!
//! The runner clones each grant ([`clone_grant`]: `open_tree(OPEN_TREE_CLONE |
//! AT_RECURSIVE)`, never through a symlink at its end, then `nosuid` and `nodev` throughout,
//! as bwrap's bind makes it; the read-only mounts below it stay read-only) while bwrap sets
//! the sandbox up. Where the kernel mounts into a detached tree (Linux 6.15) it also makes in
//! the clone the mounts the supervisor would make below the grant (`GrantClone::within`:
//! protected paths read-only, pinned directories, each bound onto itself), each found
//! beneath the clone's root without following any symlink (`openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`): the supervisor's critical path then attaches one tree where it
//! made twenty mounts. Any step that fails leaves the rest to the supervisor (a mount made
//! twice is the same wall).
//!
//! The clones go on the signal channel (`hand_over`), one message of one byte and one
//! descriptor each, in the plan's order, before any polite signal: [`BARE`] for a clone
//! alone, [`MOUNTED`] for one with every mount below it made. The supervisor receives them
//! before its inner mounts ([`receive`], and `paddock-supervisor-nolibc`'s own), attaches
//! each onto its grant's path, opened without following a link at its end ([`attach`]),
//! first of its inner mounts but the devices, and skips the binds of paths onto themselves
//! below a grant that came [`MOUNTED`]. Then the mount identities (SYM-03,
//! `crate::mount_ids`) check each grant, and each protected path they list, as they check
//! bwrap's binds: the path must be what the runner recorded before bwrap read its
//! arguments, and a mount point. A clone of anything else (the grant swapped meanwhile)
//! fails that check and the task never runs; a runner that sends too few (it died) leaves
//! the supervisor at the channel's end, which fails closed.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use paddock_policy::{GrantClone, SpawnPlan};

use crate::devices::owned;

/// The data byte of a clone's message: the clone alone.
pub const BARE: u8 = crate::fdpass::FD_BYTE;
/// The data byte of a clone's message: with every mount below the grant made in it.
pub const MOUNTED: u8 = b'M';

/// `<linux/mount.h>`.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `<linux/openat2.h>`.
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// A grant's clone, ready to hand over.
#[derive(Debug)]
pub struct Prepared {
    /// The detached tree.
    pub tree: OwnedFd,
    /// Whether every mount below the grant is made in it ([`MOUNTED`]).
    pub mounted: bool,
}

/// A detached clone of the directory at `path` with everything mounted below it, `nosuid`
/// and `nodev` throughout (as bwrap's `--bind` leaves a grant), close-on-exec. Fails on a
/// symlink at `path`'s end.
pub fn clone_grant(path: &Path) -> io::Result<OwnedFd> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
    // SAFETY: a NUL-terminated path; the result is checked.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, name.as_ptr(), flags) };
    let tree = owned(ret)?;
    set_attr(&tree, true, libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)?;
    Ok(tree)
}

/// Makes in `tree`, the clone of `grant`, each of its mounts below it, in order: the path
/// found beneath the clone's root without following a symlink, cloned with everything below
/// it, `nosuid`, `nodev`, read-only unless it is a pinned directory, and attached onto
/// itself. The first failure stops it (the supervisor then makes them all).
pub fn mount_within(tree: &OwnedFd, grant: &GrantClone) -> io::Result<()> {
    for mount in &grant.within {
        let rel = mount
            .path
            .as_path()
            .strip_prefix(grant.path.as_path())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let rel = CString::new(rel.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // `struct open_how`: flags, mode, resolve.
        let how: [u64; 3] = [
            (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
            0,
            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        ];
        // SAFETY: a NUL-terminated path relative to our descriptor, and `how` of its size.
        let at = owned(unsafe {
            libc::syscall(
                libc::SYS_openat2,
                tree.as_raw_fd(),
                rel.as_ptr(),
                how.as_ptr(),
                std::mem::size_of_val(&how),
            )
        })?;
        let flags = OPEN_TREE_CLONE
            | libc::O_CLOEXEC as libc::c_uint
            | libc::AT_EMPTY_PATH as libc::c_uint
            | libc::AT_RECURSIVE as libc::c_uint;
        // SAFETY: an empty path relative to our descriptor; the result is checked.
        let bind = owned(unsafe {
            libc::syscall(libc::SYS_open_tree, at.as_raw_fd(), c"".as_ptr(), flags)
        })?;
        let read_only = if mount.read_only { libc::MOUNT_ATTR_RDONLY } else { 0 };
        set_attr(&bind, true, read_only | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV)?;
        crate::private_ns::attach(bind.as_raw_fd(), at.as_raw_fd())?;
    }
    Ok(())
}

/// The clones of the plan's write grants for the supervisor to attach, in the plan's order,
/// each with the mounts below it made where the kernel allows.
pub(crate) fn clone_all(plan: &SpawnPlan) -> crate::runtime::Result<Vec<Prepared>> {
    use crate::error::Context;
    plan.grant_clones
        .iter()
        .map(|grant| {
            let tree = clone_grant(grant.path.as_path()).with_context(|| {
                format!("cannot clone the write grant {} for the sandbox", grant.path)
            })?;
            let mounted = !grant.within.is_empty() && mount_within(&tree, grant).is_ok();
            Ok(Prepared { tree, mounted })
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
    clones: &[Prepared],
) -> crate::runtime::Result<()> {
    use crate::error::Context;
    if clones.is_empty() {
        return Ok(());
    }
    let sent = match signal_tx {
        Some(tx) => send(tx.as_raw_fd(), clones),
        None => Err(io::Error::other("the plan has no signal channel")),
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

/// Sends `clones` on the signal channel `sock`, one message each, in order.
pub fn send(sock: RawFd, clones: &[Prepared]) -> io::Result<()> {
    for clone in clones {
        let byte = if clone.mounted { MOUNTED } else { BARE };
        crate::fdpass::send_fd_with(sock, clone.tree.as_raw_fd(), byte)
            .map_err(io::Error::from_raw_os_error)?;
    }
    Ok(())
}

/// In the supervisor: the `count` clones the runner sends on the signal channel `sock`,
/// each with whether every mount below its grant is made in it.
pub fn receive(sock: RawFd, count: usize) -> Result<Vec<(bool, OwnedFd)>, String> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        match crate::fdpass::recv_fd_with(sock) {
            Ok(Some((byte, fd))) => out.push((byte == MOUNTED, fd)),
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
    crate::private_ns::attach(tree.as_raw_fd(), at.as_raw_fd())
}

/// Whether `path` lies strictly below `grant` (both absolute, without `..`).
pub fn is_below(path: &CStr, grant: &CStr) -> bool {
    let (path, grant) = (path.to_bytes(), grant.to_bytes());
    path.strip_prefix(grant).is_some_and(|rest| rest.first() == Some(&b'/'))
}

/// `mount_setattr` setting `attr_set` on `tree` (and everything below it when `recursive`).
fn set_attr(tree: &OwnedFd, recursive: bool, attr_set: u64) -> io::Result<()> {
    let recursive = if recursive { libc::AT_RECURSIVE } else { 0 };
    // `struct mount_attr`: attr_set, attr_clr, propagation, userns_fd.
    let attr: [u64; 4] = [attr_set, 0, 0, 0];
    // SAFETY: an empty path relative to our descriptor, and the attributes of their size.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | recursive,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_means_strictly_under_a_whole_component() {
        assert!(is_below(c"/p/.git", c"/p"));
        assert!(is_below(c"/p/a/b", c"/p"));
        assert!(!is_below(c"/p", c"/p"));
        assert!(!is_below(c"/pp/x", c"/p"));
        assert!(!is_below(c"/q/x", c"/p"));
    }
}
