//! The policy after resolution: absolute, canonical paths that exist (or are known not to),
//! ready for a backend to turn into walls.
//!
//! **Invariant:** every path here is canonical (no symlink in any component) except where a
//! field says otherwise, and every write grant lies where its entry said it would: a grant
//! spelled inside the project resolved inside the project.

use std::ffi::OsString;

use serde::Serialize;

use crate::domain::DomainPattern;
use crate::host::FileKind;
use crate::model::ItemizeMode;
use crate::origin::Origin;
use crate::path::{AbsPathBuf, serialize_os_str};

/// The resolved policy. Built by [`resolve`](crate::resolve).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ResolvedPolicy {
    /// The project directory (canonical). Relative grants were anchored here.
    pub project_dir: AbsPathBuf,
    /// The home directory (canonical). `~` was expanded to it.
    pub home: AbsPathBuf,
    /// Read-deny anchors, outermost first. Everything else is readable.
    pub read_deny: Vec<DenyAnchor>,
    /// Write grants, outermost first. Everything else is read-only.
    pub write: Vec<WriteGrant>,
    /// Paths kept read-only inside write grants, present or missing.
    pub protected: Vec<ProtectedPath>,
    /// Directories inside write grants that must not be renamed (the ancestors of protected
    /// paths, such as `.git`, and of deny anchors up to their write grant): a backend makes
    /// each a mount point so `rename` fails (EBUSY).
    pub pinned: Vec<AbsPathBuf>,
    /// Globs as written with their static prefix canonicalized, for backends that can
    /// enforce patterns natively (seatbelt) and cover files created later.
    pub globs: Vec<GlobRule>,
    /// Network access.
    pub network: NetworkPolicy,
    /// Unix-domain sockets.
    pub unix_sockets: UnixSockets,
    /// Ports of servers in the task the host may reach on loopback.
    pub local_ports: Vec<u16>,
    /// Host loopback ports the task may reach.
    pub host_ports: Vec<u16>,
    /// A pseudo-terminal for the task.
    pub pty: bool,
    /// `allow.git-config`: the project's repository config was lifted from `protected`
    /// (resolution did it); macOS also re-opens the user's git config for reading.
    pub git_config: bool,
    /// macOS: system information reads.
    pub system_info: bool,
    /// macOS: mach services the task may look up.
    pub mach_lookup: Vec<String>,
    /// Weaker walls allowed when nested (documented, never silent).
    pub weaker_when_nested: bool,
    /// `/tmp` is a private, per-task directory (true unless a grant covers `/tmp`).
    pub private_tmp: bool,
    /// The task's environment, in order, before the backend adds its own (`TMPDIR`, proxies).
    #[serde(serialize_with = "serialize_env")]
    pub env: Vec<(OsString, OsString)>,
    /// Which denials are reported.
    pub report: ReportScope,
    /// Report filters.
    pub ignore: IgnoreRules,
}

/// A read-deny anchor and what is readable again under it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DenyAnchor {
    /// The anchor (canonical). Hidden unless it is also an exception's ancestor.
    pub path: AbsPathBuf,
    /// What it is on the host; `None` if it does not exist (nothing to hide then).
    pub kind: Option<FileKind>,
    /// Paths under the anchor that stay visible, each with its kind.
    pub exceptions: Vec<Exception>,
    /// Where the anchor came from.
    pub origin: Origin,
}

/// A path visible again under a deny anchor.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Exception {
    /// The path (canonical, existing).
    pub path: AbsPathBuf,
    /// Its kind.
    pub kind: FileKind,
    /// Whether it is also writable (a write grant under an anchor).
    pub writable: bool,
}

/// A writable path.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct WriteGrant {
    /// The path (canonical, existing).
    pub path: AbsPathBuf,
    /// Directory or file.
    pub kind: FileKind,
    /// Where the grant came from.
    pub origin: Origin,
}

/// A path kept read-only inside a write grant.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProtectedPath {
    /// The path (canonical parent, protected name appended).
    pub path: AbsPathBuf,
    /// The protected name or rule it comes from (`.git/hooks`, `deny.write[0]`).
    pub rule: String,
    /// What is there now.
    pub state: ProtectedState,
}

/// Whether a protected path exists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ProtectedState {
    /// It exists: bind it read-only onto itself.
    Exists {
        /// Its kind.
        kind: FileKind,
    },
    /// It does not exist. `first_missing` is the outermost missing component (the path
    /// itself, or an ancestor below the write grant): creating it must be refused without
    /// leaving anything on the host.
    Missing {
        /// The outermost missing component.
        first_missing: AbsPathBuf,
    },
}

