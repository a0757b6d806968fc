//! A small task runner on paddock's library: every task of a graph runs in a sandbox of its
//! own, under its own policy, as many at once as `--jobs` allows.
//!
//! ```sh
//! cargo run -p paddock --example tasks -- crates/cli/examples/tasks.toml
//! cargo run -p paddock --example tasks -- --jobs 4 path/to/tasks.toml
//! ```
//!
//! # The task file
//!
//! ```toml
//! project = "."              # optional: the directory the tasks run in, relative to
//!                            # this file (created if missing); default: this file's directory
//!
//! [[task]]
//! name = "build"             # unique
//! command = "echo built > out/app"  # run with `sh -c`; or an argv list:
//!                                    # command = ["make", "-j4"]
//! deps = []                  # tasks that must succeed first (default: none)
//! dir = "sub"                # optional: working directory, relative to the project
//! env = { RUST_LOG = "info" }  # optional: variables on top of what the policy passes
//! timeout = 600              # optional: seconds, then the task is stopped (exit 124)
//! [task.policy]              # optional: the task's policy, exactly as a paddock.toml would
//! allow.write = ["out"]      # say it ([allow], [deny], [env], [report], ...); relative
//! deny.read = ["secrets"]    # paths start at the project, `~` is $HOME
//!
//! [[task]]
//! name = "test"
//! command = "cat out/app"
//! deps = ["build"]
//! ```
//!
//! A task without a `policy` table gets what `paddock run` would give it: the project's
//! `paddock.toml` if it has one, else the built-in default policy. Tasks whose policies are
//! equal share one [`Sandbox`]. A write grant holds what exists when the task starts: a
//! task granted `out` cannot create `out` itself (paddock's note says so), an earlier task
//! can. The whole file is checked before anything runs (unknown keys, an unknown dep, a
//! duplicate name, a dependency cycle, each policy): a mistake is one error naming the
//! task, and exit status 2.
//!
//! # Running
//!
//! Up to `--jobs` tasks run at once (default: the number of CPUs). A task starts as soon as
//! every task it depends on has succeeded, in the file's order among those ready; a task
//! whose dep failed (or was skipped) is skipped. Tasks get no stdin. Their output is
//! captured and printed when each one ends, every line prefixed with the task's name: its
//! stdout to stdout, then its stderr to stderr, followed there by paddock's notes and what
//! it denied the task, with the key that would grant it. One task's lines are never
//! interleaved with another's. At the end, one line per task, in the file's order: its exit
//! status, its duration and its denials, or why it did not run.
//!
//! SIGINT, SIGTERM and SIGHUP (Ctrl-C) start no more tasks and are forwarded to the running
//! ones, politely (a second one kills their sandboxes); the summary is printed all the
//! same.
//!
//! Exit status: 0 if every task succeeded, 1 if any failed or did not run, 2 when nothing
//! ran (a bad task file or arguments, or a host that cannot run sandboxes), 128+N when
//! signal N interrupted the run.
//!
//! The program is its own sandbox supervisor (`supervise_with_current_exe`), so `cargo run
//! --example` needs no `paddock-supervisor` beside it: `main` hands the supervisor's
//! invocations to [`paddock::run_supervisor_if_asked`] first thing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use paddock::{
    Command, Handle, Output, Report, Sandbox, SandboxBuilder, Stdio, Violation, ViolationKind,
};
use serde::Deserialize;

/// Runs a graph of tasks, each in a paddock sandbox under its own policy.
#[derive(Debug, Parser)]
#[command(name = "tasks")]
struct Args {
    /// The task file (TOML; see the top of examples/tasks.rs).
    file: PathBuf,
    /// How many tasks run at once [default: the number of CPUs].
    #[arg(short, long)]
    jobs: Option<NonZeroUsize>,
}

/// The task file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    project: Option<PathBuf>,
    #[serde(default, rename = "task")]
    tasks: Vec<TaskSpec>,
}

/// One `[[task]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSpec {
    name: String,
    command: toml::Value,
    #[serde(default)]
    deps: Vec<String>,
    policy: Option<toml::Table>,
    dir: Option<PathBuf>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout: Option<u64>,
}

