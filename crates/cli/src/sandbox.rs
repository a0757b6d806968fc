//! [`Sandbox`] and its builder: a project, a policy and the host facts, ready to spawn any
//! number of tasks, from any thread.
//!
//! A sandbox is built once per policy: the config is read and checked here, so a bad one
//! fails at [`SandboxBuilder::build`], and the host is probed here, so a host that cannot
//! run sandboxes says so then. Each [`Sandbox::spawn`] resolves the policy again against
//! the filesystem as it is at that moment (files come and go between tasks).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use paddock_policy::{HostFacts, ItemizeMode, Policy, default_policy};

use crate::{Child, Command, Error};

/// The default of [`SandboxBuilder::capture_limit`]: 16 MiB per piped stream.
pub const DEFAULT_CAPTURE_LIMIT: usize = 16 << 20;

/// How to build a [`Sandbox`]: see [`Sandbox::builder`].
#[derive(Debug)]
pub struct SandboxBuilder {
    project: PathBuf,
    policy: Option<(Policy, Option<PathBuf>, Vec<String>)>,
    home: Option<PathBuf>,
    env: Option<Vec<(OsString, OsString)>>,
    itemize: Option<ItemizeMode>,
    toggles: paddock_linux_bwrap::runtime::Toggles,
    capture_limit: usize,
    grace: Duration,
    facts: Option<HostFacts>,
    supervisor: Supervisor,
    proxy: SharedProxy,
    prewarm: usize,
}

/// One egress proxy shared by every sandbox built with a clone of this handle
/// ([`SandboxBuilder::egress_proxy`]): started by the first task with a domain list,
/// stopped when the last such task ends, each task with its own rules and its own refusals.
/// Clones of one [`Sandbox`] always share one; sandboxes built without a handle of their own
/// each get theirs.
#[derive(Clone, Debug, Default)]
pub struct SharedProxy {
    pub(crate) inner: paddock_portbridge::SharedProxy,
}

impl SharedProxy {
    /// A handle on no proxy yet.
    pub fn new() -> SharedProxy {
        SharedProxy::default()
    }

    /// Whether the proxy runs now (a task uses it).
    pub fn running(&self) -> bool {
        self.inner.running()
    }
}

/// Which executable runs as each sandbox's pid 1.
#[derive(Clone, Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Supervisor {
    /// `paddock-supervisor` beside this program, else on `PATH`.
    Find,
    /// The one named.
    At(PathBuf),
    /// This program, re-executed (it handles paddock's hidden subcommands first thing).
    CurrentExe,
}

/// A policy for one project, ready to run tasks: `Send + Sync + Clone`, cheap to clone
/// (clones share everything), and holding nothing that needs cleaning up but its prewarmed
/// sandboxes ([`SandboxBuilder::prewarm`]), torn down with the last clone.
#[derive(Clone, Debug)]
pub struct Sandbox {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct Inner {
    pub(crate) project: PathBuf,
    pub(crate) policy: Policy,
    pub(crate) config: Option<PathBuf>,
    pub(crate) notes: Vec<String>,
    pub(crate) home: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) itemize: Option<ItemizeMode>,
    pub(crate) toggles: paddock_linux_bwrap::runtime::Toggles,
    pub(crate) capture_limit: usize,
    pub(crate) grace: Duration,
    pub(crate) facts: HostFacts,
    pub(crate) proxy: SharedProxy,
    /// The prewarmed sandboxes ([`SandboxBuilder::prewarm`]).
    #[cfg(target_os = "linux")]
    pub(crate) warm: crate::warm::Pool,
}

impl Sandbox {
    /// A builder for a sandbox of the project at `project` (its root: write grants, the
    /// protected names and the config's relative paths start there). Without a config the
    /// project's `paddock.toml` is read when there is one, else the default policy is used.
    pub fn builder(project: impl AsRef<Path>) -> SandboxBuilder {
        SandboxBuilder {
            project: project.as_ref().to_path_buf(),
            policy: None,
            home: None,
            env: None,
            itemize: None,
            toggles: paddock_linux_bwrap::runtime::Toggles::default(),
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            grace: Duration::from_secs(2),
            facts: None,
            supervisor: Supervisor::Find,
            proxy: SharedProxy::new(),
            prewarm: 0,
        }
    }

    /// Runs `command` in a sandbox of its own, under this sandbox's policy. Returns once the
    /// sandbox's process is started (or could not be), while the task runs.
    pub fn spawn(&self, command: &Command) -> Result<Child, Error> {
        crate::child::spawn(self, command, None)
    }

    /// Runs `command` to its end on this thread: what [`Sandbox::spawn`] then
    /// [`Child::wait_with_output`] give, without a thread of its own.
    pub fn run(&self, command: &Command) -> Result<crate::Output, Error> {
        crate::child::run_here(self, command, crate::child::Extras::default())
    }