/// A glob rule with its static prefix canonicalized.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GlobRule {
    /// What the glob grants or denies.
    pub kind: GlobKind,
    /// The canonical directory holding the first wildcard component.
    pub base: AbsPathBuf,
    /// The pattern below `base` (`/`-separated, `*` never crosses `/`, `**` does).
    #[serde(serialize_with = "serialize_os_str")]
    pub pattern: OsString,
    /// Where it came from.
    pub origin: Origin,
}

/// The role of a [`GlobRule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobKind {
    /// `allow.read`.
    Read,
    /// `allow.write`.
    Write,
    /// `deny.read`.
    DenyRead,
}

/// Network access after resolution.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum NetworkPolicy {
    /// Own network namespace, loopback only.
    Off,
    /// The host's network.
    On,
    /// Only through the egress proxy, to these destinations.
    Filtered {
        /// Allowed destinations.
        allow: Vec<DomainPattern>,
        /// Refused destinations (checked first).
        deny: Vec<DomainPattern>,
    },
}

/// Unix sockets after resolution.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum UnixSockets {
    /// `socket(AF_UNIX)` refused (and `socketpair` of datagram kinds).
    None,
    /// Unix sockets allowed; the filesystem policy still decides which paths are reachable.
    All,
    /// Only these socket paths. `declared` is as written (anchored), `resolved` canonical.
    Paths {
        /// Each allowed socket.
        sockets: Vec<SocketPath>,
    },
}

/// One allowed unix socket path.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SocketPath {
    /// As written, anchored and lexically normalized.
    pub declared: AbsPathBuf,
    /// Canonical.
    pub resolved: AbsPathBuf,
}

/// Which denials are reported.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ReportScope {
    /// Denials under these are reported.
    pub within: Vec<AbsPathBuf>,
    /// Denials reached through a symlink under these are reported.
    pub linked: Vec<AbsPathBuf>,
    /// How denials are itemized.
    pub itemize: ItemizeMode,
}

/// Report filters after resolution.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct IgnoreRules {
    /// Absolute glob patterns of read denials not to report.
    pub read: Vec<String>,
    /// Absolute glob patterns of write denials not to report.
    pub write: Vec<String>,
    /// Destinations whose denials are not reported.
    pub network: Vec<DomainPattern>,
    /// macOS system-info names not to report.
    pub system_info: Vec<String>,
    /// Absolute glob patterns of refused unix-socket connects not to report
    /// (`report.ignore.unix-sockets`).
    pub unix_sockets: Vec<String>,
}

impl ResolvedPolicy {
    /// Whether `path` (canonical) may be written under this policy: inside a write grant and
    /// not inside a protected path.
    pub fn is_writable(&self, path: &AbsPathBuf) -> bool {
        self.write.iter().any(|g| path.starts_with(&g.path))
            && !self.protected.iter().any(|p| path.starts_with(&p.path))
    }

    /// Whether `path` (canonical) may be read: not hidden by a deny anchor, or visible
    /// again through an exception or a write grant.
    pub fn is_readable(&self, path: &AbsPathBuf) -> bool {
        let hidden = self.read_deny.iter().any(|a| {
            path.starts_with(&a.path) && !a.exceptions.iter().any(|e| path.starts_with(&e.path))
        });
        !hidden
    }

    /// The deny anchor hiding `path`, if any.
    pub fn anchor_hiding(&self, path: &AbsPathBuf) -> Option<&DenyAnchor> {
        self.read_deny.iter().find(|a| {
            path.starts_with(&a.path) && !a.exceptions.iter().any(|e| path.starts_with(&e.path))
        })
    }
}

fn serialize_env<S: serde::Serializer>(
    env: &[(OsString, OsString)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    struct Pair<'a>(&'a OsString, &'a OsString);
    impl Serialize for Pair<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeTuple;
            struct One<'a>(&'a OsString);
            impl Serialize for One<'_> {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    serialize_os_str(self.0, s)
                }
            }
            let mut t = s.serialize_tuple(2)?;
            t.serialize_element(&One(self.0))?;
            t.serialize_element(&One(self.1))?;
            t.end()
        }
    }
    let mut seq = s.serialize_seq(Some(env.len()))?;
    for (k, v) in env {
        seq.serialize_element(&Pair(k, v))?;
    }
    seq.end()
}
