//! The egress proxy against loopback servers, with names mapped by a test resolver. The
//! destination lists are those of the NET cases in the security catalogue.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use paddock_policy::{DomainPattern, ViolationKind};
use paddock_portbridge::{
    Proxy, ProxyOptions, RefusalReason, RelayOptions, StaticResolver, TaskHandle, TaskRules,
    TcpToUnix,
};

use crate::util::*;

const LOOPBACK: &str = "127.0.0.1";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn rules(allow: &[&str], deny: &[&str]) -> TaskRules {
    let p = |s: &&str| DomainPattern::parse(s).unwrap();
    TaskRules { allow: allow.iter().map(p).collect(), deny: deny.iter().map(p).collect() }
}

/// The P-NET policy of the catalogue, plus extra grants. The test servers listen on
/// whatever port they got, so the names are granted on every port (`:*`); a name without a
/// port grants 80 and 443 only (`names_without_a_port_reach_only_the_web_ports`).
fn p_net(extra: &[&str]) -> TaskRules {
    let mut allow = vec!["allowed.test:*", "*.wild.test:*"];
    allow.extend_from_slice(extra);
    rules(&allow, &["blocked.wild.test"])
}

/// Every name maps to 127.0.0.1 (the stand-in for the catalogue's sinkhole); the log shows
/// which names were looked up.
fn sinkhole_resolver(names: &[&str]) -> Arc<StaticResolver> {
    let mut r = StaticResolver::new();
    for n in names {
        r = r.with(n, &[ip(LOOPBACK)]);
    }
    Arc::new(r)
}

struct Setup {
    _dir: TempDir,
    _proxy: Proxy,
    task: TaskHandle,
    sock: std::path::PathBuf,
}

fn setup(rules: TaskRules, resolver: Arc<StaticResolver>) -> Setup {
    setup_with(rules, resolver, ProxyOptions::default())
}

fn setup_with(rules: TaskRules, resolver: Arc<StaticResolver>, options: ProxyOptions) -> Setup {
    let dir = TempDir::new();
    let sock = dir.join("proxy");
    let proxy = Proxy::start(resolver, options).unwrap();
    let task = proxy.add_task(&sock, rules).unwrap();
    Setup { _dir: dir, _proxy: proxy, task, sock }
}

/// Sends `CONNECT authority` and returns the status line and the stream.
fn connect(sock: &Path, authority: &str) -> (String, UnixStream) {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .unwrap();
    let head = read_response_head(&s);
    (head.lines().next().unwrap_or("").to_owned(), s)
}

fn status(sock: &Path, authority: &str) -> String {
    connect(sock, authority).0
}

/// A SOCKS5 CONNECT (or another command); returns the reply code and the stream.
fn socks(sock: &Path, cmd: u8, addr: &[u8], port: u16) -> (u8, UnixStream) {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut greet = [0u8; 2];
    s.read_exact(&mut greet).unwrap();
    assert_eq!(greet, [5, 0]);
    let mut req = vec![5, cmd, 0];
    req.extend_from_slice(addr);
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    (reply[1], s)
}

fn socks_domain(name: &str) -> Vec<u8> {
    let mut v = vec![3, name.len() as u8];
    v.extend_from_slice(name.as_bytes());
    v
}

