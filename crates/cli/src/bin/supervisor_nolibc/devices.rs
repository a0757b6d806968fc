//! The sandbox's devices (`v`), as `paddock_linux_bwrap::devices::make_in` makes them for
//! `paddock-supervisor`: in bwrap's bare tmpfs at the inner mount's path, one file per device
//! with the runner's clone of the host's node attached onto it (each descriptor checked to
//! be that character device, then closed), the links, the `shm` and `pts` directories, and a
//! fresh `devpts` instance on `pts` (`ptmxmode=0666,mode=620`, `nosuid`, `noexec`), and the
//! terminal the runner handed at `CONSOLE_FD` (if it did) at `console`: what bwrap's `--dev`
//! makes.

use core::ffi::CStr;

use crate::constants::{CONSOLE_FD, DEVICES_FD};
use crate::sys::{self, Errno};

/// The device nodes, in the order the runner hands their clones: name, major, minor.
pub const DEVICES: [(&CStr, u32, u32); 6] = [
    (c"null", 1, 3),
    (c"zero", 1, 5),
    (c"full", 1, 7),
    (c"random", 1, 8),
    (c"urandom", 1, 9),
    (c"tty", 5, 0),
];

/// The links bwrap's `--dev` makes: name, target.
pub const LINKS: [(&CStr, &CStr); 6] = [
    (c"stdin", c"/proc/self/fd/0"),
    (c"stdout", c"/proc/self/fd/1"),
    (c"stderr", c"/proc/self/fd/2"),
    (c"fd", c"/proc/self/fd"),
    (c"core", c"/proc/kcore"),
    (c"ptmx", c"pts/ptmx"),
];

/// Makes the devices in the directory `dir`; the first failure names its step.
pub fn make_in(dir: &CStr) -> Result<(), (&'static str, Errno)> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let at =
        sys::open_at(libc::AT_FDCWD, dir.as_ptr().cast(), flags, 0).map_err(|e| ("open", e))?;
    let made = make_at(at);
    sys::close(at);
    made
}

fn make_at(at: libc::c_int) -> Result<(), (&'static str, Errno)> {
    for (fd, (name, major, minor)) in (DEVICES_FD..).zip(DEVICES) {
        let attached = attach_device(at, fd, name, libc::makedev(major, minor));
        sys::close(fd);
        attached?;
    }
    for (name, target) in LINKS {
        sys::symlink_at(target.as_ptr().cast(), at, name.as_ptr().cast())
            .map_err(|e| ("make a link", e))?;
    }
    for name in [c"shm", c"pts"] {
        sys::mkdir_at(at, name.as_ptr().cast(), 0o755).map_err(|e| ("make a directory", e))?;
    }
    let options = [
        (c"ptmxmode".as_ptr().cast(), c"0666".as_ptr().cast()),
        (c"mode".as_ptr().cast(), c"620".as_ptr().cast()),
    ];
    let attr = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC;
    let tree = sys::fs_detached(c"devpts".as_ptr().cast(), &options, attr)
        .map_err(|e| ("make a devpts instance", e))?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let pts = sys::open_at(at, c"pts".as_ptr().cast(), flags, 0);
    let moved = pts.and_then(|pts| {
        let moved = sys::move_mount(tree, pts);
        sys::close(pts);
        moved
    });
    sys::close(tree);
    moved.map_err(|e| ("mount devpts", e))?;
    if sys::is_open(CONSOLE_FD) {
        let attached = attach_terminal(at, CONSOLE_FD);
        sys::close(CONSOLE_FD);
        attached?;
    }
    Ok(())
}

/// Attaches the terminal's clone at `fd`, checked to be a character device, onto a new
/// file `console` in `at`.
fn attach_terminal(at: libc::c_int, fd: libc::c_int) -> Result<(), (&'static str, Errno)> {
    let (kind, _) = sys::device_of(fd).map_err(|e| ("check the terminal's clone", e))?;
    if kind != libc::S_IFCHR {
        return Err(("check the terminal's clone", Errno(libc::ENODEV)));
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let file = sys::open_at(at, c"console".as_ptr().cast(), flags, 0o444)
        .map_err(|e| ("create the console", e))?;
    let moved = sys::move_mount(fd, file).map_err(|e| ("attach the terminal", e));
    sys::close(file);
    moved
}

/// Attaches the clone at `fd`, checked to be the character device `rdev`, onto a new file
/// `name` in `at`.
fn attach_device(
    at: libc::c_int,
    fd: libc::c_int,
    name: &CStr,
    rdev: libc::dev_t,
) -> Result<(), (&'static str, Errno)> {
    let (kind, has) = sys::device_of(fd).map_err(|e| ("check a device's clone", e))?;
    if kind != libc::S_IFCHR || has != rdev {
        return Err(("check a device's clone", Errno(libc::ENODEV)));
    }
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let file =
        sys::open_at(at, name.as_ptr().cast(), flags, 0o444).map_err(|e| ("create a device", e))?;
    let moved = sys::move_mount(fd, file).map_err(|e| ("attach a device", e));
    sys::close(file);
    moved
}
