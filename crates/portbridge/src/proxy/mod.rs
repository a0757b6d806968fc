//! The egress proxy: HTTP (absolute-URI requests and CONNECT) and SOCKS5 on one unix socket
//! per task, each task with its own rules, all served by one accept thread.
//!
//! A connection's first byte picks the protocol (`0x05` is SOCKS5, anything else HTTP), so a
//! task needs one socket for `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` alike. For each
//! request the proxy:
//! 1. reads the destination (CONNECT authority, absolute URI with a `Host` that must agree,
//!    or SOCKS5 address) and normalizes it with `HostName::parse`;
//! 2. checks it against the task's [`TaskRules`] before any DNS lookup;
//! 3. resolves a name with the [`Resolver`] and checks every address it got;
//! 4. connects to those addresses (never resolving again), answers the client, and relays;
//!    a tunnel to a name whose first bytes are a TLS ClientHello for another server is cut.
//!
//! An absolute-URI request is the only one its connection carries: the target gets exactly
//! its head and body, and the requests that follow it on the connection (kept alive or
//! pipelined) are read and checked like a first request, each refusal recorded, but never
//! forwarded; the client sends them again on a new connection (`pipeline`).
//!
//! A refusal answers `403` (HTTP) or reply `0x02` (SOCKS5) and is recorded as a network
//! [`Violation`] of the task with its [`RefusalReason`], taken with
//! [`TaskHandle::take_violations`]. Failing to reach a granted destination answers `502` or
//! the matching SOCKS5 code and is not a violation.
//!
//! Domain fronting (NET-10): the CONNECT authority (or SOCKS5 address) is what the rules
//! check. For a tunnel to a name, the client's first bytes are held back until they are known
//! not to be a TLS ClientHello naming another server; a mismatch, or a ClientHello that cannot
//! be read from its first record, cuts the tunnel (after the `200`) and is recorded. A tunnel
//! to a granted IP literal is not checked: the address itself was granted. What the proxy does
//! not see: an HTTP `Host` inside TLS, or any use of a granted destination's own features, is
//! the destination's business (NET-20). Server-first protocols work: the target-to-client
//! direction flows while the client's first bytes are being checked.
//!
//! Stopping a task waits for its connection threads; one that is inside a DNS lookup or a
//! connect attempt ends when that call returns (bounded by the resolver and
//! [`ProxyOptions::connect_timeout`]).

#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod http;
mod pipeline;
mod resolve;
mod rules;
mod sni;
mod socks;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use paddock_policy::{HostName, Violation, ViolationKind};

pub use resolve::{Resolver, StaticResolver, SystemResolver};
pub use rules::{RefusalReason, TaskRules};

use crate::acceptor::{Acceptor, Service};
use crate::error::{Error, Result};
use crate::pump;
use crate::stream::{self, Listener, Stream};
use crate::tracker::{ConnGuard, ConnStats, Stats, Tracker};
use http::{HttpError, Request, target_text};
use pipeline::Pipeline;

/// Distinct refusals kept per task between two [`TaskHandle::take_violations`] calls; more
/// are still refused, only not recorded, so a hostile task cannot grow the proxy's memory.
const MAX_RECORDED: usize = 4096;

/// Limits of the proxy, the same for every task.
#[derive(Clone, Debug)]
pub struct ProxyOptions {
    /// Connections one task may have open at once (NET-19); more are closed on arrival, and
    /// other tasks are not affected.
    pub max_connections_per_task: usize,
    /// How long connecting to one resolved address may take.
    pub connect_timeout: Duration,
    /// How long a client may take to send its request.
    pub handshake_timeout: Duration,
    /// Cut a tunnel to a name whose TLS ClientHello names another server (NET-10).
    pub check_sni: bool,
}

impl Default for ProxyOptions {
    fn default() -> ProxyOptions {
        ProxyOptions {
            max_connections_per_task: 256,
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(30),
            check_sni: true,
        }
    }
}

/// A refused destination: the violation for the report and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Kind `Network`, `target` the destination as `host:port`, `count` how many times.
    pub violation: Violation,
    /// Why it was refused.
    pub reason: RefusalReason,
}

