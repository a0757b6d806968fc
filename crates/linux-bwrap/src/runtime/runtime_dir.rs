//! The per-task runtime directory: a short path (unix socket paths must stay under 108
//! bytes), mode 0700, holding a lock file kept `flock`ed for the task's life, the
//! placeholder manifest, and `tmp/` (the task's private tmp when `/tmp` itself is granted;
//! only made then, see [`RuntimeDir::create_with_tmp`]).
//!
//! Cleanup after a killed run ([`sweep_stale`]) removes only directories whose lock it can
//! take: a live run holds its lock, and pid liveness lies across pid namespaces (DESIGN
//! decision 6).

pub mod leftovers;
pub mod placeholders;
pub mod spares;

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use paddock_policy::AbsPathBuf;

use crate::runtime::runtime_dir::spares::{Spares, Stamp};

/// The lock file's name.
pub const LOCK_FILE: &str = "lock";

/// A live task's runtime directory. Dropping it removes the directory.
#[derive(Debug)]
pub struct RuntimeDir {
    path: AbsPathBuf,
    lock: File,
}

impl RuntimeDir {
    /// Creates a fresh runtime dir under [`base`] with its `tmp/`, and takes its lock.
    pub fn create() -> io::Result<RuntimeDir> {
        RuntimeDir::create_with_tmp(true)
    }

    /// Creates a fresh runtime dir under [`base`] and takes its lock; `tmp/` only when
    /// `with_tmp` (the plan mounts the task's tmp there when `/tmp` itself is granted, and
    /// nothing uses it otherwise). Each directory costs on the spawn path: on ext4 mounted
    /// with `discard`, removing one waits for the device.
    pub fn create_with_tmp(with_tmp: bool) -> io::Result<RuntimeDir> {
        let base = base();
        ensure_private_dir(&base)?;
        for _ in 0..16 {
            // Made under a hidden name, locked, then renamed into place: a sweep or a scan
            // only ever sees it locked (one that took the lock of a dir not locked yet would
            // take it for a dead run's).
            let name = random_name()?;
            let staging = base.join(format!(".{name}"));
            let path = base.join(&name);
            let lock = match take_pooled(&base, &staging) {
                Some(lock) => lock,
                None => {
                    match std::fs::DirBuilder::new().mode(0o700).create(&staging) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e),
                    }
                    let lock = open_lock(&staging, true)?;
                    if !try_flock(&lock) {
                        return Err(io::Error::other("a fresh runtime dir's lock is already held"));
                    }
                    lock
                }
            };
            if path.exists() {
                let _ = std::fs::remove_dir_all(&staging);
                continue;
            }
            std::fs::rename(&staging, &path)?;
            if with_tmp {
                std::fs::DirBuilder::new().mode(0o700).create(path.join("tmp"))?;
            }
            let path = AbsPathBuf::new_lexical(&path)
                .ok_or_else(|| io::Error::other("runtime dir is not absolute"))?;
            return Ok(RuntimeDir { path, lock });
        }
        Err(io::Error::other(format!(
            "cannot find a free runtime dir name under {}",
            base.display()
        )))
    }

    /// Its path.
    pub fn path(&self) -> &AbsPathBuf {
        &self.path
    }

    /// Makes its `tmp/` (see [`RuntimeDir::create_with_tmp`]), once the policy says it is
    /// needed: the directory is locked before the policy is resolved.
    pub fn make_tmp(&self) -> io::Result<()> {
        match std::fs::DirBuilder::new().mode(0o700).create(self.path.join("tmp")) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        // Pooled, or removed (`remove_dir_all` does not follow symlinks); the lock goes with
        // the file handle after, once the directory is out of the runs' sight.
        if !self.pool() {
            let _ = std::fs::remove_dir_all(self.path.as_path());
        }
    }
}

