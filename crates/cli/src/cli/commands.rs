//! The subcommands: `run`, `plan` and `check`, composed from the library crates.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use paddock_policy::{
    AbsPathBuf, Backend, DomainPattern, HostFacts, NetworkPolicy, SpawnPlan, Task,
};
use serde::Serialize;

use crate::cli::args::{BackendArg, CheckArgs, PlanArgs, PolicyArgs, RunArgs};
use crate::cli::load::{Loaded, load};

/// Exit status for paddock's own errors (bad config, sandbox unavailable).
pub const EXIT_PADDOCK_ERROR: u8 = 125;
/// Exit status when the task was killed for running past `--timeout`.
pub const EXIT_TIMEOUT: u8 = 124;

fn backend(choice: Option<BackendArg>) -> Box<dyn Backend> {
    let default =
        if cfg!(target_os = "macos") { BackendArg::MacosSeatbelt } else { BackendArg::LinuxBwrap };
    match choice.unwrap_or(default) {
        BackendArg::LinuxBwrap => Box::new(paddock_linux_bwrap::LinuxBwrap),
        BackendArg::MacosSeatbelt => Box::new(paddock_macos_seatbelt::MacosSeatbelt),
    }
}

/// The host facts for planning: probed on the OS the backend runs on; on another OS (a
/// macOS plan printed on Linux) the facts a typical host of that OS has.
fn facts_for(choice: Option<BackendArg>) -> HostFacts {
    #[cfg(target_os = "linux")]
    if choice != Some(BackendArg::MacosSeatbelt) {
        return paddock_linux_bwrap::probe::facts();
    }
    let _ = choice;
    HostFacts { sandbox_exec: true, self_exe: std::env::current_exe().ok(), ..HostFacts::default() }
}

fn task(loaded: &Loaded, command: &[std::ffi::OsString], runtime_dir: AbsPathBuf) -> Result<Task> {
    let Some((program, args)) = command.split_first() else {
        bail!("no program to run; write it after `--`")
    };
    Ok(Task {
        program: program.clone(),
        args: args.to_vec(),
        cwd: loaded.cwd.clone(),
        runtime_dir,
        observe: false,
    })
}

#[derive(Serialize)]
struct PlanOutput<'a> {
    config: Option<&'a std::path::Path>,
    policy: &'a paddock_policy::ResolvedPolicy,
    notes: &'a [String],
    plan: &'a SpawnPlan,
}

/// `paddock plan`.
pub fn plan(args: &PlanArgs) -> Result<u8> {
    let loaded = load(&args.policy)?;
    let command = if args.command.is_empty() { vec!["true".into()] } else { args.command.clone() };
    let facts = facts_for(args.policy.backend);
    let mut t = task(&loaded, &command, planned_runtime_dir())?;
    t.observe = observes(itemize_mode(&args.policy, &loaded)?, &facts);
    let plan = backend(args.policy.backend).plan(&loaded.resolved, &t, &facts)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let output = PlanOutput {
            config: loaded.config.as_deref(),
            policy: &loaded.resolved,
            notes: &loaded.notes,
            plan: &plan,
        };
        serde_json::to_writer_pretty(&mut out, &output)?;
        writeln!(out)?;
    } else {
        print_plan_text(&mut out, &loaded, &plan)?;
    }
    Ok(0)
}

