//! The inner mounts: paths the runner left to the supervisor to bind onto themselves once
//! bwrap is done (`paddock_linux_bwrap::payload::SupervisorPayload::inner_mounts`), made as
//! `paddock_linux_bwrap::private_ns::SelfMounts::mount_inside` makes them for
//! `paddock-supervisor`: a mount namespace of its own, private; each path opened without
//! following a link at its end, cloned with everything below it, made `nosuid`, `nodev`
//! and (`r`) read-only, and attached onto itself, descriptor to descriptor; a hidden
//! directory (`e`) gets an empty read-only tmpfs (mode 0755, as bwrap's `--tmpfs`); a hidden
//! file (`m`) gets the masked file instead, read-only, alone: an empty mode-0000 file made at
//! `INNER_MASK_PATH` in bwrap's fresh `/dev` before the first mask and removed after the
//! last, so that the task reaches it only through those read-only mounts (the same empty
//! mode-0000 file every hidden path shows). A kernel without the new mount API (before 5.12)
//! binds with `mount(2)` and remounts keeping the flags `statfs` reports (in a user
//! namespace, inherited flags are locked). A write grant (`c`) is the runner's clone of it,
//! received on the signal channel (`paddock_linux_bwrap::grant_clones`), attached onto it;
//! when the runner made the binds below the grant in its clone, they are not made again.

use core::ffi::CStr;

use crate::constants::{GRANT_MOUNTED, INNER_MASK_PATH};
use crate::sys::{self, Errno};

/// `<linux/mount.h>`: the whole tree (`open_tree`, `mount_setattr`).
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// The kernel's `ST_RELATIME` (`linux/statfs.h`), which not every C library's bindings name.
const ST_RELATIME: u64 = 0x1000;

