//! The payload this supervisor reads: what the task is, as NUL-terminated fields (written by
//! `paddock_linux_bwrap::nolibc::encode`, which documents the layout).
//!
//! The fields are what `execve` takes already (NUL-terminated byte strings), so the task's
//! argv and environment are pointers into the payload's own buffer: nothing is copied.

use core::ffi::CStr;

use libc::c_int;

use crate::arena;

/// The first field of every payload.
pub const MAGIC: &[u8] = b"paddock-exec-payload";

/// A payload, pointing into the buffer it was read from.
#[derive(Debug)]
pub struct Payload<'a> {
    /// The version of paddock that planned the task.
    pub version: &'a [u8],
    /// The working directory inside the sandbox.
    pub cwd: &'a CStr,
    /// The descriptor holding the BPF program.
    pub seccomp_fd: c_int,
    /// The descriptor polite signals arrive on, if any.
    pub signal_fd: Option<c_int>,
    /// The descriptor holding the bound paths' identities, if any (see
    /// `paddock_linux_bwrap::mount_ids`).
    pub mount_ids_fd: Option<c_int>,
    /// For a run the observers itemize: the notification filter the task gets, and the
    /// server of its listener (see `supervise`).
    pub notify: Option<Notify<'a>>,
    /// The paths to bind onto themselves before anything else, each after its kind byte
    /// (`r` read-only, `w` as it is, `m` masked, `e` an empty read-only tmpfs over it, `v`
    /// the sandbox's devices in the tmpfs there),
    /// NULL-terminated (see `inner`).
    pub inner_mounts: &'a [*const u8],
    /// The program as given (looked up in `PATH` when it has no `/`).
    pub program: &'a CStr,
    /// argv, NULL-terminated.
    pub argv: &'a [*const u8],
    /// The environment (`KEY=value`), NULL-terminated.
    pub envp: &'a [*const u8],
    /// The value of the environment's last `PATH`.
    pub path: Option<&'a [u8]>,
}

/// The notification filter of an observed run, and the supervisor that serves its listener.
#[derive(Debug)]
pub struct Notify<'a> {
    /// The descriptor holding the notification filter's BPF program.
    pub filter_fd: c_int,
    /// The descriptor of the executable that serves the listener (`paddock-supervisor`, a
    /// copy nobody may read: executed, it is not dumpable from its first instruction).
    pub server_fd: c_int,
    /// Its arguments, then room for the four the supervisor adds (`--task PID --listener
    /// FD`) and the NULL.
    pub server_argv: &'a mut [*const u8],
    /// How many of `server_argv` the payload gave.
    pub server_argc: usize,
}