fn echo_through(mut s: UnixStream, data: &[u8]) -> Vec<u8> {
    s.write_all(data).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn reasons(task: &TaskHandle) -> Vec<(String, RefusalReason)> {
    task.take_violations()
        .into_iter()
        .map(|r| {
            assert_eq!(r.violation.kind, ViolationKind::Network);
            (r.violation.target.unwrap(), r.reason)
        })
        .collect()
}

#[test]
fn allowed_domain_tunnels_through_connect() {
    let echo = tcp_echo_server();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{}", echo.port());
    let s = setup(p_net(&[&grant]), resolver.clone());
    let (line, stream) = connect(&s.sock, &format!("Allowed.Test.:{}", echo.port()));
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    assert_eq!(echo_through(stream, b"through"), echoed(b"through"));
    assert_eq!(resolver.lookups(), vec!["allowed.test"]);
    assert!(s.task.take_violations().is_empty());
    assert!(wait_for(Duration::from_secs(5), || s.task.stats().active == 0));
    let stats = s.task.stats();
    assert_eq!((stats.to_target, stats.to_client), (7, echoed(b"through").len() as u64));
}

#[test]
fn net03_names_not_allowlisted_are_never_resolved() {
    let canary = Canary::start();
    let resolver = sinkhole_resolver(&["c4n4ry.exfil.test", "allowed.test"]);
    let s = setup(p_net(&[]), resolver.clone());
    for _ in 0..2 {
        assert!(status(&s.sock, "c4n4ry.exfil.test:443").starts_with("HTTP/1.1 403"));
    }
    let mut get = UnixStream::connect(&s.sock).unwrap();
    get.write_all(b"GET http://c4n4ry.exfil.test/ HTTP/1.1\r\nHost: c4n4ry.exfil.test\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    get.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 403"), "{body}");
    assert!(body.contains("c4n4ry.exfil.test:80 refused: not in allow.network"), "{body}");
    let (code, _) = socks(&s.sock, 1, &socks_domain("c4n4ry.exfil.test"), 443);
    assert_eq!(code, 0x02);
    assert!(resolver.lookups().is_empty(), "no DNS for refused names: {:?}", resolver.lookups());
    assert_eq!(canary.hits(), 0);
    // Refusals of one destination for one reason merge into one violation with a count;
    // CONNECT and SOCKS5 to :443 are the same destination.
    let mut got: Vec<(String, RefusalReason, u64)> = s
        .task
        .take_violations()
        .into_iter()
        .map(|r| (r.violation.target.unwrap(), r.reason, r.violation.count))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("c4n4ry.exfil.test:443".to_owned(), RefusalReason::NotAllowed, 3),
            ("c4n4ry.exfil.test:80".to_owned(), RefusalReason::NotAllowed, 1),
        ]
    );
    assert!(s.task.take_violations().is_empty(), "taken once");
}

#[test]
fn net06_wildcard_and_suffix_confusion() {
    let echo = tcp_echo_server();
    let port = echo.port();
    let names = [
        "wild.test",
        "evilwild.test",
        "xwild.test",
        "wild.test.evil.net",
        "a.wild.test.evil.net",
        "a.wild.test",
        "a.b.wild.test",
        "blocked.wild.test",
        "BLOCKED.WILD.TEST",
        "blocked.wild.test.",
        "x.blocked.wild.test",
    ];
    let lower: Vec<String> =
        names.iter().map(|n| n.to_ascii_lowercase().trim_end_matches('.').to_owned()).collect();
    let resolver = sinkhole_resolver(&lower.iter().map(String::as_str).collect::<Vec<_>>());
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver.clone());
    let mut passed = Vec::new();
    for name in names {
        let line = status(&s.sock, &format!("{name}:{port}"));
        if line.contains(" 200 ") {
            passed.push(name);
        } else {
            assert!(line.starts_with("HTTP/1.1 403"), "{name}: {line}");
        }
    }
    assert_eq!(passed, vec!["a.wild.test", "a.b.wild.test"]);
    assert_eq!(resolver.lookups(), vec!["a.wild.test", "a.b.wild.test"], "no other lookups");
    let denied: Vec<String> = reasons(&s.task)
        .into_iter()
        .filter(|(_, r)| matches!(r, RefusalReason::Denied { .. }))
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        denied,
        vec![format!("blocked.wild.test:{port}"), format!("x.blocked.wild.test:{port}")],
        "every spelling of blocked.* is denied, subdomains too"
    );
}

