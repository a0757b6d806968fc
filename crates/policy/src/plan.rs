//! `SpawnPlan`: what a backend decided to run, as plain data.
//!
//! A plan is everything needed to start the sandboxed task and nothing that needs the OS to
//! describe: the program and argv, the complete environment, the working directory, the
//! payloads handed to the child on numbered file descriptors (a seccomp program, a seatbelt
//! profile, the supervisor's instructions), the bridges to start and the host paths the
//! runner must create before and remove after. It prints as JSON (`paddock plan --json`), so
//! what is enforced is visible and snapshot-tested on every OS.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use crate::path::{AbsPathBuf, serialize_os_str, serialize_os_strings};

/// A plan to start one sandboxed task.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SpawnPlan {
    /// The backend that made it.
    pub backend: &'static str,
    /// The program to execute, by absolute path (never looked up in `PATH` at spawn time).
    pub program: AbsPathBuf,
    /// argv, including argv\[0\].
    #[serde(serialize_with = "serialize_os_strings")]
    pub argv: Vec<OsString>,
    /// The complete environment of the spawned program (it starts from an empty one).
    #[serde(serialize_with = "serialize_env_pairs")]
    pub env: Vec<(OsString, OsString)>,
    /// The working directory to spawn in (on the host).
    pub cwd: AbsPathBuf,
    /// Data handed to the child on file descriptors; every other descriptor is closed.
    pub payloads: Vec<Payload>,
    /// Where the child gets the read end of the runner's signal pipe, if the plan has a
    /// supervisor: the runner writes one byte per polite signal (the signal number) and the
    /// supervisor signals the task's process group with it.
    pub signal_fd: Option<i32>,
    /// Bridges the runner starts before the task and stops after it.
    pub bridges: Vec<BridgeSpec>,
    /// Host paths the runner creates before the spawn and removes after the task, in order
    /// (mount points for protected names that do not exist yet).
    pub placeholders: Vec<Placeholder>,
    /// Notes for the user about how the policy is enforced (weaker walls, dropped grants).
    pub diagnostics: Vec<String>,
    /// The observers that itemize denials without strace, when the task asked for them
    /// ([`Task::observe`]) and the backend has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observer: Option<ObserverPlan>,
    /// Protected names that are symbolic links inside a write grant, each mounted read-only
    /// on itself before the sandbox starts, so that the task can neither remove nor replace
    /// the link (Linux: the runner's child, with the new mount API; a bind of bubblewrap's
    /// would land on the target).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub link_mounts: Vec<AbsPathBuf>,
    /// Paths bound onto themselves below a write grant (protected paths read-only, pinned
    /// directories as they are), and the masks of hidden files there, that the runner mounts before the sandbox starts, in mount
    /// order, rather than the sandbox tool (Linux: the runner's child, with the new mount
    /// API, which reads no mount table; bubblewrap's recursive bind of the grant carries
    /// them into the sandbox).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub self_mounts: Vec<SelfMount>,
    /// The first of the descriptors on which the child gets clones of the host's device
    /// nodes, made by the runner, for the sandbox's supervisor to attach in its `/dev`
    /// (Linux: `paddock_linux_bwrap::devices`); `None` when the sandbox tool makes `/dev`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_fds: Option<i32>,
    /// Host files the runner opens read-only on these descriptors in the child, for the
    /// sandbox tool to copy in rather than bind (Linux: the supervisor without a C library,
    /// copied into the sandbox's private `/dev`; a bind reads the whole mount table).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub file_fds: Vec<FileFd>,
    /// The write grants the runner clones, each with everything mounted below it, and
    /// hands the sandbox's supervisor (Linux: on the signal channel, in this order) to attach
    /// in place of the sandbox tool's binds (Linux: `paddock_linux_bwrap::grant_clones`;
    /// each bind reads the whole mount table).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grant_clones: Vec<GrantClone>,
}

/// A write grant the runner clones for the supervisor to attach ([`SpawnPlan::grant_clones`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GrantClone {
    /// The granted directory, the same on the host and in the sandbox.
    pub path: AbsPathBuf,
    /// Every mount the supervisor makes below it, in mount order, when each is a path bound
    /// onto itself (a protected path read-only, a pinned directory as it is): the runner may
    /// make them in its clone before it hands it over, and then says so. Empty when the
    /// supervisor makes another kind of mount there, or none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub within: Vec<SelfMount>,
}

