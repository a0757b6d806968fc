//! The policy as the user wrote it: a config file, flags and the built-in default, merged,
//! before any path is looked at.
//!
//! Every value keeps its [`Origin`] so that resolution errors point at the key that caused
//! them. Nothing here touches the filesystem; [`resolve`](crate::resolve) does that through a
//! [`Host`](crate::Host).

use std::collections::BTreeMap;
use std::ffi::OsString;

use serde::Serialize;

use crate::domain::DomainPattern;
use crate::origin::Origin;
use crate::path::serialize_os_str;

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    #[serde(skip)]
    pub origin: Origin,
}

impl<T> Entry<T> {
    /// Pairs a value with its origin.
    pub fn new(value: T, origin: Origin) -> Entry<T> {
        Entry { value, origin }
    }
}

/// A path or glob as written (`.`, `~/.cache`, `/opt/x`, `src/**/*.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathSpec(pub OsString);

impl Serialize for PathSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_os_str(&self.0, s)
    }
}

/// The whole policy before resolution.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Policy {
    /// What the task may do.
    pub allow: Allow,
    /// What the task may not do, narrowing `allow`.
    pub deny: Deny,
    /// Overrides of the protected names (DESIGN decision 8).
    pub protected: Protected,
    /// How the task's environment is built from the runner's.
    pub env: EnvRules,
    /// Which denials are reported, and how they are itemized.
    pub report: ReportRules,
    /// Report filters: matching denials are enforced but not reported.
    pub ignore: Ignore,
    /// Whether to run with documented weaker walls when the host cannot give full ones
    /// (nested in a container without user namespaces). Never weakens silently.
    pub weaker_when_nested: bool,
}

/// The `allow` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Allow {
    /// Paths and globs readable under deny anchors (reads elsewhere are allowed already).
    pub read: Vec<Entry<PathSpec>>,
    /// Paths and globs the task may write. Replaces the default (`["."]`) when a config
    /// sets it; flags add to it.
    pub write: Vec<Entry<PathSpec>>,
    /// Network access.
    pub network: Entry<NetworkRule>,
    /// Unix-domain sockets.
    pub unix_sockets: Entry<UnixSocketsRule>,
    /// Ports of servers the task starts that the host may reach on 127.0.0.1.
    pub local_ports: Vec<Entry<u16>>,
    /// Host loopback ports the task may reach while its network is otherwise off.
    pub host_ports: Vec<Entry<u16>>,
    /// A pseudo-terminal for the task.
    pub pty: bool,
    /// The project's own repository config (`.git/config`, `config.worktree`) writable, hooks
    /// still read-only, with a warning every run; on macOS also the user's git config
    /// (`~/.gitconfig`, `~/.config/git`) readable under a deny anchor.
    pub git_config: bool,
    /// macOS: sysctl and other system information reads.
    pub system_info: bool,
    /// macOS: mach services the task may look up.
    pub mach_lookup: Vec<Entry<String>>,
    /// A write grant may cover the home directory (`allow.write = ["~"]`); a warning says
    /// so on every run. Without it such a grant is an error.
    pub write_home: bool,
}

impl Default for Allow {
    fn default() -> Allow {
        Allow {
            read: Vec::new(),
            write: Vec::new(),
            network: Entry::new(NetworkRule::Off, Origin::default_key("allow.network")),
            unix_sockets: Entry::new(
                UnixSocketsRule::None,
                Origin::default_key("allow.unix-sockets"),
            ),
            local_ports: Vec::new(),
            host_ports: Vec::new(),
            pty: false,
            git_config: false,
            system_info: false,
            mach_lookup: Vec::new(),
            write_home: false,
        }
    }
}

/// `allow.network`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkRule {
    /// Own network namespace with loopback only.
    Off,
    /// The host's network.
    On,
    /// Only these destinations, through paddock's egress proxy.
    Domains(Vec<Entry<DomainPattern>>),
}

/// `allow.unix-sockets`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnixSocketsRule {
    /// `socket(AF_UNIX)` is refused.
    None,
    /// Any unix socket the filesystem policy lets the task reach.
    All,
    /// Only these socket paths.
    Paths(Vec<Entry<PathSpec>>),
}

/// The `deny` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Deny {
    /// Read-deny anchors: everything under one that is not allowed is hidden.
    pub read: Vec<Entry<PathSpec>>,
    /// Paths kept read-only even inside a write grant (like protected names).
    pub write: Vec<Entry<PathSpec>>,
    /// Destinations refused even when `allow.network` lists them (checked first).
    pub network: Vec<Entry<DomainPattern>>,
    /// Whether the built-in list of secret locations in the home directory is denied too.
    /// On by default; a config must say `builtin-secrets = false` to drop it.
    pub builtin_secrets: bool,
}

impl Default for Deny {
    fn default() -> Deny {
        Deny { read: Vec::new(), write: Vec::new(), network: Vec::new(), builtin_secrets: true }
    }
}

