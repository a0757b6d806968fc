//! The walk of the project at start-up (and again after the run): every `.git` (nested,
//! gitignored, emptied, of any kind) and every protected name below the root, fast, bounded
//! and remembered between runs.
//!
//! The first walk of a project lists every directory on every CPU, by descriptor
//! (`walk/parallel.rs`): nothing is filtered (ignore files are not honoured, since a gitignored
//! nested repository is the dangerous one). It does not follow links and does not descend
//! into a `.git` (its surface is read separately, `paddock_policy::repo_surface`). It stops
//! after [`MAX_ENTRIES`].
//!
//! Each directory is recorded with a stamp (device, inode, mtime and ctime, taken before it
//! is listed) and the names of interest in it; the records are cached in the runtime base
//! (`walk_cache`), out of every task's reach. The next walk of the same project stats each
//! recorded directory and lists only those whose stamp changed (a directory's mtime and
//! ctime change whenever an entry is made, removed or renamed in it; a task can set an
//! mtime back, never a ctime), walking in full only directories it has not seen. A stamp
//! within [`RACY_SECS`] of the walk is not trusted (coarse timestamps): that directory is
//! listed again next time.

pub mod cache;
mod parallel;

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use paddock_policy::FileKind;

use crate::runtime::host::kind_of;

/// The most entries one walk visits; a larger project is walked this far, with a note.
pub const MAX_ENTRIES: usize = 2_000_000;
/// How close to the walk's start a directory's change may be and still be trusted.
pub const RACY_SECS: i64 = 2;
/// How many directories listed again make the walk write its records back even when what
/// it found is the same.
pub const REWRITE_AFTER: usize = 64;

/// A directory's identity and last change, as `lstat` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub mtime: i64,
    pub mtime_ns: i64,
    pub ctime: i64,
    pub ctime_ns: i64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: m.mtime(),
            mtime_ns: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_ns: m.ctime_nsec(),
        }
    }
}

/// One directory of the project: where (relative to the root, `/`-joined bytes, empty for
/// the root), its stamp, and the names of interest directly in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirRecord {
    pub rel: Vec<u8>,
    pub stamp: Stamp,
    /// Changed too recently to be trusted next time.
    pub racy: bool,
    pub hits: Vec<(Vec<u8>, FileKind)>,
}

/// What to look for: `.git` always, and the protected names (last components).
#[derive(Clone, Debug)]
pub struct Names {
    set: HashSet<OsString>,
}

impl Names {
    /// `.git` and `names`.
    pub fn new<I: IntoIterator<Item = OsString>>(names: I) -> Names {
        let mut set: HashSet<OsString> = names.into_iter().collect();
        set.insert(OsString::from(".git"));
        Names { set }
    }

    fn contains(&self, name: &OsStr) -> bool {
        self.set.contains(name)
    }

    /// A hash of the set, stored with the cache: records made looking for other names
    /// cannot be reused.
    pub fn digest(&self) -> u64 {
        let mut sorted: Vec<&OsString> = self.set.iter().collect();
        sorted.sort();
        let mut h = cache::Fnv::new();
        for n in sorted {
            h.write(n.as_bytes());
            h.write(&[0]);
        }
        h.finish()
    }
}

/// One name of interest found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Its path.
    pub path: PathBuf,
    /// Its kind (not following a link).
    pub kind: FileKind,
}

