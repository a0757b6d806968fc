//! The runtime dir's tests: runs, uses, releases, leftovers, the pool and the sweep.

use super::*;

/// The tests here share the runtime base: one at a time, since a live run's recorded uses
/// are every other run's foreign placeholders.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn an_overwrite_writes_over_the_old_records_only() {
    use std::os::unix::fs::FileExt;
    let dir = std::env::temp_dir().join(format!("paddock-overwrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("list");
    let mut options = std::fs::OpenOptions::new();
    let file = options.read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    // A long list once (past one read), then padding a later write must not touch.
    let long: Vec<u8> = (0..600).flat_map(|i| format!("f /p/name-{i}\0").into_bytes()).collect();
    assert!(long.len() > 4096);
    overwrite(&file, &long).unwrap();
    assert_eq!(records_end(&file).unwrap(), long.len());
    file.write_all_at(b"SENTINEL", 200_000).unwrap();
    overwrite(&file, b"f /p/b\0").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..7], b"f /p/b\0");
    assert!(bytes[7..long.len()].iter().all(|&b| b == 0), "the old records are gone");
    assert_eq!(&bytes[200_000..], b"SENTINEL", "nothing past them was written");
    assert_eq!(placeholders::parse_manifest(&bytes[..200_000]).len(), 1);
    overwrite(&file, b"").unwrap();
    assert_eq!(records_end(&file).unwrap(), 0);
    assert!(std::fs::read(&path).unwrap()[..long.len()].iter().all(|&b| b == 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The uses recorded in the lock file of the run at `dir`, and the file's size.
fn recorded_uses(dir: &Path) -> (Vec<PathBuf>, usize) {
    let bytes = std::fs::read(dir.join(LOCK_FILE)).unwrap();
    let paths = placeholders::parse_manifest(&bytes).into_iter().map(|(p, _)| p).collect();
    (paths, bytes.len())
}

#[test]
fn a_borrowed_use_goes_before_the_padding_and_is_cleared_with_the_list() {
    let _serial = one_at_a_time();
    let run = RuntimeDir::create().unwrap();
    let dir = run.path().as_path();
    let uses = || recorded_uses(dir).0;
    let (long, short) = (Path::new("/p/a-long-protected-name"), Path::new("/p/b"));
    run.record_uses([long].into_iter()).unwrap();
    // A shorter list leaves padding where the longer one was.
    run.record_uses([short].into_iter()).unwrap();
    let borrowed = Path::new("/p/borrowed-placeholder");
    placeholders::record_use(dir, borrowed).unwrap();
    assert_eq!(uses(), [short, borrowed]);
    clear_uses(dir);
    assert_eq!(uses(), Vec::<PathBuf>::new(), "a use left behind keeps another run's placeholder");
}

#[test]
fn uses_are_rewritten_in_place_and_cleared_without_shrinking_the_lock_file() {
    let _serial = one_at_a_time();
    let run = RuntimeDir::create().unwrap();
    let dir = run.path().as_path();
    let read = || recorded_uses(dir);
    let (long, short) = (Path::new("/p/a-long-protected-name"), Path::new("/p/b"));
    run.record_uses([long, short].into_iter()).unwrap();
    let (paths, size) = read();
    assert_eq!(paths, [long, short]);
    clear_uses(dir);
    assert_eq!(read(), (Vec::new(), size), "cleared, never truncated");
    let uses = run.record_uses([short].into_iter()).unwrap();
    record_uses_again(dir, &uses).unwrap();
    assert_eq!(read(), (vec![short.to_path_buf()], size), "the longer list is gone");
}

#[test]
fn a_leftover_entry_removes_only_the_placeholder_it_was_kept_for() {
    // A kept placeholder gone (through another list) and a run's fresh one made at the
    // same name, not yet recorded as used (it is still making its set): a later release
    // processing the old list must leave the fresh one alone (it removed "any empty one"
    // before, and the run failed making its `.git/config` inside with ENOENT).
    let _serial = one_at_a_time();
    let user = RuntimeDir::create().unwrap();
    let name = std::env::temp_dir().join(format!("paddock-kept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&name);
    std::fs::create_dir(&name).unwrap();
    user.record_uses([name.as_path()].into_iter()).unwrap();
    release_placeholders(&[(name.clone(), true, Stamp::ANY)], None, &mut Spares::none());
    assert!(name.exists(), "removed while a live run binds it");
    drop(user);
    // Another inode for certain: made before the kept one is removed, moved in after.
    let fresh = std::env::temp_dir().join(format!("paddock-fresh-{}", std::process::id()));
    std::fs::create_dir(&fresh).unwrap();
    std::fs::remove_dir(&name).unwrap();
    std::fs::rename(&fresh, &name).unwrap();
    release_placeholders(&[], None, &mut Spares::none());
    let kept = name.exists();
    let _ = std::fs::remove_dir(&name);
    assert!(kept, "a leftover list removed another run's fresh placeholder");
}

#[test]
fn a_placeholder_a_live_run_uses_outlives_its_creator() {
    let _serial = one_at_a_time();
    let user = RuntimeDir::create().unwrap();
    let ghost = std::env::temp_dir().join(format!("paddock-used-{}", std::process::id()));
    std::fs::create_dir(&ghost).unwrap();
    user.record_uses([ghost.as_path()].into_iter()).unwrap();
    // Its creator ends: the placeholder stays, listed for later.
    release_placeholders(&[(ghost.clone(), true, Stamp::ANY)], None, &mut Spares::none());
    assert!(ghost.exists(), "removed while a live run binds it");
    // The user ends too: the next release removes it, and its leftover file.
    drop(user);
    release_placeholders(&[], None, &mut Spares::none());
    assert!(!ghost.exists());
    let leftovers = std::fs::read_dir(base())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(LEFTOVER_PREFIX.as_bytes()))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .flat_map(|b| leftovers::parse_leftover(&b))
        .any(|(p, _, _)| p == ghost);
    assert!(!leftovers, "a leftover entry outlived its placeholder");
}

#[test]
fn a_released_runtime_dir_waits_in_the_pool_emptied_and_the_next_run_takes_it() {
    use std::os::unix::fs::MetadataExt;
    let _serial = one_at_a_time();
    let pool = base().join(POOL_DIR);
    let _ = std::fs::remove_dir_all(&pool);
    let first = RuntimeDir::create().unwrap();
    let path = first.path().as_path().to_path_buf();
    let lock = path.join(LOCK_FILE);
    let inode = std::fs::metadata(&path).unwrap().ino();
    std::fs::write(path.join("tmp/left-by-the-task"), "x").unwrap();
    std::fs::write(path.join("bridge.sock"), "").unwrap();
    std::fs::write(
        path.join(crate::runtime::runtime_dir::placeholders::PLACEHOLDER_MANIFEST),
        "f /p/.bashrc\0",
    )
    .unwrap();
    std::fs::create_dir(path.join(crate::plan::OBSERVER_DIR)).unwrap();
    first.record_uses([Path::new("/p/.git")].into_iter()).unwrap();
    drop(first);
    assert!(!path.exists() && !lock.exists(), "out of the base");
    let pooled: Vec<PathBuf> =
        std::fs::read_dir(&pool).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(pooled.len(), 1);
    let mut kept: Vec<_> =
        std::fs::read_dir(&pooled[0]).unwrap().map(|e| e.unwrap().file_name()).collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            crate::runtime::runtime_dir::placeholders::MANIFEST_ASIDE,
            LOCK_FILE,
            crate::plan::OBSERVER_DIR
        ],
        "the lock file stays, the manifest waits aside, the observer's mount point stays"
    );
    let uses = std::fs::read(pooled[0].join(LOCK_FILE)).unwrap();
    assert!(
        crate::runtime::runtime_dir::placeholders::parse_manifest(&uses).is_empty(),
        "uses cleared"
    );
    // A sweep leaves the pool alone.
    sweep_stale(None);
    assert!(pooled[0].exists());
    // The next run takes it: the same directory, under a name of its own, locked.
    let second = RuntimeDir::create().unwrap();
    assert_eq!(std::fs::metadata(second.path().as_path()).unwrap().ino(), inode);
    assert!(!pooled[0].exists());
    let other = open_lock(second.path().as_path(), false).unwrap();
    assert!(!try_flock(&other), "locked by its run");
    assert!(second.path().as_path().join("tmp").is_dir());
    drop(second);
    // One holding anything but its lock is not taken but removed.
    let pooled: Vec<PathBuf> =
        std::fs::read_dir(&pool).unwrap().map(|e| e.unwrap().path()).collect();
    std::fs::write(pooled[0].join("planted"), "x").unwrap();
    let third = RuntimeDir::create().unwrap();
    assert_ne!(std::fs::metadata(third.path().as_path()).unwrap().ino(), inode);
    assert!(!pooled[0].exists(), "removed");
    assert!(!third.path().as_path().join("planted").exists());
    // Nor one whose observer's mount point holds anything.
    std::fs::create_dir(third.path().as_path().join(crate::plan::OBSERVER_DIR)).unwrap();
    drop(third);
    let pooled: Vec<PathBuf> =
        std::fs::read_dir(&pool).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(pooled[0].join(crate::plan::OBSERVER_DIR).is_dir(), "kept, empty");
    std::fs::write(pooled[0].join(crate::plan::OBSERVER_DIR).join("planted"), "x").unwrap();
    let fourth = RuntimeDir::create().unwrap();
    assert!(!pooled[0].exists(), "removed");
    assert!(!fourth.path().as_path().join(crate::plan::OBSERVER_DIR).exists());
    drop(fourth);
    // It keeps at most `POOL_SIZE`.
    let runs: Vec<RuntimeDir> = (0..POOL_SIZE + 2).map(|_| RuntimeDir::create().unwrap()).collect();
    drop(runs);
    assert_eq!(std::fs::read_dir(&pool).unwrap().count(), POOL_SIZE);
}

#[test]
fn created_locked_swept_only_when_dead_and_removed_on_drop() {
    let _serial = one_at_a_time();
    let dir = RuntimeDir::create().unwrap();
    let path = dir.path().as_path().to_path_buf();
    assert!(path.as_os_str().len() < 80, "short: {}", path.display());
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o700);
    assert!(path.join("tmp").is_dir());
    // A live run is never swept.
    sweep_stale(None);
    assert!(path.exists());
    // A dead run: its dir with an unlocked lock file and a recorded placeholder.
    let dead = base().join("deadbeef0000");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join(LOCK_FILE), "").unwrap();
    let ghost = std::env::temp_dir().join(format!("paddock-ghost-{}", std::process::id()));
    std::fs::create_dir(&ghost).unwrap();
    let p =
        paddock_policy::Placeholder { path: AbsPathBuf::new_lexical(&ghost).unwrap(), dir: true };
    std::fs::write(
        dead.join(crate::runtime::runtime_dir::placeholders::PLACEHOLDER_MANIFEST),
        [b"d ".as_slice(), p.path.as_os_str().as_encoded_bytes(), b"\0"].concat(),
    )
    .unwrap();
    sweep_stale(Some(&path));
    assert!(!dead.exists());
    assert!(!ghost.exists());
    assert!(path.exists());
    drop(dir);
    assert!(!path.exists());
}

