//! The library's one error type: what a caller can match on and what to tell the user.

use std::path::PathBuf;

/// Why a sandbox could not be built or a task could not be run.
///
/// A task that ran and failed is not an error: its [`Report`](crate::Report) says how it
/// ended. Each variant's message names what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The policy is wrong: its message names the file, the key and the fix.
    #[error(transparent)]
    Config(#[from] paddock_policy::Error),
    /// The config file cannot be read as one.
    #[error("{}: {message}; {fix}", file.display())]
    ConfigFile {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        message: String,
        /// What to do about it.
        fix: String,
    },
    /// This host cannot run sandboxes: `diagnosis` is what `paddock check` says of it.
    #[error(
        "the sandbox is unavailable here: {diagnosis}; run `paddock check` for the whole diagnosis"
    )]
    Unavailable {
        /// The failed checks and their fixes.
        diagnosis: String,
    },
    /// The sandbox's program could not be started; nothing ran.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program (bubblewrap, or a tracer around it; `sandbox-exec` on macOS).
        program: PathBuf,
        /// Why, in the OS's words.
        source: std::io::Error,
    },
    /// The command cannot be run as given (no program, a stream that cannot be connected).
    #[error("{message}")]
    Command {
        /// What is wrong and what to do instead.
        message: String,
    },
    /// Running the task failed in a way the message explains.
    #[error(transparent)]
    Run(paddock_linux_bwrap::Error),
    /// Running the task with seatbelt failed in a way the message explains.
    #[error(transparent)]
    Seatbelt(paddock_macos_seatbelt::Error),
    /// An OS call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<paddock_macos_seatbelt::Error> for Error {
    fn from(e: paddock_macos_seatbelt::Error) -> Error {
        match e {
            paddock_macos_seatbelt::Error::Spawn { program, message } => {
                Error::Spawn { program, source: std::io::Error::other(message) }
            }
            e => Error::Seatbelt(e),
        }
    }
}

impl From<paddock_linux_bwrap::Error> for Error {
    fn from(e: paddock_linux_bwrap::Error) -> Error {
        match e {
            paddock_linux_bwrap::Error::Spawn { program, source } => {
                Error::Spawn { program, source }
            }
            paddock_linux_bwrap::Error::Io(e) => Error::Io(e),
            paddock_linux_bwrap::Error::Policy(e) => Error::Config(e),
            e => Error::Run(e),
        }
    }
}

impl Error {
    /// Whether the error is a reader that stopped reading (`paddock plan | head`).
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Error::Io(e) => e.kind() == std::io::ErrorKind::BrokenPipe,
            _ => false,
        }
    }
}
