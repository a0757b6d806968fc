//! Leftover lists: the placeholders a run kept on release because another live run binds
//! them, for the last run out to remove.
//!
//! Each entry names the placeholder by its identity (inode and birth time) as well as its
//! path: by the time a later release removes a leftover, the name may hold another run's
//! fresh placeholder (the kept one was removed through another list, and a run made a new
//! one there, which it has not recorded as used yet since it is still making its set).
//! Removing "any empty one" by path took that run's directory from under the placeholders
//! it was making in it (`.git` under `.git/config`): its start failed with ENOENT. An entry
//! removes only the file or directory it was written for.
//!
//! A record is `KIND INO BIRTH_S BIRTH_NS PATH\0` (`KIND` `d` or `f`; a birth of `0 0`
//! where the filesystem keeps none, then the inode alone decides). Records of the older
//! `KIND PATH\0` form (a list an older paddock left) match any empty placeholder.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Which file a leftover entry is about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The inode number; 0 matches any (an entry of the older form).
    pub ino: u64,
    /// The birth time (seconds, nanoseconds); `(0, 0)` where the filesystem keeps none.
    pub birth: (i64, u32),
}

impl Identity {
    /// Matches any placeholder at the entry's path.
    pub const ANY: Identity = Identity { ino: 0, birth: (0, 0) };

    /// The identity of `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Identity {
        let birth = meta
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or((0, 0), |d| (i64::try_from(d.as_secs()).unwrap_or(0), d.subsec_nanos()));
        Identity { ino: meta.ino(), birth }
    }

    /// Whether what is at `path` now (not followed if a link) is the file this is about.
    pub fn matches(self, path: &Path) -> bool {
        if self.ino == 0 {
            return true;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
        let now = Identity::of(&meta);
        now.ino == self.ino
            && (self.birth == (0, 0) || now.birth == (0, 0) || now.birth == self.birth)
    }
}

/// A leftover list's bytes, each entry with the identity of what is at its path now.
pub fn leftover_bytes<'a>(entries: impl Iterator<Item = (&'a Path, bool)>) -> Vec<u8> {
    let mut text = Vec::new();
    for (path, dir) in entries {
        let id = std::fs::symlink_metadata(path).map(|m| Identity::of(&m)).unwrap_or_default();
        let kind = if dir { 'd' } else { 'f' };
        text.extend_from_slice(
            format!("{kind} {} {} {} ", id.ino, id.birth.0, id.birth.1).as_bytes(),
        );
        text.extend_from_slice(path.as_os_str().as_bytes());
        text.push(0);
    }
    text
}

/// Reads a leftover list back: `(path, dir, identity)` per entry.
pub fn parse_leftover(bytes: &[u8]) -> Vec<(PathBuf, bool, Identity)> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|rec| {
            let dir = match rec.get(..2)? {
                b"d " => true,
                b"f " => false,
                _ => return None,
            };
            let rest = rec.get(2..)?;
            let (id, path) = if rest.first() == Some(&b'/') {
                (Identity::ANY, rest)
            } else {
                let mut fields = rest.splitn(4, |b| *b == b' ');
                let mut num = || std::str::from_utf8(fields.next()?).ok()?.parse::<i64>().ok();
                let (ino, secs, nanos) = (num()?, num()?, num()?);
                let id = Identity {
                    ino: u64::try_from(ino).ok()?,
                    birth: (secs, u32::try_from(nanos).ok()?),
                };
                (id, fields.next()?)
            };
            let path = PathBuf::from(std::ffi::OsString::from_vec(path.to_vec()));
            path.is_absolute().then_some((path, dir, id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_matches_only_the_file_it_was_written_for() {
        let dir = std::env::temp_dir().join(format!("paddock-leftover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kept = dir.join("odd name .git");
        std::fs::create_dir(&kept).unwrap();
        let bytes = leftover_bytes([(kept.as_path(), true)].into_iter());
        let parsed = parse_leftover(&bytes);
        assert_eq!(parsed.len(), 1);
        let (path, is_dir, id) = &parsed[0];
        assert_eq!((path, *is_dir), (&kept, true));
        assert!(id.matches(&kept));
        // Removed, and another made at the same name: not the one the entry is about
        // (where the inode number is reused, the birth time tells them apart).
        std::fs::remove_dir(&kept).unwrap();
        let other = dir.join("placeholder in between");
        std::fs::create_dir(&other).unwrap();
        std::fs::create_dir(&kept).unwrap();
        let now = std::fs::symlink_metadata(&kept).unwrap();
        let reused = now.ino() == id.ino;
        assert!(!id.matches(&kept) || (reused && Identity::of(&now).birth == (0, 0)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn entries_of_the_older_form_match_any_placeholder() {
        let parsed = parse_leftover(b"d /p/.git\0f /p/.bashrc\0junk\0");
        assert_eq!(
            parsed,
            [
                (PathBuf::from("/p/.git"), true, Identity::ANY),
                (PathBuf::from("/p/.bashrc"), false, Identity::ANY)
            ]
        );
        assert!(Identity::ANY.matches(Path::new("/nonexistent")));
    }
}
