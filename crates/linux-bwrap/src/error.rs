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
}
