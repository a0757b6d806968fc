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

/// Sends `data` over TCP, half-closes, reads everything back (concurrently).
pub fn tcp_roundtrip(s: &TcpStream, data: &[u8]) -> Vec<u8> {
    thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = s;
            w.write_all(data).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
        });
        let mut out = Vec::new();
        let mut r = s;
        r.read_to_end(&mut out).unwrap();
        out
    })
}

/// Sends `data` over a unix stream, half-closes, reads everything back (concurrently).
pub fn unix_roundtrip(s: &UnixStream, data: &[u8]) -> Vec<u8> {
    thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = s;
            w.write_all(data).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
        });
        let mut out = Vec::new();
        let mut r = s;
        r.read_to_end(&mut out).unwrap();
        out
    })
}

/// What the echo server sends back for `data`.
pub fn echoed(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.extend_from_slice(format!("#{}", data.len()).as_bytes());
    v
}

/// Deterministic test bytes.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// Threads of this process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
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