#[test]
fn net04_host_loopback_in_every_spelling_is_refused() {
    let canary = Canary::start();
    let port = canary.addr.port();
    let resolver = sinkhole_resolver(&["localhost"]);
    let s = setup(p_net(&[]), resolver.clone());
    for h in [
        "127.0.0.1",
        "localhost",
        "localhost.",
        "LOCALHOST",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "0.0.0.0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[0:0:0:0:0:0:0:1]",
        // Beyond the catalogue: Unicode spellings and IPv4-compatible IPv6.
        "\u{ff11}\u{ff12}\u{ff17}.0.0.1",
        "127\u{3002}0\u{3002}0\u{3002}1",
        "[::127.0.0.1]",
    ] {
        let line = status(&s.sock, &format!("{h}:{port}"));
        assert!(line.starts_with("HTTP/1.1 403"), "{h}: {line}");
    }
    assert_eq!(canary.hits(), 0, "the host loopback service saw nothing");
    assert!(resolver.lookups().is_empty());
    let got = reasons(&s.task);
    let target = |t: &str| got.iter().find(|(x, _)| x == t).map(|(_, r)| r.clone());
    assert_eq!(target(&format!("127.0.0.1:{port}")), Some(RefusalReason::IpNotListed));
    assert_eq!(target(&format!("[::1]:{port}")), Some(RefusalReason::IpNotListed));
    assert_eq!(target(&format!("localhost:{port}")), Some(RefusalReason::NotAllowed));
    assert_eq!(target(&format!("0.0.0.0:{port}")), Some(RefusalReason::IpNotListed));
    assert_eq!(target(&format!("[::7f00:1]:{port}")), Some(RefusalReason::IpNotListed));
    assert!(got.iter().all(|(t, _)| t.is_ascii()), "unicode spellings are reported as the IP");
}

#[test]
fn net05_metadata_and_private_ranges_are_refused() {
    let resolver = sinkhole_resolver(&["metadata.google.internal"]);
    let s = setup(p_net(&[]), resolver.clone());
    for h in [
        "169.254.169.254",
        "[fd00:ec2::254]",
        "metadata.google.internal",
        "10.0.0.1",
        "192.168.0.1",
        "172.16.0.1",
        "[fe80::1%25eth0]",
    ] {
        let line = status(&s.sock, &format!("{h}:80"));
        assert!(line.starts_with("HTTP/1.1 403"), "{h}: {line}");
    }
    assert!(resolver.lookups().is_empty());
}

#[test]
fn net08_ip_literals_need_the_ip_listed() {
    // allowed.test "is" 198.18.0.10 for the resolver, but the proxy never connects there:
    // every request below is refused before any connect.
    let resolver = Arc::new(StaticResolver::new().with("allowed.test", &[ip("198.18.0.10")]));
    let s = setup(p_net(&[]), resolver.clone());
    for h in [
        "198.18.0.10",
        "3323068426",
        "0xc612000a",
        "0306.022.0.012",
        "198.18.10",
        "[::ffff:198.18.0.10]",
        "[::ffff:c612:a]",
        "[64:ff9b::c612:a]",
    ] {
        let line = status(&s.sock, &format!("{h}:443"));
        assert!(line.starts_with("HTTP/1.1 403"), "{h}: {line}");
    }
    let (code, _) = socks(&s.sock, 1, &[1, 198, 18, 0, 10], 443);
    assert_eq!(code, 0x02);
    let mut v6 = vec![4u8];
    v6.extend_from_slice(&"::ffff:198.18.0.10".parse::<std::net::Ipv6Addr>().unwrap().octets());
    let (code, _) = socks(&s.sock, 1, &v6, 443);
    assert_eq!(code, 0x02);
    assert!(resolver.lookups().is_empty());
    assert!(reasons(&s.task).iter().all(|(_, r)| *r == RefusalReason::IpNotListed));
}

#[test]
fn listed_ip_literal_is_reached_in_any_spelling() {
    let echo = tcp_echo_server();
    let port = echo.port();
    let s = setup(rules(&[&format!("127.0.0.1:{port}")], &[]), Arc::new(StaticResolver::new()));
    for h in ["127.0.0.1", "0x7f000001", "[::ffff:127.0.0.1]", "2130706433"] {
        let (line, stream) = connect(&s.sock, &format!("{h}:{port}"));
        assert_eq!(line, "HTTP/1.1 200 Connection established", "{h}");
        assert_eq!(echo_through(stream, b"ip"), echoed(b"ip"));
    }
    // The grant is for that port only.
    assert!(status(&s.sock, &format!("127.0.0.1:{}", port ^ 1)).starts_with("HTTP/1.1 403"));
    let (code, stream) = socks(&s.sock, 1, &[1, 127, 0, 0, 1], port);
    assert_eq!(code, 0);
    assert_eq!(echo_through(stream, b"socks4"), echoed(b"socks4"));
}

