//! The runner, the fixtures, and the tests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed step is a failed test

mod dev;
mod grant_clones;
mod notify;
mod observe;
mod probe;

use std::ffi::OsString;
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use paddock_linux_bwrap::LinuxBwrap;
use paddock_linux_bwrap::runtime::supervise::{RunOptions, RunOutcome, run_plan_in};
use paddock_policy::{
    AbsPathBuf, Backend, DenyAnchor, Exception, FileKind, HostFacts, IgnoreRules, ItemizeMode,
    NetworkPolicy, Origin, ProtectedPath, ProtectedState, ReportScope, ResolvedPolicy, SpawnPlan,
    Task, UnixSockets, WriteGrant,
};

const SECRET: &str = "paddock-test-secret-4b1d";

/// Dispatches the supervisor and probe roles, else runs every test.
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("__supervise") => return paddock_linux_bwrap::supervisor::main_from_args(&args[2..]),
        Some("__probe") => return probe::main(&args[2..]),
        Some("__nprobe") => return notify::probe(&args[2..]),
        Some("__run_sleep") => return run_sleep(&args[2..]),
        Some("__run_observed_sleep") => return observe::run_observed_sleep(&args[2..]),
        Some("__run_script") => return observe::run_script(&args[2..]),
        _ => {}
    }
    // A checkout under /tmp: the sandbox's private /tmp would hide this binary, which the
    // tests run inside it (as supervisor and probe). The runner becomes a copy outside /tmp.
    if let Ok(exe) = std::env::current_exe()
        && paddock_test_support::hidden_by_private_tmp(&exe)
    {
        let copy = paddock_test_support::visible_exe(&exe);
        if copy != exe {
            use std::os::unix::process::CommandExt;
            #[allow(clippy::disallowed_methods)] // this test binary, re-executed from its copy
            let e = std::process::Command::new(&copy)
                .args(&args[1..])
                .env(ORIGINAL_EXE_ENV, &exe)
                .exec();
            panic!("cannot run the copy {} of this test binary: {e}", copy.display());
        }
    }
    let filter = args
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .find(|a| !a.starts_with('-'))
        .map(str::to_owned);
    if let Some(reason) = missing_sandbox() {
        paddock_test_support::skip_test("the bubblewrap tests", reason, None);
        println!("0 passed, 0 failed, {} skipped", TESTS.len() + notify::TESTS.len());
        return 0;
    }
    // A descriptor the runner holds without close-on-exec, and a secret in its environment:
    // neither may reach the sandbox.
    let leak = std::fs::File::open("/etc/hostname")
        .or_else(|_| std::fs::File::open("/"))
        .unwrap()
        .into_raw_fd();
    // SAFETY: single-threaded at this point; nothing reads the environment concurrently.
    unsafe { std::env::set_var("PADDOCK_TEST_SECRET", SECRET) };
    let _ = leak;

    let (mut passed, mut failed) = (0, 0);
    watchdog();
    let mut run_all = |pass: &str, tests: &mut dyn Iterator<Item = &(&str, Test)>| {
        for (name, test) in tests {
            if filter.as_deref().is_some_and(|f| !name.contains(f)) {
                continue;
            }
            *RUNNING.lock().unwrap() = Some((format!("{name}{pass}"), std::time::Instant::now()));
            let result = std::panic::catch_unwind(test);
            *RUNNING.lock().unwrap() = None;
            match result {
                Ok(()) => {
                    println!("test {name}{pass} ... ok");
                    passed += 1;
                }
                Err(_) => {
                    println!("test {name}{pass} ... FAILED");
                    failed += 1;
                }
            }
        }
    };
    run_all("", &mut TESTS.iter().chain(OBSERVE_TESTS).chain(notify::TESTS));
    // The same walls with the supervisor `paddock` starts for untraced runs.
    match nolibc_supervisor() {
        Some(exe) => {
            // SAFETY: single-threaded between tests; nothing reads the environment meanwhile.
            unsafe { std::env::set_var(NOLIBC_ENV, &exe) };
            run_all(" (paddock-supervisor-nolibc)", &mut TESTS.iter());
            // SAFETY: as above.
            unsafe { std::env::remove_var(NOLIBC_ENV) };
        }
        None if paddock_test_support::required() => {
            println!("test paddock-supervisor-nolibc ... FAILED: not built next to paddock");
            failed += 1;
        }
        None => paddock_test_support::skip_test(
            "the second pass with paddock-supervisor-nolibc",
            "not built next to paddock (cargo build -p paddock)",
            None,
        ),
    }
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

type Test = fn();

/// The test running now and since when, for [`watchdog`].
static RUNNING: std::sync::Mutex<Option<(String, std::time::Instant)>> =
    std::sync::Mutex::new(None);

