//! Glob grants: recognizing them, collapsing whole-directory globs, and expanding the rest
//! against the host at start.
//!
//! Only `*`, `?` and `[` make a glob; a brace is an ordinary character in a file name here,
//! because a grant of `{a,b}` that silently meant two directories would grant more than the
//! user could see. `*` never crosses `/`; `**` does.

use std::path::{Component, Path, PathBuf};

use globset::GlobBuilder;

use crate::host::{FileKind, Host};
use crate::path::AbsPathBuf;

/// The most directory entries one glob may visit, and the most hits it may have, before
/// paddock refuses it and asks for a directory grant (POL-06, POL-07).
pub const MAX_VISITS: usize = 200_000;
/// See [`MAX_VISITS`].
pub const MAX_HITS: usize = 10_000;

/// Whether path text is a glob.
pub fn is_glob(text: &[u8]) -> bool {
    text.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// `dir/**` and `dir/**/*` mean `dir` (they cover everything under it; collapsing adds only
/// the directory entry itself). Returns the collapsed text, or `None` if it is another glob.
pub fn collapse_whole_dir(text: &[u8]) -> Option<Vec<u8>> {
    for suffix in [&b"/**/*"[..], &b"/**"[..]] {
        if let Some(head) = text.strip_suffix(suffix)
            && !is_glob(head)
        {
            return Some(if head.is_empty() { b"/".to_vec() } else { head.to_vec() });
        }
    }
    if text == b"**" || text == b"**/*" {
        return Some(b".".to_vec());
    }
    None
}

/// Splits an absolute glob into the static directory holding its first wildcard component
/// and the pattern below it.
pub fn split_static(path: &Path) -> (PathBuf, PathBuf) {
    let mut base = PathBuf::new();
    let mut rest = PathBuf::new();
    let mut in_glob = false;
    for c in path.components() {
        if !in_glob {
            if let Component::Normal(name) = c
                && is_glob(name.as_encoded_bytes())
            {
                in_glob = true;
                rest.push(name);
                continue;
            }
            base.push(c.as_os_str());
        } else {
            rest.push(c.as_os_str());
        }
    }
    (base, rest)
}

/// Why a glob could not be expanded.
#[derive(Debug)]
pub enum GlobError {
    /// The pattern is not a valid glob.
    Invalid(String),
    /// It visits or matches more than the limits.
    TooLarge,
}

/// Whether every `[` of `pattern` opens a class that a `]` closes (`[]]` and `[!]]` hold a
/// `]`): without that it is no glob at all (`open[bracket`). A check without compiling the
/// pattern, which ten thousand entries would pay for at every start.
pub fn brackets_close(pattern: &[u8]) -> bool {
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' => i += 2,
            b'[' => {
                let mut j = i + 1;
                if pattern.get(j) == Some(&b'!') || pattern.get(j) == Some(&b'^') {
                    j += 1;
                }
                if pattern.get(j) == Some(&b']') {
                    j += 1;
                }
                match pattern[j.min(pattern.len())..].iter().position(|b| *b == b']') {
                    Some(k) => i = j + k + 1,
                    None => return false,
                }
            }
            _ => i += 1,
        }
    }
    true
}

/// The matcher of `pattern` (relative, `/`-separated), or why it is no glob.
pub fn validate(pattern: &Path) -> Result<globset::GlobMatcher, GlobError> {
    let text = pattern.to_string_lossy();
    // Braces are literal characters here (see the module doc).
    let escaped = text.replace('{', "[{]").replace('}', "[}]");
    Ok(GlobBuilder::new(&escaped)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| GlobError::Invalid(e.kind().to_string()))?
        .compile_matcher())
}

/// Expands `pattern` (relative, `/`-separated) under `base`, returning the absolute paths of
/// existing entries it matches (not following symlinked directories while walking).
pub fn expand(
    host: &dyn Host,
    base: &AbsPathBuf,
    pattern: &Path,
) -> Result<Vec<AbsPathBuf>, GlobError> {
    let text = pattern.to_string_lossy();
    let matcher = validate(pattern)?;
    let depth = if text.contains("**") { usize::MAX } else { pattern.components().count() };
    let mut hits = Vec::new();
    let mut visits = 0usize;
    let mut stack: Vec<(AbsPathBuf, PathBuf, usize)> = vec![(base.clone(), PathBuf::new(), 0)];
    while let Some((dir, rel, level)) = stack.pop() {
        let Ok(names) = host.read_dir(dir.as_path()) else { continue };
        for name in names {
            visits += 1;
            if visits > MAX_VISITS {
                return Err(GlobError::TooLarge);
            }
            let child_rel = rel.join(&name);
            let child = dir.join(&name);
            if matcher.is_match(&child_rel) {
                hits.push(child.clone());
                if hits.len() > MAX_HITS {
                    return Err(GlobError::TooLarge);
                }
            }
            if level + 1 < depth && matches!(host.kind(child.as_path()), Ok(Some(FileKind::Dir))) {
                stack.push((child, child_rel, level + 1));
            }
        }
    }
    hits.sort();
    Ok(hits)
}