/// The proxy: one accept thread serving every task's socket.
#[derive(Debug)]
pub struct Proxy {
    acceptor: Arc<Acceptor>,
    resolver: Arc<dyn Resolver>,
    options: ProxyOptions,
    next_key: AtomicU64,
}

impl Proxy {
    /// Starts the proxy with no tasks.
    pub fn start(resolver: Arc<dyn Resolver>, options: ProxyOptions) -> Result<Proxy> {
        Ok(Proxy {
            acceptor: Arc::new(Acceptor::start("pb-proxy")?),
            resolver,
            options,
            next_key: AtomicU64::new(1),
        })
    }

    /// Serves a task at `socket` (created mode 0600; it must not exist) with its own rules.
    /// The returned handle removes the socket and closes the task's connections when dropped.
    pub fn add_task(&self, socket: &Path, rules: TaskRules) -> Result<TaskHandle> {
        let listener = Listener::bind_unix(socket)?;
        self.serve(listener, socket.to_owned(), rules)
    }

    /// Serves a task on `127.0.0.1:port` (`0` picks a free one, [`TaskHandle::port`] says
    /// which) with its own rules: for a host without network namespaces (macOS), where the
    /// task's own sandbox profile allows that one loopback port and nothing else. A busy
    /// port is [`Error::PortBusy`]: the task does not start (never a proxy of another task).
    pub fn add_task_on_loopback(&self, port: u16, rules: TaskRules) -> Result<TaskHandle> {
        let listener = Listener::bind_loopback(port)?;
        self.serve(listener, PathBuf::new(), rules)
    }

    fn serve(&self, listener: Listener, socket: PathBuf, rules: TaskRules) -> Result<TaskHandle> {
        let port = listener.local_addr().map(|a| a.port());
        let task = Arc::new(Task {
            rules,
            tracker: Tracker::new("pb-proxy-conn"),
            refusals: Mutex::default(),
            resolver: Arc::clone(&self.resolver),
            options: self.options.clone(),
        });
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let service = Arc::new(TaskService(Arc::clone(&task)));
        if !self.acceptor.add(key, listener, service) {
            return Err(Error::ProxyStopped { path: socket });
        }
        Ok(TaskHandle { key, acceptor: Arc::clone(&self.acceptor), task, socket, port })
    }
}

/// One egress proxy for the tasks holding clones of this handle: started by the first task
/// that needs it ([`SharedProxy::get`]), stopped when the last [`Arc`] of it is dropped.
/// Shared by handle, never through a global: the caller decides which tasks share one.
#[derive(Clone, Debug, Default)]
pub struct SharedProxy(Arc<Mutex<std::sync::Weak<Proxy>>>);

impl SharedProxy {
    /// A handle on no proxy yet.
    pub fn new() -> SharedProxy {
        SharedProxy::default()
    }

    /// The running proxy, started now (resolving with the system's resolver, default
    /// options) if no task uses one.
    pub fn get(&self) -> Result<Arc<Proxy>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(proxy) = slot.upgrade() {
            return Ok(proxy);
        }
        let proxy = Arc::new(Proxy::start(Arc::new(SystemResolver), ProxyOptions::default())?);
        *slot = Arc::downgrade(&proxy);
        Ok(proxy)
    }

    /// Whether a proxy runs now (some task holds it).
    pub fn running(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).strong_count() > 0
    }
}

/// One task served by the proxy. Dropping it (or [`stop`](TaskHandle::stop)) closes and
/// removes the task's socket, closes its connections and joins their threads.
#[derive(Debug)]
pub struct TaskHandle {
    key: u64,
    acceptor: Arc<Acceptor>,
    task: Arc<Task>,
    socket: PathBuf,
    port: Option<u16>,
}

impl TaskHandle {
    /// The socket the task's proxy listens on (empty for a task served on a port).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The loopback port the task's proxy listens on, for a task served on a port.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The refusals since the last call, one per destination and reason, with counts.
    pub fn take_violations(&self) -> Vec<Refusal> {
        let map = std::mem::take(&mut *self.task.lock_refusals());
        map.into_iter()
            .map(|((target, reason), count)| Refusal {
                violation: Violation {
                    kind: ViolationKind::Network,
                    path: None,
                    target: Some(target),
                    syscall: None,
                    errno: None,
                    count,
                },
                reason,
            })
            .collect()
    }

