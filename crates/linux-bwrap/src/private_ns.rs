//! The private mount namespace the runner's child enters before it executes bwrap, for the
//! mounts bwrap cannot make (the observer's FUSE mount, [`crate::observe_fs`], and a
//! read-only mount on each protected symbolic link) and those it makes slowly (a path bound
//! onto itself below a write grant: [`SelfMounts`]).
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
//! A protected path or a pinned directory below a write grant is mounted onto itself the
//! same way, recursively (`AT_RECURSIVE`, as bwrap's binds are), read-only for a protected
//! path, and a mask over a hidden file there (the empty masked file, or the observer's file
//! for it: the child mounted the observer and handed the runner's serving thread its
//! descriptor just before; not recursively): bwrap reads and parses the whole mount table for each bind it makes (a cost that
//! grows with every mount already made), the child makes three system calls and reads
//! nothing. bwrap's recursive bind of the grant then carries these mounts in, with every
//! flag it would add already set. On a kernel without the new mount API (before 5.12) such
//! a path is bound with `mount(2)` and remounted with the flags `statfs` reports for it
//! (in a user namespace, the flags a mount inherited are locked and must be kept).
//!
//! Where there are user namespaces, the supervisor makes most of these mounts instead, inside
//! the sandbox once bwrap is done ([`SelfMounts::mount_inside`], the payload's inner mounts):
//! the same three calls, in a mount namespace of its own, with the two capabilities bwrap
//! kept for it and dropped right after.
//!
//! Everything [`PrivateNamespace::enter`] and [`SelfMounts::mount`] use is prepared before
//! the fork (C strings, map lines), because between fork and exec only async-signal-safe
//! calls are allowed: no allocation, no lock.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use paddock_policy::{AbsPathBuf, SelfMount};

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
        make_root_private()
    }

    /// [`enter`](Self::enter) through `sys` (a system call that returns -errno on failure and
    /// writes no errno: a child running beside its parent in shared memory must not write
    /// the parent's, see `crate::vfork::raw`). `Err(errno)` on failure.
    ///
    /// # Safety
    /// `sys` must make system call `nr` with `args` as the kernel takes them.
    pub(crate) unsafe fn enter_with(
        &self,
        sys: unsafe fn(libc::c_long, [usize; 6]) -> isize,
    ) -> Result<(), i32> {
        // Every call gets integers, or NUL-terminated strings and buffers of this namespace's,
        // valid for the lengths passed.
        let call = |nr: libc::c_long, args: [usize; 6]| -> Result<usize, i32> {
            // SAFETY: `sys` makes the call (the caller's promise) with the arguments above.
            let r = unsafe { sys(nr, args) };
            usize::try_from(r).map_err(|_| i32::try_from(-r).unwrap_or(libc::EINVAL))
        };
        let write_file = |path: &CString, bytes: &[u8]| -> Result<(), i32> {
            let flags = (libc::O_WRONLY | libc::O_CLOEXEC) as usize;
            let at = libc::AT_FDCWD as usize;
            let fd = call(libc::SYS_openat, [at, path.as_ptr() as usize, flags, 0, 0, 0])?;
            let written =
                call(libc::SYS_write, [fd, bytes.as_ptr() as usize, bytes.len(), 0, 0, 0]);
            let _ = call(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
            if written? == bytes.len() { Ok(()) } else { Err(libc::EIO) }
        };
        if self.root {
            call(libc::SYS_unshare, [libc::CLONE_NEWNS as usize, 0, 0, 0, 0, 0])?;
        } else {
            let flags = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as usize;
            call(libc::SYS_unshare, [flags, 0, 0, 0, 0, 0])?;
            write_file(&self.setgroups, b"deny")?;
            write_file(&self.uid_map, &self.uid_line)?;
            write_file(&self.gid_map, &self.gid_line)?;
        }
        let private = (libc::MS_REC | libc::MS_PRIVATE) as usize;
        call(libc::SYS_mount, [0, c"/".as_ptr() as usize, 0, private, 0, 0]).map(drop)
    }
}

