//! The sandbox's `/dev` made by its supervisor from clones of the host's device nodes,
//! where the runner may clone mounts ([`can_clone`]): bwrap then mounts a bare tmpfs at
//! `/dev` (`--tmpfs`) instead of `--dev`, whose six device binds each read and parse the
//! whole mount table.
//!
//! The runner clones `/dev/null`, `zero`, `full`, `random`, `urandom` and `tty` with
//! `open_tree(OPEN_TREE_CLONE)` (a detached bind of each, made `nosuid` as bwrap's are) and
//! hands the clones to the child at [`DEVICES_FD`] and after; bwrap leaves them open for
//! the supervisor, which ([`make_in`], and `paddock-supervisor-nolibc`'s own) creates the
//! six files in bwrap's tmpfs, checks that each descriptor is the character device it must
//! be, attaches each clone onto its file, closes it, and makes what else bwrap's `--dev`
//! makes: the links `stdin`, `stdout`, `stderr`, `fd`, `core` and `ptmx`, the directories
//! `shm` and `pts`, and a fresh `devpts` instance (`ptmxmode=0666,mode=620`, `nosuid`,
//! `noexec`) on `pts`. Where the task's stdout is the runner's own and a terminal, as
//! `--dev` does, the terminal is `/dev/console`: the runner clones it too, at
//! [`CONSOLE_FD`], and the supervisor attaches it if that descriptor is there.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// The device nodes, in the order the runner hands their clones: name, major, minor.
pub const DEVICES: [(&CStr, u32, u32); 6] = [
    (c"null", 1, 3),
    (c"zero", 1, 5),
    (c"full", 1, 7),
    (c"random", 1, 8),
    (c"urandom", 1, 9),
    (c"tty", 5, 0),
];

/// Where each of [`DEVICES`] is on the host.
pub const HOST_PATHS: [&CStr; 6] =
    [c"/dev/null", c"/dev/zero", c"/dev/full", c"/dev/random", c"/dev/urandom", c"/dev/tty"];

/// The descriptor of the first clone in the child, and in the supervisor through bwrap; the
/// others follow it in [`DEVICES`]'s order.
pub use crate::DEVICES_FD;

/// Where the child has the clone of the terminal its stdout is, if it is one: the
/// sandbox's `/dev/console`, as bwrap's `--dev` makes it.
pub const CONSOLE_FD: i32 = DEVICES_FD + 6;

/// The links bwrap's `--dev` makes: name, target.
pub const LINKS: [(&CStr, &CStr); 6] = [
    (c"stdin", c"/proc/self/fd/0"),
    (c"stdout", c"/proc/self/fd/1"),
    (c"stderr", c"/proc/self/fd/2"),
    (c"fd", c"/proc/self/fd"),
    (c"core", c"/proc/kcore"),
    (c"ptmx", c"pts/ptmx"),
];

/// `<linux/mount.h>`.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;

/// Whether this process may clone the mounts of its namespace: `CAP_SYS_ADMIN` in its
/// effective set and a kernel with `open_tree` (Linux 5.2).
pub fn can_clone() -> bool {
    let admin = caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SYS_ADMIN)
        .unwrap_or(false);
    // SAFETY: a NUL-terminated path; without OPEN_TREE_CLONE this only opens `/` (O_PATH).
    let fd = unsafe {
        libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c"/".as_ptr(), OPEN_TREE_CLOEXEC)
    };
    let Ok(fd) = libc::c_int::try_from(fd) else { return false };
    if fd < 0 {
        return false;
    }
    // SAFETY: the descriptor opened above, ours alone.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    admin
}

/// Whether a bwrap started before its plan should get the clones: where this process may
/// make them ([`can_clone`]) and a plan may want them (`HostFacts::clone_mounts` with user
/// namespaces, which `user.max_user_namespaces = 0` switches off). Handed to a plan that
/// does not want them, they would be closed unattached, each closing waiting for the
/// kernel's teardown of its detached mount (50 us to 2 ms).
pub fn for_a_prespawn() -> bool {
    let max = std::fs::read("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    max.trim_ascii() != b"0" && can_clone()
}

/// The clones of the host's device nodes, in [`DEVICES`]' order: each a detached bind of
/// `/dev/NAME`, `nosuid` (as bwrap binds a device).
pub fn clone_host_devices() -> io::Result<Vec<OwnedFd>> {
    HOST_PATHS.iter().map(|path| clone_nosuid(path)).collect()
}

/// The terminal this process's stdout is, as a path to clone (`/dev/pts/3`), when it is
/// one: what bwrap's `--dev` binds at `/dev/console`.
pub fn stdout_terminal() -> Option<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: isatty on a descriptor number; no memory is passed.
    if unsafe { libc::isatty(1) } != 1 {
        return None;
    }
    let path = std::fs::read_link("/proc/self/fd/1").ok()?;
    path.is_absolute().then(|| std::ffi::CString::new(path.as_os_str().as_bytes()).ok())?
}