    /// The task's connection totals.
    pub fn stats(&self) -> Stats {
        self.task.tracker.stats()
    }

    /// Byte counts of the task's open and recently closed connections.
    pub fn connections(&self) -> Vec<ConnStats> {
        self.task.tracker.connections()
    }

    /// Stops serving the task and returns the refusals not taken yet.
    pub fn stop(self) -> Vec<Refusal> {
        self.shutdown();
        self.take_violations()
    }

    fn shutdown(&self) {
        self.acceptor.remove(self.key);
        self.task.tracker.stop();
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Debug)]
struct Task {
    rules: TaskRules,
    tracker: Arc<Tracker>,
    refusals: Mutex<BTreeMap<(String, RefusalReason), u64>>,
    resolver: Arc<dyn Resolver>,
    options: ProxyOptions,
}

impl Task {
    fn lock_refusals(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, RefusalReason), u64>> {
        self.refusals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, target: String, reason: RefusalReason) {
        let mut map = self.lock_refusals();
        let len = map.len();
        match map.get_mut(&(target.clone(), reason.clone())) {
            Some(n) => *n += 1,
            None if len < MAX_RECORDED => {
                map.insert((target, reason), 1);
            }
            None => {}
        }
    }
}

struct TaskService(Arc<Task>);

impl Service for TaskService {
    fn serve(&self, conn: Stream) {
        let task = &self.0;
        let Some(guard) = task.tracker.begin(&conn, task.options.max_connections_per_task) else {
            return;
        };
        let job_task = Arc::clone(task);
        // On failure the job is dropped, which closes the client and ends its registration.
        task.tracker.pool.run(Box::new(move || handle(conn, &guard, &job_task)));
    }
}

/// How the client asked, which decides how it is answered.
enum Mode {
    /// HTTP CONNECT.
    Tunnel,
    /// HTTP absolute-URI request (the rewritten head is in the first bytes to send).
    Forward,
    /// SOCKS5 CONNECT.
    Socks,
}

