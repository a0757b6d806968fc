//! Absolute paths as a type, and the lexical helpers resolution builds on.
//!
//! Paths stay `OsString`-based end to end: a file name is bytes, not text, and a lossy
//! conversion into a mount argument would grant a different file than the user named.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Serialize, Serializer};

/// An absolute path with no `.` or `..` components and no trailing slash.
///
/// It is *lexically* normal, not necessarily canonical: whether symlinks were resolved is
/// up to the code that made it (resolution canonicalizes; see `resolve`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbsPathBuf(PathBuf);

impl AbsPathBuf {
    /// Takes an absolute path, folding `.` and `..` lexically. Returns `None` for a relative
    /// path. Lexical folding is only sound where no component is a symlink, which is why
    /// resolution walks paths through the [`Host`](crate::Host) instead of calling this on
    /// user input.
    pub fn new_lexical(path: impl AsRef<Path>) -> Option<AbsPathBuf> {
        let path = path.as_ref();
        if !path.is_absolute() {
            return None;
        }
        let mut out = PathBuf::from("/");
        for component in path.components() {
            match component {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(name) => out.push(name),
            }
        }
        Some(AbsPathBuf(out))
    }

    /// The root directory `/`.
    pub fn root() -> AbsPathBuf {
        AbsPathBuf(PathBuf::from("/"))
    }

    /// The path as a `Path`.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The path as an `OsStr`, for argv.
    pub fn as_os_str(&self) -> &OsStr {
        self.0.as_os_str()
    }

    /// Consumes it into a `PathBuf`.
    pub fn into_path_buf(self) -> PathBuf {
        self.0
    }

    /// Appends a relative path, folding `.` and `..` lexically (never above `/`).
    pub fn join(&self, rel: impl AsRef<Path>) -> AbsPathBuf {
        let joined = self.0.join(rel);
        // `joined` is absolute because `self` is.
        AbsPathBuf::new_lexical(&joined).unwrap_or_else(AbsPathBuf::root)
    }

    /// The parent directory, or `None` for `/`.
    pub fn parent(&self) -> Option<AbsPathBuf> {
        self.0.parent().map(|p| AbsPathBuf(p.to_path_buf()))
    }

    /// The last component, or `None` for `/`.
    pub fn file_name(&self) -> Option<&OsStr> {
        self.0.file_name()
    }

    /// Whether `self` is `other` or lies below it, by whole components.
    pub fn starts_with(&self, other: &AbsPathBuf) -> bool {
        // Both are lexically normal (`/` then names joined by single slashes, no trailing
        // one), so a component-wise prefix is a byte prefix ending at a slash: resolution
        // asks this thousands of times per run, and `Path::starts_with` walks components.
        let (path, base) =
            (self.0.as_os_str().as_encoded_bytes(), other.0.as_os_str().as_encoded_bytes());
        base == b"/"
            || path == base
            || (path.len() > base.len() && path.starts_with(base) && path[base.len()] == b'/')
    }

    /// The part of `self` below `base`, if `self` is under `base`.
    pub fn strip_prefix(&self, base: &AbsPathBuf) -> Option<&Path> {
        self.0.strip_prefix(&base.0).ok()
    }

    /// The ancestors strictly between `base` (exclusive) and `self` (exclusive), outermost
    /// first. Empty when `self` is not under `base` or is its direct child.
    pub fn ancestors_below(&self, base: &AbsPathBuf) -> Vec<AbsPathBuf> {
        let Some(rel) = self.strip_prefix(base) else { return Vec::new() };
        let mut out = Vec::new();
        let mut cur = base.clone();
        let names: Vec<_> = rel.components().collect();
        for name in names.iter().take(names.len().saturating_sub(1)) {
            cur = cur.join(name.as_os_str());
            out.push(cur.clone());
        }
        out
    }
}

impl AsRef<Path> for AbsPathBuf {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for AbsPathBuf {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl fmt::Debug for AbsPathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for AbsPathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", DisplayBytes(self.0.as_os_str()))
    }
}

impl Serialize for AbsPathBuf {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_os_str(self.0.as_os_str(), s)
    }
}

/// Serializes an `OsStr` as a JSON string when it is UTF-8 and as `{"hex": "..."}` when it
/// is not, so that a printed plan never silently changes a byte.
pub fn serialize_os_str<S: Serializer>(value: &OsStr, s: S) -> Result<S::Ok, S::Error> {
    match value.to_str() {
        Some(text) => s.serialize_str(text),
        None => {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("hex", &hex(value.as_encoded_bytes()))?;
            map.end()
        }
    }
}

