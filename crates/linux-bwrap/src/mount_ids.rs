//! Grants re-verified after bwrap mounts them (SYM-03).
//!
//! bwrap binds by path, and bwrap 0.8 has no `--bind-fd`: between paddock's look at a write
//! grant and bwrap's mount of it, a concurrent process that can write the grant's parent
//! (another task, anything of the user's) can replace it with a symlink, and the mount then
//! lands on the link's target (`build -> ../.ssh` binds `~/.ssh` writable). So the runner
//! records what each such path is (device and inode, found without following any symlink)
//! just before bwrap reads its arguments, and the supervisor, inside the finished sandbox
//! and before the task exists, checks that each path is still that file: any difference and
//! the task never runs (exit 125).
//!
//! Checked: every bind of a path onto itself (write grants, pins, read-only exceptions and
//! protected paths) that no later mount covers. Not checked: the placeholders of missing
//! protected paths (made by the runner, SYM-04 guards them) and `/`.
//!
//! The plan carries a request on [`MOUNT_IDS_FD`]: [`REQUEST_MAGIC`], the count, the paths.
//! The runner replaces it ([`stamp`]) with [`STAMPED_MAGIC`], the count, then path, device
//! and inode for each, all NUL-terminated fields, numbers in decimal. A supervisor given the
//! request unstamped refuses to run the task.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use paddock_policy::AbsPathBuf;

/// The descriptor the supervisor reads the mount identities from.
pub const MOUNT_IDS_FD: i32 = 9;
/// The first field of the plan's request (paths only).
pub const REQUEST_MAGIC: &[u8] = b"paddock-mount-paths";
/// The first field of the stamped identities.
pub const STAMPED_MAGIC: &[u8] = b"paddock-mount-ids";
/// The payload's name in a plan.
pub const PAYLOAD_NAME: &str = "mount-ids";

/// One path's identity: where it is in the sandbox (as on the host), its device and inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountId {
    /// The path, on the host and in the sandbox alike.
    pub path: OsString,
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

fn push_field(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(field);
    out.push(0);
}

/// The plan's request: the paths to identify (pure).
pub fn request(paths: &[AbsPathBuf]) -> Vec<u8> {
    let mut out = Vec::new();
    push_field(&mut out, REQUEST_MAGIC);
    push_field(&mut out, paths.len().to_string().as_bytes());
    for p in paths {
        push_field(&mut out, p.as_os_str().as_bytes());
    }
    out
}

/// The NUL-terminated fields of `bytes`, or `None` when the last one is not terminated.
fn fields(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let body = bytes.strip_suffix(&[0])?;
    Some(body.split(|&b| b == 0).collect())
}

