//! Spare placeholders: the empty directories and files of runs that ended, kept in the
//! runtime base (`spares/`) and renamed into place as the next run's placeholders instead
//! of being made and removed again.
//!
//! A run makes a placeholder for every missing protected name (18 in an empty project) and
//! removes it when the sandbox is gone. Making and removing are the costly half of a short
//! run on some file systems: ext4 without a journal scans past every inode freed in the
//! last 30 seconds before it hands out a new one, and with `discard` removing a directory
//! waits for the device to discard its block (50-160 us each, measured on this project's CI
//! machines). A rename does neither: the inode and its block stay allocated.
//!
//! Renames work only within one mount: where the runtime base and the project are on
//! different mounts, the first `EXDEV` turns the spares off for the run and placeholders
//! are made and removed as before.
//!
//! Only an untouched placeholder is kept. Each entry's name carries its inode and
//! modification time ([`Stamp`]); a directory's mtime changes when an entry is added to it
//! or removed, a file's when it is written. A placeholder whose stamp changed during the run
//! (someone on the host wrote into it) is left to the ordinary removal, which leaves a
//! non-empty directory where it is. A spare whose stamp no longer matches its name (written
//! through a descriptor opened before it was kept) is removed, never placed: what was
//! written into a removed placeholder is lost either way.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The spares directory's name in the runtime base.
pub const SPARES_DIR: &str = "spares";

/// How many spares of each kind are kept; more are removed as before.
const MAX_PER_KIND: usize = 64;

/// A placeholder's identity when it was made: its inode and modification time. The same
/// stamp later means nobody added to, removed from or wrote into it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// The inode number; 0 for "any" (a sweep that never knew it).
    pub ino: u64,
    /// The modification time, seconds and nanoseconds.
    pub mtime: (i64, i64),
}

impl Stamp {
    /// Matches any placeholder: the sweep of a killed run only knows paths.
    pub const ANY: Stamp = Stamp { ino: 0, mtime: (0, 0) };

    /// The stamp of `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp { ino: meta.ino(), mtime: (meta.mtime(), meta.mtime_nsec()) }
    }

    /// A spare's file name: kind, inode, mtime.
    fn name(self, dir: bool) -> OsString {
        let kind = if dir { 'd' } else { 'f' };
        OsString::from(format!("{kind}-{}-{}.{}", self.ino, self.mtime.0, self.mtime.1))
    }

    /// Reads a spare's file name back: `(dir, stamp)`.
    fn parse(name: &[u8]) -> Option<(bool, Stamp)> {
        let text = std::str::from_utf8(name).ok()?;
        let (kind, rest) = text.split_once('-')?;
        let dir = match kind {
            "d" => true,
            "f" => false,
            _ => return None,
        };
        let (ino, mtime) = rest.split_once('-')?;
        let (sec, nsec) = mtime.split_once('.')?;
        let stamp =
            Stamp { ino: ino.parse().ok()?, mtime: (sec.parse().ok()?, nsec.parse().ok()?) };
        Some((dir, stamp))
    }
}

/// Whether `meta` is still the empty placeholder `stamp` describes, of kind `dir`.
fn untouched(meta: &std::fs::Metadata, dir: bool, stamp: Stamp) -> bool {
    let kind =
        if dir { meta.is_dir() && meta.nlink() == 2 } else { meta.is_file() && meta.len() == 0 };
    kind && Stamp::of(meta) == stamp
}

/// Whether a directory's stamp is too young to prove it empty: where timestamps are coarse
/// (a clock tick, before Linux 6.13's fine-grained ones), an entry added within the tick
/// that made the directory leaves its mtime as it was. A spare is always older: kept at the
/// end of a run, it is placed again at the earliest by the next.
fn too_young(stamp: Stamp) -> bool {
    let made = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            u64::try_from(stamp.mtime.0).unwrap_or(0),
            u32::try_from(stamp.mtime.1).unwrap_or(0),
        );
    made.elapsed().map_or(true, |age| age < std::time::Duration::from_secs(2))
}

/// Removes the file or directory tree at `path` (as `meta` describes it), never following a
/// link; a failure leaves it.
fn remove_entry(path: &Path, meta: &std::fs::Metadata) {
    let _ = if meta.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
}

/// Whether the directory at `path` has no entries (false when it cannot be read).
fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