    /// [`Sandbox::run`] with what the `paddock` binary adds (see [`crate::child::Extras`]).
    #[doc(hidden)]
    pub fn run_with(
        &self,
        command: &Command,
        extras: crate::child::Extras,
    ) -> Result<crate::Output, Error> {
        crate::child::run_here(self, command, extras)
    }

    /// The project directory.
    pub fn project(&self) -> &Path {
        &self.inner.project
    }

    /// The config file read, if any.
    pub fn config_file(&self) -> Option<&Path> {
        self.inner.config.as_deref()
    }

    /// Notes about the config (an SRT file's conversion), also in each task's report.
    pub fn notes(&self) -> &[String] {
        &self.inner.notes
    }

    /// The policy as read, before it is resolved against the filesystem.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }
}

impl SandboxBuilder {
    /// Reads the policy from `file`: TOML, or SRT settings (`.json`, converted with notes).
    /// A relative path is taken from the project directory.
    pub fn config_file(mut self, file: impl AsRef<Path>) -> Result<SandboxBuilder, Error> {
        let file = absolute(&self.project, file.as_ref())?;
        let (policy, notes) = crate::config::read(&file)?;
        self.policy = Some((policy, Some(file), notes));
        Ok(self)
    }

    /// Reads the policy from TOML text.
    pub fn policy_toml(mut self, text: &str) -> Result<SandboxBuilder, Error> {
        let origin = self.project.join("paddock.toml");
        let policy = paddock_policy::load_str(text, &origin, paddock_policy::Format::Toml)?;
        self.policy = Some((policy, None, Vec::new()));
        Ok(self)
    }

    /// Uses a policy built in code (or read and then changed, as the CLI's flags do);
    /// `config` is the file it came from, if any (it is protected like any config).
    pub fn policy(mut self, policy: Policy, config: Option<PathBuf>) -> SandboxBuilder {
        self.policy = Some((policy, config, Vec::new()));
        self
    }

    /// The home directory `~` means in the policy. Default: `$HOME`.
    pub fn home(mut self, home: impl AsRef<Path>) -> SandboxBuilder {
        self.home = Some(home.as_ref().to_path_buf());
        self
    }

    /// The environment the policy's `env` rules build the task's from. Default: this
    /// process's environment when [`SandboxBuilder::build`] runs.
    pub fn env_base(mut self, env: Vec<(OsString, OsString)>) -> SandboxBuilder {
        self.env = Some(env);
        self
    }

    /// How denials are itemized, over the policy's `report.itemize`. Never changes what is
    /// enforced.
    pub fn itemize(mut self, mode: ItemizeMode) -> SandboxBuilder {
        self.itemize = Some(mode);
        self
    }

    /// Turns itemizing strategies off (to compare them, or where one misbehaves).
    pub fn toggles(mut self, toggles: paddock_linux_bwrap::runtime::Toggles) -> SandboxBuilder {
        self.toggles = toggles;
        self
    }

    /// The most bytes kept of each piped stream ([`DEFAULT_CAPTURE_LIMIT`] by default).
    pub fn capture_limit(mut self, bytes: usize) -> SandboxBuilder {
        self.capture_limit = bytes;
        self
    }

    /// Between a polite signal (a timeout's SIGTERM, [`Child::signal`]) and the kill of the
    /// whole sandbox. Default: 2 s.
    pub fn grace(mut self, grace: Duration) -> SandboxBuilder {
        self.grace = grace;
        self
    }

    /// The `paddock-supervisor` executable each sandbox runs as its pid 1 (it comes with
    /// paddock: `cargo install --path crates/cli`). Default: the one beside this program,
    /// else the first on `PATH`. It must be a regular file owned by this program's owner or
    /// root and writable by no one else: it runs unfiltered in the sandbox.
    pub fn supervisor(mut self, path: impl AsRef<Path>) -> SandboxBuilder {
        self.supervisor = Supervisor::At(path.as_ref().to_path_buf());
        self
    }

    /// Re-executes this program as each sandbox's supervisor, so that it needs no
    /// `paddock-supervisor` beside it: its `main` must call
    /// [`run_supervisor_if_asked`](crate::run_supervisor_if_asked) before anything else.
    pub fn supervise_with_current_exe(mut self) -> SandboxBuilder {
        self.supervisor = Supervisor::CurrentExe;
        self
    }

    /// Shares `proxy`'s egress proxy with the other sandboxes built with it: a process that
    /// runs many tasks with domain lists then runs one proxy.
    pub fn egress_proxy(mut self, proxy: &SharedProxy) -> SandboxBuilder {
        self.proxy = proxy.clone();
        self
    }