/// Where released runtime dirs wait, each with its (unlocked, emptied) lock file alone, to be
/// taken by a later run (`take_pooled`). Making a directory and its lock file and removing
/// them again cost about 0.2 ms a run on ext4 mounted with `discard` (a removed directory's
/// block waits for the device); renamed out of and into the pool, they are never freed.
/// Sweeps never look inside: what is there is no run's.
pub const POOL_DIR: &str = "pool";

/// What a pooled runtime dir holds: its lock file, and the last manifest as the next one's
/// aside file.
const POOLED_FILES: [&str; 2] =
    [LOCK_FILE, crate::runtime::runtime_dir::placeholders::MANIFEST_ASIDE];

/// The empty directories a pooled runtime dir keeps: the observer's mount point (on the
/// host it is an empty directory: the mount is in the sandbox's namespace). Removing it cost
/// an observed run 0.4 ms on ext4 mounted with `discard`.
const POOLED_DIRS: [&str; 1] = [crate::plan::OBSERVER_DIR];

/// Whether `entry` of a runtime dir is kept in the pool: one of [`POOLED_FILES`], a regular
/// file, or one of [`POOLED_DIRS`], an empty directory (not a link).
fn pooled(entry: &std::fs::DirEntry) -> bool {
    let name = entry.file_name();
    let Ok(kind) = entry.file_type() else { return false };
    if POOLED_FILES.iter().any(|kept| name == *kept) {
        return kind.is_file();
    }
    POOLED_DIRS.iter().any(|kept| name == *kept)
        && kind.is_dir()
        && std::fs::read_dir(entry.path()).is_ok_and(|mut e| e.next().is_none())
}

/// How many released runtime dirs the pool keeps; more are removed.
const POOL_SIZE: usize = 4;

impl RuntimeDir {
    /// Moves this runtime dir to the pool, emptied but for its lock file, whose uses are
    /// cleared, and what [`pooled`] keeps; `false` when it was not (a full pool, or anything failing), and it is to be
    /// removed. Still locked while it moves: no sweep or scan sees it unlocked in the base.
    fn pool(&self) -> bool {
        let dir = self.path.as_path();
        // The manifest waits as the next run's aside file (see `placeholders`).
        let manifest = dir.join(crate::runtime::runtime_dir::placeholders::PLACEHOLDER_MANIFEST);
        let aside = dir.join(crate::runtime::runtime_dir::placeholders::MANIFEST_ASIDE);
        if std::fs::rename(&manifest, &aside).is_err() && manifest.exists() {
            return false;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return false };
        for entry in entries.flatten() {
            if pooled(&entry) {
                continue;
            }
            let path = entry.path();
            let gone = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            if gone.is_err() {
                return false;
            }
        }
        if overwrite(&self.lock, &[]).is_err() {
            return false;
        }
        let Some(pool) = dir.parent().map(|base| base.join(POOL_DIR)) else { return false };
        match std::fs::DirBuilder::new().mode(0o700).create(&pool) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return false,
            _ => {}
        }
        let full = std::fs::read_dir(&pool).map_or(true, |e| e.count() >= POOL_SIZE);
        !full
            && random_name().is_ok_and(|name| {
                crate::runtime::runtime_dir::spares::rename_noreplace(dir, &pool.join(name)).is_ok()
            })
    }
}

/// A runtime dir from the pool, renamed to `staging` and locked; its lock file is returned.
/// Runs taking at once each get another (a rename moves a directory once). One holding
/// anything but its regular files ([`POOLED_FILES`], the lock file unlocked) and empty
/// directories ([`POOLED_DIRS`]) is removed, and the next is tried.
fn take_pooled(base: &Path, staging: &Path) -> Option<File> {
    for entry in std::fs::read_dir(base.join(POOL_DIR)).ok()?.flatten() {
        if crate::runtime::runtime_dir::spares::rename_noreplace(&entry.path(), staging).is_err() {
            continue;
        }
        let mut has_lock = false;
        let only_its_files = std::fs::read_dir(staging).is_ok_and(|entries| {
            entries.flatten().all(|f| {
                has_lock |= f.file_name() == LOCK_FILE;
                pooled(&f)
            })
        });
        if only_its_files
            && has_lock
            && let Ok(lock) = open_lock(staging, true)
            && try_flock(&lock)
        {
            return Some(lock);
        }
        let _ = std::fs::remove_dir_all(staging);
    }
    None
}

