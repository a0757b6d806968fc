//! The executor (`run::run_plan`) on every Unix, against stand-ins: a `sandbox-exec` that
//! records its argv and executes the command after `--`, and a `log` that prints canned
//! records until it is stopped. Both write to one event file, so the order of the monitor's
//! start, the task and the monitor's stop is checked.
#![cfg(unix)]
// Fixture helpers outside `#[test]` functions: a failed setup step is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]
// The tests start helpers (`ps`, a runner process of their own) outside the executor.
#![allow(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use paddock_macos_seatbelt::run::{ITEMIZED_BY, Ran, RunOptions, Stdio, run_plan};
use paddock_macos_seatbelt::{MacosSeatbelt, log_tag};
use paddock_policy::{
    AbsPathBuf, Backend, HostFacts, IgnoreRules, ItemizeMode, NetworkPolicy, ReportScope,
    ResolvedPolicy, SpawnPlan, Task, UnixSockets, ViolationKind,
};

/// A throw-away directory with the stand-ins, a project and a runtime dir (not made: the
/// executor makes it).
struct Stage {
    root: PathBuf,
    proj: PathBuf,
    runtime: PathBuf,
    argv_file: PathBuf,
    events: PathBuf,
    sandbox_exec: PathBuf,
    log: PathBuf,
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

fn script(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Stage {
    fn new(name: &str) -> Stage {
        let base = fs::canonicalize(std::env::temp_dir()).unwrap();
        let root = base.join(format!("paddock-exec-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let proj = root.join("proj");
        fs::create_dir_all(&proj).unwrap();
        let stage = Stage {
            runtime: root.join("rt"),
            argv_file: root.join("argv"),
            events: root.join("events"),
            sandbox_exec: root.join("sandbox-exec"),
            log: root.join("log"),
            proj,
            root,
        };
        script(
            &stage.sandbox_exec,
            &format!(
                "#!/bin/sh\n\
                 for a in \"$@\"; do printf '%s\\000' \"$a\" >> {argv}; done\n\
                 echo task >> {events}\n\
                 while [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n\
                 shift\n\
                 exec \"$@\"\n",
                argv = q(&stage.argv_file),
                events = q(&stage.events),
            ),
        );
        stage
    }

    /// A `log` that announces itself, prints a denial of this task, one of another task and
    /// a line of something else, then waits to be stopped.
    fn log_streaming(&self, task: &Task) {
        let tag = log_tag(task);
        script(
            &self.log,
            &format!(
                "#!/bin/sh\n\
                 echo log-start >> {events}\n\
                 trap 'echo log-stop >> {events}; exit 0' TERM\n\
                 printf '%s\\n' \"$@\" > {args}\n\
                 echo 'Filtering the log data using \"eventMessage CONTAINS \\\"{tag}\\\"\"'\n\
                 printf '%s\\n' '{{\"eventMessage\":\"Sandbox: cat(4242) deny(1) file-read-data /Users/u/.ssh/id_rsa\\n{tag}\"}}'\n\
                 printf '%s\\n' '{{\"eventMessage\":\"Sandbox: cat(4243) deny(1) file-write-create /x\\npaddock-00000000000000ff\"}}'\n\
                 echo '{{\"eventMessage\":\"something else\"}}'\n\
                 while :; do sleep 0.02; done\n",
                events = q(&self.events),
                args = q(&self.root.join("log-args")),
            ),
        );
    }

    fn task(&self, argv: &[&str]) -> Task {
        Task {
            program: OsString::from(argv[0]),
            args: argv[1..].iter().map(OsString::from).collect(),
            cwd: abs(&self.proj),
            runtime_dir: abs(&self.runtime),
            observe: false,
        }
    }

    fn sh(&self, script: &str) -> Task {
        self.task(&["/bin/sh", "-c", script])
    }

    fn plan(&self, task: &Task) -> SpawnPlan {
        MacosSeatbelt::new().plan(&policy(&self.proj), task, &HostFacts::default()).unwrap()
    }

    fn opts(&self) -> RunOptions {
        let mut opts = RunOptions::new().unwrap();
        opts.sandbox_exec = self.sandbox_exec.clone();
        opts.log = Some(self.log.clone());
        opts.stdio = Stdio::PIPED;
        opts.monitor_ready = Duration::from_secs(5);
        opts.monitor_grace = Duration::from_millis(50);
        opts.grace = Duration::from_millis(300);
        opts
    }

    /// Plans and runs `task` with `opts`.
    fn run(&self, task: &Task, opts: &RunOptions) -> Ran {
        self.log_streaming(task);
        run_plan(&self.plan(task), task, opts).unwrap()
    }

    fn events(&self) -> Vec<String> {
        fs::read_to_string(&self.events).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    fn recorded_argv(&self) -> Vec<OsString> {
        use std::os::unix::ffi::OsStringExt;
        let bytes = fs::read(&self.argv_file).unwrap();
        let mut args: Vec<OsString> =
            bytes.split(|b| *b == 0).map(|a| OsString::from_vec(a.to_vec())).collect();
        assert_eq!(args.pop(), Some(OsString::new()), "each argument ends with a NUL");
        args
    }

    /// Waits for `path` to exist (a task saying it is ready).
    fn wait_for(&self, path: &Path) {
        let until = Instant::now() + Duration::from_secs(10);
        while !path.exists() {
            assert!(Instant::now() < until, "{} never appeared", path.display());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn abs(p: &Path) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).unwrap()
}

/// The project readable and writable, network off.
fn policy(proj: &Path) -> ResolvedPolicy {
    let proj = abs(proj);
    ResolvedPolicy {
        project_dir: proj.clone(),
        home: proj.clone(),
        read_deny: vec![],
        write: vec![],
        protected: vec![],
        pinned: vec![],
        globs: vec![],
        network: NetworkPolicy::Off,
        unix_sockets: UnixSockets::None,
        local_ports: vec![],
        host_ports: vec![],
        pty: false,
        git_config: false,
        system_info: false,
        mach_lookup: vec![],
        weaker_when_nested: false,
        private_tmp: true,
        env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
        report: ReportScope { within: vec![proj], linked: vec![], itemize: ItemizeMode::Auto },
        ignore: IgnoreRules::default(),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn performs_the_plans_argv_env_and_cwd_with_a_private_tmpdir_and_the_monitor_around_it() {
    let s = Stage::new("argv");
    let task = s.sh("echo hi; pwd; echo \"$TMPDIR\"; test -d \"$TMPDIR\" && echo tmp-ok");
    let plan = s.plan(&task);
    let opts = s.opts();
    let ran = s.run(&task, &opts);

    // Exactly the plan's argv after argv[0]: -p PROFILE, the -D parameters, --, the task.
    let recorded = s.recorded_argv();
    assert_eq!(recorded, plan.argv[1..]);
    assert_eq!(recorded[0], "-p");
    let dashdash = recorded.iter().position(|a| a == "--").unwrap();
    let params = &recorded[2..dashdash];
    assert!(!params.is_empty() && params.len().is_multiple_of(2), "{params:?}");
    for pair in params.chunks(2) {
        assert_eq!(pair[0], "-D");
        let value = pair[1].to_str().unwrap();
        let (name, _) = value.split_once('=').unwrap();
        assert!(name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
    }
    assert_eq!(recorded[dashdash + 1..], plan.argv[plan.argv.len() - 3..]);
    assert_eq!(recorded[dashdash + 1], "/bin/sh");
    // The profile carries the run's own tag, and so does the monitor's predicate.
    let tag = log_tag(&task);
    assert!(recorded[1].to_str().unwrap().contains(&tag));
    let log_args = fs::read_to_string(s.root.join("log-args")).unwrap();
    assert_eq!(
        log_args,
        format!("stream\n--style\nndjson\n--predicate\neventMessage CONTAINS \"{tag}\"\n")
    );

    let tmpdir = s.runtime.join("tmp");
    assert_eq!(ran.outcome.exit_code, 0, "{}", text(&ran.outcome.stderr));
    assert_eq!(
        text(&ran.outcome.stdout),
        format!("hi\n{}\n{}\ntmp-ok\n", s.proj.display(), tmpdir.display())
    );
    assert!(!tmpdir.exists(), "the TMPDIR is removed");
    assert!(!s.runtime.exists(), "the runtime dir the executor made is removed");

    assert_eq!(s.events(), ["log-start", "task", "log-stop"]);
    assert_eq!(ran.itemized_by, Some(ITEMIZED_BY));
    assert_eq!(ran.violations.len(), 1, "{:?}", ran.violations);
    assert_eq!(ran.violations[0].kind, ViolationKind::Read);
    assert_eq!(ran.violations[0].path.as_deref(), Some(Path::new("/Users/u/.ssh/id_rsa")));
}

#[test]
fn the_task_leads_a_session_and_process_group_of_its_own_and_the_kill_reaches_it() {
    let s = Stage::new("pgid");
    let ready = s.proj.join("ready");
    let task = s.sh(&format!("touch {}; exec sleep 30", q(&ready)));
    let opts = s.opts();
    let control = opts.control.clone();
    let started = Instant::now();
    let ran = std::thread::scope(|scope| {
        let run = scope.spawn(|| s.run(&task, &opts));
        s.wait_for(&ready);
        let pid = control.pid();
        assert!(pid > 0);
        // SAFETY: getpgid and getpgrp with integers.
        let (group, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
        assert_eq!(group, pid, "the task leads its group");
        assert_ne!(group, ours);
        // SAFETY: getsid with an integer.
        assert_eq!(unsafe { libc::getsid(pid) }, pid, "and its session: no terminal stops it");
        control.kill().unwrap();
        run.join().unwrap()
    });
    assert_eq!(ran.outcome.exit_code, 128 + libc::SIGKILL);
    assert_eq!(ran.outcome.signal, Some(libc::SIGKILL));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(s.events().last().map(String::as_str), Some("log-stop"));
}

#[test]
fn a_polite_signal_reaches_the_task() {
    let s = Stage::new("polite");
    let ready = s.proj.join("ready");
    let task = s.sh(&format!(
        "trap 'echo got-term; exit 7' TERM; touch {}; while :; do sleep 0.02; done",
        q(&ready)
    ));
    let opts = s.opts();
    let control = opts.control.clone();
    let ran = std::thread::scope(|scope| {
        let run = scope.spawn(|| s.run(&task, &opts));
        s.wait_for(&ready);
        control.signal(libc::SIGTERM).unwrap();
        run.join().unwrap()
    });
    assert_eq!(ran.outcome.exit_code, 7);
    assert_eq!(ran.outcome.signal, None);
    assert!(text(&ran.outcome.stdout).contains("got-term"));
}

#[test]
fn a_timeout_is_124_and_kills_a_task_that_ignores_the_polite_signal() {
    let s = Stage::new("timeout");
    let task = s.sh("trap '' TERM; sleep 30; echo survived");
    let mut opts = s.opts();
    opts.timeout = Some(Duration::from_millis(300));
    let control = opts.control.clone();
    let ran = s.run(&task, &opts);
    assert_eq!(ran.outcome.exit_code, 124);
    assert!(ran.outcome.timed_out);
    assert_eq!(ran.outcome.signal, None);
    assert!(ran.outcome.duration < Duration::from_secs(10), "{:?}", ran.outcome.duration);
    assert!(!text(&ran.outcome.stdout).contains("survived"));
    // The whole group is gone, the `sleep` included.
    // (Its killed members may be zombies for a moment, until their new parent reaps them.)
    let until = Instant::now() + Duration::from_secs(5);
    let alive = || {
        // SAFETY: killpg with integers; signal 0 only checks.
        unsafe { libc::killpg(control.pid(), 0) == 0 }
    };
    while alive() {
        assert!(Instant::now() < until, "the task's group is not empty");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!s.runtime.join("tmp").exists());
}

#[test]
fn exit_codes_are_the_tasks_or_128_plus_the_signal() {
    let s = Stage::new("codes");
    let ran = s.run(&s.sh("exit 3"), &s.opts());
    assert_eq!((ran.outcome.exit_code, ran.outcome.signal), (3, None));
    let ran = s.run(&s.sh("kill -USR1 $$"), &s.opts());
    assert_eq!(ran.outcome.exit_code, 128 + libc::SIGUSR1);
    assert_eq!(ran.outcome.signal, Some(libc::SIGUSR1));
    assert!(ran.outcome.cpu_time < Duration::from_secs(10));
}

#[test]
fn a_program_not_found_is_127_and_not_executable_126_and_nothing_starts() {
    let s = Stage::new("missing");
    let opts = s.opts();
    let ran = s.run(&s.task(&["no-such-program-for-paddock"]), &opts);
    assert_eq!(ran.outcome.exit_code, 127);
    assert!(opts.notes.take().iter().any(|n| n.contains("command not found")));
    let plain = s.proj.join("plain");
    fs::write(&plain, "echo no\n").unwrap();
    let ran = s.run(&s.task(&[plain.to_str().unwrap()]), &opts);
    assert_eq!(ran.outcome.exit_code, 126);
    assert!(opts.notes.take().iter().any(|n| n.contains("not executable")));
    assert!(!s.argv_file.exists(), "sandbox-exec never ran");
    assert!(s.events().is_empty(), "nor the monitor");
}

#[test]
fn a_monitor_that_never_starts_leaves_the_run_not_itemized_with_a_note() {
    let s = Stage::new("nolog");
    let task = s.sh("echo ran");
    let opts = s.opts();
    script(&s.log, "#!/bin/sh\necho 'log: cannot stream here' >&2\nexit 1\n");
    let ran = run_plan(&s.plan(&task), &task, &opts).unwrap();
    assert_eq!(ran.outcome.exit_code, 0);
    assert_eq!(text(&ran.outcome.stdout), "ran\n");
    assert_eq!(ran.itemized_by, None);
    assert!(ran.violations.is_empty());
    let notes = opts.notes.take();
    assert!(
        notes.iter().any(|n| n.contains("not itemized") && n.contains("cannot stream here")),
        "{notes:?}"
    );

    // A `log` that is not there at all: the same.
    let mut opts = s.opts();
    opts.log = Some(s.root.join("no-log-here"));
    let ran = run_plan(&s.plan(&task), &task, &opts).unwrap();
    assert_eq!((ran.outcome.exit_code, ran.itemized_by), (0, None));
    assert!(opts.notes.take().iter().any(|n| n.contains("not itemized")));
}

#[test]
fn piped_output_is_capped_with_a_marker() {
    let s = Stage::new("cap");
    let mut opts = s.opts();
    opts.capture_limit = 10;
    let ran = s.run(&s.sh("printf '%0100d' 0"), &opts);
    let out = text(&ran.outcome.stdout);
    assert!(out.starts_with("0000000000\n[paddock: 90 more bytes cut"), "{out}");
}

#[test]
fn a_plan_of_another_task_is_refused_before_anything_starts() {
    let s = Stage::new("other");
    let task = s.sh("true");
    let mut other = task.clone();
    other.runtime_dir = abs(&s.root.join("elsewhere"));
    let err = run_plan(&s.plan(&other), &task, &s.opts()).unwrap_err();
    assert!(err.to_string().contains("another task"), "{err}");
    assert!(!s.runtime.exists());
}

#[test]
fn a_pipe_of_the_callers_carries_polite_signals_as_a_signal_handler_would_write_them() {
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};
    let s = Stage::new("pipe");
    let mut fds = [0; 2];
    // SAFETY: pipe with a valid array of two ints.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: two fresh descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut handler = fs::File::from(write.try_clone().unwrap());
    let ready = s.proj.join("ready");
    // SIGINT unless this test inherited it ignored (the task could not trap it then).
    let (signal, name) = paddock_test_support::polite_signal_not_ignored();
    let task = s.sh(&format!(
        "trap 'echo got-int; exit 9' {name}; touch {}; while :; do sleep 0.02; done",
        q(&ready)
    ));
    let mut opts = s.opts();
    opts.control = paddock_macos_seatbelt::run::Control::from_pipe(read, write);
    let ran = std::thread::scope(|scope| {
        let run = scope.spawn(|| s.run(&task, &opts));
        s.wait_for(&ready);
        handler.write_all(&[u8::try_from(signal).unwrap()]).unwrap();
        run.join().unwrap()
    });
    assert_eq!(ran.outcome.exit_code, 9);
    assert!(text(&ran.outcome.stdout).contains("got-int"));
}

#[path = "exec/check.rs"]
mod check;
#[path = "exec/egress.rs"]
mod egress;

/// Whether process `pid` is gone (or only a zombie no one reaped yet).
fn gone(pid: &str) -> bool {
    let out = std::process::Command::new("ps").args(["-o", "stat=", "-p", pid]).output().unwrap();
    let stat = text(&out.stdout);
    stat.trim().is_empty() || stat.trim_start().starts_with('Z')
}

#[test]
fn kill_9_of_the_runner_leaves_no_process_and_no_directory() {
    // One test, two roles: this process re-runs itself as the runner, which performs a plan
    // whose task and monitor live for ever, and kills it with SIGKILL.
    const RUNNER: &str = "PADDOCK_EXEC_TEST_RUNNER";
    let name = "kill_9_of_the_runner_leaves_no_process_and_no_directory";
    if std::env::var_os(RUNNER).is_some() {
        let s = Stage::new("kill9-runner");
        let task = s.sh("echo $$ > task-pid; echo \"$TMPDIR\" > tmpdir; exec sleep 600");
        script(
            &s.log,
            &format!(
                "#!/bin/sh\necho $$ > {}\necho 'Filtering the log data'\nwhile :; do sleep 0.02; done\n",
                q(&s.proj.join("log-pid"))
            ),
        );
        let _ = run_plan(&s.plan(&task), &task, &s.opts());
        std::mem::forget(s);
        return;
    }
    let mut runner = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(RUNNER, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = fs::canonicalize(std::env::temp_dir()).unwrap();
    let root = base.join(format!("paddock-exec-{}-kill9-runner", runner.id()));
    let proj = root.join("proj");
    let until = Instant::now() + Duration::from_secs(20);
    let read = |f: &str| fs::read_to_string(proj.join(f)).unwrap_or_default().trim().to_owned();
    while read("task-pid").is_empty() || read("log-pid").is_empty() || read("tmpdir").is_empty() {
        assert!(Instant::now() < until, "the runner's task never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (task_pid, log_pid, tmpdir) = (read("task-pid"), read("log-pid"), read("tmpdir"));
    assert!(Path::new(&tmpdir).is_dir(), "{tmpdir}");
    runner.kill().unwrap();
    runner.wait().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !(gone(&task_pid) && gone(&log_pid) && !root.join("rt").exists()) {
        if Instant::now() > until {
            let _ = fs::remove_dir_all(&root);
            panic!(
                "left behind: task {} log {} runtime dir {}",
                !gone(&task_pid),
                !gone(&log_pid),
                root.join("rt").exists()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!Path::new(&tmpdir).exists(), "the task's TMPDIR is left");
    let _ = fs::remove_dir_all(&root);
}
