//! Deciding, just before a notified call runs, whether the kernel will refuse it: where its
//! paths are (resolved against the caller's cwd or dirfd) and whether they are on a read-only
//! mount; whether a connect leaves loopback.
//!
//! The supervisor runs inside the sandbox, so its view of a path is the task's (the task
//! cannot `chroot` or mount: the main filter refuses both). Only `/proc/self`,
//! `/proc/thread-self` and `/dev/{fd,stdin,stdout,stderr}` name the *caller*; they are
//! rewritten to `/proc/PID` first.
//!
//! The rules follow the kernel's order of checks (fs/namei.c, fs/open.c):
//! - creating (`mkdir`, `mknod`, `symlink`, a link's new name): an existing name is `EEXIST`
//!   before `EROFS`, so only a missing name on a read-only parent is a denial;
//! - removing and renaming: the parent's mount is checked before the lookup; a rename or
//!   link across mounts is `EXDEV` (a read-only and a writable side are always two mounts);
//! - opening: only a regular file (or a created one) writes to its mount; a device, FIFO or
//!   socket opened for writing does not, and a directory is `EISDIR`;
//! - changing (`chmod`, `chown`, `utimensat`, `truncate`, `*xattr`): the file's own mount;
//! - a mount point (a pinned directory, a deny anchor, a protected path, a grant) cannot be
//!   renamed, exchanged or removed (`EBUSY`, once the parents passed the checks above: both
//!   writable, one mount), nor hard-linked (`EXDEV`: its mount is not the new name's).
//!
//! A path under a FUSE mount is never a denial here: the observer filesystem on deny anchors
//! records those. An anchor itself (the FUSE mount point) is: renaming or linking it is
//! refused by the kernel before the observer hears of it, and the mount table says it is a
//! mount point without touching it. The mount table is read once, and a path lexically under a FUSE mount is
//! skipped without touching it (the supervisor's own lookups would reach the observer);
//! `statfs` also says FUSE when a symlink led there.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// Where a notified call's arguments are. An argument index of `None` for a dirfd means
/// "relative to the cwd" (the legacy calls without a dirfd).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `openat`, `open`, and `creat` (no flags argument: `O_CREAT|O_WRONLY|O_TRUNC`).
    Open {
        /// The dirfd argument.
        dirfd: Option<u8>,
        /// The path argument.
        path: u8,
        /// The flags argument.
        flags: Option<u8>,
    },
    /// `openat2`: the flags are the first field of the `open_how` the argument points to.
    OpenHow {
        /// The dirfd argument.
        dirfd: u8,
        /// The path argument.
        path: u8,
        /// The `struct open_how *` argument.
        how: u8,
    },
    /// Creates a name (`mkdir`, `mknod`, `symlink`).
    Create {
        /// The dirfd argument.
        dirfd: Option<u8>,
        /// The path argument.
        path: u8,
    },
    /// Removes a name (`unlink`, `rmdir`).
    Remove {
        /// The dirfd argument.
        dirfd: Option<u8>,
        /// The path argument.
        path: u8,
    },
    /// Two paths: `rename*` (both names change) and `link*` (the new name is created).
    Two {
        /// The old (dirfd, path) arguments.
        old: (Option<u8>, u8),
        /// The new (dirfd, path) arguments.
        new: (Option<u8>, u8),
        /// A link: the new name follows the creating rule.
        link: bool,
    },
    /// Changes an existing file (`chmod`, `chown`, `truncate`, `utimensat`, `*xattr`).
    Modify {
        /// The dirfd argument.
        dirfd: Option<u8>,
        /// The path argument (a NULL or empty path means the dirfd itself).
        path: u8,
        /// The argument holding `AT_SYMLINK_NOFOLLOW`, or `u8::MAX` for a call that never
        /// follows (`lchown`), or `None` for one that always does.
        nofollow: Option<u8>,
    },
    /// `connect`: the address.
    Connect,
    /// `socket(AF_UNIX)`.
    Socket,
}