/// A host file the child gets open, read-only, on a descriptor ([`SpawnPlan::file_fds`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct FileFd {
    /// The descriptor number in the child.
    pub fd: i32,
    /// The host file.
    pub path: AbsPathBuf,
}

/// A path mounted onto itself before the sandbox starts ([`SpawnPlan::self_mounts`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SelfMount {
    /// The path (the same on the host and in the sandbox).
    pub path: AbsPathBuf,
    /// Read-only (a protected path, a mask), or writable (a pinned directory: a mount point
    /// cannot be renamed or removed).
    pub read_only: bool,
    /// What is mounted there: the path itself (`None`), or this file (the empty masked
    /// file over a hidden one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<AbsPathBuf>,
}

impl SpawnPlan {
    /// The first descriptor number above every one the plan hands its child (payloads, the
    /// signal channel, the observer's records, bridge channels), and above 2: where a
    /// runner may put a descriptor of its own without a collision.
    pub fn free_fd(&self) -> i32 {
        let bridges = self.bridges.iter().filter_map(|b| match b {
            BridgeSpec::Inbound { fd, .. } => Some(*fd),
            BridgeSpec::Outbound { .. } | BridgeSpec::Proxy { .. } => None,
        });
        let highest = self
            .payloads
            .iter()
            .map(|p| p.fd)
            .chain(self.signal_fd)
            .chain(self.file_fds.iter().map(|f| f.fd))
            .chain(self.observer.as_ref().map(|o| o.record_fd))
            .chain(bridges)
            .max()
            .unwrap_or(2);
        highest.max(2) + 1
    }
}

/// How the runner serves the observers of an `--itemize observe` run (Linux).
///
/// The runner opens `/dev/fuse`, serves the observer filesystem on it for the task's lifetime
/// and, in the child just before it executes the plan's program, mounts it at `mount_dir` in
/// a private mount namespace (and a user namespace of its own when not root), so the mount
/// never appears in the host's mount table. The plan binds `mount_dir/a{i}` over
/// `anchors[i]`. The sandbox's supervisor writes its write/connect records on `record_fd`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObserverPlan {
    /// The (empty, runner-created) directory the observer filesystem is mounted on.
    pub mount_dir: AbsPathBuf,
    /// One entry per directory deny anchor, served at `mount_dir/a{index}`.
    pub anchors: Vec<ObservedAnchor>,
    /// The file deny anchors, served at `mount_dir/f{index}` as empty files whose every
    /// open is recorded and refused (`EACCES`), in place of the shared masked file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<AbsPathBuf>,
    /// The descriptor in the child on which the supervisor writes its records; the runner
    /// keeps the read end.
    pub record_fd: i32,
}

/// A directory deny anchor served by the observer filesystem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObservedAnchor {
    /// The anchor (the same path on the host and in the sandbox).
    pub path: AbsPathBuf,
    /// The mount points the anchor's exceptions need, relative to the anchor, parents
    /// before children: a directory or an (empty) file node each. Everything else under
    /// the anchor does not exist, and every attempt to find, list or change it is recorded.
    pub nodes: Vec<ObservedNode>,
}

/// One node the observer filesystem serves under an anchor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObservedNode {
    /// The path relative to the anchor (no `.` or `..` components).
    pub rel: PathBuf,
    /// A directory (else an empty regular file).
    pub dir: bool,
}

/// Bytes the child reads from a numbered file descriptor.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Payload {
    /// What it is, for people (`bwrap-args`, `supervisor`, `seccomp-bpf`).
    pub name: String,
    /// The descriptor number in the child.
    pub fd: i32,
    /// The bytes.
    #[serde(serialize_with = "serialize_payload")]
    pub bytes: Vec<u8>,
}