fn print_plan_text(out: &mut dyn Write, loaded: &Loaded, plan: &SpawnPlan) -> Result<()> {
    let r = &loaded.resolved;
    match &loaded.config {
        Some(c) => writeln!(out, "config: {}", c.display())?,
        None => writeln!(out, "config: built-in default policy")?,
    }
    writeln!(out, "project: {}", r.project_dir)?;
    writeln!(out, "writable:")?;
    for w in &r.write {
        writeln!(out, "  {} ({})", w.path, w.origin)?;
    }
    writeln!(out, "hidden:")?;
    for a in &r.read_deny {
        let missing = if a.kind.is_none() { " [missing: masked on a placeholder]" } else { "" };
        writeln!(out, "  {} ({}){missing}", a.path, a.origin)?;
        for e in &a.exceptions {
            writeln!(out, "    except {}{}", e.path, if e.writable { " (writable)" } else { "" })?;
        }
    }
    writeln!(out, "protected (read-only inside write grants):")?;
    for p in &r.protected {
        writeln!(out, "  {} [{}]", p.path, p.rule)?;
    }
    if !r.pinned.is_empty() {
        writeln!(
            out,
            "pinned (cannot be renamed or removed: above protected paths and deny entries):"
        )?;
        for p in &r.pinned {
            writeln!(out, "  {p}")?;
        }
    }
    writeln!(out, "network: {}", serde_json::to_string(&r.network)?)?;
    if let NetworkPolicy::Filtered { allow, deny } = &r.network {
        // A name without a port grants the web ports only: say which ports each grant has.
        let granted: Vec<String> = allow.iter().map(DomainPattern::describe_grant).collect();
        writeln!(out, "  through the proxy to: {}", granted.join(", "))?;
        if !deny.is_empty() {
            let refused: Vec<String> = deny.iter().map(ToString::to_string).collect();
            writeln!(out, "  refused (every port unless one is named): {}", refused.join(", "))?;
        }
    }
    writeln!(out, "unix sockets: {}", serde_json::to_string(&r.unix_sockets)?)?;
    for b in &plan.bridges {
        writeln!(out, "bridge: {}", serde_json::to_string(b)?)?;
    }
    for n in &loaded.notes {
        writeln!(out, "note: {n}")?;
    }
    for d in &plan.diagnostics {
        writeln!(out, "plan: {d}")?;
    }
    if let Some(o) = &plan.observer {
        writeln!(
            out,
            "itemize: observe ({} directory anchors and {} files served by the observer)",
            o.anchors.len(),
            o.files.len()
        )?;
    }
    writeln!(out, "backend: {} ({})", plan.backend, plan.program)?;
    Ok(())
}

/// `paddock check --project`: the project under its policy (hard links out of deny
/// anchors); 1 when a hidden file is linked elsewhere in it.
fn check_project(args: &CheckArgs, dir: &std::path::Path) -> Result<u8> {
    let dir = std::fs::canonicalize(dir)
        .with_context(|| format!("--project {}: not a directory to check", dir.display()))?;
    let policy_args =
        PolicyArgs { project: Some(dir), config: args.config.clone(), ..PolicyArgs::default() };
    let loaded = load(&policy_args)?;
    let findings = paddock_linux_bwrap::runtime::hardlinks::find(
        &loaded.resolved,
        paddock_linux_bwrap::runtime::hardlinks::MAX_WALK,
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
        return Ok(u8::from(!findings.linked.is_empty()));
    }
    for n in &loaded.notes {
        println!("note {:<18} {n}", "policy");
    }
    for line in paddock_linux_bwrap::runtime::hardlinks::lines(&findings) {
        println!("{line}");
    }
    Ok(u8::from(!findings.linked.is_empty()))
}

/// `paddock check`.
pub fn check(args: &CheckArgs) -> Result<u8> {
    if let Some(dir) = &args.project {
        return check_project(args, dir);
    }
    #[cfg(target_os = "linux")]
    let report = paddock_linux_bwrap::probe::probe().report;
    #[cfg(target_os = "macos")]
    let report = macos_check();
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let report = {
        let mut report = paddock_policy::CheckReport::default();
        report.push(
            "platform",
            paddock_policy::Status::Fail,
            format!("paddock sandboxes tasks on Linux and macOS, not on {}", std::env::consts::OS),
            Some("`paddock plan` shows the plans of both backends here"),
        );
        report
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        use paddock_policy::Status;
        for c in &report.checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            println!("{mark} {:<18} {}", c.name, c.message);
            if let Some(fix) = c.fix.as_ref().filter(|_| c.status != Status::Ok) {
                println!("     {:<18} fix: {fix}", "");
            }
        }
    }
    Ok(if report.ok() { 0 } else { 1 })
}