/// A new network namespace for the process that calls it, with its loopback device up (the
/// kernel gives it 127.0.0.1 and ::1 as it comes up), as bwrap's `--unshare-net` makes one:
/// made by the child that executes a waiting bwrap ([`crate::runtime::prespawn`]) before it
/// does, so that bwrap, given `--share-net`, keeps it and creates none while the sandbox is
/// set up. Needs `CAP_SYS_ADMIN` (root, or the user namespace [`PrivateNamespace`] makes).
///
/// # Safety
/// As [`PrivateNamespace::enter_with`]: `sys` makes system call `nr` with `args`.
pub(crate) unsafe fn enter_new_network_with(
    sys: unsafe fn(libc::c_long, [usize; 6]) -> isize,
) -> Result<(), i32> {
    let call = |nr: libc::c_long, args: [usize; 6]| -> Result<usize, i32> {
        // SAFETY: the caller's promise; every pointer passed below is to this frame.
        let r = unsafe { sys(nr, args) };
        usize::try_from(r).map_err(|_| i32::try_from(-r).unwrap_or(libc::EINVAL))
    };
    call(libc::SYS_unshare, [libc::CLONE_NEWNET as usize, 0, 0, 0, 0, 0])?;
    let kind = (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as usize;
    let sock = call(libc::SYS_socket, [libc::AF_INET as usize, kind, 0, 0, 0, 0])?;
    // SAFETY: an all-zero ifreq is a valid one (an empty name, no flags).
    let mut up: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in up.ifr_name.iter_mut().zip(b"lo") {
        *slot = *byte as libc::c_char;
    }
    up.ifr_ifru.ifru_flags = libc::IFF_UP as libc::c_short;
    let request = libc::SIOCSIFFLAGS as usize;
    let done = call(libc::SYS_ioctl, [sock, request, std::ptr::from_ref(&up) as usize, 0, 0, 0]);
    let _ = call(libc::SYS_close, [sock, 0, 0, 0, 0, 0]);
    done.map(drop)
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

/// How one path is mounted onto itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A protected symbolic link: read-only, not recursive (a link has no submounts).
    Link,
    /// A protected path: read-only, with everything mounted below it.
    ReadOnly,
    /// A pinned directory: as it is, with everything mounted below it.
    Writable,
    /// A hidden file: the masked file mounted over it, read-only.
    Mask,
    /// A hidden directory: an empty read-only tmpfs mounted over it (mode 0755, as bwrap's
    /// `--tmpfs` and `--remount-ro` leave one).
    EmptyDir,
    /// The sandbox's devices in bwrap's bare tmpfs (`crate::devices`).
    Devices,
    /// A write grant: the runner's clone attached onto it (`crate::grant_clones`).
    GrantClone,
}

/// The paths to mount onto themselves in the private namespace, in order: the protected
/// links, then the plan's self mounts ([`paddock_policy::SpawnPlan::self_mounts`]).
#[derive(Clone, Debug, Default)]
pub struct SelfMounts {
    /// Each path, how, and for a mask the file mounted over it.
    mounts: Vec<(CString, Kind, Option<CString>)>,
    /// The directories that hold the sources of two masks or more, listed once before the
    /// masks are mounted ([`SelfMounts::mount`]).
    listed: Vec<CString>,
    /// Which of `mounts` the runner may have made in a grant's clone
    /// (`InnerMount::in_grant_clone`).
    in_grant_clone: Vec<bool>,
}

impl SelfMounts {
    /// Prepares the mounts of `links` (protected links) and `binds` (absolute paths).
    pub fn new(links: &[AbsPathBuf], binds: &[SelfMount]) -> Result<SelfMounts, String> {
        let c = |p: &AbsPathBuf| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| format!("the protected path {p} holds a NUL byte"))
        };
        let mut mounts = Vec::with_capacity(links.len() + binds.len());
        for link in links {
            mounts.push((c(link)?, Kind::Link, None));
        }
        for bind in binds {
            let (kind, source) = match (&bind.source, bind.read_only) {
                (Some(source), _) => (Kind::Mask, Some(c(source)?)),
                (None, true) => (Kind::ReadOnly, None),
                (None, false) => (Kind::Writable, None),
            };
            mounts.push((c(&bind.path)?, kind, source));
        }
        let mut sources_in: std::collections::BTreeMap<&std::path::Path, usize> =
            std::collections::BTreeMap::new();
        for dir in binds.iter().filter_map(|b| b.source.as_ref()?.as_path().parent()) {
            *sources_in.entry(dir).or_default() += 1;
        }
        let listed = sources_in
            .into_iter()
            .filter(|(_, sources)| *sources > 1)
            .map(|(dir, _)| CString::new(dir.as_os_str().as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| "a masked file's directory holds a NUL byte".to_owned())?;
        Ok(SelfMounts { mounts, listed, in_grant_clone: Vec::new() })
    }

    /// Whether there is nothing to mount.
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// The supervisor's inner mounts
    /// ([`crate::payload::SupervisorPayload::inner_mounts`]), prepared.
    pub fn inner(mounts: &[crate::payload::InnerMount]) -> Result<SelfMounts, String> {
        let mut out = Vec::with_capacity(mounts.len());
        for m in mounts {
            let path = CString::new(m.path.0.as_bytes())
                .map_err(|_| format!("the inner mount {:?} holds a NUL byte", m.path.0))?;
            let (kind, source) = match (m.mask, m.empty_dir, m.read_only) {
                _ if m.devices => (Kind::Devices, None),
                _ if m.grant_clone => (Kind::GrantClone, None),
                (true, _, _) => (Kind::Mask, Some(inner_mask_path())),
                (false, true, _) => (Kind::EmptyDir, None),
                (false, false, true) => (Kind::ReadOnly, None),
                (false, false, false) => (Kind::Writable, None),
            };
            out.push((path, kind, source));
        }
        let in_grant_clone = mounts.iter().map(|m| m.in_grant_clone).collect();
        Ok(SelfMounts { mounts: out, listed: Vec::new(), in_grant_clone })
    }

    /// In the supervisor, inside the sandbox, before anything else: a mount namespace of its
    /// own (bwrap's `--disable-userns` leaves it in a user namespace that does not own
    /// bwrap's; in its own, the mounts it copied are locked), private, then each mount as
    /// [`SelfMounts::mount`] makes it, a write grant from the next of `clones` (when it came
    /// with every mount below it made, `true`, those below it the runner makes are skipped:
    /// `crate::grant_clones`). The first failure is returned naming its path; the
    /// caller then runs nothing.
    pub fn mount_inside(&self, clones: Vec<(bool, OwnedFd)>) -> Result<(), String> {
        // SAFETY: unshare has no memory arguments; the supervisor is single-threaded here.
        check(unsafe { libc::unshare(libc::CLONE_NEWNS) })
            .map_err(|e| format!("cannot make a mount namespace for the inner mounts: {e}"))?;
        make_root_private()
            .map_err(|e| format!("cannot make the inner mount namespace private: {e}"))?;
        let masked = inner_mask_path();
        let masks = self.mounts.iter().any(|(_, kind, _)| *kind == Kind::Mask);
        if masks {
            create_empty(&masked).map_err(|e| {
                format!("cannot make the masked file {}: {e}", masked.to_string_lossy())
            })?;
        }
        let mut clones = clones.into_iter();
        let mut made_below: Vec<&CString> = Vec::new();
        for (i, (path, kind, source)) in self.mounts.iter().enumerate() {
            let made = self.in_grant_clone.get(i) == Some(&true)
                && made_below.iter().any(|g| crate::grant_clones::is_below(path, g));
            let mounted = match kind {
                _ if made => Ok(()),
                Kind::GrantClone => match clones.next() {
                    Some((below, tree)) => {
                        if below {
                            made_below.push(path);
                        }
                        crate::grant_clones::attach(&tree, path)
                    }
                    None => Err(io::Error::other("the runner sent no clone for it")),
                },
                _ => mount_one(path, *kind, source.as_ref()),
            };
            mounted.map_err(|e| {
                let source = source.as_ref().unwrap_or(path);
                format!(
                    "cannot mount {} onto {}: {e}",
                    source.to_string_lossy(),
                    path.to_string_lossy()
                )
            })?;
        }
        if masks {
            // SAFETY: a NUL-terminated path; the result is checked.
            check(unsafe { libc::unlink(masked.as_ptr()) }).map_err(|e| {
                format!("cannot remove the masked file {}: {e}", masked.to_string_lossy())
            })?;
        }
        Ok(())
    }

    /// In the forked child, inside the private namespace: mounts each path onto itself,
    /// `nosuid` and `nodev`, read-only but for pinned directories. A link that is no longer
    /// a link (the host changed it since the plan) is mounted the same way: read-only is
    /// never weaker. A path that is gone fails the spawn (fail closed): the task would find
    /// the protected name free. A kernel without the new mount API (before Linux 5.12)
    /// leaves the links as they are, as before (the runner still checks them after the
    /// run), and binds the other paths with `mount(2)`.
    ///
    /// The directories holding the sources of several masks are listed first: the
    /// observer's root answers a listing with its files' attributes, which the kernel keeps,
    /// so each mask's source is then found without a round trip to the serving thread.
    ///
    /// Async-signal-safe: system calls on data prepared before the fork, no allocation.
    pub fn mount(&self) -> io::Result<()> {
        for dir in &self.listed {
            list(dir);
        }
        for (path, kind, source) in &self.mounts {
            mount_one(path, *kind, source.as_ref())?;
        }
        Ok(())
    }
}