/// Serializes a list of `OsString` with [`serialize_os_str`] for each.
pub fn serialize_os_strings<S: Serializer>(values: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    struct One<'a>(&'a OsStr);
    impl Serialize for One<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_os_str(self.0, s)
        }
    }
    let mut seq = s.serialize_seq(Some(values.len()))?;
    for v in values {
        seq.serialize_element(&One(v))?;
    }
    seq.end()
}

/// Bytes back into an `OsString` (exact on unix, where paths are bytes).
pub fn os_from_bytes(bytes: Vec<u8>) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(bytes)
    }
    #[cfg(not(unix))]
    {
        OsString::from(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Shows bytes for people: printable ASCII and valid UTF-8 as is, control characters and
/// invalid bytes escaped (`\n`, `\x1b`), so that a hostile file name cannot drive the
/// terminal that reads a message or a report (security case TTY-06).
#[derive(Clone, Copy, Debug)]
pub struct DisplayBytes<'a>(pub &'a OsStr);

impl fmt::Display for DisplayBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.as_encoded_bytes().utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\n' => f.write_str("\\n")?,
                    '\t' => f.write_str("\\t")?,
                    '\r' => f.write_str("\\r")?,
                    '\\' => f.write_str("\\\\")?,
                    c if c.is_control() => write!(f, "\\u{{{:x}}}", u32::from(c))?,
                    c => write!(f, "{c}")?,
                }
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_folding() {
        let p = AbsPathBuf::new_lexical("/a/./b/../c//d/").unwrap();
        assert_eq!(p.as_path(), Path::new("/a/c/d"));
        assert_eq!(AbsPathBuf::new_lexical("/../..").unwrap(), AbsPathBuf::root());
        assert!(AbsPathBuf::new_lexical("a/b").is_none());
    }

    #[test]
    fn starts_with_is_by_component() {
        let a = AbsPathBuf::new_lexical("/home/u/proj").unwrap();
        let b = AbsPathBuf::new_lexical("/home/u/project").unwrap();
        assert!(!b.starts_with(&a));
        assert!(a.join("x").starts_with(&a));
    }

    proptest::proptest! {
        /// The byte comparison agrees with `Path::starts_with` on whatever lexically normal
        /// paths are made of (names with dots, slashes, `..`, the root).
        #[test]
        fn starts_with_agrees_with_paths_by_component(
            a in "(/(a|b|ab|\\.|\\.\\.|a\\.b|)){0,5}/?",
            b in "(/(a|b|ab|\\.|\\.\\.|a\\.b|)){0,5}/?",
        ) {
            let (a, b) = (AbsPathBuf::new_lexical(format!("/{a}")).unwrap(), AbsPathBuf::new_lexical(format!("/{b}")).unwrap());
            proptest::prop_assert_eq!(a.starts_with(&b), a.as_path().starts_with(b.as_path()), "{} {}", a, b);
        }
    }

    #[test]
    fn ancestors_below_lists_intermediate_dirs() {
        let base = AbsPathBuf::new_lexical("/p").unwrap();
        let p = AbsPathBuf::new_lexical("/p/a/b/c").unwrap();
        let got: Vec<String> = p.ancestors_below(&base).iter().map(|a| a.to_string()).collect();
        assert_eq!(got, ["/p/a", "/p/a/b"]);
    }

    #[test]
    fn display_escapes_control_bytes() {
        let raw = OsStr::from_bytes_for_test(b"/etc/\x1b[2J\nFAKE\xff");
        assert_eq!(DisplayBytes(&raw).to_string(), "/etc/\\u{1b}[2J\\nFAKE\\xff");
    }

    trait FromBytesForTest {
        fn from_bytes_for_test(b: &[u8]) -> OsString;
    }
    impl FromBytesForTest for OsStr {
        fn from_bytes_for_test(b: &[u8]) -> OsString {
            // SAFETY-free: tests build OsStrings from arbitrary bytes only on unix.
            #[cfg(unix)]
            {
                use std::os::unix::ffi::OsStrExt;
                OsStr::from_bytes(b).to_os_string()
            }
            #[cfg(not(unix))]
            {
                OsString::from(String::from_utf8_lossy(b).into_owned())
            }
        }
    }
}
