//! `paddock-probe`: a small program run inside the sandbox by the end-to-end tests. Each
//! argument is one observation to make; it prints one JSON object per observation:
//! `{"op": "...", "arg": "...", "ok": true|false, "errno": N, "detail": "..."}`.
//!
//! Operations: `read:PATH`, `write:PATH`, `mkdir:PATH`, `rename:FROM=TO`, `ls:PATH`,
//! `connect:IP:PORT`, `unix:PATH`, `socketpair-dgram`, `io-uring`, `tiocsti`, `tiocsti-hi`,
//! `keyctl`, `unshare-user`, `env:NAME`, `fds`, `file:PATH` (prints the content),
//! `open:PATH` (open for reading only), `ptrace:PID` (attach), `http:URL` (an absolute-URI
//! GET through `$HTTP_PROXY`; detail: status line and body), `proxy-connect:HOST:PORT` (a raw
//! CONNECT through `$HTTP_PROXY`; detail: status line), `serve:PORT:SECONDS` (an HTTP server
//! on 127.0.0.1:PORT answering `served-by-probe` for that long).

use std::io::{Read, Write};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn emit(op: &str, arg: &str, ok: bool, errno: i32, detail: &str) {
    let v = serde_json::json!({"op": op, "arg": arg, "ok": ok, "errno": errno, "detail": detail});
    println!("{v}");
}

fn io_result(op: &str, arg: &str, r: std::io::Result<String>) {
    match r {
        Ok(detail) => emit(op, arg, true, 0, &detail),
        Err(e) => emit(op, arg, false, e.raw_os_error().unwrap_or(-1), &e.to_string()),
    }
}

fn raw(op: &str, rc: i64) {
    if rc < 0 { emit(op, "", false, errno(), "") } else { emit(op, "", true, 0, &rc.to_string()) }
}