/// Where runtime dirs are made: `$XDG_RUNTIME_DIR/paddock` when that is set and short, else
/// `$TMPDIR/paddock-<uid>` (or `/tmp/paddock-<uid>` when `TMPDIR` is too long).
pub fn base() -> PathBuf {
    crate::probe::runtime_base()
}

/// A representative runtime dir path for printing a plan without creating anything.
pub fn planned_path() -> AbsPathBuf {
    AbsPathBuf::new_lexical(base().join("XXXXXXXXXXXX")).unwrap_or_else(AbsPathBuf::root)
}

/// The prefix of a file in the runtime base listing placeholders whose removal waits until
/// no run is alive (see [`release_placeholders`]).
const LEFTOVER_PREFIX: &str = "leftover-";

/// Removes the runtime dirs of runs that are gone (their lock can be taken), and the
/// placeholders their manifests list (or defers them: [`release_placeholders`]). Errors are
/// ignored: a sweep is best effort and never touches a directory whose lock is held. `own`
/// is the caller's own runtime dir, if it has one already.
///
/// Returns the placeholders of the runs alive and of the leftover lists: to this run they
/// are missing names (see
/// `host::CachedHost::with_foreign`). Taken for the user's own, they would get this run's
/// placeholders made inside them (its `.git/hooks` in another's `.git`), and the other run
/// could not remove its own when done.
pub fn sweep_stale(own: Option<&Path>) -> Vec<PathBuf> {
    let base = base();
    if ensure_private_dir(&base).is_err() {
        return Vec::new();
    }
    foreign_placeholders_sweeping(&base, own, true)
}

/// The placeholders of the live runs other than `own` and of the leftover lists: what
/// [`sweep_stale`] returns, without sweeping.
pub fn foreign_placeholders(own: Option<&Path>) -> Vec<PathBuf> {
    foreign_placeholders_sweeping(&base(), own, false)
}

fn foreign_placeholders_sweeping(base: &Path, own: Option<&Path>, sweep: bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else { return Vec::new() };
    let mut foreign = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if Some(path.as_path()) == own {
            continue;
        }
        // A leftover list's placeholders wait for the runs that bind them: their makers are
        // gone, and so are the manifests that listed them.
        if entry.file_name().as_encoded_bytes().starts_with(LEFTOVER_PREFIX.as_bytes()) {
            let listed = std::fs::read(&path).map(|b| leftovers::parse_leftover(&b));
            foreign.extend(listed.unwrap_or_default().into_iter().map(|(p, _, _)| p));
            continue;
        }
        match run_state(&entry) {
            RunState::Gone if sweep => {
                sweep_one(&path);
            }
            RunState::Alive => {
                foreign.extend(
                    crate::runtime::runtime_dir::placeholders::read_manifest(&path)
                        .into_iter()
                        .map(|(p, _)| p),
                );
            }
            RunState::Gone | RunState::Other => {}
        }
    }
    foreign
}

