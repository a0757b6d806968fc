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
}