/// A write-intent operation on resolved absolute paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// An open with these flags.
    Open(&'a [u8], i32),
    /// A new name.
    Create(&'a [u8]),
    /// A removed name.
    Remove(&'a [u8]),
    /// A rename (`link: false`) or a link.
    Two {
        /// The old name.
        old: &'a [u8],
        /// The new name.
        new: &'a [u8],
        /// A link rather than a rename.
        link: bool,
    },
    /// A change to an existing file, following a final symlink or not.
    Modify(&'a [u8], bool),
}

/// What [`View::mount`] says about the mount a path is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MountFacts {
    /// Mounted read-only.
    pub read_only: bool,
    /// A FUSE filesystem (the observer's).
    pub fuse: bool,
}

/// The filesystem as the caller sees it: the real one ([`Live`]) or a test double.
pub trait View {
    /// The file type bits (`st_mode & S_IFMT`) of `path`, or the errno.
    fn file_type(&self, path: &[u8], follow: bool) -> Result<u32, i32>;
    /// The mount `path` is on (following symlinks), or the errno.
    fn mount(&self, path: &[u8]) -> Result<MountFacts, i32>;
    /// Whether `path` is lexically at or under a FUSE mount point.
    fn under_fuse(&self, path: &[u8]) -> bool;
    /// Whether `path` (its final component not followed) is a mount point. Never touches a
    /// path under a FUSE mount.
    fn mount_point(&self, path: &[u8]) -> bool;
    /// Whether two directories are on the same mount.
    fn same_mount(&self, a: &[u8], b: &[u8]) -> bool;
}

/// The parent directory of a clean absolute path (`/` for `/` and `/x`).
pub fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|b| *b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

fn read_only(view: &impl View, path: &[u8]) -> bool {
    !view.under_fuse(path)
        && matches!(view.mount(path), Ok(MountFacts { read_only: true, fuse: false }))
}

fn create_denied(view: &impl View, path: &[u8]) -> bool {
    // An existing name is EEXIST (checked before EROFS); a missing parent is ENOENT. The
    // mount first: in the common case (a writable parent) one syscall decides.
    read_only(view, parent(path)) && matches!(view.file_type(path, false), Err(libc::ENOENT))
}

/// A predicted denial: the path refused and the errno the kernel gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denial<'a> {
    /// The path (for a rename or link: the side on a read-only mount).
    pub path: &'a [u8],
    /// `EROFS`, or `EXDEV` for a rename or link between a read-only and a writable mount
    /// (the kernel checks "same mount" first; two read-only sides are taken as one mount).
    pub errno: &'static str,
}

/// The denial the kernel will give `op`, if any.
pub fn predict<'a>(view: &impl View, op: Op<'a>) -> Option<Denial<'a>> {
    // First, whatever the paths are under: a mount point refuses before any filesystem
    // (the observer's too) is asked.
    if let Some(denial) = held_in_place(view, op) {
        return Some(denial);
    }
    // Under a FUSE mount, nothing is touched: the supervisor's own lookups would reach the
    // observer filesystem, which records the task's.
    let paths = match op {
        Op::Open(p, _) | Op::Create(p) | Op::Remove(p) | Op::Modify(p, _) => [p, p],
        Op::Two { old, new, .. } => [old, new],
    };
    if paths.iter().any(|p| view.under_fuse(p)) {
        return None;
    }
    let erofs = |path: &'a [u8], yes: bool| {
        (yes && !view.under_fuse(path)).then_some(Denial { path, errno: "EROFS" })
    };
    match op {
        Op::Open(path, flags) => {
            if flags & libc::O_PATH != 0 {
                return None; // a path-only open ignores the access mode and creates nothing
            }
            if flags & libc::O_TMPFILE == libc::O_TMPFILE {
                // An unnamed file in the directory `path`.
                return erofs(path, read_only(view, path));
            }
            // The mount first: a writable one (the common case) decides in one syscall.
            match view.mount(path) {
                Ok(MountFacts { read_only: false, .. } | MountFacts { fuse: true, .. }) => None,
                Ok(_) => {
                    let follow = flags & libc::O_NOFOLLOW == 0;
                    let regular = view.file_type(path, follow) == Ok(libc::S_IFREG);
                    let exclusive =
                        flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL;
                    let writes =
                        flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
                    erofs(path, !exclusive && regular && writes)
                }
                Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => {
                    erofs(path, read_only(view, parent(path)))
                }
                Err(_) => None,
            }
        }
        Op::Create(path) => erofs(path, create_denied(view, path)),
        Op::Remove(path) => erofs(path, read_only(view, parent(path))),
        Op::Two { old, new, link } => {
            let old_ro = read_only(view, parent(old));
            if link {
                // The new name is created first (EEXIST, then EROFS); then "same mount".
                if create_denied(view, new) {
                    return erofs(new, true);
                }
                let new_exists = view.file_type(new, false).is_ok();
                return (old_ro && !new_exists && !view.under_fuse(old))
                    .then_some(Denial { path: old, errno: "EXDEV" });
            }
            let new_ro = read_only(view, parent(new));
            match (old_ro, new_ro) {
                (true, true) => erofs(old, true),
                (true, false) => {
                    (!view.under_fuse(old)).then_some(Denial { path: old, errno: "EXDEV" })
                }
                (false, true) => {
                    (!view.under_fuse(new)).then_some(Denial { path: new, errno: "EXDEV" })
                }
                (false, false) => None,
            }
        }
        // Following: the mount says it all (a missing file fails `statfs` with ENOENT).
        Op::Modify(path, true) => erofs(path, read_only(view, path)),
        Op::Modify(path, false) => match view.file_type(path, false) {
            Ok(libc::S_IFLNK) => erofs(path, read_only(view, parent(path))),
            Ok(_) => erofs(path, read_only(view, path)),
            Err(_) => None,
        },
    }
}