/// Reads the directory `dir` to its end and forgets what it read (only the kernel's cache
/// keeps it); anything failing is left alone. Async-signal-safe: the buffer is on the stack.
fn list(dir: &CString) {
    // SAFETY: a NUL-terminated path; the result is checked before use and closed below.
    let fd =
        unsafe { libc::open(dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: getdents64 into a buffer of ours, of its length, on our descriptor.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
}

/// Makes `/` and everything below it private in this mount namespace: nothing mounted here
/// reaches another namespace, nor comes in from one.
fn make_root_private() -> io::Result<()> {
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

/// One mount of [`SelfMounts`]: `source` (the path itself when `None`) onto `path`, with the
/// new mount API, else (before Linux 5.12) with `mount(2)`; a link is then left as it is.
fn mount_one(path: &CString, kind: Kind, source: Option<&CString>) -> io::Result<()> {
    let source = source.unwrap_or(path);
    if kind == Kind::Devices {
        return crate::devices::make_in(path).map_err(io::Error::other);
    }
    if kind == Kind::EmptyDir {
        return match mount_empty_dir(path) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => empty_dir_with_mount(path),
            other => other,
        };
    }
    match mount_tree(source, path, kind) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => match kind {
            Kind::Link => Ok(()),
            Kind::ReadOnly
            | Kind::Writable
            | Kind::Mask
            | Kind::EmptyDir
            | Kind::Devices
            | Kind::GrantClone => bind_with_mount(source, path, kind),
        },
        other => other,
    }
}

/// An empty read-only tmpfs (mode 0755), made detached (`fsopen`, `fsconfig`, `fsmount`)
/// and attached onto `path`'s `O_PATH | O_NOFOLLOW` descriptor.
fn mount_empty_dir(path: &CString) -> io::Result<()> {
    let at = open_path(path)?;
    let result = tmpfs_detached().and_then(|tree| {
        let moved = attach(tree, at);
        // SAFETY: closing the tree's descriptor: an attached mount stays.
        unsafe { libc::close(tree) };
        moved
    });
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(at) };
    result
}

