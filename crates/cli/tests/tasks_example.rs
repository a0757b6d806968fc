//! The `tasks` example (examples/tasks.rs) end to end, as its user runs it: a small graph in
//! a scratch project, and what it prints; a bad task file, refused before anything runs; a
//! run interrupted by SIGTERM.
//!
//! It runs the example's binary, `target/debug/examples/tasks`, which `cargo test -p
//! paddock` and `cargo test --workspace` build (`cargo build -p paddock --example tasks`
//! alone). Without it, or with it older than its source, the test skips (fails under CI).

#![cfg(target_os = "linux")]
// A test harness: a failed setup step should stop the test with its error.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Its job is to run the example and look at it from outside.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use paddock_test_support::skip;

/// The example's binary, if it is built and not older than its source; else skips.
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    let built = debug.join("examples/tasks");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tasks.rs");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(&built), modified(&source)) {
        (None, _) => skip(
            format!("{} is not built (cargo build -p paddock --example tasks)", built.display()),
            None,
        ),
        (Some(b), Some(s)) if b < s => skip(
            format!(
                "{} is older than its source (cargo build -p paddock --example tasks)",
                built.display()
            ),
            None,
        ),
        _ => return Some(built),
    }
    None
}

/// A scratch home with a project in it, outside `/tmp` (every task gets a private `/tmp`).
struct Scratch {
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let tmp = paddock_test_support::visible_dir(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let root = tmp.join(format!("tasks-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("home/proj")).unwrap();
        let root = root.canonicalize().unwrap();
        Scratch { home: root.join("home"), project: root.join("home/proj"), root }
    }

    /// Writes `tasks.toml` into the project (its default project directory).
    fn tasks(&self, toml: &str) -> PathBuf {
        let file = self.project.join("tasks.toml");
        std::fs::write(&file, toml).unwrap();
        file
    }

    fn command(&self, exe: &Path, args: &[&str], file: &Path) -> Command {
        let mut cmd = Command::new(exe);
        cmd.args(args).arg(file).env("HOME", &self.home).current_dir(&self.root);
        cmd
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The line of `text` that starts with `start` and contains every one of `parts`.
#[track_caller]
fn line<'a>(text: &'a str, start: &str, parts: &[&str]) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start) && parts.iter().all(|p| l.contains(p)))
        .unwrap_or_else(|| panic!("no line starting {start:?} with {parts:?} in:\n{text}"))
}

#[test]
fn a_graph_runs_concurrently_with_prefixed_output_denials_skips_and_a_summary() {
    let Some(exe) = example() else { return };
    if !paddock_test_support::require_bubblewrap() {
        return;
    }
    let s = Scratch::new("graph");
    for dir in ["out", "secrets", "sub"] {
        std::fs::create_dir_all(s.project.join(dir)).unwrap();
    }
    std::fs::write(s.project.join("secrets/key"), "secret-canary-7d1e").unwrap();
    // `waiter` (first in the file) waits for `marker`, a task after it: both must run at
    // once. `leak` fails on a denied read, so `after` is skipped.
    let file = s.tasks(
        r#"
[[task]]
name = "waiter"
command = "for i in $(seq 200); do [ -e out/marker ] && echo saw the marker && exit 0; sleep 0.05; done; exit 1"
[task.policy]
allow.write = ["out"]

[[task]]
name = "marker"
command = "touch out/marker"
[task.policy]
allow.write = ["out"]

[[task]]
name = "make"
command = "echo made > out/thing && echo made it; echo to-stderr >&2"
[task.policy]
allow.write = ["out"]

[[task]]
name = "leak"
deps = ["make"]
command = "cat out/thing; cat secrets/key"
[task.policy]
allow.write = []
deny.read = ["secrets"]

[[task]]
name = "after"
deps = ["leak", "make"]
command = "touch out/after-ran"

[[task]]
name = "argv"
command = ["sh", "-c", "echo $GREETING from $(basename $PWD)"]
dir = "sub"
env = { GREETING = "hello" }

[[task]]
name = "slow"
command = "sleep 20"
timeout = 1
"#,
    );
    let started = Instant::now();
    let out = s.command(&exe, &["--jobs", "2"], &file).output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let all = format!("status: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(started.elapsed() < Duration::from_secs(15), "{all}");
    assert!(!stdout.contains("secret-canary") && !stderr.contains("secret-canary"), "{all}");
    assert!(stderr.contains("7 tasks, 3 sandboxes (one per policy), 2 at a time"), "{all}");

    // Each task's lines, prefixed with its name (padded to the longest name).
    line(&stdout, "[waiter] ", &[" saw the marker"]);
    line(&stdout, "[make]   ", &[" made it"]);
    line(&stderr, "[make]   ", &[" to-stderr"]);
    line(&stdout, "[leak]   ", &[" made"]);
    line(&stderr, "[leak]   ", &["secrets/key: No such file or directory"]);
    line(&stderr, "[leak]   ", &["paddock: denied 1 read of secrets/key (allow with allow.read)"]);
    line(&stdout, "[argv]   ", &[" hello from sub"]);
    assert!(!stdout.contains("[after]") && !stderr.contains("[after]"), "{all}");
    assert!(!s.project.join("out/after-ran").exists(), "a skipped task ran");

    // The summary: one line per task, in the file's order, then the total.
    let summary: Vec<&str> = stdout.lines().skip_while(|l| !l.is_empty()).skip(1).collect();
    let names: Vec<&str> = summary.iter().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["waiter", "marker", "make", "leak", "after", "argv", "slow", "7"], "{all}");
    let summary = summary.join("\n");
    line(&summary, "waiter  ", &["exit 0 ", "denials: none"]);
    line(&summary, "make  ", &["exit 0 ", "denials: none"]);
    line(&summary, "leak  ", &["exit 1 ", "denials: read secrets/key"]);
    line(&summary, "after  ", &["skipped (dep leak failed)"]);
    line(&summary, "argv  ", &["exit 0 ", "denials: none"]);
    line(&summary, "slow  ", &["exit 124 (timed out)"]);
    line(&summary, "7 tasks in ", &["s: 4 succeeded, 2 failed, 1 not run"]);
}