/// A checked task: its deps index the task list, and no task depends on itself through
/// them.
#[derive(Debug)]
struct Task {
    name: String,
    argv: Vec<String>,
    deps: Vec<usize>,
    /// Which of the distinct policies (and so sandboxes) it runs under.
    policy: usize,
    dir: Option<PathBuf>,
    env: BTreeMap<String, String>,
    timeout: Option<Duration>,
}

/// How a task ended, or why it did not run.
#[derive(Debug)]
enum Finish {
    Ran(Box<Report>),
    /// Its sandbox could not be started (or waited for): why.
    Error(String),
    /// The named dep did not succeed.
    Skipped(usize),
    /// The run was interrupted before it started.
    Interrupted,
}

impl Finish {
    fn success(&self) -> bool {
        matches!(self, Finish::Ran(report) if report.success())
    }

    /// How a dependent's summary line says it: "dep NAME failed".
    fn as_dep(&self) -> &'static str {
        match self {
            Finish::Ran(_) | Finish::Error(_) => "failed",
            Finish::Skipped(_) => "was skipped",
            Finish::Interrupted => "did not run",
        }
    }
}

/// What the scheduler hears about, from the tasks' threads and from the signal thread.
#[derive(Debug)]
enum Event {
    Started(usize, Handle),
    Done(usize, Result<Output>),
    Signal(i32),
}

fn main() -> ExitCode {
    // The sandboxes' supervisor is this program, started again: it must be handed over
    // before anything else happens.
    if let Some(code) = paddock::run_supervisor_if_asked() {
        std::process::exit(code);
    }
    let args = Args::parse();
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tasks: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Checks the file, builds one sandbox per policy, runs the graph and prints the summary;
/// the exit status. An error means nothing ran.
fn run(args: &Args) -> Result<u8> {
    let file = &args.file;
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the task file {}", file.display()))?;
    let spec: TaskFile =
        toml::from_str(&text).with_context(|| format!("{} is not a task file", file.display()))?;
    let (tasks, policies) = check(spec.tasks).with_context(|| format!("{}", file.display()))?;

    let base = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let project = base.join(spec.project.unwrap_or_else(|| PathBuf::from(".")));
    let created = !project.exists();
    if created {
        std::fs::create_dir_all(&project)
            .with_context(|| format!("cannot create the project {}", project.display()))?;
    }
    let project = project
        .canonicalize()
        .with_context(|| format!("the project {} is not usable", project.display()))?;
    if created {
        eprintln!("tasks: created the project directory {}", project.display());
    }

    // Every policy is read before any sandbox is built: a mistake names its task.
    let builders = policies
        .iter()
        .enumerate()
        .map(|(i, policy)| {
            builder(&project, policy.as_ref()).with_context(|| {
                let users: Vec<&str> =
                    tasks.iter().filter(|t| t.policy == i).map(|t| t.name.as_str()).collect();
                let task = if users.len() == 1 { "task" } else { "tasks" };
                format!("{}: {task} \"{}\"", file.display(), users.join("\", \""))
            })
        })
        .collect::<Result<Vec<SandboxBuilder>>>()?;
    let sandboxes = builders
        .into_iter()
        .map(|b| b.supervise_with_current_exe().build().map_err(anyhow::Error::from))
        .collect::<Result<Vec<Sandbox>>>()?;

    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get);
    eprintln!(
        "tasks: {}, {} ({}), {jobs} at a time, in {}",
        counted(tasks.len(), "task", "tasks"),
        counted(sandboxes.len(), "sandbox", "sandboxes"),
        if sandboxes.len() == 1 { "one policy" } else { "one per policy" },
        project.display()
    );
    let started = Instant::now();
    let origin = format!("{}: ", project.join("paddock.toml").display());
    let (finished, interrupted) = schedule(&tasks, &policies, &sandboxes, jobs, &origin);
    let home = std::env::var_os("HOME").map(PathBuf::from).and_then(|h| h.canonicalize().ok());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(
        summary(&tasks, &finished, &project, home.as_deref(), started.elapsed()).as_bytes(),
    );
    let _ = out.flush();
    Ok(match interrupted {
        Some(signal) => u8::try_from(128 + signal).unwrap_or(255),
        None if finished.iter().all(Finish::success) => 0,
        None => 1,
    })
}

