//! The walk's records of a project between runs (see `walk`): one file per project in
//! `BASE/walks/`, which every sandbox covers (the runtime base), so no task can edit what
//! the next run trusts.
//!
//! The file is binary, little-endian: a magic, the digest of the names looked for, the
//! project's path, then each directory: its path relative to the project, its stamp, a
//! racy flag and its hits. A file that is not ours (owner, mode), not of this format, of
//! another project or of other names is ignored: the walk is then done in full. It is
//! written to a temporary name and renamed into place.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use paddock_policy::FileKind;

use crate::runtime::walk::{DirRecord, Stamp};

/// The directory of the runtime base that holds the records (never swept as a run's).
pub const WALKS_DIR: &str = "walks";

const MAGIC: &[u8; 8] = b"PDKWALK1";
/// The largest cache file read (a project of millions of directories is walked instead).
const MAX_BYTES: u64 = 256 << 20;

/// 64-bit FNV-1a: a stable hash for file names and digests.
#[derive(Debug)]
pub struct Fnv(u64);

impl Fnv {
    /// A fresh hash.
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Adds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv::new()
    }
}

/// The cache file of the project at `root` in `dir`.
pub fn file_for(dir: &Path, root: &Path) -> PathBuf {
    let mut h = Fnv::new();
    h.write(std::os::unix::ffi::OsStrExt::as_bytes(root.as_os_str()));
    dir.join(format!("{:016x}", h.finish()))
}

fn kind_byte(k: FileKind) -> u8 {
    match k {
        FileKind::Dir => 1,
        FileKind::File => 2,
        FileKind::Symlink => 3,
        _ => 0,
    }
}

