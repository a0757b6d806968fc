//! A copy of `paddock-supervisor` that nobody may read, for `paddock-supervisor-nolibc` to
//! execute as the sandbox's pid 1 once an observed task has made its first notified call or
//! run for a millisecond (`supervisor::serve_notify`).
//!
//! A process that executes a file it cannot read is not dumpable from the start: the kernel
//! decides it in `execve` (`would_dump`), before the first instruction of the new image.
//! Executing a readable `paddock-supervisor` while the task runs would leave the new pid 1
//! dumpable until its `main` says otherwise, after glibc's start-up: long enough for the
//! task, the same user and outside any Landlock domain, to open `/proc/1/mem` and keep it,
//! and pid 1 has no seccomp filter. Capabilities are all dropped by then, so the mode
//! bits decide, even for root: the copy is `0111`, owned by the runner's user.
//!
//! The copy lives in the runtime base, in [`EXEC_ONLY_DIR`], named after the source's device,
//! inode, size and modification time, so that a new install makes a new copy (the oldest
//! beyond a few are removed then; a run executing one has it open already). It is made once, under a
//! temporary name and renamed into place, so a run never sees half of it. The runner hands
//! it to the sandbox as an `O_PATH` descriptor at [`crate::NOTIFIER_EXE_FD`], which pid 1
//! executes with `execveat`: the runtime base itself is hidden in the sandbox.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The directory of the runtime base holding the copies.
pub const EXEC_ONLY_DIR: &str = "exec-only";

/// The mode of a copy: executable, readable and writable by nobody.
const MODE: u32 = 0o111;

/// An `O_PATH` descriptor of `source`'s copy nobody may read, made first if need be.
pub fn open(source: &Path) -> io::Result<OwnedFd> {
    let dir = crate::runtime::runtime_dir::base().join(EXEC_ONLY_DIR);
    open_in(&dir, source)
}

/// [`open`] with the copies in `dir`.
fn open_in(dir: &Path, source: &Path) -> io::Result<OwnedFd> {
    let meta = std::fs::metadata(source)?;
    if !meta.is_file() {
        return Err(io::Error::other(format!("{} is not a file", source.display())));
    }
    let stem = source.file_name().map_or_else(|| OsString::from("exe"), |n| n.to_os_string());
    let mut name = stem.clone();
    name.push(format!(
        "-{:x}-{:x}-{:x}-{:x}.{:x}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec()
    ));
    let copy = dir.join(&name);
    match open_copy(&copy, meta.size()) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // Not what this module makes (cut short, its mode changed, a link): made again.
        Err(_) => std::fs::remove_file(&copy)?,
    }
    crate::runtime::runtime_dir::ensure_private_dir(dir)?;
    make_copy(source, dir, &copy)?;
    remove_others(dir, &stem, &name);
    open_copy(&copy, meta.size())
}

/// Opens `copy` (`O_PATH`, not following a link) when it is one of ours: a regular file of
/// `size` bytes owned by this user with [`MODE`].
fn open_copy(copy: &Path, size: u64) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(copy)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o7777 != MODE || meta.size() != size {
        return Err(io::Error::other(format!(
            "{} is not a copy paddock made (a file of {size} bytes, mode 0111, owned by uid {uid})",
            copy.display()
        )));
    }
    Ok(OwnedFd::from(file))
}

/// Copies `source` to `copy` through a temporary file in `dir`, made unreadable before the
/// rename.
fn make_copy(source: &Path, dir: &Path, copy: &Path) -> io::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = dir.join(format!(".tmp-{}-{nanos:x}", std::process::id()));
    let made = (|| {
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp)?;
        io::copy(&mut File::open(source)?, &mut to)?;
        to.set_permissions(std::fs::Permissions::from_mode(MODE))?;
        to.sync_all()?;
        // Closed before it has its name: a file open for writing cannot be executed
        // (`ETXTBSY`), and another run may execute it as soon as it is there.
        drop(to);
        std::fs::rename(&temp, copy)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    made
}

/// How many copies of one executable name are kept: one per install in use (a release and
/// a development build side by side would otherwise take turns copying themselves).
const KEPT: usize = 2;

/// Removes the copies of `stem` but `keep` and the newest others, up to [`KEPT`] in all:
/// older installs'.
fn remove_others(dir: &Path, stem: &OsString, keep: &OsString) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut prefix = stem.clone();
    prefix.push("-");
    let mut others: Vec<(i64, std::path::PathBuf)> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            name != *keep && name.as_encoded_bytes().starts_with(prefix.as_encoded_bytes())
        })
        .filter_map(|e| Some((e.metadata().ok()?.mtime(), e.path())))
        .collect();
    others.sort_by_key(|(mtime, _)| std::cmp::Reverse(*mtime));
    for (_, path) in others.into_iter().skip(KEPT - 1) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the test's own, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("paddock-exec-only-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            // The copies are mode 0111: removing them needs only the directory's write bit.
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_copy_is_made_once_unreadable_and_replaced_when_the_source_changes() {
        let tmp = Scratch::new("made-once");
        let source = tmp.path().join("paddock-supervisor");
        std::fs::write(&source, b"#!/bin/true\n").unwrap();
        let dir = tmp.path().join("exec-only");
        let fd = open_in(&dir, &source).unwrap();
        let meta = File::from(fd).metadata().unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o111, "nobody may read or write it");
        assert_eq!(meta.size(), 12);
        let copies = || {
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        let first = copies();
        assert_eq!(first.len(), 1, "{first:?}");
        assert!(first[0].starts_with("paddock-supervisor-"), "{first:?}");
        // Found again, not made again.
        open_in(&dir, &source).unwrap();
        assert_eq!(copies(), first);
        // A new install: a new copy, the old one kept (two installs in use take no turns).
        std::fs::write(&source, b"#!/bin/true\n# longer\n").unwrap();
        let fd = open_in(&dir, &source).unwrap();
        assert_eq!(File::from(fd).metadata().unwrap().size(), 21);
        let second = copies();
        assert_eq!(second.len(), 2, "{second:?}");
        assert!(second.contains(&first[0]));
        // Beyond a few, the oldest go.
        for extra in 0..5 {
            std::fs::write(&source, vec![b'#'; 30 + extra]).unwrap();
            open_in(&dir, &source).unwrap();
        }
        assert_eq!(copies().len(), KEPT);
    }

    #[test]
    fn a_file_at_the_copys_name_that_paddock_did_not_make_is_made_again() {
        let tmp = Scratch::new("refused");
        let source = tmp.path().join("paddock-supervisor");
        std::fs::write(&source, b"x").unwrap();
        let dir = tmp.path().join("exec-only");
        let fd = open_in(&dir, &source).unwrap();
        drop(fd);
        let copy = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let made_again = || {
            let meta = File::from(open_in(&dir, &source).unwrap()).metadata().unwrap();
            assert!(meta.is_file());
            assert_eq!(meta.mode() & 0o7777, 0o111);
        };
        // Readable: not what executing it needs.
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(open_copy(&copy, 1).unwrap_err().to_string().contains("not a copy paddock made"));
        made_again();
        // Cut short.
        std::fs::remove_file(&copy).unwrap();
        std::fs::write(&copy, b"").unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o111)).unwrap();
        made_again();
        // A link at its name is not followed, and not executed.
        std::fs::remove_file(&copy).unwrap();
        std::os::unix::fs::symlink(&source, &copy).unwrap();
        made_again();
        assert!(!std::fs::symlink_metadata(&copy).unwrap().file_type().is_symlink());
    }
}