/// The tasks with their deps resolved, and the distinct policies they use (a task's
/// `policy` indexes them); or what is wrong with the graph, naming the task.
fn check(specs: Vec<TaskSpec>) -> Result<(Vec<Task>, Vec<Option<toml::Table>>)> {
    if specs.is_empty() {
        bail!("no tasks: add a [[task]] table with a name and a command");
    }
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, t) in specs.iter().enumerate() {
        if t.name.trim().is_empty() || t.name.chars().any(char::is_control) {
            bail!("task {} has no usable name ({:?})", i + 1, t.name);
        }
        if index.insert(t.name.as_str(), i).is_some() {
            bail!("task \"{}\" is defined twice: names must be unique", t.name);
        }
    }
    let mut deps = Vec::with_capacity(specs.len());
    for t in &specs {
        let mut mine: Vec<usize> = Vec::new();
        for d in &t.deps {
            let Some(&j) = index.get(d.as_str()) else {
                let known: Vec<&str> = index.keys().copied().collect();
                bail!(
                    "task \"{}\" depends on \"{d}\", which is not a task (the tasks: {})",
                    t.name,
                    known.join(", ")
                );
            };
            if !mine.contains(&j) {
                mine.push(j);
            }
        }
        deps.push(mine);
    }
    if let Some(cycle) = find_cycle(&deps) {
        let names: Vec<&str> = cycle.iter().map(|&i| specs[i].name.as_str()).collect();
        bail!(
            "task \"{}\" depends on itself: {} (each depends on the next)",
            names[0],
            names.join(" -> ")
        );
    }
    let mut policies: Vec<Option<toml::Table>> = Vec::new();
    let mut tasks = Vec::with_capacity(specs.len());
    for (t, deps) in specs.into_iter().zip(deps) {
        let argv = argv(&t.command).with_context(|| format!("task \"{}\": command", t.name))?;
        let policy = match policies.iter().position(|p| *p == t.policy) {
            Some(i) => i,
            None => {
                policies.push(t.policy);
                policies.len() - 1
            }
        };
        let timeout = match t.timeout {
            Some(0) => bail!("task \"{}\": timeout must be at least 1 second", t.name),
            other => other.map(Duration::from_secs),
        };
        tasks.push(Task { name: t.name, argv, deps, policy, dir: t.dir, env: t.env, timeout });
    }
    Ok((tasks, policies))
}

/// The tasks of a dependency cycle, its first task again at its end; none in a DAG.
fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(i: usize, deps: &[Vec<usize>], mark: &mut [Mark], path: &mut Vec<usize>) -> bool {
        match mark[i] {
            Mark::Done => return false,
            Mark::Open => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                path.drain(..start);
                path.push(i);
                return true;
            }
            Mark::New => {}
        }
        mark[i] = Mark::Open;
        path.push(i);
        for &d in &deps[i] {
            if visit(d, deps, mark, path) {
                return true;
            }
        }
        path.pop();
        mark[i] = Mark::Done;
        false
    }
    let mut mark = vec![Mark::New; deps.len()];
    let mut path = Vec::new();
    (0..deps.len()).find(|&i| visit(i, deps, &mut mark, &mut path)).map(|_| path)
}

/// A command as written: a string for `sh -c`, or an argv list.
fn argv(command: &toml::Value) -> Result<Vec<String>> {
    match command {
        toml::Value::String(s) if s.trim().is_empty() => bail!("it is empty"),
        toml::Value::String(s) => Ok(vec!["sh".into(), "-c".into(), s.clone()]),
        toml::Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|v| match v {
                toml::Value::String(s) => Ok(s.clone()),
                other => bail!("every argument must be a string (got {other})"),
            })
            .collect(),
        toml::Value::Array(_) => bail!("it is an empty list"),
        other => bail!(
            "expected a string (run with `sh -c`) or a list of strings (the argv), got {other}"
        ),
    }
}