/// The clone of the terminal at `path` ([`stdout_terminal`]), `nosuid`.
pub fn clone_terminal(path: &CStr) -> io::Result<OwnedFd> {
    clone_nosuid(path)
}

/// A detached bind of the file at `path` (`open_tree(OPEN_TREE_CLONE)`), made `nosuid`.
fn clone_nosuid(path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    };
    let fd = owned(fd).map_err(|e| named(e, "clone", path))?;
    set_nosuid(&fd).map_err(|e| named(e, "make nosuid the clone of", path))?;
    Ok(fd)
}

/// In a child between its clone and its `execve`: clones [`HOST_PATHS`] as
/// [`clone_host_devices`] does and places them at [`DEVICES_FD`] and after, with `sys`
/// (system calls only: async-signal-safe, no allocation). The first failure's errno.
///
/// # Safety
/// `sys` makes the system call it is given, as `crate::vfork::raw::syscall` does.
pub unsafe fn place_clones_with(
    sys: unsafe fn(libc::c_long, [usize; 6]) -> isize,
) -> Result<(), i32> {
    // SAFETY: the caller's.
    unsafe { place_with(sys, DEVICES_FD, &HOST_PATHS) }
}

/// [`place_clones_with`] for the terminal at `path` ([`stdout_terminal`]), at
/// [`CONSOLE_FD`].
///
/// # Safety
/// As [`place_clones_with`].
pub unsafe fn place_terminal_with(
    sys: unsafe fn(libc::c_long, [usize; 6]) -> isize,
    path: &CStr,
) -> Result<(), i32> {
    // SAFETY: the caller's.
    unsafe { place_with(sys, CONSOLE_FD, &[path]) }
}

/// Clones each of `paths` at `first` and after.
///
/// # Safety
/// As [`place_clones_with`].
unsafe fn place_with(
    sys: unsafe fn(libc::c_long, [usize; 6]) -> isize,
    first: i32,
    paths: &[&CStr],
) -> Result<(), i32> {
    let attr: [u64; 4] = [libc::MOUNT_ATTR_NOSUID, 0, 0, 0];
    let errno = |r: isize| i32::try_from(-r).unwrap_or(libc::EINVAL);
    for (target, path) in (first..).zip(paths) {
        let flags = (OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) as usize;
        // SAFETY: a NUL-terminated path; the result is checked.
        let fd = unsafe {
            sys(
                libc::SYS_open_tree,
                [libc::AT_FDCWD as usize, path.as_ptr() as usize, flags, 0, 0, 0],
            )
        };
        if fd < 0 {
            return Err(errno(fd));
        }
        let empty = c"".as_ptr() as usize;
        let at_empty = libc::AT_EMPTY_PATH as usize;
        let size = std::mem::size_of_val(&attr);
        // SAFETY: our descriptor, an empty path, the attributes of their size; dup3 onto a
        // target above every descriptor the child placed (clearing close-on-exec), and the
        // clone's first number closed unless it is the target already.
        unsafe {
            let set = [fd as usize, empty, at_empty, attr.as_ptr() as usize, size, 0];
            let r = sys(libc::SYS_mount_setattr, set);
            if r < 0 {
                return Err(errno(r));
            }
            if fd != target as isize {
                let r = sys(libc::SYS_dup3, [fd as usize, target as usize, 0, 0, 0, 0]);
                sys(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
                if r < 0 {
                    return Err(errno(r));
                }
            } else {
                let r = sys(libc::SYS_fcntl, [fd as usize, libc::F_SETFD as usize, 0, 0, 0, 0]);
                if r < 0 {
                    return Err(errno(r));
                }
            }
        }
    }
    Ok(())
}

fn named(e: io::Error, what: &str, path: &CStr) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.to_string_lossy()))
}

