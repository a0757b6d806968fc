//! Placeholders: the empty files and directories made for missing protected names, bound
//! read-only in the sandbox for the task's lifetime (DESIGN decision 8), and the manifest
//! that lists them in the runtime dir for a sweep after a `kill -9`.
//!
//! Each is made without following links and removed only if still the empty one this run
//! made; with spares ([`crate::runtime::runtime_dir::spares`]) it is renamed in and out instead. A placeholder
//! another live run binds is left for the last run out ([`crate::runtime::runtime_dir`]).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::Placeholder;

use crate::runtime::runtime_dir::spares::{Spares, Stamp};

/// File name of the placeholder manifest inside a runtime dir.
pub const PLACEHOLDER_MANIFEST: &str = "placeholders";

/// Placeholders created for a task: removed on drop, each only if it is still the empty
/// file or directory paddock created (same inode, still empty).
#[derive(Debug, Default)]
pub struct Placeholders {
    created: Vec<(PathBuf, bool, Stamp)>,
    /// What the manifest lists: the placeholders wanted, and the directories above one that
    /// vanished since resolution and were made again ([`Placeholders::make`]).
    listed: Vec<(PathBuf, bool)>,
    runtime_dir: Option<PathBuf>,
    spares: Spares,
    /// Whether one was found made since resolution and borrowed ([`Made::Borrowed`]).
    borrowed: bool,
}

impl Placeholders {
    /// Records `wanted` in the manifest (when a runtime dir is given), then creates each
    /// without following symlinks (`O_CREAT | O_EXCL | O_NOFOLLOW`, `mkdir`), so that a link
    /// planted where a placeholder goes is never written through (SYM-04).
    pub fn create(wanted: &[Placeholder], runtime_dir: Option<&Path>) -> Result<Placeholders> {
        let mut out = Placeholders::begin(wanted, runtime_dir)?;
        out.make(wanted)?;
        out.finish()?;
        Ok(out)
    }

    /// [`Placeholders::create`] in steps: records every placeholder the run will make in
    /// the manifest; [`Placeholders::make`] then makes them (in as many calls as the
    /// caller likes) and [`Placeholders::finish`] settles the manifest.
    pub fn begin(wanted: &[Placeholder], runtime_dir: Option<&Path>) -> Result<Placeholders> {
        let mut out = Placeholders {
            created: Vec::new(),
            listed: wanted.iter().map(|p| (p.path.as_path().to_path_buf(), p.dir)).collect(),
            runtime_dir: runtime_dir.map(Path::to_path_buf),
            spares: Spares::none(),
            borrowed: false,
        };
        if let (false, Some(dir)) = (wanted.is_empty(), runtime_dir) {
            write_manifest(dir, wanted)?;
            // Spares are a run's: without a runtime dir (tests, `plan`) nothing is kept.
            out.spares = Spares::list(&crate::runtime::runtime_dir::base());
        }
        Ok(out)
    }

