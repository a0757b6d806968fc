//! The subcommands: `run`, `plan` and `check`, composed from the library crates.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use paddock_policy::{
    AbsPathBuf, Backend, DomainPattern, HostFacts, NetworkPolicy, SpawnPlan, Task, cwd_hint,
    summarize,
};
use serde::Serialize;

use crate::args::{BackendArg, CheckArgs, PlanArgs, PolicyArgs, RunArgs};
use crate::load::{Loaded, load};
use crate::report::RunReport;

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
    let runtime_dir = paddock_linux_bwrap::runtime::runtime_dir::planned_path();
    let facts = facts_for(args.policy.backend);
    let mut t = task(&loaded, &command, runtime_dir)?;
    t.observe =
        paddock_linux_bwrap::runtime::observe::choose(itemize_mode(&args.policy, &loaded)?, &facts)
            .0
            .observes();
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
    Ok(paddock_linux_bwrap::runtime::hardlinks::print(&findings))
}

/// `paddock check`.
pub fn check(args: &CheckArgs) -> Result<u8> {
    if let Some(dir) = &args.project {
        return check_project(args, dir);
    }
    #[cfg(target_os = "linux")]
    {
        use paddock_linux_bwrap::probe::Status;
        let report = &paddock_linux_bwrap::probe::probe().report;
        if args.json {
            println!("{}", serde_json::to_string_pretty(report)?);
        } else {
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
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        bail!("`paddock check` probes Linux hosts; on macOS run `cargo xtask test-macos`")
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

/// Runs the plan itemized by `mechanism`. When the observers cannot start, the task runs
/// once, planned again without them, itemized by strace if it is here.
#[allow(clippy::too_many_arguments)]
fn run_itemized(
    mechanism: paddock_linux_bwrap::runtime::observe::Mechanism,
    plan: &SpawnPlan,
    loaded: &Loaded,
    t: &Task,
    facts: &HostFacts,
    args: &RunArgs,
    opts: &paddock_linux_bwrap::runtime::supervise::RunOptions,
    runtime: &paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir,
) -> Result<paddock_linux_bwrap::runtime::strace::Ran> {
    use paddock_linux_bwrap::runtime::observe::Mechanism as M;
    use std::borrow::Cow;
    let dir = Some(runtime.path().as_path());
    let (plan, trace) = match mechanism {
        M::Observe => {
            if let Some(ran) =
                paddock_linux_bwrap::runtime::observe::run(plan, &loaded.resolved, opts, dir)?
            {
                return Ok(ran);
            }
            // What `auto` picks on a host without the observers.
            let (trace, _) = paddock_linux_bwrap::runtime::strace::choose(
                paddock_policy::ItemizeMode::Auto,
                facts,
            );
            eprintln!(
                "paddock: note: {}",
                if trace.is_some() {
                    "itemizing with strace instead"
                } else {
                    "denials are enforced but not itemized"
                }
            );
            let t = Task { observe: false, ..t.clone() };
            (Cow::Owned(backend(args.policy.backend).plan(&loaded.resolved, &t, facts)?), trace)
        }
        M::Strace(o) => (Cow::Borrowed(plan), Some(o)),
        M::Off => (Cow::Borrowed(plan), None),
    };
    let run = paddock_linux_bwrap::runtime::strace::Run {
        plan: &plan,
        policy: &loaded.resolved,
        cwd: &loaded.cwd,
        opts,
        runtime_dir: dir,
    };
    Ok(paddock_linux_bwrap::runtime::strace::run(run, trace.as_ref())?)
}

/// A bwrap started now for the run's plan ([`paddock_linux_bwrap::runtime::prespawn`]), when the flag or
/// `PADDOCK_ITEMIZE` says the run is not itemized or is itemized by strace attached to the
/// supervisor (the observers and strace around bwrap spawn it their own way), and bwrap is
/// here. `None` otherwise, or when it cannot be started (the spawn then says why).
fn prespawn_for(args: &PolicyArgs) -> Option<paddock_linux_bwrap::runtime::prespawn::Prespawned> {
    // One started from the raw command line, before it was parsed: the one this run uses
    // when the parsed one wants one (and it is the bwrap the probe found), else killed.
    let early = paddock_linux_bwrap::runtime::prespawn::take_early();
    if args.backend == Some(BackendArg::MacosSeatbelt) {
        return None;
    }
    let mode = args.itemize.map(paddock_policy::ItemizeMode::from).or_else(itemize_env);
    if !prespawns(mode) {
        return None;
    }
    let bwrap = paddock_linux_bwrap::probe::facts().bwrap.and_then(AbsPathBuf::new_lexical)?;
    match early {
        Some(pre) if pre.program() == &bwrap => Some(pre),
        _ => paddock_linux_bwrap::runtime::prespawn::Prespawned::start(&bwrap).ok(),
    }
}

/// `PADDOCK_ITEMIZE`, when it names a mode.
fn itemize_env() -> Option<paddock_policy::ItemizeMode> {
    std::env::var(ITEMIZE_ENV).ok().as_deref().and_then(paddock_policy::ItemizeMode::parse)
}

/// Whether a run itemized by `mode` (the flag's or the environment's) spawns bwrap plainly,
/// so that it may be started before the plan: not itemized, or by strace attached to the
/// supervisor.
fn prespawns(mode: Option<paddock_policy::ItemizeMode>) -> bool {
    use paddock_policy::ItemizeMode;
    match mode {
        Some(ItemizeMode::Off) => true,
        Some(ItemizeMode::Strace) => paddock_linux_bwrap::runtime::attach::enabled(),
        _ => false,
    }
}

/// Starts bwrap from the raw command line, before clap has parsed it (0.1-0.2 ms sooner),
/// when it is a `paddock run` that prespawns ([`prespawns`]): `--itemize MODE` (or
/// `--itemize=MODE`) before `--`, else `PADDOCK_ITEMIZE`. A guess only: [`prespawn_for`]
/// decides from the parsed arguments and kills it when it guessed wrong (the bwrap waiting
/// for its setup never sees any).
#[cfg(target_os = "linux")]
pub fn prespawn_early(argv: &[std::ffi::OsString]) {
    if prespawns(early_itemize_mode(argv, itemize_env))
        && let Some(bwrap) = paddock_linux_bwrap::probe::trusted_bwrap()
    {
        paddock_linux_bwrap::runtime::prespawn::start_early(&bwrap);
    }
}

/// The itemizing mode a raw `paddock run` command line asks for (see [`prespawn_early`]),
/// `env` when it gives none; `None` for any other command, or another backend's run.
fn early_itemize_mode(
    argv: &[std::ffi::OsString],
    env: impl FnOnce() -> Option<paddock_policy::ItemizeMode>,
) -> Option<paddock_policy::ItemizeMode> {
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
    match flag {
        Some(value) => paddock_policy::ItemizeMode::parse(value),
        None => env(),
    }
}

/// `paddock run`.
pub fn run(args: &RunArgs) -> Result<u8> {
    // bwrap first, waiting for its arguments, when the way the run itemizes is known to
    // spawn it plainly: its start-up then overlaps everything up to the spawn.
    let prespawned = prespawn_for(&args.policy);
    // Locked before resolution: a run that may take another's placeholder for the user's
    // file is then alive when that run decides whether to remove it
    // (`runtime_dir::release_placeholders`).
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create_with_tmp(false)
        .with_context(|| {
            format!(
                "cannot create the task's runtime directory under {} (`paddock check` says why)",
                paddock_linux_bwrap::runtime::runtime_dir::base().display()
            )
        })?;
    // Sweep before resolution: a killed run's placeholders should be gone before resolution
    // looks at the project, or they would be taken for the user's own files.
    let own = Some(runtime.path().as_path());
    let foreign = paddock_linux_bwrap::runtime::runtime_dir::sweep_stale(own);
    let loaded =
        paddock_linux_bwrap::runtime::runtime_dir::resolve_settled(own, foreign, |foreign| {
            crate::load::load_with(&args.policy, foreign)
        })?;
    for n in &loaded.notes {
        eprintln!("paddock: note: {n}");
    }
    let facts = facts_for(args.policy.backend);
    // `tmp/` only when the plan mounts the task's tmp there (a grant covers /tmp).
    if !loaded.resolved.private_tmp {
        runtime.make_tmp().context("cannot create the task's tmp directory")?;
    }
    let (mechanism, itemize_note) =
        paddock_linux_bwrap::runtime::observe::choose(itemize_mode(&args.policy, &loaded)?, &facts);
    let mut t = task(&loaded, &args.command, runtime.path().clone())?;
    t.observe = mechanism.observes();
    let plan = backend(args.policy.backend).plan(&loaded.resolved, &t, &facts)?;
    for d in &plan.diagnostics {
        eprintln!("paddock: {d}");
    }
    // Before the spawn: placeholders of other runs among these must outlive this run.
    runtime
        .record_uses_of(&loaded.resolved)
        .context("cannot write the task's runtime directory")?;
    // Host ends of port grants and the egress proxy: a busy port fails here, before the
    // task starts. They stop with the task (or with this process: the sweep takes sockets).
    let bridges =
        paddock_linux_bwrap::runtime::host_bridges::Bridges::start(&plan, &loaded.resolved)?;
    let timeout = match args.timeout {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--timeout {s}: give a positive number of seconds"),
        None => None,
    };
    let opts = paddock_linux_bwrap::runtime::supervise::RunOptions {
        timeout,
        grace: Duration::from_secs(2),
        capture: false,
        inherit: bridges.inherited(),
        prespawned: paddock_linux_bwrap::runtime::prespawn::PrespawnSlot::new(prespawned),
    };
    if let Some(note) = itemize_note {
        eprintln!("paddock: note: {note}");
    }
    let links = paddock_linux_bwrap::runtime::links::ProtectedLinks::record(&loaded.resolved);
    let ran = run_itemized(mechanism, &plan, &loaded, &t, &facts, args, &opts, &runtime)?;
    for line in links.changed() {
        eprintln!("paddock: warning: {line}");
    }
    // The proxy itemizes refused destinations whether or not a tracer ran.
    let proxied = bridges.has_proxy();
    let refused = bridges.stop(&loaded.resolved);
    drop(runtime);
    for line in paddock_linux_bwrap::runtime::appeared::appeared(&loaded.resolved) {
        eprintln!("paddock: note: {line}");
    }
    let (outcome, itemized_by) = (ran.outcome, ran.itemized_by.or(proxied.then_some("proxy")));
    let mut reported = ran.violations;
    reported.extend(refused);
    // What the task created that git or a shell would run: the walk again, through its
    // cache (only the directories that changed are listed).
    if let Some(scanned) = &loaded.scanned {
        let (created, lines) = paddock_linux_bwrap::runtime::project_walk::after_run(scanned);
        reported.extend(created);
        for line in lines {
            eprintln!("paddock: {line}");
        }
    }
    for line in summarize(&reported, &loaded.resolved) {
        eprintln!("paddock: {line}");
    }
    if let Some(hint) = cwd_hint(&loaded.resolved, &loaded.cwd, outcome.exit_code, reported.len()) {
        eprintln!("paddock: hint: {hint}");
    }
    if outcome.timed_out {
        eprintln!(
            "paddock: the task ran past --timeout {}s and was killed",
            args.timeout.unwrap_or_default()
        );
    }
    let code = if outcome.timed_out {
        EXIT_TIMEOUT
    } else {
        u8::try_from(outcome.exit_code.clamp(0, 255)).unwrap_or(EXIT_PADDOCK_ERROR)
    };
    if let Some(path) = &args.report {
        let report = RunReport {
            exit_code: i32::from(code),
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            itemized: itemized_by.is_some(),
            itemized_by,
            cpu_ms: u64::try_from(outcome.cpu_time.as_millis()).unwrap_or(u64::MAX),
            max_rss_kib: outcome.max_rss_kib,
            violations: reported,
        };
        report.write(path)?;
    }
    Ok(code)
}

/// Dispatches a parsed command line.
pub fn dispatch(cli: &crate::args::Cli) -> Result<u8> {
    match &cli.command {
        crate::args::Command::Run(a) => run(a),
        crate::args::Command::Plan(a) => plan(a),
        crate::args::Command::Check(a) => check(a),
        #[cfg(target_os = "linux")]
        crate::args::Command::Learn(a) => crate::learn::learn(a),
        #[cfg(not(target_os = "linux"))]
        crate::args::Command::Learn(_) => bail!("`paddock learn` needs strace and runs on Linux"),
    }
}

#[cfg(test)]
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
        assert_eq!(mode(&["run", "--itemize", "off", "--", "true"], None), Some(ItemizeMode::Off));
        assert_eq!(
            mode(&["run", "-C", "p", "--itemize=off", "true"], None),
            Some(ItemizeMode::Off)
        );
        assert_eq!(mode(&["run", "--", "x", "--itemize", "off"], None), None, "the task's own");
        assert_eq!(mode(&["run", "--", "x"], Some(ItemizeMode::Off)), Some(ItemizeMode::Off));
        assert_eq!(
            mode(&["run", "--itemize", "observe", "--", "x"], Some(ItemizeMode::Off)),
            Some(ItemizeMode::Observe)
        );
        assert_eq!(mode(&["plan", "--itemize", "off", "--", "x"], None), None);
        let seatbelt = ["run", "--backend", "macos-seatbelt", "--itemize", "off", "--", "x"];
        assert_eq!(mode(&seatbelt, None), None);
        assert!(prespawns(Some(ItemizeMode::Off)) && !prespawns(Some(ItemizeMode::Observe)));
    }
}