/// A rename, exchange or removal of a mount point (`EBUSY`) or a hard link of one
/// (`EXDEV`), when the checks the kernel makes first pass: writable parents outside the
/// observer's mounts, on one mount for a rename, a new name that does not exist for a link.
fn held_in_place<'a>(view: &impl View, op: Op<'a>) -> Option<Denial<'a>> {
    // The mount table first: for almost every call it decides alone, without a syscall.
    let open_dir = |dir: &[u8]| !view.under_fuse(dir) && !read_only(view, dir);
    let busy = |path: &'a [u8]| Denial { path, errno: "EBUSY" };
    match op {
        Op::Remove(path) => (view.mount_point(path) && open_dir(parent(path))).then(|| busy(path)),
        Op::Two { old, new, link: false } => {
            let held = if view.mount_point(old) {
                old
            } else if view.mount_point(new) {
                new
            } else {
                return None;
            };
            let (from, to) = (parent(old), parent(new));
            // A missing source is ENOENT before a held target is EBUSY (a held source exists,
            // and is not touched: it may be the observer's root).
            if !open_dir(from)
                || !open_dir(to)
                || (held == new && (view.under_fuse(old) || view.file_type(old, false).is_err()))
            {
                return None;
            }
            Some(if view.same_mount(from, to) {
                busy(held)
            } else {
                Denial { path: held, errno: "EXDEV" }
            })
        }
        Op::Two { old, new, link: true } => (view.mount_point(old)
            && !view.under_fuse(parent(old))
            && open_dir(parent(new))
            && !view.under_fuse(new)
            && matches!(view.file_type(new, false), Err(libc::ENOENT)))
        .then_some(Denial { path: old, errno: "EXDEV" }),
        _ => None,
    }
}

/// Joins `path` to `base` when relative, rewrites the names that mean the caller
/// (`/proc/self`, `/dev/stdout`, ...) to `/proc/PID`, and cleans the result lexically
/// (`//` and `/./` collapse, a trailing `/` goes; `..` stays, as symlinks decide it).
pub fn absolute(pid: u32, base: Option<&[u8]>, path: &[u8]) -> Option<Vec<u8>> {
    let mut joined = Vec::with_capacity(path.len() + base.map_or(0, <[u8]>::len) + 1);
    if !path.starts_with(b"/") {
        let base = base?;
        if !base.starts_with(b"/") {
            return None; // a dirfd that is not a directory on a path (a pipe, an anon inode)
        }
        joined.extend_from_slice(base);
        joined.push(b'/');
    }
    joined.extend_from_slice(path);
    let mut clean = Vec::with_capacity(joined.len());
    for part in joined.split(|b| *b == b'/') {
        if part.is_empty() || part == b"." {
            continue;
        }
        clean.push(b'/');
        clean.extend_from_slice(part);
    }
    if clean.is_empty() {
        clean.push(b'/');
    }
    // (name, what it means under /proc/PID)
    let rewrites: [(&[u8], &str); 6] = [
        (b"/proc/self", ""),
        (b"/proc/thread-self", ""),
        (b"/dev/fd", "/fd"),
        (b"/dev/stdin", "/fd/0"),
        (b"/dev/stdout", "/fd/1"),
        (b"/dev/stderr", "/fd/2"),
    ];
    for (from, to) in rewrites {
        if let Some(rest) = clean.strip_prefix(from)
            && (rest.is_empty() || rest.starts_with(b"/"))
        {
            let mut out = format!("/proc/{pid}{to}").into_bytes();
            out.extend_from_slice(rest);
            return Some(out);
        }
    }
    Some(clean)
}

