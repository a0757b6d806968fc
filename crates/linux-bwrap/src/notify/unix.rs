//! Unix-socket grants by path (`allow.unix-sockets = [paths]`): the supervisor decides every
//! `connect` of the task's `AF_UNIX` sockets and makes the granted ones itself.
//!
//! Per notified `connect`:
//! 1. The task's socket is taken with `pidfd_getfd` (Linux 5.6): the same open file
//!    description, so its options and `O_NONBLOCK` are the task's. Its domain decides: not
//!    `AF_UNIX`, the call goes on (`CONTINUE`): whatever address the kernel then reads, an
//!    inet socket cannot reach a path (the network namespace is the wall there).
//! 2. `AF_UNIX`: the address is copied out of the task once and the kernel is never let
//!    re-read it (no `CONTINUE`), since another thread of the task could rewrite it between
//!    the check and the kernel's read. The copy is checked: a path is made absolute against
//!    the calling thread's cwd and resolved in the sandbox's mount namespace (the
//!    supervisor's own); if it names a grant, the supervisor connects the task's socket to the
//!    grant's canonical path (the grant's bytes, never the task's) and answers with that
//!    result. Any other path gets `EACCES` and a record naming it. An abstract address is
//!    private to the sandbox's network namespace: the supervisor connects it with the copy.
//!
//! Why `pidfd_getfd` rather than `SECCOMP_IOCTL_NOTIF_ADDFD` (a socket of the supervisor's
//! installed over the task's descriptor, Linux 5.14): the task keeps its own socket (its
//! options, its bound name, its flags), and the mechanism needs Linux 5.6 only. Both need
//! the same access to the task as reading its memory does.
//!
//! Datagram unix sockets are refused by the main filter in this mode (see
//! [`crate::seccomp::FilterOptions::unix_socket_paths`]): a datagram socket reaches a path
//! through a send's address, which lives in the task's memory; streams and seqpackets ignore
//! it. `bind` and `listen` stay the mounts' business (a task's own servers, in its write
//! grants).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::payload::UnixSocketGrant;

/// The oldest kernel path grants work on: 5.6, for `pidfd_getfd`.
pub const MIN_KERNEL: (u32, u32) = (5, 6);

/// Whether the running kernel can enforce path grants, or why not (then the grant is
/// refused, never widened to every socket).
pub fn kernel_supported() -> Result<(), String> {
    let version = super::kernel_version(&super::kernel_release()?);
    if version >= MIN_KERNEL {
        Ok(())
    } else {
        Err(format!(
            "allow.unix-sockets lists paths, which needs pidfd_getfd (Linux {}.{} or newer); \
             this is Linux {}.{}: use `unix-sockets = true` or `false`",
            MIN_KERNEL.0, MIN_KERNEL.1, version.0, version.1
        ))
    }
}

/// `offsetof(struct sockaddr_un, sun_path)`.
const SUN_PATH_OFFSET: usize = 2;
/// `sizeof(struct sockaddr_un)`: the longest address the kernel accepts.
pub const SOCKADDR_UN_LEN: usize = 110;

/// A unix address as the kernel reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnixAddr {
    /// A filesystem path (up to its first NUL).
    Path(Vec<u8>),
    /// An abstract name (the whole address, family included, as given).
    Abstract(Vec<u8>),
}

/// The address `connect` on an `AF_UNIX` socket would use, or the errno it fails with:
/// `EINVAL` for a foreign family or a length without a name (as `unix_validate_addr`).
pub fn parse_addr(addr: &[u8]) -> Result<UnixAddr, i32> {
    if addr.len() <= SUN_PATH_OFFSET || addr.len() > SOCKADDR_UN_LEN {
        return Err(libc::EINVAL);
    }
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    if i32::from(family) != libc::AF_UNIX {
        return Err(libc::EINVAL);
    }
    let name = &addr[SUN_PATH_OFFSET..];
    if name[0] == 0 {
        return Ok(UnixAddr::Abstract(addr.to_vec()));
    }
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Ok(UnixAddr::Path(name[..end].to_vec()))
}

/// The granted sockets, as the supervisor matches them.
#[derive(Debug, Default)]
pub struct Grants {
    grants: Vec<Grant>,
    /// Abstract addresses are the host's (the network namespace is shared): refused.
    pub abstract_shared: bool,
}

#[derive(Debug)]
struct Grant {
    declared: Vec<u8>,
    resolved: Vec<u8>,
    /// The socket itself, opened `O_PATH` before the task ran: connecting through
    /// `/proc/self/fd/N` reaches this inode whatever the task later does to the names on
    /// its path (a renamed parent, a planted link). `None` when it did not exist yet.
    opened: Option<OwnedFd>,
}

impl Grants {
    /// The payload's grants; `open` opens each existing socket now (the supervisor, before
    /// the task runs).
    pub fn new(grants: &[UnixSocketGrant], open: bool) -> Grants {
        let grants = grants
            .iter()
            .map(|g| {
                let resolved = g.resolved.0.as_encoded_bytes().to_vec();
                Grant {
                    declared: g.declared.0.as_encoded_bytes().to_vec(),
                    opened: if open { open_socket(&resolved) } else { None },
                    resolved,
                }
            })
            .collect();
        Grants { grants, abstract_shared: false }
    }