/// The NUL-terminated fields of a buffer, in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn next(&mut self, what: &'static str) -> Result<&'a CStr, &'static str> {
        let end = self.rest.iter().position(|&b| b == 0).ok_or(what)?;
        let (field, rest) = self.rest.split_at(end + 1);
        self.rest = rest;
        CStr::from_bytes_with_nul(field).map_err(|_| what)
    }

    fn number(&mut self, what: &'static str) -> Result<c_int, &'static str> {
        parse_int(self.next(what)?.to_bytes()).ok_or(what)
    }

    /// `count` fields as a NULL-terminated pointer array.
    fn array(&mut self, count: usize, what: &'static str) -> Result<&'a [*const u8], &'static str> {
        self.array_with_room(count, 0, what).map(|ptrs| &*ptrs)
    }

    /// `count` fields as a pointer array with `room` null pointers after them, then the
    /// NULL that ends it.
    fn array_with_room(
        &mut self,
        count: usize,
        room: usize,
        what: &'static str,
    ) -> Result<&'a mut [*const u8], &'static str> {
        let ptrs = arena::array::<*const u8>(count + room + 1).map_err(|_| "out of memory")?;
        for slot in ptrs.iter_mut().take(count) {
            *slot = self.next(what)?.as_ptr().cast();
        }
        Ok(ptrs)
    }

    /// A descriptor, or `-` for none.
    fn optional_fd(&mut self, what: &'static str) -> Result<Option<c_int>, &'static str> {
        match self.next(what)?.to_bytes() {
            b"-" => Ok(None),
            digits => parse_int(digits).map(Some).ok_or(what),
        }
    }
}

/// A non-negative decimal number of at most nine digits.
pub fn parse_int(digits: &[u8]) -> Option<c_int> {
    if digits.is_empty() || digits.len() > 9 {
        return None;
    }
    digits
        .iter()
        .try_fold(0, |n: c_int, &d| d.is_ascii_digit().then(|| n * 10 + c_int::from(d - b'0')))
}

/// Reads a payload; the error names the field that is missing or malformed.
pub fn parse(buf: &[u8]) -> Result<Payload<'_>, &'static str> {
    let mut fields = Fields { rest: buf };
    if fields.next("no payload")?.to_bytes() != MAGIC {
        return Err("not a payload for this supervisor (run by the wrong paddock?)");
    }
    let version = fields.next("no version")?.to_bytes();
    let cwd = fields.next("no working directory")?;
    let seccomp_fd = fields.number("no seccomp descriptor")?;
    let signal_fd = fields.optional_fd("no signal descriptor or a malformed one")?;
    let mount_ids_fd = fields.optional_fd("no mount identities descriptor or a malformed one")?;
    let filter_fd = fields.optional_fd("no notification filter descriptor or a malformed one")?;
    let server_fd = fields.optional_fd("no notification server descriptor or a malformed one")?;
    let server_argc = fields.number("no notification server argument count")? as usize;
    let server_argv =
        fields.array_with_room(server_argc, 4, "fewer server arguments than counted")?;
    let notify = match (filter_fd, server_fd, server_argc) {
        (None, None, 0) => None,
        (Some(filter_fd), Some(server_fd), 1..) => {
            Some(Notify { filter_fd, server_fd, server_argv, server_argc })
        }
        _ => return Err("a notification filter without its server, or the other way round"),
    };
    let innerc = fields.number("no inner mount count")?;
    let inner_mounts = fields.array(innerc as usize, "fewer inner mounts than counted")?;
    for &m in &inner_mounts[..innerc as usize] {
        // SAFETY: every pointer of the array points at a NUL-terminated field of `buf`.
        let m = unsafe { CStr::from_ptr(m.cast()) }.to_bytes();
        if !matches!(
            m.split_first(),
            Some((b'r' | b'w' | b'R' | b'W' | b'm' | b'e' | b'v' | b'c', [b'/', ..]))
        ) {
            return Err("a malformed inner mount");
        }
    }
    let program = fields.next("no program")?;
    let argc = fields.number("no argument count")?;
    let argv = fields.array(argc as usize, "fewer arguments than counted")?;
    let envc = fields.number("no environment count")?;
    let envp = fields.array(envc as usize, "fewer variables than counted")?;
    if !fields.rest.is_empty() {
        return Err("more fields than counted");
    }
    let path = envp[..envc as usize].iter().rev().find_map(|&var| {
        // SAFETY: every pointer of the array points at a NUL-terminated field of `buf`.
        let var = unsafe { CStr::from_ptr(var.cast()) }.to_bytes();
        var.strip_prefix(b"PATH=")
    });
    Ok(Payload {
        version,
        cwd,
        seccomp_fd,
        signal_fd,
        mount_ids_fd,
        notify,
        inner_mounts,
        program,
        argv,
        envp,
        path,
    })
}

/// The first field of stamped mount identities (`paddock_linux_bwrap::mount_ids`).
pub const MOUNT_IDS_MAGIC: &[u8] = b"paddock-mount-ids";
/// The first field of a request the runner never stamped.
pub const MOUNT_PATHS_MAGIC: &[u8] = b"paddock-mount-paths";

/// A decimal `u64` of at most twenty digits.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Checks each stamped path against `id_of` (its device, inode and mount id now, not
/// following a symlink at its end): `Ok` when each is the same file and a mount point (its
/// mount is not its parent's; not checked where the kernel gives no mount ids), else the
/// path that differs (or what is malformed).
pub fn check_mount_ids<'a>(
    buf: &'a [u8],
    id_of: impl Fn(&CStr) -> Option<(u64, u64, Option<u64>)>,
) -> Result<(), MountIdsError<'a>> {
    let mut fields = Fields { rest: buf };
    let magic = fields.next("no mount identities").map_err(MountIdsError::Malformed)?;
    if magic.to_bytes() == MOUNT_PATHS_MAGIC {
        return Err(MountIdsError::Malformed(
            "the mount identities were never recorded (the runner did not stamp them)",
        ));
    }
    if magic.to_bytes() != MOUNT_IDS_MAGIC {
        return Err(MountIdsError::Malformed("not mount identities"));
    }
    let count = fields.number("no mount identity count").map_err(MountIdsError::Malformed)?;
    let mut scratch = [0u8; PATH_MAX];
    for _ in 0..count {
        let bad = "a malformed mount identity";
        let path = fields.next(bad).map_err(MountIdsError::Malformed)?;
        let dev = fields.next(bad).ok().and_then(|f| parse_u64(f.to_bytes()));
        let ino = fields.next(bad).ok().and_then(|f| parse_u64(f.to_bytes()));
        let (Some(dev), Some(ino)) = (dev, ino) else {
            return Err(MountIdsError::Malformed(bad));
        };
        let parent = parent_of(path, &mut scratch).and_then(&id_of);
        let same = match (id_of(path), parent) {
            (Some((d, i, mnt)), Some((_, _, parent_mnt))) => {
                let mounted = match (mnt, parent_mnt) {
                    (Some(m), Some(p)) => m != p,
                    _ => true,
                };
                (d, i) == (dev, ino) && mounted
            }
            _ => false,
        };
        if !same {
            return Err(MountIdsError::Differs(path));
        }
    }
    if !fields.rest.is_empty() {
        return Err(MountIdsError::Malformed("more mount identities than counted"));
    }
    Ok(())
}

/// Why [`check_mount_ids`] refused.
#[derive(Debug, PartialEq, Eq)]
pub enum MountIdsError<'a> {
    /// The payload is not stamped identities.
    Malformed(&'static str),
    /// This path is not what the runner recorded.
    Differs(&'a CStr),
}

/// The longest path whose parent [`parent_of`] can name.
const PATH_MAX: usize = 4096;

/// The directory above absolute `path` (`/` for `/x`), NUL-terminated in `scratch`.
fn parent_of<'s>(path: &CStr, scratch: &'s mut [u8; PATH_MAX]) -> Option<&'s CStr> {
    let bytes = path.to_bytes();
    let cut = bytes.iter().rposition(|&b| b == b'/')?;
    let parent = if cut == 0 { &b"/"[..] } else { &bytes[..cut] };
    if parent.len() >= PATH_MAX {
        return None;
    }
    scratch[..parent.len()].copy_from_slice(parent);
    scratch[parent.len()] = 0;
    CStr::from_bytes_with_nul(&scratch[..=parent.len()]).ok()
}
