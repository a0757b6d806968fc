//! Throughput and connection setup rate through port bridges, against direct loopback and,
//! when `/usr/bin/socat` is installed, against socat doing the same relaying.
//!
//! Paths measured (the server is a sink that counts bytes and answers the count):
//! - `direct`: TCP client to the TCP server on 127.0.0.1.
//! - `relay`: TCP client -> [`TcpToUnix`] -> unix-socket server (one relay).
//! - `chain`: TCP client -> [`TcpToUnix`] -> unix socket -> [`UnixToTcp`] -> TCP server: what
//!   an inbound port grant ran before handoff (the second relay in the sandbox).
//! - `handoff`: TCP client -> [`TcpHandoff`] hands the connection over a channel ->
//!   [`HandoffToTcp`] relays it to the TCP server: what an inbound port grant runs.
//! - `socat-relay` / `socat-chain`: the same with socat processes.
//!
//! A throughput run moves 2 GiB by default: on a small shared machine shorter runs (half a
//! second) varied by tens of percent from round to round.
//!
//! Every path is warmed up, then measured in interleaved rounds (each round runs every path
//! once, starting from a different one; all throughput rounds come before all setup rounds),
//! so load from other programs on the machine falls on all of them alike. A path's ratio is the median over rounds of its result divided by the
//! direct path's result in the same round; the spread (lowest and highest round) is printed
//! next to it. CPU is the whole benchmark's (client, sink, relays, socat) per GiB moved.
//!
//! Run with `cargo run --release -p paddock-portbridge --example bridge_bench -- [MIB]
//! [CONNS] [ROUNDS] [--only PATH,PATH]` (defaults: 2048 MiB, 1000 connections, 7 rounds).

#![allow(clippy::expect_used)] // A benchmark program: a failed setup step ends it with its message.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use paddock_portbridge::{
    HandoffToTcp, RelayOptions, TcpHandoff, TcpToUnix, UnixToTcp, handoff_channel,
};

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

/// CPU seconds used so far by this process and by the given processes (socat, with the
/// children they have reaped).
fn cpu_seconds(others: &[u32]) -> f64 {
    // SAFETY: getrusage writes one rusage struct into the zeroed value we pass.
    let own = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    // SAFETY: sysconf has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let theirs: f64 = others
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            // Fields after the parenthesized command name; utime, stime, cutime, cstime are
            // fields 14-17 of the whole line, 12-15 of this tail.
            let tail = stat.rsplit_once(')').map_or("", |(_, t)| t);
            let fields: Vec<f64> =
                tail.split_whitespace().map(|f| f.parse().unwrap_or(0.0)).collect();
            fields.get(11..15).map_or(0.0, |f| f.iter().sum::<f64>() / ticks)
        })
        .sum();
    own + theirs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(*x), hi.max(*x)))
}

struct Args {
    mib: u64,
    conns: usize,
    rounds: usize,
    only: Option<Vec<String>>,
}

fn parse_args() -> Args {
    let mut args = Args { mib: 2048, conns: 1000, rounds: 7, only: None };
    let mut positional = 0;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--only" {
            let list = it.next().expect("--only takes a comma-separated list of paths");
            args.only = Some(list.split(',').map(str::to_owned).collect());
            continue;
        }
        match positional {
            0 => args.mib = a.parse().expect("MIB is a number"),
            1 => args.conns = a.parse().expect("CONNS is a number"),
            2 => args.rounds = a.parse::<usize>().expect("ROUNDS is a number").max(1),
            _ => panic!("usage: bridge_bench [MIB] [CONNS] [ROUNDS] [--only PATH,PATH]"),
        }
        positional += 1;
    }
    args
}