#[test]
fn a_gone_run_is_swept_by_one_sweep_alone() {
    // Two runs may both find a run gone. The one that sweeps holds its lock until the dir is
    // gone; the other, finding the lock held, reads nothing of it: it would otherwise remove
    // "any empty" placeholder at those paths, a new run's by then.
    let _serial = one_at_a_time();
    let dead = base().join("deadbeef0001");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join(LOCK_FILE), "").unwrap();
    let ghost = std::env::temp_dir().join(format!("paddock-claimed-{}", std::process::id()));
    std::fs::create_dir(&ghost).unwrap();
    std::fs::write(
        dead.join(crate::runtime::runtime_dir::placeholders::PLACEHOLDER_MANIFEST),
        [b"d ".as_slice(), ghost.as_os_str().as_encoded_bytes(), b"\0"].concat(),
    )
    .unwrap();
    let first = open_lock(&dead, false).unwrap();
    assert!(try_flock(&first), "the first sweep's claim");
    assert!(!sweep_one(&dead), "swept under another's claim");
    assert!(ghost.is_dir() && dead.is_dir(), "touched under another's claim");
    drop(first);
    assert!(sweep_one(&dead));
    assert!(!ghost.exists() && !dead.exists());
    // Gone: a placeholder made at its path since is another run's.
    std::fs::create_dir(&ghost).unwrap();
    assert!(!sweep_one(&dead));
    assert!(ghost.is_dir());
    std::fs::remove_dir(&ghost).unwrap();
}