/// The result of a walk.
#[derive(Debug, Default)]
pub struct Walk {
    /// Every `.git` and protected name found, sorted by path.
    pub hits: Vec<Hit>,
    /// Directories recorded.
    pub dirs: usize,
    /// Directories listed (all of them without a cache).
    pub listed: usize,
    /// Whether a cache was used.
    pub cached: bool,
    /// Whether the walk stopped at [`MAX_ENTRIES`].
    pub truncated: bool,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn join_rel(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = rel.to_vec();
    if !out.is_empty() {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

fn abs(root: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() { root.to_path_buf() } else { root.join(OsStr::from_bytes(rel)) }
}

fn split_rel(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[], rel),
    }
}

/// Walks `root` for `names`, through the cache file `cache` when given (read, and written
/// back unless the walk was cut short).
pub fn walk(root: &Path, names: &Names, cache: Option<&Path>) -> Walk {
    walk_at(root, names, cache, now_secs())
}

/// [`walk`] as if at `now` (seconds since the epoch), which decides which stamps are racy.
fn walk_at(root: &Path, names: &Names, cache: Option<&Path>, now: i64) -> Walk {
    let digest = names.digest();
    let root_bytes = root.as_os_str().as_bytes();
    let cached = cache.and_then(|c| cache::read(c, root_bytes, digest));
    let cache_read = cached.is_some();
    let budget = AtomicUsize::new(0);
    let (mut records, listed, truncated, changed) = match cached {
        Some(old) => revalidate(root, old, names, now, &budget),
        None => {
            let (records, truncated) = parallel::walk(root, &[], names, now, &budget);
            let n = records.len();
            (records, n, truncated, true)
        }
    };
    records.sort_by(|a, b| a.rel.cmp(&b.rel));
    // Written back when what was found changed, or when many directories had to be listed
    // again. A few changed directories (the project root, whose placeholders come and go
    // with every run) are cheaper to list again next time than a new file is to write.
    if let Some(c) = cache
        && !truncated
        && (changed || listed > REWRITE_AFTER)
    {
        cache::write(c, root_bytes, digest, &records);
    }
    let mut hits: Vec<Hit> = records
        .iter()
        .flat_map(|r| {
            r.hits
                .iter()
                .map(|(name, kind)| Hit { path: abs(root, &join_rel(&r.rel, name)), kind: *kind })
        })
        .collect();
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    Walk { hits, dirs: records.len(), listed, cached: cache_read, truncated }
}

/// What became of a cached directory in this walk.
enum Seen {
    Kept,
    /// Listed again: its subdirectories now.
    Listed(HashSet<Vec<u8>>),
}

/// The cached records brought up to date: unchanged directories kept, changed ones listed
/// again, new ones walked in full, gone ones dropped. Returns the records, how many
/// directories were listed, whether the walk was cut short, and whether what it found
/// (directories, hits) differs from the cache.
fn revalidate(
    root: &Path,
    mut old: Vec<DirRecord>,
    names: &Names,
    now: i64,
    budget: &AtomicUsize,
) -> (Vec<DirRecord>, usize, bool, bool) {
    // Parents before children: a parent is a prefix of its children's paths.
    old.sort_by(|a, b| a.rel.cmp(&b.rel));
    let known: HashSet<Vec<u8>> = old.iter().map(|r| r.rel.clone()).collect();
    let mut seen: HashMap<Vec<u8>, Seen> = HashMap::new();
    let mut out: Vec<DirRecord> = Vec::with_capacity(old.len());
    let mut fresh: Vec<Vec<u8>> = Vec::new();
    let mut listed = 0;
    let mut changed = false;
    for rec in old {
        if !rec.rel.is_empty() {
            let (parent, name) = split_rel(&rec.rel);
            match seen.get(parent) {
                None => {
                    changed = true;
                    continue;
                }
                Some(Seen::Kept) => {}
                Some(Seen::Listed(subdirs)) if subdirs.contains(name) => {}
                Some(Seen::Listed(_)) => {
                    changed = true;
                    continue;
                }
            }
        }
        let path = abs(root, &rec.rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            changed = true;
            continue;
        };
        if !meta.is_dir() {
            changed = true;
            continue;
        }
        let stamp = Stamp::of(&meta);
        if stamp == rec.stamp && !rec.racy {
            budget.fetch_add(1 + rec.hits.len(), Ordering::Relaxed);
            seen.insert(rec.rel.clone(), Seen::Kept);
            out.push(rec);
            continue;
        }
        listed += 1;
        let Some((hits, subdirs)) = list(&path, names, budget) else {
            changed = true;
            continue;
        };
        changed |= hits != rec.hits;
        for sub in &subdirs {
            let rel = join_rel(&rec.rel, sub);
            if !known.contains(&rel) {
                fresh.push(rel);
            }
        }
        seen.insert(rec.rel.clone(), Seen::Listed(subdirs));
        out.push(DirRecord { rel: rec.rel, stamp, racy: stamp.ctime >= now - RACY_SECS, hits });
    }
    let mut truncated = false;
    for rel in fresh {
        let (records, cut) = parallel::walk(root, &rel, names, now, budget);
        listed += records.len();
        changed |= !records.is_empty();
        out.extend(records);
        truncated |= cut;
    }
    (out, listed, truncated || budget.load(Ordering::Relaxed) >= MAX_ENTRIES, changed)
}

/// One directory's hits and subdirectories (not `.git`, not links).
type Listing = (Vec<(Vec<u8>, FileKind)>, HashSet<Vec<u8>>);

fn list(dir: &Path, names: &Names, budget: &AtomicUsize) -> Option<Listing> {
    let mut hits = Vec::new();
    let mut subdirs = HashSet::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let Ok(entry) = entry else { continue };
        budget.fetch_add(1, Ordering::Relaxed);
        let name = entry.file_name();
        let kind = entry.file_type().map_or(FileKind::Other, kind_of);
        if names.contains(&name) {
            hits.push((name.as_bytes().to_vec(), kind));
        }
        if kind == FileKind::Dir && name != ".git" {
            subdirs.insert(name.as_bytes().to_vec());
        }
    }
    hits.sort_by(|a, b| a.0.cmp(&b.0));
    Some((hits, subdirs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("paddock-walk-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in ["a/b/.git/hooks", "vendor/x/.git", "c/d/e", "ign"] {
            std::fs::create_dir_all(root.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(root.join(".gitignore"), "vendor/\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("c/d/.bashrc"), "").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("../c", root.join("c/d/e/loop"))
            .unwrap_or_else(|e| panic!("{e}"));
        root
    }

    fn rels(root: &Path, w: &Walk) -> Vec<String> {
        w.hits
            .iter()
            .map(|h| h.path.strip_prefix(root).map(|p| p.display().to_string()).unwrap_or_default())
            .collect()
    }

    #[test]
    fn finds_gitignored_repositories_and_names_without_following_links() {
        let root = tree("find");
        let names = Names::new([OsString::from(".bashrc")]);
        let w = walk(&root, &names, None);
        assert_eq!(rels(&root, &w), ["a/b/.git", "c/d/.bashrc", "vendor/x/.git"]);
        assert!(!w.cached && !w.truncated);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_cache_sees_what_changed_even_with_the_mtime_set_back() {
        let root = tree("cache");
        let cache = root.with_extension("cache").join("walk");
        let names = Names::new([OsString::from(".bashrc")]);
        // As if an hour later: no stamp is racy, so only the ctime can tell the change.
        let later = now_secs() + 3600;
        let first = walk_at(&root, &names, Some(&cache), later);
        let again = walk_at(&root, &names, Some(&cache), later);
        assert!(again.cached);
        assert_eq!(again.listed, 0, "nothing changed, nothing listed");
        assert_eq!(first.hits, again.hits);
        // A repository made in a known directory, its mtime set back as a task could.
        let before = std::fs::metadata(root.join("c/d/e")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("c/d/e/new/.git")).unwrap_or_else(|e| panic!("{e}"));
        let mtime = std::fs::FileTimes::new()
            .set_modified(before.modified().unwrap_or_else(|e| panic!("{e}")));
        std::fs::File::open(root.join("c/d/e"))
            .and_then(|f| f.set_times(mtime))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_dir_all(root.join("vendor/x")).unwrap_or_else(|e| panic!("{e}"));
        let after = walk_at(&root, &names, Some(&cache), later);
        assert!(after.cached);
        // c/d/e (its ctime), its new subtree, and vendor (x removed).
        assert!(after.listed >= 2 && after.listed < first.dirs, "{after:?}");
        assert_eq!(rels(&root, &after), ["a/b/.git", "c/d/.bashrc", "c/d/e/new/.git"]);
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(root.with_extension("cache"));
    }

    #[test]
    fn a_few_changed_directories_are_listed_again_and_the_records_rewritten_only_for_news() {
        let root = tree("rewrite");
        let cache = root.with_extension("cache").join("walk");
        let names = Names::new([OsString::from(".bashrc")]);
        let later = now_secs() + 3600;
        let ino = || std::fs::metadata(&cache).map(|m| m.ino()).unwrap_or(0);
        let _ = walk_at(&root, &names, Some(&cache), later);
        let written = ino();
        std::fs::write(root.join("c/plain"), "").unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..2 {
            let w = walk_at(&root, &names, Some(&cache), later);
            assert_eq!(w.listed, 1, "{w:?}");
            assert_eq!(ino(), written, "nothing new: the records stay as they were");
        }
        std::fs::create_dir_all(root.join("c/x/.git")).unwrap_or_else(|e| panic!("{e}"));
        let w = walk_at(&root, &names, Some(&cache), later);
        assert!(w.hits.iter().any(|h| h.path.ends_with("c/x/.git")), "{w:?}");
        assert_ne!(ino(), written, "a new .git is written back");
        let w = walk_at(&root, &names, Some(&cache), later);
        assert_eq!(w.listed, 0, "{w:?}");
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(root.with_extension("cache"));
    }
}