/// Resolves with `resolve(foreign)` until no other run made a placeholder meanwhile.
///
/// The placeholders of other runs are read before resolution ([`sweep_stale`]), which
/// takes them for missing names. One made after that read, while this run resolves, would be
/// taken for the user's own (a `.git` for a repository, and this run would make its own
/// `.git/hooks` inside it, which keeps the other's `.git` from ever being removed). Its
/// maker lists it before making it, so reading again after the resolution finds it; then
/// the resolution is done again, knowing it. Bounded: the other runs of one project make the
/// same placeholders, so the set stops growing.
pub fn resolve_settled<T, E>(
    own: Option<&Path>,
    mut foreign: Vec<PathBuf>,
    mut resolve: impl FnMut(Vec<PathBuf>) -> Result<T, E>,
) -> Result<T, E> {
    for _ in 0..SETTLE_TRIES {
        let resolved = resolve(foreign.clone())?;
        let new: Vec<PathBuf> =
            foreign_placeholders(own).into_iter().filter(|p| !foreign.contains(p)).collect();
        if new.is_empty() {
            return Ok(resolved);
        }
        foreign.extend(new);
    }
    resolve(foreign)
}

/// How many times [`resolve_settled`] resolves before it takes the last result.
const SETTLE_TRIES: usize = 4;

/// Sweeps the runtime dir of a run found gone: its placeholders, then the directory.
///
/// Claimed first: its lock is taken again and held until the directory is gone, and the
/// lock file must still be the one at its path. Two runs sweeping at once each found it
/// gone; without the claim the second read its manifest before the first removed it, and
/// removed "any empty" placeholder at those paths after the first was done, by which time a
/// third run of the same project had made its own there (a kill -9, then a run: the new
/// run's `.agents` went from under its bind, and it failed closed with ENOENT). Held, the
/// lock makes the dir a live run's to everyone else until its placeholders are gone: a run
/// starting meanwhile takes them for another's (missing names), and borrows or remakes them
/// under the release lock (`placeholders::make_or_borrow`). Returns whether it swept.
fn sweep_one(path: &Path) -> bool {
    let claim = match open_lock(path, false) {
        Ok(lock) => {
            if !try_flock(&lock) || !same_file(&lock, &path.join(LOCK_FILE)) {
                return false;
            }
            Some(lock)
        }
        // A dir never locked (no lock file), old enough to be a run that died being made.
        Err(e) if e.kind() == io::ErrorKind::NotFound && path.is_dir() => None,
        Err(_) => return false,
    };
    let listed: Vec<(PathBuf, bool, Stamp)> =
        crate::runtime::runtime_dir::placeholders::read_manifest(path)
            .into_iter()
            .map(|(p, dir)| (p, dir, Stamp::ANY))
            .collect();
    // Its own uses (kept in its lock file) are cleared: it is not a live run to the release.
    release_placeholders(&listed, Some(path), &mut Spares::none());
    let _ = std::fs::remove_dir_all(path);
    drop(claim);
    true
}

/// Whether `file` is the file at `path` (not followed if a link), still linked there.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
        _ => false,
    }
}

/// What an entry of the runtime base is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunState {
    /// A run's dir whose lock is held: the run is alive.
    Alive,
    /// A run's dir whose lock could be taken (and was released again), or one that was never
    /// locked and is over a minute old: the run is gone.
    Gone,
    /// Anything else: a file, a run being made (a hidden dir), or a young dir with no lock
    /// file.
    Other,
}

fn run_state(entry: &std::fs::DirEntry) -> RunState {
    if entry.file_name() == crate::runtime::runtime_dir::spares::SPARES_DIR
        || entry.file_name() == POOL_DIR
        || entry.file_name() == crate::runtime::walk::cache::WALKS_DIR
        || entry.file_name() == crate::runtime::exec_only::EXEC_ONLY_DIR
    {
        return RunState::Other;
    }
    let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { return RunState::Other };
    if !meta.is_dir() {
        return RunState::Other;
    }
    // A hidden dir is a run being made (see `RuntimeDir::create_with_tmp`): its lock is never
    // tried, or the run making it would find it taken.
    let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
    match open_lock(&entry.path(), false) {
        // Taken here, the lock is released when the handle drops.
        Ok(lock) if !hidden => {
            if try_flock(&lock) {
                RunState::Gone
            } else {
                RunState::Alive
            }
        }
        _ => {
            // Its status change, not its modification: a pooled dir renamed to a hidden name
            // by a run taking it (`take_pooled`) was last written long ago, but renamed now.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            if now.saturating_sub(meta.ctime()) > 60 { RunState::Gone } else { RunState::Other }
        }
    }
}

