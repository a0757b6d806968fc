//! `paddock-probe`: a small program run inside the sandbox by the end-to-end tests. Each
//! argument is one observation to make; it prints one JSON object per observation:
//! `{"op": "...", "arg": "...", "ok": true|false, "errno": N, "detail": "..."}`.
//!
//! Operations: `read:PATH`, `write:PATH`, `mkdir:PATH`, `rename:FROM=TO`, `exchange:A=B`
//! (`renameat2` with `RENAME_EXCHANGE`), `link:FROM=TO` (a hard link), `rmdir:PATH`,
//! `unlink:PATH`, `ls:PATH`,
//! `connect:IP:PORT`, `unix:PATH`, `socketpair-dgram`, `io-uring`, `tiocsti`, `tiocsti-hi`,
//! `keyctl`, `unshare-user`, `env:NAME`, `fds`, `file:PATH` (prints the content), `sleep:MS`,
//! `open:PATH` (open for reading only), `ptrace:PID` (attach), `http:URL` (an absolute-URI
//! GET through `$HTTP_PROXY`; detail: status line and body), `proxy-connect:HOST:PORT` (a raw
//! CONNECT through `$HTTP_PROXY`; detail: status line), `serve:PORT:SECONDS` (an HTTP server
//! on 127.0.0.1:PORT answering `served-by-probe` for that long).
//!
//! Hostile operations (attack primitives of the security cases, see [`hostile`]): `kill:PID`,
//! `pidfd:PID`, `syscall:NAME` (a raw call with zero arguments), `nr:N` (syscall number N,
//! zero arguments), `int80-socket`, `int80-socketcall`, `int80-getpid` (i386 calls through
//! `int 0x80`), `x32-socket`, `x32-getpid`, `unix-hi` (AF_UNIX with bit 32 set),
//! `socketpair-seqpacket`, `abstract:NAME` (connect to `@NAME`; detail: what it read),
//! `family:NAME` (a socket of family PACKET, NETLINK, NETLINK-ROUTE, VSOCK, ALG, BLUETOOTH,
//! XDP, KEY or RAWICMP), `mknod:PATH` (a char device 1:3), `unshare:NS` (mnt, net, pid, ipc,
//! uts, cgroup), `clone-ns:NS` (a raw clone with that namespace flag), `tiocsti-str:TEXT`
//! (inject TEXT into stdin's terminal, `\n` for a newline), `tioclinux`, `udp:IP:PORT=TEXT`
//! (one datagram), `resolve:NAME` (getaddrinfo; detail: the addresses), `fdlinks` (where
//! each open fd points), `pair-send:dgram=PATH` / `pair-send:seqpacket=PATH` (a unix
//! socketpair of that type, then `sendto` PATH and `connect` to PATH: the UNX-02 reconnect;
//! errno: connect's; detail: each call's result).
//!
//! Unix sockets by path: `unix-read:PATH` (connect, then read what the server sends until it
//! closes; detail: that text), `unix-race:GRANTED,UNGRANTED,N` (see [`race`]),
//! `unix-fdswap:UNGRANTED,N` (see [`race::fdswap`]), `unix-time:PATH,N` (N connects to PATH, each on a fresh socket; detail: `ns=` the mean
//! time of socket, connect and close).

use crate::race;

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

/// `renameat2(a, b, RENAME_EXCHANGE)`: swaps two names atomically.
fn exchange(a: &str, b: &str) -> std::io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| std::io::ErrorKind::InvalidInput);
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: two NUL-terminated paths; renameat2 reads them and nothing else.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn raw(op: &str, rc: i64) {
    if rc < 0 { emit(op, "", false, errno(), "") } else { emit(op, "", true, 0, &rc.to_string()) }
}