    /// Keeps up to `n` sandboxes of this policy set up ahead (namespaces, mounts, filters,
    /// the observers, the supervisor waiting for its task), so that [`Sandbox::spawn`] only
    /// hands the task over: the warm path for task runners. Each warm sandbox runs one task
    /// and is replaced in the background once that task has ended; the task's command, environment, working
    /// directory, streams and timeout are its own. The warm sandboxes still waiting are torn
    /// down with the last clone of the `Sandbox`. Their walls are the project's as it was
    /// when each was set up; what appears in the project meanwhile is found after the task
    /// as created during it (reported, a new repository's hooks disarmed).
    ///
    /// A sandbox that itemizes with strace (which follows a task from its start), or whose
    /// policy grants local ports (a warm sandbox would hold the port), is never prewarmed:
    /// each spawn then sets one up as usual. On macOS this does nothing yet. Default: 0.
    pub fn prewarm(mut self, n: usize) -> SandboxBuilder {
        self.prewarm = n;
        self
    }

    /// Uses these host facts instead of probing the host.
    #[doc(hidden)]
    pub fn host_facts(mut self, facts: HostFacts) -> SandboxBuilder {
        self.facts = Some(facts);
        self
    }

    /// Checks everything a task does not change: the project, the config, the home, and
    /// that this host can run sandboxes.
    pub fn build(self) -> Result<Sandbox, Error> {
        let project = std::path::absolute(&self.project).map_err(|e| Error::Command {
            message: format!(
                "{}: cannot make the project path absolute ({e})",
                self.project.display()
            ),
        })?;
        if !project.is_dir() {
            return Err(Error::Command {
                message: format!("the project {} is not a directory", project.display()),
            });
        }
        let (policy, config, notes) = match self.policy {
            Some(p) => p,
            None => {
                let found = project.join("paddock.toml");
                if crate::config::is_config(&found) {
                    let (policy, notes) = crate::config::read(&found)?;
                    (policy, Some(found), notes)
                } else {
                    (default_policy(), None, Vec::new())
                }
            }
        };
        let home = match self.home {
            Some(h) => h,
            None => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default(),
        };
        if !home.is_absolute() {
            return Err(Error::Command {
                message: "the home directory is not an absolute path; set HOME (or call `home`) so that `~` in a policy means something".into(),
            });
        }
        let env = self.env.unwrap_or_else(|| std::env::vars_os().collect());
        let mut facts = match self.facts {
            Some(f) => f,
            None => host_facts()?,
        };
        choose_supervisor(&mut facts, self.supervisor)?;
        #[cfg(target_os = "linux")]
        let warm = {
            let mode = self.itemize.unwrap_or(policy.report.itemize);
            let (mechanism, _) =
                paddock_linux_bwrap::runtime::observe::choose(mode, &facts, self.toggles);
            let warmable = matches!(
                mechanism,
                paddock_linux_bwrap::runtime::observe::Mechanism::Observe
                    | paddock_linux_bwrap::runtime::observe::Mechanism::Off
            ) && policy.allow.local_ports.is_empty();
            crate::warm::Pool::new(if warmable { self.prewarm } else { 0 })
        };
        #[cfg(not(target_os = "linux"))]
        let _ = self.prewarm;
        let sandbox = Sandbox {
            inner: Arc::new(Inner {
                project,
                policy,
                config,
                notes,
                home,
                env,
                itemize: self.itemize,
                toggles: self.toggles,
                capture_limit: self.capture_limit,
                grace: self.grace,
                facts,
                proxy: self.proxy,
                #[cfg(target_os = "linux")]
                warm,
            }),
        };
        #[cfg(target_os = "linux")]
        sandbox.inner.warm.fill(&Arc::downgrade(&sandbox.inner));
        Ok(sandbox)
    }
}

/// The facts of this host, or why it cannot run sandboxes.
#[cfg(target_os = "linux")]
fn host_facts() -> Result<HostFacts, Error> {
    let facts = paddock_linux_bwrap::probe::facts();
    if facts.bwrap.is_some() {
        return Ok(facts);
    }
    Err(Error::Unavailable { diagnosis: diagnosis(&paddock_linux_bwrap::probe::probe().report) })
}

/// The failed checks of `report` with their fixes, on one line: what `paddock check` says.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn diagnosis(report: &paddock_policy::CheckReport) -> String {
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status == paddock_policy::Status::Fail)
        .map(|c| match &c.fix {
            Some(fix) => format!("{}: {} (fix: {fix})", c.name, c.message),
            None => format!("{}: {}", c.name, c.message),
        })
        .collect();
    failed.join("; ")
}

