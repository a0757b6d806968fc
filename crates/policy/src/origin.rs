//! Where a policy value came from, so that every message can point at it.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::path::DisplayBytes;

/// The source of a policy value: a config file and key path, a command-line flag, or the
/// built-in default policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "source")]
pub enum Origin {
    /// A key in a config file, e.g. `paddock.toml` and `allow.write[2]`.
    File {
        /// The file.
        file: PathBuf,
        /// The key path.
        key: String,
    },
    /// A command-line flag such as `--allow-write`.
    Flag {
        /// The flag as typed.
        flag: String,
    },
    /// The built-in default policy.
    Default {
        /// The key path in the default policy.
        key: String,
    },
}

impl Origin {
    /// A key in a file.
    pub fn file(file: impl Into<PathBuf>, key: impl Into<String>) -> Origin {
        Origin::File { file: file.into(), key: key.into() }
    }

    /// A command-line flag.
    pub fn flag(flag: impl Into<String>) -> Origin {
        Origin::Flag { flag: flag.into() }
    }

    /// A key of the built-in default.
    pub fn default_key(key: impl Into<String>) -> Origin {
        Origin::Default { key: key.into() }
    }

    /// The same source with `suffix` appended to the key path (`allow.write` + `[2]`).
    pub fn child(&self, suffix: &str) -> Origin {
        match self {
            Origin::File { file, key } => {
                Origin::File { file: file.clone(), key: join_key(key, suffix) }
            }
            Origin::Flag { flag } => Origin::Flag { flag: flag.clone() },
            Origin::Default { key } => Origin::Default { key: join_key(key, suffix) },
        }
    }

    /// The key path, or the flag.
    pub fn key(&self) -> &str {
        match self {
            Origin::File { key, .. } | Origin::Default { key } => key,
            Origin::Flag { flag } => flag,
        }
    }
}

fn join_key(key: &str, suffix: &str) -> String {
    if key.is_empty() {
        suffix.trim_start_matches('.').to_owned()
    } else if suffix.starts_with('[') || suffix.starts_with('.') {
        format!("{key}{suffix}")
    } else {
        format!("{key}.{suffix}")
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { file, key } if key.is_empty() => {
                write!(f, "{}", DisplayBytes(file.as_os_str()))
            }
            Origin::File { file, key } => write!(f, "{}: {key}", DisplayBytes(file.as_os_str())),
            Origin::Flag { flag } => write!(f, "command line: {flag}"),
            Origin::Default { key } => write!(f, "built-in default policy: {key}"),
        }
    }
}
