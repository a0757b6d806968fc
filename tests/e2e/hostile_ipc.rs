//! Hostile IPC, environment and network cases (security-cases groups UNX, ENV and NET-01,
//! NET-02, NET-16 for network off and on): host unix sockets, abstract sockets, inherited
//! non-file fds, session variables, egress, DNS exfiltration and socket families.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::harness::*;

/// A host unix socket listener at `path`; `connections()` counts what reached it.
struct HostUnix(std::os::unix::net::UnixListener);

impl HostUnix {
    fn bind(path: &std::path::Path) -> HostUnix {
        let l = std::os::unix::net::UnixListener::bind(path).unwrap();
        l.set_nonblocking(true).unwrap();
        HostUnix(l)
    }
    fn connections(&self) -> usize {
        std::iter::from_fn(|| self.0.accept().ok()).count()
    }
}

#[test]
fn host_unix_sockets_are_unreachable_unx01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("unx01");
    let sock = s.root.join("docker.sock");
    let host = HostUnix::bind(&sock);
    let op = format!("unix:{}", sock.display());
    for flags in [&[][..], &["--network", "on"][..], &["--network", "example.com"][..]] {
        let (o, out) = s.probe(flags, &[&op, "unix-socket"]);
        assert_denied(&o, "unix", &sock.display().to_string(), &[EPERM]);
        assert_denied(&o, "unix-socket", "", &[EPERM]);
        assert_eq!(host.connections(), 0, "{flags:?} reached the host socket: {out:?}");
    }
}

/// A host seqpacket listener at `path` (nonblocking); std has none.
fn seqpacket_listener(path: &std::path::Path) -> i32 {
    // SAFETY: socket takes integers.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, 0) };
    assert!(fd >= 0);
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in, NUL-terminated.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    assert!(bytes.len() < addr.sun_path.len(), "socket path too long: {}", path.display());
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let sa = &addr as *const libc::sockaddr_un as *const libc::sockaddr;
    // SAFETY: bind and listen on our socket with a valid address.
    assert_eq!(unsafe { libc::bind(fd, sa, len) }, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: as above.
    assert_eq!(unsafe { libc::listen(fd, 8) }, 0);
    fd
}

#[test]
fn unix_socketpairs_cannot_reach_host_sockets_unx02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("unx02");
    let log = s.root.join("log.sock");
    let seq = s.root.join("seq.sock");
    let journal = std::os::unix::net::UnixDatagram::bind(&log).unwrap();
    journal.set_nonblocking(true).unwrap();
    let seq_fd = seqpacket_listener(&seq);
    let (dl, sl, sd) = (
        format!("dgram={}", log.display()),
        format!("seqpacket={}", log.display()),
        format!("seqpacket={}", seq.display()),
    );
    let (o, out) = s.probe(
        &[],
        &[
            "socketpair-dgram",
            &format!("pair-send:{dl}"),
            &format!("pair-send:{sl}"),
            &format!("pair-send:{sd}"),
        ],
    );
    // A datagram pair could sendto any pathname socket: refused outright.
    assert_denied(&o, "socketpair-dgram", "", &[EPERM]);
    assert_denied(&o, "pair-send", &dl, &[EPERM]);
    // A seqpacket pair may exist, but cannot be pointed elsewhere.
    for arg in [&sl, &sd] {
        let ob = obs(&o, "pair-send", arg);
        let refused = ob["detail"] == "socketpair" && ob["errno"] == EPERM;
        let detail = ob["detail"].as_str().unwrap_or("");
        assert!(refused || detail.contains("connect=-1"), "{arg}: the pair reconnected: {ob}");
    }
    let mut buf = [0u8; 64];
    assert!(journal.recv(&mut buf).is_err(), "a datagram reached the host socket: {out:?}");
    // SAFETY: accept on our nonblocking listener; a new fd would be closed by the process end.
    let accepted = unsafe { libc::accept(seq_fd, std::ptr::null_mut(), std::ptr::null_mut()) };
    // SAFETY: closing our listener.
    unsafe { libc::close(seq_fd) };
    assert!(accepted < 0, "a seqpacket pair connected to the host listener: {out:?}");
}

