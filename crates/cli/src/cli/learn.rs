//! `paddock learn`: runs a task traced under a permissive policy and proposes the
//! `paddock.toml` that lets it run with the fewest grants.
//!
//! The learning policy is the built-in default with nothing of the user's: reads everywhere
//! except the built-in secret locations, writes only in the project (and the private
//! `/tmp`), unix sockets allowed (and recorded), network off unless `--network`. So learning never writes outside the project;
//! writes the task attempts elsewhere are refused, recorded and proposed. strace runs
//! without `--seccomp-bpf` so that every call shows, the ones the seccomp filter refuses
//! (`socket(AF_UNIX)`) included.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, Result, anyhow, bail};
use paddock_linux_bwrap::seccomp_query;
use paddock_linux_bwrap::trace::{TraceOptions, wrap};
use paddock_policy::{
    AbsPathBuf, Backend, Context, Entry, NetworkRule, Origin, Task, UnixSocketsRule, ViolationKind,
    default_policy, resolve,
};
use paddock_strace_parse::{Denial, Event, Return};

use crate::cli::args::LearnArgs;
use paddock_linux_bwrap::runtime::classify::{
    Classifier, inet_target, is_write_intent, sandbox_owned, unix_socket_refused,
};
use paddock_linux_bwrap::runtime::host::RealHost;
use paddock_linux_bwrap::runtime::supervise::{RunOptions, run_plan_with};
use paddock_linux_bwrap::runtime::trace_log::{Observer, Reader};
use paddock_policy::propose::{Learned, propose};

/// The observer of a learning run.
#[derive(Debug)]
struct Learner {
    classifier: Classifier<RealHost>,
    seen: Learned,
}

impl Observer for Learner {
    fn event(&mut self, event: &Event<'_>) {
        if !self.classifier.is_task(event) {
            return;
        }
        if let Some(found) = self.classifier.observe_task(event) {
            let v = found.violation;
            match (v.kind, v.path, v.target) {
                (ViolationKind::Write, Some(p), _) => {
                    self.seen.denied_writes.insert(p);
                }
                (ViolationKind::Read, Some(p), _) => {
                    self.seen.denied_reads.insert(p);
                }
                (ViolationKind::Network, _, Some(t)) => {
                    self.seen.refused_connects.insert(t);
                }
                (ViolationKind::UnixSocket, _, _) => self.seen.unix_sockets += 1,
                _ => {}
            }
            return;
        }
        let Some(call) = event.syscall() else { return };
        if !matches!(call.ret, Return::Value(_)) {
            return;
        }
        match &*call.name {
            "socket" | "socketpair" => {
                // A unix socket the filter refuses when unix sockets are not granted.
                if unix_socket_refused(seccomp_query::options_without_unix_sockets(), call) {
                    self.seen.unix_sockets += 1;
                }
            }
            "connect" => {
                if let Some(t) = call.args().nth(1).as_ref().and_then(inet_target) {
                    self.seen.connects.insert(t);
                }
            }
            name => {
                // The path extraction of a failed call serves a successful one as well.
                let d = Denial::from_call(event, call, "", "");
                if d.paths.is_empty() || !is_write_intent(name, d.flags.as_deref()) {
                    return;
                }
                let paths = match name {
                    "symlink" | "symlinkat" => &d.paths[1..],
                    _ => &d.paths[..],
                };
                for p in paths {
                    if let Some((canon, _)) = self.classifier.resolve(d.pid, p)
                        && !self.classifier.private_tmp(&canon)
                        && !sandbox_owned(&canon)
                    {
                        self.seen.written.insert(canon);
                    }
                }
            }
        }
    }
}