#[test]
fn net15_name_resolving_to_loopback_is_refused_unless_that_ip_is_granted() {
    let canary = Canary::start();
    let port = canary.addr.port();
    let resolver = Arc::new(
        StaticResolver::new()
            .with("rebind.test", &[ip("127.0.0.1")])
            .with("mixed.test", &[ip("198.18.0.10"), ip("127.0.0.1")])
            .with("private.test", &[ip("10.1.2.3")])
            .with("mapped.test", &[ip("::ffff:127.0.0.1")])
            .with("compat.test", &[ip("::127.0.0.1")]),
    );
    let names = ["rebind.test", "mixed.test", "private.test", "mapped.test", "compat.test"];
    let grants = names.map(|n| format!("{n}:*"));
    let s = setup(rules(&grants.each_ref().map(String::as_str), &[]), resolver);
    for name in names {
        let line = status(&s.sock, &format!("{name}:{port}"));
        assert!(line.starts_with("HTTP/1.1 403"), "{name}: {line}");
    }
    let (code, _) = socks(&s.sock, 1, &socks_domain("rebind.test"), port);
    assert_eq!(code, 0x02);
    assert_eq!(canary.hits(), 0);
    let got = reasons(&s.task);
    assert!(got.contains(&(
        format!("rebind.test:{port}"),
        RefusalReason::InternalAddress { ip: ip("127.0.0.1") }
    )));
    assert!(got.contains(&(
        format!("mapped.test:{port}"),
        RefusalReason::InternalAddress { ip: ip("127.0.0.1") }
    )));

    // Granting the IP (on that port) lets the name through.
    let echo = tcp_echo_server();
    let resolver = Arc::new(StaticResolver::new().with("rebind.test", &[ip("127.0.0.1")]));
    let grant = format!("127.0.0.1:{}", echo.port());
    let s = setup(rules(&["rebind.test:*", &grant], &[]), resolver);
    let (line, stream) = connect(&s.sock, &format!("rebind.test:{}", echo.port()));
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    assert_eq!(echo_through(stream, b"ok"), echoed(b"ok"));
    assert!(status(&s.sock, &format!("rebind.test:{port}")).starts_with("HTTP/1.1 403"));
}

#[test]
fn deny_listed_ip_refuses_a_name_resolving_to_it() {
    let echo = tcp_echo_server();
    let resolver = Arc::new(StaticResolver::new().with("allowed.test", &[ip("127.0.0.1")]));
    let grant = format!("127.0.0.1:{}", echo.port());
    let s = setup(rules(&["allowed.test:*", &grant], &["127.0.0.1"]), resolver);
    assert!(status(&s.sock, &format!("allowed.test:{}", echo.port())).starts_with("HTTP/1.1 403"));
    let got = reasons(&s.task);
    assert!(matches!(&got[0].1, RefusalReason::DeniedAddress { .. }), "{got:?}");
}

/// A one-shot HTTP server: records the request head and body, answers `hello`.
fn http_server() -> (std::net::SocketAddr, thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let head = read_response_head(&c);
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; len];
        c.read_exact(&mut body).unwrap();
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .unwrap();
        head + &String::from_utf8(body).unwrap()
    });
    (addr, t)
}

#[test]
fn absolute_uri_request_is_forwarded_in_origin_form() {
    let (addr, server) = http_server();
    let port = addr.port();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver);
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.write_all(
        format!(
            "POST http://allowed.test:{port}/upload?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
             Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\
             Content-Length: 4\r\n\r\nbody"
        )
        .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("hello"), "{answer}");
    let seen = server.join().unwrap();
    assert_eq!(
        seen,
        format!(
            "POST /upload?x=1 HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: 4\r\n\
             Connection: close\r\n\r\nbody"
        )
    );
}

#[test]
fn host_header_differing_from_the_uri_is_refused() {
    let canary = Canary::start();
    let port = canary.addr.port();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver);
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.write_all(
        format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert_eq!(canary.hits(), 0);
    assert_eq!(
        reasons(&s.task),
        vec![(
            format!("allowed.test:{port}"),
            RefusalReason::HostMismatch { host: "evil.test".into() }
        )]
    );
}

