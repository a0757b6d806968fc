//! The one error type of the portbridge crate.
//!
//! Every variant names what the user needs to act on: the port that is busy, the socket path
//! that could not be served, the address that is not loopback. Messages are lowercase with no
//! trailing period.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use paddock_policy::DisplayBytes;

/// Everything that can go wrong starting a relay or the proxy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another program already listens on the host port a grant needs.
    #[error(
        "port {port} on 127.0.0.1 is already in use on the host; stop what listens there or grant another port"
    )]
    PortBusy {
        /// The port.
        port: u16,
    },
    /// Listening on a loopback port failed for another reason.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    TcpBind {
        /// The port.
        port: u16,
        /// The OS error.
        source: io::Error,
    },
    /// A unix socket path does not fit in `sockaddr_un`.
    #[error("unix socket path {} is {len} bytes, longer than the {max} the OS allows; use a shorter runtime dir", DisplayBytes(path.as_os_str()))]
    SocketPathTooLong {
        /// The path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Something already exists where a unix socket is to be served.
    #[error("cannot serve a unix socket at {}: a file already exists there", DisplayBytes(path.as_os_str()))]
    SocketExists {
        /// The path.
        path: PathBuf,
    },
    /// Binding or preparing a unix socket failed.
    #[error("cannot serve a unix socket at {}: {source}", DisplayBytes(path.as_os_str()))]
    UnixBind {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A relay target that is not a loopback address: bridges reach the host's loopback only.
    #[error("relay target {addr} is not a loopback address; bridges only reach 127.0.0.1 or ::1")]
    NotLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// The OS refused a thread or a wakeup socket pair.
    #[error("cannot start the {what}: {source}")]
    Start {
        /// What was being started.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The proxy's accept thread is gone (it was stopped).
    #[error("the proxy is stopped; cannot add the task socket {}", DisplayBytes(path.as_os_str()))]
    ProxyStopped {
        /// The socket of the task that was being added.
        path: PathBuf,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