fn byte_kind(b: u8) -> FileKind {
    match b {
        1 => FileKind::Dir,
        2 => FileKind::File,
        3 => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// Reads the records for `root` looking for names of `digest`, if the file is ours and
/// sound.
pub fn read(file: &Path, root: &[u8], digest: u64) -> Option<Vec<DirRecord>> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != euid || meta.mode() & 0o022 != 0 || meta.len() > MAX_BYTES {
        return None;
    }
    let bytes = std::fs::read(file).ok()?;
    let mut r = Reader { bytes: &bytes, at: 0 };
    if r.take(8)? != MAGIC || r.u64()? != digest || r.bytes()? != root {
        return None;
    }
    let count = r.u64()?;
    let mut out = Vec::with_capacity(usize::try_from(count.min(1 << 20)).ok()?);
    for _ in 0..count {
        let rel = r.bytes()?.to_vec();
        let stamp = Stamp {
            dev: r.u64()?,
            ino: r.u64()?,
            mtime: r.i64()?,
            mtime_ns: r.i64()?,
            ctime: r.i64()?,
            ctime_ns: r.i64()?,
        };
        let racy = r.take(1)?[0] != 0;
        let n = r.u64()?;
        let mut hits = Vec::new();
        for _ in 0..n {
            let kind = byte_kind(r.take(1)?[0]);
            hits.push((r.bytes()?.to_vec(), kind));
        }
        out.push(DirRecord { rel, stamp, racy, hits });
    }
    (r.at == bytes.len()).then_some(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

/// Writes the records (best effort: a run without a cache walks in full next time).
pub fn write(file: &Path, root: &[u8], digest: u64, records: &[DirRecord]) {
    let mut out = Vec::with_capacity(64 + records.len() * 80);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&digest.to_le_bytes());
    put_bytes(&mut out, root);
    out.extend_from_slice(&(records.len() as u64).to_le_bytes());
    for r in records {
        put_bytes(&mut out, &r.rel);
        let s = r.stamp;
        out.extend_from_slice(&s.dev.to_le_bytes());
        out.extend_from_slice(&s.ino.to_le_bytes());
        for v in [s.mtime, s.mtime_ns, s.ctime, s.ctime_ns] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(u8::from(r.racy));
        out.extend_from_slice(&(r.hits.len() as u64).to_le_bytes());
        for (name, kind) in &r.hits {
            out.push(kind_byte(*kind));
            put_bytes(&mut out, name);
        }
    }
    let Some(dir) = file.parent() else { return };
    if std::fs::DirBuilder::new().mode(0o700).create(dir).is_err() && !dir.is_dir() {
        return;
    }
    // Only into a directory of ours that nobody else can write.
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && m.uid() == euid && m.permissions().mode() & 0o022 == 0 => {}
        _ => return,
    }
    let _ = crate::probe::replace_private_file(file, &out);
    prune(dir, MAX_FILES);
}

/// The most projects whose records are kept: past it, [`prune`] drops records.
const MAX_FILES: usize = 1024;

/// Keeps `dir` from growing without bound (every throw-away project a test suite runs in
/// leaves a file): with more than `max` files, the records of projects that no longer
/// exist go first, then the least recently written, down to three quarters of `max`, so
/// that the next pruning is `max / 4` new projects away. Best effort, like the cache.
pub fn prune(dir: &Path, max: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    if files.len() <= max {
        return;
    }
    let keep = max - max / 4;
    let mut alive: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for file in files {
        if root_of(&file).is_some_and(|root| !root.exists()) {
            let _ = std::fs::remove_file(&file);
            continue;
        }
        let written = std::fs::symlink_metadata(&file).and_then(|m| m.modified());
        alive.push((written.unwrap_or(std::time::UNIX_EPOCH), file));
    }
    if alive.len() > keep {
        alive.sort();
        for (_, file) in &alive[..alive.len() - keep] {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// The project a records file is of, read from its header alone.
fn root_of(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    let mut head = Vec::new();
    // A path is at most 4096 bytes: the magic, the digest and the length come first.
    std::fs::File::open(file).ok()?.take(8 + 8 + 8 + 4096).read_to_end(&mut head).ok()?;
    let mut r = Reader { bytes: &head, at: 0 };
    if r.take(8)? != MAGIC {
        return None;
    }
    r.u64()?;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written_and_a_changed_key_reads_nothing() {
        let dir = std::env::temp_dir().join(format!("paddock-walkcache-{}", std::process::id()));
        let file = dir.join("x");
        let stamp = Stamp { dev: 1, ino: 2, mtime: -3, mtime_ns: 4, ctime: 5, ctime_ns: 6 };
        let records = vec![
            DirRecord {
                rel: Vec::new(),
                stamp,
                racy: false,
                hits: vec![(b".git".to_vec(), FileKind::Dir)],
            },
            DirRecord { rel: b"a/\xffb".to_vec(), stamp, racy: true, hits: Vec::new() },
        ];
        write(&file, b"/p", 7, &records);
        assert_eq!(read(&file, b"/p", 7), Some(records));
        assert_eq!(read(&file, b"/q", 7), None);
        assert_eq!(read(&file, b"/p", 8), None);
        let mut bytes = std::fs::read(&file).unwrap_or_default();
        bytes.pop();
        std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&file, b"/p", 7), None, "a truncated file is not trusted");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pruning_drops_gone_projects_first_then_the_oldest() {
        let dir = std::env::temp_dir().join(format!("paddock-walkprune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("alive")).unwrap_or_else(|e| panic!("{e}"));
        let records = dir.join("walks");
        let alive = |i: usize| dir.join("alive").join(i.to_string());
        // Eight live projects (written oldest first) and four that are gone.
        for i in 0..8 {
            std::fs::create_dir(alive(i)).unwrap_or_else(|e| panic!("{e}"));
            let root = alive(i);
            let file = file_for(&records, &root);
            write(&file, root.as_os_str().as_encoded_bytes(), 1, &[]);
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(&file)
                .and_then(|f| f.set_modified(when))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for i in 0..4 {
            let root = dir.join(format!("gone{i}"));
            write(&file_for(&records, &root), root.as_os_str().as_encoded_bytes(), 1, &[]);
        }
        let count = || std::fs::read_dir(&records).map(|d| d.count()).unwrap_or(0);
        prune(&records, 12);
        assert_eq!(count(), 12, "at the limit nothing goes");
        prune(&records, 10);
        // Down to 8 (three quarters of 10, rounded up): the four gone projects went first,
        // and no live one had to.
        assert_eq!(count(), 8);
        assert!((0..8).all(|i| file_for(&records, &alive(i)).exists()));
        prune(&records, 4);
        // Down to 3: the five oldest live ones went.
        let left: Vec<usize> = (0..8).filter(|&i| file_for(&records, &alive(i)).exists()).collect();
        assert_eq!(left, [5, 6, 7]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_sweep_of_the_runtime_base_keeps_the_records() {
        let dir = crate::runtime::runtime_dir::base().join(WALKS_DIR);
        let file = file_for(&dir, Path::new("/paddock-sweep-test"));
        write(&file, b"/paddock-sweep-test", 1, &[]);
        assert!(file.exists(), "written");
        // Older than a minute, with no lock file: what the sweep takes for a dead run's dir.
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
        std::fs::File::open(&dir)
            .and_then(|d| d.set_times(std::fs::FileTimes::new().set_modified(old)))
            .unwrap_or_else(|e| panic!("{e}"));
        crate::runtime::runtime_dir::sweep_stale(None);
        assert!(file.exists(), "the sweep removed the walk's records");
        let _ = std::fs::remove_file(&file);
    }
}