/// The spares of one run: listed once when its placeholders are made, taken from and given
/// back to by name.
#[derive(Debug, Default)]
pub struct Spares {
    /// `BASE/spares`, or `None` when it cannot be used (not ours, cannot be made, or on
    /// another mount than a placeholder).
    dir: Option<PathBuf>,
    dirs: Vec<(OsString, Stamp)>,
    files: Vec<(OsString, Stamp)>,
    /// How many of each kind the directory held when listed, less those taken: the cap.
    kept_dirs: usize,
    kept_files: usize,
}

impl Spares {
    /// No spares: placeholders are made and removed.
    pub fn none() -> Spares {
        Spares::default()
    }

    /// The spares in `base` (made private there if missing).
    pub fn list(base: &Path) -> Spares {
        let dir = base.join(SPARES_DIR);
        if crate::runtime::runtime_dir::ensure_private_dir(&dir).is_err() {
            return Spares::none();
        }
        let mut out = Spares::none();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            match Stamp::parse(entry.file_name().as_bytes()) {
                Some((true, stamp)) => out.dirs.push((entry.file_name(), stamp)),
                Some((false, stamp)) => out.files.push((entry.file_name(), stamp)),
                None => {}
            }
        }
        out.kept_dirs = out.dirs.len();
        out.kept_files = out.files.len();
        out.dir = Some(dir);
        out
    }

    /// Renames a spare of kind `dir` to `path`, never over anything there. `Ok(Some)` with
    /// its stamp once placed; `Ok(None)` when there is none to use (the caller makes one);
    /// `AlreadyExists` when something is at `path`, as making it would have said.
    ///
    /// Looked at once placed (one `lstat` rather than one before and one after): a spare
    /// written into since it was kept (through a descriptor opened before) is removed from
    /// `path` again, never used.
    pub fn place(&mut self, path: &Path, dir: bool) -> io::Result<Option<Stamp>> {
        loop {
            let Some(spares) = self.dir.clone() else { return Ok(None) };
            let Some((name, stamp)) = self.pool(dir).pop() else { return Ok(None) };
            let from = spares.join(&name);
            match rename_noreplace(&from, path) {
                Ok(()) => {
                    self.forget(dir);
                    match std::fs::symlink_metadata(path) {
                        Ok(meta) if untouched(&meta, dir, stamp) => return Ok(Some(stamp)),
                        // The spare, written into: removed, what was written lost as it
                        // would have been with the placeholder removed.
                        Ok(meta) if meta.ino() == stamp.ino => remove_entry(path, &meta),
                        // Not the spare's inode: a spare swapped for something else (a link)
                        // in the spares directory. Moved back there and removed; if that
                        // fails, something was put at `path` meanwhile: not ours to touch.
                        Ok(meta) => {
                            if rename_noreplace(path, &from).is_err() {
                                return Err(io::Error::from(io::ErrorKind::AlreadyExists));
                            }
                            remove_entry(&from, &meta);
                        }
                        Err(_) => {}
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    // Another run took it between the look and the rename, or `path`'s
                    // parent is missing: making it says which.
                    if from.exists() {
                        self.pool(dir).push((name, stamp));
                        return Ok(None);
                    }
                    self.forget(dir);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    self.pool(dir).push((name, stamp));
                    return Err(e);
                }
                Err(e) => {
                    self.pool(dir).push((name, stamp));
                    self.off_if_cross_device(&e);
                    return Ok(None);
                }
            }
        }
    }

    /// Moves the placeholder at `path` into the spares if it is still the one `stamp`
    /// describes, untouched. True when it is gone from `path`; false leaves it to the
    /// ordinary removal.
    pub fn keep(&mut self, path: &Path, dir: bool, stamp: Stamp) -> bool {
        let Some(spares) = self.dir.clone() else { return false };
        let count = if dir { self.kept_dirs } else { self.kept_files };
        if stamp.ino == 0 || count >= MAX_PER_KIND {
            return false;
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if untouched(&meta, dir, stamp) => {}
            _ => return false,
        }
        if dir && too_young(stamp) && !is_empty_dir(path) {
            return false;
        }
        let to = spares.join(stamp.name(dir));
        if let Err(e) = rename_noreplace(path, &to) {
            self.off_if_cross_device(&e);
            return false;
        }
        if !dir {
            // A file written between the look and the rename is a tainted spare, removed
            // when next found: what was written is lost, as when a placeholder is removed.
            self.kept_files += 1;
            return true;
        }
        // A directory: an entry made in it between the look and the rename must stay where
        // its maker put it (rmdir would have refused to remove it).
        match std::fs::symlink_metadata(&to) {
            Ok(meta) if untouched(&meta, dir, stamp) => {
                self.kept_dirs += 1;
                true
            }
            // Written into between the look and the rename: put back where its writer
            // expects it, or, if the name was taken meanwhile, left aside under a name no
            // run places or removes.
            _ => {
                if rename_noreplace(&to, path).is_err() {
                    let mut aside = OsString::from("kept-");
                    aside.push(stamp.name(dir));
                    let _ = std::fs::rename(&to, spares.join(aside));
                }
                true
            }
        }
    }

    fn pool(&mut self, dir: bool) -> &mut Vec<(OsString, Stamp)> {
        if dir { &mut self.dirs } else { &mut self.files }
    }

    fn forget(&mut self, dir: bool) {
        let count = if dir { &mut self.kept_dirs } else { &mut self.kept_files };
        *count = count.saturating_sub(1);
    }

    /// A rename across mounts (or a file system without `RENAME_NOREPLACE`) turns the spares
    /// off for the rest of the run.
    fn off_if_cross_device(&mut self, e: &io::Error) {
        if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EINVAL | libc::ENOSYS)) {
            self.dir = None;
        }
    }
}

