//! The supervisor's instructions: what the task is, as JSON on a numbered descriptor.
//!
//! The task's argv, environment and working directory never appear in bubblewrap's argv or
//! environment (`/proc/1/cmdline` and `/proc/1/environ` are readable inside the sandbox,
//! ENV-02): they travel here, on a descriptor the supervisor reads and closes before the
//! task starts. Byte strings stay bytes: a value that is not UTF-8 is written as
//! `{"hex": "..."}`.

use std::ffi::OsString;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// An `OsString` that serializes as text when it is UTF-8 and as hex otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub OsString);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        paddock_policy::serialize_os_str(&self.0, s)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BytesRepr {
    Text(String),
    Hex { hex: String },
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        match BytesRepr::deserialize(d)? {
            BytesRepr::Text(text) => Ok(Bytes(OsString::from(text))),
            BytesRepr::Hex { hex } => {
                let raw = unhex(&hex)
                    .ok_or_else(|| serde::de::Error::custom("invalid hex byte string"))?;
                bytes_to_os(raw)
                    .map(Bytes)
                    .ok_or_else(|| serde::de::Error::custom("non-UTF-8 bytes on this OS"))
            }
        }
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let val = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    digits.chunks(2).map(|pair| Some(val(pair[0])? << 4 | val(pair[1])?)).collect()
}

#[cfg(unix)]
fn bytes_to_os(raw: Vec<u8>) -> Option<OsString> {
    use std::os::unix::ffi::OsStringExt;
    Some(OsString::from_vec(raw))
}

#[cfg(not(unix))]
fn bytes_to_os(raw: Vec<u8>) -> Option<OsString> {
    String::from_utf8(raw).ok().map(OsString::from)
}

/// The version every supervisor payload carries, checked by the supervisor.
pub const PAYLOAD_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the supervisor runs, and where its other inputs are. The default is no payload a
/// supervisor runs (no version, no program): a base for the fields a test sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SupervisorPayload {
    /// The version of this crate that made the plan ([`PAYLOAD_VERSION`]): a supervisor of
    /// another version refuses it (a `paddock-supervisor` left over from another install).
    #[serde(default)]
    pub version: String,
    /// The program as given: looked up in the task's `PATH` when it has no `/`.
    pub program: Bytes,
    /// Its arguments (argv\[0\] is the program as given).
    pub args: Vec<Bytes>,
    /// The task's complete environment.
    pub env: Vec<(Bytes, Bytes)>,
    /// The working directory inside the sandbox.
    pub cwd: Bytes,
    /// The descriptor holding the BPF program (raw `sock_filter` array, little endian).
    pub seccomp_fd: i32,
    /// The descriptor polite signals arrive on (one byte: the signal number).
    pub signal_fd: Option<i32>,
    /// The relays the supervisor runs inside the sandbox (port grants, the proxy's port),
    /// started before the task runs and stopped when it is done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relays: Vec<SandboxRelay>,
    /// `--itemize observe`: the descriptor the supervisor writes its write/connect records
    /// on (see `ObserverPlan::record_fd`); it then installs the notification filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_fd: Option<i32>,
    /// With `record_fd`: `connect` is notified and recorded (the network is not fully on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record_connects: bool,
    /// With `record_fd`: `socket(AF_UNIX)` is notified, recorded and refused with `EPERM` by
    /// the supervisor (the main filter lets it through: see
    /// `FilterOptions::unix_sockets_notified`). Installing that filter failing is fatal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_unix_sockets: bool,
    /// `allow.unix-sockets` as a list of paths: the supervisor installs the notification
    /// filter whatever the itemizing, and connects the task's `AF_UNIX` sockets to these
    /// alone (see `notify::unix`). Non-empty only on kernels with `pidfd_getfd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unix_socket_grants: Vec<UnixSocketGrant>,
    /// With `unix_socket_grants`: the sandbox shares the host's network namespace
    /// (`--network on`), so abstract unix addresses are the host's and are refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unix_abstract_shared: bool,
    /// The runner attaches strace to the supervisor before the task starts (see
    /// `trace::attach`): the supervisor sends [`crate::supervisor::TRACE_ME`] up the signal
    /// channel and forks the task only once [`crate::supervisor::TRACED`] comes back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_tracer: bool,
    /// strace runs inside the sandbox, started by the supervisor's child in place of the
    /// task (see `trace::inside`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strace_inside: Option<StraceInside>,
    /// The descriptor holding the identities of the paths bwrap bound onto themselves,
    /// stamped by the runner: the supervisor checks them before the task starts and refuses
    /// to start it on a difference (see [`crate::mount_ids`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_ids_fd: Option<i32>,
    /// Paths the supervisor binds onto themselves once bwrap is done, in this order, in a
    /// mount namespace of its own (bwrap holds `CAP_SYS_ADMIN` and `CAP_SETPCAP` for it, and
    /// the supervisor empties every capability set right after): three system calls each,
    /// where bwrap reads and parses the whole mount table for every bind. See
    /// [`crate::ops::inner_mountable`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inner_mounts: Vec<InnerMount>,
    /// A prewarmed sandbox: the task is not known yet. Once everything is mounted and
    /// checked, the supervisor waits on this socket for one [`TaskHandover`] and the task's
    /// stdin, stdout and stderr (`SCM_RIGHTS`), which replace the payload's program,
    /// arguments, environment and working directory, and its own standard streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_fd: Option<i32>,
}