/// Whether a connect to `addr` (a raw `sockaddr`) is recorded, and its target text: an
/// `AF_INET`/`AF_INET6` address that is not loopback or unspecified (both stay inside the
/// sandbox's network namespace). `AF_UNIX` and other families are not recorded here.
pub fn connect_target(addr: &[u8]) -> Option<String> {
    let family = i32::from(u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]));
    let port = u16::from_be_bytes([*addr.get(2)?, *addr.get(3)?]);
    match family {
        libc::AF_INET => {
            let octets: [u8; 4] = addr.get(4..8)?.try_into().ok()?;
            let ip = std::net::Ipv4Addr::from(octets);
            (!ip.is_loopback() && !ip.is_unspecified()).then(|| format!("{ip}:{port}"))
        }
        libc::AF_INET6 => {
            let octets: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
            let ip = std::net::Ipv6Addr::from(octets);
            let local = ip.is_loopback()
                || ip.is_unspecified()
                || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback() || v4.is_unspecified());
            (!local).then(|| format!("[{ip}]:{port}"))
        }
        _ => None,
    }
}

/// The real filesystem, seen from the supervisor (inside the sandbox).
#[derive(Debug, Default)]
pub struct Live {
    fuse_mounts: Vec<Vec<u8>>,
    /// Every mount point of the sandbox (the task cannot mount: the set is fixed).
    mount_points: std::collections::BTreeSet<Vec<u8>>,
    /// Their last components: a removed or renamed name that is none of them is no mount
    /// point, found without resolving its parent (`rm -rf` of a tree asks once a file).
    mount_names: std::collections::HashSet<Vec<u8>>,
}

impl Live {
    /// Reads the mount table once (the task cannot mount: the table is fixed).
    pub fn load() -> Live {
        use std::io::Read;
        // A proc file has no size to size the buffer by: start where a sandbox's table ends
        // (tens of mounts), not at `std::fs::read`'s 32 bytes doubled a read at a time.
        let mut table = Vec::with_capacity(16 * 1024);
        let read =
            std::fs::File::open("/proc/self/mountinfo").and_then(|mut f| f.read_to_end(&mut table));
        if read.is_err() {
            table.clear();
        }
        let points = mount_points(&table);
        Live {
            fuse_mounts: fuse_mount_points(&table),
            mount_names: points.iter().map(|p| last_component(p).to_vec()).collect(),
            mount_points: points.into_iter().collect(),
        }
    }

    /// `path` with its parent directory's links followed (the parent must not be under a
    /// FUSE mount: resolving it would reach the observer).
    fn real(&self, path: &[u8]) -> Option<Vec<u8>> {
        let mut out = self.real_dir(parent(path))?;
        let name = last_component(path);
        if name.is_empty() {
            return Some(out);
        }
        if out != b"/" {
            out.push(b'/');
        }
        out.extend_from_slice(name);
        Some(out)
    }

    /// The directory `dir` with its links followed, unless it is under a FUSE mount.
    fn real_dir(&self, dir: &[u8]) -> Option<Vec<u8>> {
        use std::os::unix::ffi::OsStringExt;
        if self.under_fuse(dir) {
            return None;
        }
        let real = std::fs::canonicalize(std::ffi::OsStr::from_bytes(dir)).ok()?;
        Some(real.into_os_string().into_vec())
    }

    /// The innermost mount point holding the canonical `path`.
    fn mount_of<'s>(&'s self, path: &[u8]) -> Option<&'s [u8]> {
        self.mount_points
            .iter()
            .filter(|m| {
                m.as_slice() == b"/"
                    || path
                        .strip_prefix(m.as_slice())
                        .is_some_and(|r| r.is_empty() || r.starts_with(b"/"))
            })
            .max_by_key(|m| m.len())
            .map(Vec::as_slice)
    }
}