/// The macOS checks: `sandbox-exec` present, this process not sandboxed already, a profile
/// applied, a real sandboxed `true` under the default policy, `log stream` readable.
#[cfg(target_os = "macos")]
fn macos_check() -> paddock_policy::CheckReport {
    use paddock_macos_seatbelt::run::check::{
        CheckOptions, SandboxedTrue, check_rest, check_sandbox,
    };
    let opts = CheckOptions::default();
    let mut report = check_sandbox(&opts);
    let tried = if report.ok() { sandboxed_true() } else { SandboxedTrue::NotTried };
    check_rest(&mut report, &opts, &tried);
    report
}

/// `true` run by the library under the default policy, in a scratch project of its own.
#[cfg(target_os = "macos")]
fn sandboxed_true() -> paddock_macos_seatbelt::run::check::SandboxedTrue {
    use paddock_macos_seatbelt::run::check::SandboxedTrue;
    let project = std::env::temp_dir().join(format!("paddock-check-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&project) {
        return SandboxedTrue::Failed(format!("cannot create {}: {e}", project.display()));
    }
    let ran = crate::Sandbox::builder(&project)
        .itemize(paddock_policy::ItemizeMode::Off)
        .build()
        .and_then(|sandbox| {
            sandbox.run(
                crate::Command::new("/usr/bin/true")
                    .stdin(crate::Stdio::null())
                    .stdout(crate::Stdio::null())
                    .stderr(crate::Stdio::piped()),
            )
        });
    let _ = std::fs::remove_dir_all(&project);
    match ran {
        Ok(out) => SandboxedTrue::Exited(out.report.exit_code),
        Err(e) => SandboxedTrue::Failed(e.to_string()),
    }
}

/// The environment variable that sets the itemizing mode when `--itemize` is not given; it
/// overrides the config's `report.itemize` (a run-time choice of the person running, like the
/// flag). Itemizing never changes what is enforced.
pub const ITEMIZE_ENV: &str = "PADDOCK_ITEMIZE";

/// `--itemize`, else `PADDOCK_ITEMIZE`, else the config's `report.itemize`.
fn itemize_mode(args: &PolicyArgs, loaded: &Loaded) -> Result<paddock_policy::ItemizeMode> {
    if args.itemize.is_some() {
        return Ok(loaded.resolved.report.itemize);
    }
    match std::env::var_os(ITEMIZE_ENV) {
        None => Ok(loaded.resolved.report.itemize),
        Some(v) if v.is_empty() => Ok(loaded.resolved.report.itemize),
        Some(v) => v.to_str().and_then(paddock_policy::ItemizeMode::parse).with_context(|| {
            format!("{ITEMIZE_ENV}={}: use auto, observe, strace or off", v.to_string_lossy())
        }),
    }
}

/// `PADDOCK_OBSERVERS=0` treats the observers as unavailable: `auto` then uses strace, as
/// on a host without FUSE (to compare the two, or where the observers misbehave).
pub const OBSERVERS_ENV: &str = "PADDOCK_OBSERVERS";
/// `PADDOCK_STRACE_ATTACH=0` runs bwrap under strace in the `strace` mode too, as
/// `--seccomp-bpf` tracing always does: to compare the two, or where attaching misbehaves.
pub const ATTACH_ENV: &str = "PADDOCK_STRACE_ATTACH";
/// `PADDOCK_STRACE_INSIDE=0` traces bwrap with `--seccomp-bpf`, as before strace ran inside
/// the sandbox: to compare the two, or where running strace inside misbehaves.
pub const INSIDE_ENV: &str = "PADDOCK_STRACE_INSIDE";

/// The itemizing strategies the `PADDOCK_*` variables leave on.
pub fn toggles_from_env() -> crate::Toggles {
    let on = |name: &str| std::env::var_os(name).is_none_or(|v| v != "0");
    crate::Toggles {
        observers: on(OBSERVERS_ENV),
        strace_attach: on(ATTACH_ENV),
        strace_inside: on(INSIDE_ENV),
    }
}

/// Where a plan printed by `paddock plan` says the runtime dir will be.
fn planned_runtime_dir() -> AbsPathBuf {
    #[cfg(target_os = "linux")]
    return paddock_linux_bwrap::runtime::runtime_dir::planned_path();
    #[cfg(not(target_os = "linux"))]
    AbsPathBuf::new_lexical("/tmp/paddock-runtime").unwrap_or_else(|| unreachable!())
}

/// Whether a run itemized by `mode` on this host uses the observers.
fn observes(mode: paddock_policy::ItemizeMode, facts: &HostFacts) -> bool {
    #[cfg(target_os = "linux")]
    return paddock_linux_bwrap::runtime::observe::choose(mode, facts, toggles_from_env())
        .0
        .observes();
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (mode, facts);
        false
    }
}

