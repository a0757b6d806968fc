//! Which arguments of which syscalls are paths, dirfds, socket addresses and flags.
//!
//! This is the only syscall-specific knowledge in the crate. A call missing from the table
//! still parses and still counts as failed; it just has no paths (strings such as `write`
//! buffers or `getxattr` names are not file names, so guessing from quotes would be wrong).

use crate::args::{FdArg, StrArg};
use crate::event::{Return, Syscall};

/// A path argument: its role (named as in the man page), its index, and the index of the
/// dirfd it is relative to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathSpec {
    pub role: &'static str,
    pub path: usize,
    pub dirfd: Option<usize>,
}

/// What the table knows about one syscall.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallSpec {
    pub paths: &'static [PathSpec],
    /// The argument holding the socket address whose `sun_path` is a path.
    pub sockaddr: Option<usize>,
    /// The argument holding the call's flags or mode (`O_RDONLY|O_CLOEXEC`, `R_OK`).
    pub flags: Option<usize>,
}

const fn p(role: &'static str, path: usize) -> PathSpec {
    PathSpec { role, path, dirfd: None }
}

const fn at(role: &'static str, dirfd: usize, path: usize) -> PathSpec {
    PathSpec { role, path, dirfd: Some(dirfd) }
}

const PATHNAME: &[PathSpec] = &[p("pathname", 0)];
const PATH: &[PathSpec] = &[p("path", 0)];
const AT_PATHNAME: &[PathSpec] = &[at("pathname", 0, 1)];
const OLD_NEW: &[PathSpec] = &[p("oldpath", 0), p("newpath", 1)];
const AT_OLD_NEW: &[PathSpec] = &[at("oldpath", 0, 1), at("newpath", 2, 3)];
const TARGET: &[PathSpec] = &[p("target", 0)];
const SYMLINK: &[PathSpec] = &[p("target", 0), p("linkpath", 1)];
const SYMLINKAT: &[PathSpec] = &[p("target", 0), at("linkpath", 1, 2)];
const MOVE_MOUNT: &[PathSpec] = &[at("from_pathname", 0, 1), at("to_pathname", 2, 3)];
const MOUNT: &[PathSpec] = &[p("source", 0), p("target", 1)];
const SECOND: &[PathSpec] = &[p("pathname", 1)];
const FANOTIFY: &[PathSpec] = &[at("pathname", 3, 4)];
const QUOTACTL: &[PathSpec] = &[p("special", 1)];

const fn spec(paths: &'static [PathSpec], flags: Option<usize>) -> CallSpec {
    CallSpec { paths, sockaddr: None, flags }
}

const fn net(sockaddr: usize) -> CallSpec {
    CallSpec { paths: &[], sockaddr: Some(sockaddr), flags: None }
}

