//! The one error type of the Linux backend (planning refusals use the policy crate's
//! `Error`, which the `Backend` trait returns).

/// What can go wrong compiling, decoding or applying the backend's own data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The seccomp program could not be built.
    #[error("cannot build the seccomp filter for rule `{syscall}`: {message}")]
    Seccomp {
        /// The syscall whose rule failed (or `filter` for the whole program).
        syscall: String,
        /// seccompiler's words.
        message: String,
    },
    /// A payload read by the supervisor is malformed or missing.
    #[error("supervisor payload on fd {fd}: {message}")]
    Payload {
        /// The descriptor it was read from.
        fd: i32,
        /// What is wrong.
        message: String,
    },
    /// Loading the seccomp filter into the kernel failed.
    #[error("cannot apply the seccomp filter: {message}")]
    Apply {
        /// The OS's words.
        message: String,
    },
    /// The observer filesystem cannot serve a planned node.
    #[error("observer filesystem: {}: {message}", path.display())]
    ObserverTree {
        /// The node's path in the sandbox.
        path: std::path::PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The FUSE device cannot be opened.
    #[error("{}: {message}", path.display())]
    FuseDevice {
        /// The device (`/dev/fuse`).
        path: std::path::PathBuf,
        /// The OS's words and the fix.
        message: String,
    },
    /// The observer's mount point or its serving thread cannot be prepared.
    #[error("observer filesystem at {}: {message}", path.display())]
    ObserverSetup {
        /// The mount point.
        path: std::path::PathBuf,
        /// What failed, in the OS's words.
        message: String,
    },
    /// The plan's program could not be started: nothing ran (the child failed before or at
    /// its exec, the observer's mount included). Callers may run the task another way.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: std::path::PathBuf,
        /// Why, in the OS's words.
        source: std::io::Error,
    },
    /// A step of running a task failed: `context` says which, `source` why.
    #[error("{context}{}", source.as_ref().map(|s| format!(": {s}")).unwrap_or_default())]
    Run {
        /// What was being done.
        context: String,
        /// The underlying error, when there is one.
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// An OS call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The policy refused the task or its plan.
    #[error(transparent)]
    Policy(#[from] paddock_policy::Error),
}

impl Error {
    /// An error of running a task with no underlying cause.
    pub fn run(context: impl Into<String>) -> Error {
        Error::Run { context: context.into(), source: None }
    }

    /// Whether this error, or one it wraps, is a spawn that failed before anything ran.
    pub fn is_spawn_failure(&self) -> bool {
        match self {
            Error::Spawn { .. } => true,
            Error::Run { source: Some(s), .. } => {
                s.downcast_ref::<Error>().is_some_and(Error::is_spawn_failure)
            }
            _ => false,
        }
    }
}

#[cfg(target_os = "linux")]
impl From<nix::Error> for Error {
    fn from(e: nix::Error) -> Error {
        Error::Io(std::io::Error::from(e))
    }
}

/// Adds what was being done to an error, as `anyhow::Context` does, into [`Error::Run`].
pub trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl Into<String>) -> Result<T, Error>;
    /// Wraps the error with the context `f` makes, only on failure.
    fn with_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T, Error>;
}

impl<T, E> Context<T> for Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn context(self, context: impl Into<String>) -> Result<T, Error> {
        self.map_err(|e| Error::Run { context: context.into(), source: Some(Box::new(e)) })
    }

    fn with_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T, Error> {
        self.map_err(|e| Error::Run { context: f().into(), source: Some(Box::new(e)) })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Into<String>) -> Result<T, Error> {
        self.ok_or_else(|| Error::run(context))
    }

    fn with_context<C: Into<String>>(self, f: impl FnOnce() -> C) -> Result<T, Error> {
        self.ok_or_else(|| Error::run(f()))
    }
}

impl From<std::num::TryFromIntError> for Error {
    fn from(e: std::num::TryFromIntError) -> Error {
        Error::Run { context: "a number out of range".into(), source: Some(Box::new(e)) }
    }
}
