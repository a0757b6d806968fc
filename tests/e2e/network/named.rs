//! The network cases that need names or addresses beyond loopback, each in a [`Lab`]: NET-03
//! (a refused name is never looked up, over HTTP, CONNECT and SOCKS5), a granted name that
//! resolves into the LAN (NET-05, NET-15), NET-18's loopback-only grants, curl through
//! paddock, HTTPS to a real TLS server with a fronted server name cut (NET-10), a name
//! without a port reaching the web ports only, and pipelined requests checked one by one.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::Value;

use super::lab::{Lab, Zone};
use super::*;

fn network_count(report: &Value, target: &str) -> u64 {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "network" && v["target"] == target)
        .map(|v| v["count"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn net03_refused_names_are_never_looked_up() {
    // NET-03: the allowlist is checked before any DNS lookup. The lab's DNS server would
    // answer the exfiltration names (pointing at a sinkhole); its log must not hold them.
    let s = Scratch::new("net-03");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"]), ("*.exfil.test", &["198.18.0.99"])];
    Lab::run(&s, &["198.18.0.10", "198.18.0.99"], zone, |lab| {
        let allowed = HostServer::start_on("198.18.0.10", "allowed-server");
        let sinkhole = HostServer::start_on("198.18.0.99", "sinkhole");
        let (a, k) = (allowed.port, sinkhole.port);
        let ops = [
            format!("proxy-connect:c4n4ry.exfil.test:{k}"),
            format!("http:http://c4n4ry.exfil.test:{k}/"),
            format!("proxy-connect:allowed.test:{a}"),
        ];
        let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
        // The servers listen on whatever port they got: the name is granted on every port.
        let flags = ["--itemize", "off", "--network", "allowed.test:*"];
        let (all, report, out) = probe_report(&s, &flags, &ops);
        let connect = detail(&all, "proxy-connect", &format!("c4n4ry.exfil.test:{k}"));
        assert!(connect.starts_with("HTTP/1.1 403"), "{connect}: {}", stderr(&out));
        let get = detail(&all, "http", &format!("http://c4n4ry.exfil.test:{k}/"));
        assert!(get.starts_with("HTTP/1.1 403"), "{get}");
        // The control: a granted name is resolved through the lab's server and reached.
        let granted = detail(&all, "proxy-connect", &format!("allowed.test:{a}"));
        assert!(granted.contains(" 200"), "{granted}: {}", stderr(&out));
        let queries = lab.queries();
        assert!(queries.iter().any(|q| q == "allowed.test"), "not the lab's DNS: {queries:?}");
        assert!(!queries.iter().any(|q| q.ends_with("exfil.test")), "{queries:?}");
        assert_eq!(sinkhole.hits(), 0);
        assert_eq!(allowed.hits(), 1);
        // What the proxy reports for the refused name: both requests, one destination.
        assert_eq!(network_count(&report, &format!("c4n4ry.exfil.test:{k}")), 2, "{report}");
        assert_eq!(network_targets(&report).len(), 1, "{report}");

        // SOCKS5 with a domain (remote DNS): a failure reply for the refused name, success
        // for the granted one, and still no lookup of the refused name.
        if !require_tool("/usr/bin/python3", "NET-03's SOCKS5 client") {
            return;
        }
        let socks = format!(
            "import socket\n\
             for name, port in ((b'c4n4ry.exfil.test', {k}), (b'allowed.test', {a})):\n \
             s = socket.create_connection(('127.0.0.1', 3128), 5)\n \
             s.sendall(b'\\x05\\x01\\x00'); s.recv(2)\n \
             s.sendall(b'\\x05\\x01\\x00\\x03' + bytes([len(name)]) + name + port.to_bytes(2, 'big'))\n \
             print(s.recv(10)[1])\n"
        );
        let out = s
            .paddock()
            .args(["run", "--itemize", "off", "--network", "allowed.test:*", "--"])
            .args(["/usr/bin/python3", "-c", &socks])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n0\n", "{}", stderr(&out));
        assert!(!lab.queries().iter().any(|q| q.ends_with("exfil.test")), "{:?}", lab.queries());
        assert_eq!((sinkhole.hits(), allowed.hits()), (0, 2));
    });
}

#[test]
fn a_granted_name_resolving_into_the_lan_needs_that_ip_granted() {
    // NET-05/NET-15 for the LAN: a granted name whose answer holds a private address (alone
    // or beside a public one) is refused after the lookup, unless that IP is granted too.
    let s = Scratch::new("net-lan");
    let zone: Zone = &[("lan.test", &["10.77.0.1"]), ("mixed.test", &["198.18.0.10", "10.77.0.1"])];
    Lab::run(&s, &["10.77.0.1", "198.18.0.10"], zone, |lab| {
        let lan = HostServer::start_on("10.77.0.1", "lan-service");
        let p = lan.port;
        let public = TcpListener::bind(("198.18.0.10", p)).unwrap();
        public.set_nonblocking(true).unwrap();
        let (get, mixed) = (format!("http://lan.test:{p}/"), format!("mixed.test:{p}"));
        let ops = [
            format!("http:{get}"),
            format!("proxy-connect:{mixed}"),
            format!("connect:10.77.0.1:{p}"),
        ];
        let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
        let flags = ["--itemize", "off", "--network", "lan.test:*,mixed.test:*"];
        let (all, report, out) = probe_report(&s, &flags, &ops);
        assert!(detail(&all, "http", &get).starts_with("HTTP/1.1 403"), "{all:?}");
        assert!(detail(&all, "proxy-connect", &mixed).starts_with("HTTP/1.1 403"), "{all:?}");
        assert_denied(&all, "connect", &format!("10.77.0.1:{p}"), &[ENETUNREACH]);
        assert_eq!(lan.hits(), 0, "the LAN service saw a connection");
        assert!(public.accept().is_err(), "a half-private answer was half used");
        let mut targets = network_targets(&report);
        targets.sort();
        assert_eq!(targets, vec![format!("lan.test:{p}"), mixed.clone()], "{report}");
        // Refused after the lookup, not before: the names were resolved.
        let queries = lab.queries();
        assert!(queries.iter().any(|q| q == "lan.test"), "{queries:?}");
        // The summary says "allow with allow.network", which the name is already in; why
        // it was refused is said too.
        let why = format!("refused lan.test:{p}: resolves to the internal address 10.77.0.1");
        assert!(stderr(&out).contains(&why), "{}", stderr(&out));

        // Granting the LAN address itself lets the name through.
        let flags = ["--itemize", "off", "--network", &format!("lan.test:*,10.77.0.1:{p}")];
        let (all, report, _) = probe_report(&s, &flags, &[&format!("http:{get}")]);
        let got = detail(&all, "http", &get);
        assert!(got.starts_with("HTTP/1.0 200") && got.ends_with("lan-service"), "{got}");
        assert!(network_targets(&report).is_empty(), "{report}");
        assert_eq!(lan.hits(), 1);
    });
}

#[test]
fn net18_a_port_grant_is_loopback_only_private_and_for_its_own_task() {
    // NET-18 beyond the granted port answering: the host end is not on the LAN address, a
    // server the task binds on every interface stays unreachable, the bridge socket is
    // 0600, and another task reaches the port neither directly nor through its proxy.
    if !require_tool("/usr/bin/python3", "NET-18's all-interfaces server") {
        return;
    }
    let s = Scratch::new("net-18");
    Lab::run(&s, &["10.77.0.1"], &[], |_| {
        let (g, z) = (free_port(), free_port());
        let xdg = s.root.join("xdg");
        std::fs::create_dir(&xdg).unwrap();
        config(&s, &format!("[allow]\nlocal-ports = [{g}]\nnetwork = [\"example.test\"]\n"));
        let up = format!("import socket;socket.create_connection(('127.0.0.1',{z}),1)");
        let script = format!(
            "{probe} serve:{g}:30 >/dev/null & S=$!; \
             /usr/bin/python3 -m http.server {z} --bind 0.0.0.0 >/dev/null 2>&1 & P=$!; \
             for i in $(seq 100); do /usr/bin/python3 -c \"{up}\" 2>/dev/null && break; \
             sleep 0.1; done; echo z-up; \
             while [ ! -e done ]; do sleep 0.1; done; kill $S $P",
            probe = probe_bin().display()
        );
        let mut task = s
            .paddock()
            .env("XDG_RUNTIME_DIR", &xdg)
            .args(["run", "--timeout", "40", "--", "sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(task.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "z-up\n", "the task's all-interfaces server never came up");
        let got = host_get(g, Duration::from_secs(10)).unwrap();
        assert!(got.ends_with("served-by-probe"), "{got}");
        assert!(TcpStream::connect(("10.77.0.1", g)).is_err(), "the grant is on the LAN");
        for addr in ["127.0.0.1", "10.77.0.1"] {
            assert!(TcpStream::connect((addr, z)).is_err(), "{addr}:{z} reached the task");
        }
        // The inbound grant has no socket file (its channel is a descriptor); the proxy's
        // socket is private.
        let runtime = std::fs::read_dir(xdg.join("paddock"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("net/proxy").exists())
            .expect("no runtime dir with the proxy socket");
        assert!(!runtime.join("in").exists(), "an inbound socket directory");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(runtime.join("net/proxy")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "net/proxy is {mode:o}");
        // Another task (another project: this one's grant holds the host port): its own
        // loopback has nothing on the port, and its proxy refuses it.
        let other = Scratch::new("net-18-other");
        let (all, out) = other.probe(
            &["--network", "example.test"],
            &[&format!("connect:127.0.0.1:{g}"), &format!("proxy-connect:127.0.0.1:{g}")],
        );
        assert!(!all.is_empty(), "{}", stderr(&out));
        assert_denied(&all, "connect", &format!("127.0.0.1:{g}"), &[ECONNREFUSED]);
        let via_proxy = detail(&all, "proxy-connect", &format!("127.0.0.1:{g}"));
        assert!(via_proxy.starts_with("HTTP/1.1 403"), "{via_proxy}");
        std::fs::write(s.project.join("done"), "").unwrap();
        assert!(task.wait().unwrap().success());
    });
}

#[test]
fn curl_through_paddock_reaches_a_granted_name_and_not_another() {
    // The issue's own shape: `paddock run --network NAME -- curl ...`, with curl's own proxy
    // handling (lowercase `http_proxy`, CONNECT with -p) and the host's proxy variables
    // pointing nowhere: the task gets paddock's proxy, never the host's.
    const CURL: &str = "/usr/bin/curl";
    if !require_tool(CURL, "this test") {
        return;
    }
    let s = Scratch::new("net-curl");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"]), ("evil.test", &["198.18.0.99"])];
    Lab::run(&s, &["198.18.0.10", "198.18.0.99"], zone, |lab| {
        let allowed = HostServer::start_on("198.18.0.10", "allowed-server");
        let evil = HostServer::start_on("198.18.0.99", "evil-server");
        let (a, e) = (allowed.port, evil.port);
        let script = format!(
            "{CURL} -sS -m 10 http://allowed.test:{a}/; echo; \
             {CURL} -sS -m 10 -p http://allowed.test:{a}/; echo; \
             {CURL} -s -m 10 -o /dev/null -w '%{{http_code}}' http://evil.test:{e}/; echo"
        );
        let report = s.root.join("report.json");
        let out = s
            .paddock()
            .env("http_proxy", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .args(["run", "--itemize", "off", "--network", "allowed.test:*", "--report"])
            .arg(&report)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let lines = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            lines.lines().collect::<Vec<_>>(),
            ["allowed-server", "allowed-server", "403"],
            "{}",
            stderr(&out)
        );
        assert_eq!((allowed.hits(), evil.hits()), (2, 0));
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(network_targets(&report), vec![format!("evil.test:{e}")], "{report}");
        assert!(!lab.queries().iter().any(|q| q.starts_with("evil")), "{:?}", lab.queries());
    });
}

#[test]
fn net10_https_through_paddock_and_a_fronted_server_name_is_cut() {
    // A real TLS server (openssl s_server) behind a granted name: curl reaches it over the
    // proxy's tunnel; the same tunnel opened with another TLS server name (domain fronting,
    // curl --connect-to) is cut, reported, and its reason said.
    const CURL: &str = "/usr/bin/curl";
    const OPENSSL: &str = "/usr/bin/openssl";
    if !require_tool(CURL, "NET-10") || !require_tool(OPENSSL, "NET-10") {
        return;
    }
    let s = Scratch::new("net-10");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"]), ("evil.test", &["198.18.0.99"])];
    Lab::run(&s, &["198.18.0.10"], zone, |_| {
        let (key, cert) = (s.root.join("key.pem"), s.root.join("cert.pem"));
        let made = std::process::Command::new(OPENSSL)
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-nodes", "-days", "1", "-subj", "/CN=allowed.test", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        let p = free_port();
        let mut server = std::process::Command::new(OPENSSL)
            .args(["s_server", "-quiet", "-www", "-accept", &format!("198.18.0.10:{p}")])
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("198.18.0.10", p)).is_err() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        let code = "-o /dev/null -w '%{http_code}'";
        let script = format!(
            "{CURL} -sk -m 10 {code} https://allowed.test:{p}/; echo; \
             {CURL} -sk -m 10 {code} --connect-to evil.test:{p}:allowed.test:{p} \
             https://evil.test:{p}/; echo"
        );
        let report = s.root.join("report.json");
        let out = s
            .paddock()
            .args(["run", "--itemize", "off", "--network", "allowed.test:*", "--report"])
            .arg(&report)
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let _ = server.kill();
        let _ = server.wait();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(stdout.lines().collect::<Vec<_>>(), ["200", "000"], "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(network_targets(&report), [format!("allowed.test:{p}")], "{report}");
        let why = "the TLS server name `evil.test` differs from the tunnel's destination";
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    });
}

#[test]
fn a_static_paddock_resolves_through_files_and_dns_whatever_nsswitch_adds() {
    // A static glibc would load any other name service module with the system's shared C
    // library: a static paddock uses the two glibc has built in. Here nsswitch.conf puts a
    // service that cannot load first, and stops there when it is unavailable: a dynamic
    // paddock's proxy then resolves nothing, a static one still reaches the lab's name.
    const CURL: &str = "/usr/bin/curl";
    if !require_tool(CURL, "this test") {
        return;
    }
    let head = std::fs::read(paddock_bin()).unwrap_or_default();
    let dynamic = head[..head.len().min(4096)].windows(8).any(|w| w == b"ld-linux");
    let s = Scratch::new("net-nss");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"])];
    let hosts = "paddock-no-such-service [UNAVAIL=return] files dns";
    Lab::run_with_hosts(&s, &["198.18.0.10"], zone, hosts, |_lab| {
        let allowed = HostServer::start_on("198.18.0.10", "allowed-server");
        let script = format!("{CURL} -sS -m 10 http://allowed.test:{}/", allowed.port);
        let out = s
            .paddock()
            .args(["run", "--itemize", "off", "--network", "allowed.test:*"])
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let reached = String::from_utf8_lossy(&out.stdout).contains("allowed-server");
        assert_eq!(reached, !dynamic, "dynamic {dynamic}: {}", stderr(&out));
        println!("paddock is {}", if dynamic { "dynamic: NSS stopped" } else { "static" });
    });
}

#[test]
fn a_name_without_a_port_reaches_only_the_web_ports() {
    // `--network allowed.test` grants ports 80 and 443; mail, redis and ssh on the same
    // address are refused and reported, and the servers there see nothing.
    let s = Scratch::new("net-web-ports");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"])];
    Lab::run(&s, &["198.18.0.10"], zone, |_lab| {
        let web = HostServer::start_at("198.18.0.10", 443, "web-server");
        let others: Vec<HostServer> = [25, 6379, 22]
            .iter()
            .map(|&p| HostServer::start_at("198.18.0.10", p, "other-service"))
            .collect();
        let ops = [
            "proxy-connect:allowed.test:443",
            "proxy-connect:allowed.test:25",
            "proxy-connect:allowed.test:6379",
            "proxy-connect:allowed.test:22",
        ];
        let flags = ["--itemize", "off", "--network", "allowed.test"];
        let (all, report, out) = probe_report(&s, &flags, &ops);
        let granted = detail(&all, "proxy-connect", "allowed.test:443");
        assert!(granted.contains(" 200"), "{granted}: {}", stderr(&out));
        for port in [25, 6379, 22] {
            let got = detail(&all, "proxy-connect", &format!("allowed.test:{port}"));
            assert!(got.starts_with("HTTP/1.1 403"), "{port}: {got}");
        }
        assert_eq!(web.hits(), 1);
        assert!(others.iter().all(|o| o.hits() == 0), "a refused port saw a connection");
        let mut targets = network_targets(&report);
        targets.sort();
        assert_eq!(targets, ["allowed.test:22", "allowed.test:25", "allowed.test:6379"]);

        // `paddock plan` says which ports a name without one grants.
        let plan = s.paddock().args(["plan", "--network", "allowed.test,ssh.test:22"]).output();
        let plan = String::from_utf8_lossy(&plan.unwrap().stdout).into_owned();
        assert!(plan.contains("allowed.test (ports 80 and 443)"), "{plan}");
        assert!(plan.contains("ssh.test:22"), "{plan}");
    });
}

#[test]
fn pipelined_requests_for_another_host_are_refused_reported_and_never_forwarded() {
    // Through `paddock run --network allowed.test`: one connection to the proxy carries a
    // granted request, then (without waiting) one whose Host is another and one for another
    // name. A target that ignores `Connection: close` records what reaches it.
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("SKIPPED: the pipelining client is python3");
        return;
    }
    let s = Scratch::new("net-pipelined");
    let zone: Zone = &[("allowed.test", &["198.18.0.10"]), ("evil.test", &["198.18.0.99"])];
    Lab::run(&s, &["198.18.0.10", "198.18.0.99"], zone, |lab| {
        let listener = TcpListener::bind(("198.18.0.10", 80)).unwrap();
        let target = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let (mut seen, mut answered, mut buf) = (Vec::new(), false, [0u8; 4096]);
            loop {
                match std::io::Read::read(&mut c, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
                if !answered && seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
                    std::io::Write::write_all(&mut c, ok).unwrap();
                    answered = true;
                }
            }
            String::from_utf8_lossy(&seen).into_owned()
        });
        let client = "import socket, time\n\
             s = socket.create_connection(('127.0.0.1', 3128), 10)\n\
             s.sendall(b'GET http://allowed.test/a HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n'\n \
             b'GET http://allowed.test/b HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'\n \
             b'GET http://evil.test/c HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n')\n\
             got = b''\n\
             while not got.endswith(b'hello'):\n \
             chunk = s.recv(4096)\n \
             if not chunk: break\n \
             got += chunk\n\
             print(got.split(b'\\r\\n')[0].decode())\n\
             time.sleep(0.2)\n\
             s.shutdown(socket.SHUT_WR)\n\
             s.recv(1)\n";
        let report = s.root.join("report.json");
        let out = s
            .paddock()
            .args(["run", "--itemize", "off", "--network", "allowed.test", "--report"])
            .arg(&report)
            .args(["--", "/usr/bin/python3", "-c", client])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "HTTP/1.1 200 OK\n", "{}", stderr(&out));
        let seen = target.join().unwrap();
        assert_eq!(
            seen, "GET /a HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n",
            "only the first request reaches the target"
        );
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let mut targets = network_targets(&report);
        targets.sort();
        assert_eq!(targets, ["allowed.test:80", "evil.test:80"], "{report}");
        let why = "the Host header `evil.test` differs from the request's destination";
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
        assert!(!lab.queries().iter().any(|q| q.starts_with("evil")), "{:?}", lab.queries());
    });
}
