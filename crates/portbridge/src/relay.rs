//! Port bridges: relays between a loopback TCP port and a unix socket, in both directions.
//!
//! - [`TcpToUnix`] listens on host `127.0.0.1:PORT` and joins each client to a unix socket
//!   (the host end of an inbound port grant).
//! - [`UnixToTcp`] serves a unix socket and joins each client to a loopback TCP address (an
//!   outbound grant: the task reaches a host service; also the sandbox end of an inbound one,
//!   reaching the task's server on the sandbox's loopback).
//!
//! Both retry a target that is not listening yet (no socket file, connection refused) for
//! [`RelayOptions::connect_wait`] instead of refusing the client, so a client may arrive
//! before the task's server starts: in an inbound grant the in-sandbox [`UnixToTcp`] is the
//! one that waits, and the host [`TcpToUnix`] waits for the sandbox end to appear.
//!
//! Each connection is a pair of blocking threads (see `pump`); the returned [`RelayHandle`]
//! stops everything when dropped.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;

use crate::acceptor::{Acceptor, Service};
use crate::error::{Error, Result};
use crate::pump;
use crate::stream::{self, Listener, Stream};
use crate::tracker::{ConnGuard, ConnStats, Stats, Tracker};

/// Limits of a relay.
#[derive(Clone, Debug)]
pub struct RelayOptions {
    /// Connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// How long one TCP connect attempt may take.
    pub connect_timeout: Duration,
    /// How long a client waits for a target that is not listening yet (missing socket file,
    /// connection refused) before it is closed. Zero closes it at once.
    pub connect_wait: Duration,
    /// A unix socket target is connected to only if its last component is the socket itself,
    /// not a symlink: set it when a less trusted party can write the socket's directory (the
    /// host end of an inbound grant, whose socket the sandbox serves).
    pub refuse_symlink: bool,
}

impl Default for RelayOptions {
    fn default() -> RelayOptions {
        RelayOptions {
            max_connections: 1024,
            connect_timeout: Duration::from_secs(5),
            connect_wait: Duration::from_secs(10),
            refuse_symlink: false,
        }
    }
}

/// Serves a unix socket and relays each client to a loopback TCP address.
#[derive(Debug)]
pub struct UnixToTcp;

impl UnixToTcp {
    /// Starts serving `socket` (which must not exist; it is created mode 0600 and removed when
    /// the relay stops) and relaying to `target`, which must be a loopback address.
    pub fn start(socket: &Path, target: SocketAddr, options: RelayOptions) -> Result<RelayHandle> {
        if !target.ip().is_loopback() {
            return Err(Error::NotLoopback { addr: target });
        }
        let listener = Listener::bind_unix(socket)?;
        RelayHandle::start(listener, Target::Tcp(target), options, "pb-unix-to-tcp")
    }
}

/// Listens on `127.0.0.1:PORT` and relays each client to a unix socket.
#[derive(Debug)]
pub struct TcpToUnix;

impl TcpToUnix {
    /// Starts listening on `127.0.0.1:port` (`0` picks a free port, see
    /// [`RelayHandle::local_addr`]) and relaying to the unix socket `target`, which may appear
    /// later. A port another program holds is [`Error::PortBusy`].
    pub fn start(port: u16, target: &Path, options: RelayOptions) -> Result<RelayHandle> {
        let listener = Listener::bind_loopback(port)?;
        RelayHandle::start(listener, Target::Unix(target.to_owned()), options, "pb-tcp-to-unix")
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// The TCP address listed for the local port of the client's socket (a handed-over
    /// connection: the host port it was accepted on); a client of another port is closed.
    ByPort(Vec<(u16, SocketAddr)>),
}

/// A running relay. Dropping it (or [`stop`](RelayHandle::stop)) closes the listener (and
/// removes its socket file), shuts every connection down and joins every thread.
#[derive(Debug)]
pub struct RelayHandle {
    acceptor: Option<Acceptor>,
    tracker: Arc<Tracker>,
    local_addrs: Vec<SocketAddr>,
}

impl RelayHandle {
    pub(crate) fn start(
        listener: Listener,
        target: Target,
        options: RelayOptions,
        name: &str,
    ) -> Result<RelayHandle> {
        let tracker = Tracker::new("pb-relay");
        let service = Arc::new(RelayService { tracker: Arc::clone(&tracker), target, options });
        RelayHandle::serve(vec![listener], service, tracker, name)
    }