/// `statfs`'s flags (`ST_*`) and the `MS_*` flag each stands for: the flags a remount keeps.
const KEPT_FLAGS: [(u64, libc::c_ulong); 8] = [
    (libc::ST_RDONLY, libc::MS_RDONLY),
    (libc::ST_NOSUID, libc::MS_NOSUID),
    (libc::ST_NODEV, libc::MS_NODEV),
    (libc::ST_NOEXEC, libc::MS_NOEXEC),
    (libc::ST_SYNCHRONOUS, libc::MS_SYNCHRONOUS),
    (libc::ST_NOATIME, libc::MS_NOATIME),
    (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
    (ST_RELATIME, libc::MS_RELATIME),
];

/// Makes every mount of `mounts` (kind byte, then path; NULL-terminated), in order, in a
/// mount namespace of its own. The first failure is returned with the path it concerns
/// (`None`: the namespace itself). On success, a descriptor of the namespace left (bwrap's),
/// when `/proc` gives one: the last reference to it, so that its teardown (an expedited RCU
/// grace period, ~0.1-0.2 ms) happens when the caller closes it, once the task runs, not in
/// the `unshare` before it.
pub fn mount_all(
    mounts: &[*const u8],
    signal_fd: Option<libc::c_int>,
) -> Result<Option<libc::c_int>, (Option<&CStr>, &'static str, Errno)> {
    let left = sys::open_read(c"/proc/self/ns/mnt".as_ptr().cast()).ok();
    if let Err(e) = sys::unshare(libc::CLONE_NEWNS) {
        if let Some(fd) = left {
            sys::close(fd);
        }
        return Err((None, "unshare", e));
    }
    sys::mount(core::ptr::null(), c"/".as_ptr().cast(), libc::MS_REC | libc::MS_PRIVATE)
        .map_err(|e| (None, "make private", e))?;
    let fields = || mounts.iter().take_while(|m| !m.is_null());
    // SAFETY: each field is NUL-terminated (checked by `payload::parse`): its first byte is
    // readable.
    let masks = fields().any(|&m| unsafe { *m } == b'm');
    let masked = INNER_MASK_PATH.as_ptr().cast();
    if masks {
        sys::create_empty(masked)
            .map_err(|e| (Some(INNER_MASK_PATH), "make the masked file", e))?;
    }
    // The grants whose clones came with every mount below them made (`GRANT_MOUNTED`): the
    // binds of paths onto themselves below them are skipped.
    let mut made_below: [Option<&CStr>; MAX_MOUNTED_GRANTS] = [None; MAX_MOUNTED_GRANTS];
    for &m in fields() {
        // SAFETY: a NUL-terminated field of the payload, checked by `payload::parse` to be a
        // kind byte and an absolute path.
        let field = unsafe { CStr::from_ptr(m.cast()) };
        let kind = field.to_bytes().first().copied().unwrap_or(b'r');
        // SAFETY: the same field past its kind byte: still NUL-terminated.
        let path = unsafe { CStr::from_ptr(m.add(1).cast()) };
        // `R` and `W`: made by the runner in a grant's clone that came with them.
        if matches!(kind, b'R' | b'W') && made_below.iter().flatten().any(|g| is_below(path, g)) {
            continue;
        }
        let kind = kind.to_ascii_lowercase();
        let mask = kind == b'm';
        let source = if mask { INNER_MASK_PATH } else { path };
        match kind {
            b'v' => crate::devices::make_in(path),
            b'c' => attach_grant_clone(signal_fd, path).map(|made| {
                if made && let Some(slot) = made_below.iter_mut().find(|g| g.is_none()) {
                    *slot = Some(path);
                }
            }),
            b'e' => match mount_empty_dir(path) {
                Err((_, Errno(libc::ENOSYS))) => empty_dir_with_mount(path),
                other => other,
            },
            _ => match mount_tree(source, path, kind) {
                Err((_, Errno(libc::ENOSYS))) => bind_with_mount(source, path, kind),
                other => other,
            },
        }
        .map_err(|(what, e)| (Some(path), what, e))?;
    }
    if masks {
        sys::unlink(masked).map_err(|e| (Some(INNER_MASK_PATH), "remove the masked file", e))?;
    }
    Ok(left)
}

/// How many grants that came with the mounts below them made are remembered; the binds
/// below any more are made again (the same walls twice).
const MAX_MOUNTED_GRANTS: usize = 16;

/// A write grant (`c`): the next clone the runner sends on the signal channel (the first
/// thing it sends there), attached onto the directory at `path`, opened without following a
/// link at its end. The mount identities check it after (SYM-03). Whether the runner made
/// every mount below the grant in it.
fn attach_grant_clone(
    signal_fd: Option<libc::c_int>,
    path: &CStr,
) -> Result<bool, (&'static str, Errno)> {
    let fd = signal_fd.ok_or(("receive the write grant's clone", Errno(libc::EBADF)))?;
    let (byte, tree) =
        sys::recv_fd_with(fd).map_err(|e| ("receive the write grant's clone", e))?.ok_or((
            "receive the write grant's clone (the runner sent none)",
            Errno(libc::ENODATA),
        ))?;
    let attached = sys::open_path(path.as_ptr().cast()).map_err(|e| ("open", e)).and_then(|at| {
        let moved = sys::move_mount(tree, at).map_err(|e| ("move_mount", e));
        sys::close(at);
        moved
    });
    sys::close(tree);
    attached.map(|()| byte == GRANT_MOUNTED)
}

/// Whether `path` lies strictly below `grant` (both absolute, without `..`).
pub(crate) fn is_below(path: &CStr, grant: &CStr) -> bool {
    let (path, grant) = (path.to_bytes(), grant.to_bytes());
    path.strip_prefix(grant).is_some_and(|rest| rest.first() == Some(&b'/'))
}

/// Read-only but for a pinned directory (`w`); everything below it but for a mask (`m`).
fn flags_of(kind: u8) -> (bool, bool) {
    (kind != b'w', kind != b'm')
}

fn mount_tree(source: &CStr, path: &CStr, kind: u8) -> Result<(), (&'static str, Errno)> {
    let (read_only, recursive) = flags_of(kind);
    let recursive = if recursive { AT_RECURSIVE } else { 0 };
    let at = sys::open_path(path.as_ptr().cast()).map_err(|e| ("open", e))?;
    let from = if kind == b'm' {
        sys::open_path(source.as_ptr().cast()).map_err(|e| ("open the masked file", e))
    } else {
        Ok(at)
    };
    let result = from.and_then(|from| {
        let cloned = sys::open_tree_clone(from, recursive).map_err(|e| ("open_tree", e));
        if from != at {
            sys::close(from);
        }
        cloned
    });
    let result = result.and_then(|tree| {
        let attr = if read_only { libc::MOUNT_ATTR_RDONLY } else { 0 }
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV;
        let done = sys::mount_setattr(tree, recursive, attr)
            .map_err(|e| ("mount_setattr", e))
            .and_then(|()| sys::move_mount(tree, at).map_err(|e| ("move_mount", e)));
        sys::close(tree);
        done
    });
    sys::close(at);
    result
}

/// The options of the empty directory over a hidden one: bwrap's `--tmpfs` mode.
const EMPTY_DIR_MODE: &CStr = c"0755";

/// An empty read-only tmpfs (`e`), detached and attached onto `path`'s descriptor.
fn mount_empty_dir(path: &CStr) -> Result<(), (&'static str, Errno)> {
    let attr = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    let at = sys::open_path(path.as_ptr().cast()).map_err(|e| ("open", e))?;
    let result = sys::tmpfs_detached(EMPTY_DIR_MODE.as_ptr().cast(), attr)
        .map_err(|e| ("make the empty directory", e))
        .and_then(|tree| {
            let done = sys::move_mount(tree, at).map_err(|e| ("move_mount", e));
            sys::close(tree);
            done
        });
    sys::close(at);
    result
}

/// [`mount_empty_dir`] with `mount(2)`, before Linux 5.2.
fn empty_dir_with_mount(path: &CStr) -> Result<(), (&'static str, Errno)> {
    let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    let data = c"mode=0755";
    sys::mount_new(c"tmpfs".as_ptr().cast(), path.as_ptr().cast(), flags, data.as_ptr().cast())
        .map_err(|e| ("mount an empty tmpfs", e))
}

fn bind_with_mount(source: &CStr, path: &CStr, kind: u8) -> Result<(), (&'static str, Errno)> {
    let (read_only, recursive) = flags_of(kind);
    let p = path.as_ptr().cast();
    let rec = if recursive { libc::MS_REC } else { 0 };
    sys::mount(source.as_ptr().cast(), p, libc::MS_BIND | rec).map_err(|e| ("bind", e))?;
    let has = sys::mount_flags(p).map_err(|e| ("statfs", e))?;
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV;
    for (st_flag, ms_flag) in KEPT_FLAGS {
        if has & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    sys::mount(core::ptr::null(), p, flags).map_err(|e| ("remount", e))
}