#[test]
fn a_bad_task_file_is_refused_with_status_2_before_anything_runs() {
    let Some(exe) = example() else { return };
    let s = Scratch::new("bad");
    // Each file also has a task that would leave a mark if anything ran.
    let ran = "[[task]]\nname = \"first\"\ncommand = \"touch ran\"\n";
    let cases = [
        (
            "[[task]]\nname = \"a\"\ncommand = \"true\"\ndeps = [\"b\"]\n\
             [[task]]\nname = \"b\"\ncommand = \"true\"\ndeps = [\"first\", \"a\"]\n",
            "task \"a\" depends on itself: a -> b -> a",
        ),
        (
            "[[task]]\nname = \"a\"\ncommand = \"true\"\ndeps = [\"frist\"]\n",
            "task \"a\" depends on \"frist\", which is not a task",
        ),
        ("[[task]]\nname = \"first\"\ncommand = \"true\"\n", "task \"first\" is defined twice"),
        (
            "[[task]]\nname = \"a\"\ncommand = \"true\"\n[task.policy]\nallow.writ = [\"out\"]\n",
            "task \"a\": policy.allow: unknown key `writ`; did you mean `allow.write`?",
        ),
        ("[[task]]\nname = \"a\"\ncommand = 3\n", "task \"a\": command: expected a string"),
        ("[[task]]\nname = \"a\"\ncommand = \"true\"\nneeds = []\n", "unknown field `needs`"),
    ];
    for (toml, expected) in cases {
        let file = s.tasks(&format!("{ran}{toml}"));
        let out = s.command(&exe, &[], &file).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}\n{stderr}");
        assert!(stderr.starts_with("tasks: ") && stderr.contains(expected), "{toml}\n{stderr}");
        assert!(out.stdout.is_empty(), "{toml}\n{}", text(&out.stdout));
        assert!(!s.project.join("ran").exists(), "a task ran despite: {stderr}");
    }
}

#[test]
fn sigterm_stops_the_running_tasks_starts_no_more_and_still_prints_the_summary() {
    let Some(exe) = example() else { return };
    if !paddock_test_support::require_bubblewrap() {
        return;
    }
    let s = Scratch::new("signal");
    let file = s.tasks(
        r#"
[[task]]
name = "long"
command = "trap 'echo stopped politely; exit 7' TERM; touch started; sleep 60 & wait"
[[task]]
name = "next"
deps = ["long"]
command = "touch next-ran"
"#,
    );
    let mut command = s.command(&exe, &[], &file);
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.project.join("started").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.project.join("started").exists(), "the task did not start");
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid, not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let started = Instant::now();
    let out: Output = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let all = format!("status: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(started.elapsed() < Duration::from_secs(15), "{all}");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{all}");
    line(&stdout, "[long] ", &[" stopped politely"]);
    line(&stdout, "long  ", &["exit 7 "]);
    line(&stdout, "next  ", &["not run (interrupted)"]);
    assert!(!s.project.join("next-ran").exists(), "a task started after the signal");
}