impl RuntimeDir {
    /// Records, before the spawn, the existing protected paths this run binds (see
    /// [`release_placeholders`]), in its lock file: no file more to make and remove per run.
    /// Each spawn writes them again ([`record_uses_again`]): a release clears them once its
    /// sandbox is gone, and a run may spawn more than once (a fallback to another itemizer).
    /// Returns the record, for [`supervise::RunOptions::uses`](crate::runtime::supervise::RunOptions::uses).
    pub fn record_uses<'a>(&self, paths: impl Iterator<Item = &'a Path>) -> io::Result<Vec<u8>> {
        let text =
            crate::runtime::runtime_dir::placeholders::manifest_bytes(paths.map(|p| (p, false)));
        // Writing does not touch the lock; a reader sees the list once the write returns.
        overwrite(&self.lock, &text)?;
        Ok(text)
    }
}

impl RuntimeDir {
    /// [`RuntimeDir::record_uses`] with the protected paths `policy` binds as they are (the
    /// existing ones; the missing ones get placeholders, recorded when made or borrowed).
    pub fn record_uses_of(&self, policy: &paddock_policy::ResolvedPolicy) -> io::Result<Vec<u8>> {
        self.record_uses(policy.protected.iter().filter_map(|p| match &p.state {
            paddock_policy::ProtectedState::Exists { .. } => Some(p.path.as_path()),
            paddock_policy::ProtectedState::Missing { .. } => None,
        }))
    }
}

/// Before a spawn: the uses recorded for this run (`uses`, what
/// [`RuntimeDir::record_uses`] returned), written again into the lock file of `dir` (a
/// release of an earlier spawn of the same run cleared them). A directory without a lock
/// file is not a run's: nothing to do.
pub fn record_uses_again(dir: &Path, uses: &[u8]) -> io::Result<()> {
    match open_uses(dir) {
        Ok(lock) => overwrite(&lock, uses),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A release: the sandbox of this run is gone, so nothing it bound is in use any more.
fn clear_uses(dir: &Path) {
    if let Ok(lock) = open_uses(dir) {
        let _ = overwrite(&lock, &[]);
    }
}

fn open_uses(dir: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(LOCK_FILE))
}

/// Writes `text` (uses, a manifest: NUL-terminated records) over the start of `file`, the
/// rest of the records that were there overwritten with NULs (empty records, which a reader
/// skips). The file never shrinks: on ext4, a file truncated to nothing gets its data
/// allocated and written out when it is closed (`auto_da_alloc`), and freeing that block
/// again waits for a discard on a device mounted with `discard` (0.2 ms per run here).
/// Overwritten in place, the records stay in the page cache. Only what held records is
/// written: a pooled runtime dir's lock file keeps the size of the longest list any run
/// wrote (93 KB after the benchmark's large project), which every run wrote in full three
/// times before.
pub(crate) fn overwrite(file: &File, text: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    // A file this cannot read (opened for writing only) is padded to its end, as before.
    let old_end = match records_end(file) {
        Ok(end) => end,
        Err(_) => usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX).min(1 << 20),
    };
    let mut bytes = text.to_vec();
    bytes.resize(bytes.len().max(old_end), 0);
    file.write_all_at(&bytes, 0)
}

/// Where the records of `file` end. Each [`overwrite`] leaves its records followed by NULs
/// only, and no record is empty, so the padding begins at a NUL that starts the file or
/// follows another NUL.
pub(crate) fn records_end(file: &File) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 4096];
    let (mut at, mut after_nul) = (0usize, true);
    loop {
        let n = match file.read_at(&mut buf, u64::try_from(at).unwrap_or(u64::MAX)) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(at);
        }
        for (i, &b) in buf[..n].iter().enumerate() {
            if b == 0 && after_nul {
                return Ok(at + i);
            }
            after_nul = b == 0;
        }
        at += n;
    }
}