    /// Whether any path is granted (else the filter leaves `connect` alone).
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    fn find(&self, absolute: &[u8], canonical: Option<&[u8]>) -> Option<&Grant> {
        self.grants.iter().find(|g| {
            absolute == g.declared.as_slice()
                || absolute == g.resolved.as_slice()
                || canonical == Some(g.resolved.as_slice())
        })
    }

    /// Where to connect when the task's address, `absolute` (made absolute, cleaned) or
    /// `canonical` (resolved in the sandbox, when it exists), names a grant: the grant's own
    /// socket, never the task's bytes (`None`: not granted; `Some(Err)`: granted, but no
    /// socket is there now).
    pub fn target(&self, absolute: &[u8], canonical: Option<&[u8]>) -> Option<Result<Target, i32>> {
        let grant = self.find(absolute, canonical)?;
        Some(match &grant.opened {
            Some(fd) => Ok(Target { path: proc_fd_path(fd), _held: None }),
            // Not there when the task started: opened now, through no symbolic link (the
            // resolved path has none; one now was planted).
            None => match open_socket(&grant.resolved) {
                Some(fd) => Ok(Target { path: proc_fd_path(&fd), _held: Some(fd) }),
                None => Err(libc::ENOENT),
            },
        })
    }
}

/// A granted socket to connect to.
#[derive(Debug)]
pub struct Target {
    /// `/proc/self/fd/N` of the socket opened `O_PATH`.
    pub path: Vec<u8>,
    _held: Option<OwnedFd>,
}

fn proc_fd_path(fd: &OwnedFd) -> Vec<u8> {
    format!("/proc/self/fd/{}", fd.as_raw_fd()).into_bytes()
}

/// `struct open_how` of `openat2` (Linux 5.6, like `pidfd_getfd`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_SYMLINKS`.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// The socket at `path`, opened `O_PATH` through no symbolic link (`None` if it is missing,
/// not a socket, or reached through a link).
fn open_socket(path: &[u8]) -> Option<OwnedFd> {
    let c = std::ffi::CString::new(path).ok()?;
    #[allow(clippy::cast_sign_loss)] // the open flags are positive
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and an `open_how` of its size; the result
    // is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: a fresh descriptor that we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat into a buffer of the right type; read only when it succeeded.
    let socket = unsafe {
        libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) == 0
            && st.assume_init().st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    socket.then_some(fd)
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread, whose descriptor table is the one its
/// call uses.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

fn pidfd_open(pid: u32, flags: u32) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_open with integer arguments; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(i32::try_from(fd).map_err(|_| libc::EBADF)?) })
}

/// The thread group of thread `tid` (`Tgid:` of its status).
fn thread_group(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// A pidfd for the calling thread `tid`: a thread pidfd where the kernel has them, else its
/// process's (threads share their descriptors unless one unshared them).
pub fn task_pidfd(tid: u32) -> Result<OwnedFd, i32> {
    match pidfd_open(tid, PIDFD_THREAD) {
        Ok(fd) => Ok(fd),
        Err(libc::EINVAL) => pidfd_open(thread_group(tid).ok_or(libc::ESRCH)?, 0),
        Err(e) => Err(e),
    }
}

/// The task's descriptor `fd`, duplicated into the supervisor (`pidfd_getfd`).
pub fn task_fd(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_getfd with a pidfd we own and integer arguments; the result is checked.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(errno());
    }
    // SAFETY: a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(i32::try_from(got).map_err(|_| libc::EBADF)?) })
}

/// The domain (`SO_DOMAIN`) of a socket, `None` for anything else.
pub fn socket_domain(sock: &OwnedFd) -> Option<i32> {
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a valid int with its length.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&raw mut domain).cast(),
            &raw mut len,
        )
    };
    (rc == 0).then_some(domain)
}

/// Connects `sock` to the raw `sockaddr_un` bytes `addr`: `Ok` or the errno.
pub fn connect_raw(sock: &OwnedFd, addr: &[u8]) -> Result<(), i32> {
    let mut storage = [0u8; SOCKADDR_UN_LEN];
    let len = addr.len().min(SOCKADDR_UN_LEN);
    storage[..len].copy_from_slice(&addr[..len]);
    loop {
        // SAFETY: connect with a buffer of `len` valid bytes; the kernel copies it.
        let rc = unsafe {
            libc::connect(
                sock.as_raw_fd(),
                storage.as_ptr().cast(),
                libc::socklen_t::try_from(len).unwrap_or(0),
            )
        };
        if rc == 0 {
            return Ok(());
        }
        match errno() {
            libc::EINTR => {}
            e => return Err(e),
        }
    }
}