#[test]
fn host_abstract_sockets_are_unreachable_unx03_env05() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("unx03");
    let name = format!("paddock-e2e-abs-{}", std::process::id());
    abstract_canary(&name);
    let op = format!("abstract:{name}");
    std::fs::write(s.root.join("weaker.toml"), "weaker-when-nested = true\n").unwrap();
    let weaker = s.root.join("weaker.toml").display().to_string();
    let modes: [(&[&str], &[i64]); 5] = [
        (&[], &[EPERM]),
        (&["--allow-unix-sockets"], &[ECONNREFUSED]),
        (&["--network", "on"], &[EPERM]),
        (&["--network", "example.com", "--allow-unix-sockets"], &[ECONNREFUSED]),
        (&["-c", &weaker, "--allow-unix-sockets"], &[ECONNREFUSED]),
    ];
    for (flags, errnos) in modes {
        let (o, out) = s.probe(flags, &[&op]);
        assert_denied(&o, "abstract", &name, errnos);
        assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY), "{flags:?}");
    }
    // --network on with unix sockets allowed: known_gaps UNX-03c.
}

#[test]
fn session_secrets_do_not_reach_the_task_env01_env05() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("env01h");
    let secret_vars = [
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "ANTHROPIC_API_KEY",
        "NPM_TOKEN",
        "CANARY_TOKEN",
        "OPENAI_API_KEY",
    ];
    let session_vars = [
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "KUBECONFIG",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
    ];
    let mut cmd = s.paddock();
    for v in secret_vars {
        cmd.env(v, CANARY);
    }
    for v in session_vars {
        cmd.env(v, format!("/run/user/0/{v}"));
    }
    let ops: Vec<String> =
        secret_vars.iter().chain(session_vars.iter()).map(|v| format!("env:{v}")).collect();
    let out = cmd
        .arg("run")
        .arg("--")
        .arg(probe_bin())
        .args(&ops)
        .arg("ls:/tmp")
        .arg("ls:/tmp/.X11-unix")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(CANARY), "{text}");
    let o: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    for v in secret_vars.iter().chain(session_vars.iter()) {
        assert_eq!(obs(&o, "env", v)["ok"], false, "{v} reached the task: {text}");
    }
    assert_eq!(assert_allowed(&o, "ls", "/tmp"), "", "the host's /tmp is visible");
    assert_denied(&o, "ls", "/tmp/.X11-unix", &[ENOENT]);
}

#[test]
fn inherited_sockets_pipes_and_eventfds_do_not_reach_the_task_env03() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("env03");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (ua, ub) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut pipe = [0i32; 2];
    // SAFETY: `pipe` is an array of two ints for the kernel to fill.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: eventfd takes integers.
    let efd = unsafe { libc::eventfd(0, 0) };
    let fds = [tcp.as_raw_fd(), ua.as_raw_fd(), ub.as_raw_fd(), pipe[0], pipe[1], efd];
    for fd in fds {
        // SAFETY: clearing FD_CLOEXEC on descriptors we own: a careless parent.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    }
    let (o, out) = s.probe(&[], &["fdlinks"]);
    for fd in [pipe[0], pipe[1], efd] {
        // SAFETY: closing the descriptors we opened.
        unsafe { libc::close(fd) };
    }
    drop((tcp, ua, ub, listener));
    let links = assert_allowed(&o, "fdlinks", "");
    // The listing works: the task's own stdio is in it (an empty listing passed before).
    let listed: Vec<&str> =
        links.split(',').filter_map(|e| e.split_once('=')).map(|e| e.0).collect();
    assert!(["0", "1", "2"].iter().all(|fd| listed.contains(fd)), "no stdio listed: {links}");
    for entry in links.split(',') {
        let (fd, to) = entry.split_once('=').unwrap();
        let fd: i32 = fd.parse().unwrap();
        // 0-2 are the caller's stdio; the one above is `read_dir`'s own.
        assert!(fd <= 2 || to.starts_with("/proc/"), "fd {fd} -> {to} leaked: {out:?}");
    }
}

#[test]
fn network_off_has_no_egress_and_no_proxy_net01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net01h");
    let v6 = std::net::TcpListener::bind("[::1]:0").ok();
    let v6addr = v6.as_ref().map(|l| l.local_addr().unwrap().to_string());
    let mut ops = vec![
        "connect:1.1.1.1:443".to_owned(),
        "connect:198.18.0.66:80".to_owned(),
        "connect:[2606:4700:4700::1111]:443".to_owned(),
    ];
    if let Some(a) = &v6addr {
        ops.push(format!("connect:{a}"));
    }
    let proxies =
        ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];
    ops.extend(proxies.iter().map(|p| format!("env:{p}")));
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, _) = s.probe(&[], &ops);
    assert_denied(&o, "connect", "1.1.1.1:443", &[ENETUNREACH]);
    assert_denied(&o, "connect", "198.18.0.66:80", &[ENETUNREACH]);
    assert_denied(&o, "connect", "[2606:4700:4700::1111]:443", &[ENETUNREACH, 99]);
    if let Some(a) = &v6addr {
        assert_denied(&o, "connect", a, &[ECONNREFUSED, ENETUNREACH, 99]);
    }
    for p in proxies {
        assert_eq!(obs(&o, "env", p)["ok"], false, "{p} is set with network off");
    }
}

