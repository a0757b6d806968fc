//! The policy model of paddock, a sandbox runtime: what a task may read, write and reach,
//! from a config file to the plan a backend enforces. This crate is pure: it makes no OS
//! calls (`#![forbid(unsafe_code)]`, no libc), so every rule here is tested as data.
//!
//! # Terminology
//!
//! - A **policy** ([`Policy`]) is what the user wrote: `paddock.toml`, command-line flags
//!   and the built-in default, merged, each value remembering its [`Origin`].
//! - **Resolution** ([`resolve()`]) turns it into a [`ResolvedPolicy`]: canonical paths, globs
//!   expanded, symlink escapes refused, protected names found, the task's environment built.
//!   It asks the filesystem through the [`Host`] trait only.
//! - A **backend** ([`Backend`]) turns a resolved policy and a [`Task`] into a [`SpawnPlan`]:
//!   plain data (argv, env, payloads) that the CLI performs.
//! - A **violation** ([`Violation`]) is one kind of access the task was denied; a
//!   [`ReportFilter`] decides which are reported.
//!
//! # Example
//!
//! ```
//! use paddock_policy::{Context, FakeHost, load_str, resolve, Format};
//!
//! let host = FakeHost::new().dir("/home/u/proj/src").dir("/home/u/.ssh");
//! let ctx = Context::new("/home/u/proj", "/home/u").with_env(vec![]);
//! let policy = load_str("[allow]\nwrite = [\"src\"]\n", "paddock.toml".as_ref(), Format::Toml)?;
//! let (resolved, _diagnostics) = resolve(&policy, &ctx, &host)?;
//! assert!(resolved.is_writable(&"/home/u/proj/src/main.rs".parse_abs()));
//! assert!(!resolved.is_readable(&"/home/u/.ssh/id_ed25519".parse_abs()));
//! # trait P { fn parse_abs(&self) -> paddock_policy::AbsPathBuf; }
//! # impl P for str { fn parse_abs(&self) -> paddock_policy::AbsPathBuf {
//! #     paddock_policy::AbsPathBuf::new_lexical(self).unwrap() } }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Supported platforms
//!
//! All: the crate is data and logic. The platform crates implement [`Host`] and
//! [`Backend`].

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod backend;
mod canonical;
mod check;
mod config;
mod decimal;
mod defaults;
mod domain;
mod env;
mod error;
mod expand;
mod found;
mod git_config;
mod git_surface;
mod gitconfig;
mod glob;
mod grants;
mod host;
mod missing;
mod model;
mod notes;
mod odd_paths;
mod origin;
mod path;
mod pins;
mod plan;
pub mod propose;
mod protected;
mod report;
mod resolve;
mod resolved;
mod spelling;
pub mod srt;
mod violation;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod unix_socket_tests;
#[cfg(test)]
mod walls_tests;

pub use backend::Backend;
pub use check::{Check, CheckReport, Status};
pub use config::{Format, MAX_CONFIG_BYTES, load_str, parse_toml};
pub use decimal::write_decimal;
pub use defaults::{BUILTIN_SECRETS, default_policy};
pub use domain::{DomainPattern, HostName, HostPattern, PortSpec, WEB_PORTS, is_internal};
pub use env::{SAFE_NAMES, build_env, is_secret_name};
pub use error::{Error, Result};
pub use found::{FoundWalls, ProjectScan, protect_found};
pub use git_surface::{SurfaceItem, WhenMissing, repo_surface};
pub use gitconfig::{ConfigEntry, config_entries, program_keys, worktree_config};
pub use host::{FakeHost, FileKind, Host, HostError};
pub use model::{
    Allow, Deny, Entry, EnvRules, IGNORED_UNIX_SOCKETS, Ignore, ItemizeMode, NetworkRule,
    NewRepositories, PathSpec, Policy, Protected, ProtectedDepth, ReportRules, UnixSocketsRule,
};
pub use notes::{NoteHook, Notes};
pub use origin::Origin;
pub use path::{
    AbsPathBuf, DisplayBytes, hex, os_from_bytes, serialize_os_str, serialize_os_strings,
};
pub use plan::{
    BridgeSpec, FileFd, GrantClone, HostFacts, ObservedAnchor, ObservedNode, ObserverPlan, Payload,
    Placeholder, SelfMount, SpawnPlan, Task,
};
pub use protected::{PROTECTED_NAMES, ProtectedName, Scope};
pub use report::{CREATED, IgnoreGlobs, ReportFilter, cwd_hint, summarize};
pub use resolve::{Context, canonicalize, resolve};
pub use resolved::{
    DenyAnchor, Exception, GlobKind, GlobRule, IgnoreRules, NetworkPolicy, ProtectedPath,
    ProtectedState, ReportScope, ResolvedPolicy, SocketPath, UnixSockets, WriteGrant,
};
pub use violation::{Violation, ViolationKind, ViolationSet};