fn main() {
    for arg in std::env::args().skip(1) {
        let (op, rest) = arg.split_once(':').unwrap_or((arg.as_str(), ""));
        match op {
            "read" => {
                io_result(op, rest, std::fs::read(rest).map(|b| format!("{} bytes", b.len())))
            }
            "file" => io_result(op, rest, std::fs::read_to_string(rest)),
            "write" => io_result(
                op,
                rest,
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(rest)
                    .and_then(|mut f| f.write_all(b"x"))
                    .map(|()| String::new()),
            ),
            "mkdir" => io_result(op, rest, std::fs::create_dir(rest).map(|()| String::new())),
            "rename" => {
                let (from, to) = rest.split_once('=').unwrap_or((rest, ""));
                io_result(op, rest, std::fs::rename(from, to).map(|()| String::new()))
            }
            "ls" => io_result(
                op,
                rest,
                std::fs::read_dir(rest).map(|d| {
                    let mut names: Vec<String> =
                        d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
                    names.sort();
                    names.join(",")
                }),
            ),
            "connect" => io_result(
                op,
                rest,
                std::net::TcpStream::connect_timeout(
                    &rest
                        .parse()
                        .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 9))),
                    std::time::Duration::from_secs(2),
                )
                .map(|mut s| {
                    let mut buf = [0u8; 64];
                    let n = s.read(&mut buf).unwrap_or(0);
                    String::from_utf8_lossy(&buf[..n]).into_owned()
                }),
            ),
            "unix" => io_result(
                op,
                rest,
                std::os::unix::net::UnixStream::connect(rest).map(|_| String::new()),
            ),
            "socketpair-dgram" => {
                let mut fds = [0i32; 2];
                // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
                let rc = unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr())
                };
                raw(op, i64::from(rc));
            }
            "io-uring" => {
                let mut params = [0u8; 120];
                // SAFETY: io_uring_setup reads and writes `params`, a buffer of the struct's size.
                let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
                raw(op, rc);
            }
            "tiocsti" | "tiocsti-hi" => {
                let c = b'#';
                // TIOCSTI's integer type differs between targets.
                #[allow(clippy::unnecessary_cast)]
                let cmd: u64 = libc::TIOCSTI as u64 | if op == "tiocsti-hi" { 1 << 32 } else { 0 };
                // SAFETY: a raw ioctl on stdin with a pointer to one byte; the kernel only reads it.
                let rc = unsafe { libc::syscall(libc::SYS_ioctl, 0, cmd, &c as *const u8) };
                raw(op, rc);
            }
            "keyctl" => {
                // KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3).
                // SAFETY: keyctl with integer arguments only.
                let rc = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i64, 0) };
                raw(op, rc);
            }
            "unshare-user" => {
                // SAFETY: unshare takes a flag word.
                let rc = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
                raw(op, i64::from(rc));
            }
            "unix-socket" => {
                // SAFETY: socket takes integers.
                let rc = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
                raw(op, i64::from(rc));
            }
            "env" => match std::env::var(rest) {
                Ok(v) => emit(op, rest, true, 0, &v),
                Err(_) => emit(op, rest, false, 0, ""),
            },
            "fds" => io_result(
                op,
                "",
                std::fs::read_dir("/proc/self/fd").map(|d| {
                    let mut fds: Vec<i32> =
                        d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
                    fds.sort_unstable();
                    fds.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                }),
            ),
            "open" => io_result(op, rest, std::fs::File::open(rest).map(|_| String::new())),
            "ptrace" => {
                let pid: i32 = rest.parse().unwrap_or(0);
                // SAFETY: PTRACE_ATTACH with integer arguments; a success is detached at once.
                let rc = unsafe {
                    libc::ptrace(libc::PTRACE_ATTACH, pid, std::ptr::null_mut::<u8>(), 0)
                };
                let e = errno();
                if rc == 0 {
                    // SAFETY: as above.
                    unsafe {
                        libc::ptrace(libc::PTRACE_DETACH, pid, std::ptr::null_mut::<u8>(), 0)
                    };
                    emit(op, rest, true, 0, "attached");
                } else {
                    emit(op, rest, false, e, "");
                }
            }
            "http" => io_result(op, rest, through_proxy(&format!("GET {rest} HTTP/1.0\r\n\r\n"))),
            "proxy-connect" => io_result(
                op,
                rest,
                through_proxy(&format!("CONNECT {rest} HTTP/1.1\r\nHost: {rest}\r\n\r\n"))
                    .map(|answer| answer.lines().next().unwrap_or("").to_owned()),
            ),
            "serve" => {
                let (port, secs) = rest.split_once(':').unwrap_or((rest, "10"));
                io_result(op, rest, serve(port.parse().unwrap_or(0), secs.parse().unwrap_or(10)));
            }
            other => emit(other, rest, false, -1, "unknown operation"),
        }
    }
}

/// Sends `request` to the proxy named by `$HTTP_PROXY` (`http://IP:PORT`) and returns what it
/// answered until it closed (a tunnel is closed after the status line is read).
fn through_proxy(request: &str) -> std::io::Result<String> {
    let proxy = std::env::var("HTTP_PROXY").map_err(|_| std::io::Error::other("no HTTP_PROXY"))?;
    let addr = proxy.trim_start_matches("http://").trim_end_matches('/');
    let addr: std::net::SocketAddr =
        addr.parse().map_err(|_| std::io::Error::other(format!("bad HTTP_PROXY {proxy}")))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    s.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            // A tunnel stays open: what arrived is the answer.
            Err(_) if !answer.is_empty() => break,
            Err(e) => return Err(e),
        }
        if request.starts_with("CONNECT") && answer.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Serves `served-by-probe` over HTTP on 127.0.0.1:`port` for `secs` seconds.
fn serve(port: u16, secs: u64) -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    listener.set_nonblocking(true)?;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut served = 0;
    while std::time::Instant::now() < end {
        match listener.accept() {
            Ok((mut conn, _)) => {
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf);
                let _ =
                    conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 15\r\n\r\nserved-by-probe");
                served += 1;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    Ok(format!("served {served}"))
}