/// What the live runs other than `own` bind, and the leftover lists in the base.
#[derive(Debug, Default)]
struct Scan {
    used: Vec<PathBuf>,
    leftovers: Vec<PathBuf>,
    /// How many live runs other than `own` there are.
    live: usize,
}

fn scan(own: Option<&Path>) -> Scan {
    let mut out = Scan::default();
    for entry in std::fs::read_dir(base()).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_name().as_encoded_bytes().starts_with(LEFTOVER_PREFIX.as_bytes()) {
            out.leftovers.push(path);
        } else if Some(path.as_path()) != own && run_state(&entry) == RunState::Alive {
            out.live += 1;
            if let Ok(bytes) = std::fs::read(path.join(LOCK_FILE)) {
                out.used.extend(
                    crate::runtime::runtime_dir::placeholders::parse_manifest(&bytes)
                        .into_iter()
                        .map(|(p, _)| p),
                );
            }
        }
    }
    out
}

/// Removes placeholders (`(path, dir, inode)`, inode 0 for any empty one), except those a
/// live run uses: they are listed in a leftover file in the runtime base, for a later run to
/// remove once none does. Leftovers no live run uses any more are removed too.
///
/// A placeholder is a mount point in every sandbox that found it: a run that starts while
/// another's placeholder exists takes it for the user's file and binds it read-only. Removing
/// it on the host would silently unmount that bind in the other sandbox (the kernel detaches
/// mounts on a removed dentry in other mount namespaces), and the protected name would become
/// writable there. Each run records what it binds ([`RuntimeDir::record_uses`]) before it
/// spawns, and records a placeholder it borrows under the same lock this release holds, so
/// that no removal falls between its record and its check that the placeholder is there.
///
/// The untouched ones this run made go to its `spares` rather than being removed.
pub fn release_placeholders(
    list: &[(PathBuf, bool, Stamp)],
    own: Option<&Path>,
    spares: &mut Spares,
) {
    // This run's sandbox is gone: its own uses are cleared first, so that two runs releasing
    // at once do not each keep the other's placeholders for the other.
    if let Some(dir) = own {
        clear_uses(dir);
    }
    // One release at a time: the last run out then sees every leftover list the others
    // wrote, with their placeholders made inside another's (`.git/hooks` in `.git`) gone.
    // Interleaved, two runs could each leave a list for the other, and neither remove it.
    let _serial = release_lock();
    let first = scan(own);
    let (keep, now): (Vec<_>, Vec<_>) = list.iter().partition(|(p, _, _)| first.used.contains(p));
    let mut keep: Vec<(PathBuf, bool, Stamp)> = keep.into_iter().cloned().collect();
    // A directory another live run made its own placeholders in waits for it, like one it
    // binds: the last run out removes it once they are gone.
    let stuck = remove_all(&now, spares);
    if first.live > 0 {
        keep.extend(stuck.into_iter().cloned());
    }
    // The lists of runs that released before: removed once none of their users lives.
    for path in first.leftovers {
        let listed =
            std::fs::read(&path).map(|b| leftovers::parse_leftover(&b)).unwrap_or_default();
        if listed.iter().any(|(p, _, _)| first.used.contains(p)) {
            continue;
        }
        // Only what each entry was written for: a name that holds something else now (a
        // run's fresh placeholder, made but not yet recorded as used) is not this list's.
        let stuck: Vec<(PathBuf, bool, Stamp)> = listed
            .iter()
            .rev()
            .filter(|(p, _, id)| id.matches(p))
            .filter(|(p, dir, _)| {
                !crate::runtime::runtime_dir::placeholders::remove_placeholder(p, *dir, Stamp::ANY)
            })
            .map(|(p, dir, _)| (p.clone(), *dir, Stamp::ANY))
            .collect();
        // Still holding another live run's placeholders: theirs to leave to the last run.
        // With no run alive, what is in it is someone's own: it stays, unlisted.
        if first.live > 0 {
            keep.extend(stuck);
        }
        let _ = std::fs::remove_file(&path);
    }
    // Releases take turns, so a run releasing after this one sees this list.
    if !keep.is_empty() {
        write_leftover(&keep);
    }
}