#[test]
fn origin_form_request_is_a_bad_request_not_a_violation() {
    let s = setup(p_net(&[]), Arc::new(StaticResolver::new()));
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n").unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(s.task.take_violations().is_empty());
}

#[test]
fn socks5_domain_connect_with_remote_dns() {
    let echo = tcp_echo_server();
    let resolver = sinkhole_resolver(&["a.wild.test"]);
    let grant = format!("127.0.0.1:{}", echo.port());
    let s = setup(p_net(&[&grant]), resolver.clone());
    let (code, stream) = socks(&s.sock, 1, &socks_domain("A.Wild.Test"), echo.port());
    assert_eq!(code, 0);
    assert_eq!(echo_through(stream, b"socks"), echoed(b"socks"));
    assert_eq!(resolver.lookups(), vec!["a.wild.test"]);
}

#[test]
fn socks5_bind_and_udp_are_refused() {
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let s = setup(p_net(&[]), resolver.clone());
    let (code, _) = socks(&s.sock, 2, &socks_domain("allowed.test"), 443);
    assert_eq!(code, 0x07);
    let (code, _) = socks(&s.sock, 3, &[1, 0, 0, 0, 0], 0);
    assert_eq!(code, 0x07);
    assert!(resolver.lookups().is_empty());
    let mut got = reasons(&s.task);
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "0.0.0.0:0".to_owned(),
                RefusalReason::UnsupportedCommand { command: "udp-associate" }
            ),
            ("allowed.test:443".to_owned(), RefusalReason::UnsupportedCommand { command: "bind" }),
        ]
    );
    // A client offering only username/password authentication is turned away.
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.write_all(&[5, 1, 2]).unwrap();
    let mut reply = [0u8; 2];
    c.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [5, 0xff]);
}

#[test]
fn net10_tls_server_name_must_match_the_connect_authority() {
    let canary = Canary::start();
    let port = canary.addr.port();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver);
    // Fronting: the tunnel is opened to allowed.test, the TLS names evil.test.
    let (line, mut stream) = connect(&s.sock, &format!("allowed.test:{port}"));
    assert_eq!(line, "HTTP/1.1 200 Connection established");
    stream.write_all(&client_hello("evil.test")).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(stream.read(&mut buf).unwrap_or(0), 0, "the tunnel is cut");
    assert!(wait_for(Duration::from_secs(5), || s.task.stats().active == 0));
    assert_eq!(canary.bytes(), 0, "no byte of the fronted hello reached the target");
    assert_eq!(
        reasons(&s.task),
        vec![(
            format!("allowed.test:{port}"),
            RefusalReason::SniMismatch { sni: "evil.test".into() }
        )]
    );
    // The matching name passes, in any case.
    let (_, mut stream) = connect(&s.sock, &format!("allowed.test:{port}"));
    let hello = client_hello("ALLOWED.test");
    stream.write_all(&hello).unwrap();
    assert!(wait_for(Duration::from_secs(5), || canary.bytes() == hello.len() as u64));
}

#[test]
fn net19_connections_are_capped_per_task_and_other_tasks_still_work() {
    let echo = tcp_echo_server();
    let grant = format!("127.0.0.1:{}", echo.port());
    let dir = TempDir::new();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let options = ProxyOptions { max_connections_per_task: 3, ..ProxyOptions::default() };
    let proxy = Proxy::start(resolver, options).unwrap();
    let a = proxy.add_task(&dir.join("a"), p_net(&[&grant])).unwrap();
    let b = proxy.add_task(&dir.join("b"), p_net(&[&grant])).unwrap();
    // Three idle connections fill task A's slots.
    let idle: Vec<UnixStream> =
        (0..3).map(|_| UnixStream::connect(dir.join("a")).unwrap()).collect();
    assert!(wait_for(Duration::from_secs(5), || a.stats().active == 3));
    // The fourth is closed unanswered; depending on timing the request write already fails.
    let mut fourth = UnixStream::connect(dir.join("a")).unwrap();
    fourth.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", echo.port());
    let _ = fourth.write_all(request.as_bytes());
    assert_eq!(read_response_head(&fourth), "", "task A's fourth connection is closed");
    assert_eq!(a.stats().rejected, 1);
    let (line, stream) = connect(&dir.join("b"), &format!("allowed.test:{}", echo.port()));
    assert_eq!(line, "HTTP/1.1 200 Connection established", "task B is not affected");
    assert_eq!(echo_through(stream, b"b"), echoed(b"b"));
    assert_eq!(b.stats().rejected, 0);
    drop(idle);
    assert!(wait_for(Duration::from_secs(5), || a.stats().active == 0));
}

