//! The real filesystem behind the policy crate's [`Host`] trait.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use paddock_policy::{FileKind, Host, HostError};

/// Answers resolution's questions from the OS, one `lstat`/`readlink`/`readdir` at a time.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealHost;

fn error(path: &Path, e: &std::io::Error) -> HostError {
    HostError { path: path.to_path_buf(), message: e.to_string() }
}

impl Host for RealHost {
    fn kind(&self, path: &Path) -> Result<Option<FileKind>, HostError> {
        match std::fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(kind_of(m.file_type()))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            // A path we may not look at is, for resolution, one that is not there: it can
            // be neither granted nor followed.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
            Err(e) => Err(error(path, &e)),
        }
    }

    fn read_link(&self, path: &Path) -> Result<PathBuf, HostError> {
        std::fs::read_link(path).map_err(|e| error(path, &e))
    }

    fn read_dir(&self, path: &Path) -> Result<Vec<OsString>, HostError> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| error(path, &e))? {
            names.push(entry.map_err(|e| error(path, &e))?.file_name());
        }
        names.sort();
        Ok(names)
    }

    fn read_file(&self, path: &Path, limit: usize) -> Result<Vec<u8>, HostError> {
        let file = std::fs::File::open(path).map_err(|e| error(path, &e))?;
        let mut out = Vec::new();
        file.take(limit as u64).read_to_end(&mut out).map_err(|e| error(path, &e))?;
        Ok(out)
    }
}

/// [`RealHost`] that remembers its `lstat` and `readlink` answers, for one resolution:
/// canonicalizing each rule walks the same ancestors (`/`, the home directory, the project)
/// again, which is most of the syscalls on the spawn path. Failures are not remembered.
/// Use a fresh one per resolution: it never sees changes made after its first answer.
///
/// A directory asked about [`LIST_AFTER`] times (the secret locations in the home
/// directory, the protected names in the project: about sixty `lstat`s, most of them of
/// names that do not exist) is listed once instead, and its entries' kinds come from the
/// listing (`d_type`; an entry of unknown type is still asked with `lstat`).
#[derive(Debug, Default)]
pub struct CachedHost {
    kinds: RefCell<HashMap<PathBuf, Option<FileKind>>>,
    links: RefCell<HashMap<PathBuf, PathBuf>>,
    /// Per directory: how many of its entries were asked about, or its listing.
    children: RefCell<HashMap<PathBuf, Children>>,
    /// Placeholders of other live runs: missing to this one.
    foreign: Vec<PathBuf>,
}

/// How many entries of one directory are looked up one by one before it is listed.
pub const LIST_AFTER: u32 = 3;

/// What [`CachedHost`] knows of a directory's entries.
#[derive(Debug)]
enum Children {
    /// Entries asked about so far.
    Asked(u32),
    /// Its entries: name to kind (`None`: the listing did not say).
    Listed(HashMap<OsString, Option<FileKind>>),
    /// It cannot be listed (no read permission): entries are looked up one by one.
    Unlistable,
}

/// The kind a directory entry's or `lstat`'s file type names (a link is a link).
pub(crate) fn kind_of(t: std::fs::FileType) -> FileKind {
    if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

/// `dir`'s entries and their kinds as the listing gives them, without an `lstat` each.
fn list(dir: &Path) -> Option<HashMap<OsString, Option<FileKind>>> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        // std answers from the entry's `d_type`; it stats only when that is unknown, which
        // the file system says for every entry or none.
        out.insert(entry.file_name(), entry.file_type().ok().map(kind_of));
    }
    Some(out)
}

impl CachedHost {
    /// The kind of `path` from its parent's listing, when the parent is (or now gets)
    /// listed: `Some(answer)`, or `None` to look it up.
    fn listed_kind(&self, path: &Path) -> Option<Option<FileKind>> {
        let (parent, name) = (path.parent()?, path.file_name()?);
        let mut children = self.children.borrow_mut();
        let known = children.entry(parent.to_path_buf()).or_insert(Children::Asked(0));
        if let Children::Asked(n) = known {
            *n += 1;
            if *n >= LIST_AFTER {
                *known = list(parent).map_or(Children::Unlistable, Children::Listed);
            }
        }
        match known {
            Children::Listed(entries) => match entries.get(name) {
                None => Some(None),
                Some(Some(kind)) => Some(Some(*kind)),
                Some(None) => None,
            },
            Children::Asked(_) | Children::Unlistable => None,
        }
    }
}