/// The `protected` table: overrides of the protected names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Protected {
    /// Protected names the user makes writable again, e.g. `[".vscode"]`. Each must be a
    /// name of the built-in list.
    pub writable: Vec<Entry<String>>,
    /// More names (relative to every write grant) to keep read-only.
    pub extra: Vec<Entry<PathSpec>>,
    /// Whether protected names below the project root are kept read-only too.
    pub depth: ProtectedDepth,
    /// What happens to a git repository the task creates in the project.
    pub new_repositories: NewRepositories,
}

/// `protected.depth`: where in the project protected names are looked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectedDepth {
    /// Only directly in the project directory (and other write grants' roots).
    Root,
    /// Also at any depth below the project directory, where they exist when the task starts.
    #[default]
    Any,
}

impl ProtectedDepth {
    /// Parses the config spelling.
    pub fn parse(text: &str) -> Option<ProtectedDepth> {
        match text {
            "root" => Some(ProtectedDepth::Root),
            "any" => Some(ProtectedDepth::Any),
            _ => None,
        }
    }
}

/// `protected.new-repositories`: what is done with a git repository the task created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewRepositories {
    /// Report it, and make its hooks (but `*.sample`) non-executable after the run.
    #[default]
    Disarm,
    /// Report it only.
    Report,
}

impl NewRepositories {
    /// Parses the config spelling.
    pub fn parse(text: &str) -> Option<NewRepositories> {
        match text {
            "disarm" => Some(NewRepositories::Disarm),
            "report" => Some(NewRepositories::Report),
            _ => None,
        }
    }
}

/// The `env` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EnvRules {
    /// Names or `PREFIX*` patterns of host variables passed on, on top of the built-in safe
    /// list. A pattern never passes a secret-looking name; naming it exactly does.
    pub pass: Vec<Entry<String>>,
    /// Variables set to fixed values (after `pass`).
    pub set: BTreeMap<String, Entry<String>>,
    /// Variables removed (after `pass` and `set`).
    pub unset: Vec<Entry<String>>,
}

/// The `report` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ReportRules {
    /// Denials under these paths are reported (default: the project dir).
    pub within: Vec<Entry<PathSpec>>,
    /// Denials whose path is reached through a symlink under these are reported too.
    pub linked: Vec<Entry<PathSpec>>,
    /// How denials are itemized.
    pub itemize: ItemizeMode,
    /// Refused unix-socket connects to these paths (absolute globs) are not reported
    /// (`report.ignore.unix-sockets`; default: [`IGNORED_UNIX_SOCKETS`]).
    pub ignore_unix_sockets: Vec<Entry<PathSpec>>,
}

/// Sockets that system libraries probe on their own, refused and not reported by default:
/// glibc's name service cache (every user or group lookup: `ls -l`, `id`, `git log`),
/// systemd's user database over varlink (nss-systemd), and the system D-Bus.
pub const IGNORED_UNIX_SOCKETS: &[&str] = &[
    "/var/run/nscd/socket",
    "/run/nscd/socket",
    "/run/systemd/userdb/*",
    "/var/run/dbus/system_bus_socket",
    "/run/dbus/system_bus_socket",
];

impl Default for ReportRules {
    fn default() -> ReportRules {
        ReportRules {
            within: Vec::new(),
            linked: Vec::new(),
            itemize: ItemizeMode::Auto,
            ignore_unix_sockets: IGNORED_UNIX_SOCKETS
                .iter()
                .map(|p| {
                    Entry::new(
                        PathSpec(OsString::from(p)),
                        Origin::default_key("report.ignore.unix-sockets"),
                    )
                })
                .collect(),
        }
    }
}

/// `report.itemize` / `--itemize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ItemizeMode {
    /// The best mechanism the host has: observe, else strace, else off.
    Auto,
    /// The observing FUSE mount and seccomp notifications.
    Observe,
    /// `strace -f`.
    Strace,
    /// No itemizing; denials are enforced only.
    Off,
}

impl ItemizeMode {
    /// Parses the config/flag spelling.
    pub fn parse(text: &str) -> Option<ItemizeMode> {
        match text {
            "auto" => Some(ItemizeMode::Auto),
            "observe" => Some(ItemizeMode::Observe),
            "strace" => Some(ItemizeMode::Strace),
            "off" => Some(ItemizeMode::Off),
            _ => None,
        }
    }
}

/// The `ignore` table: report filters (globs for paths, domain patterns for network).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Ignore {
    /// Read denials under these paths/globs are not reported.
    pub read: Vec<Entry<PathSpec>>,
    /// Write denials under these paths/globs are not reported.
    pub write: Vec<Entry<PathSpec>>,
    /// Network denials to these destinations are not reported.
    pub network: Vec<Entry<DomainPattern>>,
    /// macOS system-info denials with these names are not reported.
    pub system_info: Vec<Entry<String>>,
}