#[test]
fn tasks_have_their_own_rules_and_reports() {
    let echo = tcp_echo_server();
    let port = echo.port();
    let grant = format!("127.0.0.1:{port}");
    let dir = TempDir::new();
    let resolver = sinkhole_resolver(&["a.test", "b.test"]);
    let proxy = Proxy::start(resolver, ProxyOptions::default()).unwrap();
    let a = proxy.add_task(&dir.join("a"), rules(&["a.test:*", &grant], &[])).unwrap();
    let b = proxy.add_task(&dir.join("b"), rules(&["b.test:*", &grant], &[])).unwrap();
    assert!(status(a.socket(), &format!("a.test:{port}")).contains(" 200 "));
    assert!(status(a.socket(), &format!("b.test:{port}")).starts_with("HTTP/1.1 403"));
    assert!(status(b.socket(), &format!("b.test:{port}")).contains(" 200 "));
    assert!(b.take_violations().is_empty());
    assert_eq!(reasons(&a), vec![(format!("b.test:{port}"), RefusalReason::NotAllowed)]);
    let sock_a = a.socket().to_owned();
    drop(a);
    assert!(!sock_a.exists(), "a task's socket goes with its handle");
    assert!(status(b.socket(), &format!("b.test:{port}")).contains(" 200 "), "b still served");
}

#[test]
fn curl_through_the_bridged_proxy() {
    // The deployment shape: the task's loopback port relays to the proxy's unix socket.
    const CURL: &str = "/usr/bin/curl";
    if !Path::new(CURL).exists() {
        paddock_test_support::skip(format!("{CURL} is not installed (apt-get install curl)"), None);
        return;
    }
    let (addr, server) = http_server();
    let port = addr.port();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver);
    let bridge = TcpToUnix::start(0, &s.sock, RelayOptions::default()).unwrap();
    let proxy_url = format!("http://{}", bridge.local_addr().unwrap());
    let run = |args: &[&str]| {
        #[allow(clippy::disallowed_methods)] // Tests may spawn: a real client.
        let out = std::process::Command::new(CURL)
            .args(["-sS", "-m", "10", "--noproxy", "", "-x", &proxy_url])
            .args(args)
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, body) = run(&[&format!("http://allowed.test:{port}/x")]);
    assert_eq!((code, body.as_str()), (Some(0), "hello"));
    assert!(server.join().unwrap().starts_with("GET /x HTTP/1.1\r\n"));
    let (_, body) = run(&["-w", "%{http_code}", "-o", "/dev/null", "http://evil.test/"]);
    assert_eq!(body, "403");
    let got = reasons(&s.task);
    assert_eq!(got, vec![("evil.test:80".to_owned(), RefusalReason::NotAllowed)]);
}

#[test]
fn a_task_socket_that_exists_is_an_error() {
    let dir = TempDir::new();
    let proxy = Proxy::start(Arc::new(StaticResolver::new()), ProxyOptions::default()).unwrap();
    let _a = proxy.add_task(&dir.join("a"), p_net(&[])).unwrap();
    let err = proxy.add_task(&dir.join("a"), p_net(&[])).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
}