/// Removes placeholders (or keeps the untouched ones as `spares`): files first, then
/// directories deepest first, one at a time.
///
/// Serial on purpose. On ext4 mounted with `discard` an `rmdir` costs about 70 us against
/// 10 us for an unlink; removing siblings from threads of their own was measured slower
/// (`cargo xtask bench spawn`, 19 placeholders: 0.4 ms more per run), thread start-up and
/// the teardown of each thread's malloc arena costing more than the overlap won; a rename
/// into the spares costs neither.
/// Returns the directories left because they were not empty.
fn remove_all<'a>(
    list: &[&'a (PathBuf, bool, Stamp)],
    spares: &mut Spares,
) -> Vec<&'a (PathBuf, bool, Stamp)> {
    for (path, _, stamp) in list.iter().filter(|e| !e.1) {
        if !spares.keep(path, false, *stamp) {
            crate::runtime::runtime_dir::placeholders::remove_placeholder(path, false, *stamp);
        }
    }
    let mut dirs: Vec<&(PathBuf, bool, Stamp)> = list.iter().copied().filter(|e| e.1).collect();
    dirs.sort_by_key(|e| std::cmp::Reverse(e.0.components().count()));
    dirs.retain(|(path, _, stamp)| {
        !spares.keep(path, true, *stamp)
            && !crate::runtime::runtime_dir::placeholders::remove_placeholder(path, true, *stamp)
    });
    dirs
}

fn write_leftover(list: &[(PathBuf, bool, Stamp)]) {
    let Ok(name) = random_name() else { return };
    let path = base().join(format!("{LEFTOVER_PREFIX}{name}"));
    let text = leftovers::leftover_bytes(list.iter().map(|(p, dir, _)| (p.as_path(), *dir)));
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text));
}

/// Makes `base` a private directory of ours (0700), or checks that it is one: not a link,
/// not someone else's directory planted in a shared `/tmp`.
pub(crate) fn ensure_private_dir(base: &Path) -> io::Result<()> {
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // It exists: it must be our own private directory, not a link or someone else's dir
    // planted in a shared /tmp.
    let meta = std::fs::symlink_metadata(base)?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid {
        return Err(io::Error::other(format!(
            "{} is not a directory owned by uid {uid}",
            base.display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn open_lock(dir: &Path, create: bool) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LOCK_FILE))
}

/// The runtime base's release lock, held until dropped (`None` when it cannot be had:
/// releasing goes on unserialized, as best effort). A run borrowing another's placeholder
/// takes it too, around recording its use (`placeholders::make_or_borrow`).
fn release_lock() -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(base().join(RELEASE_LOCK))
        .ok()?;
    // SAFETY: flock on a descriptor we own; blocking: releases take microseconds, and a
    // holder that dies releases it with its descriptor.
    (unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0).then_some(file)
}

/// The file in the runtime base whose lock serializes releases.
const RELEASE_LOCK: &str = "release.lock";

fn try_flock(file: &File) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn random_name() -> io::Result<String> {
    let mut bytes = [0u8; 6];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into a valid buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if usize::try_from(n).ok() != Some(bytes.len()) {
        return Err(io::Error::last_os_error());
    }
    Ok(paddock_policy::hex(&bytes))
}

#[cfg(test)]
mod tests;
