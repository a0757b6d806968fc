//! How a path entry is read before it is resolved: one spelling per path, and whether it is
//! a glob.
//!
//! Every key's entries are normalized first: runs of `/` are one, `.` components go, a
//! trailing `/` goes, so `//home//u/./x/`, `~//x` and `~/x/` are `/home/u/x` and `~/x`
//! (`..` stays: resolution follows links before it climbs). Then an entry that exists as
//! written is that path, brackets and all; glob syntax (`*`, `?`, `[`) applies only to an
//! entry that does not exist, or to one written with the [`GLOB_PREFIX`]. The anchor a
//! relative or `~` entry is joined to (the project, the home directory) is never read as
//! a pattern: a project in `[WIP] x` is a directory, not a character class.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::path::os_from_bytes;

/// An entry written `glob:PATTERN` is a glob even where a file of that name exists.
pub const GLOB_PREFIX: &str = "glob:";

/// An entry's text, normalized, and whether it was marked as a glob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spelled {
    /// The normalized text (`~`, relative or absolute).
    pub text: OsString,
    /// Written with [`GLOB_PREFIX`].
    pub forced_glob: bool,
}

/// Normalizes an entry's text (see the module doc) and strips a [`GLOB_PREFIX`].
pub fn spell(raw: &OsStr) -> Spelled {
    let bytes = raw.as_encoded_bytes();
    let (bytes, forced_glob) = match bytes.strip_prefix(GLOB_PREFIX.as_bytes()) {
        Some(rest) if !rest.is_empty() => (rest, true),
        _ => (bytes, false),
    };
    Spelled { text: os_from_bytes(normalize(bytes)), forced_glob }
}

/// `//` to `/`, `/./` to `/`, no trailing `/` (but `/` itself), no leading `./`.
pub fn normalize(bytes: &[u8]) -> Vec<u8> {
    let absolute = bytes.first() == Some(&b'/');
    let parts: Vec<&[u8]> =
        bytes.split(|b| *b == b'/').filter(|p| !p.is_empty() && *p != b".").collect();
    let mut out = Vec::with_capacity(bytes.len());
    if absolute {
        out.push(b'/');
    }
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        // "." and "./" are the project; an entry is never empty (checked before).
        out.push(b'.');
    }
    out
}

/// An anchored entry: the directory it was joined to, and what was written below it.
#[derive(Clone, Debug)]
pub struct Anchored {
    /// The project, the home directory, or `/`.
    pub base: PathBuf,
    /// The entry below `base` (relative; empty for the base itself).
    pub rest: PathBuf,
}

impl Anchored {
    /// The whole path.
    pub fn path(&self) -> PathBuf {
        if self.rest.as_os_str().is_empty() {
            self.base.clone()
        } else {
            self.base.join(&self.rest)
        }
    }

    /// The directory a glob is expanded from (the anchor joined with the entry's components
    /// before its first wildcard) and the pattern below it. Only the entry's own text is
    /// read as a pattern.
    pub fn split_glob(&self) -> (PathBuf, PathBuf) {
        let (fixed, pattern) = crate::glob::split_static(&self.rest);
        let base =
            if fixed.as_os_str().is_empty() { self.base.clone() } else { self.base.join(fixed) };
        (base, pattern)
    }
}

/// Whether `text` would be a glob if it does not exist.
pub fn looks_like_glob(text: &OsStr) -> bool {
    crate::glob::is_glob(text.as_encoded_bytes())
}

/// `path` with glob syntax escaped, for a rule matched with globset.
pub fn escape_glob(path: &Path) -> String {
    globset::escape(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        String::from_utf8(normalize(s.as_bytes())).unwrap()
    }

    #[test]
    fn spellings_of_one_path_are_one_text() {
        assert_eq!(n("//home//u/./x/"), "/home/u/x");
        assert_eq!(n("~//.ssh"), "~/.ssh");
        assert_eq!(n("~/"), "~");
        assert_eq!(n("./src/"), "src");
        assert_eq!(n("."), ".");
        assert_eq!(n("./"), ".");
        assert_eq!(n("/"), "/");
        assert_eq!(n("///"), "/");
        assert_eq!(n("a/../b"), "a/../b");
        assert_eq!(n("[WIP] x//secret"), "[WIP] x/secret");
    }

    #[test]
    fn the_glob_prefix_marks_a_glob_and_is_removed() {
        let s = spell(OsStr::new("glob:src/[ab]"));
        assert_eq!(s, Spelled { text: "src/[ab]".into(), forced_glob: true });
        let s = spell(OsStr::new("src/[ab]"));
        assert!(!s.forced_glob);
        // `glob:` alone is a relative name.
        assert!(!spell(OsStr::new("glob:")).forced_glob);
    }

    #[test]
    fn the_anchor_is_never_a_pattern() {
        let a = Anchored { base: "/h/[WIP] p".into(), rest: "src/*.pem".into() };
        assert_eq!(a.split_glob(), (PathBuf::from("/h/[WIP] p/src"), PathBuf::from("*.pem")));
        let a = Anchored { base: "/".into(), rest: "a[1]/b".into() };
        assert_eq!(a.split_glob(), (PathBuf::from("/"), PathBuf::from("a[1]/b")));
        assert_eq!(escape_glob(Path::new("/h/[WIP] p/*")), "/h/[[]WIP[]] p/[*]");
    }
}