/// A bwrap started now for the run's plan
/// ([`paddock_linux_bwrap::runtime::prespawn`]), when bwrap is here and the run will spawn it
/// in a way that can wait for the plan: not itemized, or itemized by strace attached to the
/// supervisor (the flag's or `PADDOCK_ITEMIZE`'s mode), or by the observers (that mode, or
/// none given: the config's, `auto` unless it says otherwise, observes where the host can),
/// in a namespace of its own. strace around bwrap spawns it its own way. `early` is the one
/// started from the raw command line: used when it is the one wanted, else killed. `None`
/// otherwise, or when it cannot be started (the spawn then says why). A guess the config
/// proves wrong costs a bwrap started and killed on another CPU.
#[cfg(target_os = "linux")]
fn prespawn_for(
    args: &PolicyArgs,
    facts: &HostFacts,
    early: Option<Prespawned>,
) -> Option<Prespawned> {
    if args.backend == Some(BackendArg::MacosSeatbelt) {
        return None;
    }
    let mode = args.itemize.map(paddock_policy::ItemizeMode::from).or_else(itemize_env);
    let kind = PrespawnKind::for_run(mode, toggles_from_env(), facts)?;
    let bwrap = facts.bwrap.as_deref().and_then(AbsPathBuf::new_lexical)?;
    match early {
        Some(pre) if pre.program() == &bwrap && pre.is_observed() == kind.observed() => Some(pre),
        _ => start(kind, &bwrap, args.network.as_deref() != Some("on")),
    }
}

/// `PADDOCK_ITEMIZE`, when it names a mode.
#[cfg(target_os = "linux")]
fn itemize_env() -> Option<paddock_policy::ItemizeMode> {
    std::env::var(ITEMIZE_ENV).ok().as_deref().and_then(paddock_policy::ItemizeMode::parse)
}

/// A bwrap started before the plan exists.
#[cfg(target_os = "linux")]
pub type Prespawned = paddock_linux_bwrap::runtime::prespawn::Prespawned;

#[cfg(target_os = "linux")]
use paddock_linux_bwrap::runtime::prespawn::PrespawnKind;

/// Starts bwrap from the raw command line, before clap has parsed it (0.1-0.2 ms sooner),
/// when it is a `paddock run` that prespawns (`PrespawnKind::for_mode`): `--itemize MODE` (or
/// `--itemize=MODE`) before `--`, else `PADDOCK_ITEMIZE`. A guess only: `prespawn_for`
/// decides from the parsed arguments and kills it when it guessed wrong (the bwrap waiting
/// for its setup never sees any).
#[cfg(target_os = "linux")]
pub fn prespawn_early(argv: &[std::ffi::OsString]) -> Option<Prespawned> {
    let mode = early_itemize_mode(argv, itemize_env)?;
    // Before the host is probed: the observers need the FUSE device at least.
    let toggles = toggles_from_env();
    let kind = PrespawnKind::for_mode(mode, toggles, || {
        toggles.observers
            && nix::unistd::access(
                paddock_linux_bwrap::observe_fs::DEV_FUSE,
                nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
            )
            .is_ok()
    })?;
    let bwrap = paddock_linux_bwrap::probe::trusted_bwrap()?;
    start(kind, &bwrap, !early_host_network(argv))
}

