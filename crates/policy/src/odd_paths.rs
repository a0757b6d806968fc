//! Odd paths at protected names degrade that one path, not the run: each case is one note,
//! and only a policy that cannot be kept at all is refused.
//!
//! - A protected name that is a symbolic link (`.bashrc -> dotfiles/bashrc`, or one an
//!   earlier run planted) stays a link: its target is kept read-only when a write grant
//!   holds it (a missing target gets a placeholder, so a dangling link cannot create it),
//!   and needs nothing when none does (everything outside the grants is read-only). The
//!   link is never followed to grant anything. The link itself is listed as a protected
//!   path of kind `Symlink`: a bind of bubblewrap's would land on the target, so the Linux
//!   runner mounts the link read-only on itself with the new mount API before the sandbox
//!   starts (it can be neither removed nor replaced), and says after the run if it was
//!   removed or replaced all the same (a kernel without that API). A link whose
//!   target holds the write grant itself is refused: keeping that target read-only would
//!   take the grant away.
//! - A protected name below a file (`.git/hooks` when `.git` is a file pointing nowhere)
//!   protects that file, read-only as it is.

use crate::error::{Error, Result};
use crate::host::{FileKind, Host};
use crate::path::AbsPathBuf;
use crate::resolve::canonicalize;
use crate::resolved::{ProtectedPath, ProtectedState, WriteGrant};

/// What to keep read-only for one odd protected path, the directories to pin, and the note.
pub struct Degraded {
    /// The paths kept instead: the link itself (as a link, `Exists` of kind `Symlink`,
    /// which a backend never binds through, and the runner checks after the run) and the path
    /// kept read-only in its place, if any is needed.
    pub protected: Vec<ProtectedPath>,
    /// Directories between its grant and it, to pin.
    pub pinned: Vec<AbsPathBuf>,
    /// The one line that says so.
    pub note: String,
}

/// The first ancestor of `path` below `grant` that exists and is no directory.
pub fn file_ancestor(host: &dyn Host, path: &AbsPathBuf, grant: &AbsPathBuf) -> Option<AbsPathBuf> {
    path.ancestors_below(grant)
        .into_iter()
        .find(|a| matches!(host.kind(a.as_path()), Ok(Some(FileKind::File | FileKind::Other))))
}

/// A protected name below a file: the file is protected instead.
pub fn below_a_file(file: AbsPathBuf, rule: &str) -> Degraded {
    Degraded {
        note: format!(
            "{file} is a file where protected names need a directory (a .git file pointing nowhere?); the file is kept read-only"
        ),
        protected: vec![ProtectedPath {
            path: file,
            rule: rule.to_owned(),
            state: ProtectedState::Exists { kind: FileKind::File },
        }],
        pinned: Vec::new(),
    }
}

/// A protected name that is a symbolic link: its target, read-only where a grant holds it.
pub fn symlinked(
    host: &dyn Host,
    link: &AbsPathBuf,
    rule: &str,
    write: &[WriteGrant],
) -> Result<Degraded> {
    let (target, kind) = canonicalize(host, link.as_path())?;
    let itself = ProtectedPath {
        path: link.clone(),
        rule: rule.to_owned(),
        state: ProtectedState::Exists { kind: FileKind::Symlink },
    };
    let grant = write
        .iter()
        .filter(|g| g.kind == FileKind::Dir && target.starts_with(&g.path))
        .max_by_key(|g| g.path.as_os_str().len());
    let Some(grant) = grant else {
        return Ok(Degraded {
            protected: vec![itself],
            pinned: Vec::new(),
            note: format!(
                "the protected name {link} ({rule}) is a symbolic link to {target}, outside every write grant: the link is kept and its target stays read-only"
            ),
        });
    };
    if target == grant.path || link.starts_with(&target) {
        return Err(Error::Plan {
            backend: "policy",
            message: format!(
                "the protected name {link} ({rule}) is a symbolic link to {target}, which holds the write grant {}; keeping it read-only would take the grant away. Remove the link, or list {rule:?} in protected.writable",
                grant.path
            ),
        });
    }
    let state = match kind {
        Some(kind) => ProtectedState::Exists { kind },
        None => {
            let first_missing = target
                .ancestors_below(&grant.path)
                .into_iter()
                .chain(std::iter::once(target.clone()))
                .find(|p| matches!(host.kind(p.as_path()), Ok(None)))
                .unwrap_or_else(|| target.clone());
            ProtectedState::Missing { first_missing }
        }
    };
    let pinned = target
        .ancestors_below(&grant.path)
        .into_iter()
        .filter(|a| matches!(host.kind(a.as_path()), Ok(Some(FileKind::Dir))))
        .collect();
    let what = if kind.is_some() { "its target" } else { "its missing target" };
    Ok(Degraded {
        note: format!(
            "the protected name {link} ({rule}) is a symbolic link to {target}: the link is kept and {what} is read-only"
        ),
        protected: vec![itself, ProtectedPath { path: target, rule: rule.to_owned(), state }],
        pinned,
    })
}