fn main() {
    let args = parse_args();
    let bytes = args.mib << 20;
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
    let (host_end, sandbox_end) = handoff_channel().expect("handoff channel");
    let handoff = TcpHandoff::start(&[0], host_end).expect("handoff");
    let handoff_addr = handoff.local_addr().expect("handoff addr");
    let _receiver =
        HandoffToTcp::start(sandbox_end, &[(handoff_addr.port(), server)], RelayOptions::default())
            .expect("handoff receiver");

    let mut rows: Vec<(&str, SocketAddr)> = vec![
        ("direct", server),
        ("relay", relay_addr),
        ("chain", chain_addr),
        ("handoff", handoff_addr),
    ];
    let wanted = |name: &str| args.only.as_ref().is_none_or(|only| only.iter().any(|o| o == name));
    let mut socats = Socat(Vec::new());
    if !wanted("socat-relay") && !wanted("socat-chain") {
        // Not asked for: no socat processes.
    } else if Path::new(SOCAT).exists() {
        let p1 = free_port();
        socats.0.push(socat(&[
            format!("TCP-LISTEN:{p1},bind=127.0.0.1,reuseaddr,fork"),
            format!("UNIX-CONNECT:{}", unix_server.display()),
        ]));
        let smid = dir.join("smid");
        socats.0.push(socat(&[
            format!("UNIX-LISTEN:{},fork", smid.display()),
            format!("TCP:{server}"),
        ]));
        let p2 = free_port();
        socats.0.push(socat(&[
            format!("TCP-LISTEN:{p2},bind=127.0.0.1,reuseaddr,fork"),
            format!("UNIX-CONNECT:{}", smid.display()),
        ]));
        let (a1, a2): (SocketAddr, SocketAddr) =
            (([127, 0, 0, 1], p1).into(), ([127, 0, 0, 1], p2).into());
        wait_tcp(a1);
        wait_unix(&smid);
        wait_tcp(a2);
        rows.push(("socat-relay", a1));
        rows.push(("socat-chain", a2));
    } else {
        println!("socat not found at {SOCAT}: skipping the socat rows");
    }
    if args.only.is_some() {
        // Without `direct` (when profiling one path) the ratios are against the first path.
        rows.retain(|(name, _)| wanted(name));
        assert!(
            !rows.is_empty(),
            "--only names none of: direct, relay, chain, handoff, socat-relay, socat-chain"
        );
    }
    let socat_pids: Vec<u32> = socats.0.iter().map(Child::id).collect();

    // Warm-up: threads, pools, socket buffers and the CPU frequency settle.
    for (_, addr) in &rows {
        throughput(*addr, bytes.min(256 << 20));
        setup_rate(*addr, args.conns.min(200));
    }
    let n = rows.len();
    let mut tput = vec![Vec::new(); n];
    let mut rate = vec![Vec::new(); n];
    let mut cpu = vec![0.0f64; n];
    // Throughput first, then connection setup: thousands of connections just closed (their
    // TIME_WAIT entries, the threads that served them) slowed the bulk runs that followed
    // them by 10% and more, most on the paths with the most sockets.
    for round in 0..args.rounds {
        for k in 0..n {
            let i = (round + k) % n;
            let before = cpu_seconds(&socat_pids);
            tput[i].push(throughput(rows[i].1, bytes));
            // A socat child's CPU reaches its parent's counters once it is reaped.
            thread::sleep(Duration::from_millis(30));
            cpu[i] += cpu_seconds(&socat_pids) - before;
        }
    }
    for round in 0..args.rounds {
        for k in 0..n {
            let i = (round + k) % n;
            rate[i].push(setup_rate(rows[i].1, args.conns));
        }
    }
    let ratios = |v: &[Vec<f64>], i: usize| -> Vec<f64> {
        v[i].iter().zip(&v[0]).map(|(x, d)| 100.0 * x / d).collect()
    };
    println!(
        "{} MiB per throughput run, {} sequential connections per setup run, {} interleaved rounds; \
         medians, ratio to {} within each round (lowest-highest round)",
        args.mib, args.conns, args.rounds, rows[0].0
    );
    println!(
        "{:<12} {:>8} {:>6} {:>11} {:>8} {:>8} {:>6} {:>11}",
        "path", "MiB/s", "ratio", "range", "CPU s/GiB", "conn/s", "ratio", "range"
    );
    let gib_moved = (bytes as f64 / f64::from(1u32 << 30)) * args.rounds as f64;
    for (i, (name, _)) in rows.iter().enumerate() {
        let (t, r) = (ratios(&tput, i), ratios(&rate, i));
        let ((tlo, thi), (rlo, rhi)) = (spread(&t), spread(&r));
        println!(
            "{name:<12} {:>8.0} {:>5.0}% {:>11} {:>8.2} {:>8.0} {:>5.0}% {:>11}",
            median(tput[i].clone()),
            median(t),
            format!("{tlo:.0}-{thi:.0}%"),
            cpu[i] / gib_moved,
            median(rate[i].clone()),
            median(r),
            format!("{rlo:.0}-{rhi:.0}%"),
        );
    }
    drop(socats);
    let _ = std::fs::remove_dir_all(&dir);
}
