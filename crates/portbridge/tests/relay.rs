//! Port bridges through real echo servers on loopback.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::thread;
use std::time::{Duration, Instant};

use paddock_portbridge::{Error, RelayOptions, TcpToUnix, UnixToTcp};

use crate::util::*;

#[test]
fn unix_to_tcp_echoes_and_counts_bytes() {
    let dir = TempDir::new();
    let sock = dir.join("out");
    let relay = UnixToTcp::start(&sock, tcp_echo_server(), RelayOptions::default()).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the bridge socket is private (NET-18)");
    let data = pattern(3 << 20);
    let got = unix_roundtrip(&UnixStream::connect(&sock).unwrap(), &data);
    assert_eq!(got, echoed(&data));
    assert!(wait_for(Duration::from_secs(5), || relay.stats().active == 0));
    let stats = relay.stop();
    assert_eq!(stats.accepted, 1);
    assert_eq!(stats.to_target, data.len() as u64);
    assert_eq!(stats.to_client, echoed(&data).len() as u64);
    assert!(!sock.exists(), "the socket file is removed on stop");
}

#[test]
fn tcp_to_unix_echoes_with_per_connection_counts() {
    let dir = TempDir::new();
    let sock = dir.join("in");
    unix_echo_server(&sock);
    let relay = TcpToUnix::start(0, &sock, RelayOptions::default()).unwrap();
    let addr = relay.local_addr().unwrap();
    assert!(addr.ip().is_loopback());
    for len in [1usize, 1000, 200_000] {
        let data = pattern(len);
        assert_eq!(tcp_roundtrip(&TcpStream::connect(addr).unwrap(), &data), echoed(&data));
    }
    assert!(wait_for(Duration::from_secs(5), || relay.stats().active == 0));
    let conns = relay.connections();
    let ups: Vec<u64> = conns.iter().map(|c| c.to_target).collect();
    assert_eq!(ups, vec![1, 1000, 200_000]);
    assert!(conns.iter().all(|c| !c.open));
}

#[test]
fn inbound_port_grant_chain_both_relays() {
    // Host 127.0.0.1:P -> unix socket -> task's 127.0.0.1 server: what `allow.local-ports`
    // builds (the second relay runs inside the sandbox in real use).
    let dir = TempDir::new();
    let sock = dir.join("grant");
    let inner = UnixToTcp::start(&sock, tcp_echo_server(), RelayOptions::default()).unwrap();
    let outer = TcpToUnix::start(0, &sock, RelayOptions::default()).unwrap();
    let data = pattern(8 << 20);
    let got = tcp_roundtrip(&TcpStream::connect(outer.local_addr().unwrap()).unwrap(), &data);
    assert_eq!(got.len(), echoed(&data).len());
    assert!(got == echoed(&data));
    drop(outer);
    drop(inner);
    assert!(!sock.exists());
}

#[test]
fn half_close_is_propagated_and_reply_still_flows() {
    // The server answers only after it sees end of stream; the client half-closed, so it can
    // still read the answer.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let srv = thread::spawn(move || {
        let (mut c, _) = server.accept().unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        c.write_all(format!("saw {} bytes then EOF", got.len()).as_bytes()).unwrap();
    });
    let dir = TempDir::new();
    let sock = dir.join("hc");
    let _relay = UnixToTcp::start(&sock, addr, RelayOptions::default()).unwrap();
    let mut client = UnixStream::connect(&sock).unwrap();
    client.write_all(b"hello").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut reply = String::new();
    client.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "saw 5 bytes then EOF");
    srv.join().unwrap();
}