    /// Makes (or borrows) each of `wanted`, which [`Placeholders::begin`] recorded. On an
    /// error the caller drops `self`, which removes what it made.
    ///
    /// A placeholder whose directory vanished since resolution gets that directory made
    /// again first (see `make_vanished_dirs`).
    pub fn make(&mut self, wanted: &[Placeholder]) -> Result<()> {
        for p in wanted {
            let path = p.path.as_path();
            let made = match self.make_one(path, p.dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.make_vanished_dirs(path).and_then(|()| self.make_one(path, p.dir))
                }
                made => made,
            };
            made.with_context(|| {
                format!(
                    "cannot create the placeholder {} for a missing protected or denied path",
                    p.path
                )
            })?;
        }
        Ok(())
    }

    /// Makes or borrows the placeholder at `path` and records whose it is.
    fn make_one(&mut self, path: &Path, dir: bool) -> std::io::Result<()> {
        match make_or_borrow(path, dir, self.runtime_dir.as_deref(), &mut self.spares)? {
            Made::Here(stamp) => self.created.push((path.to_path_buf(), dir, stamp)),
            Made::Borrowed => self.borrowed = true,
        }
        Ok(())
    }

    /// Makes again, as this run's placeholders, the directories above `path` that are gone:
    /// resolution found them (another run's placeholder, a `.git` made and removed again
    /// while this run resolved, too quickly for it to be listed when this run looked), and
    /// the plan made its placeholders inside them. Listed in the manifest first, as every
    /// placeholder is; borrowed if another run made one meanwhile. At most
    /// [`MAX_VANISHED`] levels, below a directory that is there.
    fn make_vanished_dirs(&mut self, path: &Path) -> std::io::Result<()> {
        let gone = |p: &Path| {
            std::fs::symlink_metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        };
        let mut vanished: Vec<PathBuf> =
            path.ancestors().skip(1).take_while(|p| gone(p)).map(Path::to_path_buf).collect();
        let below_a_dir = vanished
            .last()
            .and_then(|top| top.parent())
            .is_some_and(|there| std::fs::symlink_metadata(there).is_ok_and(|m| m.is_dir()));
        if vanished.len() > MAX_VANISHED || !below_a_dir {
            return Err(std::io::ErrorKind::NotFound.into());
        }
        vanished.reverse();
        self.listed.extend(vanished.iter().map(|p| (p.clone(), true)));
        if let Some(dir) = &self.runtime_dir {
            write_manifest_of(dir, self.listed.iter().map(|(p, d)| (p.as_path(), *d)))
                .map_err(std::io::Error::other)?;
        }
        for dir in &vanished {
            self.make_one(dir, true)?;
        }
        Ok(())
    }

    /// Once every placeholder is made: the manifest (written before anything was made, for
    /// a sweep after a kill -9) lists only this run's own when it borrowed one, since a
    /// sweep must not remove a live run's placeholder.
    pub fn finish(&mut self) -> Result<()> {
        if let (true, Some(dir)) = (self.borrowed, &self.runtime_dir) {
            write_manifest_of(dir, self.created.iter().map(|(p, d, _)| (p.as_path(), *d)))?;
        }
        Ok(())
    }
}

/// Whose a placeholder is.
enum Made {
    /// Made by this run (with its stamp), which removes it.
    Here(Stamp),
    /// Found made since this run resolved (a concurrent run's, or the user's): bound as it
    /// is, not this run's to remove.
    Borrowed,
}