/// How long one test may take before the whole run fails (a hang would otherwise last as
/// long as the probe's 600 s sleep, or forever).
const TEST_LIMIT: Duration = Duration::from_secs(180);

/// Fails the run when a test outlives [`TEST_LIMIT`], naming it.
fn watchdog() {
    std::thread::spawn(|| {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let running = RUNNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((name, since)) = running.as_ref()
                && since.elapsed() > TEST_LIMIT
            {
                println!("test {name} ... FAILED: still running after {TEST_LIMIT:?}");
                std::process::exit(1);
            }
        }
    });
}

const TESTS: &[(&str, Test)] = &[
    (
        "deny_anchor_hides_content_but_exceptions_are_visible",
        deny_anchor_hides_content_but_exceptions_are_visible,
    ),
    (
        "a_hidden_file_outside_the_grants_shows_only_the_empty_mask",
        a_hidden_file_outside_the_grants_shows_only_the_empty_mask,
    ),
    (
        "a_hidden_directory_outside_the_grants_is_empty_and_read_only",
        a_hidden_directory_outside_the_grants_is_empty_and_read_only,
    ),
    (
        "dev_holds_the_devices_links_and_ptys_of_bwraps_dev",
        dev::dev_holds_the_devices_links_and_ptys_of_bwraps_dev,
    ),
    (
        "the_project_from_the_runners_clone_is_writable_and_keeps_its_read_only_mounts",
        grant_clones::the_project_from_the_runners_clone_is_writable_and_keeps_its_read_only_mounts,
    ),
    (
        "the_runner_makes_the_protected_paths_in_its_clone_never_through_a_link",
        grant_clones::the_runner_makes_the_protected_paths_in_its_clone_never_through_a_link,
    ),
    (
        "a_clone_of_another_directory_is_refused_before_the_task_runs",
        grant_clones::a_clone_of_another_directory_is_refused_before_the_task_runs,
    ),
    (
        "write_grant_is_writable_and_the_rest_is_read_only",
        write_grant_is_writable_and_the_rest_is_read_only,
    ),
    (
        "protected_git_is_read_only_and_cannot_be_renamed",
        protected_git_is_read_only_and_cannot_be_renamed,
    ),
    (
        "missing_protected_name_cannot_be_created_and_leaves_nothing",
        missing_protected_name_cannot_be_created_and_leaves_nothing,
    ),
    (
        "private_tmp_hides_the_host_tmp_and_keeps_nothing",
        private_tmp_hides_the_host_tmp_and_keeps_nothing,
    ),
    ("network_off_cannot_reach_host_loopback", network_off_cannot_reach_host_loopback),
    (
        "seccomp_blocks_io_uring_tiocsti_and_unix_sockets",
        seccomp_blocks_io_uring_tiocsti_and_unix_sockets,
    ),
    ("no_descriptor_leaks_into_the_task", no_descriptor_leaks_into_the_task),
    ("proc_1_shows_no_secret_and_only_sandbox_pids", proc_1_shows_no_secret_and_only_sandbox_pids),
    ("exit_codes_follow_the_shell", exit_codes_follow_the_shell),
    ("timeout_is_124_and_kills_after_grace", timeout_is_124_and_kills_after_grace),
    (
        "sigterm_to_the_runner_reaches_the_task_politely",
        sigterm_to_the_runner_reaches_the_task_politely,
    ),
    ("a_corrupt_filter_fails_closed", a_corrupt_filter_fails_closed),
    (
        "the_end_is_told_before_bwrap_exits_and_bwrap_is_reaped_with_the_outcome",
        the_end_is_told_before_bwrap_exits_and_bwrap_is_reaped_with_the_outcome,
    ),
    (
        "an_inner_mount_that_cannot_be_made_fails_closed",
        an_inner_mount_that_cannot_be_made_fails_closed,
    ),
    (
        "kill_9_of_the_runner_takes_the_sandbox_with_it",
        kill_9_of_the_runner_takes_the_sandbox_with_it,
    ),
    (
        "a_tracer_killed_before_the_task_starts_leaves_nothing_running_in_its_place",
        a_tracer_killed_before_the_task_starts_leaves_nothing_running_in_its_place,
    ),
];

/// The observers' tests: their plans always need `paddock-supervisor`.
const OBSERVE_TESTS: &[(&str, Test)] = &[
    (
        "observer_records_hidden_lookups_listings_and_writes",
        observe::observer_records_hidden_lookups_listings_and_writes,
    ),
    (
        "kill_9_of_the_runner_leaves_no_observer_behind",
        observe::kill_9_of_the_runner_leaves_no_observer_behind,
    ),
    ("finish_without_a_mount_returns_at_once", observe::finish_without_a_mount_returns_at_once),
];