#[test]
fn dns_exfiltration_fails_fast_with_network_off_net02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net02");
    // A stand-in for the host resolver on loopback: it must hear nothing.
    let resolver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    resolver.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let port = resolver.local_addr().unwrap().port();
    let label = format!("{CANARY}.exfil.test");
    let (o, out) = s.probe(
        &[],
        &[
            &format!("resolve:{label}"),
            &format!("udp:127.0.0.1:{port}={label}"),
            &format!("udp:1.1.1.1:53={label}"),
        ],
    );
    let r = obs(&o, "resolve", &label);
    assert_eq!(r["ok"], false, "a name resolved with network off: {r}");
    let ms: u64 = r["detail"]
        .as_str()
        .and_then(|d| d.rsplit(" in ").next())
        .and_then(|t| t.trim_end_matches(" ms").parse().ok())
        .unwrap();
    assert!(ms < 5000, "resolution did not fail fast: {r}");
    assert_denied(&o, "udp", &format!("1.1.1.1:53={label}"), &[ENETUNREACH]);
    let mut buf = [0u8; 512];
    assert!(resolver.recv_from(&mut buf).is_err(), "a datagram reached the host's loopback");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!String::from_utf8_lossy(&out.stdout).replace(&label, "").contains(CANARY));
    assert!(!err.contains(CANARY), "{err}");
}

#[test]
fn socket_families_beyond_ip_are_refused_net16() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net16");
    let refused = ["PACKET", "NETLINK", "VSOCK", "ALG", "BLUETOOTH", "XDP", "KEY", "RAWICMP"];
    let mut ops: Vec<String> = refused.iter().map(|f| format!("family:{f}")).collect();
    ops.push("family:NETLINK-ROUTE".to_owned());
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    for flags in [&[][..], &["--network", "on"][..], &["--network", "example.com"][..]] {
        let (o, _) = s.probe(flags, &ops);
        for f in refused {
            assert_denied(&o, "family", f, &[EPERM, 97]);
        }
        // Routing netlink stays: libc's getaddrinfo and `ip` need it.
        assert_allowed(&o, "family", "NETLINK-ROUTE");
    }
}

#[test]
fn other_tasks_runtime_dirs_are_hidden_from_the_task() {
    // Runtime dirs hold each task's sockets (its egress proxy, port grants) and, observing,
    // its observer's mount point. Another task, even with unix sockets granted, must not
    // find them: the recursive bind of `/` would show them read-only, and connecting to a
    // socket needs no write access to its file system.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("rtbase");
    // A neighbour that holds its runtime dir (with a proxy socket) while the task looks:
    // awaited until its task runs (a fixed delay let the task look before the neighbour
    // existed, and pass whatever the walls did), released when the task is done.
    let neighbour_script = ": > neighbour-up; while [ ! -e neighbour-go ]; do sleep 0.02; done";
    let mut neighbour = s
        .paddock()
        .args(["run", "--network", "example.test", "--timeout", "120", "--", "sh", "-c"])
        .arg(neighbour_script)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.project.join("neighbour-up").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(s.project.join("neighbour-up").exists(), "the neighbour never ran");
    // `/tmp` granted: the task's TMPDIR is its runtime dir's `tmp`, so it knows where the
    // runtime dirs are.
    let out = s
        .paddock()
        .args(["run", "--allow-write", "/tmp", "--allow-unix-sockets", "--", "sh", "-c"])
        .arg(r#"rt=$(dirname "$TMPDIR"); echo "own: $(ls -A "$rt" | tr '\n' ' ')"; echo "base: $(ls -A "$(dirname "$rt")" | wc -l)""#)
        .output()
        .unwrap();
    std::fs::write(s.project.join("neighbour-go"), "").unwrap();
    let neighbour = neighbour.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(neighbour.success(), "the neighbour did not last the task's look: {neighbour:?}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text.contains("own: tmp \n"), "the task sees its runtime dir's files: {text}");
    assert!(text.contains("base: 1\n"), "the task sees other tasks' runtime dirs: {text}");
}