#[test]
fn a_placeholder_made_during_resolution_makes_it_resolve_again() {
    let _serial = one_at_a_time();
    let me = RuntimeDir::create().unwrap();
    let other = RuntimeDir::create().unwrap();
    let made = std::env::temp_dir().join(format!("paddock-settle-{}/.git", std::process::id()));
    let own = Some(me.path().as_path());
    let mut seen: Vec<Vec<PathBuf>> = Vec::new();
    let got = resolve_settled(own, Vec::new(), |foreign| {
        if seen.is_empty() {
            // Another run lists (then makes) a placeholder while this one resolves.
            let text = crate::runtime::runtime_dir::placeholders::manifest_bytes(std::iter::once(
                (made.as_path(), true),
            ));
            std::fs::write(
                other
                    .path()
                    .as_path()
                    .join(crate::runtime::runtime_dir::placeholders::PLACEHOLDER_MANIFEST),
                text,
            )
            .unwrap();
        }
        seen.push(foreign.clone());
        Ok::<_, std::io::Error>(foreign)
    })
    .unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(!seen[0].contains(&made) && got.contains(&made), "{seen:?}");
    // A leftover list's placeholders are other runs' too.
    let ghost = made.with_file_name(".vscode");
    drop(other);
    write_leftover(&[(ghost.clone(), true, Stamp::ANY)]);
    assert!(foreign_placeholders(own).contains(&ghost));
    assert!(!foreign_placeholders(own).contains(&made), "a run gone lists nothing");
    release_placeholders(&[], own, &mut Spares::none());
    assert!(!foreign_placeholders(own).contains(&ghost), "the list outlived its entry");
}

#[test]
fn tmp_is_made_only_when_asked() {
    let _serial = one_at_a_time();
    let lean = RuntimeDir::create_with_tmp(false).unwrap();
    let path = lean.path().as_path().to_path_buf();
    assert!(path.is_dir() && !path.join("tmp").exists());
    assert!(path.join(LOCK_FILE).is_file());
    drop(lean);
    assert!(!path.exists());
    let full = RuntimeDir::create_with_tmp(true).unwrap();
    assert!(full.path().as_path().join("tmp").is_dir());
}
