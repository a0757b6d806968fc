//! Throughput and connection setup rate through port bridges, against direct loopback and,
//! when `/usr/bin/socat` is installed, against socat doing the same relaying.
//!
//! Paths measured (the server is a sink that counts bytes and answers the count):
//! - `direct`: TCP client to the TCP server on 127.0.0.1.
//! - `relay`: TCP client -> [`TcpToUnix`] -> unix-socket server (one relay).
//! - `chain`: TCP client -> [`TcpToUnix`] -> unix socket -> [`UnixToTcp`] -> TCP server: what
//!   an inbound port grant runs (the second relay lives in the sandbox in real use).
//! - `socat relay` / `socat chain`: the same with socat processes.
//!
//! Run with `cargo run --release -p paddock-portbridge --example bridge_bench [MIB] [CONNS]`.

#![allow(clippy::expect_used)] // A benchmark program: a failed setup step ends it with its message.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use paddock_portbridge::{RelayOptions, TcpToUnix, UnixToTcp};

const SOCAT: &str = "/usr/bin/socat";
const CHUNK: usize = 128 * 1024;

fn sink<S: Read + Write>(mut s: S) {
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let _ = s.write_all(&total.to_le_bytes());
}

fn tcp_sink() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind sink");
    let addr = l.local_addr().expect("sink addr");
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || sink(c));
        }
    });
    addr
}

fn unix_sink(path: &Path) {
    let l = UnixListener::bind(path).expect("bind unix sink");
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || sink(c));
        }
    });
}

/// Sends `bytes` and returns MiB/s.
fn throughput(addr: SocketAddr, bytes: u64) -> f64 {
    let mut c = TcpStream::connect(addr).expect("connect");
    let buf = vec![0x5au8; CHUNK];
    let start = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        c.write_all(&buf[..n]).expect("write");
        left -= n as u64;
    }
    c.shutdown(Shutdown::Write).expect("shutdown");
    let mut count = [0u8; 8];
    c.read_exact(&mut count).expect("count");
    assert_eq!(u64::from_le_bytes(count), bytes, "every byte arrived");
    bytes as f64 / (1024.0 * 1024.0) / start.elapsed().as_secs_f64()
}

/// Opens `n` connections one after the other (1 byte each way) and returns connections/s.
fn setup_rate(addr: SocketAddr, n: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(b"x").expect("write");
        c.shutdown(Shutdown::Write).expect("shutdown");
        let mut count = [0u8; 8];
        c.read_exact(&mut count).expect("count");
    }
    n as f64 / start.elapsed().as_secs_f64()
}

struct Socat(Vec<Child>);

impl Drop for Socat {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[allow(clippy::disallowed_methods)] // The benchmark starts socat, the program it compares with.
fn socat(args: &[String]) -> Child {
    std::process::Command::new(SOCAT)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn socat")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

fn wait_tcp(addr: SocketAddr) {
    for _ in 0..200 {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("{addr} never listened");
}

fn wait_unix(path: &Path) {
    for _ in 0..200 {
        if UnixStream::connect(path).is_ok() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never listened", path.display());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    let conns: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let bytes = mib << 20;
    let dir: PathBuf = std::env::temp_dir().join(format!("pb-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let server = tcp_sink();
    let unix_server = dir.join("sink");
    unix_sink(&unix_server);

    let relay = TcpToUnix::start(0, &unix_server, RelayOptions::default()).expect("relay");
    let relay_addr = relay.local_addr().expect("relay addr");
    let mid = dir.join("mid");
    let _inner = UnixToTcp::start(&mid, server, RelayOptions::default()).expect("inner");
    let outer = TcpToUnix::start(0, &mid, RelayOptions::default()).expect("outer");
    let chain_addr = outer.local_addr().expect("chain addr");

    let mut rows: Vec<(&str, SocketAddr)> =
        vec![("direct", server), ("relay", relay_addr), ("chain", chain_addr)];
    let mut _socat = Socat(Vec::new());
    if Path::new(SOCAT).exists() {
        let p1 = free_port();
        _socat.0.push(socat(&[
            format!("TCP-LISTEN:{p1},bind=127.0.0.1,reuseaddr,fork"),
            format!("UNIX-CONNECT:{}", unix_server.display()),
        ]));
        let smid = dir.join("smid");
        _socat.0.push(socat(&[
            format!("UNIX-LISTEN:{},fork", smid.display()),
            format!("TCP:{server}"),
        ]));
        let p2 = free_port();
        _socat.0.push(socat(&[
            format!("TCP-LISTEN:{p2},bind=127.0.0.1,reuseaddr,fork"),
            format!("UNIX-CONNECT:{}", smid.display()),
        ]));
        let (a1, a2): (SocketAddr, SocketAddr) =
            (([127, 0, 0, 1], p1).into(), ([127, 0, 0, 1], p2).into());
        wait_tcp(a1);
        wait_unix(&smid);
        wait_tcp(a2);
        rows.push(("socat relay", a1));
        rows.push(("socat chain", a2));
    } else {
        println!("socat not found at {SOCAT}: skipping the socat rows");
    }

    // Warm up each path once.
    for (_, addr) in &rows {
        throughput(*addr, 16 << 20);
    }
    // Rounds interleave the paths so that load from other programs spreads over all of
    // them; each path keeps its best round.
    const ROUNDS: usize = 5;
    let mut tput = vec![0.0f64; rows.len()];
    let mut rate = vec![0.0f64; rows.len()];
    for _ in 0..ROUNDS {
        for (i, (_, addr)) in rows.iter().enumerate() {
            tput[i] = tput[i].max(throughput(*addr, bytes));
            rate[i] = rate[i].max(setup_rate(*addr, conns));
        }
    }
    println!(
        "{mib} MiB per throughput run, {conns} sequential connections, best of {ROUNDS} interleaved rounds"
    );
    println!("{:<12} {:>10} {:>7} {:>10} {:>7}", "path", "MiB/s", "ratio", "conn/s", "ratio");
    for (i, (name, _)) in rows.iter().enumerate() {
        println!(
            "{name:<12} {:>10.0} {:>6.0}% {:>10.0} {:>6.0}%",
            tput[i],
            100.0 * tput[i] / tput[0],
            rate[i],
            100.0 * rate[i] / rate[0]
        );
    }
    drop(_socat);
    let _ = std::fs::remove_dir_all(&dir);
}