/// A descriptor a system call returned, or its error.
pub(crate) fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn check(ret: libc::c_long) -> io::Result<()> {
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn set_nosuid(tree: &OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // `struct mount_attr`: attr_set, attr_clr, propagation, userns_fd.
    let attr: [u64; 4] = [libc::MOUNT_ATTR_NOSUID, 0, 0, 0];
    // SAFETY: an empty path relative to our descriptor, and the attributes of their size.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    })
}

/// In the supervisor, in its own mount namespace: makes the devices, links, directories and
/// `devpts` of bwrap's `--dev` in the tmpfs at `dir`, from the clones at [`DEVICES_FD`] and
/// after, which it closes. Fails (naming what) on anything unexpected: a name already
/// there, a descriptor that is not the device it should be.
pub fn make_in(dir: &CStr) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; the result is checked.
    let at = owned(libc::c_long::from(unsafe { libc::open(dir.as_ptr(), flags) }))
        .map_err(|e| format!("cannot open {}: {e}", dir.to_string_lossy()))?;
    let at = at.as_raw_fd();
    let fail = |what: &str, name: &CStr, e: io::Error| {
        format!("cannot {what} {}/{}: {e}", dir.to_string_lossy(), name.to_string_lossy())
    };
    for (i, (name, major, minor)) in (0..).zip(DEVICES) {
        // SAFETY: the descriptor the runner handed at this number, ours from now on (closed
        // when dropped, also on an error).
        let clone = unsafe { OwnedFd::from_raw_fd(DEVICES_FD + i) };
        is_device(&clone, major, minor).map_err(|e| fail("check the clone for", name, e))?;
        attach_at(&clone, at, name).map_err(|e| fail("attach the device onto", name, e))?;
    }
    for (name, target) in LINKS {
        // SAFETY: NUL-terminated target and name, relative to our directory.
        check(libc::c_long::from(unsafe { libc::symlinkat(target.as_ptr(), at, name.as_ptr()) }))
            .map_err(|e| fail("link", name, e))?;
    }
    for name in [c"shm", c"pts"] {
        // SAFETY: a NUL-terminated name relative to our directory.
        check(libc::c_long::from(unsafe { libc::mkdirat(at, name.as_ptr(), 0o755) }))
            .map_err(|e| fail("make", name, e))?;
    }
    mount_devpts(at).map_err(|e| fail("mount a devpts instance on", c"pts", e))?;
    console(at).map_err(|e| fail("attach the terminal onto", c"console", e))
}

/// The terminal the runner handed at [`CONSOLE_FD`], if it did, attached at `console`.
fn console(at: libc::c_int) -> io::Result<()> {
    // SAFETY: F_GETFD on a descriptor number only asks whether it is open.
    if unsafe { libc::fcntl(CONSOLE_FD, libc::F_GETFD) } < 0 {
        return Ok(());
    }
    // SAFETY: the descriptor the runner handed at this number, ours from now on.
    let clone = unsafe { OwnedFd::from_raw_fd(CONSOLE_FD) };
    let stat = nix::sys::stat::fstat(&clone).map_err(io::Error::from)?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return Err(io::Error::other("not a character device"));
    }
    attach_at(&clone, at, c"console")
}

/// Attaches the detached mount `clone` onto a new file `name` (mode 0444, as bwrap makes a
/// device's) in the directory `at`, never over an existing name.
fn attach_at(clone: &OwnedFd, at: libc::c_int, name: &CStr) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name relative to the caller's directory; the result is
    // checked.
    let file = owned(libc::c_long::from(unsafe { libc::openat(at, name.as_ptr(), flags, 0o444) }))?;
    crate::private_ns::attach(clone.as_raw_fd(), file.as_raw_fd())
}

/// Whether `fd` is the character device `major:minor`.
fn is_device(fd: &OwnedFd, major: u32, minor: u32) -> io::Result<()> {
    let stat = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
    let is_char = stat.st_mode & libc::S_IFMT == libc::S_IFCHR;
    if is_char && stat.st_rdev == libc::makedev(major, minor) {
        Ok(())
    } else {
        Err(io::Error::other(format!("not the character device {major}:{minor}")))
    }
}

/// A fresh `devpts` instance, as bwrap mounts one (`ptmxmode=0666,mode=620`, `nosuid`,
/// `noexec`), attached at `pts` below `at`.
fn mount_devpts(at: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a NUL-terminated filesystem name; the result is checked.
    let fs = owned(unsafe { libc::syscall(libc::SYS_fsopen, c"devpts".as_ptr(), FSOPEN_CLOEXEC) })?;
    for (key, value) in [(c"ptmxmode", c"0666"), (c"mode", c"620")] {
        // SAFETY: NUL-terminated key and value for the context we hold.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: the create command takes no key or value.
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<u8>(),
            std::ptr::null::<u8>(),
            0,
        )
    })?;
    let attr = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC;
    // SAFETY: the created context we hold; flags and attributes by value.
    let tree =
        owned(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attr) })?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name relative to our directory; the result is checked.
    let pts = owned(libc::c_long::from(unsafe { libc::openat(at, c"pts".as_ptr(), flags) }))?;
    crate::private_ns::attach(tree.as_raw_fd(), pts.as_raw_fd())
}