/// Set, to its path, while [`TESTS`] run a second time with `paddock-supervisor-nolibc` as
/// the sandbox's pid 1 (see [`supervised`]); inherited by the runners the tests start.
const NOLIBC_ENV: &str = "PADDOCK_OS_TEST_NOLIBC_SUPERVISOR";

/// `plan` as the current pass runs it: by this binary as the supervisor, or in the second
/// pass by `paddock-supervisor-nolibc` (`paddock_linux_bwrap::nolibc`), as `paddock` runs
/// untraced tasks.
fn supervised(plan: SpawnPlan) -> SpawnPlan {
    match std::env::var_os(NOLIBC_ENV) {
        None => plan,
        Some(exe) => paddock_linux_bwrap::nolibc::without_libc(&plan, &abs(PathBuf::from(exe)))
            .expect("an untraced plan can run without libc"),
    }
}

/// Where this binary was built, when it runs as a copy outside `/tmp` (see `main`).
const ORIGINAL_EXE_ENV: &str = "PADDOCK_OS_TESTS_BUILT_AT";

/// `paddock-supervisor-nolibc` as the build left it next to `paddock` (this binary is in
/// `target/PROFILE/deps`).
fn nolibc_supervisor() -> Option<PathBuf> {
    let exe = std::env::var_os(ORIGINAL_EXE_ENV)
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())?;
    let beside = exe.parent()?.parent()?.join(paddock_linux_bwrap::nolibc::SUPERVISOR_NOLIBC_EXE);
    beside.is_file().then_some(beside)
}

fn missing_sandbox() -> Option<String> {
    let probe = paddock_linux_bwrap::probe::probe();
    if probe.facts.bwrap.is_none() {
        return Some("bubblewrap is not installed (apt install bubblewrap)".to_owned());
    }
    if !probe.facts.fresh_proc {
        return Some(
            "bubblewrap cannot start a sandbox with a fresh /proc here (see `paddock check`)"
                .to_owned(),
        );
    }
    None
}

fn abs(p: impl AsRef<Path>) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p.as_ref()).unwrap()
}

/// A scratch tree: `home/` (denied except `home/proj`), `home/proj` writable with a `.git`.
struct Scratch {
    root: PathBuf,
    home: PathBuf,
    proj: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!("pbw-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let proj = home.join("proj");
        for d in [home.join(".ssh"), proj.join(".git/hooks"), proj.join("src")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".ssh/id_canary"), SECRET).unwrap();
        std::fs::write(proj.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(proj.join("src/main.rs"), "fn main() {}\n").unwrap();
        let root = root.canonicalize().unwrap();
        Scratch { home: root.join("home"), proj: root.join("home/proj"), root }
    }

    /// The default-like policy over this tree.
    fn policy(&self) -> ResolvedPolicy {
        let proj = abs(&self.proj);
        let protected = |rel: &str, kind| ProtectedPath {
            path: proj.join(rel),
            rule: rel.to_owned(),
            state: ProtectedState::Exists { kind },
        };
        ResolvedPolicy {
            project_dir: proj.clone(),
            home: abs(&self.home),
            read_deny: vec![DenyAnchor {
                path: abs(&self.home),
                kind: Some(FileKind::Dir),
                exceptions: vec![Exception {
                    path: proj.clone(),
                    kind: FileKind::Dir,
                    writable: true,
                }],
                origin: Origin::default_key("deny.read[0]"),
            }],
            write: vec![WriteGrant {
                path: proj.clone(),
                kind: FileKind::Dir,
                origin: Origin::default_key("allow.write[0]"),
            }],
            protected: vec![
                protected(".git/hooks", FileKind::Dir),
                protected(".git/config", FileKind::File),
            ],
            pinned: vec![proj.join(".git")],
            globs: Vec::new(),
            network: NetworkPolicy::Off,
            unix_sockets: UnixSockets::None,
            local_ports: Vec::new(),
            host_ports: Vec::new(),
            pty: false,
            git_config: false,
            system_info: false,
            mach_lookup: Vec::new(),
            weaker_when_nested: false,
            private_tmp: true,
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            report: ReportScope {
                within: vec![proj],
                linked: Vec::new(),
                itemize: ItemizeMode::Off,
            },
            ignore: IgnoreRules::default(),
        }
    }

    fn plan(&self, policy: &ResolvedPolicy, runtime: &Path, probe_args: &[&str]) -> SpawnPlan {
        let args = std::iter::once("__probe").chain(probe_args.iter().copied());
        self.plan_of(policy, runtime, std::env::current_exe().unwrap().as_os_str(), args)
    }