/// Makes the placeholder at `path`, or borrows one found made since resolution: of the right
/// kind and not a link, recorded as used first (in `runtime_dir`'s lock file), so that its
/// maker leaves it while this run lives (`runtime_dir::release_placeholders`). Gone again
/// in between (its maker removed it first), it is made here after all, or borrowed from the
/// run that made it again meanwhile: [`MAKE_TRIES`] rounds, each lost only to another run's
/// progress. Anything else at the name (a link, the other kind) fails the run.
fn make_or_borrow(
    path: &Path,
    dir: bool,
    runtime_dir: Option<&Path>,
    spares: &mut Spares,
) -> std::io::Result<Made> {
    let mut lost = None;
    for _ in 0..MAKE_TRIES {
        let exists = match make_placeholder(path, dir, spares) {
            Ok(stamp) => return Ok(Made::Here(stamp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => e,
            Err(e) => return Err(e),
        };
        let Some(runtime_dir) = runtime_dir else { return Err(exists) };
        // Recorded and checked under the release lock, which a release holds from its look
        // at the live runs' uses to its last removal: it either sees this use and keeps the
        // placeholder, or removed it before the check, and this run makes its own.
        // Unserialized, a removal between the check and the bind failed the run's bwrap
        // ("Can't find source path").
        let serial = crate::runtime::runtime_dir::release_lock();
        if is_kind(path, dir) {
            record_use(runtime_dir, path)?;
            return Ok(Made::Borrowed);
        }
        let gone = std::fs::symlink_metadata(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        drop(serial);
        if !gone {
            return Err(exists);
        }
        lost = Some(exists);
    }
    Err(lost.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
}

/// How many times [`make_or_borrow`] tries to make or borrow one placeholder.
const MAKE_TRIES: usize = 8;

/// How many vanished directories above one placeholder are made again
/// ([`Placeholders::make_vanished_dirs`]): a protected name is at most a few levels below
/// the directory its placeholder is in (`.git/info/attributes`).
const MAX_VANISHED: usize = 4;

/// Makes one placeholder, never through a symlink: a spare renamed into place without
/// replacing anything (`RENAME_NOREPLACE`), else `mkdir`, or an empty file with
/// `O_CREAT | O_EXCL | O_NOFOLLOW`. Returns its stamp.
fn make_placeholder(path: &Path, dir: bool, spares: &mut Spares) -> std::io::Result<Stamp> {
    if let Some(stamp) = spares.place(path, dir)? {
        return Ok(stamp);
    }
    if dir {
        std::fs::create_dir(path)?;
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            // Unreadable as well as unwritable: the task runs without capabilities, so a
            // placeholder (or the masked file over a hidden one) reads as EACCES.
            .mode(0o000)
            .open(path)?;
    }
    Ok(std::fs::symlink_metadata(path).map(|m| Stamp::of(&m)).unwrap_or_default())
}

/// Whether `path` is a directory (`dir`) or a regular file, itself and not a symlink.
fn is_kind(path: &Path, dir: bool) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| if dir { m.is_dir() } else { m.is_file() })
}

/// Adds `path` to the paths the run in `runtime_dir` binds (its lock file's list), right
/// after the records there, before the padding ([`crate::runtime::runtime_dir::overwrite`]
/// writes over the records only, so nothing may follow the padding).
pub(super) fn record_use(runtime_dir: &Path, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(runtime_dir.join(crate::runtime::runtime_dir::LOCK_FILE))?;
    let end = crate::runtime::runtime_dir::records_end(&lock)?;
    let record = manifest_bytes(std::iter::once((path, false)));
    lock.write_all_at(&record, u64::try_from(end).unwrap_or(u64::MAX))
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        // Removed now, or by the last run alive (another sandbox may have them bound).
        crate::runtime::runtime_dir::release_placeholders(
            &self.created,
            self.runtime_dir.as_deref(),
            &mut self.spares,
        );
    }
}

/// Removes a placeholder only if it is still the empty file or directory with the inode of
/// `stamp` ([`Stamp::ANY`]: any empty one, for a sweep that never knew the inode).
///
/// Returns false for a directory left because it is not empty: a concurrent run may have
/// made its own placeholders in it (this run's `.git`, another's `.git/hooks`), or someone
/// wrote into it.
pub fn remove_placeholder(path: &Path, dir: bool, stamp: Stamp) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return true };
    if stamp.ino != 0 && meta.ino() != stamp.ino {
        return true;
    }
    if dir && meta.is_dir() {
        // rmdir refuses a directory that is not empty.
        return match std::fs::remove_dir(path) {
            Err(e) => e.raw_os_error() != Some(libc::ENOTEMPTY),
            Ok(()) => true,
        };
    } else if !dir && meta.is_file() && meta.len() == 0 {
        let _ = std::fs::remove_file(path);
    }
    true
}

/// A manifest's bytes: `d PATH\0` or `f PATH\0` per placeholder.
pub fn manifest_bytes<'a>(entries: impl Iterator<Item = (&'a Path, bool)>) -> Vec<u8> {
    let mut text = Vec::new();
    for (path, dir) in entries {
        text.extend_from_slice(if dir { b"d " } else { b"f " });
        text.extend_from_slice(path.as_os_str().as_bytes());
        text.push(0);
    }
    text
}

fn write_manifest(dir: &Path, wanted: &[Placeholder]) -> Result<()> {
    write_manifest_of(dir, wanted.iter().map(|p| (p.path.as_path(), p.dir)))
}

