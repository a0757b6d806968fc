//! Test helpers: a temporary directory, loopback servers and a thread counter.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// A directory under the system temp dir, removed on drop. Short, so socket paths fit.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("pb{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Echoes every byte back; at end of stream, writes `#` and the byte count, then closes.
/// The trailer proves the server saw the half-close while the client could still read.
pub fn echo<S: Read + Write>(mut s: S) -> u64 {
    let mut buf = vec![0u8; 65536];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                if s.write_all(&buf[..n]).is_err() {
                    return total;
                }
            }
        }
    }
    let _ = s.write_all(format!("#{total}").as_bytes());
    total
}

/// A TCP echo server on 127.0.0.1 (thread per connection), running for the test process.
pub fn tcp_echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            thread::spawn(move || echo(conn));
        }
    });
    addr
}

/// A unix echo server at `path` (thread per connection), running for the test process.
pub fn unix_echo_server(path: &Path) {
    let listener = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            thread::spawn(move || echo(conn));
        }
    });
}

/// A stream whose write half can be closed alone.
pub trait HalfClose: Sync {
    fn close_write(&self) -> std::io::Result<()>;
}

impl HalfClose for TcpStream {
    fn close_write(&self) -> std::io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

impl HalfClose for UnixStream {
    fn close_write(&self) -> std::io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

/// Sends `data`, half-closes, reads everything back (concurrently).
pub fn roundtrip<S: HalfClose>(s: &S, data: &[u8]) -> Vec<u8>
where
    for<'a> &'a S: Read + Write,
{
    thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = s;
            w.write_all(data).unwrap();
            s.close_write().unwrap();
        });
        let mut out = Vec::new();
        let mut r = s;
        r.read_to_end(&mut out).unwrap();
        out
    })
}

/// [`roundtrip`] over TCP.
pub fn tcp_roundtrip(s: &TcpStream, data: &[u8]) -> Vec<u8> {
    roundtrip(s, data)
}

/// [`roundtrip`] over a unix stream.
pub fn unix_roundtrip(s: &UnixStream, data: &[u8]) -> Vec<u8> {
    roundtrip(s, data)
}

pub fn echoed(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.extend_from_slice(format!("#{}", data.len()).as_bytes());
    v
}

/// Deterministic test bytes.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// Thread counts are process-wide, so a test that counts threads runs alone in a child
/// process of its test binary. Returns `true` in that child (go on with the test) and
/// `false` in the parent, after it ran the child and checked that the test passed there.
#[cfg(target_os = "linux")]
pub fn in_child_running_only(test: &str) -> bool {
    const ROLE: &str = "PADDOCK_PORTBRIDGE_TEST_CHILD";
    if std::env::var_os(ROLE).is_some() {
        return true;
    }
    #[allow(clippy::disallowed_methods)] // Tests may spawn; this re-runs one test alone.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(ROLE, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("1 passed"), "child ran the test:\n{text}");
    false
}

/// Threads of this process.
#[cfg(target_os = "linux")]
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

/// The thread count once it is `expected`, or what it still is after 5 s. A joined thread
/// has finished its work but may stay listed in `/proc/self/task` a moment longer: the join
/// returns when the kernel clears its tid, before the task leaves the thread group.
#[cfg(target_os = "linux")]
pub fn thread_count_settled_at(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = thread_count();
        if n == expected || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// User plus system clock ticks of this process's thread named `name`, if there is one.
#[cfg(target_os = "linux")]
pub fn thread_cpu_ticks(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
        // Fields after the parenthesized name: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
        return Some(ticks(14)? + ticks(15)?);
    }
    None
}

/// `n` clients of the echo behind `addr`, all connected before any sends (so that `n` are
/// open at once), each with its own data; whether every one got its echo back.
pub fn concurrent_roundtrips(addr: SocketAddr, n: usize) -> bool {
    let barrier = std::sync::Barrier::new(n);
    thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let c = TcpStream::connect(addr).unwrap();
                    barrier.wait();
                    let data = pattern(20_000 + i * 97);
                    tcp_roundtrip(&c, &data) == echoed(&data)
                })
            })
            .collect();
        handles.into_iter().all(|h| h.join().unwrap())
    })
}

/// Polls `cond` until it holds or `limit` passes.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// Reads an HTTP response head (through the empty line) byte by byte, leaving the body.
pub fn read_response_head<R: Read>(mut r: R) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match r.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A TCP listener that counts connections and bytes received, and never answers: the
/// "canary" that must see nothing when the proxy refuses.
pub struct Canary {
    pub addr: SocketAddr,
    hits: std::sync::Arc<AtomicU64>,
    bytes: std::sync::Arc<AtomicU64>,
}

impl Canary {
    pub fn start() -> Canary {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = std::sync::Arc::new(AtomicU64::new(0));
        let bytes = std::sync::Arc::new(AtomicU64::new(0));
        let (h, b) = (hits.clone(), bytes.clone());
        thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                h.fetch_add(1, Ordering::SeqCst);
                let b = b.clone();
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        b.fetch_add(n as u64, Ordering::SeqCst);
                    }
                });
            }
        });
        Canary { addr, hits, bytes }
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }
}

/// A minimal TLS ClientHello record carrying `sni` as its server name.
pub fn client_hello(sni: &str) -> Vec<u8> {
    let name = sni.as_bytes();
    let mut entry = vec![0u8];
    entry.extend_from_slice(&(name.len() as u16).to_be_bytes());
    entry.extend_from_slice(name);
    let mut data = (entry.len() as u16).to_be_bytes().to_vec();
    data.extend_from_slice(&entry);
    let mut ext = vec![0, 0];
    ext.extend_from_slice(&(data.len() as u16).to_be_bytes());
    ext.extend_from_slice(&data);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7u8; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![0x01, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}
