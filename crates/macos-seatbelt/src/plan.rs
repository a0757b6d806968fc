//! [`MacosSeatbelt`]: the [`Backend`] that turns a resolved policy into a `sandbox-exec`
//! command line. Pure: it runs and compiles on every OS, so the macOS plan is printed and
//! snapshot-tested on Linux too.

use std::ffi::OsString;

use paddock_policy::{
    AbsPathBuf, Backend, BridgeSpec, Error, HostFacts, NetworkPolicy, Placeholder, ResolvedPolicy,
    SpawnPlan, Task,
};

use crate::profile::Profile;

/// The backend's name as the CLI spells it.
pub const BACKEND_NAME: &str = "macos-seatbelt";

/// Where macOS keeps `sandbox-exec`.
///
/// An absolute constant, never a `PATH` lookup: the program that applies the sandbox runs
/// before any wall exists, so a `sandbox-exec` planted earlier in `PATH` (by a previous task
/// writing to a granted `bin` directory, say) would run unsandboxed with the task's argv.
/// `/usr/bin` is on the sealed system volume, which no user process can change.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The first loopback port the egress proxy may be given; each task gets one of
/// [`PROXY_PORT_SPAN`] ports above it, derived from its runtime directory.
///
/// macOS has no network namespace: the proxy listens on the host's own `127.0.0.1`, so two
/// concurrent tasks need two ports. The port is a pure function of the task (plans are
/// data); the runner binds it before the task starts and refuses to start the task if it
/// is taken (fail closed, never a shared proxy).
pub const PROXY_PORT_BASE: u16 = 30000;
/// How many ports [`PROXY_PORT_BASE`] starts.
pub const PROXY_PORT_SPAN: u16 = 10000;

/// The macOS seatbelt backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct MacosSeatbelt;

impl MacosSeatbelt {
    /// The backend.
    pub fn new() -> MacosSeatbelt {
        MacosSeatbelt
    }
}

/// FNV-1a over the bytes of the task's runtime directory: stable across runs and OSes.
fn task_hash(task: &Task) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in task.runtime_dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The tag every denial of this task carries in the system log (`(with message ...)`), which
/// the violation monitor filters on: `paddock-` and 16 hex digits derived from the task's
/// runtime directory, unique per task.
pub fn log_tag(task: &Task) -> String {
    format!("paddock-{:016x}", task_hash(task))
}

/// The egress proxy's loopback port for `task` (see [`PROXY_PORT_BASE`]).
pub fn proxy_port(task: &Task) -> u16 {
    // The remainder is below PROXY_PORT_SPAN, so it fits a u16.
    let offset = u16::try_from((task_hash(task) >> 16) % u64::from(PROXY_PORT_SPAN)).unwrap_or(0);
    PROXY_PORT_BASE + offset
}

/// The task's private temporary directory: `TMPDIR` points there and it is writable.
pub fn task_tmpdir(task: &Task) -> AbsPathBuf {
    task.runtime_dir.join("tmp")
}

impl Backend for MacosSeatbelt {
    fn name(&self) -> &'static str {
        BACKEND_NAME
    }

    fn plan(
        &self,
        policy: &ResolvedPolicy,
        task: &Task,
        facts: &HostFacts,
    ) -> Result<SpawnPlan, Error> {
        let filtered = matches!(policy.network, NetworkPolicy::Filtered { .. });
        let port = filtered.then(|| proxy_port(task));
        let profile = Profile::build(policy, task, &log_tag(task), port)?;

        let program = AbsPathBuf::new_lexical(SANDBOX_EXEC).ok_or_else(|| Error::Plan {
            backend: BACKEND_NAME,
            message: "bad sandbox-exec path".into(),
        })?;
        let mut argv = vec![OsString::from("sandbox-exec")];
        argv.extend(profile.args());
        argv.push(OsString::from("--"));
        argv.push(task.program.clone());
        argv.extend(task.args.iter().cloned());

        let mut bridges = Vec::new();
        if let Some(port) = port {
            bridges.push(BridgeSpec::Proxy { port, socket: task.runtime_dir.join("proxy.sock") });
        }

        let mut diagnostics = Vec::new();
        if !facts.sandbox_exec {
            diagnostics.push(format!(
                "{SANDBOX_EXEC} was not found on this host: the plan is shown, but it runs on macOS only"
            ));
        }
        if !policy.local_ports.is_empty() {
            diagnostics.push(
                "allow.local-ports: macOS has no network namespace, so the task binds the host's \
                 ports directly; a server bound to every interface (0.0.0.0, ::) on a granted \
                 port is reachable from the network too: bind 127.0.0.1 to keep it local"
                    .to_owned(),
            );
        }

        Ok(SpawnPlan {
            backend: BACKEND_NAME,
            program,
            argv,
            env: crate::env::task_env(policy, task, port),
            cwd: task.cwd.clone(),
            payloads: Vec::new(),
            signal_fd: None,
            bridges,
            placeholders: vec![Placeholder { path: task_tmpdir(task), dir: true }],
            diagnostics,
            observer: None,
            link_mounts: Vec::new(),
            self_mounts: Vec::new(),
            device_fds: None,
            file_fds: Vec::new(),
            grant_clones: Vec::new(),
        })
    }
}