/// A path the supervisor binds onto itself ([`SupervisorPayload::inner_mounts`]): `nosuid`,
/// `nodev`, with everything mounted below it, and read-only unless it is a pinned directory;
/// or a hidden file it masks with an empty mode-0000 file (made at
/// [`crate::INNER_MASK_PATH`] before the first mask and removed after the last: the same
/// empty mode-0000 file every hidden path shows).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct InnerMount {
    /// The path, the same in the sandbox and on the host.
    pub path: Bytes,
    /// Read-only (a protected path, a mask), or as it is (a pinned directory).
    pub read_only: bool,
    /// The masked file over a hidden file, not the path onto itself (read-only, alone).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mask: bool,
    /// An empty read-only directory over a hidden directory (a fresh tmpfs, mode 0755, as
    /// bwrap's `--tmpfs` and `--remount-ro` make it), not the path onto itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_dir: bool,
    /// The sandbox's devices in bwrap's bare tmpfs at the path (`/dev`), from the clones the
    /// runner hands on descriptors (see [`crate::devices`]), not the path onto itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub devices: bool,
    /// The runner's clone of the write grant at the path (with everything mounted below it,
    /// `nosuid`, `nodev`), received on the signal channel, attached onto it in place of
    /// bwrap's bind (see [`crate::devices`]); the mount identities check it after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grant_clone: bool,
    /// A path onto itself below a grant the runner clones, which the runner makes in its
    /// clone where it can (`paddock_policy::GrantClone::within`): made only when the clone
    /// came without it (`crate::grant_clones::MOUNTED`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_grant_clone: bool,
}

impl InnerMount {
    /// `path` bound onto itself: read-only (a protected path), or as it is (a pinned
    /// directory). The other kinds are this with their flag set.
    pub fn on_itself(path: impl Into<std::ffi::OsString>, read_only: bool) -> InnerMount {
        InnerMount {
            path: Bytes(path.into()),
            read_only,
            mask: false,
            empty_dir: false,
            devices: false,
            grant_clone: false,
            in_grant_clone: false,
        }
    }
}

/// The task of a prewarmed sandbox ([`SupervisorPayload::task_fd`]), as the runner hands it
/// over.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskHandover {
    /// The program as given.
    pub program: Bytes,
    /// Its arguments (argv\[0\] is the program as given).
    pub args: Vec<Bytes>,
    /// The task's complete environment.
    pub env: Vec<(Bytes, Bytes)>,
    /// The working directory inside the sandbox.
    pub cwd: Bytes,
}

impl TaskHandover {
    /// The JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain strings into a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses the JSON bytes received on `fd`.
    pub fn from_bytes(bytes: &[u8], fd: i32) -> Result<TaskHandover, Error> {
        serde_json::from_slice(bytes).map_err(|e| Error::Payload { fd, message: e.to_string() })
    }
}