fn write_manifest_of<'a>(
    dir: &Path,
    entries: impl Iterator<Item = (&'a Path, bool)>,
) -> Result<()> {
    let text = manifest_bytes(entries);
    let path = dir.join(PLACEHOLDER_MANIFEST);
    // Written aside and renamed over: concurrent runs read it (their resolution takes the
    // listed placeholders for another run's), and a rewrite read half-done (empty after the
    // truncation) made them take this run's `.git` for the user's repository, make their own
    // `.git/hooks` inside it, and so keep it from being removed. The aside file of a pooled
    // runtime dir is the last run's manifest (`runtime_dir::RuntimeDir::pool`), overwritten
    // in place: no inode is made or freed per run (on ext4 every new inode scans past those
    // freed in the last 30 s), and the rename replaces nothing (replacing a file makes ext4
    // write the new one out first) but in a second write of one run.
    let aside = dir.join(MANIFEST_ASIDE);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&aside)
        .with_context(|| format!("cannot write {}", aside.display()))?;
    // No fsync: the manifest must survive a kill -9 of paddock, which the page cache already
    // guarantees; a crash of the machine empties the runtime base anyway.
    crate::runtime::runtime_dir::overwrite(&f, &text)
        .with_context(|| format!("cannot write {}", aside.display()))?;
    std::fs::rename(&aside, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Where the manifest is written before it is renamed into place.
pub const MANIFEST_ASIDE: &str = ".placeholders";

/// Reads a placeholder manifest: `(path, dir)` pairs.
pub fn read_manifest(dir: &Path) -> Vec<(PathBuf, bool)> {
    std::fs::read(dir.join(PLACEHOLDER_MANIFEST)).map(|b| parse_manifest(&b)).unwrap_or_default()
}

/// Parses a manifest's bytes ([`manifest_bytes`]).
pub fn parse_manifest(bytes: &[u8]) -> Vec<(PathBuf, bool)> {
    use std::os::unix::ffi::OsStringExt;
    bytes
        .split(|b| *b == 0)
        .filter_map(|rec| {
            let (kind, path) = (rec.get(..2)?, rec.get(2..)?);
            let path = PathBuf::from(std::ffi::OsString::from_vec(path.to_vec()));
            path.is_absolute().then_some((path, kind == b"d "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_policy::AbsPathBuf;

    #[test]
    fn placeholders_are_recorded_created_and_removed_only_if_untouched() {
        let base = std::env::temp_dir().join(format!("paddock-exec-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let a = base.join("hooks");
        let b = base.join(".bashrc");
        let wanted = vec![
            Placeholder { path: AbsPathBuf::new_lexical(&a).unwrap(), dir: true },
            Placeholder { path: AbsPathBuf::new_lexical(&b).unwrap(), dir: false },
        ];
        let holders = Placeholders::create(&wanted, Some(&base)).unwrap();
        assert!(a.is_dir() && b.is_file());
        assert_eq!(read_manifest(&base), vec![(a.clone(), true), (b.clone(), false)]);
        // Someone wrote into one of them: it stays.
        std::fs::write(a.join("user-file"), "x").unwrap();
        drop(holders);
        assert!(a.join("user-file").exists());
        assert!(!b.exists());
        // A symlink where a placeholder goes is never followed.
        std::os::unix::fs::symlink(base.join("target"), &b).unwrap();
        assert!(Placeholders::create(&wanted[1..], None).is_err());
        assert!(!base.join("target").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_directory_that_vanished_since_resolution_is_made_again_listed_and_removed() {
        // Resolution found `.git` (another run's placeholder, removed again before this run
        // looked at the live runs' manifests) and planned `.git/config` inside it.
        let base =
            std::env::temp_dir().join(format!("paddock-vanished-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let runtime = base.join("runtime");
        let project = base.join("proj");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let config = project.join(".git/config");
        let wanted =
            vec![Placeholder { path: AbsPathBuf::new_lexical(&config).unwrap(), dir: false }];
        let holders = Placeholders::create(&wanted, Some(&runtime)).unwrap();
        assert!(config.is_file());
        // Listed, so that other runs take it for a placeholder, not for a repository.
        assert_eq!(
            read_manifest(&runtime),
            vec![(config.clone(), false), (project.join(".git"), true)]
        );
        drop(holders);
        assert!(!project.join(".git").exists(), "the directory made again was left behind");
        // Not below a directory (a file where one was), or too deep: it fails as before.
        std::fs::write(base.join("file"), "").unwrap();
        let under_a_file = AbsPathBuf::new_lexical(base.join("file/.git/config")).unwrap();
        let deep = AbsPathBuf::new_lexical(project.join("a/b/c/d/e/config")).unwrap();
        for path in [under_a_file, deep] {
            let err = Placeholders::create(&[Placeholder { path, dir: false }], None).unwrap_err();
            assert!(err.to_string().contains("cannot create the placeholder"), "{err}");
        }
        assert!(!project.join("a").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