fn number(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 20 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The paths of a request.
pub fn parse_request(bytes: &[u8]) -> Result<Vec<OsString>, String> {
    let f = fields(bytes).ok_or("a mount-path request is not NUL-terminated")?;
    let [magic, count, paths @ ..] = f.as_slice() else {
        return Err("an empty mount-path request".to_owned());
    };
    if *magic != REQUEST_MAGIC {
        return Err("not a mount-path request".to_owned());
    }
    if number(count) != u64::try_from(paths.len()).ok() {
        return Err("a mount-path request of another length than counted".to_owned());
    }
    Ok(paths.iter().map(|p| OsString::from_vec(p.to_vec())).collect())
}

/// The stamped identities.
pub fn encode(ids: &[MountId]) -> Vec<u8> {
    let mut out = Vec::new();
    push_field(&mut out, STAMPED_MAGIC);
    push_field(&mut out, ids.len().to_string().as_bytes());
    for id in ids {
        push_field(&mut out, id.path.as_bytes());
        push_field(&mut out, id.dev.to_string().as_bytes());
        push_field(&mut out, id.ino.to_string().as_bytes());
    }
    out
}

/// Reads stamped identities; a request that was never stamped is refused.
pub fn parse(bytes: &[u8]) -> Result<Vec<MountId>, String> {
    let f = fields(bytes).ok_or("the mount identities are not NUL-terminated")?;
    let [magic, count, rest @ ..] = f.as_slice() else {
        return Err("no mount identities".to_owned());
    };
    if *magic == REQUEST_MAGIC {
        return Err(
            "the mount identities were never recorded (the runner did not stamp them)".to_owned()
        );
    }
    if *magic != STAMPED_MAGIC {
        return Err("not mount identities".to_owned());
    }
    if rest.len() % 3 != 0 || number(count) != u64::try_from(rest.len() / 3).ok() {
        return Err("mount identities of another length than counted".to_owned());
    }
    rest.chunks(3)
        .map(|c| {
            let bad = || "a malformed mount identity".to_owned();
            Ok(MountId {
                path: OsString::from_vec(c[0].to_vec()),
                dev: number(c[1]).ok_or_else(bad)?,
                ino: number(c[2]).ok_or_else(bad)?,
            })
        })
        .collect()
}

#[cfg(all(test, target_os = "linux"))]
use os::statx_id;
#[cfg(target_os = "linux")]
pub use os::{identify, stamp, stamped_plan, verify};

#[cfg(target_os = "linux")]
mod os {
    use std::borrow::Cow;
    use std::ffi::{CString, OsStr};
    use std::io;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;

    use paddock_policy::SpawnPlan;

    use super::{MOUNT_IDS_FD, MountId, encode, parse, parse_request};

    fn cstring(path: &OsStr) -> io::Result<CString> {
        CString::new(path.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    /// Opens `path` (absolute) with `O_PATH`, following no symlink anywhere in it:
    /// `openat2` with `RESOLVE_NO_SYMLINKS`, or one component at a time where the kernel
    /// has no `openat2` (before 5.6).
    fn open_no_symlinks(path: &OsStr) -> io::Result<OwnedFd> {
        use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat, openat2};
        use nix::sys::stat::Mode;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(AT_FDCWD, path, how) {
            Err(nix::errno::Errno::ENOSYS) => {}
            done => return done.map_err(io::Error::from),
        }
        let mut at = openat(AT_FDCWD, "/", flags, Mode::empty())?;
        for part in std::path::Path::new(path).components().skip(1) {
            // A symlink opened with O_NOFOLLOW cannot be walked into: ENOTDIR next.
            at = openat(&at, part.as_os_str(), flags, Mode::empty())?;
        }
        if nix::sys::stat::fstat(&at)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        Ok(at)
    }

    /// The identity of `path`, found without following a symlink anywhere in it; an error
    /// names the path and what it became.
    pub fn identify(path: &OsStr) -> Result<MountId, String> {
        let shown = std::path::Path::new(path).display();
        let fd = open_no_symlinks(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) => format!(
                "{shown} (or a directory above it) was replaced by a symlink while the sandbox \
                 was being set up; nothing ran. Run again once nothing else changes it"
            ),
            Some(libc::ENOENT) => format!(
                "{shown} disappeared while the sandbox was being set up; nothing ran. Run \
                 again once nothing else changes it"
            ),
            _ => format!("cannot look at {shown}: {e}"),
        })?;
        let st = nix::sys::stat::fstat(&fd).map_err(|e| format!("cannot look at {shown}: {e}"))?;
        Ok(MountId { path: path.to_os_string(), dev: st.st_dev, ino: st.st_ino })
    }

    /// Stamps a request (see the module doc) with what its paths are now.
    pub fn stamp(request: &[u8]) -> Result<Vec<u8>, String> {
        let ids =
            parse_request(request)?.iter().map(|p| identify(p)).collect::<Result<Vec<_>, _>>()?;
        Ok(encode(&ids))
    }

    /// `plan` with its mount-path request stamped, or `plan` itself when it has none.
    pub fn stamped_plan(plan: &SpawnPlan) -> Result<Cow<'_, SpawnPlan>, String> {
        let Some(i) = plan.payloads.iter().position(|p| p.fd == MOUNT_IDS_FD) else {
            return Ok(Cow::Borrowed(plan));
        };
        let bytes = stamp(&plan.payloads[i].bytes)?;
        let mut stamped = plan.clone();
        stamped.payloads[i].bytes = bytes;
        Ok(Cow::Owned(stamped))
    }

    /// `statx` of `path` (not following a symlink at its end): device, inode and, when the
    /// kernel says it (5.8 and later), the mount's id.
    pub(crate) fn statx_id(path: &OsStr) -> io::Result<(u64, u64, Option<u64>)> {
        let c = cstring(path)?;
        let mut stx = std::mem::MaybeUninit::<libc::statx>::uninit();
        let mask = libc::STATX_INO | libc::STATX_MNT_ID;
        // SAFETY: a NUL-terminated path and a buffer of the right size, filled on success.
        let rc = unsafe {
            libc::statx(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                mask,
                stx.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: statx succeeded and filled the buffer.
        let stx = unsafe { stx.assume_init() };
        let dev = libc::makedev(stx.stx_dev_major, stx.stx_dev_minor);
        let mnt = (stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id);
        Ok((dev, stx.stx_ino, mnt))
    }

    /// Inside the sandbox: checks each path is still what the runner stamped (not following
    /// a symlink at its end: a link there is a difference) and is a mount point (bwrap's
    /// mount landed there, not through a link somewhere else). Kernels before 5.8 do not
    /// say a file's mount; there only the identity is checked.
    pub fn verify(stamped: &[u8]) -> Result<(), String> {
        for id in parse(stamped)? {
            let shown = std::path::Path::new(&id.path).display().to_string();
            let parent =
                std::path::Path::new(&id.path).parent().unwrap_or(std::path::Path::new("/"));
            let same = match (statx_id(&id.path), statx_id(parent.as_os_str())) {
                (Ok((dev, ino, mnt)), Ok((_, _, parent_mnt))) => {
                    let mounted = match (mnt, parent_mnt) {
                        (Some(m), Some(p)) => m != p,
                        _ => true,
                    };
                    dev == id.dev && ino == id.ino && mounted
                }
                _ => false,
            };
            if !same {
                return Err(format!(
                    "{shown} is not what paddock granted (it was replaced while the sandbox \
                     was being set up); refusing to run the task. Run again once nothing \
                     else changes it"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_identities_round_trip_and_an_unstamped_request_is_refused() {
        let paths = vec![AbsPathBuf::new_lexical("/p/build").unwrap()];
        let req = request(&paths);
        assert_eq!(parse_request(&req).unwrap(), vec![OsString::from("/p/build")]);
        assert!(parse(&req).unwrap_err().contains("never recorded"));
        let ids = vec![MountId { path: "/p/a\nb".into(), dev: 65024, ino: u64::MAX }];
        assert_eq!(parse(&encode(&ids)).unwrap(), ids);
        for bad in [
            &b""[..],
            b"paddock-mount-ids\x001\0/p\x001\0",
            b"paddock-mount-ids\x002\0/p\x001\x002\0",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn identities_follow_no_symlink_and_a_swap_is_caught() {
        let dir = std::env::temp_dir().join(format!("paddock-mount-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real/build")).unwrap();
        std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("real", dir.join("link")).unwrap();
        let build = dir.join("real/build");
        let p = |p: &std::path::Path| AbsPathBuf::new_lexical(p).unwrap();
        let stamped = stamp(&request(&[p(&build)])).unwrap();
        // Not a mount point here: refused where the kernel says mounts (5.8 and later).
        let says_mounts = statx_id(build.as_os_str()).unwrap().2.is_some();
        assert_eq!(verify(&stamped).is_err(), says_mounts);
        // Through a symlink above it: refused, naming the path.
        let err = stamp(&request(&[p(&dir.join("link/build"))])).unwrap_err();
        assert!(err.contains("symlink") && err.contains("link/build"), "{err}");
        // Swapped for a symlink after stamping: the check fails.
        std::fs::rename(&build, dir.join("build.old")).unwrap();
        std::os::unix::fs::symlink("../elsewhere", &build).unwrap();
        assert!(verify(&stamped).unwrap_err().contains("not what paddock granted"));
        // Swapped for another directory: fails too.
        std::fs::remove_file(&build).unwrap();
        std::fs::create_dir(&build).unwrap();
        assert!(verify(&stamped).is_err());
        let err = stamp(&request(&[p(&dir.join("gone"))])).unwrap_err();
        assert!(err.contains("disappeared"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
