//! [`Command`] and [`Stdio`]: what to run in a sandbox, shaped like `std::process`'s.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where one of a task's standard streams goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stdio(pub(crate) StdioKind);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StdioKind {
    Inherit,
    Null,
    Piped,
}

impl Stdio {
    /// The caller's own stream (the default).
    pub fn inherit() -> Stdio {
        Stdio(StdioKind::Inherit)
    }

    /// `/dev/null`.
    pub fn null() -> Stdio {
        Stdio(StdioKind::Null)
    }

    /// Captured by paddock (stdout, stderr): always read, so a task never blocks on output
    /// nobody reads, and kept up to the sandbox's capture limit with a marker saying how
    /// much was cut. [`Child::wait_with_output`](crate::Child::wait_with_output) returns it.
    /// Not for stdin: paddock writes nothing to a task.
    pub fn piped() -> Stdio {
        Stdio(StdioKind::Piped)
    }
}

/// A program to run in a [`Sandbox`](crate::Sandbox), with its arguments, working
/// directory, environment, streams and timeout.
#[derive(Clone, Debug)]
pub struct Command {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) env_remove: Vec<OsString>,
    pub(crate) stdin: Stdio,
    pub(crate) stdout: Stdio,
    pub(crate) stderr: Stdio,
    pub(crate) timeout: Option<Duration>,
}

impl Command {
    /// Runs `program`, looked up in the sandbox's `PATH` when it has no `/`.
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: Stdio::inherit(),
            stdout: Stdio::inherit(),
            stderr: Stdio::inherit(),
            timeout: None,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// The task's working directory: relative to the project, or absolute. Default: the
    /// project directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Sets a variable on top of the environment the policy gives the task.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        let key = key.as_ref().to_os_string();
        self.env_remove.retain(|k| *k != key);
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.as_ref().to_os_string()));
        self
    }

    /// Sets variables on top of the environment the policy gives the task.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes a variable from the environment the policy gives the task.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        let key = key.as_ref().to_os_string();
        self.env.retain(|(k, _)| *k != key);
        self.env_remove.push(key);
        self
    }

    /// The task's stdin ([`Stdio::inherit`] or [`Stdio::null`]).
    pub fn stdin(&mut self, stdio: Stdio) -> &mut Command {
        self.stdin = stdio;
        self
    }

    /// The task's stdout.
    pub fn stdout(&mut self, stdio: Stdio) -> &mut Command {
        self.stdout = stdio;
        self
    }

    /// The task's stderr.
    pub fn stderr(&mut self, stdio: Stdio) -> &mut Command {
        self.stderr = stdio;
        self
    }

    /// Kills the task after `timeout` (politely first: SIGTERM, then the sandbox after a
    /// grace period); its report says `timed_out` and its exit code is 124.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Command {
        self.timeout = Some(timeout);
        self
    }

    /// The program.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn get_args(&self) -> impl Iterator<Item = &OsStr> {
        self.args.iter().map(OsString::as_os_str)
    }

    /// The working directory, if set.
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }
}