    /// The plan of `program` with `args` (after argv\[0\]), as this pass runs it.
    fn plan_of<'a>(
        &self,
        policy: &ResolvedPolicy,
        runtime: &Path,
        program: &std::ffi::OsStr,
        args: impl Iterator<Item = &'a str>,
    ) -> SpawnPlan {
        supervised(self.plan_unsupervised(policy, runtime, program, args))
    }

    /// [`Scratch::plan_of`] before the pass picks its supervisor.
    fn plan_unsupervised<'a>(
        &self,
        policy: &ResolvedPolicy,
        runtime: &Path,
        program: &std::ffi::OsStr,
        args: impl Iterator<Item = &'a str>,
    ) -> SpawnPlan {
        let task = Task {
            program: program.to_os_string(),
            args: args.map(OsString::from).collect(),
            cwd: abs(&self.proj),
            runtime_dir: abs(runtime),
            observe: false,
        };
        LinuxBwrap.plan(policy, &task, &facts()).unwrap()
    }

    /// The unsupervised plan of the probe writing `target` under the default-like policy:
    /// for a test to change before it runs it.
    fn plan_writing(&self, runtime: &Path, target: &Path) -> SpawnPlan {
        let probe = std::env::current_exe().unwrap();
        let args = ["__probe", "write", target.to_str().unwrap()];
        self.plan_unsupervised(&self.policy(), runtime, probe.as_os_str(), args.into_iter())
    }

    /// Runs the probe under `policy` and returns its stdout.
    fn run(&self, policy: &ResolvedPolicy, probe_args: &[&str]) -> String {
        let outcome = self.run_outcome(policy, probe_args, None);
        assert_eq!(outcome.exit_code, 0, "stderr: {}", String::from_utf8_lossy(&outcome.stderr));
        String::from_utf8(outcome.stdout).unwrap()
    }

    fn run_outcome(
        &self,
        policy: &ResolvedPolicy,
        probe_args: &[&str],
        timeout: Option<Duration>,
    ) -> RunOutcome {
        let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
        let plan = self.plan(policy, runtime.path().as_path(), probe_args);
        let opts = RunOptions {
            timeout,
            grace: Duration::from_millis(500),
            stdio: paddock_linux_bwrap::runtime::exec::Output::PIPED,
            ..RunOptions::new().unwrap()
        };
        run_plan_in(&plan, &opts, Some(runtime.path().as_path())).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn facts() -> HostFacts {
    let mut facts = paddock_linux_bwrap::probe::probe().facts.clone();
    // The supervisor is this very binary (its `main` dispatches `__supervise`).
    facts.self_exe = Some(std::env::current_exe().unwrap());
    facts
}

fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in probe output:\n{out}"))
}

const ENOENT: &str = "err:2";
const EACCES: &str = "err:13";
const EROFS: &str = "err:30";
const EBUSY: &str = "err:16";

fn deny_anchor_hides_content_but_exceptions_are_visible() {
    let s = Scratch::new("deny");
    let p = s.policy();
    let secret = s.home.join(".ssh/id_canary");
    let out = s.run(&p, &["read", secret.to_str().unwrap()]);
    assert!([ENOENT, EACCES].contains(&value(&out, "read")), "{out}");
    let out = s.run(&p, &["ls", s.home.to_str().unwrap()]);
    assert_eq!(value(&out, "ls"), "ok:proj", "only the path to the project is listed");
    let out = s.run(&p, &["read", s.proj.join("src/main.rs").to_str().unwrap()]);
    assert_eq!(value(&out, "read"), "ok:fn main() {}");
}

fn a_hidden_file_outside_the_grants_shows_only_the_empty_mask() {
    // Outside every grant and under nothing bwrap mounts (the host's `/`, no private
    // `/tmp` here): the supervisor masks it with an empty mode-0000 file of its own, which
    // it removes from `/dev` once mounted.
    let s = Scratch::new("mask");
    let cred = s.root.join("cred");
    std::fs::write(&cred, SECRET).unwrap();
    let mut p = s.policy();
    p.private_tmp = false;
    p.read_deny.push(DenyAnchor {
        path: abs(&cred),
        kind: Some(FileKind::File),
        exceptions: Vec::new(),
        origin: Origin::flag("--deny-read"),
    });
    let path = cred.to_str().unwrap();
    let out = s.run(&p, &["read", path]);
    assert_eq!(value(&out, "read"), EACCES, "{out}");
    assert!(!out.contains(SECRET), "{out}");
    let out = s.run(&p, &["write", path]);
    assert!([EROFS, EACCES].contains(&value(&out, "write")), "{out}");
    assert_eq!(std::fs::read_to_string(&cred).unwrap(), SECRET, "the host's file is untouched");
    let out = s.run(&p, &["ls", "/dev"]);
    assert!(value(&out, "ls").starts_with("ok:"), "{out}");
    assert!(!value(&out, "ls").contains("paddock-masked"), "{out}");
}