#[test]
fn client_hanging_up_mid_transfer_ends_the_connection() {
    // The server streams without end; the client reads a little and leaves. The relay must
    // notice, close the server side, and free the connection.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let srv = thread::spawn(move || {
        let (mut c, _) = server.accept().unwrap();
        let chunk = vec![7u8; 65536];
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if c.write_all(&chunk).is_err() {
                return true;
            }
        }
        false
    });
    let dir = TempDir::new();
    let sock = dir.join("hang");
    let relay = UnixToTcp::start(&sock, addr, RelayOptions::default()).unwrap();
    let mut client = UnixStream::connect(&sock).unwrap();
    let mut buf = vec![0u8; 100_000];
    client.read_exact(&mut buf).unwrap();
    drop(client);
    assert!(srv.join().unwrap(), "the server saw its peer go away");
    assert!(wait_for(Duration::from_secs(5), || relay.stats().active == 0));
}

#[test]
fn hundred_concurrent_connections() {
    let dir = TempDir::new();
    let sock = dir.join("many");
    let inner = UnixToTcp::start(&sock, tcp_echo_server(), RelayOptions::default()).unwrap();
    let outer = TcpToUnix::start(0, &sock, RelayOptions::default()).unwrap();
    assert!(concurrent_roundtrips(outer.local_addr().unwrap(), 100));
    assert!(wait_for(Duration::from_secs(5), || outer.stats().active == 0));
    assert_eq!(outer.stats().accepted, 100);
    assert_eq!(inner.stats().accepted, 100);
}

#[test]
fn tcp_to_unix_waits_for_a_target_that_starts_late() {
    let dir = TempDir::new();
    let sock = dir.join("late");
    let relay = TcpToUnix::start(0, &sock, RelayOptions::default()).unwrap();
    let client = TcpStream::connect(relay.local_addr().unwrap()).unwrap();
    (&client).write_all(b"early").unwrap();
    thread::sleep(Duration::from_millis(300));
    unix_echo_server(&sock);
    client.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    (&client).read_to_end(&mut got).unwrap();
    assert_eq!(got, echoed(b"early"));
}

#[test]
fn unix_to_tcp_waits_for_a_task_server_that_starts_late() {
    // The in-sandbox end of an inbound grant meets a task whose server is not up yet.
    let port = paddock_test_support::free_port();
    let dir = TempDir::new();
    let sock = dir.join("late-tcp");
    let target = ([127, 0, 0, 1], port).into();
    let _relay = UnixToTcp::start(&sock, target, RelayOptions::default()).unwrap();
    let client = UnixStream::connect(&sock).unwrap();
    (&client).write_all(b"early").unwrap();
    thread::sleep(Duration::from_millis(300));
    let server = TcpListener::bind(("127.0.0.1", port)).unwrap();
    thread::spawn(move || echo(server.accept().unwrap().0));
    client.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    (&client).read_to_end(&mut got).unwrap();
    assert_eq!(got, echoed(b"early"));
}

#[test]
fn tcp_to_unix_gives_up_after_connect_wait() {
    let dir = TempDir::new();
    let options = RelayOptions { connect_wait: Duration::from_millis(200), ..Default::default() };
    let relay = TcpToUnix::start(0, &dir.join("never"), options).unwrap();
    let mut client = TcpStream::connect(relay.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 1];
    assert_eq!(client.read(&mut buf).unwrap_or(0), 0, "closed without data");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn busy_port_is_a_clear_error_naming_the_port() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = TempDir::new();
    let err = TcpToUnix::start(port, &dir.join("x"), RelayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::PortBusy { port: p } if p == port), "{err:?}");
    assert!(err.to_string().contains(&format!("port {port} ")), "{err}");
}

#[test]
fn existing_socket_path_and_long_paths_and_remote_targets_are_refused() {
    let dir = TempDir::new();
    let taken = dir.join("taken");
    let _l = UnixListener::bind(&taken).unwrap();
    let target = "127.0.0.1:9".parse().unwrap();
    let err = UnixToTcp::start(&taken, target, RelayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::SocketExists { .. }), "{err:?}");
    assert!(taken.exists(), "a refused start leaves the existing file alone");

    let long = dir.join(&"x".repeat(120));
    let err = UnixToTcp::start(&long, target, RelayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::SocketPathTooLong { .. }), "{err:?}");

    let remote = "192.0.2.1:80".parse().unwrap();
    let err = UnixToTcp::start(&dir.join("r"), remote, RelayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NotLoopback { .. }), "{err:?}");
    assert!(!dir.join("r").exists());
}