/// Dropping the handles and the proxy closes every socket and joins every thread (checked
/// in a child process, as for the relays).
#[cfg(target_os = "linux")]
#[test]
fn proxy_stop_leaves_no_socket_and_no_threads() {
    if !in_child_running_only("proxy::proxy_stop_leaves_no_socket_and_no_threads") {
        return;
    }
    let before = thread_count();
    let dir = TempDir::new();
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let grant = format!("127.0.0.1:{port}");
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let proxy = Proxy::start(resolver, ProxyOptions::default()).unwrap();
    let a = proxy.add_task(&dir.join("a"), p_net(&[&grant])).unwrap();
    let b = proxy.add_task(&dir.join("b"), p_net(&[&grant])).unwrap();
    let (line, tunnel) = connect(&dir.join("a"), &format!("allowed.test:{port}"));
    assert!(line.contains(" 200 "));
    let (_upstream, _) = server.accept().unwrap();
    let _idle = UnixStream::connect(dir.join("b")).unwrap();
    assert!(wait_for(Duration::from_secs(5), || b.stats().active == 1));
    drop(a);
    drop(b);
    drop(proxy);
    assert_eq!(thread_count_settled_at(before), before, "every proxy thread is joined");
    assert!(!dir.join("a").exists() && !dir.join("b").exists(), "task sockets removed");
    let mut buf = [0u8; 1];
    assert_eq!((&tunnel).read(&mut buf).unwrap_or(0), 0, "open tunnels were closed");
}

#[test]
fn unreachable_granted_destinations_fail_without_a_violation() {
    // A port nothing listens on (bound, then closed) and a granted name with no address.
    let closed = paddock_test_support::free_port();
    let resolver = Arc::new(StaticResolver::new().with("allowed.test", &[ip(LOOPBACK)]));
    let grant = format!("127.0.0.1:{closed}");
    let s = setup(rules(&["allowed.test:*", "gone.test", &grant], &[]), resolver.clone());
    assert!(status(&s.sock, &format!("allowed.test:{closed}")).starts_with("HTTP/1.1 502"));
    let (code, _) = socks(&s.sock, 1, &socks_domain("allowed.test"), closed);
    assert_eq!(code, 0x05, "connection refused");
    assert!(status(&s.sock, "gone.test:443").starts_with("HTTP/1.1 502"));
    let (code, _) = socks(&s.sock, 1, &socks_domain("gone.test"), 443);
    assert_eq!(code, 0x04, "host unreachable");
    assert!(s.task.take_violations().is_empty(), "not policy refusals");
    assert_eq!(resolver.lookups(), vec!["allowed.test", "allowed.test", "gone.test", "gone.test"]);
}

#[test]
fn socks5_ipv6_address_type_reaches_a_listed_ipv6_loopback() {
    let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
        paddock_test_support::skip("no IPv6 loopback (::1) here", None);
        return;
    };
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || echo(listener.accept().unwrap().0));
    let s = setup(rules(&[&format!("[::1]:{port}")], &[]), Arc::new(StaticResolver::new()));
    let mut v6 = vec![4u8];
    v6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    let (code, stream) = socks(&s.sock, 1, &v6, port);
    assert_eq!(code, 0);
    assert_eq!(echo_through(stream, b"six"), echoed(b"six"));
    // The same address as an IPv4 literal is another destination.
    let (code, _) = socks(&s.sock, 1, &[1, 127, 0, 0, 1], port);
    assert_eq!(code, 0x02);
}

/// A target that ignores `Connection: close`: it answers the first request head it reads
/// and keeps reading until the proxy closes; returns every byte it got.
fn keep_alive_server() -> (std::net::SocketAddr, thread::JoinHandle<Vec<u8>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut seen = Vec::new();
        let mut answered = false;
        let mut buf = [0u8; 4096];
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if !answered && seen.windows(4).any(|w| w == b"\r\n\r\n") {
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
                answered = true;
            }
        }
        seen
    });
    (addr, t)
}

/// Reads a response with a 5-byte body.
fn read_hello(c: &UnixStream) -> String {
    let head = read_response_head(c);
    let mut body = [0u8; 5];
    (&*c).read_exact(&mut body).unwrap();
    head + std::str::from_utf8(&body).unwrap()
}