/// `paddock learn`.
/// `signals` is the binary's signal pipe: what it catches goes on to the task, politely.
pub fn learn(
    args: &LearnArgs,
    signals: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
) -> Result<u8> {
    // Locked before resolution (see `commands::run`).
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create()
        .context("cannot create the task's runtime directory")?;
    let foreign =
        paddock_linux_bwrap::runtime::runtime_dir::sweep_stale(Some(runtime.path().as_path()));
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let project = match &args.project {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => cwd.join(p),
        None => cwd.clone(),
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .ok_or_else(|| anyhow!("HOME is not set to an absolute path"))?;
    let mut policy = default_policy();
    // Unix sockets are allowed and observed: the filter's refusal would stop many tools
    // (Rust's process spawning uses a datagram socket pair) before they show their needs.
    policy.allow.unix_sockets = Entry::new(UnixSocketsRule::All, Origin::flag("paddock learn"));
    if args.network {
        policy.allow.network = Entry::new(NetworkRule::On, Origin::flag("--network"));
    }
    let env: Vec<_> = std::env::vars_os().collect();
    let ctx = Context::new(project, home).with_env(env);
    let own = Some(runtime.path().as_path());
    let (resolved, _) =
        paddock_linux_bwrap::runtime::runtime_dir::resolve_settled(own, foreign, |foreign| {
            resolve(
                &policy,
                &ctx,
                &paddock_linux_bwrap::runtime::host::CachedHost::with_foreign(foreign),
            )
        })?;
    // Before the spawn, as `paddock run` does: what it binds stays while it lives.
    let uses =
        runtime.record_uses_of(&resolved).context("cannot write the task's runtime directory")?;
    let facts = paddock_linux_bwrap::probe::facts();
    let strace = facts.strace.as_ref().and_then(AbsPathBuf::new_lexical).ok_or_else(|| {
        anyhow!("paddock learn needs strace; install it (`sudo apt install strace`) and run `paddock check`")
    })?;
    let task_cwd = paddock_policy::canonicalize(&RealHost, &cwd)?.0;
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no program to run; write it after `--`")
    };
    let task = Task {
        program: program.clone(),
        args: rest.to_vec(),
        cwd: task_cwd.clone(),
        runtime_dir: runtime.path().clone(),
        observe: false,
    };
    let plan = paddock_linux_bwrap::LinuxBwrap.plan(&resolved, &task, &facts)?;
    let preexisting: Vec<std::ffi::OsString> = std::fs::read_dir(resolved.project_dir.as_path())
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
        .unwrap_or_default();
    let learner = |classifier| Learner {
        classifier,
        seen: Learned { preexisting: preexisting.iter().cloned().collect(), ..Learned::default() },
    };
    // No bridges: learning runs on the default policy, network off or on.
    let mut opts = RunOptions {
        uses,
        supervisor_nolibc: facts.supervisor_nolibc_exe.clone(),
        ..RunOptions::new().context("cannot prepare the run")?
    };
    if let Some((read, write)) = signals {
        opts.control = paddock_linux_bwrap::runtime::supervise::Control::from_pipe(read, write);
    }
    let dir = Some(runtime.path().as_path());
    // strace attached to the supervisor (bwrap's setup untraced), else strace around bwrap.
    let attached = if crate::cli::commands::toggles_from_env().strace_attach {
        let observer = |pid| {
            learner(
                Classifier::new(resolved.clone(), RealHost, task_cwd.as_path())
                    .gated_on_supervisor(pid),
            )
        };
        paddock_linux_bwrap::runtime::attach::run_observed(&plan, &strace, observer, &opts, dir)?
    } else {
        None
    };
    let (outcome, learner) = match attached {
        Some(a) if a.tracer_died => bail!("strace ended before the task did; nothing was learned"),
        Some(a) => (a.outcome, a.observer),
        None => {
            let traced = wrap(plan, &TraceOptions { strace, seccomp_bpf: false });
            let (write, reader) = Reader::start(learner(
                Classifier::new(resolved.clone(), RealHost, task_cwd.as_path())
                    .gated(paddock_linux_bwrap::SUPERVISOR_PATH.as_bytes()),
            ))?;
            let outcome = run_plan_with(&traced.plan, &opts, dir, vec![(write, traced.fd)])?;
            let finished = reader.finish();
            if finished.as_ref().is_some_and(|f| f.stopped_stuck_tracer) {
                bail!(
                    "bubblewrap failed and left a process behind that strace kept waiting for; strace was stopped and nothing was learned"
                );
            }
            (outcome, finished.map(|f| f.observer))
        }
    };
    drop(runtime);
    if !outcome.started {
        bail!("the task did not start under strace (the message above says why); nothing learned");
    }
    let learner = learner.ok_or_else(|| anyhow!("the trace did not end with the task"))?;
    let text = propose(&learner.seen, &resolved, &RealHost, &args.command, outcome.exit_code);
    match &args.output {
        Some(file) => {
            std::fs::write(file, &text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            eprintln!(
                "paddock: learned from a run that exited {}; proposed policy written to {}",
                outcome.exit_code,
                file.display()
            );
        }
        None => {
            std::io::stdout().write_all(text.as_bytes())?;
        }
    }
    Ok(u8::try_from(outcome.exit_code.clamp(0, 255)).unwrap_or(125))
}
