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
use std::sync::{Arc, Mutex, Weak};

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::{BridgeSpec, ReportFilter, ResolvedPolicy, SpawnPlan, Violation};
use paddock_portbridge::{
    Proxy, ProxyOptions, Refusal, RefusalReason, RelayHandle, RelayOptions, SystemResolver,
    TaskHandle, TaskRules, TcpHandoff, UnixToTcp, handoff_channel,
};

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

/// One egress proxy for the runs holding clones of this handle: started on the first run
/// that needs it, stopped when the last run using it ends. Shared by handle, never through
/// a global: a caller decides which runs share one.
#[derive(Clone, Debug, Default)]
pub struct SharedProxy(Arc<Mutex<Weak<Proxy>>>);

impl SharedProxy {
    /// A handle on no proxy yet.
    pub fn new() -> SharedProxy {
        SharedProxy::default()
    }

    /// The running proxy, started now if no run uses one.
    fn get(&self) -> Result<Arc<Proxy>> {
        let mut slot =
            self.0.lock().map_err(|_| crate::Error::run("the egress proxy's lock is poisoned"))?;
        if let Some(proxy) = slot.upgrade() {
            return Ok(proxy);
        }
        let proxy = Arc::new(
            Proxy::start(Arc::new(SystemResolver), ProxyOptions::default())
                .context("cannot start the egress proxy")?,
        );
        *slot = Arc::downgrade(&proxy);
        Ok(proxy)
    }

    /// Whether a proxy runs now (some run uses it).
    pub fn running(&self) -> bool {
        self.0.lock().is_ok_and(|slot| slot.strong_count() > 0)
    }
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
                    let proxy = proxy.get()?;
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
    /// differs from the tunnel's), the reason is returned beside the violations, at most [`MAX_REASONS`] lines.
    pub fn stop(mut self, policy: &ResolvedPolicy) -> (Vec<Violation>, Vec<String>) {
        self.relays.clear();
        let refusals = self.task.take().map(TaskHandle::stop).unwrap_or_default();
        drop(self.proxy.take());
        let filter = ReportFilter::new(policy);
        let kept: Vec<Refusal> =
            refusals.into_iter().filter(|r| filter.keep(&r.violation, None)).collect();
        let reasons = reason_lines(&kept);
        (kept.into_iter().map(|r| r.violation).collect(), reasons)
    }
}

/// Lines printed for refusals whose reason the summary would not tell.
const MAX_REASONS: usize = 10;

fn reason_lines(refusals: &[Refusal]) -> Vec<String> {
    let telling: Vec<&Refusal> = refusals
        .iter()
        .filter(|r| !matches!(r.reason, RefusalReason::NotAllowed | RefusalReason::IpNotListed))
        .collect();
    let mut lines: Vec<String> = telling
        .iter()
        .take(MAX_REASONS)
        .map(|r| {
            let target = r.violation.target.as_deref().unwrap_or("(unknown)");
            format!("the proxy refused {}: {}", target.escape_debug(), r.reason)
        })
        .collect();
    if telling.len() > MAX_REASONS {
        lines.push(format!("the proxy refused {} more destinations", telling.len() - MAX_REASONS));
    }
    lines
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

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_policy::ViolationKind;

    fn refusal(target: &str, reason: RefusalReason) -> Refusal {
        let violation = Violation {
            kind: ViolationKind::Network,
            path: None,
            target: Some(target.to_owned()),
            syscall: None,
            errno: None,
            count: 1,
        };
        Refusal { violation, reason }
    }

    #[test]
    fn reasons_the_summary_does_not_tell_are_printed_and_capped() {
        let ip = "10.0.0.7".parse().unwrap();
        let mut all = vec![
            refusal("a.test:443", RefusalReason::NotAllowed),
            refusal("10.0.0.9:80", RefusalReason::IpNotListed),
            refusal("lan.test:80", RefusalReason::InternalAddress { ip }),
        ];
        assert_eq!(
            reason_lines(&all),
            ["the proxy refused lan.test:80: resolves to the internal address 10.0.0.7, \
              which allow.network does not list"]
        );
        for i in 0..MAX_REASONS + 2 {
            let pattern = format!("x{i}.test");
            all.push(refusal(&format!("{pattern}:1"), RefusalReason::Denied { pattern }));
        }
        let lines = reason_lines(&all);
        assert_eq!(lines.len(), MAX_REASONS + 1);
        assert_eq!(lines[MAX_REASONS], "the proxy refused 3 more destinations");
    }
}
