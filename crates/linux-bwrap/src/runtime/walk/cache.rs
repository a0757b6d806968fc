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