/// The sandbox of one policy, to build: the task's table as `paddock.toml` text, or none
/// for what `paddock run` would use (the project's `paddock.toml`, else the default policy).
fn builder(project: &Path, policy: Option<&toml::Table>) -> Result<SandboxBuilder> {
    let mut builder = Sandbox::builder(project);
    if let Some(table) = policy {
        let text = toml::to_string(table).context("policy: cannot write it as TOML")?;
        builder = builder.policy_toml(&text).map_err(|e| {
            // The library names the origin `PROJECT/paddock.toml` (no such file is read):
            // the keys are the task's `policy` table's.
            let message = e.to_string();
            let origin = format!("{}: ", project.join("paddock.toml").display());
            match message.strip_prefix(&origin) {
                Some(rest) => anyhow::anyhow!("policy.{rest}"),
                None => anyhow::anyhow!("policy: {message}"),
            }
        })?;
    }
    Ok(builder)
}

/// Runs the tasks, `jobs` at a time, printing each one's output as it ends; how each ended,
/// and the signal that interrupted the run, if one did. `origin` is how paddock's notes
/// name a policy given as text (see [`builder`]).
fn schedule(
    tasks: &[Task],
    policies: &[Option<toml::Table>],
    sandboxes: &[Sandbox],
    jobs: usize,
    origin: &str,
) -> (Vec<Finish>, Option<i32>) {
    let width = tasks.iter().map(|t| t.name.chars().count()).max().unwrap_or(0);
    let mut finish: Vec<Option<Finish>> = tasks.iter().map(|_| None).collect();
    let mut running: Vec<Option<Option<Handle>>> = tasks.iter().map(|_| None).collect();
    let mut interrupted = None;
    let (events, heard) = mpsc::channel();
    signals::forward(events.clone());
    loop {
        if interrupted.is_none() {
            skip_dependents(tasks, &mut finish);
            for (i, task) in tasks.iter().enumerate() {
                if running.iter().flatten().count() >= jobs {
                    break;
                }
                let ready = finish[i].is_none()
                    && running[i].is_none()
                    && task.deps.iter().all(|&d| finish[d].as_ref().is_some_and(Finish::success));
                if ready {
                    match start(i, task, &sandboxes[task.policy], events.clone()) {
                        Ok(()) => running[i] = Some(None),
                        Err(e) => finish[i] = Some(Finish::Error(format!("{e:#}"))),
                    }
                }
            }
        }
        if running.iter().all(Option::is_none) {
            break;
        }
        let Ok(event) = heard.recv() else { break };
        match event {
            Event::Started(i, handle) => {
                if let Some(signal) = interrupted {
                    let _ = handle.signal(signal);
                }
                running[i] = Some(Some(handle));
            }
            Event::Done(i, result) => {
                running[i] = None;
                let name = &tasks[i].name;
                finish[i] = Some(match result {
                    Ok(output) => {
                        let origin = policies[tasks[i].policy].is_some().then_some(origin);
                        print_output(name, width, &output, origin);
                        Finish::Ran(Box::new(output.report))
                    }
                    Err(e) => {
                        print_lines(
                            &mut std::io::stderr().lock(),
                            name,
                            width,
                            &format!("error: {e:#}"),
                        );
                        Finish::Error(format!("{e:#}"))
                    }
                });
            }
            Event::Signal(signal) => {
                interrupted = Some(signal);
                for handle in running.iter().flatten().flatten() {
                    let _ = handle.signal(signal);
                }
            }
        }
    }
    if interrupted.is_none() {
        // Dependents of a task that could not start, when nothing else ran.
        skip_dependents(tasks, &mut finish);
    }
    let finished = finish.into_iter().map(|f| f.unwrap_or(Finish::Interrupted)).collect();
    (finished, interrupted)
}

