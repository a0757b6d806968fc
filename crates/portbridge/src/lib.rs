//! Port bridges and a domain-filtering egress proxy for sandboxed tasks: every byte that
//! crosses a paddock sandbox's network boundary passes through this crate.
//!
//! A task whose network is off lives in its own network namespace with loopback only. What
//! its policy grants beyond that is carried over unix sockets in the task's runtime dir:
//!
//! - **Port bridges** ([`TcpToUnix`], [`UnixToTcp`]) join a host loopback port and a unix
//!   socket, in either direction (`allow.host-ports`, the proxy's port in the sandbox).
//! - **Handoff** ([`TcpHandoff`], [`HandoffToTcp`], [`handoff_channel`]): the host accepts
//!   on its loopback port and passes each connected socket over a descriptor channel to the
//!   sandbox, which relays it to the task's server (`allow.local-ports`).
//! - The **egress proxy** ([`Proxy`]) serves HTTP (absolute-URI and CONNECT) and SOCKS5 on
//!   one unix socket per task ([`Proxy::add_task`]; on a host without network namespaces,
//!   a loopback port per task, [`Proxy::add_task_on_loopback`]), each task with its own [`TaskRules`]
//!   (`allow.network`, `deny.network`). Names are checked before any DNS lookup, IP literals
//!   need the IP listed, and a name that resolves into loopback or private space is refused
//!   unless that IP is granted. Refusals are network [`Violation`](paddock_policy::Violation)s
//!   with a [`RefusalReason`], taken from the [`TaskHandle`]. A [`SharedProxy`] handle lets
//!   many tasks share one proxy, started by the first that needs it.
//! - [`proxy_env`] composes `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` (both
//!   cases) and `JAVA_TOOL_OPTIONS` from the task's own environment.
//!
//! Every relay and proxy connection is a pair of blocking threads with bounded buffers; a
//! handle's drop closes its listeners (removing socket files), shuts its connections down and
//! joins its threads.
//!
//! # Example
//!
//! ```
//! use std::io::{Read, Write};
//! use paddock_portbridge::{RelayOptions, TcpToUnix, UnixToTcp};
//!
//! let dir = std::env::temp_dir().join(format!("pb-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let server = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let sock = dir.join("s");
//! // Host port -> unix socket -> the server: two relays joined by a unix socket.
//! let inner = UnixToTcp::start(&sock, server.local_addr()?, RelayOptions::default())?;
//! let outer = TcpToUnix::start(0, &sock, RelayOptions::default())?;
//! let mut client = std::net::TcpStream::connect(outer.local_addr().unwrap())?;
//! client.write_all(b"ping")?;
//! let (mut conn, _) = server.accept()?;
//! let mut buf = [0; 4];
//! conn.read_exact(&mut buf)?;
//! assert_eq!(&buf, b"ping");
//! drop((client, conn, outer, inner));
//! assert!(!sock.exists());
//! # std::fs::remove_dir(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The proxy, with a resolver that maps test names (no `/etc/hosts` needed):
//!
//! ```
//! use std::io::{Read, Write};
//! use std::sync::Arc;
//! use paddock_policy::DomainPattern;
//! use paddock_portbridge::{Proxy, ProxyOptions, RefusalReason, StaticResolver, TaskRules};
//!
//! let dir = std::env::temp_dir().join(format!("pb-doc-proxy-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let resolver = Arc::new(StaticResolver::new().with("allowed.test", &["192.0.2.7".parse()?]));
//! let proxy = Proxy::start(resolver.clone(), ProxyOptions::default())?;
//! let rules = TaskRules { allow: vec![DomainPattern::parse("allowed.test")?], deny: vec![] };
//! let task = proxy.add_task(&dir.join("proxy"), rules)?;
//!
//! let mut client = std::os::unix::net::UnixStream::connect(task.socket())?;
//! client.write_all(b"CONNECT exfil.test:443 HTTP/1.1\r\n\r\n")?;
//! let mut answer = String::new();
//! client.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 403"));
//! assert!(resolver.lookups().is_empty(), "a refused name is never looked up");
//!
//! let refusals = task.take_violations();
//! assert_eq!(refusals[0].violation.target.as_deref(), Some("exfil.test:443"));
//! assert_eq!(refusals[0].reason, RefusalReason::NotAllowed);
//! drop((task, proxy));
//! # std::fs::remove_dir(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Terminology
//!
//! - A **relay** accepts connections on one side and opens one to its target per client.
//! - A **client** is who connected; the **target** is where the relay connected for it.
//! - A **task** is one sandboxed command; the proxy keeps its rules, connections and
//!   refusals apart from every other task's, keyed by the task's socket.
//! - A **refusal** is a destination the proxy turned away by policy; failing to reach an
//!   allowed destination is not one.
//!
//! # Supported platforms
//!
//! Unix (Linux and macOS).
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]
#![cfg(unix)]

mod acceptor;
mod env;
mod error;
mod handoff;
mod pool;
mod proxy;
mod pump;
mod relay;
mod stream;
mod tracker;

pub use env::proxy_env;
pub use error::{Error, Result};
pub use handoff::{HandoffToTcp, TcpHandoff, handoff_channel};
#[cfg(feature = "fuzzing")]
pub use proxy::fuzzing;
pub use proxy::{
    MAX_REFUSAL_NOTES, Proxy, ProxyOptions, Refusal, RefusalReason, Resolver, SharedProxy,
    StaticResolver, SystemResolver, TaskHandle, TaskRules, refusal_notes,
};
pub use relay::{RelayHandle, RelayOptions, TcpToUnix, UnixToTcp};
pub use tracker::{ConnStats, Stats};
