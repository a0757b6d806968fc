//! SYM-03: a write grant swapped for a symlink while the sandbox is being set up. bwrap binds
//! grants by path (0.8 has no `--bind-fd`), so between paddock's check of the grant and
//! bwrap's mount a concurrent process can put a symlink there. The supervisor compares what
//! got mounted with what paddock checked and refuses to start the task on a difference: the
//! race may fail a run (exit 125), never hand the task the symlink's target.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::harness::*;

/// How many runs race the swapping loop (the case's "run 300 times").
const RUNS: usize = 300;

/// Exchanges `dir` (a directory) with `link` (a symlink to the secret) atomically, over and
/// over, until `stop`: a run's plan may see the directory and bwrap's mount the link. Also
/// removes and recreates the directory now and then, so some runs see it missing.
fn swap_until(dir: &Path, link: &Path, stop: &AtomicBool) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let (a, b) = (c(dir), c(link));
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: two NUL-terminated paths; renameat2 reads them only.
        unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            );
        }
        std::thread::sleep(std::time::Duration::from_micros(200 + (rounds as u64 % 7) * 150));
        rounds += 1;
    }
    rounds
}

#[test]
fn a_grant_swapped_for_a_symlink_during_setup_never_reaches_its_target_sym03() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("sym03race");
    let build = sc.project.join("build");
    let ssh = sc.home.join(".ssh");
    // Relative: bwrap resolves a bind's source below `/oldroot`, where an absolute link
    // would point at nothing.
    let link = sc.project.join("build.lnk");
    std::os::unix::fs::symlink("../.ssh", &link).unwrap();
    std::fs::create_dir(&build).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (build, stop) = (build.clone(), Arc::clone(&stop));
        std::thread::spawn(move || swap_until(&build, &link, &stop))
    };
    let mut codes = std::collections::BTreeMap::<i32, usize>::new();
    let mut leaked = Vec::new();
    for i in 0..RUNS {
        // Half untraced (`paddock-supervisor-nolibc` checks), half itemized as this suite
        // run does (`paddock-supervisor` checks).
        let untraced: &[&str] = if i % 2 == 0 { &["--itemize", "off"] } else { &[] };
        let out = sc
            .paddock()
            .arg("run")
            .args(untraced)
            .args(["--allow-write", "build", "--"])
            .args(["sh", "-c", "ls build; touch build/RACE"])
            .output()
            .unwrap();
        *codes.entry(out.status.code().unwrap_or(-1)).or_default() += 1;
        if String::from_utf8_lossy(&out.stdout).contains("id_canary") {
            leaked.push(out);
        }
        if ssh.join("RACE").exists() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = swapper.join().unwrap();
    assert!(!ssh.join("RACE").exists(), "the task wrote into ~/.ssh (codes {codes:?})");
    assert!(leaked.is_empty(), "the task listed ~/.ssh: {:?}", leaked.first());
    assert_eq!(std::fs::read_to_string(ssh.join("id_canary")).unwrap(), CANARY);
    // Every run either ran (0: the grant held, or 1: `ls`/`touch` found no directory) or
    // was refused before the task started (125); nothing else.
    assert!(codes.keys().all(|c| [0, 1, 125].contains(c)), "exit codes {codes:?}");
    assert!(rounds > RUNS, "the swapping loop barely ran ({rounds} rounds): no race was tried");
    println!("SYM-03 race: {RUNS} runs against {rounds} swaps, exit codes {codes:?}");
}
