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

/// The table, sorted by name for binary search. Names are those strace prints on Linux
/// (x86_64 and the generic ABI).
const TABLE: &[(&str, CallSpec)] = &[
    ("access", spec(PATHNAME, Some(1))),
    ("acct", spec(PATHNAME, None)),
    ("bind", net(1)),
    ("chdir", spec(PATHNAME, None)),
    ("chmod", spec(PATHNAME, Some(1))),
    ("chown", spec(PATHNAME, None)),
    ("chown32", spec(PATHNAME, None)),
    ("chroot", spec(PATHNAME, None)),
    ("connect", net(1)),
    ("creat", spec(PATHNAME, Some(1))),
    ("execve", spec(PATHNAME, None)),
    ("execveat", spec(AT_PATHNAME, Some(4))),
    ("faccessat", spec(AT_PATHNAME, Some(2))),
    ("faccessat2", spec(AT_PATHNAME, Some(2))),
    ("fanotify_mark", spec(FANOTIFY, Some(1))),
    ("fchmodat", spec(AT_PATHNAME, Some(2))),
    ("fchmodat2", spec(AT_PATHNAME, Some(2))),
    ("fchownat", spec(AT_PATHNAME, Some(4))),
    ("fspick", spec(AT_PATHNAME, Some(2))),
    ("fstatat64", spec(AT_PATHNAME, Some(3))),
    ("futimesat", spec(AT_PATHNAME, None)),
    ("getxattr", spec(PATH, None)),
    ("getxattrat", spec(AT_PATHNAME, Some(2))),
    ("inotify_add_watch", spec(SECOND, Some(2))),
    ("lchown", spec(PATHNAME, None)),
    ("lchown32", spec(PATHNAME, None)),
    ("lgetxattr", spec(PATH, None)),
    ("link", spec(OLD_NEW, None)),
    ("linkat", spec(AT_OLD_NEW, Some(4))),
    ("listxattr", spec(PATH, None)),
    ("listxattrat", spec(AT_PATHNAME, Some(2))),
    ("llistxattr", spec(PATH, None)),
    ("lremovexattr", spec(PATH, None)),
    ("lsetxattr", spec(PATH, None)),
    ("lstat", spec(PATHNAME, None)),
    ("lstat64", spec(PATHNAME, None)),
    ("mkdir", spec(PATHNAME, Some(1))),
    ("mkdirat", spec(AT_PATHNAME, Some(2))),
    ("mknod", spec(PATHNAME, Some(1))),
    ("mknodat", spec(AT_PATHNAME, Some(2))),
    ("mount", spec(MOUNT, Some(3))),
    ("mount_setattr", spec(AT_PATHNAME, None)),
    ("move_mount", spec(MOVE_MOUNT, Some(4))),
    ("name_to_handle_at", spec(AT_PATHNAME, None)),
    ("newfstatat", spec(AT_PATHNAME, Some(3))),
    ("oldlstat", spec(PATHNAME, None)),
    ("oldstat", spec(PATHNAME, None)),
    ("open", spec(PATHNAME, Some(1))),
    ("open_tree", spec(AT_PATHNAME, Some(2))),
    ("openat", spec(AT_PATHNAME, Some(2))),
    ("openat2", spec(AT_PATHNAME, Some(2))),
    ("pivot_root", spec(OLD_NEW, None)),
    ("quotactl", spec(QUOTACTL, Some(0))),
    ("readlink", spec(PATHNAME, None)),
    ("readlinkat", spec(AT_PATHNAME, None)),
    ("recvmsg", net(1)),
    ("removexattr", spec(PATH, None)),
    ("removexattrat", spec(AT_PATHNAME, Some(2))),
    ("rename", spec(OLD_NEW, None)),
    ("renameat", spec(AT_OLD_NEW, None)),
    ("renameat2", spec(AT_OLD_NEW, Some(4))),
    ("rmdir", spec(PATHNAME, None)),
    ("sendmsg", net(1)),
    ("sendto", net(4)),
    ("setxattr", spec(PATH, None)),
    ("setxattrat", spec(AT_PATHNAME, Some(2))),
    ("stat", spec(PATHNAME, None)),
    ("stat64", spec(PATHNAME, None)),
    ("statfs", spec(PATHNAME, None)),
    ("statfs64", spec(PATHNAME, None)),
    ("statx", spec(AT_PATHNAME, Some(2))),
    ("swapoff", spec(PATHNAME, None)),
    ("swapon", spec(PATHNAME, Some(1))),
    ("symlink", spec(SYMLINK, None)),
    ("symlinkat", spec(SYMLINKAT, None)),
    ("truncate", spec(PATHNAME, None)),
    ("truncate64", spec(PATHNAME, None)),
    ("umount", spec(TARGET, Some(1))),
    ("umount2", spec(TARGET, Some(1))),
    ("unlink", spec(PATHNAME, None)),
    ("unlinkat", spec(AT_PATHNAME, Some(2))),
    ("uselib", spec(PATHNAME, None)),
    ("utime", spec(PATHNAME, None)),
    ("utimensat", spec(AT_PATHNAME, Some(3))),
    ("utimes", spec(PATHNAME, None)),
];

/// Other syscalls whose failures are common, sorted: their names are shared, not allocated.
const OTHER_NAMES: &[&str] = &[
    "accept",
    "accept4",
    "add_key",
    "bpf",
    "brk",
    "capset",
    "clock_nanosleep",
    "clone",
    "clone3",
    "close",
    "dup",
    "dup2",
    "dup3",
    "epoll_pwait",
    "epoll_wait",
    "fchdir",
    "fchmod",
    "fchown",
    "fcntl",
    "flock",
    "fork",
    "ftruncate",
    "futex",
    "getdents64",
    "getpeername",
    "getsockname",
    "io_uring_setup",
    "ioctl",
    "keyctl",
    "kill",
    "listen",
    "lseek",
    "mmap",
    "mprotect",
    "munmap",
    "nanosleep",
    "pause",
    "perf_event_open",
    "pipe",
    "pipe2",
    "poll",
    "ppoll",
    "prctl",
    "pselect6",
    "ptrace",
    "read",
    "recvfrom",
    "request_key",
    "restart_syscall",
    "rt_sigaction",
    "rt_sigreturn",
    "seccomp",
    "select",
    "setns",
    "socket",
    "socketpair",
    "unshare",
    "userfaultfd",
    "vfork",
    "wait4",
    "write",
];

/// What the table knows about `name`, with the name as a `&'static str`.
pub(crate) fn lookup(name: &str) -> Option<(&'static str, CallSpec)> {
    let i = TABLE.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
    Some(TABLE[i])
}

/// The name as a `&'static str` when it is a syscall this crate knows, so that the denials of
/// a log share their names instead of allocating each.
pub(crate) fn static_name(name: &str) -> Option<&'static str> {
    if let Some((n, _)) = lookup(name) {
        return Some(n);
    }
    OTHER_NAMES.binary_search(&name).ok().map(|i| OTHER_NAMES[i])
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(OTHER_NAMES.windows(2).all(|w| w[0] < w[1]));
        assert!(OTHER_NAMES.iter().all(|n| lookup(n).is_none()));
        assert_eq!(lookup("openat").map(|(n, s)| (n, s.flags)), Some(("openat", Some(2))));
        assert_eq!(static_name("futex"), Some("futex"));
        assert_eq!(static_name("no_such_call"), None);
    }
}