/// One granted unix socket: the names a task's address may resolve to, and the path the
/// supervisor connects to (never the task's own bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct UnixSocketGrant {
    /// As written, anchored and normalized (`/var/run/docker.sock`).
    pub declared: Bytes,
    /// Canonical (`/run/docker.sock`): where the supervisor connects.
    pub resolved: Bytes,
}

/// strace inside the sandbox: the supervisor's child executes `program` with `args`, then
/// the shim and the task's argv; strace (`-DD`) leaves the child the tracee, so the task
/// stays the supervisor's own child, and the shim loads the task's filter and executes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StraceInside {
    /// strace's path inside the sandbox.
    pub program: Bytes,
    /// strace's arguments after argv\[0\], ending with the `--` before the command.
    pub args: Vec<Bytes>,
    /// The descriptor strace writes its log to (named in `args` as `/proc/self/fd/N`).
    pub log_fd: i32,
}

/// A relay run by the supervisor inside the sandbox. The supervisor is not under the task's
/// seccomp filter, so it may use unix sockets the task cannot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SandboxRelay {
    /// Listen on the sandbox's `127.0.0.1:port` and relay each client to `socket`, which
    /// the host serves (the egress proxy, an `allow.host-ports` grant).
    TcpToUnix {
        /// The loopback port inside the sandbox.
        port: u16,
        /// The socket's path inside the sandbox.
        socket: Bytes,
    },
    /// Receive the connections the host accepted on its `127.0.0.1:PORT` for each of
    /// `ports`, handed over on descriptor `fd`, and relay each to the task's `127.0.0.1:PORT`
    /// (`allow.local-ports`).
    Inbound {
        /// The descriptor the connections arrive on.
        fd: i32,
        /// The granted ports.
        ports: Vec<u16>,
    },
}

impl SupervisorPayload {
    /// The JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain strings and numbers into a Vec cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Parses the JSON bytes read from `fd`.
    pub fn from_bytes(bytes: &[u8], fd: i32) -> Result<SupervisorPayload, Error> {
        serde_json::from_slice(bytes).map_err(|e| Error::Payload { fd, message: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_non_utf8_bytes() {
        #[cfg(unix)]
        let odd = {
            use std::os::unix::ffi::OsStringExt;
            OsString::from_vec(b"a\xffb".to_vec())
        };
        #[cfg(not(unix))]
        let odd = OsString::from("ab");
        let p = SupervisorPayload {
            version: crate::payload::PAYLOAD_VERSION.to_owned(),
            program: Bytes("sh".into()),
            args: vec![Bytes("sh".into()), Bytes(odd.clone())],
            env: vec![(Bytes("K".into()), Bytes(odd))],
            cwd: Bytes("/p".into()),
            seccomp_fd: 5,
            signal_fd: Some(6),
            relays: vec![
                SandboxRelay::TcpToUnix { port: 3128, socket: Bytes("/dev/x/proxy".into()) },
                SandboxRelay::Inbound { fd: 8, ports: vec![80, 8080] },
            ],
            record_fd: Some(7),
            record_connects: true,
            refuse_unix_sockets: true,
            unix_socket_grants: vec![UnixSocketGrant {
                declared: Bytes("/var/run/docker.sock".into()),
                resolved: Bytes("/run/docker.sock".into()),
            }],
            unix_abstract_shared: true,
            wait_for_tracer: true,
            strace_inside: Some(StraceInside {
                program: Bytes("/dev/.paddock-strace".into()),
                args: vec![Bytes("-f".into()), Bytes("--".into())],
                log_fd: 9,
            }),
            mount_ids_fd: Some(10),
            inner_mounts: vec![
                InnerMount::on_itself("/p/.git", false),
                InnerMount { mask: true, ..InnerMount::on_itself("/p/conf/key.pem", true) },
                InnerMount { empty_dir: true, ..InnerMount::on_itself("/home/u/.ssh", true) },
            ],
            task_fd: None,
        };
        let back = SupervisorPayload::from_bytes(&p.to_bytes(), 4).unwrap();
        assert_eq!(back, p);
        assert!(SupervisorPayload::from_bytes(b"{", 4).unwrap_err().to_string().contains("fd 4"));
    }
}