/// `renameat2(from, to, RENAME_NOREPLACE)`: never replaces what is at `to`, never follows a
/// symlink at either end. A raw system call: not every C library wraps `renameat2`.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that outlive the call, relative to the cwd; the
    // kernel reads nothing else.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("paddock-spares-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("base")).unwrap();
        std::fs::create_dir_all(dir.join("project")).unwrap();
        dir
    }

    fn stamp_of(path: &Path) -> Stamp {
        Stamp::of(&std::fs::symlink_metadata(path).unwrap())
    }

    /// A scratch tree with two fresh placeholders in its project, `.vscode` and `.bashrc`,
    /// and their stamps.
    fn two_placeholders(name: &str) -> (PathBuf, PathBuf, PathBuf, Stamp, Stamp) {
        let t = scratch(name);
        let vscode = t.join("project/.vscode");
        let bashrc = t.join("project/.bashrc");
        std::fs::create_dir(&vscode).unwrap();
        std::fs::write(&bashrc, "").unwrap();
        let (dir_stamp, file_stamp) = (stamp_of(&vscode), stamp_of(&bashrc));
        (t, vscode, bashrc, dir_stamp, file_stamp)
    }

    /// A scratch tree whose project's `.vscode` placeholder was kept as a spare: the tree,
    /// the base, `.vscode`'s path, its stamp, and the spare's path.
    fn kept_vscode(name: &str) -> (PathBuf, PathBuf, PathBuf, Stamp, PathBuf) {
        let t = scratch(name);
        let base = t.join("base");
        let vscode = t.join("project/.vscode");
        std::fs::create_dir(&vscode).unwrap();
        let stamp = stamp_of(&vscode);
        assert!(Spares::list(&base).keep(&vscode, true, stamp));
        let kept = base.join(SPARES_DIR).join(stamp.name(true));
        (t, base, vscode, stamp, kept)
    }

    #[test]
    fn names_carry_kind_inode_and_mtime() {
        let s = Stamp { ino: 42, mtime: (1_700_000_000, 123) };
        assert_eq!(Stamp::parse(s.name(true).as_bytes()), Some((true, s)));
        assert_eq!(Stamp::parse(s.name(false).as_bytes()), Some((false, s)));
        for bad in ["kept-d-1-2.3", "x-1-2.3", "d-1-2", "d--2.3", "f-1-2.x"] {
            assert_eq!(Stamp::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn a_kept_placeholder_is_placed_again_with_its_inode() {
        let (t, vscode, bashrc, dir_stamp, file_stamp) = two_placeholders("cycle");
        let (base, project) = (t.join("base"), t.join("project"));
        let mut spares = Spares::list(&base);
        assert!(spares.keep(&vscode, true, dir_stamp));
        assert!(spares.keep(&bashrc, false, file_stamp));
        assert!(!vscode.exists() && !bashrc.exists());
        // The next run: the same inodes come back, under other names too.
        let mut spares = Spares::list(&base);
        let idea = project.join(".idea");
        assert_eq!(spares.place(&idea, true).unwrap(), Some(dir_stamp));
        assert_eq!(stamp_of(&idea).ino, dir_stamp.ino);
        assert_eq!(spares.place(&bashrc, false).unwrap(), Some(file_stamp));
        // None left: the caller makes the rest.
        assert_eq!(spares.place(&vscode, true).unwrap(), None);
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_placeholder_written_into_is_not_kept() {
        let (t, vscode, bashrc, dir_stamp, file_stamp) = two_placeholders("touched");
        let base = t.join("base");
        // Someone on the host writes into both during the run.
        std::fs::write(vscode.join("settings.json"), "{}").unwrap();
        std::fs::write(&bashrc, "echo hi").unwrap();
        let mut spares = Spares::list(&base);
        assert!(!spares.keep(&vscode, true, dir_stamp));
        assert!(!spares.keep(&bashrc, false, file_stamp));
        assert!(vscode.join("settings.json").exists());
        // Even with the directory's stamp as it was before the write (a write within the
        // clock tick that made it, where timestamps are coarse), a young one is looked into.
        let now = stamp_of(&vscode);
        assert!(!spares.keep(&vscode, true, now));
        assert!(vscode.join("settings.json").exists());
        assert_eq!(std::fs::read(&bashrc).unwrap(), b"echo hi");
        // Nor is one that is not the inode this run made.
        std::fs::remove_file(&bashrc).unwrap();
        std::fs::write(&bashrc, "").unwrap();
        assert!(!spares.keep(&bashrc, false, file_stamp));
        assert!(!spares.keep(&bashrc, false, Stamp::ANY));
        assert!(bashrc.exists());
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_spare_written_into_after_it_was_kept_is_removed_not_placed() {
        let (t, base, vscode, _, kept) = kept_vscode("tainted");
        // A writer that held the directory open writes into it in the spares.
        std::fs::write(kept.join("late"), "x").unwrap();
        let mut spares = Spares::list(&base);
        assert_eq!(spares.place(&vscode, true).unwrap(), None);
        assert!(!vscode.exists() && !kept.exists());
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_spare_swapped_for_a_link_is_never_left_in_place() {
        let (t, base, vscode, _, kept) = kept_vscode("swapped");
        std::fs::remove_dir(&kept).unwrap();
        std::os::unix::fs::symlink(&t, &kept).unwrap();
        let mut spares = Spares::list(&base);
        assert_eq!(spares.place(&vscode, true).unwrap(), None);
        assert!(std::fs::symlink_metadata(&vscode).is_err(), "the link stayed in the project");
        assert!(std::fs::symlink_metadata(&kept).is_err(), "the link stayed in the spares");
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn placing_never_replaces_what_is_there() {
        let t = scratch("noreplace");
        let (base, project) = (t.join("base"), t.join("project"));
        let a = project.join(".idea");
        std::fs::create_dir(&a).unwrap();
        let stamp = stamp_of(&a);
        let mut spares = Spares::list(&base);
        assert!(spares.keep(&a, true, stamp));
        // The user made `.idea` meanwhile (an empty directory a rename could replace), and
        // `.vscode` is a symlink to somewhere else.
        std::fs::create_dir(&a).unwrap();
        let outside = t.join("outside");
        std::fs::create_dir(&outside).unwrap();
        let link = project.join(".vscode");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let mut spares = Spares::list(&base);
        let e = spares.place(&a, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let e = spares.place(&link, true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // The spare is still there for the next placeholder.
        let b = project.join(".claude");
        assert_eq!(spares.place(&b, true).unwrap(), Some(stamp));
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn other_mounts_turn_the_spares_off() {
        // /dev/shm is a tmpfs of its own where it exists; /proc never takes a rename.
        let t = scratch("xdev");
        let base = t.join("base");
        let Ok(shm) = std::fs::metadata("/dev/shm") else { return };
        if shm.dev() == std::fs::metadata(&base).unwrap().dev() {
            paddock_test_support::skip(
                "/dev/shm is on the same file system as the temp dir: no second mount to try",
                None,
            );
            return;
        }
        let elsewhere = PathBuf::from(format!("/dev/shm/paddock-spares-{}", std::process::id()));
        std::fs::create_dir(&elsewhere).unwrap();
        let stamp = stamp_of(&elsewhere);
        let mut spares = Spares::list(&base);
        assert!(!spares.keep(&elsewhere, true, stamp));
        assert!(spares.dir.is_none(), "an EXDEV must turn the spares off");
        assert!(elsewhere.exists());
        std::fs::remove_dir(&elsewhere).unwrap();
        std::fs::remove_dir_all(&t).unwrap();
    }
}