/// `move_mount` of the detached tree `tree` onto the file or directory `at` (both
/// descriptors).
pub(crate) fn attach(tree: libc::c_int, at: libc::c_int) -> io::Result<()> {
    // SAFETY: both paths are empty NUL-terminated strings relative to the descriptors the
    // caller holds.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            at,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
}

/// A detached empty tmpfs, mode 0755, mounted read-only, `nosuid` and `nodev`.
fn tmpfs_detached() -> io::Result<libc::c_int> {
    // <linux/mount.h>: FSOPEN_CLOEXEC, FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE,
    // FSMOUNT_CLOEXEC.
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    // SAFETY: a NUL-terminated filesystem name; the result is checked and closed below.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) };
    check_long(fs)?;
    let fs = libc::c_int::try_from(fs).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: NUL-terminated key and value for the filesystem context we hold; the create
    // command takes none.
    let configured = check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs,
            FSCONFIG_SET_STRING,
            c"mode".as_ptr(),
            c"0755".as_ptr(),
            0,
        )
    })
    .and_then(|()| {
        // SAFETY: as above.
        check_long(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<u8>(),
                std::ptr::null::<u8>(),
                0,
            )
        })
    });
    let attr = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    let tree = configured.and_then(|()| {
        // SAFETY: the created filesystem context we hold; flags and attributes by value.
        let tree = unsafe { libc::syscall(libc::SYS_fsmount, fs, FSMOUNT_CLOEXEC, attr) };
        check_long(tree)?;
        libc::c_int::try_from(tree).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))
    });
    // SAFETY: closing the filesystem context: the mount keeps what it needs.
    unsafe { libc::close(fs) };
    tree
}

/// [`mount_empty_dir`] with `mount(2)`, before Linux 5.2.
fn empty_dir_with_mount(path: &CString) -> io::Result<()> {
    // SAFETY: NUL-terminated type, target and options.
    check(unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            path.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0755".as_ptr().cast(),
        )
    })
}

/// Makes the empty mode-0000 file `path`, never through a link nor over an existing one.
fn create_empty(path: &CString) -> io::Result<()> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; the result is checked and closed below.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0 as libc::c_uint) };
    check(fd)?;
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    Ok(())
}