pub fn main() {
    for arg in std::env::args().skip(1) {
        let (op, rest) = arg.split_once(':').unwrap_or((arg.as_str(), ""));
        if hostile(op, rest) {
            continue;
        }
        match op {
            "read" => {
                io_result(op, rest, std::fs::read(rest).map(|b| format!("{} bytes", b.len())))
            }
            "file" => io_result(op, rest, std::fs::read_to_string(rest)),
            // A pause between two operations (a hand-over in the sandbox to let pass).
            "sleep" => io_result(
                op,
                rest,
                rest.parse::<u64>()
                    .map(|ms| std::thread::sleep(std::time::Duration::from_millis(ms)))
                    .map(|()| String::new())
                    .map_err(|_| std::io::ErrorKind::InvalidInput.into()),
            ),
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
            "exchange" => {
                let (from, to) = rest.split_once('=').unwrap_or((rest, ""));
                io_result(op, rest, exchange(from, to).map(|()| String::new()))
            }
            "link" => {
                let (from, to) = rest.split_once('=').unwrap_or((rest, ""));
                io_result(op, rest, std::fs::hard_link(from, to).map(|()| String::new()))
            }
            "rmdir" => io_result(op, rest, std::fs::remove_dir(rest).map(|()| String::new())),
            "unlink" => io_result(op, rest, std::fs::remove_file(rest).map(|()| String::new())),
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
            "unix-read" => io_result(
                op,
                rest,
                std::os::unix::net::UnixStream::connect(rest).and_then(|mut s| {
                    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
                    let mut text = String::new();
                    s.read_to_string(&mut text)?;
                    Ok(text)
                }),
            ),
            "unix-fdswap" => match race::fdswap(rest) {
                Ok(detail) => emit(op, rest, true, 0, &detail),
                Err(message) => emit(op, rest, false, -1, &message),
            },
            "unix-time" => match race::time(rest) {
                Ok(detail) => emit(op, rest, true, 0, &detail),
                Err(message) => emit(op, rest, false, -1, &message),
            },
            "unix-race" => match race::run(rest) {
                Ok(detail) => emit(op, rest, true, 0, &detail),
                Err(message) => emit(op, rest, false, -1, &message),
            },
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

/// Namespace flags by short name.
fn ns_flag(name: &str) -> Option<libc::c_int> {
    Some(match name {
        "user" => libc::CLONE_NEWUSER,
        "mnt" => libc::CLONE_NEWNS,
        "net" => libc::CLONE_NEWNET,
        "pid" => libc::CLONE_NEWPID,
        "ipc" => libc::CLONE_NEWIPC,
        "uts" => libc::CLONE_NEWUTS,
        "cgroup" => libc::CLONE_NEWCGROUP,
        _ => return None,
    })
}

/// Syscall numbers by name for `syscall:NAME`.
fn syscall_by_name(name: &str) -> Option<libc::c_long> {
    Some(match name {
        "clone3" => libc::SYS_clone3,
        "openat2" => libc::SYS_openat2,
        "fsopen" => libc::SYS_fsopen,
        "fsconfig" => libc::SYS_fsconfig,
        "fsmount" => libc::SYS_fsmount,
        "fspick" => libc::SYS_fspick,
        "move_mount" => libc::SYS_move_mount,
        "open_tree" => libc::SYS_open_tree,
        "mount_setattr" => libc::SYS_mount_setattr,
        "pidfd_getfd" => libc::SYS_pidfd_getfd,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "userfaultfd" => libc::SYS_userfaultfd,
        "bpf" => libc::SYS_bpf,
        "perf_event_open" => libc::SYS_perf_event_open,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "kexec_load" => libc::SYS_kexec_load,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "init_module" => libc::SYS_init_module,
        "finit_module" => libc::SYS_finit_module,
        "delete_module" => libc::SYS_delete_module,
        "setns" => libc::SYS_setns,
        "unshare" => libc::SYS_unshare,
        "mount" => libc::SYS_mount,
        "umount2" => libc::SYS_umount2,
        "pivot_root" => libc::SYS_pivot_root,
        "chroot" => libc::SYS_chroot,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        _ => return None,
    })
}

/// (family, type, protocol) by name for `family:NAME`.
fn family(name: &str) -> Option<(libc::c_int, libc::c_int, libc::c_int)> {
    Some(match name {
        "PACKET" => (libc::AF_PACKET, libc::SOCK_RAW, 0),
        // NETLINK_KOBJECT_UEVENT (15): not the routing family the filter lets through.
        "NETLINK" => (libc::AF_NETLINK, libc::SOCK_RAW, 15),
        "NETLINK-ROUTE" => (libc::AF_NETLINK, libc::SOCK_RAW, 0),
        "VSOCK" => (libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        "ALG" => (libc::AF_ALG, libc::SOCK_SEQPACKET, 0),
        "BLUETOOTH" => (libc::AF_BLUETOOTH, libc::SOCK_STREAM, 0),
        "XDP" => (libc::AF_XDP, libc::SOCK_RAW, 0),
        "KEY" => (libc::AF_KEY, libc::SOCK_RAW, 2),
        "RAWICMP" => (libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        _ => return None,
    })
}

/// An i386 system call through `int 0x80` with three arguments; the raw return value.
#[cfg(target_arch = "x86_64")]
fn int80(nr: i64, a: i64, b: i64, c: i64) -> i64 {
    let ret: i64;
    // SAFETY: `int 0x80` enters the kernel's 32-bit entry point with integer arguments; the
    // caller passes only integers or pointers it owns. The kernel preserves other registers
    // (r8-r11 are clobbered on some kernels, so they are declared). rbx is LLVM's, so the
    // first argument is swapped into it around the call.
    unsafe {
        std::arch::asm!(
            "xchg {a}, rbx",
            "int 0x80",
            "xchg {a}, rbx",
            a = inout(reg) a => _,
            inlateout("rax") nr => ret,
            in("rcx") b,
            in("rdx") c,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
        );
    }
    ret
}

/// Emits the result of a raw `int 0x80` call (a negative value is `-errno`).
#[cfg(target_arch = "x86_64")]
fn int80_result(op: &str, ret: i64) {
    if ret < 0 {
        emit(op, "", false, i32::try_from(-ret).unwrap_or(-1), "")
    } else {
        emit(op, "", true, 0, &ret.to_string())
    }
}

/// The hostile operations; false when `op` is not one of them.
fn hostile(op: &str, rest: &str) -> bool {
    match op {
        "kill" => {
            // SAFETY: kill takes integers.
            let rc = unsafe { libc::kill(rest.parse().unwrap_or(0), libc::SIGKILL) };
            raw_arg(op, rest, i64::from(rc));
        }
        "pidfd" => {
            let pid: libc::c_long = rest.parse().unwrap_or(0);
            // SAFETY: pidfd_open takes integers.
            let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            raw_arg(op, rest, rc);
        }
        "syscall" | "nr" => {
            let nr = if op == "nr" { rest.parse().ok() } else { syscall_by_name(rest) };
            let Some(nr) = nr else {
                emit(op, rest, false, -1, "unknown syscall");
                return true;
            };
            // SAFETY: a raw system call with all-zero arguments: null pointers and zero
            // lengths, which the kernel rejects or treats as empty.
            let rc = unsafe { libc::syscall(nr, 0, 0, 0, 0, 0, 0) };
            raw_arg(op, rest, rc);
        }
        #[cfg(target_arch = "x86_64")]
        "int80-socket" => int80_result(op, int80(359, 1, 1, 0)),
        #[cfg(target_arch = "x86_64")]
        "int80-getpid" => int80_result(op, int80(20, 0, 0, 0)),
        #[cfg(target_arch = "x86_64")]
        "int80-socketcall" => {
            // socketcall(SYS_SOCKET, args) with the arguments in 32-bit addressable memory.
            // SAFETY: an anonymous private mapping below 2 GiB, checked before use.
            let args = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
                    -1,
                    0,
                )
            };
            if args == libc::MAP_FAILED {
                emit(op, "", false, errno(), "mmap");
                return true;
            }
            let words = args.cast::<u32>();
            // SAFETY: the mapping is 4096 bytes, writable, and holds three u32.
            unsafe {
                *words = 1;
                *words.add(1) = 1;
                *words.add(2) = 0;
            }
            int80_result(op, int80(102, 1, args as i64, 0));
        }
        #[cfg(target_arch = "x86_64")]
        "x32-socket" | "x32-getpid" => {
            let rc = if op == "x32-socket" {
                // SAFETY: a raw x32 system call with integer arguments.
                unsafe { libc::syscall(0x4000_0000 | libc::SYS_socket, 1, 1, 0) }
            } else {
                // SAFETY: as above, no arguments.
                unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) }
            };
            raw(op, rc);
        }
        "unix-hi" => {
            // SAFETY: socket with integer arguments; bit 32 of the family is set.
            let rc = unsafe { libc::syscall(libc::SYS_socket, (1i64 << 32) | 1, 1, 0) };
            raw(op, rc);
        }
        "socketpair-seqpacket" => {
            let mut fds = [0i32; 2];
            // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
            let rc = unsafe {
                libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr())
            };
            raw(op, i64::from(rc));
        }
        "abstract" => io_result(op, rest, connect_abstract(rest)),
        "family" => match family(rest) {
            Some((f, t, p)) => {
                // SAFETY: socket takes integers.
                let rc = unsafe { libc::socket(f, t, p) };
                raw_arg(op, rest, i64::from(rc));
            }
            None => emit(op, rest, false, -1, "unknown family"),
        },
        "mknod" => {
            let path = std::ffi::CString::new(rest).unwrap_or_default();
            // SAFETY: a NUL-terminated path and integer mode and device.
            let rc =
                unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
            raw_arg(op, rest, i64::from(rc));
        }
        "unshare" => match ns_flag(rest) {
            // SAFETY: unshare takes a flag word.
            Some(flag) => raw_arg(op, rest, i64::from(unsafe { libc::unshare(flag) })),
            None => emit(op, rest, false, -1, "unknown namespace"),
        },
        "clone-ns" => match ns_flag(rest) {
            Some(flag) => {
                // SAFETY: a raw fork-like clone (no new stack: the child continues on a copy
                // of this one) whose child exits at once without touching shared state.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_clone,
                        libc::c_long::from(flag | libc::SIGCHLD),
                        0,
                        0,
                        0,
                        0,
                    )
                };
                if rc == 0 {
                    // SAFETY: the child leaves at once.
                    unsafe { libc::_exit(0) };
                }
                if rc > 0 {
                    // SAFETY: reaping our own child.
                    unsafe { libc::waitpid(rc as i32, std::ptr::null_mut(), 0) };
                }
                raw_arg(op, rest, rc);
            }
            None => emit(op, rest, false, -1, "unknown namespace"),
        },
        "tiocsti-str" => {
            let text = rest.replace("\\n", "\n");
            let mut rc = 0;
            for b in text.bytes() {
                // SAFETY: a raw ioctl on stdin with a pointer to one byte; the kernel reads it.
                rc = unsafe { libc::syscall(libc::SYS_ioctl, 0, libc::TIOCSTI, &b as *const u8) };
                if rc < 0 {
                    break;
                }
            }
            raw_arg(op, rest, rc);
        }
        "tioclinux" => {
            let sub = [3u8];
            // SAFETY: a raw ioctl on stdin with a pointer to one byte (TIOCL_SETSEL's cousin
            // TIOCL_PASTESEL, which only reads it).
            let rc = unsafe { libc::syscall(libc::SYS_ioctl, 0, 0x541C, sub.as_ptr()) };
            raw(op, rc);
        }
        "udp" => {
            let (addr, text) = rest.split_once('=').unwrap_or((rest, ""));
            io_result(
                op,
                rest,
                std::net::UdpSocket::bind("0.0.0.0:0")
                    .and_then(|s| s.send_to(text.as_bytes(), addr))
                    .map(|n| format!("sent {n}")),
            );
        }
        "resolve" => {
            use std::net::ToSocketAddrs;
            let started = std::time::Instant::now();
            let r = (rest, 443).to_socket_addrs().map(|a| {
                let mut v: Vec<String> = a.map(|a| a.ip().to_string()).collect();
                v.sort();
                v.join(",")
            });
            let ms = started.elapsed().as_millis();
            match r {
                Ok(addrs) => emit(op, rest, true, 0, &format!("{addrs} in {ms} ms")),
                Err(e) => emit(
                    op,
                    rest,
                    false,
                    e.raw_os_error().unwrap_or(-1),
                    &format!("{e} in {ms} ms"),
                ),
            }
        }
        "pair-send" => {
            let (kind, path) = rest.split_once('=').unwrap_or((rest, ""));
            let ty = if kind == "seqpacket" { libc::SOCK_SEQPACKET } else { libc::SOCK_DGRAM };
            pair_send(op, rest, ty, path);
        }
        "fdlinks" => io_result(
            op,
            "",
            std::fs::read_dir("/proc/self/fd").map(|d| {
                let mut links: Vec<String> = d
                    .flatten()
                    .map(|e| {
                        let to = std::fs::read_link(e.path()).unwrap_or_default();
                        format!("{}={}", e.file_name().to_string_lossy(), to.display())
                    })
                    .collect();
                links.sort();
                links.join(",")
            }),
        ),
        _ => return false,
    }
    true
}

