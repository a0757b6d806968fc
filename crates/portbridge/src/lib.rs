//! Port bridges and a domain-filtering egress proxy for sandboxed tasks: every byte that
//! crosses a paddock sandbox's network boundary passes through this crate.
//!
//! A task whose network is off lives in its own network namespace with loopback only. What
//! its policy grants beyond that is carried over unix sockets in the task's runtime dir:
//!
//! - **Port bridges** ([`TcpToUnix`], [`UnixToTcp`]) join a host loopback port and a unix
//!   socket, in either direction (`allow.local-ports`, `allow.host-ports`).
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
//! // Host port -> unix socket -> the server: what an inbound port grant builds.
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
//! # Terminology
//!
//! - A **relay** accepts connections on one side and opens one to its target per client.
//! - A **client** is who connected; the **target** is where the relay connected for it.
//!
//! # Supported platforms
//!
//! Unix (Linux and macOS). On Linux each direction of a relay moves bytes with `splice(2)`.
//!
//! # Crate features
//!
//! None.

#![deny(missing_docs)]
#![cfg(unix)]

mod acceptor;
mod env;
mod error;
mod proxy;
mod pump;
mod relay;
#[cfg(target_os = "linux")]
mod splice;
mod stream;
mod tracker;

pub use env::proxy_env;
pub use error::{Error, Result};
pub use proxy::{
    Proxy, ProxyOptions, Refusal, RefusalReason, Resolver, StaticResolver, SystemResolver,
    TaskHandle, TaskRules,
};
pub use relay::{RelayHandle, RelayOptions, TcpToUnix, UnixToTcp};
pub use tracker::{ConnStats, Stats};
