//! The one error type of the policy crate.
//!
//! Every variant carries what the user needs to fix the input: the file, the key path
//! (`allow.write[2]`), the offending value and what to write instead. Messages are
//! lowercase with no trailing period; the CLI prefixes them with `paddock: `.

use std::path::PathBuf;

use crate::origin::Origin;
use crate::path::DisplayBytes;

/// Everything that can go wrong reading, resolving or planning a policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file is not valid TOML or JSON.
    #[error("{}: line {line}, column {column}: {message}", DisplayBytes(file.as_os_str()))]
    Syntax {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A key that the format does not have.
    #[error("{origin}: unknown key `{key}`{}", suggestion_text(suggestion))]
    UnknownKey {
        /// Where (file, and the table holding the key).
        origin: Origin,
        /// The unknown key as written.
        key: String,
        /// The nearest valid key, if one is close.
        suggestion: Option<String>,
    },
    /// A value that is present but wrong.
    #[error("{origin}: {message} (got {value}); {fix}")]
    Invalid {
        /// Where the value came from.
        origin: Origin,
        /// The value as the user wrote it, escaped for display.
        value: String,
        /// What is wrong with it.
        message: String,
        /// What to write instead.
        fix: String,
    },
    /// A grant spelled inside the project that resolves outside it through a symlink, so a
    /// mount would grant the link's target (items 1003, SYM-01).
    #[error(
        "{origin}: `{entry}` is inside the project but resolves to {resolved} through a symlink; \
         paddock refuses grants that leave the project this way. Remove the link, or grant \
         {resolved} by its absolute path if that is really meant"
    )]
    EscapesProject {
        /// Where the entry came from.
        origin: Origin,
        /// The entry as written.
        entry: String,
        /// Where it really points.
        resolved: String,
    },
    /// The host could not answer a question resolution had to ask.
    #[error("{path}: {message}")]
    Host {
        /// The path asked about, escaped for display.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A feature the chosen backend cannot enforce; paddock refuses rather than run weaker.
    #[error("the {backend} backend cannot enforce {feature}: {fix}")]
    Unsupported {
        /// The feature, as a config key.
        feature: String,
        /// The backend's name.
        backend: &'static str,
        /// What the user can do.
        fix: String,
    },
    /// A backend could not turn the policy into a plan.
    #[error("{backend}: {message}")]
    Plan {
        /// The backend's name.
        backend: &'static str,
        /// What went wrong, with the fix.
        message: String,
    },
}

fn suggestion_text(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