#[test]
fn connection_cap_closes_extra_clients() {
    let dir = TempDir::new();
    let sock = dir.join("cap");
    let options = RelayOptions { max_connections: 2, ..Default::default() };
    let relay = UnixToTcp::start(&sock, tcp_echo_server(), options).unwrap();
    let a = UnixStream::connect(&sock).unwrap();
    let b = UnixStream::connect(&sock).unwrap();
    (&a).write_all(b"a").unwrap();
    (&b).write_all(b"b").unwrap();
    let mut one = [0u8; 1];
    (&a).read_exact(&mut one).unwrap();
    (&b).read_exact(&mut one).unwrap();
    let mut c = UnixStream::connect(&sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = c.write_all(b"c");
    assert_eq!(c.read(&mut one).unwrap_or(0), 0, "the third client is closed");
    assert_eq!(relay.stats().rejected, 1);
}

/// Stopping a relay closes the listener, removes the socket file, ends open connections
/// and joins every thread. Thread counts are process-wide, so the check runs in a child
/// process of this test binary that runs only this test.
#[cfg(target_os = "linux")]
#[test]
fn stop_leaves_no_socket_no_listener_no_threads() {
    if !in_child_running_only("relay::stop_leaves_no_socket_no_listener_no_threads") {
        return;
    }
    let before = thread_count();
    let dir = TempDir::new();
    let sock = dir.join("leak");
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let server_addr = server.local_addr().unwrap();
    let inner = UnixToTcp::start(&sock, server_addr, RelayOptions::default()).unwrap();
    let outer = TcpToUnix::start(0, &sock, RelayOptions::default()).unwrap();
    let port_addr = outer.local_addr().unwrap();
    let clients: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(port_addr).unwrap()).collect();
    let accepted: Vec<TcpStream> = (0..5).map(|_| server.accept().unwrap().0).collect();
    // The server may accept them in another order than they connected: send on all, then
    // read on all.
    for c in &clients {
        (&*c).write_all(b"x").unwrap();
    }
    for a in &accepted {
        let mut b = [0u8; 1];
        (&*a).read_exact(&mut b).unwrap();
    }
    assert!(thread_count() >= before + 2 + 5 * 4, "relays run threads while open");
    outer.stop();
    inner.stop();
    assert_eq!(thread_count_settled_at(before), before, "every relay thread is joined");
    assert!(!sock.exists(), "socket file removed");
    assert!(TcpStream::connect(port_addr).is_err(), "nothing listens on the port any more");
    for c in &clients {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!((&*c).read(&mut b).unwrap_or(0), 0, "open connections were closed");
    }
}

#[test]
fn refuse_symlink_never_follows_a_link_planted_in_the_socket_dir() {
    // The host end of an inbound grant connects into a directory the sandbox can write; a
    // link planted there must not lead it to a socket only the host can reach.
    let dir = TempDir::new();
    let private = dir.join("private");
    unix_echo_server(&private);
    let planted = dir.join("in-80");
    std::os::unix::fs::symlink(&private, &planted).unwrap();
    let options = RelayOptions {
        refuse_symlink: true,
        connect_wait: Duration::from_millis(300),
        ..Default::default()
    };
    let relay = TcpToUnix::start(0, &planted, options.clone()).unwrap();
    let mut client = TcpStream::connect(relay.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = client.write_all(b"ping");
    let mut buf = Vec::new();
    let _ = client.read_to_end(&mut buf);
    assert!(buf.is_empty(), "the planted link was followed: {buf:?}");
    drop(relay);

    // The real socket at that name is reached.
    std::fs::remove_file(&planted).unwrap();
    unix_echo_server(&planted);
    let relay = TcpToUnix::start(0, &planted, options).unwrap();
    let data = pattern(1000);
    let got = tcp_roundtrip(&TcpStream::connect(relay.local_addr().unwrap()).unwrap(), &data);
    assert_eq!(got, echoed(&data));
}
