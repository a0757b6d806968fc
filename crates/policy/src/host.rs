//! The questions resolution asks the filesystem, as a trait.
//!
//! The policy crate never touches the filesystem itself: realpath, link reading, directory
//! listing and small file reads go through [`Host`]. The platform crates implement it for
//! the real OS; [`FakeHost`] implements it in memory, which is what makes symlink escapes,
//! dangling links and glob expansion testable exactly, on every OS.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::path::AbsPathBuf;

/// What kind of file a path names, without following a final symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A socket, fifo or device.
    Other,
}

/// A failed host query: the path and the OS's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    /// The path asked about.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// The filesystem as resolution sees it.
///
/// Design note: the trait is deliberately small and answers one path at a time. Symlink
/// resolution is done by `resolve` on top of it, component by component, so that the rules
/// about links (a grant may not leave the project through one, a glob hit may not leave its
/// base) are code in this crate, tested once, and not re-implemented per OS.
pub trait Host {
    /// The kind of `path` without following a final symlink; `Ok(None)` if it does not exist.
    fn kind(&self, path: &Path) -> Result<Option<FileKind>, HostError>;
    /// The target of the symlink at `path`, as stored.
    fn read_link(&self, path: &Path) -> Result<PathBuf, HostError>;
    /// The names in a directory, sorted.
    fn read_dir(&self, path: &Path) -> Result<Vec<OsString>, HostError>;
    /// The first `limit` bytes of a regular file (for `.git` files that point elsewhere).
    fn read_file(&self, path: &Path, limit: usize) -> Result<Vec<u8>, HostError>;
}

/// An in-memory filesystem for tests: directories, files and symlinks.
#[derive(Clone, Debug, Default)]
pub struct FakeHost {
    nodes: BTreeMap<PathBuf, FakeNode>,
}

#[derive(Clone, Debug)]
enum FakeNode {
    Dir,
    File(Vec<u8>),
    Symlink(PathBuf),
}

impl FakeHost {
    /// An empty filesystem holding only `/`.
    pub fn new() -> FakeHost {
        let mut nodes = BTreeMap::new();
        nodes.insert(PathBuf::from("/"), FakeNode::Dir);
        FakeHost { nodes }
    }

    /// Adds a directory and its missing parents.
    pub fn dir(mut self, path: &str) -> FakeHost {
        self.add_parents(Path::new(path));
        self.nodes.insert(PathBuf::from(path), FakeNode::Dir);
        self
    }

    /// Adds a file with contents, and its missing parent directories.
    pub fn file(mut self, path: &str, contents: &str) -> FakeHost {
        self.add_parents(Path::new(path));
        self.nodes.insert(PathBuf::from(path), FakeNode::File(contents.as_bytes().to_vec()));
        self
    }

    /// Adds a symlink `path -> target` (the target need not exist).
    pub fn symlink(mut self, path: &str, target: &str) -> FakeHost {
        self.add_parents(Path::new(path));
        self.nodes.insert(PathBuf::from(path), FakeNode::Symlink(PathBuf::from(target)));
        self
    }

    fn add_parents(&mut self, path: &Path) {
        for parent in path.ancestors().skip(1) {
            self.nodes.entry(parent.to_path_buf()).or_insert(FakeNode::Dir);
        }
    }

    fn missing(path: &Path) -> HostError {
        HostError { path: path.to_path_buf(), message: "No such file or directory".to_owned() }
    }

    /// Follows symlinks in the parent components so that the fake answers like a real
    /// filesystem does for `lstat` of a path whose parents are links.
    fn physical(&self, path: &Path) -> Option<PathBuf> {
        let mut cur = PathBuf::from("/");
        let comps: Vec<_> = path.components().skip(1).collect();
        for (i, comp) in comps.iter().enumerate() {
            cur.push(comp.as_os_str());
            let last = i + 1 == comps.len();
            if last {
                continue;
            }
            let mut hops = 0;
            while let Some(FakeNode::Symlink(target)) = self.nodes.get(&cur) {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                let base = cur.parent().map(Path::to_path_buf).unwrap_or_default();
                let joined = base.join(target);
                cur = AbsPathBuf::new_lexical(&joined)?.into_path_buf();
            }
        }
        Some(cur)
    }
}

impl Host for FakeHost {
    fn kind(&self, path: &Path) -> Result<Option<FileKind>, HostError> {
        let Some(p) = self.physical(path) else { return Ok(None) };
        Ok(self.nodes.get(&p).map(|n| match n {
            FakeNode::Dir => FileKind::Dir,
            FakeNode::File(_) => FileKind::File,
            FakeNode::Symlink(_) => FileKind::Symlink,
        }))
    }

    fn read_link(&self, path: &Path) -> Result<PathBuf, HostError> {
        let p = self.physical(path).ok_or_else(|| FakeHost::missing(path))?;
        match self.nodes.get(&p) {
            Some(FakeNode::Symlink(t)) => Ok(t.clone()),
            _ => {
                Err(HostError { path: path.to_path_buf(), message: "Invalid argument".to_owned() })
            }
        }
    }

    fn read_dir(&self, path: &Path) -> Result<Vec<OsString>, HostError> {
        let p = self.physical(path).ok_or_else(|| FakeHost::missing(path))?;
        match self.nodes.get(&p) {
            Some(FakeNode::Dir) => {}
            _ => return Err(FakeHost::missing(path)),
        }
        Ok(self
            .nodes
            .keys()
            .filter(|k| k.parent() == Some(p.as_path()) && k.as_path() != p)
            .filter_map(|k| k.file_name().map(|n| n.to_os_string()))
            .collect())
    }

    fn read_file(&self, path: &Path, limit: usize) -> Result<Vec<u8>, HostError> {
        let p = self.physical(path).ok_or_else(|| FakeHost::missing(path))?;
        match self.nodes.get(&p) {
            Some(FakeNode::File(c)) => Ok(c[..c.len().min(limit)].to_vec()),
            Some(FakeNode::Symlink(_)) => {
                let target = self.read_link(&p)?;
                let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
                self.read_file(&base.join(target), limit)
            }
            _ => Err(FakeHost::missing(path)),
        }
    }
}