/// The table. Names are those strace prints on Linux (x86_64 and the generic ABI).
pub(crate) fn lookup(name: &str) -> Option<CallSpec> {
    Some(match name {
        "open" | "creat" => spec(PATHNAME, Some(1)),
        "access" => spec(PATHNAME, Some(1)),
        "stat" | "lstat" | "stat64" | "lstat64" | "chdir" | "chroot" | "rmdir" | "unlink"
        | "readlink" | "uselib" | "swapoff" | "acct" | "statfs" | "statfs64" | "utime"
        | "utimes" | "oldstat" | "oldlstat" => spec(PATHNAME, None),
        "mkdir" | "chmod" | "mknod" | "swapon" => spec(PATHNAME, Some(1)),
        "chown" | "lchown" | "chown32" | "lchown32" | "truncate" | "truncate64" => {
            spec(PATHNAME, None)
        }
        "umount" | "umount2" => spec(TARGET, Some(1)),
        "execve" => spec(PATHNAME, None),
        "getxattr" | "lgetxattr" | "setxattr" | "lsetxattr" | "listxattr" | "llistxattr"
        | "removexattr" | "lremovexattr" => spec(PATH, None),
        "openat" => spec(AT_PATHNAME, Some(2)),
        "openat2" => spec(AT_PATHNAME, Some(2)),
        "newfstatat" | "fstatat64" | "utimensat" => spec(AT_PATHNAME, Some(3)),
        "statx" | "unlinkat" | "open_tree" | "fspick" => spec(AT_PATHNAME, Some(2)),
        "faccessat" | "fchmodat" | "mkdirat" | "mknodat" => spec(AT_PATHNAME, Some(2)),
        "faccessat2" | "fchmodat2" => spec(AT_PATHNAME, Some(2)),
        "fchownat" => spec(AT_PATHNAME, Some(4)),
        "readlinkat" | "futimesat" | "name_to_handle_at" | "mount_setattr" => {
            spec(AT_PATHNAME, None)
        }
        "execveat" => spec(AT_PATHNAME, Some(4)),
        "getxattrat" | "setxattrat" | "listxattrat" | "removexattrat" => spec(AT_PATHNAME, Some(2)),
        "rename" | "link" | "pivot_root" => spec(OLD_NEW, None),
        "symlink" => spec(SYMLINK, None),
        "symlinkat" => spec(SYMLINKAT, None),
        "renameat" => spec(AT_OLD_NEW, None),
        "renameat2" | "linkat" => spec(AT_OLD_NEW, Some(4)),
        "move_mount" => spec(MOVE_MOUNT, Some(4)),
        "mount" => spec(MOUNT, Some(3)),
        "inotify_add_watch" => spec(SECOND, Some(2)),
        "fanotify_mark" => spec(FANOTIFY, Some(1)),
        "quotactl" => spec(QUOTACTL, Some(0)),
        "connect" | "bind" => net(1),
        "sendto" => net(4),
        "sendmsg" | "recvmsg" => net(1),
        _ => return None,
    })
}