    /// Serves every listener with `service` on one accept thread named `name`.
    pub(crate) fn serve(
        listeners: Vec<Listener>,
        service: Arc<dyn Service>,
        tracker: Arc<Tracker>,
        name: &str,
    ) -> Result<RelayHandle> {
        let local_addrs = listeners.iter().filter_map(Listener::local_addr).collect();
        let acceptor = Acceptor::start(name)?;
        for (key, listener) in (0u64..).zip(listeners) {
            acceptor.add(key, listener, Arc::clone(&service));
        }
        Ok(RelayHandle { acceptor: Some(acceptor), tracker, local_addrs })
    }

    /// The TCP address listened on, for a [`TcpToUnix`] relay (the first one of a
    /// [`TcpHandoff`](crate::TcpHandoff)).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addrs.first().copied()
    }

    /// Every TCP address listened on, in the order the ports were given.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Totals so far.
    pub fn stats(&self) -> Stats {
        self.tracker.stats()
    }

    /// Byte counts of the open connections and of the most recently closed ones.
    pub fn connections(&self) -> Vec<ConnStats> {
        self.tracker.connections()
    }

    /// Stops the relay and returns its final totals.
    pub fn stop(mut self) -> Stats {
        self.shutdown();
        self.tracker.stats()
    }

    fn shutdown(&mut self) {
        // The listener goes first, so no connection starts while the others are closed.
        drop(self.acceptor.take());
        self.tracker.stop();
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct RelayService {
    tracker: Arc<Tracker>,
    target: Target,
    options: RelayOptions,
}

impl Service for RelayService {
    fn serve(&self, conn: Stream) {
        let target = match &self.target {
            Target::ByPort(targets) => {
                let port = conn.local_port();
                match targets.iter().find(|(p, _)| Some(*p) == port) {
                    Some((_, addr)) => Target::Tcp(*addr),
                    None => return,
                }
            }
            target => target.clone(),
        };
        let Some(guard) = self.tracker.begin(&conn, self.options.max_connections) else { return };
        let options = self.options.clone();
        // On failure the job is dropped, which closes the client and ends its registration.
        self.tracker.pool.run(Box::new(move || run(conn, &guard, &target, &options)));
    }
}

fn run(client: Stream, guard: &ConnGuard, target: &Target, options: &RelayOptions) {
    let Some(upstream) = connect_with_wait(target, options, &guard.tracker) else { return };
    if !guard.tracker.add_socket(guard.id, &upstream) {
        return;
    }
    pump::relay(client, upstream, Vec::new(), None, None, &guard.counters, &guard.tracker);
}

/// Connects to the target, retrying while it is not listening yet, until `connect_wait` has
/// passed or the relay stops.
fn connect_with_wait(target: &Target, options: &RelayOptions, tracker: &Tracker) -> Option<Stream> {
    let deadline = Instant::now() + options.connect_wait;
    let mut pause = Duration::from_millis(10);
    loop {
        let attempt = match target {
            Target::Tcp(addr) => stream::connect_tcp(*addr, options.connect_timeout),
            Target::Unix(path) if options.refuse_symlink => stream::connect_unix_no_follow(path),
            Target::Unix(path) => stream::connect_unix(path),
            // Resolved to `Tcp` per connection (`RelayService::serve`).
            Target::ByPort(_) => return None,
        };
        match attempt {
            Ok(s) => return Some(s),
            Err(e) if not_listening_yet(&e) => {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                match tracker.stop_signal().recv_timeout(pause.min(deadline - now)) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return None,
                }
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Err(_) => return None,
        }
    }
}

fn not_listening_yet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused | io::ErrorKind::WouldBlock
    )
}