/// [`crate::INNER_MASK_PATH`] as a C string.
fn inner_mask_path() -> CString {
    // A constant without a NUL byte: never the empty default.
    CString::new(crate::INNER_MASK_PATH).unwrap_or_default()
}

/// `<linux/mount.h>`: apply to the whole tree (`open_tree`, `mount_setattr`).
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `O_PATH | O_NOFOLLOW` of `path`: the file itself, a link not followed.
fn open_path(path: &CString) -> io::Result<libc::c_int> {
    // SAFETY: a NUL-terminated path; the caller closes the result.
    let fd =
        unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    check(fd).map(|()| fd)
}

/// One mount of `source` onto `path` (the same path but for a mask): see
/// [`SelfMounts::mount`].
fn mount_tree(source: &CString, path: &CString, kind: Kind) -> io::Result<()> {
    let at = open_path(path)?;
    let from = if kind == Kind::Mask { open_path(source) } else { Ok(at) };
    let result = from.and_then(|from| {
        let mounted = mount_tree_on(from, at, kind);
        if from != at {
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(from) };
        }
        mounted
    });
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(at) };
    result
}

/// Clones the tree at `from` and attaches it onto `at`.
fn mount_tree_on(from: libc::c_int, at: libc::c_int, kind: Kind) -> io::Result<()> {
    let recursive = if matches!(kind, Kind::Link | Kind::Mask) { 0 } else { AT_RECURSIVE };
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_EMPTY_PATH as libc::c_uint
        | recursive;
    // SAFETY: an empty NUL-terminated path relative to a descriptor we hold; the result is
    // checked and closed below.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, from, c"".as_ptr(), flags) };
    let tree =
        libc::c_int::try_from(tree).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    check(tree)?;
    let read_only = if kind == Kind::Writable { 0 } else { libc::MOUNT_ATTR_RDONLY };
    let attr = MountAttr {
        attr_set: read_only | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
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
            libc::AT_EMPTY_PATH as libc::c_uint | recursive,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    let result = check_long(rc).and_then(|()| attach(tree, at));
    // SAFETY: closing the tree's descriptor: an attached mount stays, a detached one goes.
    unsafe { libc::close(tree) };
    result
}

/// The kernel's `ST_RELATIME` (`linux/statfs.h`), which not every C library's bindings name.
const ST_RELATIME: libc::c_ulong = 0x1000;

/// `statvfs`'s `f_flag` bits (`ST_*`) and the `MS_*` flag each stands for: the flags a
/// remount must keep (in a user namespace those a mount inherited are locked).
const KEPT_FLAGS: [(libc::c_ulong, libc::c_ulong); 8] = [
    (libc::ST_RDONLY, libc::MS_RDONLY),
    (libc::ST_NOSUID, libc::MS_NOSUID),
    (libc::ST_NODEV, libc::MS_NODEV),
    (libc::ST_NOEXEC, libc::MS_NOEXEC),
    (libc::ST_SYNCHRONOUS, libc::MS_SYNCHRONOUS),
    (libc::ST_NOATIME, libc::MS_NOATIME),
    (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
    (ST_RELATIME, libc::MS_RELATIME),
];

/// Without the new mount API: binds `source` onto `path` with `mount(2)` (recursively but
/// for a mask, as bwrap does) and remounts it `nosuid`, `nodev` and, but for a pinned
/// directory, read-only, keeping the flags it has. `mount(2)` follows a link at `path`, as
/// bwrap's binds do; the supervisor's check of each path bound onto itself (`mount_ids`)
/// refuses one swapped meanwhile.
fn bind_with_mount(source: &CString, path: &CString, kind: Kind) -> io::Result<()> {
    let recursive = if kind == Kind::Mask { 0 } else { libc::MS_REC };
    // SAFETY: NUL-terminated source and target; null type and data are allowed for a bind.
    check(unsafe {
        libc::mount(
            source.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | recursive,
            std::ptr::null(),
        )
    })?;
    // SAFETY: an all-zero `statvfs` is a valid value for the call to overwrite.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a `statvfs` to fill. glibc's statvfs is the statfs
    // system call and a conversion (it reads /proc/mounts only on kernels before 2.6.36).
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    let has = st.f_flag;
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | libc::MS_NODEV;
    for (st_flag, ms_flag) in KEPT_FLAGS {
        if has & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    if kind != Kind::Writable {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY: as above; a remount takes no source.
    check(unsafe {
        libc::mount(std::ptr::null(), path.as_ptr(), std::ptr::null(), flags, std::ptr::null())
    })
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
mod tests;