fn handle(client: Stream, guard: &ConnGuard, task: &Task) {
    if client.set_read_timeout(Some(task.options.handshake_timeout)).is_err() {
        return;
    }
    let mut first = [0u8; 1];
    if (&client).read_exact(&mut first).is_err() {
        return;
    }
    let asked = if first[0] == 0x05 {
        socks_request(&client, task)
    } else {
        http_request(&client, first[0], task)
    };
    let Some((host, port, mode, first_up, pipeline)) = asked else { return };
    let target = target_text(&host, port);
    if let Err(reason) = task.rules.check_name(&host, port) {
        return refuse(&client, &mode, task, target, reason);
    }
    let addrs: Vec<IpAddr> = match &host {
        HostName::Ip(ip) => vec![*ip],
        HostName::Domain(name) => match task.resolver.resolve(name, port) {
            Ok(addrs) if !addrs.is_empty() => addrs,
            Ok(_) => {
                return fail(
                    &client,
                    &mode,
                    socks::HOST_UNREACHABLE,
                    &format!("{name} has no address"),
                );
            }
            Err(e) => {
                return fail(
                    &client,
                    &mode,
                    socks::HOST_UNREACHABLE,
                    &format!("cannot resolve {name}: {e}"),
                );
            }
        },
    };
    if matches!(host, HostName::Domain(_))
        && let Err(reason) = task.rules.check_resolved(port, &addrs)
    {
        return refuse(&client, &mode, task, target, reason);
    }
    let mut last_err = None;
    let mut upstream = None;
    for ip in &addrs {
        match stream::connect_tcp(
            SocketAddr::new(rules::fold(*ip), port),
            task.options.connect_timeout,
        ) {
            Ok(s) => {
                upstream = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some(upstream) = upstream else {
        let code = match &last_err {
            Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                socks::CONNECTION_REFUSED
            }
            _ => socks::GENERAL_FAILURE,
        };
        let why = last_err.map_or_else(String::new, |e| e.to_string());
        return fail(&client, &mode, code, &format!("cannot connect to {target}: {why}"));
    };
    if !guard.tracker.add_socket(guard.id, &upstream) {
        return;
    }
    match mode {
        Mode::Tunnel => {
            if (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
                return;
            }
        }
        Mode::Socks => socks::reply(&client, socks::SUCCEEDED, None),
        Mode::Forward => {}
    }
    if client.set_read_timeout(None).is_err() {
        return;
    }
    let check = task.options.check_sni
        && matches!(host, HostName::Domain(_))
        && !matches!(mode, Mode::Forward);
    let (counters, tracker) = (&guard.counters, &guard.tracker);
    if let Some(mut pipeline) = pipeline {
        let mut meter = |input: &[u8], out: &mut Vec<u8>| {
            check_later(task, pipeline.feed(input, out));
        };
        pump::relay(client, upstream, first_up, None, Some(&mut meter), counters, tracker);
    } else if check {
        let mut gate = |c: &Stream, buf: &mut Vec<u8>| sni_gate(c, buf, &host, &target, task);
        pump::relay(client, upstream, first_up, Some(&mut gate), None, counters, tracker);
    } else {
        pump::relay(client, upstream, first_up, None, None, counters, tracker);
    }
}

/// The destination, how the client asked, the first bytes for the target, and for an
/// absolute-URI request what to make of the rest of the connection.
type Asked = (HostName, u16, Mode, Vec<u8>, Option<Pipeline>);

/// Checks the requests that followed the first on a connection like first requests, and
/// records each refusal. None of them is forwarded (see `pipeline`).
fn check_later(task: &Task, later: Vec<std::result::Result<Request, HttpError>>) {
    for request in later {
        match request {
            Ok(Request::Forward { host, port, .. } | Request::Connect { host, port }) => {
                if let Err(reason) = task.rules.check_name(&host, port) {
                    task.record(target_text(&host, port), reason);
                }
            }
            Err(HttpError::Refused { target, reason }) => task.record(target, reason),
            Err(HttpError::Bad(_)) => {}
        }
    }
}

fn socks_request(client: &Stream, task: &Task) -> Option<Asked> {
    let req = socks::handshake(&mut &*client, &mut &*client).ok()?;
    let port = req.port;
    let host = match req.host {
        Ok(h) => h,
        Err((raw, detail)) => {
            task.record(format!("{raw}:{port}"), RefusalReason::BadHost { detail });
            socks::reply(client, socks::NOT_ALLOWED, None);
            return None;
        }
    };
    if req.command != 1 {
        let command = match req.command {
            2 => Some("bind"),
            3 => Some("udp-associate"),
            _ => None,
        };
        if let Some(command) = command {
            task.record(target_text(&host, port), RefusalReason::UnsupportedCommand { command });
        }
        socks::reply(client, socks::COMMAND_NOT_SUPPORTED, None);
        return None;
    }
    Some((host, port, Mode::Socks, Vec::new(), None))
}

fn http_request(client: &Stream, first: u8, task: &Task) -> Option<Asked> {
    let (head, rest) = match http::read_head(client, vec![first]) {
        Ok(parts) => parts,
        Err(msg) => {
            let _ = (&*client)
                .write_all(&http::response("400 Bad Request", &format!("paddock: {msg}\n")));
            return None;
        }
    };
    match http::parse(&head) {
        Ok(Request::Connect { host, port }) => Some((host, port, Mode::Tunnel, rest, None)),
        Ok(Request::Forward { host, port, mut head, body, upgrade }) => {
            // What followed the head in the same reads: the body, maybe more requests.
            let mut pipeline = Pipeline::new(body, upgrade);
            check_later(task, pipeline.feed(&rest, &mut head));
            Some((host, port, Mode::Forward, head, Some(pipeline)))
        }
        Err(HttpError::Bad(msg)) => {
            let _ = (&*client)
                .write_all(&http::response("400 Bad Request", &format!("paddock: {msg}\n")));
            None
        }
        Err(HttpError::Refused { target, reason }) => {
            refuse(client, &Mode::Forward, task, target, reason);
            None
        }
    }
}

/// Answers a policy refusal and records it.
fn refuse(client: &Stream, mode: &Mode, task: &Task, target: String, reason: RefusalReason) {
    let body = format!("paddock: {target} refused: {reason}\n");
    task.record(target, reason);
    match mode {
        Mode::Socks => socks::reply(client, socks::NOT_ALLOWED, None),
        Mode::Tunnel | Mode::Forward => {
            let _ = (&*client).write_all(&http::response("403 Forbidden", &body));
        }
    }
}

/// Answers a failure to reach a granted destination (not a violation).
fn fail(client: &Stream, mode: &Mode, socks_code: u8, why: &str) {
    match mode {
        Mode::Socks => socks::reply(client, socks_code, None),
        Mode::Tunnel | Mode::Forward => {
            let body = format!("paddock: {why}\n");
            let _ = (&*client).write_all(&http::response("502 Bad Gateway", &body));
        }
    }
}

/// Holds the client's first bytes until they are known not to be a ClientHello for another
/// server than `host`.
fn sni_gate(
    client: &Stream,
    buf: &mut Vec<u8>,
    host: &HostName,
    target: &str,
    task: &Task,
) -> bool {
    loop {
        match sni::client_hello(buf) {
            sni::Hello::NotTls | sni::Hello::NoName => return true,
            sni::Hello::Name(name) => {
                if HostName::parse(&name).map(rules::canonical).as_ref() == Ok(host) {
                    return true;
                }
                let sni = name.escape_debug().to_string();
                task.record(target.to_owned(), RefusalReason::SniMismatch { sni });
                return false;
            }
            sni::Hello::Unreadable => {
                task.record(target.to_owned(), RefusalReason::UnreadableClientHello);
                return false;
            }
            sni::Hello::NeedMore => {
                let mut chunk = [0u8; 8192];
                match (&*client).read(&mut chunk) {
                    // Nothing sent at all: a download-only client; nothing to check.
                    Ok(0) if buf.is_empty() => return true,
                    Ok(0) | Err(_) => return false,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        }
    }
}

/// The most lines [`refusal_notes`] returns but one (which counts the rest).
pub const MAX_REFUSAL_NOTES: usize = 10;

/// One line for each refusal whose reason a summary would not tell (a granted name that
/// resolved into the LAN, a `deny.network` match, a TLS server name that differs from the
/// tunnel's: `allow.network` is not their cure), at most [`MAX_REFUSAL_NOTES`] of them.
pub fn refusal_notes(refusals: &[Refusal]) -> Vec<String> {
    let telling: Vec<&Refusal> = refusals
        .iter()
        .filter(|r| !matches!(r.reason, RefusalReason::NotAllowed | RefusalReason::IpNotListed))
        .collect();
    let mut lines: Vec<String> = telling
        .iter()
        .take(MAX_REFUSAL_NOTES)
        .map(|r| {
            let target = r.violation.target.as_deref().unwrap_or("(unknown)");
            format!("the proxy refused {}: {}", target.escape_debug(), r.reason)
        })
        .collect();
    if telling.len() > MAX_REFUSAL_NOTES {
        lines.push(format!(
            "the proxy refused {} more destinations",
            telling.len() - MAX_REFUSAL_NOTES
        ));
    }
    lines
}

#[cfg(test)]
mod refusal_note_tests {
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
            refusal_notes(&all),
            ["the proxy refused lan.test:80: resolves to the internal address 10.0.0.7, \
              which allow.network does not list"]
        );
        for i in 0..MAX_REFUSAL_NOTES + 2 {
            let pattern = format!("x{i}.test");
            all.push(refusal(&format!("{pattern}:1"), RefusalReason::Denied { pattern }));
        }
        let lines = refusal_notes(&all);
        assert_eq!(lines.len(), MAX_REFUSAL_NOTES + 1);
        assert_eq!(lines[MAX_REFUSAL_NOTES], "the proxy refused 3 more destinations");
    }
}
