//! `unix-race:GRANTED,UNGRANTED,N`: the time-of-check/time-of-use attack on a supervisor
//! that checks a `connect` address. Two threads flip one shared `sockaddr_un` between the
//! two paths (which differ in one byte) while four threads connect through it, N attempts
//! in all. Detail: `attempts=N connected=C refused=R other=O`; which server each connection
//! reached is counted by the servers themselves.
//!
//! `unix-time:PATH,N`: the cost of a connect, for `cargo xtask bench unix-socket`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

/// Runs the race; `Err` when the paths do not differ in exactly one byte.
pub fn run(arg: &str) -> Result<String, String> {
    let mut parts = arg.split(',');
    let (Some(granted), Some(ungranted), Some(n)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("usage: unix-race:GRANTED,UNGRANTED,N".to_owned());
    };
    let n: usize = n.parse().map_err(|_| "N is not a number".to_owned())?;
    let (a, b) = (granted.as_bytes(), ungranted.as_bytes());
    let diff: Vec<usize> = (0..a.len()).filter(|&i| a.get(i) != b.get(i)).collect();
    if a.len() != b.len() || diff.len() != 1 || a.len() >= 107 {
        return Err("the two paths must have one length and differ in one byte".to_owned());
    }
    let at = diff[0];
    // The shared address: family, then the path and its NUL; bytes flipped in place.
    let addr: Arc<Vec<AtomicU8>> = Arc::new((0..110).map(|_| AtomicU8::new(0)).collect());
    let family = (libc::AF_UNIX as u16).to_ne_bytes();
    addr[0].store(family[0], Ordering::Relaxed);
    addr[1].store(family[1], Ordering::Relaxed);
    for (i, byte) in a.iter().enumerate() {
        addr[2 + i].store(*byte, Ordering::Relaxed);
    }
    let len = (2 + a.len() + 1) as libc::socklen_t;
    let done = Arc::new(AtomicBool::new(false));
    let flippers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, done) = (Arc::clone(&addr), Arc::clone(&done));
            let (x, y) = (a[at], b[at]);
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    addr[2 + at].store(x, Ordering::Relaxed);
                    addr[2 + at].store(y, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let next = Arc::new(AtomicUsize::new(0));
    let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
    let connectors: Vec<_> = (0..4)
        .map(|_| {
            let (addr, next, counts) = (Arc::clone(&addr), Arc::clone(&next), Arc::clone(&counts));
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    // SAFETY: a fresh socket, connected through the shared buffer (an array
                    // of bytes the kernel reads as a sockaddr_un), then closed.
                    let (rc, errno) = unsafe {
                        let fd =
                            libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                        if fd < 0 {
                            (-1, std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
                        } else {
                            let rc = libc::connect(fd, addr.as_ptr().cast(), len);
                            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                            libc::close(fd);
                            (rc, errno)
                        }
                    };
                    let slot = match (rc, errno) {
                        (0, _) => 0,
                        (_, libc::EACCES) => 1,
                        _ => 2,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for c in connectors {
        let _ = c.join();
    }
    done.store(true, Ordering::Relaxed);
    for f in flippers {
        let _ = f.join();
    }
    let [c, r, o] = &*counts;
    let (c, r, o) =
        (c.load(Ordering::Relaxed), r.load(Ordering::Relaxed), o.load(Ordering::Relaxed));
    Ok(format!("attempts={} connected={c} refused={r} other={o}", c + r + o))
}

/// N connects to PATH on fresh sockets; `ns=MEAN` per socket, connect and close.
pub fn time(arg: &str) -> Result<String, String> {
    let (path, n) = arg.rsplit_once(',').ok_or("usage: unix-time:PATH,N")?;
    let n: u32 = n.parse().map_err(|_| "N is not a number".to_owned())?;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::os::unix::net::UnixStream::connect(path).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(format!("ns={}", start.elapsed().as_nanos() / u128::from(n.max(1))))
}

/// `unix-fdswap:UNGRANTED,N`: the other time-of-check/time-of-use attack, on the
/// descriptor: one thread connects descriptor D N times through a shared address that two
/// threads flip between an inet one (127.0.0.1:9) and the unix path UNGRANTED, while
/// another thread keeps putting an inet socket, then a fresh unix socket, at D. A supervisor
/// that checks "an inet socket" and lets the kernel run the call would connect a unix one.
/// Detail: `attempts=N connected=C`.
pub fn fdswap(arg: &str) -> Result<String, String> {
    let (path, n) = arg.rsplit_once(',').ok_or("usage: unix-fdswap:UNGRANTED,N")?;
    let n: usize = n.parse().map_err(|_| "N is not a number".to_owned())?;
    if path.len() >= 107 {
        return Err("the path is too long".to_owned());
    }
    let mut unix = [0u8; 110];
    unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    unix[2..2 + path.len()].copy_from_slice(path.as_bytes());
    let mut inet = [0u8; 110];
    inet[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    inet[2..4].copy_from_slice(&9u16.to_be_bytes());
    inet[4..8].copy_from_slice(&[127, 0, 0, 1]);
    let addr: Arc<Vec<AtomicU8>> = Arc::new(unix.iter().map(|b| AtomicU8::new(*b)).collect());
    // SAFETY: a socket to reserve the descriptor number D.
    let d = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    if d < 0 {
        return Err("socket".to_owned());
    }
    let done = Arc::new(AtomicBool::new(false));
    let mut helpers = Vec::new();
    for _ in 0..2 {
        let (addr, done) = (Arc::clone(&addr), Arc::clone(&done));
        helpers.push(std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                for bytes in [&inet, &unix] {
                    for (slot, b) in addr.iter().zip(bytes.iter()) {
                        slot.store(*b, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let swapper_done = Arc::clone(&done);
    helpers.push(std::thread::spawn(move || {
        while !swapper_done.load(Ordering::Relaxed) {
            for family in [libc::AF_INET, libc::AF_UNIX] {
                // SAFETY: a fresh socket moved onto D, then its first number closed.
                unsafe {
                    let s = libc::socket(family, libc::SOCK_STREAM, 0);
                    if s >= 0 {
                        libc::dup2(s, d);
                        libc::close(s);
                    }
                }
            }
        }
    }));
    let mut connected = 0;
    for _ in 0..n {
        // SAFETY: connect on D through the shared buffer, 110 bytes long.
        if unsafe { libc::connect(d, addr.as_ptr().cast(), 110) } == 0 {
            connected += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    for h in helpers {
        let _ = h.join();
    }
    Ok(format!("attempts={n} connected={connected}"))
}
