//! Inbound grants by handoff: connections accepted on the host and relayed from the other end
//! of a descriptor channel.

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use paddock_portbridge::{
    Error, HandoffToTcp, RelayHandle, RelayOptions, TcpHandoff, handoff_channel,
};

use crate::util::*;

/// A host end on `n` free ports and a receiver relaying each port to the target `targets`
/// maps it to (by index; `None`: the port is not given to the receiver).
fn grant(targets: &[Option<SocketAddr>]) -> (RelayHandle, RelayHandle, Vec<SocketAddr>) {
    let (host_end, sandbox_end) = handoff_channel().unwrap();
    let host = TcpHandoff::start(&vec![0; targets.len()], host_end).unwrap();
    let addrs = host.local_addrs().to_vec();
    let map: Vec<(u16, SocketAddr)> =
        addrs.iter().zip(targets).filter_map(|(a, t)| t.map(|t| (a.port(), t))).collect();
    let receiver = HandoffToTcp::start(sandbox_end, &map, RelayOptions::default()).unwrap();
    (host, receiver, addrs)
}

#[test]
fn each_port_reaches_its_own_target_and_bytes_are_counted_on_the_receiving_end() {
    let (a, b) = (tcp_echo_server(), tcp_echo_server());
    let (host, receiver, addrs) = grant(&[Some(a), Some(b)]);
    let data = pattern(3 << 20);
    for addr in &addrs {
        assert_eq!(tcp_roundtrip(&TcpStream::connect(addr).unwrap(), &data), echoed(&data));
    }
    assert!(wait_for(Duration::from_secs(5), || receiver.stats().active == 0));
    let stats = receiver.stop();
    assert_eq!(stats.accepted, 2);
    assert_eq!(stats.to_target, 2 * data.len() as u64);
    assert_eq!(stats.to_client, 2 * echoed(&data).len() as u64);
    let host = host.stop();
    assert_eq!((host.accepted, host.rejected, host.to_target), (2, 0, 0));
}

#[test]
fn a_hundred_concurrent_connections_are_handed_over_and_relayed() {
    let (host, receiver, addrs) = grant(&[Some(tcp_echo_server())]);
    assert!(concurrent_roundtrips(addrs[0], 100));
    assert!(wait_for(Duration::from_secs(5), || receiver.stats().active == 0));
    assert_eq!(host.stats().accepted, 100);
    assert_eq!(receiver.stats().accepted, 100);
}

#[test]
fn clients_that_come_before_the_receiver_are_held_in_the_channel() {
    let (host_end, sandbox_end) = handoff_channel().unwrap();
    let host = TcpHandoff::start(&[0], host_end).unwrap();
    let addr = host.local_addr().unwrap();
    let clients: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for c in &clients {
        (&*c).write_all(b"early").unwrap();
    }
    assert!(wait_for(Duration::from_secs(5), || host.stats().accepted == 3));
    // The sandbox end starts later, as a supervisor does.
    let target = tcp_echo_server();
    let _receiver =
        HandoffToTcp::start(sandbox_end, &[(addr.port(), target)], RelayOptions::default())
            .unwrap();
    for c in &clients {
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        (&*c).read_to_end(&mut got).unwrap();
        assert_eq!(got, echoed(b"early"));
    }
}

#[test]
fn a_connection_of_a_port_the_receiver_was_not_given_is_closed() {
    let (_host, receiver, addrs) = grant(&[Some(tcp_echo_server()), None]);
    let mut stray = TcpStream::connect(addrs[1]).unwrap();
    stray.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = stray.write_all(b"hello");
    let mut buf = [0u8; 8];
    assert_eq!(stray.read(&mut buf).unwrap_or(0), 0, "closed without an answer");
    assert_eq!(receiver.stats().accepted, 0);
    // The granted port still works.
    assert_eq!(tcp_roundtrip(&TcpStream::connect(addrs[0]).unwrap(), b"x"), echoed(b"x"));
}

#[test]
fn descriptors_that_are_not_tcp_sockets_are_closed_and_the_channel_keeps_working() {
    let target = tcp_echo_server();
    let (host_end, sandbox_end) = handoff_channel().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let receiver =
        HandoffToTcp::start(sandbox_end, &[(port, target)], RelayOptions::default()).unwrap();
    let file = std::fs::File::open("/dev/null").unwrap();
    let (unix, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let send = |fds: &[i32], data: &[u8]| {
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
        sendmsg::<()>(host_end.as_raw_fd(), &[IoSlice::new(data)], cmsgs, MsgFlags::empty(), None)
            .unwrap();
    };
    send(&[file.as_raw_fd()], b"C");
    send(&[unix.as_raw_fd()], b"C");
    send(&[], b"C");
    send(&[listener.as_raw_fd(), unix.as_raw_fd()], b"C");
    // Two descriptors in one message: both closed. Then a real connection, accepted here
    // and handed over by hand.
    let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    send(&[accepted.as_raw_fd()], b"C");
    drop(accepted);
    assert_eq!(tcp_roundtrip(&client, b"after"), echoed(b"after"));
    assert_eq!(receiver.stats().accepted, 1);
}

#[test]
fn the_receiver_stops_polling_a_channel_whose_host_end_is_gone() {
    let (host, receiver, _) = grant(&[Some(tcp_echo_server())]);
    drop(host);
    // A closed channel stays readable (end of file); polling it again and again would spin.
    let spent = |name: &str| thread_cpu_ticks(name);
    // CPU time, not wall time: a thread that spins gets well over a tenth of a CPU over a
    // second even on a loaded machine; one that waits gets none.
    thread::sleep(Duration::from_millis(100));
    let before = spent("pb-handoff-to-t");
    thread::sleep(Duration::from_secs(1));
    let after = spent("pb-handoff-to-t");
    assert!(after.is_some(), "the receiver's accept thread is running");
    assert!(after.unwrap() - before.unwrap() < 10, "{before:?} -> {after:?}");
    drop(receiver);
}

#[test]
fn a_busy_port_fails_the_whole_handoff_and_remote_targets_are_refused() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (host_end, sandbox_end) = handoff_channel().unwrap();
    let err = TcpHandoff::start(&[0, port], host_end).unwrap_err();
    assert!(matches!(err, Error::PortBusy { port: p } if p == port), "{err:?}");
    let remote: SocketAddr = "192.0.2.1:80".parse().unwrap();
    let err =
        HandoffToTcp::start(sandbox_end, &[(80, remote)], RelayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NotLoopback { .. }), "{err:?}");
}