/// Connects `sock` to the socket at `path` (`ENAMETOOLONG` if it does not fit).
pub fn connect_path(sock: &OwnedFd, path: &[u8]) -> Result<(), i32> {
    if path.len() >= SOCKADDR_UN_LEN - SUN_PATH_OFFSET || path.contains(&0) {
        return Err(libc::ENAMETOOLONG);
    }
    let mut addr = Vec::with_capacity(SUN_PATH_OFFSET + path.len() + 1);
    #[allow(clippy::cast_possible_truncation)] // AF_UNIX is 1
    addr.extend_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    addr.extend_from_slice(path);
    addr.push(0);
    connect_raw(sock, &addr)
}

/// `path` resolved in this mount namespace, when it exists.
pub fn canonical(path: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    std::fs::canonicalize(std::ffi::OsStr::from_bytes(path))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Bytes;

    fn addr(family: u16, name: &[u8]) -> Vec<u8> {
        let mut a = family.to_ne_bytes().to_vec();
        a.extend_from_slice(name);
        a
    }

    #[test]
    fn addresses_are_read_as_the_kernel_reads_them() {
        assert_eq!(
            parse_addr(&addr(1, b"/run/a.sock\0junk")),
            Ok(UnixAddr::Path(b"/run/a.sock".to_vec()))
        );
        assert_eq!(parse_addr(&addr(1, b"rel.sock")), Ok(UnixAddr::Path(b"rel.sock".to_vec())));
        let abs = addr(1, b"\0name");
        assert_eq!(parse_addr(&abs), Ok(UnixAddr::Abstract(abs.clone())));
        assert_eq!(parse_addr(&addr(1, b"")), Err(libc::EINVAL), "unnamed");
        assert_eq!(parse_addr(&addr(2, b"/run/a.sock")), Err(libc::EINVAL), "AF_INET");
        assert_eq!(parse_addr(&addr(1, &[b'a'; 109])), Err(libc::EINVAL), "too long");
        // A path filling sun_path without a NUL is taken whole, as the kernel does.
        assert_eq!(parse_addr(&addr(1, &[b'a'; 108])), Ok(UnixAddr::Path(vec![b'a'; 108])));
    }

    #[test]
    fn only_a_grant_is_a_target_and_the_target_is_the_grants_own_path() {
        let grants = Grants::new(
            &[UnixSocketGrant {
                declared: Bytes("/var/run/docker.sock".into()),
                resolved: Bytes("/run/docker.sock".into()),
            }],
            false,
        );
        // Granted, and no socket there (this host has none): the connect fails.
        let missing = |t: Option<Result<Target, i32>>| t.map(|t| t.map(|t| t.path));
        assert_eq!(missing(grants.target(b"/var/run/docker.sock", None)), Some(Err(libc::ENOENT)));
        assert_eq!(missing(grants.target(b"/run/docker.sock", None)), Some(Err(libc::ENOENT)));
        let via_link = grants.target(b"/tmp/x/link", Some(b"/run/docker.sock"));
        assert_eq!(missing(via_link), Some(Err(libc::ENOENT)));
        assert!(grants.target(b"/run/other.sock", Some(b"/run/other.sock")).is_none());
        assert!(grants.target(b"/run/docker.sock.x", None).is_none());
        assert!(Grants::default().target(b"/", Some(b"/")).is_none());
    }
}

#[cfg(test)]
mod os_tests {
    #![allow(clippy::unwrap_used)] // test code: a failed setup step is a failed test

    use super::*;
    use crate::payload::Bytes;

    /// The grant's socket is reached whatever the names on its path become: a parent
    /// renamed away and replaced by a link to a directory with another socket.
    #[test]
    fn a_granted_socket_is_reached_by_its_inode_not_by_its_names() {
        let dir = std::env::temp_dir().join(format!("pdk-grant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["run", "evil"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let granted = std::os::unix::net::UnixListener::bind(dir.join("run/a.sock")).unwrap();
        let other = std::os::unix::net::UnixListener::bind(dir.join("evil/a.sock")).unwrap();
        for l in [&granted, &other] {
            l.set_nonblocking(true).unwrap();
        }
        let path = dir.join("run/a.sock");
        let g = UnixSocketGrant {
            declared: Bytes(path.clone().into_os_string()),
            resolved: Bytes(path.clone().into_os_string()),
        };
        let bytes = path.as_os_str().as_encoded_bytes().to_vec();
        let opened = Grants::new(std::slice::from_ref(&g), true);
        let lazy = Grants::new(std::slice::from_ref(&g), false);
        // The task swaps the directory for a link to its own.
        std::fs::rename(dir.join("run"), dir.join("moved")).unwrap();
        std::os::unix::fs::symlink(dir.join("evil"), dir.join("run")).unwrap();
        let connect = |grants: &Grants| -> Result<(), i32> {
            let target = grants.target(&bytes, None).unwrap()?;
            // SAFETY: a fresh socket, owned at once.
            let sock =
                unsafe { OwnedFd::from_raw_fd(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)) };
            connect_path(&sock, &target.path)
        };
        // Opened before the swap: the granted inode.
        assert_eq!(connect(&opened), Ok(()));
        assert!(granted.accept().is_ok());
        // Opened after it: the link is refused, never followed.
        assert_eq!(connect(&lazy), Err(libc::ENOENT));
        assert!(other.accept().is_err(), "the planted socket was reached");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
