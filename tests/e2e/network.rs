//! Network beyond on/off, end to end with loopback servers started here: the egress proxy for
//! a domain list (NET-04, NET-13, NET-15, refusals in the report), port grants both ways
//! (`allow.local-ports`, `allow.host-ports`, NET-18), their lifecycle, and the supervisor that
//! runs the in-sandbox relays staying out of the task's reach (UNX-05).
//!
//! Cases that need names or non-loopback addresses (NET-03's DNS log, names that resolve into
//! the LAN, NET-18's LAN address) are in `named`, each run in a `lab::Lab`: as root, a thread
//! of the test moves into network and mount namespaces of its own, where it adds addresses to
//! loopback, serves DNS with a query log, and binds resolver files over `/etc`; paddock runs
//! from that thread.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

mod lab;
mod named;

/// A host server on 127.0.0.1 answering every connection with an HTTP response carrying
/// `body`, counting the connections it accepted.
struct HostServer {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl HostServer {
    fn start(body: &'static str) -> HostServer {
        HostServer::start_on("127.0.0.1", body)
    }

    fn start_on(ip: &str, body: &'static str) -> HostServer {
        HostServer::start_at(ip, 0, body)
    }

    /// On `ip:port` (0: any free port).
    fn start_at(ip: &str, port: u16, body: &'static str) -> HostServer {
        let listener = TcpListener::bind((ip, port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 2048];
                let _ = conn.read(&mut buf);
                let reply = format!(
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        HostServer { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    paddock_test_support::free_port()
}

/// Runs the probe with `ops` under `paddock run --report R FLAGS`; returns the observations,
/// the report and the output.
fn probe_report(s: &Scratch, flags: &[&str], ops: &[&str]) -> (Vec<Value>, Value, Output) {
    let report = s.root.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut all = vec!["--report", report.to_str().unwrap()];
    all.extend_from_slice(flags);
    let (obs, out) = s.probe(&all, ops);
    let text = std::fs::read(&report).unwrap_or_else(|_| panic!("no report: {out:?}"));
    (obs, serde_json::from_slice(&text).unwrap(), out)
}

fn detail<'a>(all: &'a [Value], op: &str, arg: &str) -> &'a str {
    obs(all, op, arg)["detail"].as_str().unwrap_or("")
}

fn network_targets(report: &Value) -> Vec<String> {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "network")
        .map(|v| v["target"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn config(s: &Scratch, toml: &str) {
    std::fs::write(s.project.join("paddock.toml"), toml).unwrap();
}

/// GET / from host 127.0.0.1:`port`, retrying a refused connection until `within`.
fn host_get(port: u16, within: Duration) -> std::io::Result<String> {
    let end = Instant::now() + within;
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut c) => {
                c.set_read_timeout(Some(Duration::from_secs(20)))?;
                c.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
                let mut answer = String::new();
                c.read_to_string(&mut answer)?;
                return Ok(answer);
            }
            Err(e) if Instant::now() >= end => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

#[test]
fn proxy_reaches_a_listed_ip_and_refuses_the_rest_into_the_report() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-proxy");
    let granted = HostServer::start("granted-server");
    let other = HostServer::start("other-server");
    let (g, o) = (granted.port, other.port);
    let grant = format!("127.0.0.1:{g}");
    let ops = [
        format!("http:http://127.0.0.1:{g}/index"),
        format!("http:http://127.0.0.1:{o}/"),
        format!("proxy-connect:127.0.0.1:{g}"),
        format!("proxy-connect:127.0.0.1:{o}"),
        "env:HTTPS_PROXY".to_owned(),
        "env:no_proxy".to_owned(),
        "env:JAVA_TOOL_OPTIONS".to_owned(),
    ];
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    // `--itemize off`: the proxy's refusals are itemized without any tracer.
    let (all, report, out) = probe_report(&s, &["--itemize", "off", "--network", &grant], &ops);
    let got = detail(&all, "http", &format!("http://127.0.0.1:{g}/index"));
    assert!(got.starts_with("HTTP/1.0 200") && got.ends_with("granted-server"), "{got}");
    let refused = detail(&all, "http", &format!("http://127.0.0.1:{o}/"));
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(detail(&all, "proxy-connect", &grant).contains(" 200"), "{all:?}");
    let connect_other = detail(&all, "proxy-connect", &format!("127.0.0.1:{o}"));
    assert!(connect_other.starts_with("HTTP/1.1 403"), "{connect_other}");
    assert_eq!(other.hits(), 0, "a refused destination saw a connection");
    assert_eq!(granted.hits(), 2);
    // The task's proxy variables point at the in-sandbox port.
    assert_eq!(detail(&all, "env", "HTTPS_PROXY"), "http://127.0.0.1:3128");
    assert!(detail(&all, "env", "no_proxy").starts_with("localhost,127.0.0.1"), "{all:?}");
    assert!(detail(&all, "env", "JAVA_TOOL_OPTIONS").contains("-Dhttp.proxyPort=3128"));

    assert_eq!(report["itemized"], true, "{report}");
    assert_eq!(report["itemized_by"], "proxy", "{report}");
    assert_eq!(network_targets(&report), vec![format!("127.0.0.1:{o}")], "{report}");
    let v = &report["violations"][0];
    assert_eq!(v["count"], 2, "{report}");
    assert!(
        stderr(&out).contains(&format!("denied 2 connections to 127.0.0.1:{o}")),
        "{}",
        stderr(&out)
    );

    // Traced (when strace is here), the refusals join the tracer's violations.
    let (_, report, _) = probe_report(&s, &["--network", &grant], &[ops[1]]);
    assert!(network_targets(&report).contains(&format!("127.0.0.1:{o}")), "{report}");
    assert_eq!(report["itemized"], true, "{report}");
}

#[test]
fn the_proxy_is_the_only_way_out() {
    // NET-13: without the proxy (a direct connect, the variables unset) nothing leaves.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-direct");
    let server = HostServer::start("direct");
    let direct = format!("connect:127.0.0.1:{}", server.port);
    let (all, report, _) = probe_report(
        &s,
        &["--itemize", "off", "--network", &format!("127.0.0.1:{}", server.port)],
        &[&direct, "connect:192.0.2.10:443", "connect:1.1.1.1:53"],
    );
    assert_denied(&all, "connect", &format!("127.0.0.1:{}", server.port), &[ECONNREFUSED]);
    assert_denied(&all, "connect", "192.0.2.10:443", &[ENETUNREACH]);
    assert_denied(&all, "connect", "1.1.1.1:53", &[ENETUNREACH]);
    assert_eq!(server.hits(), 0);
    assert!(network_targets(&report).is_empty(), "direct attempts never reach the proxy");
}

#[test]
fn a_granted_name_resolving_to_loopback_needs_the_ip_granted() {
    // NET-15: `localhost` is a granted name, but it resolves into loopback.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-rebind");
    let server = HostServer::start("loopback-service");
    let url = format!("http:http://localhost:{}/", server.port);
    let (all, report, _) = probe_report(
        &s,
        &["--itemize", "off", "--network", &format!("localhost:{}", server.port)],
        &[&url],
    );
    let got = detail(&all, "http", &url[5..]);
    assert!(got.starts_with("HTTP/1.1 403"), "{got}");
    assert_eq!(server.hits(), 0);
    assert_eq!(network_targets(&report), vec![format!("localhost:{}", server.port)]);

    // Granting the IP as well lets it through.
    let both = format!("localhost:{p},127.0.0.1:{p},[::1]:{p}", p = server.port);
    let (all, report, _) = probe_report(&s, &["--itemize", "off", "--network", &both], &[&url]);
    let got = detail(&all, "http", &url[5..]);
    assert!(got.starts_with("HTTP/1.0 200") && got.ends_with("loopback-service"), "{got}");
    assert!(network_targets(&report).is_empty(), "{report}");
}

#[test]
fn loopback_spellings_through_the_proxy_are_refused() {
    // NET-04: a domain list with no IP grant; every spelling of the host's loopback is 403.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-spellings");
    let server = HostServer::start("never");
    let p = server.port;
    let hosts = [
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
    ];
    let ops: Vec<String> = hosts.iter().map(|h| format!("proxy-connect:{h}:{p}")).collect();
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (all, report, _) =
        probe_report(&s, &["--itemize", "off", "--network", "example.test"], &ops);
    for h in hosts {
        let got = detail(&all, "proxy-connect", &format!("{h}:{p}"));
        assert!(got.starts_with("HTTP/1.1 403"), "CONNECT {h}:{p} gave {got:?}");
    }
    assert_eq!(server.hits(), 0, "the loopback server saw a connection");
    assert!(!network_targets(&report).is_empty());
}

#[test]
fn no_domains_no_proxy() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-none");
    for flags in [&["--network", "off"][..], &[][..]] {
        let (all, report, _) = probe_report(
            &s,
            flags,
            &["env:HTTP_PROXY", "env:https_proxy", "env:ALL_PROXY", "connect:127.0.0.1:3128"],
        );
        for var in ["HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
            assert_eq!(obs(&all, "env", var)["ok"], false, "{var} set without domains: {all:?}");
        }
        assert_denied(&all, "connect", "127.0.0.1:3128", &[ECONNREFUSED]);
        assert_ne!(report["itemized_by"], "proxy");
    }
}

#[test]
fn local_port_grant_reaches_a_server_the_task_starts() {
    // NET-18: the granted port is reachable from the host, another one is not; a client
    // that arrives before the server listens is held, not refused.
    if !require_os_sandbox() {
        return;
    }
    local_port_case("net-local", false);
}

#[test]
fn local_port_flag_grants_like_the_config_key() {
    if !require_os_sandbox() {
        return;
    }
    local_port_case("net-local-flag", true);
}

/// A task serving a granted and an ungranted port; the grant by config key or by flag.
fn local_port_case(name: &str, via_flag: bool) {
    let s = Scratch::new(name);
    let (granted, other) = (free_port(), free_port());
    let granted_text = granted.to_string();
    let mut flags = vec!["run", "--timeout", "30"];
    if via_flag {
        flags.extend(["--allow-local-port", &granted_text]);
    } else {
        config(&s, &format!("[allow]\nlocal-ports = [{granted}]\n"));
    }
    let python = Path::new("/usr/bin/python3").exists();
    let server = if python {
        format!("/usr/bin/python3 -m http.server {granted} --bind 127.0.0.1 >/dev/null 2>&1 &")
    } else {
        format!("{} serve:{granted}:6 &", probe_bin().display())
    };
    // The task starts its server a moment late, serves another port too, and lives 6 s. It
    // says (`other-up`) once it reaches its own server on the other port: only then does the
    // host's failure to reach that port prove anything.
    let probe = probe_bin();
    let probe = probe.display();
    let script = format!(
        "sleep 0.5; {server} py=$!; {probe} serve:{other}:6 >/dev/null & srv=$!; \
         for i in $(seq 200); do \
           if {probe} connect:127.0.0.1:{other} | grep -q '\"ok\":true'; then : > other-up; break; fi; \
           sleep 0.05; \
         done; wait $srv; kill $py 2>/dev/null; true"
    );
    let mut child = s
        .paddock()
        .args(&flags)
        .args(["--", "sh", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let got = host_get(granted, Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.project.join("other-up").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.project.join("other-up").exists(), "the task's own server never answered it");
    let other_reached = host_get(other, Duration::from_secs(1));
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let got = got.unwrap_or_else(|e| panic!("granted port not reachable: {e}; {err}"));
    assert!(got.starts_with("HTTP/1.0 200"), "{got}");
    if !python {
        assert!(got.ends_with("served-by-probe"), "{got}");
    }
    assert!(other_reached.is_err(), "an ungranted port was reachable: {other_reached:?}");
    assert!(status.success(), "{status:?}: {err}");
    // The host end is gone with the task.
    assert!(!listening(granted), "the host still listens on {granted} after the run");
}

#[test]
fn a_busy_local_port_fails_before_the_task_starts() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-busy");
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    config(&s, &format!("[allow]\nlocal-ports = [{port}]\n"));
    let marker = s.project.join("ran");
    let out = s.paddock().args(["run", "--", "sh", "-c", "touch ran"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains(&format!("port {port}")) && err.contains("already in use"), "{err}");
    assert!(!marker.exists(), "the task ran");
}

#[test]
fn host_port_grant_reaches_a_host_service_with_the_network_off() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-hostport");
    let service = HostServer::start("host-service");
    let other = HostServer::start("not-granted");
    config(&s, &format!("[allow]\nhost-ports = [{}]\n", service.port));
    let (all, _) = s.probe(
        &["--network", "off"],
        &[
            &format!("connect:127.0.0.1:{}", service.port),
            &format!("connect:127.0.0.1:{}", other.port),
            "connect:192.0.2.10:443",
            "env:HTTP_PROXY",
        ],
    );
    let got = assert_allowed(&all, "connect", &format!("127.0.0.1:{}", service.port));
    assert!(got.starts_with("HTTP/1.0 200"), "{got}");
    assert_denied(&all, "connect", &format!("127.0.0.1:{}", other.port), &[ECONNREFUSED]);
    assert_denied(&all, "connect", "192.0.2.10:443", &[ENETUNREACH]);
    assert_eq!(obs(&all, "env", "HTTP_PROXY")["ok"], false);
    assert_eq!(service.hits(), 1);
    assert_eq!(other.hits(), 0);
}

#[test]
fn host_port_flag_grants_like_the_config_key() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-hostport-flag");
    let service = HostServer::start("host-service");
    let other = HostServer::start("not-granted");
    let port = service.port.to_string();
    let (all, _) = s.probe(
        &["--allow-host-port", &port],
        &[
            &format!("connect:127.0.0.1:{}", service.port),
            &format!("connect:127.0.0.1:{}", other.port),
        ],
    );
    let got = assert_allowed(&all, "connect", &format!("127.0.0.1:{}", service.port));
    assert!(got.starts_with("HTTP/1.0 200"), "{got}");
    assert_denied(&all, "connect", &format!("127.0.0.1:{}", other.port), &[ECONNREFUSED]);
    assert_eq!(other.hits(), 0);
    // Port 0 is no port: refused before anything runs.
    let out = s.paddock().args(["run", "--allow-host-port", "0", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
}

#[test]
fn a_timed_out_task_takes_its_bridges_with_it() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-timeout");
    let port = free_port();
    config(&s, &format!("[allow]\nlocal-ports = [{port}]\nnetwork = [\"example.test\"]\n"));
    let mut child = s
        .paddock()
        .args(["run", "--timeout", "2", "--", "sleep", "30"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while !listening(port) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(listening(port), "the host end never listened");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(124));
    assert!(!listening(port), "the host end outlived the task");
}

#[test]
fn the_supervisor_running_the_relays_is_out_of_the_tasks_reach() {
    // UNX-05: pid 1 holds the unfiltered relays; the task cannot attach to it or read it.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-unx05");
    let port = free_port();
    config(&s, &format!("[allow]\nlocal-ports = [{port}]\nnetwork = [\"example.test\"]\n"));
    let (all, _) = s.probe(
        &[],
        &["ptrace:1", "open:/proc/1/mem", "open:/proc/1/environ", "open:/proc/self/environ"],
    );
    assert_denied(&all, "ptrace", "1", &[EPERM]);
    assert_denied(&all, "open", "/proc/1/mem", &[EACCES, EPERM]);
    // READ-mode access (no ptrace policy applies): fails only because pid 1 is not dumpable.
    assert_denied(&all, "open", "/proc/1/environ", &[EACCES, EPERM]);
    // The same checks succeed on the task itself, so the denials above are the wall.
    assert_allowed(&all, "open", "/proc/self/environ");
}

#[test]
fn the_task_can_neither_reach_nor_replace_a_bridge_end() {
    // The inbound channel is a descriptor the supervisor holds, not a path: the task has no
    // descriptor beyond its stdio and no socket directory it could write. The host-made
    // sockets (proxy, host ports) sit in a read-only directory.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-reach");
    let port = free_port();
    config(&s, &format!("[allow]\nlocal-ports = [{port}]\nnetwork = [\"example.test\"]\n"));
    let (all, out) = s.probe(&[], &["fds", "open:/dev/.paddock-in", "open:/dev/.paddock-net"]);
    let fds = assert_allowed(&all, "fds", "");
    // 0-2 and the one `read_dir` itself opens.
    assert_eq!(fds.split(',').count(), 4, "unexpected fds in the task: {fds}; {out:?}");
    assert_denied(&all, "open", "/dev/.paddock-in", &[ENOENT]);
    assert_allowed(&all, "open", "/dev/.paddock-net");
    let out = s
        .paddock()
        .args(["run", "--", "sh", "-c", "rm /dev/.paddock-net/proxy 2>/dev/null || echo kept"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n", "{out:?}");
}

#[test]
fn a_killed_run_leaves_no_listener_and_its_sockets_are_swept() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-kill");
    let xdg = s.root.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let port = free_port();
    config(&s, &format!("[allow]\nlocal-ports = [{port}]\nnetwork = [\"example.test\"]\n"));
    let mut child = s
        .paddock()
        .env("XDG_RUNTIME_DIR", &xdg)
        .args(["run", "--", "sh", "-c", "touch started; exec sleep 30"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the task runs, not while paddock is still spawning: a child forked but
    // not yet executed holds the listener for that moment.
    let started = s.project.join("started");
    let base = xdg.join("paddock");
    let runtime = || {
        std::fs::read_dir(&base)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("net/proxy").exists())
    };
    let end = Instant::now() + Duration::from_secs(10);
    while (runtime().is_none() || !listening(port) || !started.exists()) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir =
        runtime().unwrap_or_else(|| panic!("no runtime dir with the proxy socket in {base:?}"));
    assert!(listening(port));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!listening(port), "the host end outlived a killed paddock");
    assert!(dir.exists(), "a SIGKILLed run cannot clean up after itself");
    // The next run sweeps the dead run's dir and its sockets.
    let out =
        s.paddock().env("XDG_RUNTIME_DIR", &xdg).args(["run", "--", "true"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!dir.exists(), "the stale runtime dir survived the sweep");
}

#[test]
fn ignored_destinations_are_refused_but_not_reported() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net-ignore");
    config(&s, "[ignore]\nnetwork = [\"*.quiet.test\"]\n");
    let (all, report, out) = probe_report(
        &s,
        &["--itemize", "off", "--network", "example.test"],
        &["proxy-connect:a.quiet.test:443", "proxy-connect:loud.test:443"],
    );
    for target in ["a.quiet.test:443", "loud.test:443"] {
        let got = detail(&all, "proxy-connect", target);
        assert!(got.starts_with("HTTP/1.1 403"), "{target}: {got}");
    }
    assert_eq!(network_targets(&report), vec!["loud.test:443".to_owned()], "{report}");
    assert!(!stderr(&out).contains("quiet.test"), "{}", stderr(&out));
}

#[test]
fn net11_a_relay_the_task_runs_gets_the_same_refusal_and_no_socket_is_usable() {
    // NET-11: a forwarder the task runs on its own loopback changes nothing (the proxy
    // judges the request, not the path it took), and the task cannot open a unix socket,
    // so neither the bridge socket nor any other is usable directly. Not as NET-11 words
    // it: the bridge socket is not the only one the task sees. Host sockets under readable
    // paths are listed, only not connectable (a known gap).
    if !require_os_sandbox() {
        return;
    }
    crate::known_gaps::gap("NET-11");
    if !require_tool("/usr/bin/python3", "NET-11's forwarder") {
        return;
    }
    let s = Scratch::new("net-11");
    let script = r"
import os, socket, stat, threading
req = b'CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n'
try:
    socket.socket(socket.AF_UNIX)
    print('unix socket created')
except OSError as e:
    print('unix', e.errno)
l = socket.socket()
l.bind(('127.0.0.1', 9999))
l.listen(1)
def forward():
    c, _ = l.accept()
    p = socket.create_connection(('127.0.0.1', 3128))
    p.sendall(c.recv(4096))
    c.sendall(p.recv(4096))
threading.Thread(target=forward, daemon=True).start()
r = socket.create_connection(('127.0.0.1', 9999))
r.sendall(req)
print('relayed', r.recv(4096).split(b'\r\n')[0].decode())
found = []
for root, dirs, files in os.walk('/'):
    if root in ('/proc', '/sys'):
        dirs[:] = []
    for f in files:
        try:
            if stat.S_ISSOCK(os.lstat(os.path.join(root, f)).st_mode):
                found.append(os.path.join(root, f))
        except OSError:
            pass
print('sockets', ' '.join(sorted(found)))
";
    let report = s.root.join("report.json");
    let out = s
        .paddock()
        .args(["run", "--itemize", "off", "--network", "example.test", "--report"])
        .arg(&report)
        .args(["--", "/usr/bin/python3", "-c", script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..2], [&format!("unix {EPERM}")[..], "relayed HTTP/1.1 403 Forbidden"]);
    let seen: Vec<&str> = lines[2].strip_prefix("sockets ").unwrap_or("").split(' ').collect();
    assert!(seen.contains(&"/dev/.paddock-net/proxy"), "{stdout}: {}", stderr(&out));
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(network_targets(&report), ["evil.test:443"], "{report}");
}