fn raw_arg(op: &str, arg: &str, rc: i64) {
    if rc < 0 { emit(op, arg, false, errno(), "") } else { emit(op, arg, true, 0, &rc.to_string()) }
}

/// Connects to the abstract unix socket `@name` and returns what it sends first.
fn connect_abstract(name: &str) -> std::io::Result<String> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut s = std::os::unix::net::UnixStream::connect_addr(&addr)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// The UNX-02 attack: a unix socketpair of type `ty` used to reach the pathname socket `path`
/// with `sendto`, then with `connect` + `send`.
fn pair_send(op: &str, arg: &str, ty: libc::c_int, path: &str) {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    if unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, fds.as_mut_ptr()) } < 0 {
        emit(op, arg, false, errno(), "socketpair");
        return;
    }
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in below, NUL-terminated.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path.bytes().take(107)) {
        *d = s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let msg = b"paddock-e2e";
    let sa = &addr as *const libc::sockaddr_un as *const libc::sockaddr;
    // SAFETY: sendto with a valid buffer and a valid address of `len` bytes.
    let sent = unsafe { libc::sendto(fds[0], msg.as_ptr().cast(), msg.len(), 0, sa, len) };
    let sent_errno = errno();
    // SAFETY: connect with a valid address of `len` bytes.
    let connected = unsafe { libc::connect(fds[0], sa, len) };
    let connect_errno = errno();
    // SAFETY: send with a valid buffer (fails unless connected).
    let resent = unsafe { libc::send(fds[0], msg.as_ptr().cast(), msg.len(), 0) };
    let detail =
        format!("sendto={sent}/{sent_errno} connect={connected}/{connect_errno} send={resent}");
    // `ok` means a call returned success; whether anything left the pair is for the
    // receiving end to say.
    emit(
        op,
        arg,
        sent >= 0 || connected == 0,
        if connected == 0 { 0 } else { connect_errno },
        &detail,
    );
}