/// The last component of a clean path (empty for `/`).
fn last_component(path: &[u8]) -> &[u8] {
    &path[path.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1)..]
}

/// Every mount point in a `mountinfo` table.
pub fn mount_points(table: &[u8]) -> Vec<Vec<u8>> {
    table
        .split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(unescape)
        .collect()
}

/// The mount points of FUSE filesystems in a `mountinfo` table.
pub fn fuse_mount_points(table: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for line in table.split(|b| *b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == b"-") else { continue };
        let (Some(point), Some(fstype)) = (fields.get(4), fields.get(dash + 1)) else { continue };
        if fstype.starts_with(b"fuse") {
            out.push(unescape(point));
        }
    }
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The kernel's `struct statfs` on 64-bit x86_64 and aarch64 (asm-generic/statfs.h, every
/// word a `long`). libc's `statfs` hides `f_flags`, which says read-only (`ST_RDONLY`)
/// together with the filesystem type in one call.
#[repr(C)]
#[derive(Default)]
struct KernelStatfs {
    f_type: i64,
    f_bsize: i64,
    f_blocks: i64,
    f_bfree: i64,
    f_bavail: i64,
    f_files: i64,
    f_ffree: i64,
    f_fsid: [i32; 2],
    f_namelen: i64,
    f_frsize: i64,
    f_flags: i64,
    f_spare: [i64; 4],
}

const ST_RDONLY: i64 = 1;
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

fn cpath(path: &[u8]) -> Result<CString, i32> {
    CString::new(path).map_err(|_| libc::EINVAL)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

impl View for Live {
    fn file_type(&self, path: &[u8], follow: bool) -> Result<u32, i32> {
        let c = cpath(path)?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: a NUL-terminated path and a buffer of the right type.
        let rc = unsafe {
            if follow {
                libc::stat(c.as_ptr(), st.as_mut_ptr())
            } else {
                libc::lstat(c.as_ptr(), st.as_mut_ptr())
            }
        };
        if rc != 0 {
            return Err(errno());
        }
        // SAFETY: stat succeeded, so the buffer is initialized.
        Ok(unsafe { st.assume_init() }.st_mode & libc::S_IFMT)
    }

    fn mount(&self, path: &[u8]) -> Result<MountFacts, i32> {
        let c = cpath(path)?;
        let mut st = KernelStatfs::default();
        // SAFETY: statfs(2) with a NUL-terminated path and a buffer of the kernel's layout.
        if unsafe { libc::syscall(libc::SYS_statfs, c.as_ptr(), &raw mut st) } != 0 {
            return Err(errno());
        }
        Ok(MountFacts {
            read_only: st.f_flags & ST_RDONLY != 0,
            fuse: st.f_type == FUSE_SUPER_MAGIC,
        })
    }

    fn under_fuse(&self, path: &[u8]) -> bool {
        self.fuse_mounts.iter().any(|m| {
            path.strip_prefix(m.as_slice())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/") || m == b"/")
        })
    }

    fn mount_point(&self, path: &[u8]) -> bool {
        if path.ends_with(b"/..")
            || path == b"/"
            || !self.mount_names.contains(last_component(path))
        {
            return false;
        }
        self.mount_points.contains(path)
            || self.real(path).is_some_and(|real| self.mount_points.contains(&real))
    }

    fn same_mount(&self, a: &[u8], b: &[u8]) -> bool {
        if a == b {
            return true;
        }
        match (self.real_dir(a), self.real_dir(b)) {
            (Some(a), Some(b)) => self.mount_of(&a) == self.mount_of(&b),
            _ => false,
        }
    }
}

/// The target of `/proc/PID/cwd` or `/proc/PID/fd/N` (`dirfd` `None` or `AT_FDCWD`).
pub fn base_dir(pid: u32, dirfd: Option<i32>) -> Option<Vec<u8>> {
    let link = match dirfd {
        None | Some(libc::AT_FDCWD) => format!("/proc/{pid}/cwd"),
        Some(fd) if fd >= 0 => format!("/proc/{pid}/fd/{fd}"),
        Some(_) => return None,
    };
    std::fs::read_link(link).ok().map(|p| p.as_os_str().as_bytes().to_vec())
}