/// Marks every task a failed (or skipped) dep keeps from running as skipped.
fn skip_dependents(tasks: &[Task], finish: &mut [Option<Finish>]) {
    loop {
        let mut changed = false;
        for (i, task) in tasks.iter().enumerate() {
            if finish[i].is_some() {
                continue;
            }
            let failed =
                task.deps.iter().find(|&&d| finish[d].as_ref().is_some_and(|f| !f.success()));
            if let Some(&d) = failed {
                finish[i] = Some(Finish::Skipped(d));
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// Starts task `i` on a thread of its own, which reports its start and its end as events.
fn start(i: usize, task: &Task, sandbox: &Sandbox, events: mpsc::Sender<Event>) -> Result<()> {
    let mut command = Command::new(&task.argv[0]);
    command
        .args(&task.argv[1..])
        .envs(&task.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &task.dir {
        command.current_dir(dir);
    }
    if let Some(timeout) = task.timeout {
        command.timeout(timeout);
    }
    let sandbox = sandbox.clone();
    std::thread::Builder::new()
        .name(format!("task {}", task.name))
        .spawn(move || {
            let result = match sandbox.spawn(&command) {
                Ok(child) => {
                    let _ = events.send(Event::Started(i, child.handle()));
                    child.wait_with_output()
                }
                Err(e) => Err(e),
            };
            let _ = events.send(Event::Done(i, result.map_err(anyhow::Error::from)));
        })
        .context("cannot start a thread")?;
    Ok(())
}

/// A finished task's output, each line prefixed with its name: stdout to stdout; stderr,
/// then paddock's notes and its summary of the denials to stderr, as `paddock run` prints
/// them. Both streams are locked throughout, so another task's lines never come in between.
/// Notes of a policy table name its keys `policy.KEY` (rather than `origin` + `KEY`).
fn print_output(name: &str, width: usize, output: &Output, origin: Option<&str>) {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    print_lines(&mut out, name, width, &String::from_utf8_lossy(&output.stdout));
    let _ = out.flush();
    print_lines(&mut err, name, width, &String::from_utf8_lossy(&output.stderr));
    let report = &output.report;
    for line in report.notes.iter().chain(&report.summary) {
        let line = match origin {
            Some(origin) => line.replace(origin, "policy."),
            None => line.clone(),
        };
        print_lines(&mut err, name, width, &format!("paddock: {line}"));
    }
}

/// `text`'s lines, each after `[name] ` padded to `width` names; write errors (a closed
/// stdout) are ignored: the tasks run on.
fn print_lines(to: &mut dyn std::io::Write, name: &str, width: usize, text: &str) {
    let prefix = format!("[{name}]");
    let pad = width + 2;
    for line in text.lines() {
        let _ = writeln!(to, "{prefix:<pad$} {line}");
    }
}

/// One line per task, in the file's order, and a total.
fn summary(
    tasks: &[Task],
    finished: &[Finish],
    project: &Path,
    home: Option<&Path>,
    elapsed: Duration,
) -> String {
    let width = tasks.iter().map(|t| t.name.chars().count()).max().unwrap_or(0);
    // The exit status of each task that ran, for a column as wide as the widest.
    let statuses: Vec<String> = finished
        .iter()
        .map(|f| match f {
            Finish::Ran(r) if r.timed_out => format!("exit {} (timed out)", r.exit_code),
            Finish::Ran(r) => match r.signal {
                Some(signal) => format!("exit {} (signal {signal})", r.exit_code),
                None => format!("exit {}", r.exit_code),
            },
            _ => String::new(),
        })
        .collect();
    let column = statuses.iter().map(String::len).max().unwrap_or(0);
    let mut s = String::from("\n");
    let (mut ok, mut failed, mut not_run) = (0, 0, 0);
    for ((task, finish), status) in tasks.iter().zip(finished).zip(&statuses) {
        let line = match finish {
            Finish::Ran(r) => {
                let seconds = Duration::from_millis(r.duration_ms).as_secs_f64();
                let denied = denials(&r.violations, project, home);
                format!("{status:<column$}  {seconds:>6.2}s  denials: {denied}")
            }
            Finish::Error(why) => format!("error: {why}"),
            Finish::Skipped(d) => {
                format!("skipped (dep {} {})", tasks[*d].name, finished[*d].as_dep())
            }
            Finish::Interrupted => "not run (interrupted)".to_owned(),
        };
        match finish {
            Finish::Ran(r) if r.success() => ok += 1,
            Finish::Ran(_) | Finish::Error(_) => failed += 1,
            Finish::Skipped(_) | Finish::Interrupted => not_run += 1,
        }
        let _ = writeln!(s, "{:<width$}  {line}", task.name);
    }
    let _ = writeln!(
        s,
        "{} in {:.2}s: {ok} succeeded, {failed} failed, {not_run} not run",
        counted(tasks.len(), "task", "tasks"),
        elapsed.as_secs_f64()
    );
    s
}

/// `1 one`, or `n many`.
fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {many}") }
}

/// A task's denials, compact: `read secrets/token, network evil.example:443 x2`; paths
/// relative to the project, or to `~`.
fn denials(violations: &[Violation], project: &Path, home: Option<&Path>) -> String {
    // The report keeps one entry per system call; here one per kind and path.
    let mut merged: Vec<(String, u64)> = Vec::new();
    for v in violations {
        let kind = match v.kind {
            ViolationKind::Read => "read",
            ViolationKind::Write => "write",
            ViolationKind::Network => "network",
            ViolationKind::UnixSocket => "unix-socket",
            ViolationKind::MachLookup => "mach-lookup",
            ViolationKind::SystemInfo => "system-info",
            ViolationKind::NewRepository => "new-repository",
        };
        let what = match (&v.path, &v.target) {
            (Some(path), _) => shown(path, project, home),
            (None, Some(target)) => target.clone(),
            (None, None) => String::from("(unknown)"),
        };
        let key = format!("{kind} {what}");
        match merged.iter_mut().find(|(k, _)| *k == key) {
            Some((_, count)) => *count += v.count.max(1),
            None => merged.push((key, v.count.max(1))),
        }
    }
    if merged.is_empty() {
        return "none".to_owned();
    }
    const SHOWN: usize = 4;
    let mut parts: Vec<String> = merged
        .iter()
        .take(SHOWN)
        .map(|(k, n)| if *n > 1 { format!("{k} x{n}") } else { k.clone() })
        .collect();
    if merged.len() > SHOWN {
        parts.push(format!("and {} more", merged.len() - SHOWN));
    }
    parts.join(", ")
}

/// `path` relative to the project (`.` for itself), else to `~`, else as it is.
fn shown(path: &Path, project: &Path, home: Option<&Path>) -> String {
    if let Ok(rel) = path.strip_prefix(project) {
        if rel.as_os_str().is_empty() {
            return ".".to_owned();
        }
        return rel.display().to_string();
    }
    if let Some(rel) = home.and_then(|h| path.strip_prefix(h).ok()) {
        return Path::new("~").join(rel).display().to_string();
    }
    path.display().to_string()
}

/// SIGINT, SIGTERM and SIGHUP as events: a handler writes each to a socket, a thread reads
/// it. The library installs no handler; forwarding signals to the tasks is its caller's
/// part ([`paddock::Child::signal`]). A signal ignored when the program started (`nohup`)
/// stays ignored.
#[cfg(unix)]
mod signals {
    use std::io::Read;
    use std::os::fd::IntoRawFd;
    use std::os::unix::net::UnixStream;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::mpsc::Sender;

    use super::Event;

    /// The descriptor the handler writes to (-1: none).
    static SOCKET: AtomicI32 = AtomicI32::new(-1);

    extern "C" fn on_signal(signal: libc::c_int) {
        let fd = SOCKET.load(Ordering::Relaxed);
        if fd >= 0 {
            let byte = [u8::try_from(signal).unwrap_or(0)];
            // SAFETY: write(2) is async-signal-safe; the buffer is valid for one byte.
            unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
        }
    }

    /// Sends each signal received from now on to `events`.
    pub(super) fn forward(events: Sender<Event>) {
        let Ok((mut read, write)) = UnixStream::pair() else { return };
        // A handler never blocks: with the buffer full a signal is dropped instead.
        if write.set_nonblocking(true).is_err() {
            return;
        }
        // Kept open for the life of the process: a handler may write to it at any time.
        SOCKET.store(write.into_raw_fd(), Ordering::Relaxed);
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            let mut byte = [0u8; 1];
            while read.read_exact(&mut byte).is_ok() {
                if events.send(Event::Signal(i32::from(byte[0]))).is_err() {
                    return;
                }
            }
        });
        if thread.is_err() {
            return;
        }
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: zeroed sigaction structs are valid; the query (no new action) only
            // writes `previous`; the handler is an extern "C" fn that only calls write(2).
            unsafe {
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut previous) != 0
                    || previous.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }
}

/// Signals are not forwarded on this OS.
#[cfg(not(unix))]
mod signals {
    /// Does nothing.
    pub(super) fn forward(_: std::sync::mpsc::Sender<super::Event>) {}
}