impl CachedHost {
    /// A host on which `foreign` (other live runs' placeholders, see
    /// `runtime_dir::sweep_stale`) and what is under them are missing: this run then plans
    /// its own placeholder there and, finding it made, binds it as it is.
    pub fn with_foreign(foreign: Vec<PathBuf>) -> CachedHost {
        CachedHost { foreign, ..CachedHost::default() }
    }
}

impl Host for CachedHost {
    fn kind(&self, path: &Path) -> Result<Option<FileKind>, HostError> {
        if let Some(kind) = self.kinds.borrow().get(path) {
            return Ok(*kind);
        }
        if self.foreign.iter().any(|f| path.starts_with(f)) {
            return Ok(None);
        }
        let kind = match self.listed_kind(path) {
            Some(kind) => kind,
            None => RealHost.kind(path)?,
        };
        self.kinds.borrow_mut().insert(path.to_path_buf(), kind);
        Ok(kind)
    }

    fn read_link(&self, path: &Path) -> Result<PathBuf, HostError> {
        if let Some(target) = self.links.borrow().get(path) {
            return Ok(target.clone());
        }
        let target = RealHost.read_link(path)?;
        self.links.borrow_mut().insert(path.to_path_buf(), target.clone());
        Ok(target)
    }

    fn read_dir(&self, path: &Path) -> Result<Vec<OsString>, HostError> {
        RealHost.read_dir(path)
    }

    fn read_file(&self, path: &Path, limit: usize) -> Result<Vec<u8>, HostError> {
        RealHost.read_file(path, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_runs_placeholders_and_what_is_under_them_are_missing() {
        let dir = std::env::temp_dir().join(format!("paddock-foreign-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        let host = CachedHost::with_foreign(vec![dir.join(".git")]);
        assert_eq!(host.kind(&dir.join(".git")).unwrap(), None);
        assert_eq!(host.kind(&dir.join(".git/hooks")).unwrap(), None);
        assert_eq!(host.kind(&dir).unwrap(), Some(FileKind::Dir));
        // A sibling whose name starts the same is not under it.
        std::fs::create_dir_all(dir.join(".gitx")).unwrap();
        assert_eq!(host.kind(&dir.join(".gitx")).unwrap(), Some(FileKind::Dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_asked_about_often_is_listed_and_answers_as_lstat_would() {
        let dir = std::env::temp_dir().join(format!("paddock-list-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        std::os::unix::fs::symlink("f", dir.join("l")).unwrap();
        std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
        let cached = CachedHost::default();
        let names = ["missing1", "missing2", "missing3", "d", "f", "l", "dangling", "missing4"];
        for name in names {
            let p = dir.join(name);
            assert_eq!(cached.kind(&p).unwrap(), RealHost.kind(&p).unwrap(), "{name}");
        }
        assert!(
            matches!(cached.children.borrow().get(&dir), Some(Children::Listed(_))),
            "listed after {LIST_AFTER} questions"
        );
        // Answered from the listing: a file made since is not seen (one resolution sees one
        // state), and what is under a listed entry is still looked up.
        std::fs::write(dir.join("late"), "").unwrap();
        assert_eq!(cached.kind(&dir.join("late")).unwrap(), None);
        std::fs::write(dir.join("d/inner"), "").unwrap();
        assert_eq!(cached.kind(&dir.join("d/inner")).unwrap(), Some(FileKind::File));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cached_answers_match_the_real_ones_and_are_remembered() {
        let dir = std::env::temp_dir().join(format!("paddock-host-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        let link = dir.join("l");
        std::fs::write(&file, "x").unwrap();
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("f", &link).unwrap();
        let cached = CachedHost::default();
        for p in [&dir, &file, &link, &dir.join("missing")] {
            assert_eq!(cached.kind(p).unwrap(), RealHost.kind(p).unwrap(), "{}", p.display());
        }
        assert_eq!(cached.read_link(&link).unwrap(), PathBuf::from("f"));
        assert_eq!(cached.read_dir(&dir).unwrap(), RealHost.read_dir(&dir).unwrap());
        // Remembered: the answers outlive the files.
        std::fs::remove_file(&file).unwrap();
        std::fs::remove_file(&link).unwrap();
        assert_eq!(cached.kind(&file).unwrap(), Some(FileKind::File));
        assert_eq!(cached.kind(&link).unwrap(), Some(FileKind::Symlink));
        assert_eq!(cached.read_link(&link).unwrap(), PathBuf::from("f"));
        assert_eq!(RealHost.kind(&file).unwrap(), None);
        // Failures are not remembered.
        assert!(cached.read_link(&file).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
