//! `--itemize observe`: the observer filesystem really mounted the way the runner does it
//! (in the forked child, in a namespace of its own), with a real bwrap run of a plan.
//!
//! These tests need `/dev/fuse` to be openable by the user running them; they skip loudly
//! otherwise, and fail under `CI=true` or `PADDOCK_REQUIRE_OS_TESTS=1`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use paddock_linux_bwrap::observe_fs::{self, FsOp, FsRecord};
use paddock_linux_bwrap::runtime::exec::{self, Output, Spawned};
use paddock_linux_bwrap::{LinuxBwrap, RECORD_FD};
use paddock_policy::{Backend, SpawnPlan, Task};

use super::{Scratch, abs, facts};

/// Why the observer cannot run here, if it cannot.
fn missing_fuse() -> Option<String> {
    match std::fs::OpenOptions::new().read(true).write(true).open(observe_fs::DEV_FUSE) {
        Ok(_) => None,
        Err(e) => Some(format!("{}: {e}", observe_fs::DEV_FUSE)),
    }
}

/// Skips (or, where required, fails) without FUSE; true when the test may run.
fn fuse_or_skip(test: &str) -> bool {
    let Some(reason) = missing_fuse() else { return true };
    paddock_test_support::skip_test(test, reason, None);
    false
}

fn observe_plan(s: &Scratch, runtime: &Path, script: &str) -> SpawnPlan {
    shell_plan(s, runtime, script, true)
}

fn shell_plan(s: &Scratch, runtime: &Path, script: &str, observe: bool) -> SpawnPlan {
    let task = Task {
        program: "/bin/sh".into(),
        args: vec![OsString::from("-c"), OsString::from(script)],
        cwd: abs(&s.proj),
        runtime_dir: abs(runtime),
        observe,
    };
    LinuxBwrap.plan(&s.policy(), &task, &facts()).unwrap()
}

/// The fuse mounts of this process's mount namespace (the host's, for the test).
fn fuse_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - fuse") && l.contains("paddock"))
        .map(str::to_owned)
        .collect()
}

/// A pipe for the supervisor's record descriptor; the read end is drained by a thread.
fn record_pipe() -> (OwnedFd, std::thread::JoinHandle<Vec<u8>>) {
    let (r, w) = nix::unistd::pipe().unwrap();
    let drain = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::fs::File::from(r).read_to_end(&mut out);
        out
    });
    (w, drain)
}

