//! The private mount namespace the runner's child enters before it executes bwrap, for the
//! mounts bwrap cannot make: the observer's FUSE mount ([`crate::observe_fs`]) and a
//! read-only mount on each protected symbolic link ([`LinkMounts`]).
//!
//! bubblewrap mounts with `mount(2)`, which follows a symbolic link at the mount point: a
//! bind onto `.bashrc -> dotfiles/bashrc` lands on the target, and the link itself stays an
//! ordinary directory entry the task can remove and replace with a file of its own. The new
//! mount API does not follow it: the child opens the link itself (`O_PATH | O_NOFOLLOW`),
//! clones it into a detached mount (`open_tree`), makes that read-only, `nosuid` and `nodev`
//! (`mount_setattr`) and attaches it onto the very same link (`move_mount` from descriptor to
//! descriptor, so that no path is looked up twice and nothing can be swapped in between).
//! bwrap's recursive binds then carry the mount into the sandbox as a submount it leaves
//! alone (it already has every flag bwrap would add), where it is locked: the link can be
//! neither removed, renamed nor replaced (`EBUSY`), and the mount table the notifier reads
//! names it, so the attempt is reported as a write.
//!
//! Everything [`PrivateNamespace::enter`] and [`LinkMounts::mount`] use is prepared before
//! the fork (C strings, map lines), because between fork and exec only async-signal-safe
//! calls are allowed: no allocation, no lock.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

use paddock_policy::AbsPathBuf;

/// A new mount namespace (and, when not root, a new user namespace mapping the runner's ids
/// to themselves), with `/` recursively private so that nothing mounted there reaches the
/// host.
#[derive(Clone, Debug)]
pub struct PrivateNamespace {
    /// Whether the runner holds `CAP_SYS_ADMIN` (no user namespace needed then).
    root: bool,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
}

impl PrivateNamespace {
    /// The namespace for a runner of effective ids `uid` and `gid`.
    pub fn new(uid: u32, gid: u32) -> PrivateNamespace {
        PrivateNamespace {
            // Root without CAP_SYS_ADMIN (a container that drops it) mounts as a user would,
            // in a user namespace of its own.
            root: uid == 0 && has_sys_admin(),
            setgroups: c"/proc/self/setgroups".to_owned(),
            uid_map: c"/proc/self/uid_map".to_owned(),
            gid_map: c"/proc/self/gid_map".to_owned(),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// The namespace for this process's effective ids.
    pub fn for_this_process() -> PrivateNamespace {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        PrivateNamespace::new(uid, gid)
    }

    /// Whether entering needs no user namespace.
    pub fn is_root(&self) -> bool {
        self.root
    }

    /// In the forked child just before exec (`pre_exec`): enters the namespaces, writes the
    /// id maps (`setgroups` denied), and makes `/` recursively private.
    ///
    /// Async-signal-safe: system calls on data prepared before the fork, no allocation.
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
        })
    }
}

/// `struct mount_attr` of `<linux/mount.h>` (the libc crate does not define it).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `<linux/mount.h>`: the source and the target of `move_mount` are the descriptors.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// The protected links to mount read-only on themselves, in the private namespace.
#[derive(Clone, Debug, Default)]
pub struct LinkMounts {
    links: Vec<CString>,
}

impl LinkMounts {
    /// Prepares the mounts of `links` (absolute paths).
    pub fn new(links: &[AbsPathBuf]) -> Result<LinkMounts, String> {
        let links = links
            .iter()
            .map(|l| {
                CString::new(l.as_os_str().as_bytes())
                    .map_err(|_| format!("the protected link {l} holds a NUL byte"))
            })
            .collect::<Result<_, _>>()?;
        Ok(LinkMounts { links })
    }

    /// Whether there is nothing to mount.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// In the forked child, inside the private namespace: mounts each link read-only,
    /// `nosuid` and `nodev`, on itself. A path that is no longer a link (the host changed it
    /// since the plan) is mounted the same way: read-only is never weaker. A path that is
    /// gone fails the spawn (fail closed): the task would find the protected name free.
    /// A kernel without the new mount API (before Linux 5.12) leaves the links as they are,
    /// as before; the runner still checks them after the run.
    ///
    /// Async-signal-safe: system calls on data prepared before the fork, no allocation.
    pub fn mount(&self) -> io::Result<()> {
        for link in &self.links {
            match mount_on_itself(link) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return Ok(()),
                other => other?,
            }
        }
        Ok(())
    }
}

/// One link: see [`LinkMounts::mount`].
fn mount_on_itself(link: &CString) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; the result is checked and closed below.
    let at =
        unsafe { libc::open(link.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    check(at)?;
    let result = mount_tree_on(at);
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(at) };
    result
}

fn mount_tree_on(at: libc::c_int) -> io::Result<()> {
    let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as u32;
    // SAFETY: an empty NUL-terminated path relative to a descriptor we hold; the result is
    // checked and closed below.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, at, c"".as_ptr(), flags) };
    let tree =
        libc::c_int::try_from(tree).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    check(tree)?;
    let attr = MountAttr {
        attr_set: libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `attr` is a valid `struct mount_attr` of the size passed; the path is empty and
    // NUL-terminated, relative to the detached tree's descriptor.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    let result = check_long(rc).and_then(|()| {
        // SAFETY: both paths are empty NUL-terminated strings relative to descriptors we
        // hold: the detached tree onto the link it was cloned from.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                at,
                c"".as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
            )
        };
        check_long(rc)
    });
    // SAFETY: closing the tree's descriptor: an attached mount stays, a detached one goes.
    unsafe { libc::close(tree) };
    result
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

pub(crate) fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn check_long(rc: libc::c_long) -> io::Result<()> {
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
    fn maps_and_paths_are_prepared_before_the_fork() {
        let ns = PrivateNamespace::new(1000, 100);
        assert!(!ns.is_root());
        assert_eq!(ns.uid_line, b"1000 1000 1\n");
        assert_eq!(ns.gid_line, b"100 100 1\n");
        let links = LinkMounts::new(&[AbsPathBuf::new_lexical("/p/.bashrc").unwrap()]).unwrap();
        assert_eq!(links.links, vec![c"/p/.bashrc".to_owned()]);
        assert!(LinkMounts::default().is_empty());
    }
}