#[test]
fn pipelined_requests_after_the_first_are_checked_reported_and_never_forwarded() {
    let (addr, server) = keep_alive_server();
    let port = addr.port();
    let resolver = sinkhole_resolver(&["allowed.test"]);
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), resolver.clone());
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let first = format!(
        "POST http://allowed.test:{port}/a HTTP/1.1\r\nHost: allowed.test:{port}\r\n\
         Transfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n"
    );
    // In the same write: another Host, a URI naming another host, and a granted one.
    let pipelined = format!(
        "GET http://allowed.test:{port}/b HTTP/1.1\r\nHost: evil.test\r\n\r\n\
         GET http://evil.test:{port}/c HTTP/1.1\r\nHost: evil.test:{port}\r\n\r\n\
         GET http://allowed.test:{port}/d HTTP/1.1\r\n\r\n"
    );
    c.write_all(format!("{first}{pipelined}").as_bytes()).unwrap();
    let answer = read_hello(&c);
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("hello"), "{answer}");
    // Kept alive: one more request after the answer.
    c.write_all(format!("GET http://evil.test:{port}/e HTTP/1.1\r\n\r\n").as_bytes()).unwrap();
    thread::sleep(Duration::from_millis(200));
    c.shutdown(Shutdown::Write).unwrap();
    let seen = String::from_utf8(server.join().unwrap()).unwrap();
    assert_eq!(
        seen,
        format!(
            "POST /a HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n4\r\nbody\r\n0\r\n\r\n"
        ),
        "only the first request reaches the target"
    );
    let mut got = reasons(&s.task);
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                format!("allowed.test:{port}"),
                RefusalReason::HostMismatch { host: "evil.test".into() }
            ),
            (format!("evil.test:{port}"), RefusalReason::NotAllowed),
        ]
    );
    let evil = s.task.stop();
    assert!(evil.is_empty());
    assert_eq!(resolver.lookups(), vec!["allowed.test"], "later requests are never resolved");
}

#[test]
fn a_kept_alive_request_for_another_host_is_refused_and_counted() {
    let (addr, server) = keep_alive_server();
    let port = addr.port();
    let grant = format!("127.0.0.1:{port}");
    let s = setup(p_net(&[&grant]), sinkhole_resolver(&["allowed.test"]));
    let mut c = UnixStream::connect(&s.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(format!("GET http://allowed.test:{port}/ HTTP/1.1\r\n\r\n").as_bytes()).unwrap();
    assert!(read_hello(&c).ends_with("hello"));
    for _ in 0..2 {
        c.write_all(format!("GET http://evil.test:{port}/ HTTP/1.1\r\n\r\n").as_bytes()).unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    c.shutdown(Shutdown::Write).unwrap();
    let seen = String::from_utf8(server.join().unwrap()).unwrap();
    assert!(!seen.contains("evil"), "{seen}");
    let refusals = s.task.take_violations();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].violation.target.as_deref(), Some(&*format!("evil.test:{port}")));
    assert_eq!(refusals[0].violation.count, 2);
}

#[test]
fn names_without_a_port_reach_only_the_web_ports() {
    // A public test address: the rules' decision shows as a DNS lookup (granted) or a
    // refusal before any (not granted); whether it then answers is no violation either way.
    let resolver = Arc::new(StaticResolver::new().with("allowed.test", &[ip("198.18.0.10")]));
    let options =
        ProxyOptions { connect_timeout: Duration::from_millis(200), ..ProxyOptions::default() };
    let s = setup_with(rules(&["allowed.test"], &[]), resolver.clone(), options);
    for port in [25, 6379, 22, 8080] {
        let line = status(&s.sock, &format!("allowed.test:{port}"));
        assert!(line.starts_with("HTTP/1.1 403"), "{port}: {line}");
        let (code, _) = socks(&s.sock, 1, &socks_domain("allowed.test"), port);
        assert_eq!(code, 0x02, "{port}: not allowed");
    }
    assert!(resolver.lookups().is_empty(), "refused before any lookup");
    let mut got = reasons(&s.task);
    got.sort();
    let want: Vec<_> = [22, 25, 6379, 8080]
        .iter()
        .map(|p| (format!("allowed.test:{p}"), RefusalReason::NotAllowed))
        .collect();
    assert_eq!(got, want);
    for port in [443, 80] {
        // Granted: 200 where the address answers, 502 where it does not.
        let line = status(&s.sock, &format!("allowed.test:{port}"));
        assert!(!line.starts_with("HTTP/1.1 403"), "{port}: {line}");
    }
    assert_eq!(resolver.lookups(), vec!["allowed.test", "allowed.test"]);
    assert!(s.task.take_violations().is_empty());
}
