//! From the command line to a resolved policy: config discovery, flags laid over the
//! config, resolution on the real filesystem.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, Result, anyhow, bail};
use paddock_policy::{
    AbsPathBuf, Context, DomainPattern, Entry, NetworkRule, Origin, PathSpec, Policy,
    ResolvedPolicy, UnixSocketsRule, default_policy, resolve,
};

use crate::cli::args::PolicyArgs;
use paddock_linux_bwrap::runtime::host::CachedHost;

/// A policy ready to plan from, with what the user should be told about it.
#[derive(Debug)]
pub struct Loaded {
    /// The resolved policy.
    pub resolved: ResolvedPolicy,
    /// Notes from conversion and resolution.
    pub notes: Vec<String>,
    /// The config file read, if any.
    pub config: Option<PathBuf>,
    /// The task's working directory (canonical).
    pub cwd: AbsPathBuf,
}

/// The policy of a command line before resolution: the config (or the default) with the
/// flags laid over it.
#[derive(Debug)]
pub struct Source {
    /// The project directory.
    pub project: PathBuf,
    /// The directory paddock was started in.
    pub cwd: PathBuf,
    /// The config file read, if any.
    pub config: Option<PathBuf>,
    /// The policy.
    pub policy: Policy,
    /// Notes from the config's conversion.
    pub notes: Vec<String>,
}

/// Finds and reads the config (or the default) and lays the flags over it.
pub fn source(args: &PolicyArgs) -> Result<Source> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let project = match &args.project {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => cwd.join(p),
        None => cwd.clone(),
    };
    let config = match &args.config {
        Some(c) => Some(if c.is_absolute() { c.clone() } else { cwd.join(c) }),
        None => Some(project.join("paddock.toml")).filter(|p| crate::config::is_config(p)),
    };
    let (mut policy, notes) = match &config {
        None => (default_policy(), Vec::new()),
        Some(file) => crate::config::read(file)?,
    };
    apply_flags(&mut policy, args)?;
    Ok(Source { project, cwd, config, policy, notes })
}

/// `HOME`, which `~` in a policy means.
pub fn home() -> Result<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()).ok_or_else(|| {
        anyhow!(
            "HOME is not set to an absolute path; set it so that `~` in a policy means something"
        )
    })
}

/// Reads the config (or the default), lays the flags over it and resolves it.
pub fn load(args: &PolicyArgs) -> Result<Loaded> {
    let Source { project, cwd, config, policy, mut notes } = source(args)?;
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let ctx = Context::new(project, home()?)
        .with_env(env)
        .with_config_files(config.clone().into_iter().collect());
    // One remembering host for the whole resolution: rules share their ancestors.
    let host = CachedHost::with_foreign(Vec::new());
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let (mut resolved, more) = resolve(&policy, &ctx, &host)?;
    notes.extend(more);
    // Nested repositories and protected names below the root, as a run finds them.
    #[cfg(target_os = "linux")]
    paddock_linux_bwrap::runtime::project_walk::scan(&policy, &mut resolved, &host, &mut notes)?;
    let cwd = paddock_policy::canonicalize(&host, &cwd)?.0;
    Ok(Loaded { resolved, notes, config, cwd })
}

fn apply_flags(policy: &mut Policy, args: &PolicyArgs) -> Result<()> {
    let spec = |p: &OsString, flag: &str| {
        if p.is_empty() || p.as_encoded_bytes().contains(&0) {
            bail!("{flag} needs a path");
        }
        Ok(Entry::new(
            PathSpec(p.clone()),
            Origin::flag(format!("{flag} {}", paddock_policy::DisplayBytes(p))),
        ))
    };
    for p in &args.allow_read {
        policy.allow.read.push(spec(p, "--allow-read")?);
    }
    for p in &args.allow_write {
        policy.allow.write.push(spec(p, "--allow-write")?);
    }
    for p in &args.deny_read {
        policy.deny.read.push(spec(p, "--deny-read")?);
    }
    if let Some(n) = &args.network {
        let origin = Origin::flag(format!("--network {n}"));
        let rule = match n.as_str() {
            "off" => NetworkRule::Off,
            "on" => NetworkRule::On,
            list => {
                let mut out = Vec::new();
                for item in list.split(',') {
                    let pattern = DomainPattern::parse(item).map_err(|m| {
                        anyhow!("--network: {item:?} is not a valid destination: {m}")
                    })?;
                    out.push(Entry::new(pattern, origin.clone()));
                }
                NetworkRule::Domains(out)
            }
        };
        policy.allow.network = Entry::new(rule, origin);
    }
    for port in &args.allow_local_port {
        policy
            .allow
            .local_ports
            .push(Entry::new(*port, Origin::flag(format!("--allow-local-port {port}"))));
    }
    for port in &args.allow_host_port {
        policy
            .allow
            .host_ports
            .push(Entry::new(*port, Origin::flag(format!("--allow-host-port {port}"))));
    }
    for p in &args.allow_unix_socket {
        let entry = spec(p, "--allow-unix-socket")?;
        match &mut policy.allow.unix_sockets.value {
            UnixSocketsRule::Paths(list) => list.push(entry),
            // Every socket is granted already.
            UnixSocketsRule::All => {}
            UnixSocketsRule::None => {
                policy.allow.unix_sockets =
                    Entry::new(UnixSocketsRule::Paths(vec![entry.clone()]), entry.origin);
            }
        }
    }
    if args.allow_write_home {
        policy.allow.write_home = true;
    }
    if args.allow_unix_sockets {
        policy.allow.unix_sockets =
            Entry::new(UnixSocketsRule::All, Origin::flag("--allow-unix-sockets"));
    }
    if let Some(mode) = args.itemize {
        policy.report.itemize = mode.into();
    }
    Ok(())
}
