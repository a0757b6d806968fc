//! The lab of the network cases: a test thread in network and mount namespaces of its own
//! (root only), with extra addresses on its loopback, a DNS server on 127.0.0.1:53 that logs
//! every query, and `/etc/resolv.conf`, `/etc/hosts` and `/etc/nsswitch.conf` bound over so
//! that getaddrinfo (and so paddock's proxy) asks that server. Servers and paddock started
//! from the thread live there; the host's network and files are untouched.

use std::net::{IpAddr, UdpSocket};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::harness::{Scratch, require_os_sandbox, require_root, skip};

/// A DNS zone for a [`Lab`]: a name (or `*.name`, the name and every name under it) and its
/// addresses. Other names are NXDOMAIN.
pub type Zone = &'static [(&'static str, &'static [&'static str])];

/// A test's own network and resolver (see the module docs); its thread runs the test body.
pub struct Lab {
    /// Every name asked of the lab's DNS server, lowercase, in order.
    queries: Arc<Mutex<Vec<String>>>,
}

impl Lab {
    /// Runs `body` in a lab with `addrs` on loopback and `zone` served, or skips loudly (not
    /// root, no namespaces, no `ip`): without a lab these cases cannot be made real.
    pub fn run(s: &Scratch, addrs: &[&str], zone: Zone, body: impl FnOnce(&Lab) + Send) {
        Lab::run_with_hosts(s, addrs, zone, "files dns", body)
    }

    /// [`Lab::run`] with `hosts` as the services of nsswitch.conf's `hosts:` line.
    pub fn run_with_hosts(
        s: &Scratch,
        addrs: &[&str],
        zone: Zone,
        hosts: &str,
        body: impl FnOnce(&Lab) + Send,
    ) {
        if !require_os_sandbox() {
            return;
        }
        if !require_root("a lab (own network and /etc/resolv.conf)") {
            return;
        }
        // The lab runs on a thread of its own, named after the test for its skips.
        let test = paddock_test_support::current_test();
        let files = [
            ("resolv.conf", "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n".to_owned()),
            ("hosts", "127.0.0.1 localhost\n::1 localhost\n".to_owned()),
            ("nsswitch.conf", nsswitch_with_hosts(hosts)),
        ];
        for (name, text) in &files {
            std::fs::write(s.root.join(name), text).unwrap();
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name(test)
                .spawn_scoped(scope, || {
                    if let Err(why) = Lab::enter(s, addrs) {
                        skip(format!("cannot set up a lab: {why}"), None);
                        return;
                    }
                    let lab = Lab { queries: Arc::default() };
                    lab.serve_dns(zone);
                    body(&lab);
                })
                .expect("a thread for the lab")
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
        });
    }

    /// Moves this thread into new network and mount namespaces and sets them up.
    fn enter(s: &Scratch, addrs: &[&str]) -> Result<(), String> {
        // SAFETY: unshare affects only this thread (a new mount namespace also unshares its
        // filesystem attributes); no pointers are involved.
        if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        let none = std::ptr::null();
        // SAFETY: a propagation change of `/` with a NUL-terminated path and null for the
        // unused arguments.
        let rc = unsafe {
            libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, none.cast())
        };
        if rc != 0 {
            return Err(format!("making / private: {}", std::io::Error::last_os_error()));
        }
        let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("ip (iproute2) is not installed")?;
        let mut commands = vec![vec!["link", "set", "lo", "up"]];
        let cidrs: Vec<String> = addrs.iter().map(|a| format!("{a}/32")).collect();
        commands.extend(cidrs.iter().map(|c| vec!["addr", "add", c.as_str(), "dev", "lo"]));
        for args in commands {
            let out = Command::new(ip).args(&args).output().map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("ip {args:?}: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        for name in ["resolv.conf", "hosts", "nsswitch.conf"] {
            let target = Path::new("/etc").join(name);
            if name == "nsswitch.conf" && !target.exists() {
                continue; // glibc's built-in default consults DNS.
            }
            let src = std::ffi::CString::new(s.root.join(name).into_os_string().into_vec())
                .map_err(|e| e.to_string())?;
            let dst = std::ffi::CString::new(target.into_os_string().into_vec())
                .map_err(|e| e.to_string())?;
            // SAFETY: a bind mount between two NUL-terminated paths; null for the unused
            // arguments.
            let rc = unsafe {
                libc::mount(src.as_ptr(), dst.as_ptr(), none, libc::MS_BIND, none.cast())
            };
            if rc != 0 {
                return Err(format!("binding /etc/{name}: {}", std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// Answers A and AAAA queries on 127.0.0.1:53 from `zone`, logging every name.
    fn serve_dns(&self, zone: Zone) {
        let socket = UdpSocket::bind("127.0.0.1:53").unwrap();
        let log = Arc::clone(&self.queries);
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while let Ok((n, peer)) = socket.recv_from(&mut buf) {
                if let Some(answer) = dns_answer(&buf[..n], zone, &log) {
                    let _ = socket.send_to(&answer, peer);
                }
            }
        });
    }

    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }
}

/// The host's nsswitch.conf with its `hosts:` line replaced by `hosts` (`files dns`: no
/// other resolver, such as systemd-resolved, between the proxy and the lab's DNS server).
fn nsswitch_with_hosts(hosts: &str) -> String {
    let host = std::fs::read_to_string("/etc/nsswitch.conf").unwrap_or_default();
    let mut out: String = host
        .lines()
        .filter(|l| !l.trim_start().starts_with("hosts:"))
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str(&format!("hosts: {hosts}\n"));
    out
}

/// The answer to one DNS query: the question echoed, then the zone's addresses of the asked
/// type (TTL 0), or NXDOMAIN for a name the zone does not hold.
fn dns_answer(query: &[u8], zone: Zone, log: &Mutex<Vec<String>>) -> Option<Vec<u8>> {
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(i..i + len)?).to_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*query.get(i)?, *query.get(i + 1)?]);
    let question_end = i + 4;
    query.get(question_end - 1)?;
    let name = labels.join(".");
    log.lock().unwrap().push(name.clone());
    let entry = zone.iter().find(|(pattern, _)| match pattern.strip_prefix("*.") {
        Some(base) => name == base || name.ends_with(&format!(".{base}")),
        None => name == *pattern,
    });
    let ips: Vec<IpAddr> = entry
        .map(|(_, ips)| ips.iter().map(|ip| ip.parse().unwrap()).collect())
        .unwrap_or_default();
    let ips: Vec<IpAddr> = ips
        .into_iter()
        .filter(|ip| matches!((ip, qtype), (IpAddr::V4(_), 1) | (IpAddr::V6(_), 28)))
        .collect();
    let rcode = if entry.is_some() { 0 } else { 3 };
    let mut out = query[..2].to_vec();
    out.extend_from_slice(&[0x81, 0x80 | rcode, 0, 1]);
    out.extend_from_slice(&u16::try_from(ips.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&query[12..question_end]);
    for ip in ips {
        let (rtype, data): (u16, Vec<u8>) = match ip {
            IpAddr::V4(v4) => (1, v4.octets().to_vec()),
            IpAddr::V6(v6) => (28, v6.octets().to_vec()),
        };
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
        out.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
        out.extend_from_slice(&data);
    }
    Some(out)
}