/// Whether a raw `paddock run` command line may put the task on the host's network: its
/// bwrap then waits on the runner's network rather than in a namespace of its own, which such
/// a plan could not use. `--network` decides when given (`on`); else the config the run
/// will read (`-c FILE`, or `paddock.toml` in `-C DIR` or here) is looked at for the words
/// that say so (`network = true` in TOML, a `"*"` destination in sandbox-runtime JSON). A
/// guess: a config it misreads costs its run a bwrap spawned anew, never a wall.
#[cfg(target_os = "linux")]
fn early_host_network(argv: &[std::ffi::OsString]) -> bool {
    use std::path::PathBuf;
    let (mut network, mut project, mut config) = (None, None, None);
    let mut args = argv.iter().skip(2);
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else { continue };
        let mut value = |long: &str, short: Option<&str>| {
            if text == long || short.is_some_and(|s| text == s) {
                return args.next().cloned();
            }
            let attached = text.strip_prefix(long).and_then(|v| v.strip_prefix('='));
            let attached = attached.or_else(|| short.and_then(|s| text.strip_prefix(s)));
            attached.filter(|v| !v.is_empty()).map(std::ffi::OsString::from)
        };
        if text == "--" {
            break;
        } else if text.starts_with("--network") {
            network = value("--network", None);
        } else if text.starts_with("--project") || text.starts_with("-C") {
            project = value("--project", Some("-C")).map(PathBuf::from);
        } else if text.starts_with("--config") || text.starts_with("-c") {
            config = value("--config", Some("-c")).map(PathBuf::from);
        }
    }
    if let Some(network) = network {
        return network == "on";
    }
    let file = config.unwrap_or_else(|| project.unwrap_or_default().join("paddock.toml"));
    let Ok(text) = std::fs::read(&file) else { return false };
    let words: Vec<u8> = text.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
    let says = |needle: &[u8]| words.windows(needle.len()).any(|w| w == needle);
    says(b"network=true") || says(b"network\"=true") || says(b"network'=true") || says(b"\"*\"")
}

/// Starts `bwrap` of `kind` for a run whose streams are the binary's own; `None` when it
/// cannot be started (the spawn then says why).
#[cfg(target_os = "linux")]
fn start(kind: PrespawnKind, bwrap: &AbsPathBuf, private_network: bool) -> Option<Prespawned> {
    let inherit = paddock_linux_bwrap::runtime::exec::Output::INHERIT;
    let exe = std::env::current_exe().ok()?;
    let nolibc = paddock_linux_bwrap::probe::nolibc_supervisor_beside(&exe);
    let notifier = kind
        .observed()
        .then(|| nolibc.as_ref().and_then(|_| paddock_linux_bwrap::probe::supervisor_beside(&exe)))
        .flatten();
    let observed = kind.observed();
    let mut pre = Prespawned::start_for(
        bwrap,
        observed,
        inherit,
        notifier.as_deref(),
        nolibc.as_deref(),
        private_network,
    )
    .ok()?;
    // This process is all the runner's. Only an observed run's: its observer threads and
    // the child mounting in bwrap's namespace would take turns with bwrap's start-up, while
    // an untraced run's runner alone was slower pinned (ARCHITECTURE.md, "The `paddock`
    // binary keeps to its CPU").
    if kind.observed() {
        pre.keep_runner_off_bwraps_cpus();
    }
    Some(pre)
}

/// The itemizing mode a raw `paddock run` command line asks for (see [`prespawn_early`]),
/// `env` when it gives none (`Some(None)` when neither does: the config's); `None` for any
/// other command, or another backend's run.
#[cfg(target_os = "linux")]
fn early_itemize_mode(
    argv: &[std::ffi::OsString],
    env: impl FnOnce() -> Option<paddock_policy::ItemizeMode>,
) -> Option<Option<paddock_policy::ItemizeMode>> {
    if argv.get(1).is_none_or(|a| a != "run") {
        return None;
    }
    let mut flag = None;
    let mut args = argv[2..].iter().map(|a| a.to_str());
    while let Some(arg) = args.next() {
        match arg {
            Some("--") | None => break,
            Some("--itemize") => flag = args.next().flatten(),
            Some(a) if a.starts_with("--itemize=") => flag = a.strip_prefix("--itemize="),
            Some("--backend") if args.next().flatten() == Some("macos-seatbelt") => return None,
            _ => {}
        }
    }
    Some(match flag {
        Some(value) => paddock_policy::ItemizeMode::parse(value),
        None => env(),
    })
}

