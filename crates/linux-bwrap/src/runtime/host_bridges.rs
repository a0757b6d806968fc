//! The host ends of a plan's bridges (DESIGN decision 4): started before the task, stopped
//! after it, their refusals turned into the run's network violations.
//!
//! - [`BridgeSpec::Proxy`]: the egress proxy ([`Proxy`]) serving the task's socket in its
//!   runtime dir with the task's own [`TaskRules`] and its own refusals; the supervisor
//!   exposes it on the sandbox's loopback. One proxy serves every run that shares a
//!   [`SharedProxy`]: started by the first run that needs it, stopped with the last.
//! - [`BridgeSpec::Outbound`] (`allow.host-ports`): the socket relays to host
//!   `127.0.0.1:PORT`.
//! - [`BridgeSpec::Inbound`] (`allow.local-ports`): host `127.0.0.1:PORT` hands every
//!   client over a socket pair to the supervisor, which relays it to the task's server. A
//!   port busy on the host is an error before the task starts. The sandbox's end of the pair
//!   is [`Bridges::inherited`], for the spawn.
//!
//! Everything stops when [`Bridges`] is dropped (listeners closed, sockets removed, threads
//! joined); after a `kill -9` of paddock the sockets go with the runtime dir's sweep.

use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::{BridgeSpec, ReportFilter, ResolvedPolicy, SpawnPlan, Violation};
use paddock_portbridge::{
    Proxy, Refusal, RelayHandle, RelayOptions, TaskHandle, TaskRules, TcpHandoff, UnixToTcp,
    handoff_channel,
};

/// One egress proxy for the runs holding clones of this handle (portbridge's).
pub use paddock_portbridge::SharedProxy;

/// The running host ends of a plan's bridges.
#[derive(Debug, Default)]
pub struct Bridges {
    relays: Vec<RelayHandle>,
    // The sandbox's ends of handoff channels, with their descriptor numbers in the child.
    inherited: Vec<(Arc<OwnedFd>, RawFd)>,
    // The task is dropped before the proxy (field order).
    task: Option<TaskHandle>,
    proxy: Option<Arc<Proxy>>,
}

impl Bridges {
    /// Starts every bridge of `plan`, all or none, the egress proxy through `proxy`. Socket
    /// directories are created (mode 0700) as needed.
    pub fn start(
        plan: &SpawnPlan,
        policy: &ResolvedPolicy,
        proxy: &SharedProxy,
    ) -> Result<Bridges> {
        let mut running = Bridges::default();
        for bridge in &plan.bridges {
            match bridge {
                BridgeSpec::Proxy { socket, .. } => {
                    let rules = TaskRules::from_policy(&policy.network).context(
                        "the plan has an egress proxy but the policy's network is not a domain list",
                    )?;
                    socket_dir(socket.as_path())?;
                    let proxy = proxy.get().context("cannot start the egress proxy")?;
                    let task = proxy
                        .add_task(socket.as_path(), rules)
                        .context("cannot start the egress proxy")?;
                    running.proxy = Some(proxy);
                    running.task = Some(task);
                }
                BridgeSpec::Outbound { port, socket } => {
                    socket_dir(socket.as_path())?;
                    let target = std::net::SocketAddr::from(([127, 0, 0, 1], *port));
                    let relay = UnixToTcp::start(socket.as_path(), target, RelayOptions::default())
                        .with_context(|| format!("allow.host-ports {port}"))?;
                    running.relays.push(relay);
                }
                BridgeSpec::Inbound { ports, fd } => {
                    // Clients that come before the supervisor reads wait in the channel.
                    let (host_end, sandbox_end) =
                        handoff_channel().context("cannot create the inbound channel")?;
                    let relay = TcpHandoff::start(ports, host_end).context("allow.local-ports")?;
                    running.relays.push(relay);
                    running.inherited.push((Arc::new(sandbox_end), *fd));
                }
            }
        }
        Ok(running)
    }

    /// The descriptors the sandbox must inherit (see [`RunOptions::inherit`]).
    ///
    /// [`RunOptions::inherit`]: crate::runtime::supervise::RunOptions::inherit
    pub fn inherited(&self) -> Vec<(Arc<OwnedFd>, RawFd)> {
        self.inherited.clone()
    }

    /// Whether a proxy runs: its refusals are itemized even without a tracer.
    pub fn has_proxy(&self) -> bool {
        self.task.is_some()
    }

    /// Stops everything and returns the proxy's refusals as network violations, less those
    /// `ignore.network` silences (they were refused all the same).
    ///
    /// A violation has no place for the proxy's reason, and the run's summary suggests
    /// `allow.network` for every refused destination. Where that is not the cure (a granted
    /// name that resolved into the LAN, a `deny.network` match, a TLS server name that
    /// differs from the tunnel's), the reason is returned beside the violations, at most
    /// [`MAX_REFUSAL_NOTES`](paddock_portbridge::MAX_REFUSAL_NOTES) lines.
    pub fn stop(mut self, policy: &ResolvedPolicy) -> (Vec<Violation>, Vec<String>) {
        self.relays.clear();
        let refusals = self.task.take().map(TaskHandle::stop).unwrap_or_default();
        drop(self.proxy.take());
        if refusals.is_empty() {
            // The filter compiles the policy's globs: not for nothing to filter.
            return (Vec::new(), paddock_portbridge::refusal_notes(&[]));
        }
        let filter = ReportFilter::new(policy);
        let kept: Vec<Refusal> =
            refusals.into_iter().filter(|r| filter.keep(&r.violation, None)).collect();
        let reasons = paddock_portbridge::refusal_notes(&kept);
        (kept.into_iter().map(|r| r.violation).collect(), reasons)
    }
}

/// Creates the directory of a bridge socket (in the runtime dir), private.
fn socket_dir(socket: &Path) -> Result<()> {
    let Some(dir) = socket.parent() else { return Ok(()) };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
}
