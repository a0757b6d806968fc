//! The per-task runtime directory: a short path (unix socket paths must stay under 108
//! bytes), mode 0700, holding a lock file kept `flock`ed for the task's life, the
//! placeholder manifest, and `tmp/` (the task's private tmp when `/tmp` itself is granted;
//! only made then, see [`RuntimeDir::create_with_tmp`]).
//!
//! Cleanup after a killed run ([`sweep_stale`]) removes only directories whose lock it can
//! take: a live run holds its lock, and pid liveness lies across pid namespaces (DESIGN
//! decision 6).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use paddock_policy::AbsPathBuf;

/// The lock file's name.
pub const LOCK_FILE: &str = "lock";

/// A live task's runtime directory. Dropping it removes the directory.
#[derive(Debug)]
pub struct RuntimeDir {
    path: AbsPathBuf,
    _lock: File,
}

impl RuntimeDir {
    /// Creates a fresh runtime dir under [`base`] with its `tmp/`, and takes its lock.
    pub fn create() -> io::Result<RuntimeDir> {
        RuntimeDir::create_with_tmp(true)
    }

    /// Creates a fresh runtime dir under [`base`] and takes its lock; `tmp/` only when
    /// `with_tmp` (the plan mounts the task's tmp there when `/tmp` itself is granted, and
    /// nothing uses it otherwise). Each directory costs on the spawn path: on ext4 mounted
    /// with `discard`, removing one waits for the device.
    pub fn create_with_tmp(with_tmp: bool) -> io::Result<RuntimeDir> {
        let base = base();
        ensure_private_dir(&base)?;
        for _ in 0..16 {
            let path = base.join(random_name()?);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let lock = open_lock(&path, true)?;
            if !try_flock(&lock) {
                return Err(io::Error::other("a fresh runtime dir's lock is already held"));
            }
            if with_tmp {
                std::fs::DirBuilder::new().mode(0o700).create(path.join("tmp"))?;
            }
            let path = AbsPathBuf::new_lexical(&path)
                .ok_or_else(|| io::Error::other("runtime dir is not absolute"))?;
            if let Ok(mut current) = CURRENT.lock() {
                *current = Some(path.as_path().to_path_buf());
            }
            return Ok(RuntimeDir { path, _lock: lock });
        }
        Err(io::Error::other(format!(
            "cannot find a free runtime dir name under {}",
            base.display()
        )))
    }

    /// Its path.
    pub fn path(&self) -> &AbsPathBuf {
        &self.path
    }
}

/// The runtime dir created last in this process and still alive, for [`current`].
static CURRENT: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// The runtime dir created last in this process, while it is alive.
pub fn current() -> Option<PathBuf> {
    CURRENT.lock().ok().and_then(|c| c.clone())
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if let Ok(mut current) = CURRENT.lock()
            && current.as_deref() == Some(self.path.as_path())
        {
            *current = None;
        }
        // `remove_dir_all` does not follow symlinks; the lock goes with the file handle after.
        let _ = std::fs::remove_dir_all(self.path.as_path());
    }
}

/// Where runtime dirs are made: `$XDG_RUNTIME_DIR/paddock` when that is set and short, else
/// `$TMPDIR/paddock-<uid>` (or `/tmp/paddock-<uid>` when `TMPDIR` is too long).
pub fn base() -> PathBuf {
    paddock_linux_bwrap::probe::runtime_base()
}

/// A representative runtime dir path for printing a plan without creating anything.
pub fn planned_path() -> AbsPathBuf {
    AbsPathBuf::new_lexical(base().join("XXXXXXXXXXXX")).unwrap_or_else(AbsPathBuf::root)
}

/// Removes the runtime dirs of runs that are gone (their lock can be taken), and the
/// placeholders their manifests list. Errors are ignored: a sweep is best effort and never
/// touches a directory whose lock is held.
pub fn sweep_stale() {
    let base = base();
    if ensure_private_dir(&base).is_err() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(&base) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() {
            continue;
        }
        let lock = match open_lock(&path, false) {
            Ok(lock) => lock,
            // No lock file: a run between mkdir and lock, or one that died there; leave it
            // a minute before treating it as dead.
            Err(_) => {
                let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or_default();
                if age.as_secs() > 60 {
                    sweep_one(&path);
                }
                continue;
            }
        };
        if try_flock(&lock) {
            sweep_one(&path);
        }
    }
}

fn sweep_one(path: &Path) {
    for (placeholder, dir) in crate::exec::read_manifest(path) {
        crate::exec::remove_placeholder(&placeholder, dir, 0);
    }
    let _ = std::fs::remove_dir_all(path);
}

fn ensure_private_dir(base: &Path) -> io::Result<()> {
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // It exists: it must be our own private directory, not a link or someone else's dir
    // planted in a shared /tmp.
    let meta = std::fs::symlink_metadata(base)?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid {
        return Err(io::Error::other(format!(
            "{} is not a directory owned by uid {uid}",
            base.display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn open_lock(dir: &Path, create: bool) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LOCK_FILE))
}

fn try_flock(file: &File) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn random_name() -> io::Result<String> {
    let mut bytes = [0u8; 6];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into a valid buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if usize::try_from(n).ok() != Some(bytes.len()) {
        return Err(io::Error::last_os_error());
    }
    Ok(paddock_policy::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_locked_swept_only_when_dead_and_removed_on_drop() {
        let dir = RuntimeDir::create().unwrap();
        let path = dir.path().as_path().to_path_buf();
        assert!(path.as_os_str().len() < 80, "short: {}", path.display());
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o700);
        assert!(path.join("tmp").is_dir());
        // A live run is never swept.
        sweep_stale();
        assert!(path.exists());
        // A dead run: its dir with an unlocked lock file and a recorded placeholder.
        let dead = base().join("deadbeef0000");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join(LOCK_FILE), "").unwrap();
        let ghost = std::env::temp_dir().join(format!("paddock-ghost-{}", std::process::id()));
        std::fs::create_dir(&ghost).unwrap();
        let p = paddock_policy::Placeholder {
            path: AbsPathBuf::new_lexical(&ghost).unwrap(),
            dir: true,
        };
        std::fs::write(
            dead.join(crate::exec::PLACEHOLDER_MANIFEST),
            [b"d ".as_slice(), p.path.as_os_str().as_encoded_bytes(), b"\0"].concat(),
        )
        .unwrap();
        sweep_stale();
        assert!(!dead.exists() && !ghost.exists());
        assert!(path.exists());
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn tmp_is_made_only_when_asked() {
        let lean = RuntimeDir::create_with_tmp(false).unwrap();
        let path = lean.path().as_path().to_path_buf();
        assert!(path.is_dir() && !path.join("tmp").exists());
        assert!(path.join(LOCK_FILE).is_file());
        drop(lean);
        assert!(!path.exists());
        let full = RuntimeDir::create_with_tmp(true).unwrap();
        assert!(full.path().as_path().join("tmp").is_dir());
    }
}