/// A relay between the host and the sandbox, started by the runner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum BridgeSpec {
    /// Host `127.0.0.1:PORT` accepts connections for each of `ports` and hands each one over
    /// (the connected socket itself) to the sandbox, which relays it to the task's loopback
    /// port (`allow.local-ports`).
    Inbound {
        /// The ports, the same on both sides.
        ports: Vec<u16>,
        /// The descriptor in the child on which the sandbox receives the connections: the
        /// runner keeps the other end of a socket pair it creates for the run.
        fd: i32,
    },
    /// The task's `127.0.0.1:port` reaches the host's `127.0.0.1:port` (`allow.host-ports`).
    Outbound {
        /// The port on both sides.
        port: u16,
        /// The unix socket (in the runtime dir) the host end serves.
        socket: AbsPathBuf,
    },
    /// The egress proxy for a domain list, served on a unix socket and exposed in the task
    /// on `127.0.0.1:port`.
    Proxy {
        /// The loopback port inside the task.
        port: u16,
        /// The unix socket (in the runtime dir) the proxy serves.
        socket: AbsPathBuf,
    },
}

/// A host path created for the task's lifetime only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Placeholder {
    /// The path.
    pub path: AbsPathBuf,
    /// Directory or empty file.
    pub dir: bool,
}

/// A task: what to run, where.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Task {
    /// The program as given (looked up in `PATH` inside the sandbox when it has no `/`).
    #[serde(serialize_with = "serialize_os_str")]
    pub program: OsString,
    /// Its arguments.
    #[serde(serialize_with = "serialize_os_strings")]
    pub args: Vec<OsString>,
    /// The working directory (canonical).
    pub cwd: AbsPathBuf,
    /// The task's runtime directory: sockets, lock file, private tmp. Short, so that socket
    /// paths fit in 108 bytes.
    pub runtime_dir: AbsPathBuf,
    /// Itemize denials with the observers ([`ObserverPlan`]) rather than strace.
    pub observe: bool,
}

/// Facts about the host a backend plans from, collected by the platform crate's probe.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct HostFacts {
    /// bubblewrap's absolute path, if found.
    pub bwrap: Option<PathBuf>,
    /// bubblewrap's version, `(major, minor, patch)`.
    pub bwrap_version: Option<(u32, u32, u32)>,
    /// strace's absolute path, if found.
    pub strace: Option<PathBuf>,
    /// Whether strace knows `--seccomp-bpf`.
    pub strace_seccomp_bpf: bool,
    /// The absolute path of the paddock executable (re-executed as the supervisor).
    pub self_exe: Option<PathBuf>,
    /// A dedicated supervisor executable (`paddock-supervisor` next to `self_exe`): run as
    /// the supervisor instead of re-executing `self_exe` when present.
    pub supervisor_exe: Option<PathBuf>,
    /// The supervisor without a C library (`paddock-supervisor-nolibc` next to `self_exe`):
    /// run instead of `supervisor_exe` by runs that trace nothing and need no relays.
    pub supervisor_nolibc_exe: Option<PathBuf>,
    /// Whether a fresh `/proc` can be mounted in a new pid namespace.
    pub fresh_proc: bool,
    /// Whether user namespaces can be created.
    pub user_namespaces: bool,
    /// The effective uid of the runner.
    pub uid: u32,
    /// `/usr/bin/sandbox-exec` exists (macOS).
    pub sandbox_exec: bool,
    /// Whether the observers (`--itemize observe`: a FUSE mount in a private namespace and
    /// seccomp user notifications) work here. The probe says why not.
    pub observe: bool,
    /// Whether the runner may clone mounts of its own namespace (`open_tree`: Linux 5.2 and
    /// `CAP_SYS_ADMIN` there), so that the sandbox's devices, and write grants
    /// ([`SpawnPlan::grant_clones`]), are clones it hands the supervisor rather than binds the
    /// sandbox tool makes one by one.
    pub clone_mounts: bool,
}

fn serialize_env_pairs<S: serde::Serializer>(
    env: &[(OsString, OsString)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    struct Key<'a>(&'a OsString);
    impl Serialize for Key<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&crate::path::DisplayBytes(self.0))
        }
    }
    struct Val<'a>(&'a OsString);
    impl Serialize for Val<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_os_str(self.0, s)
        }
    }
    let mut map = s.serialize_map(Some(env.len()))?;
    for (k, v) in env {
        map.serialize_entry(&Key(k), &Val(v))?;
    }
    map.end()
}

/// Payloads print as text when they are UTF-8 (argv files, JSON, SBPL) and as a byte count
/// otherwise (a BPF program), so that a printed plan stays readable.
fn serialize_payload<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => s.serialize_str(&text.replace('\0', "\u{2400}")),
        Err(_) => s.serialize_str(&format!("<{} bytes>", bytes.len())),
    }
}