fn a_hidden_directory_outside_the_grants_is_empty_and_read_only() {
    // Outside every grant and under nothing bwrap mounts (no private `/tmp` here): the
    // supervisor mounts an empty read-only tmpfs over it.
    let s = Scratch::new("vault");
    let vault = s.root.join("vault");
    std::fs::create_dir(&vault).unwrap();
    std::fs::write(vault.join("key"), SECRET).unwrap();
    let mut p = s.policy();
    p.private_tmp = false;
    p.read_deny.push(DenyAnchor {
        path: abs(&vault),
        kind: Some(FileKind::Dir),
        exceptions: Vec::new(),
        origin: Origin::flag("--deny-read"),
    });
    let out = s.run(&p, &["ls", vault.to_str().unwrap()]);
    assert_eq!(value(&out, "ls"), "ok:", "{out}");
    let key = vault.join("key");
    let out = s.run(&p, &["read", key.to_str().unwrap()]);
    assert_eq!(value(&out, "read"), ENOENT, "{out}");
    let out = s.run(&p, &["write", vault.join("new").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS, "{out}");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), SECRET, "the host's file is untouched");
    assert!(!vault.join("new").exists());
}

fn write_grant_is_writable_and_the_rest_is_read_only() {
    let s = Scratch::new("write");
    let p = s.policy();
    let out = s.run(&p, &["write", s.proj.join("out.txt").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), "ok");
    assert_eq!(std::fs::read_to_string(s.proj.join("out.txt")).unwrap(), "pwn");
    // (The scratch tree itself is under /tmp, which is private in the sandbox.)
    let outside = PathBuf::from(format!("/var/tmp/pbw-outside-{}", std::process::id()));
    let out = s.run(&p, &["write", outside.to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS);
    assert!(!outside.exists());
    // Under the (read-only) deny anchor, writes fail rather than vanish into its tmpfs.
    let out = s.run(&p, &["write", s.home.join("x").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS);
}

fn protected_git_is_read_only_and_cannot_be_renamed() {
    let s = Scratch::new("git");
    let p = s.policy();
    let out = s.run(&p, &["write", s.proj.join(".git/hooks/pre-commit").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS);
    let out = s.run(&p, &["write", s.proj.join(".git/config").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS);
    let out = s.run(
        &p,
        &["rename", s.proj.join(".git").to_str().unwrap(), s.proj.join("x").to_str().unwrap()],
    );
    assert_eq!(value(&out, "rename"), EBUSY);
    // The rest of .git stays writable (git works).
    let out = s.run(&p, &["write", s.proj.join(".git/HEAD").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), "ok");
    assert!(s.proj.join(".git/config").exists() && !s.proj.join("x").exists());
}

fn missing_protected_name_cannot_be_created_and_leaves_nothing() {
    let s = Scratch::new("missing");
    let mut p = s.policy();
    let bashrc = abs(&s.proj).join(".bashrc");
    let vscode = abs(&s.proj).join(".vscode/settings.json");
    p.protected.push(ProtectedPath {
        path: bashrc.clone(),
        rule: ".bashrc".into(),
        state: ProtectedState::Missing { first_missing: bashrc.clone() },
    });
    p.protected.push(ProtectedPath {
        path: vscode.clone(),
        rule: ".vscode".into(),
        state: ProtectedState::Missing { first_missing: abs(&s.proj).join(".vscode") },
    });
    let out = s.run(&p, &["write", bashrc.as_path().to_str().unwrap()]);
    assert!([EROFS, EACCES].contains(&value(&out, "write")), "{out}");
    let out = s.run(&p, &["write", vscode.as_path().to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS);
    let out = s.run(&p, &["mkdir", s.proj.join(".vscode").to_str().unwrap()]);
    assert!(value(&out, "mkdir").starts_with("err:"), "{out}");
    let mut left: Vec<String> = std::fs::read_dir(&s.proj)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".git", "src"], "no placeholder is left on the host");
}

fn private_tmp_hides_the_host_tmp_and_keeps_nothing() {
    let s = Scratch::new("tmp");
    let p = s.policy();
    let host_canary = std::env::temp_dir().join(format!("pbw-canary-{}", std::process::id()));
    std::fs::write(&host_canary, SECRET).unwrap();
    let out = s.run(&p, &["read", host_canary.to_str().unwrap()]);
    assert_eq!(value(&out, "read"), ENOENT);
    let inside = format!("/tmp/pbw-written-{}", std::process::id());
    let out = s.run(&p, &["write", &inside]);
    assert_eq!(value(&out, "write"), "ok");
    assert!(!Path::new(&inside).exists(), "the private /tmp never reaches the host");
    let out = s.run(&p, &["proc1"]);
    assert_eq!(value(&out, "tmpdir"), "/tmp");
    std::fs::remove_file(&host_canary).unwrap();
}

fn network_off_cannot_reach_host_loopback() {
    let s = Scratch::new("net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut p = s.policy();
    let out = s.run(&p, &["connect", &addr]);
    assert_eq!(value(&out, "connect"), "err:111", "own network namespace: refused");
    p.network = NetworkPolicy::On;
    let out = s.run(&p, &["connect", &addr]);
    assert_eq!(value(&out, "connect"), "ok", "network on shares the host's loopback");
}

fn seccomp_blocks_io_uring_tiocsti_and_unix_sockets() {
    let s = Scratch::new("seccomp");
    let mut p = s.policy();
    let out = s.run(&p, &["syscalls"]);
    for key in [
        "io_uring_setup",
        "tiocsti",
        "tiocsti_hi",
        "socket_unix",
        "socketpair_dgram",
        "socket_vsock",
        "keyctl",
    ] {
        assert_eq!(value(&out, key), "1", "{key} must be EPERM:\n{out}");
    }
    assert_eq!(value(&out, "socketpair_stream"), "0");
    assert_ne!(value(&out, "unshare_user"), "0", "no nested user namespace");
    assert_eq!(value(&out, "Seccomp"), "2");
    assert_eq!(value(&out, "NoNewPrivs"), "1");
    p.unix_sockets = UnixSockets::All;
    let out = s.run(&p, &["syscalls"]);
    assert_eq!(value(&out, "socket_unix"), "0");
    assert_eq!(value(&out, "socketpair_dgram"), "0");
    assert_eq!(value(&out, "io_uring_setup"), "1");
}

fn no_descriptor_leaks_into_the_task() {
    let s = Scratch::new("fds");
    let out = s.run(&s.policy(), &["fds"]);
    // 0-2 and the one `read_dir` itself opened.
    assert_eq!(value(&out, "fds"), "0,1,2,3", "{out}");
}

fn proc_1_shows_no_secret_and_only_sandbox_pids() {
    let s = Scratch::new("proc");
    let out = s.run(&s.policy(), &["proc1"]);
    assert!(!out.contains(SECRET), "{out}");
    assert_eq!(value(&out, "environ"), EACCES, "the supervisor is non-dumpable");
    assert!(value(&out, "cmdline").contains("__supervise --payload-fd 4"));
    assert_eq!(value(&out, "pids"), "2", "the supervisor and the probe only");
    assert_eq!(value(&out, "own_env_secret"), "false", "the runner's environment is not passed on");
}

fn exit_codes_follow_the_shell() {
    let s = Scratch::new("exit");
    let p = s.policy();
    let outcome = s.run_outcome(&p, &["exit", "7"], None);
    assert_eq!(outcome.exit_code, 7);
    assert!(outcome.max_rss_kib > 0 && outcome.cpu_time > Duration::ZERO, "rusage: {outcome:?}");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let opts = RunOptions {
        timeout: None,
        grace: Duration::from_millis(200),
        stdio: paddock_linux_bwrap::runtime::exec::Output::PIPED,
        ..RunOptions::new().unwrap()
    };
    let code = |program: &str| {
        let plan = s.plan_of(&p, runtime.path().as_path(), program.as_ref(), std::iter::empty());
        run_plan_in(&plan, &opts, None).unwrap().exit_code
    };
    // A program that is not there: 127.
    assert_eq!(code("no-such-program-xyz"), 127);
    // A file that is not executable: 126.
    assert_eq!(code(s.proj.join("src/main.rs").to_str().unwrap()), 126);
}

fn timeout_is_124_and_kills_after_grace() {
    let s = Scratch::new("timeout");
    let start = std::time::Instant::now();
    let outcome = s.run_outcome(&s.policy(), &["sleep"], Some(Duration::from_millis(300)));
    assert!(outcome.timed_out);
    assert_eq!(outcome.exit_code, 124);
    // Bounded against a hang (the probe sleeps 600 s), not a speed test.
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
}

fn sigterm_to_the_runner_reaches_the_task_politely() {
    let s = Scratch::new("sigterm");
    let opts = RunOptions {
        timeout: None,
        grace: Duration::from_secs(10),
        stdio: paddock_linux_bwrap::runtime::exec::Output::PIPED,
        ..RunOptions::new().unwrap()
    };
    // The run's own control, as a caller's signal handler or `Child::signal` uses it.
    let control = opts.control.clone();
    // The signal goes once the task runs (a fixed delay raced the start on a loaded machine,
    // and a signal before the run's handler left the task sleeping for 600 s).
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while live_processes(|cmd| cmd.contains("__probe\0sleep")).is_empty()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        control.signal(libc::SIGTERM).unwrap();
    });
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let plan = s.plan(&s.policy(), runtime.path().as_path(), &["sleep"]);
    let outcome = run_plan_in(&plan, &opts, None).unwrap();
    killer.join().unwrap();
    // 143 = the task's own death by SIGTERM, relayed by the supervisor to its group; a kill
    // of the sandbox after the grace period would be 137 (and take 10 s: the exit code says
    // which, no clock needed).
    assert_eq!(outcome.exit_code, 143, "{outcome:?}");
    assert_eq!(outcome.signal, Some(libc::SIGTERM));
}

fn a_corrupt_filter_fails_closed() {
    let s = Scratch::new("sec08");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let target = s.proj.join("RAN");
    let mut plan =
        s.plan(&s.policy(), runtime.path().as_path(), &["write", target.to_str().unwrap()]);
    let bpf = plan.payloads.iter_mut().find(|p| p.name == "seccomp-bpf").unwrap();
    bpf.bytes = vec![0xff; 16];
    let outcome = run_piped(&plan);
    assert_eq!(outcome.exit_code, 125, "{}", String::from_utf8_lossy(&outcome.stderr));
    assert!(!target.exists(), "the task never ran");
    assert!(String::from_utf8_lossy(&outcome.stderr).contains("seccomp"));
}

/// The supervisor tells the task's end up the signal channel once everything of the sandbox
/// is killed and reaped, and the run ends on its word while the kernel tears the sandbox
/// down: the task's code and usage, nothing the task left still running, and bwrap reaped
/// once the outcome is dropped (no zombie left to whoever embeds the runner).
fn the_end_is_told_before_bwrap_exits_and_bwrap_is_reaped_with_the_outcome() {
    use paddock_linux_bwrap::runtime::exec::{Output, Stream};
    let s = Scratch::new("told");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    // Its name marks this test's sleeper apart from any other test's.
    let marker = format!("told-{}", std::process::id());
    let plan = s.plan(&s.policy(), runtime.path().as_path(), &["leave-sleeper", &marker]);
    let opts = RunOptions {
        stdio: Output { stdin: Stream::Null, stdout: Stream::Null, stderr: Stream::Inherit },
        ..RunOptions::new().unwrap()
    };
    let outcome = run_plan_in(&plan, &opts, Some(runtime.path().as_path())).unwrap();
    assert_eq!(outcome.exit_code, 5, "{outcome:?}");
    assert!(outcome.teardown.is_some(), "the run ended on the supervisor's word: {outcome:?}");
    assert!(outcome.max_rss_kib > 0 && outcome.cpu_time > Duration::ZERO, "{outcome:?}");
    let left = live_processes(|cmd| cmd.contains("__probe\0sleep") && cmd.contains(&marker));
    assert!(left.is_empty(), "the task's sleeper outlived the told end: {left:?}");
    let bwrap = opts.control.pid();
    assert!(bwrap > 0);
    drop(outcome);
    // SAFETY: waitpid without a status pointer, not waiting.
    let rc = unsafe { libc::waitpid(bwrap, std::ptr::null_mut(), libc::WNOHANG) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert_eq!((rc, errno), (-1, Some(libc::ECHILD)), "bwrap {bwrap} is reaped with the outcome");
}

/// Runs a plan a test changed, its output piped, to its end.
fn run_piped(plan: &SpawnPlan) -> RunOutcome {
    let opts = RunOptions {
        timeout: None,
        grace: Duration::from_millis(200),
        stdio: paddock_linux_bwrap::runtime::exec::Output::PIPED,
        ..RunOptions::new().unwrap()
    };
    run_plan_in(plan, &opts, None).unwrap()
}

/// The supervisor makes the protected paths' binds itself (where there are user namespaces):
/// one it cannot make (the path is gone) stops everything before the task, which never runs.
fn an_inner_mount_that_cannot_be_made_fails_closed() {
    use paddock_linux_bwrap::payload::{InnerMount, SupervisorPayload};
    let s = Scratch::new("inner");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let target = s.proj.join("RAN");
    let mut plan = s.plan_writing(runtime.path().as_path(), &target);
    let sup = plan.payloads.iter_mut().find(|p| p.name == "supervisor").unwrap();
    let mut payload = SupervisorPayload::from_bytes(&sup.bytes, sup.fd).unwrap();
    if payload.inner_mounts.is_empty() {
        assert!(!facts().user_namespaces, "user namespaces, and no inner mount: {payload:?}");
        paddock_test_support::skip_test(
            "an_inner_mount_that_cannot_be_made_fails_closed",
            "no user namespaces here: bwrap makes every bind",
            Some(paddock_test_support::Fact::UsernsUnavailable),
        );
        return;
    }
    let gone = s.proj.join("gone/.bashrc");
    payload.inner_mounts.push(InnerMount::on_itself(gone.clone().into_os_string(), true));
    sup.bytes = payload.to_bytes();
    let plan = supervised(plan);
    let outcome = run_piped(&plan);
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    assert_eq!(outcome.exit_code, 125, "{stderr}");
    assert!(!target.exists(), "the task never ran");
    assert!(stderr.contains(gone.to_str().unwrap()), "the path is named: {stderr}");
}

/// strace around bwrap that dies before the task starts: when it failed on its own (it
/// exited 1, as strace does when it cannot trace) the task runs once more untraced; when a
/// signal killed it (someone's `kill -9`), the sandbox goes with it and nothing runs in its
/// place. A stand-in strace makes each case certain (with the real one, killing it in the
/// moment between bwrap's `execve` and strace's first line is a race).
fn a_tracer_killed_before_the_task_starts_leaves_nothing_running_in_its_place() {
    use paddock_linux_bwrap::runtime::itemized::Run;
    use std::os::unix::fs::PermissionsExt;
    for (script, runs_again) in [("kill -9 $$", false), ("echo 'strace: cannot' >&2; exit 1", true)]
    {
        let s = Scratch::new("tracer-dies");
        let strace = s.root.join("strace");
        std::fs::write(&strace, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&strace, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
        let target = s.proj.join("RAN");
        let policy = s.policy();
        let plan = s.plan(&policy, runtime.path().as_path(), &["write", target.to_str().unwrap()]);
        let opts = RunOptions {
            stdio: paddock_linux_bwrap::runtime::exec::Output::PIPED,
            ..RunOptions::new().unwrap()
        };
        let cwd = abs(&s.proj);
        let run = Run {
            plan: &plan,
            policy: &policy,
            cwd: &cwd,
            opts: &opts,
            runtime_dir: Some(runtime.path().as_path()),
        };
        let topts =
            paddock_linux_bwrap::trace::TraceOptions { strace: abs(&strace), seccomp_bpf: false };
        let ran = paddock_linux_bwrap::runtime::strace::around(run, &topts).unwrap();
        let notes = opts.notes.take().join("\n");
        assert_eq!(target.exists(), runs_again, "`{script}`: {:?}\n{notes}", ran.outcome);
        if runs_again {
            assert_eq!(ran.outcome.exit_code, 0, "{notes}");
        } else {
            assert_eq!(ran.outcome.exit_code, 125, "{notes}");
            assert_eq!(ran.outcome.killed_by, Some(libc::SIGKILL));
            assert!(notes.contains("killed by signal 9 before the task started"), "{notes}");
        }
    }
}

/// `__run_sleep MARKER`: performs a plan whose task sleeps, so a test can SIGKILL this runner.
fn run_sleep(args: &[OsString]) -> i32 {
    let s = Scratch::new(args.first().and_then(|a| a.to_str()).unwrap_or("sleep"));
    let outcome = s.run_outcome(&s.policy(), &["sleep"], None);
    outcome.exit_code
}

/// The pids of the processes alive (not zombies) whose command line (NUL-separated)
/// `wanted` accepts.
pub(crate) fn live_processes(wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !stat.contains(") Z ") && wanted(&String::from_utf8_lossy(&cmd)) {
            found.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

fn kill_9_of_the_runner_takes_the_sandbox_with_it() {
    let marker = format!("k9-{}", std::process::id());
    #[allow(clippy::disallowed_methods)] // a test spawning the runner it will kill
    let mut runner = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["__run_sleep", &marker])
        .spawn()
        .unwrap();
    // Processes under the runner: bwrap, the supervisor, the sleeping probe.
    let sandboxed = || live_processes(|cmd| cmd.contains("__probe\0sleep"));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while sandboxed().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the sandboxed task never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: SIGKILL to our own child.
    unsafe { libc::kill(i32::try_from(runner.id()).unwrap(), libc::SIGKILL) };
    runner.wait().unwrap();
    // The kernel tears the pid namespace down asynchronously: awaited, with room for a
    // loaded machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !sandboxed().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "sandboxed processes survived kill -9 of the runner"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ =
        std::fs::remove_dir_all(std::env::temp_dir().join(format!("pbw-{}-{marker}", runner.id())));
}