pub(super) fn observer_records_hidden_lookups_listings_and_writes() {
    if !fuse_or_skip("observer_records_hidden_lookups_listings_and_writes") {
        return;
    }
    let s = Scratch::new("observe");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let home = s.home.to_str().unwrap().to_owned();
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let marker = format!("observe-marker-{}", std::process::id());
    // The shell itself looks up `.ssh` (the `test` builtin), then sleeps: the record's pid
    // is then the shell, still alive, whose command line holds the marker.
    let script = format!(
        "{exe} __probe read {home}/.ssh/id_canary; \
         {exe} __probe read {home}/.ssh/id_canary; \
         {exe} __probe ls {home}; \
         {exe} __probe write {home}/newfile; \
         {exe} __probe mkdir {home}/newdir; \
         {exe} __probe read {home}/proj/src/main.rs; \
         {exe} __probe write {home}/proj/out.txt; \
         {exe} __probe ls {home}/proj; \
         {exe} __probe ls {mount_dir}; \
         test -e {home}/.{marker}; sleep 1.5; : {marker}",
        mount_dir = runtime.path().join("observe"),
    );
    let plan = observe_plan(&s, runtime.path().as_path(), &script);
    let observer = plan.observer.clone().expect("an observer plan");
    assert_eq!(observer.anchors.len(), 1, "{observer:?}");
    let (mount, server) = observe_fs::open(&observer).unwrap();
    let records = server.records();
    let (record_w, drain) = record_pipe();
    let spawned = exec::spawn_with(
        &plan,
        Output::PIPED,
        Some(runtime.path().as_path()),
        vec![(record_w, RECORD_FD)],
        &[],
        Some(&mount),
        None,
    )
    .unwrap();
    drop(mount);

    // While the sandbox runs: the mount is not in the host's mount table, and the shell's
    // lookup is recorded with its host pid.
    assert!(fuse_mounts().is_empty(), "the observer shows on the host: {:?}", fuse_mounts());
    let mut seen: Vec<FsRecord> = Vec::new();
    let wanted = PathBuf::from(format!("{home}/.{marker}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let shell = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let rec = records.recv_timeout(left).expect("the shell's lookup is recorded");
        seen.push(rec.clone());
        if rec.path == wanted {
            break rec;
        }
    };
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", shell.pid)).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains(&marker),
        "pid {} is not the shell: {:?}",
        shell.pid,
        String::from_utf8_lossy(&cmdline)
    );
    assert_eq!((shell.op, shell.errno), (FsOp::Lookup, "ENOENT"));

    let Spawned { child, signal_tx, placeholders } = spawned;
    let output = child.wait_with_output().unwrap();
    drop(signal_tx);
    drop(placeholders);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "stdout: {stdout}\nstderr: {stderr}");

    // The serving thread ends with the sandbox (awaited, with room for a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(server.is_finished(), "the serving thread outlived the sandbox");
    seen.extend(server.finish());
    drop(drain);
    assert!(fuse_mounts().is_empty(), "a mount was left: {:?}", fuse_mounts());

    // What the task saw.
    let results: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        results,
        [
            "read=err:2",
            "read=err:2",
            "ls=ok:proj",
            "write=err:30",
            "mkdir=err:30",
            "read=ok:fn main() {}",
            "write=ok",
            "ls=ok:.git,out.txt,src",
            // The observer's root is under the runtime base, which an empty tmpfs covers
            // (or a private /tmp hides): it is not there at all.
            "ls=err:2",
        ],
        "stderr: {stderr}"
    );
    assert_eq!(std::fs::read_to_string(s.proj.join("out.txt")).unwrap(), "pwn");

    // What was recorded: each hidden attempt, nothing under the exception.
    let got: HashSet<(FsOp, PathBuf, &str)> =
        seen.iter().map(|r| (r.op, r.path.clone(), r.errno)).collect();
    let p = |rel: &str| PathBuf::from(format!("{home}/{rel}"));
    for want in [
        (FsOp::Lookup, p(".ssh"), "ENOENT"),
        (FsOp::List, PathBuf::from(&home), "ENOENT"),
        (FsOp::Create, p("newfile"), "EROFS"),
        (FsOp::Mkdir, p("newdir"), "EROFS"),
    ] {
        assert!(got.contains(&want), "{want:?} not recorded in {seen:#?}");
    }
    // Nothing is cached: the second read of the hidden name is recorded too.
    let ssh = seen.iter().filter(|r| r.op == FsOp::Lookup && r.path == p(".ssh")).count();
    assert_eq!(ssh, 2, "{seen:#?}");
    let proj = s.proj.clone();
    assert!(
        !seen.iter().any(|r| r.path.starts_with(&proj)),
        "the exception was recorded: {seen:#?}"
    );
    assert!(seen.iter().all(|r| r.pid > 1), "{seen:#?}");
}

