//! Network beyond on/off, as plan data (DESIGN decision 4): port grants and the egress proxy.
//!
//! The host ends run in paddock (the CLI starts them from [`SpawnPlan::bridges`]); the
//! sandbox ends run in the supervisor (from [`SupervisorPayload::relays`]), which is not
//! under the task's seccomp filter.
//!
//! | grant                | host end                          | sandbox end (supervisor)          |
//! |----------------------|-----------------------------------|-----------------------------------|
//! | `allow.network` list | proxy on `net/proxy`              | `127.0.0.1:`[`PROXY_PORT`] → it   |
//! | `allow.host-ports`   | `net/out-P` → host `127.0.0.1:P`  | `127.0.0.1:P` → `net/out-P`       |
//! | `allow.local-ports`  | host `127.0.0.1:P`, handed over   | fd [`INBOUND_FD`] → `127.0.0.1:P` |
//!
//! Outbound, the ends are joined by unix sockets the host serves in the runtime dir's
//! `net/`, bound **read-only** at [`NET_DIR`]: the task cannot replace a socket there with a
//! symlink to a host socket the supervisor would then connect to on its behalf (connecting
//! to a socket on a read-only mount still works). The task may connect to these sockets
//! directly when its policy allows unix sockets (UNX-04): that gives it nothing more than
//! its loopback port does, because the proxy enforces its rules per request, whatever path
//! the request took (NET-11), and `out-P` reaches only the granted host port.
//!
//! Inbound, the host accepts each client and passes the connected socket itself to the
//! supervisor ([`paddock_portbridge::TcpHandoff`]) over a socket pair the runner creates for
//! the run, inherited as [`INBOUND_FD`]: one relay in the sandbox moves the bytes, instead
//! of a relay on each side joined by a unix socket, and nothing the task can name or write
//! leads to the channel (the supervisor holds it close-on-exec, the task's child closes it
//! before the task runs).
//!
//! With `network = "on"` the task shares the host's network, so port grants need no bridge;
//! the plan says so in its diagnostics.
//!
//! [`SpawnPlan::bridges`]: paddock_policy::SpawnPlan::bridges
//! [`SupervisorPayload::relays`]: crate::payload::SupervisorPayload::relays

use std::ffi::OsString;

use paddock_policy::{AbsPathBuf, BridgeSpec, Error, NetworkPolicy, ResolvedPolicy};

use crate::INBOUND_FD;
use crate::ops::{self, BwrapOp};
use crate::payload::{Bytes, SandboxRelay};

/// The egress proxy's port on the sandbox's loopback (`HTTP_PROXY=http://127.0.0.1:3128`).
pub const PROXY_PORT: u16 = 3128;
/// Where the runtime dir's `net/` (sockets the host serves) is bound, read-only.
pub const NET_DIR: &str = "/dev/.paddock-net";
/// The runtime dir's subdirectory for sockets the host serves.
pub const HOST_SOCKETS: &str = "net";
/// The proxy's socket name in [`HOST_SOCKETS`].
pub const PROXY_SOCKET: &str = "proxy";

/// What the network part of a policy adds to a plan.
#[derive(Debug, Default)]
pub struct NetPlan {
    /// Host ends, for [`SpawnPlan::bridges`](paddock_policy::SpawnPlan::bridges).
    pub bridges: Vec<BridgeSpec>,
    /// Sandbox ends, for the supervisor.
    pub relays: Vec<SandboxRelay>,
    /// Mounts exposing the socket directories.
    pub mounts: Vec<BwrapOp>,
    /// The proxy's port, when the task gets one (its env gets the proxy variables).
    pub proxy_port: Option<u16>,
    /// Notes for the user.
    pub diagnostics: Vec<String>,
}

fn plan_error(message: String) -> Error {
    Error::Plan { backend: crate::BACKEND_NAME, message }
}