/// The name as a `&'static str` when it is a syscall this crate knows, so that the denials of
/// a log share their names instead of allocating each.
pub(crate) fn static_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "open" => "open",
        "creat" => "creat",
        "access" => "access",
        "stat" => "stat",
        "lstat" => "lstat",
        "stat64" => "stat64",
        "lstat64" => "lstat64",
        "chdir" => "chdir",
        "chroot" => "chroot",
        "rmdir" => "rmdir",
        "unlink" => "unlink",
        "readlink" => "readlink",
        "uselib" => "uselib",
        "swapoff" => "swapoff",
        "acct" => "acct",
        "statfs" => "statfs",
        "statfs64" => "statfs64",
        "utime" => "utime",
        "utimes" => "utimes",
        "oldstat" => "oldstat",
        "oldlstat" => "oldlstat",
        "mkdir" => "mkdir",
        "chmod" => "chmod",
        "mknod" => "mknod",
        "swapon" => "swapon",
        "chown" => "chown",
        "lchown" => "lchown",
        "chown32" => "chown32",
        "lchown32" => "lchown32",
        "truncate" => "truncate",
        "truncate64" => "truncate64",
        "umount" => "umount",
        "umount2" => "umount2",
        "execve" => "execve",
        "getxattr" => "getxattr",
        "lgetxattr" => "lgetxattr",
        "setxattr" => "setxattr",
        "lsetxattr" => "lsetxattr",
        "listxattr" => "listxattr",
        "llistxattr" => "llistxattr",
        "removexattr" => "removexattr",
        "lremovexattr" => "lremovexattr",
        "openat" => "openat",
        "openat2" => "openat2",
        "newfstatat" => "newfstatat",
        "fstatat64" => "fstatat64",
        "utimensat" => "utimensat",
        "statx" => "statx",
        "unlinkat" => "unlinkat",
        "open_tree" => "open_tree",
        "fspick" => "fspick",
        "faccessat" => "faccessat",
        "fchmodat" => "fchmodat",
        "mkdirat" => "mkdirat",
        "mknodat" => "mknodat",
        "faccessat2" => "faccessat2",
        "fchmodat2" => "fchmodat2",
        "fchownat" => "fchownat",
        "readlinkat" => "readlinkat",
        "futimesat" => "futimesat",
        "name_to_handle_at" => "name_to_handle_at",
        "mount_setattr" => "mount_setattr",
        "execveat" => "execveat",
        "getxattrat" => "getxattrat",
        "setxattrat" => "setxattrat",
        "listxattrat" => "listxattrat",
        "removexattrat" => "removexattrat",
        "rename" => "rename",
        "link" => "link",
        "pivot_root" => "pivot_root",
        "symlink" => "symlink",
        "symlinkat" => "symlinkat",
        "renameat" => "renameat",
        "renameat2" => "renameat2",
        "linkat" => "linkat",
        "move_mount" => "move_mount",
        "mount" => "mount",
        "inotify_add_watch" => "inotify_add_watch",
        "fanotify_mark" => "fanotify_mark",
        "quotactl" => "quotactl",
        "connect" => "connect",
        "bind" => "bind",
        "sendto" => "sendto",
        "sendmsg" => "sendmsg",
        "recvmsg" => "recvmsg",
        "close" => "close",
        "read" => "read",
        "write" => "write",
        "ioctl" => "ioctl",
        "futex" => "futex",
        "wait4" => "wait4",
        "kill" => "kill",
        "socket" => "socket",
        "socketpair" => "socketpair",
        "listen" => "listen",
        "accept" => "accept",
        "accept4" => "accept4",
        "getpeername" => "getpeername",
        "getsockname" => "getsockname",
        "recvfrom" => "recvfrom",
        "fcntl" => "fcntl",
        "mmap" => "mmap",
        "mprotect" => "mprotect",
        "munmap" => "munmap",
        "brk" => "brk",
        "clone" => "clone",
        "clone3" => "clone3",
        "vfork" => "vfork",
        "fork" => "fork",
        "pause" => "pause",
        "nanosleep" => "nanosleep",
        "clock_nanosleep" => "clock_nanosleep",
        "rt_sigreturn" => "rt_sigreturn",
        "rt_sigaction" => "rt_sigaction",
        "prctl" => "prctl",
        "setns" => "setns",
        "unshare" => "unshare",
        "capset" => "capset",
        "ptrace" => "ptrace",
        "bpf" => "bpf",
        "perf_event_open" => "perf_event_open",
        "io_uring_setup" => "io_uring_setup",
        "keyctl" => "keyctl",
        "add_key" => "add_key",
        "request_key" => "request_key",
        "userfaultfd" => "userfaultfd",
        "seccomp" => "seccomp",
        "fchdir" => "fchdir",
        "fchmod" => "fchmod",
        "fchown" => "fchown",
        "ftruncate" => "ftruncate",
        "flock" => "flock",
        "lseek" => "lseek",
        "dup" => "dup",
        "dup2" => "dup2",
        "dup3" => "dup3",
        "pipe" => "pipe",
        "pipe2" => "pipe2",
        "poll" => "poll",
        "ppoll" => "ppoll",
        "select" => "select",
        "pselect6" => "pselect6",
        "epoll_wait" => "epoll_wait",
        "epoll_pwait" => "epoll_pwait",
        "getdents64" => "getdents64",
        "restart_syscall" => "restart_syscall",
        _ => return None,
    })
}

/// A change of working directory, as a classifier tracking each process's cwd needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CwdChange {
    /// A successful `chdir(path)` (relative paths resolve against the previous cwd).
    Path(StrArg),
    /// A successful `fchdir(fd)`; with `-y` the fd carries the directory's path.
    Fd(FdArg),
}

impl Syscall<'_> {
    /// The cwd change this call made, if it is a successful `chdir` or `fchdir`.
    ///
    /// The cwd is per process unless shared by `CLONE_FS`; which tasks share it is the
    /// classifier's business, read from the `clone` events.
    pub fn cwd_change(&self) -> Option<CwdChange> {
        if !matches!(self.ret, Return::Value(_)) {
            return None;
        }
        let first = self.args().next()?;
        match &*self.name {
            "chdir" => first.as_str().map(CwdChange::Path),
            "fchdir" => first.as_fd().map(CwdChange::Fd),
            _ => None,
        }
    }
}