pub(super) fn kill_9_of_the_runner_leaves_no_observer_behind() {
    if !fuse_or_skip("kill_9_of_the_runner_leaves_no_observer_behind") {
        return;
    }
    let marker = format!("ok9-{}", std::process::id());
    #[allow(clippy::disallowed_methods)] // a test spawning the runner it will kill
    let mut runner = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["__run_observed_sleep", &marker])
        .spawn()
        .unwrap();
    // The sandboxed shell (its command line holds the marker), once the task runs: killing
    // the runner while bwrap still sets up would test bwrap's own setup race instead.
    let sandboxed =
        || super::live_processes(|cmd| cmd.contains(&marker) && cmd.starts_with("/bin/sh"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while sandboxed().is_empty() {
        assert!(Instant::now() < deadline, "the observed task never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The task can reach its anchor (the observer serves it) before the kill.
    // SAFETY: SIGKILL to our own child.
    unsafe { libc::kill(i32::try_from(runner.id()).unwrap(), libc::SIGKILL) };
    runner.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sandboxed().is_empty() {
        assert!(Instant::now() < deadline, "the sandbox survived kill -9 of the runner");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fuse_mounts().is_empty(), "a mount was left: {:?}", fuse_mounts());
    let _ =
        std::fs::remove_dir_all(std::env::temp_dir().join(format!("pbw-{}-{marker}", runner.id())));
}

/// The runner half of the kill -9 test: runs an observed sandbox whose shell sleeps.
pub(super) fn run_observed_sleep(args: &[OsString]) -> i32 {
    let marker = args.first().and_then(|a| a.to_str()).unwrap_or("osleep");
    let s = Scratch::new(marker);
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let home = s.home.to_str().unwrap().to_owned();
    let script = format!("test -e {home}/.x; sleep 600; : {marker}");
    let plan = observe_plan(&s, runtime.path().as_path(), &script);
    let observer = plan.observer.clone().unwrap();
    let (mount, server) = observe_fs::open(&observer).unwrap();
    let (record_w, _drain) = record_pipe();
    let spawned = exec::spawn_with(
        &plan,
        Output::INHERIT,
        Some(runtime.path().as_path()),
        vec![(record_w, RECORD_FD)],
        &[],
        Some(&mount),
        None,
    )
    .unwrap();
    let Spawned { child, .. } = spawned;
    let _ = child.wait();
    let _ = server.finish();
    0
}

/// `__run_script observe|tmpfs NAME SCRIPT`: runs `sh -c SCRIPT` in a sandbox over a scratch
/// tree (its home a directory deny anchor, observed or a tmpfs) and exits with its status;
/// for measuring what the observer costs (`hyperfine`).
pub(super) fn run_script(args: &[OsString]) -> i32 {
    let observe = args.first().is_some_and(|m| m == "observe");
    let name = args.get(1).and_then(|a| a.to_str()).unwrap_or("script");
    let script = args.get(2).and_then(|a| a.to_str()).unwrap_or("true");
    let s = Scratch::new(name);
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let plan = shell_plan(&s, runtime.path().as_path(), script, observe);
    let opened = plan.observer.as_ref().map(|o| observe_fs::open(o).unwrap());
    let (record_w, _drain) = record_pipe();
    let spawned = exec::spawn_with(
        &plan,
        Output::INHERIT,
        Some(runtime.path().as_path()),
        vec![(record_w, RECORD_FD)],
        &[],
        opened.as_ref().map(|o| &o.0),
        None,
    )
    .unwrap();
    let Spawned { child, .. } = spawned;
    let status = child.wait().unwrap();
    if let Some((_, server)) = opened {
        eprintln!("records: {}", server.finish().len());
    }
    status.code().unwrap_or(1)
}

pub(super) fn finish_without_a_mount_returns_at_once() {
    if !fuse_or_skip("finish_without_a_mount_returns_at_once") {
        return;
    }
    let s = Scratch::new("ofinish");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let plan = observe_plan(&s, runtime.path().as_path(), "true");
    let observer = plan.observer.clone().unwrap();
    // The spawn never happens (or fails before the mount): the serving thread, waiting for
    // the device, must end when the server is finished, not hang the runner.
    let (mount, server) = observe_fs::open(&observer).unwrap();
    assert!(observer.mount_dir.as_path().is_dir(), "open creates the mount point");
    let start = Instant::now();
    assert!(server.finish().is_empty());
    // Against a hang (a finish waiting for a device that never comes), not a speed test.
    assert!(start.elapsed() < Duration::from_secs(10), "finish waited {:?}", start.elapsed());
    drop(mount);
}