fn sorted(ports: &[u16]) -> Vec<u16> {
    let mut out = ports.to_vec();
    out.sort_unstable();
    out.dedup();
    out
}

fn sandbox_path(dir: &str, name: &str) -> Bytes {
    let mut p = OsString::from(dir);
    p.push("/");
    p.push(name);
    Bytes(p)
}

/// The bridges, relays and mounts of `policy`'s network grants for a task whose runtime dir
/// is `runtime_dir`.
pub fn plan(policy: &ResolvedPolicy, runtime_dir: &AbsPathBuf) -> Result<NetPlan, Error> {
    let mut net = NetPlan::default();
    let local = sorted(&policy.local_ports);
    let host = sorted(&policy.host_ports);
    if matches!(policy.network, NetworkPolicy::On) {
        if !local.is_empty() || !host.is_empty() {
            net.diagnostics.push(
                "network is on: the task shares the host's loopback, so allow.local-ports and \
                 allow.host-ports need no bridge"
                    .to_owned(),
            );
        }
        return Ok(net);
    }
    // A domain list with no entry declares no domain: no proxy, the network stays off.
    let proxy =
        matches!(&policy.network, NetworkPolicy::Filtered { allow, .. } if !allow.is_empty());
    if let Some(p) = host.iter().find(|p| local.contains(p)) {
        return Err(plan_error(format!(
            "port {p} is in both allow.local-ports and allow.host-ports; inside the sandbox only one \
             side can listen on 127.0.0.1:{p}"
        )));
    }
    if proxy && (local.contains(&PROXY_PORT) || host.contains(&PROXY_PORT)) {
        return Err(plan_error(format!(
            "port {PROXY_PORT} is the egress proxy's port inside the sandbox; it cannot be in \
             allow.local-ports or allow.host-ports when allow.network is a domain list"
        )));
    }
    let host_dir = runtime_dir.join(HOST_SOCKETS);
    if proxy {
        net.bridges
            .push(BridgeSpec::Proxy { port: PROXY_PORT, socket: host_dir.join(PROXY_SOCKET) });
        net.relays.push(SandboxRelay::TcpToUnix {
            port: PROXY_PORT,
            socket: sandbox_path(NET_DIR, PROXY_SOCKET),
        });
        net.proxy_port = Some(PROXY_PORT);
    }
    for &port in &host {
        let name = format!("out-{port}");
        net.bridges.push(BridgeSpec::Outbound { port, socket: host_dir.join(&name) });
        net.relays.push(SandboxRelay::TcpToUnix { port, socket: sandbox_path(NET_DIR, &name) });
    }
    if !local.is_empty() {
        net.bridges.push(BridgeSpec::Inbound { ports: local.clone(), fd: INBOUND_FD });
        net.relays.push(SandboxRelay::Inbound { fd: INBOUND_FD, ports: local });
    }
    if proxy || !host.is_empty() {
        net.mounts.push(BwrapOp::RoBind { src: host_dir, dest: ops::abs(NET_DIR) });
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use expect_test::expect;
    use paddock_policy::{Backend, DomainPattern, NetworkPolicy};

    use crate::LinuxBwrap;
    use crate::payload::SupervisorPayload;
    use crate::tests::{facts, policy, task};

    fn filtered(domains: &[&str]) -> NetworkPolicy {
        NetworkPolicy::Filtered {
            allow: domains.iter().map(|d| DomainPattern::parse(d).unwrap()).collect(),
            deny: Vec::new(),
        }
    }

    fn supervisor(plan: &paddock_policy::SpawnPlan) -> SupervisorPayload {
        let p = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
        SupervisorPayload::from_bytes(&p.bytes, 4).unwrap()
    }

    fn args(plan: &paddock_policy::SpawnPlan) -> String {
        let p = plan.payloads.iter().find(|p| p.name == "bwrap-args").unwrap();
        String::from_utf8_lossy(&p.bytes).replace('\0', " ")
    }

    #[test]
    fn domain_list_and_ports_plan_bridges_relays_mounts_and_proxy_env() {
        let mut p = policy();
        p.network = filtered(&["example.test", "*.example.test"]);
        p.local_ports = vec![3000, 3000];
        p.host_ports = vec![5432];
        p.env.push(("no_proxy".into(), "internal.test".into()));
        p.env.push(("HTTP_PROXY".into(), "http://host-proxy:8080".into()));
        let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
        expect![[r#"
            [
                Proxy {
                    port: 3128,
                    socket: "/run/user/1000/paddock/t1/net/proxy",
                },
                Outbound {
                    port: 5432,
                    socket: "/run/user/1000/paddock/t1/net/out-5432",
                },
                Inbound {
                    ports: [
                        3000,
                    ],
                    fd: 8,
                },
            ]
        "#]]
        .assert_debug_eq(&plan.bridges);
        let sup = supervisor(&plan);
        expect![[r#"
            [
                TcpToUnix {
                    port: 3128,
                    socket: Bytes(
                        "/dev/.paddock-net/proxy",
                    ),
                },
                TcpToUnix {
                    port: 5432,
                    socket: Bytes(
                        "/dev/.paddock-net/out-5432",
                    ),
                },
                Inbound {
                    fd: 8,
                    ports: [
                        3000,
                    ],
                },
            ]
        "#]]
        .assert_debug_eq(&sup.relays);
        let args = args(&plan);
        assert!(!args.contains("--share-net"), "own netns: {args}");
        assert!(
            args.ends_with(
                "--remount-ro /home/u --ro-bind /run/user/1000/paddock/t1/net /dev/.paddock-net \
                 --ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor "
            ),
            "{args}"
        );
        let env: Vec<(String, String)> = sup
            .env
            .iter()
            .map(|(k, v)| (k.0.to_string_lossy().into(), v.0.to_string_lossy().into()))
            .collect();
        let get = |k: &str| env.iter().find(|e| e.0 == k).map(|e| e.1.as_str());
        // The task's own values are composed; the proxy replaces the task's proxy.
        assert_eq!(get("HTTP_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("NO_PROXY"), Some("localhost,127.0.0.1,::1,internal.test"));
        assert!(get("JAVA_TOOL_OPTIONS").unwrap().contains("-Dhttps.proxyPort=3128"));
        assert_eq!(get("TMPDIR"), Some("/tmp"));
        assert_eq!(env.iter().filter(|e| e.0 == "HTTP_PROXY").count(), 1);
    }

    #[test]
    fn no_domains_no_proxy_and_network_on_needs_no_bridge() {
        for network in [NetworkPolicy::Off, filtered(&[])] {
            let mut p = policy();
            p.network = network;
            let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
            assert!(plan.bridges.is_empty());
            let sup = supervisor(&plan);
            assert!(sup.relays.is_empty());
            assert!(!sup.env.iter().any(|(k, _)| k.0.to_string_lossy().contains("PROXY")));
            assert!(!args(&plan).contains(".paddock-net"));
        }
        let mut p = policy();
        p.network = NetworkPolicy::On;
        p.local_ports = vec![3000];
        let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
        assert!(plan.bridges.is_empty() && supervisor(&plan).relays.is_empty());
        assert!(plan.diagnostics.iter().any(|d| d.contains("need no bridge")), "{plan:?}");
    }

    #[test]
    fn the_proxy_port_cannot_be_granted_too() {
        let mut p = policy();
        p.network = filtered(&["example.test"]);
        p.host_ports = vec![3128];
        let err = LinuxBwrap.plan(&p, &task(), &facts()).unwrap_err().to_string();
        assert!(err.contains("port 3128 is the egress proxy's port"), "{err}");
        // Without a proxy the port is free.
        p.network = NetworkPolicy::Off;
        assert_eq!(LinuxBwrap.plan(&p, &task(), &facts()).unwrap().bridges.len(), 1);
    }
}