/// What the binary hands a `run`: the bwrap it started early, and the read end of its
/// signal pipe (one byte per SIGINT, SIGTERM or SIGHUP it caught; those it was started
/// with ignored it left ignored, and so does the task).
#[derive(Debug, Default)]
pub struct Start {
    /// A bwrap started from the raw command line.
    #[cfg(target_os = "linux")]
    pub prespawned: Option<Prespawned>,
    /// The binary's signal pipe: its read and write ends.
    pub signals: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
}

/// `paddock run`: a thin client of the library.
pub fn run(args: &RunArgs, start: Start) -> Result<u8> {
    if args.policy.backend == Some(BackendArg::MacosSeatbelt) && !cfg!(target_os = "macos") {
        bail!(
            "--backend macos-seatbelt runs on macOS; `paddock plan --backend macos-seatbelt` shows its profile here"
        );
    }
    #[cfg(target_os = "linux")]
    // The host's facts once, for the prespawn and the sandbox.
    #[cfg(target_os = "linux")]
    let facts = paddock_linux_bwrap::probe::facts();
    #[cfg(target_os = "linux")]
    let prespawned = prespawn_for(&args.policy, &facts, start.prespawned);
    let timeout = match args.timeout {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--timeout {s}: give a positive number of seconds"),
        None => None,
    };
    let source = crate::cli::load::source(&args.policy)?;
    for n in &source.notes {
        eprintln!("paddock: note: {n}");
    }
    let mut builder = crate::Sandbox::builder(&source.project)
        .policy(source.policy, source.config)
        .home(crate::cli::load::home()?)
        .toggles(toggles_from_env())
        .supervise_with_current_exe();
    #[cfg(target_os = "linux")]
    if facts.bwrap.is_some() {
        // Without bubblewrap the builder probes again, for the diagnosis.
        builder = builder.host_facts(facts);
    }
    // `--itemize` is in the policy already; the variable overrides the config, not the flag.
    if args.policy.itemize.is_none()
        && let Some(v) = std::env::var_os(ITEMIZE_ENV).filter(|v| !v.is_empty())
    {
        let mode = v.to_str().and_then(paddock_policy::ItemizeMode::parse).with_context(|| {
            format!("{ITEMIZE_ENV}={}: use auto, observe, strace or off", v.to_string_lossy())
        })?;
        builder = builder.itemize(mode);
    }
    let sandbox = builder.build()?;
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no program to run; write it after `--`")
    };
    let mut command = crate::Command::new(program);
    command.args(rest);
    // `-C DIR` is the task's directory too, as with `git -C` and `make -C`.
    command.current_dir(if args.policy.project.is_some() { &source.project } else { &source.cwd });
    if let Some(t) = timeout {
        command.timeout(t);
    }
    // On the calling thread, the binary's signal pipe as the run's control, notes printed
    // as they come (before the task's own output, most of them).
    #[cfg(target_os = "linux")]
    let extras = crate::Extras {
        prespawned,
        control_pipe: start.signals,
        on_note: Some(std::sync::Arc::new(|line: &str| eprintln!("paddock: {line}"))),
    };
    #[cfg(target_os = "macos")]
    let extras = crate::Extras {
        control_pipe: start.signals,
        on_note: Some(std::sync::Arc::new(|line: &str| eprintln!("paddock: {line}"))),
    };
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let extras = {
        let _ = start;
        crate::Extras::default()
    };
    let report = sandbox.run_with(&command, extras)?.report;
    for line in &report.summary {
        eprintln!("paddock: {line}");
    }
    if report.timed_out {
        eprintln!(
            "paddock: the task ran past --timeout {}s and was killed",
            args.timeout.unwrap_or_default()
        );
    }
    let code = if report.timed_out {
        EXIT_TIMEOUT
    } else {
        u8::try_from(report.exit_code.clamp(0, 255)).unwrap_or(EXIT_PADDOCK_ERROR)
    };
    if let Some(path) = &args.report {
        report
            .write_json(path)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    Ok(code)
}