/// Sets the supervisor of `facts` as `choice` says, or says why there is none.
#[cfg(target_os = "linux")]
fn choose_supervisor(facts: &mut HostFacts, choice: Supervisor) -> Result<(), Error> {
    use paddock_linux_bwrap::probe::{nolibc_supervisor_beside, trusted_supervisor};
    let exe = match choice {
        Supervisor::CurrentExe => return Ok(()),
        Supervisor::Find if facts.supervisor_exe.is_some() => return Ok(()),
        Supervisor::Find => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(paddock_linux_bwrap::SUPERVISOR_EXE))
            .find(|p| p.is_file())
            .ok_or_else(|| Error::Unavailable {
                diagnosis: format!(
                    "no {} beside this program or on PATH: install it with paddock (`cargo install --path crates/cli`), or name it with `SandboxBuilder::supervisor`",
                    paddock_linux_bwrap::SUPERVISOR_EXE
                ),
            })?,
        Supervisor::At(path) => path,
    };
    let exe = trusted_supervisor(&exe)
        .map_err(|why| Error::Unavailable { diagnosis: format!("{}: {why}", exe.display()) })?;
    facts.supervisor_nolibc_exe = nolibc_supervisor_beside(&exe);
    facts.supervisor_exe = Some(exe);
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn choose_supervisor(_: &mut HostFacts, _: Supervisor) -> Result<(), Error> {
    Ok(())
}

/// The facts of this host, or why it cannot run sandboxes: `sandbox-exec` missing, or this
/// process inside a sandbox already (`paddock check`'s first checks; they start no process,
/// so a run pays nothing for them).
#[cfg(target_os = "macos")]
fn host_facts() -> Result<HostFacts, Error> {
    use paddock_macos_seatbelt::run::check::{CheckOptions, check_in_process};
    let report = check_in_process(&CheckOptions::default());
    if !report.ok() {
        return Err(Error::Unavailable { diagnosis: diagnosis(&report) });
    }
    Ok(paddock_macos_seatbelt::macos::host_facts())
}

/// The facts of this host, or why it cannot run sandboxes.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn host_facts() -> Result<HostFacts, Error> {
    Ok(HostFacts {
        sandbox_exec: true,
        self_exe: std::env::current_exe().ok(),
        ..HostFacts::default()
    })
}

fn absolute(base: &Path, path: &Path) -> Result<PathBuf, Error> {
    Ok(if path.is_absolute() { path.to_path_buf() } else { base.join(path) })
}

impl Inner {
    /// The policy resolved against the filesystem as it is now, for a task in `cwd`, with
    /// `foreign` (other live runs' placeholders) taken for missing names.
    #[cfg(target_os = "linux")]
    pub(crate) fn resolve(
        &self,
        cwd: &Path,
        foreign: Vec<PathBuf>,
    ) -> Result<paddock_linux_bwrap::runtime::task::Resolution, Error> {
        use paddock_linux_bwrap::runtime::host::CachedHost;
        let ctx = paddock_policy::Context::new(self.project.clone(), self.home.clone())
            .with_env(self.env.clone())
            .with_config_files(self.config.clone().into_iter().collect());
        // One remembering host for the whole resolution: rules share their ancestors.
        let host = CachedHost::with_foreign(foreign);
        let (mut resolved, mut notes) = paddock_policy::resolve(&self.policy, &ctx, &host)?;
        notes.splice(0..0, self.notes.iter().cloned());
        // Nested repositories and protected names below the root.
        let scanned = paddock_linux_bwrap::runtime::project_walk::scan(
            &self.policy,
            &mut resolved,
            &host,
            &mut notes,
        )?;
        let cwd = paddock_policy::canonicalize(&host, cwd)?.0;
        Ok(paddock_linux_bwrap::runtime::task::Resolution { resolved, notes, cwd, scanned })
    }

    /// The task's working directory on the host: `dir` from the project, or the project.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    pub(crate) fn cwd_of(&self, dir: Option<&Path>) -> PathBuf {
        match dir {
            Some(d) if d.is_absolute() => d.to_path_buf(),
            Some(d) => self.project.join(d),
            None => self.project.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Send + Sync + Clone + 'static>() {}
    fn sendable<T: Send + 'static>() {}

    #[test]
    fn a_sandbox_is_shared_between_threads_and_a_child_moves_to_one() {
        shareable::<Sandbox>();
        shareable::<crate::Handle>();
        shareable::<SharedProxy>();
        sendable::<Child>();
        sendable::<crate::Error>();
    }

    #[test]
    fn a_bad_config_fails_the_build_naming_the_key() {
        let dir = std::env::temp_dir();
        let err =
            Sandbox::builder(&dir).policy_toml("[allow]\nnetwork = \"sometimes\"\n").unwrap_err();
        let crate::Error::Config(e) = &err else { panic!("{err:?}") };
        assert!(e.to_string().contains("allow.network"), "{e}");
        let err = Sandbox::builder(&dir).config_file("/nonexistent/paddock.toml").unwrap_err();
        assert!(matches!(err, crate::Error::ConfigFile { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/paddock.toml"), "{err}");
    }
}