/// Dispatches a parsed command line.
pub fn dispatch(cli: &crate::cli::args::Cli, start: Start) -> Result<u8> {
    match &cli.command {
        crate::cli::args::Command::Run(a) => run(a, start),
        crate::cli::args::Command::Plan(a) => plan(a),
        crate::cli::args::Command::Check(a) => check(a),
        #[cfg(target_os = "linux")]
        crate::cli::args::Command::Learn(a) => crate::cli::learn::learn(a, start.signals),
        #[cfg(not(target_os = "linux"))]
        crate::cli::args::Command::Learn(_) => {
            bail!("`paddock learn` needs strace and runs on Linux")
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod early_tests {
    use super::*;
    use paddock_policy::ItemizeMode;

    #[test]
    fn the_raw_command_line_is_read_as_clap_would_for_the_itemizing_mode() {
        let mode = |args: &[&str], env: Option<ItemizeMode>| {
            let argv: Vec<std::ffi::OsString> =
                std::iter::once("paddock").chain(args.iter().copied()).map(Into::into).collect();
            early_itemize_mode(&argv, || env)
        };
        let off = Some(Some(ItemizeMode::Off));
        assert_eq!(mode(&["run", "--itemize", "off", "--", "true"], None), off);
        assert_eq!(mode(&["run", "-C", "p", "--itemize=off", "true"], None), off);
        assert_eq!(
            mode(&["run", "--", "x", "--itemize", "off"], None),
            Some(None),
            "the task's own"
        );
        assert_eq!(mode(&["run", "--", "x"], Some(ItemizeMode::Off)), off);
        assert_eq!(
            mode(&["run", "--itemize", "observe", "--", "x"], Some(ItemizeMode::Off)),
            Some(Some(ItemizeMode::Observe))
        );
        assert_eq!(mode(&["plan", "--itemize", "off", "--", "x"], None), None);
        let seatbelt = ["run", "--backend", "macos-seatbelt", "--itemize", "off", "--", "x"];
        assert_eq!(mode(&seatbelt, None), None);
    }

    #[test]
    fn the_host_network_is_guessed_from_the_flag_then_the_config_the_run_reads() {
        let dir = std::env::temp_dir().join(format!("paddock-early-net-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("on")).unwrap();
        std::fs::create_dir_all(dir.join("listed")).unwrap();
        std::fs::write(dir.join("on/paddock.toml"), "[allow]\nnetwork   =  true\n").unwrap();
        std::fs::write(dir.join("listed/paddock.toml"), "[allow]\nnetwork = [\"a.example\"]\n")
            .unwrap();
        std::fs::write(dir.join("srt.json"), r#"{"network": {"allowedDomains": ["*"]}}"#).unwrap();
        let on = dir.join("on");
        let (on, listed) = (on.to_str().unwrap(), dir.join("listed"));
        let srt = dir.join("srt.json");
        let host = |args: &[&str]| {
            let argv: Vec<std::ffi::OsString> =
                std::iter::once("paddock").chain(args.iter().copied()).map(Into::into).collect();
            early_host_network(&argv)
        };
        assert!(host(&["run", "--network", "on", "--", "x"]));
        assert!(host(&["run", "--network=on", "--", "x"]));
        assert!(!host(&["run", "--network", "off", "-C", on, "--", "x"]), "the flag decides");
        assert!(host(&["run", "-C", on, "--", "x"]));
        assert!(host(&["run", &format!("--project={on}"), "--", "x"]));
        assert!(!host(&["run", "-C", listed.to_str().unwrap(), "--", "x"]), "the proxy's own");
        assert!(host(&["run", "-c", srt.to_str().unwrap(), "--", "x"]), "every destination");
        assert!(!host(&["run", "-C", dir.to_str().unwrap(), "--", "x"]), "no config");
        assert!(!host(&["run", "--", "x", "--network", "on"]), "the task's own");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
