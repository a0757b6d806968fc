//! Unit tests of the notification filter (run for real in forked children), the
//! classification rules (on a test double of the filesystem) and the record stream.

#![allow(clippy::unwrap_used)] // test code: a failed setup step is a failed test

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use super::classify::{self, MountFacts, Op, View};
use super::filter::{self, Options};
use super::{NotifyRecord, RecordKind, read_records};
use crate::fdpass;
use crate::payload::Bytes;

const HI: i64 = 1 << 32;

/// One call the child makes, whether it must be notified, and the errno it must end with.
struct Probe {
    name: &'static str,
    nr: i64,
    args: [i64; 6],
    notified: bool,
    errno: i32,
}

fn probe(name: &'static str, nr: i64, args: [i64; 6], notified: bool, errno: i32) -> Probe {
    Probe { name, nr, args, notified, errno }
}

/// In a forked child: `no_new_privs`, the filter `program`, and its listener sent over
/// `sock`; exits 200, 201 or 202 when a step fails. Raw syscalls only.
fn install_and_send(program: &[libc::sock_filter], sock: i32) {
    // SAFETY: prctl, close and _exit with integers, in the child of a fork.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::_exit(200);
        }
        let Ok(listener) = filter::install(program) else { libc::_exit(201) };
        if fdpass::send_fd(sock, listener).is_err() {
            libc::_exit(202);
        }
        libc::close(listener);
    }
}

/// Installs the filter for `opts` in a forked child that makes `probes`; the test process
/// answers every notification with CONTINUE (EPERM for `socket`), and returns a description
/// of every difference from what the probes expect.
fn run_probes(opts: Options, probes: &[Probe]) -> Vec<String> {
    let program = filter::program(opts, true);
    let second = filter::program(opts, true);
    let mut pair = [0; 2];
    let mut report = [0; 2];
    // SAFETY: valid two-int arrays.
    unsafe {
        assert_eq!(libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(report.as_mut_ptr()), 0);
    }
    // SAFETY: the child makes raw syscalls only (everything was prepared before the fork)
    // and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::close(pair[0]);
            libc::close(report[0]);
            install_and_send(&program, pair[1]);
            // Only one listener per filter chain: a second one is EBUSY.
            let busy = match filter::install(&second) {
                Err(libc::EBUSY) => 0,
                _ => 1,
            };
            libc::write(report[1], (&raw const busy).cast(), 4);
            for p in probes {
                let a = p.args;
                let rc = libc::syscall(p.nr, a[0], a[1], a[2], a[3], a[4], a[5]);
                let errno = if rc < 0 { *libc::__errno_location() } else { 0 };
                libc::write(report[1], (&raw const errno).cast(), 4);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing the child's ends in the parent.
    unsafe {
        libc::close(pair[1]);
        libc::close(report[1]);
    }
    let listener = fdpass::recv_fd(pair[0]).unwrap().expect("the child sends its listener");
    let notified = serve_plainly(&listener);
    let mut status = 0;
    // SAFETY: waiting for our child; reading its report into a valid buffer.
    let errnos: Vec<i32> = unsafe {
        libc::waitpid(pid, &mut status, 0);
        let mut buf = [0u8; 4 * 64];
        let n = libc::read(report[0], buf.as_mut_ptr().cast(), buf.len());
        libc::close(report[0]);
        libc::close(pair[0]);
        buf[..usize::try_from(n).unwrap()]
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child: {status:#x}");
    let mut diffs = Vec::new();
    if errnos.first() != Some(&0) {
        diffs.push("a second NEW_LISTENER filter was not refused with EBUSY".to_owned());
    }
    let mut expected_notified = Vec::new();
    for (i, p) in probes.iter().enumerate() {
        if errnos.get(i + 1) != Some(&p.errno) {
            diffs.push(format!("{}: errno {:?}, expected {}", p.name, errnos.get(i + 1), p.errno));
        }
        if p.notified {
            expected_notified.push(p.nr);
        }
    }
    if notified != expected_notified {
        diffs.push(format!("notified {notified:?}, expected {expected_notified:?}"));
    }
    diffs
}

/// Answers every notification until the child is gone; returns the notified numbers.
fn serve_plainly(listener: &OwnedFd) -> Vec<i64> {
    let mut out = Vec::new();
    loop {
        let mut pfd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        assert!(unsafe { libc::poll(&raw mut pfd, 1, 10_000) } > 0, "the child hangs");
        if pfd.revents & libc::POLLIN == 0 {
            return out;
        }
        // SAFETY: plain-data kernel structs, zeroed and filled by the ioctls.
        unsafe {
            let mut req: libc::seccomp_notif = std::mem::zeroed();
            if libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &raw mut req) != 0
            {
                continue;
            }
            out.push(i64::from(req.data.nr));
            let mut resp: libc::seccomp_notif_resp = std::mem::zeroed();
            resp.id = req.id;
            if i64::from(req.data.nr) == libc::SYS_socket {
                resp.error = -libc::EPERM;
            } else {
                resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
            }
            libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &raw mut resp);
        }
    }
}

/// A scratch directory and NUL-terminated paths in it, leaked so the child can use them.
fn scratch(name: &str) -> (std::path::PathBuf, impl Fn(&str) -> i64) {
    let dir = std::env::temp_dir().join(format!("paddock-notify-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("existing"), "x").unwrap();
    let base = dir.clone();
    let path = move |rel: &str| {
        let c = CString::new(base.join(rel).into_os_string().into_encoded_bytes()).unwrap();
        c.into_raw() as i64
    };
    (dir, path)
}

const FDCWD: i64 = libc::AT_FDCWD as i64;
const RDONLY: i64 = libc::O_RDONLY as i64;
const WRONLY: i64 = libc::O_WRONLY as i64;
const RDWR: i64 = libc::O_RDWR as i64;
const CREAT: i64 = libc::O_CREAT as i64;
const TRUNC: i64 = libc::O_TRUNC as i64;
const CLOEXEC: i64 = libc::O_CLOEXEC as i64;

#[test]
fn write_intent_calls_are_notified_and_reads_are_not() {
    let (dir, p) = scratch("paths");
    let existing = p("existing");
    // struct open_how { flags, mode, resolve }: a read-only open, notified all the same.
    let how = Box::leak(Box::new([0u64; 3])).as_ptr() as i64;
    let probes = vec![
        probe("getpid", libc::SYS_getpid, [0; 6], false, 0),
        probe("openat(RDONLY)", libc::SYS_openat, [FDCWD, existing, RDONLY, 0, 0, 0], false, 0),
        probe(
            "openat(RDONLY|CLOEXEC|1<<32)",
            libc::SYS_openat,
            [FDCWD, existing, RDONLY | CLOEXEC | HI, 0, 0, 0],
            false,
            0,
        ),
        probe(
            "openat(WRONLY|1<<32)",
            libc::SYS_openat,
            [FDCWD, existing, WRONLY | HI, 0, 0, 0],
            true,
            0,
        ),
        probe("openat(RDWR)", libc::SYS_openat, [FDCWD, existing, RDWR, 0, 0, 0], true, 0),
        probe("openat(TRUNC)", libc::SYS_openat, [FDCWD, existing, TRUNC, 0, 0, 0], true, 0),
        probe(
            "openat(CREAT)",
            libc::SYS_openat,
            [FDCWD, p("created"), CREAT | RDONLY, 0o600, 0, 0],
            true,
            0,
        ),
        probe("mkdirat", libc::SYS_mkdirat, [FDCWD, p("d"), 0o700, 0, 0, 0], true, 0),
        probe("renameat2", libc::SYS_renameat2, [FDCWD, p("d"), FDCWD, p("e"), 0, 0], true, 0),
        probe("unlinkat(dir)", libc::SYS_unlinkat, [FDCWD, p("e"), 0x200, 0, 0, 0], true, 0),
        probe("symlinkat", libc::SYS_symlinkat, [p("existing"), FDCWD, p("l"), 0, 0, 0], true, 0),
        probe("fchmodat", libc::SYS_fchmodat, [FDCWD, existing, 0o644, 0, 0, 0], true, 0),
        probe("truncate", libc::SYS_truncate, [existing, 0, 0, 0, 0, 0], true, 0),
        probe("utimensat", libc::SYS_utimensat, [FDCWD, existing, 0, 0, 0, 0], true, 0),
        probe("openat2 (always)", libc::SYS_openat2, [FDCWD, existing, how, 24, 0, 0], true, 0),
        probe("socket(AF_UNIX), not refused", libc::SYS_socket, [1, 1, 0, 0, 0, 0], false, 0),
        probe("connect, not recorded", libc::SYS_connect, [-1, 0, 0, 0, 0, 0], false, libc::EBADF),
    ];
    let diffs = run_probes(
        Options { record_connects: false, refuse_unix_sockets: false, unix_grants: false },
        &probes,
    );
    let _ = std::fs::remove_dir_all(dir);
    assert!(diffs.is_empty(), "{diffs:#?}");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn legacy_calls_are_notified_on_x86_64() {
    let (dir, p) = scratch("legacy");
    let existing = p("existing");
    let probes = vec![
        probe("open(RDONLY)", libc::SYS_open, [existing, RDONLY, 0, 0, 0, 0], false, 0),
        probe("open(RDONLY|1<<32)", libc::SYS_open, [existing, RDONLY | HI, 0, 0, 0, 0], false, 0),
        probe("open(WRONLY)", libc::SYS_open, [existing, WRONLY, 0, 0, 0, 0], true, 0),
        probe("creat", libc::SYS_creat, [p("c"), 0o600, 0, 0, 0, 0], true, 0),
        probe("mkdir", libc::SYS_mkdir, [p("m"), 0o700, 0, 0, 0, 0], true, 0),
        probe("rename", libc::SYS_rename, [p("m"), p("n"), 0, 0, 0, 0], true, 0),
        probe("rmdir", libc::SYS_rmdir, [p("n"), 0, 0, 0, 0, 0], true, 0),
        probe("link", libc::SYS_link, [existing, p("hard"), 0, 0, 0, 0], true, 0),
        probe("unlink", libc::SYS_unlink, [p("hard"), 0, 0, 0, 0, 0], true, 0),
        probe("chmod", libc::SYS_chmod, [existing, 0o600, 0, 0, 0, 0], true, 0),
        probe("getppid", libc::SYS_getppid, [0; 6], false, 0),
    ];
    let diffs = run_probes(
        Options { record_connects: false, refuse_unix_sockets: false, unix_grants: false },
        &probes,
    );
    let _ = std::fs::remove_dir_all(dir);
    assert!(diffs.is_empty(), "{diffs:#?}");
}

#[test]
fn unix_sockets_and_connects_are_notified_when_asked() {
    // A sockaddr_in for 10.1.2.3:443, leaked for the child.
    let addr = Box::leak(Box::new(libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 443u16.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes([10, 1, 2, 3]) },
        sin_zero: [0; 8],
    }));
    let addr = (&raw const *addr) as i64;
    let probes = vec![
        probe("socket(AF_INET)", libc::SYS_socket, [2, 1, 0, 0, 0, 0], false, 0),
        probe("socket(AF_UNIX)", libc::SYS_socket, [1, 1, 0, 0, 0, 0], true, libc::EPERM),
        probe(
            "socket(AF_UNIX|1<<32)",
            libc::SYS_socket,
            [1 | HI, 1, 0, 0, 0, 0],
            true,
            libc::EPERM,
        ),
        probe("socket(AF_NETLINK)", libc::SYS_socket, [16, 2, 0, 0, 0, 0], false, 0),
        // On a bad descriptor: notified, then the kernel answers EBADF.
        probe("connect", libc::SYS_connect, [-1, addr, 16, 0, 0, 0], true, libc::EBADF),
    ];
    let diffs = run_probes(
        Options { record_connects: true, refuse_unix_sockets: true, unix_grants: false },
        &probes,
    );
    assert!(diffs.is_empty(), "{diffs:#?}");
}

#[test]
fn the_program_is_well_formed() {
    for (record_connects, refuse_unix_sockets) in [(false, false), (true, true)] {
        let prog = filter::program(
            Options { record_connects, refuse_unix_sockets, unix_grants: false },
            true,
        );
        assert!(prog.len() < 200, "{} instructions", prog.len());
        for (i, ins) in prog.iter().enumerate() {
            let class = ins.code & 0x07;
            if class == 0x05 {
                let furthest = i + 1 + usize::from(ins.jt.max(ins.jf));
                assert!(furthest < prog.len(), "jump at {i} leaves the program");
            }
        }
        let last = prog.last().unwrap();
        assert_eq!((last.code, last.k), (0x06, libc::SECCOMP_RET_ALLOW), "default: allow");
    }
}

/// A filesystem described by tables: `(path, type)` and `(mount point, read-only, fuse)`.
struct Fake {
    files: Vec<(&'static str, u32)>,
    mounts: Vec<(&'static str, bool, bool)>,
}

impl View for Fake {
    fn file_type(&self, path: &[u8], _follow: bool) -> Result<u32, i32> {
        assert!(!self.under_fuse(path), "touched a path under FUSE: {path:?}");
        self.files.iter().find(|(p, _)| p.as_bytes() == path).map(|f| f.1).ok_or(libc::ENOENT)
    }
    fn mount(&self, path: &[u8]) -> Result<MountFacts, i32> {
        assert!(!self.under_fuse(path), "touched a path under FUSE: {path:?}");
        let dir = path == b"/" || self.files.iter().any(|(p, _)| p.as_bytes() == path);
        if !dir {
            return Err(libc::ENOENT);
        }
        self.mounts
            .iter()
            .filter(|(m, ..)| {
                let m = m.as_bytes();
                m == b"/" || path == m || path.starts_with(&[m, b"/"].concat())
            })
            .max_by_key(|(m, ..)| m.len())
            .map(|&(_, read_only, fuse)| MountFacts { read_only, fuse })
            .ok_or(libc::ENOENT)
    }
    fn under_fuse(&self, path: &[u8]) -> bool {
        self.mounts.iter().any(|(m, _, fuse)| *fuse && path.starts_with(m.as_bytes()))
    }
    fn mount_point(&self, path: &[u8]) -> bool {
        self.mounts.iter().any(|(m, ..)| m.as_bytes() == path)
    }
    fn same_mount(&self, a: &[u8], b: &[u8]) -> bool {
        let of = |p: &[u8]| {
            self.mounts
                .iter()
                .filter(|(m, ..)| {
                    let m = m.as_bytes();
                    m == b"/" || p == m || p.starts_with(&[m, b"/"].concat())
                })
                .max_by_key(|(m, ..)| m.len())
                .map(|(m, ..)| *m)
        };
        of(a) == of(b)
    }
}

fn fake() -> Fake {
    let (d, f, c) = (libc::S_IFDIR, libc::S_IFREG, libc::S_IFCHR);
    Fake {
        files: vec![
            ("/etc", d),
            ("/etc/passwd", f),
            ("/proj", d),
            ("/proj/src", d),
            ("/proj/a.txt", f),
            ("/proj/.git", d),
            ("/proj/.git/config", f),
            ("/dev", d),
            ("/dev/null", c),
            ("/home", d),
            ("/home/.ssh", d),
            ("/proj/config", d),
            ("/proj/config/secrets.json", f),
            ("/proj/secrets", d),
        ],
        mounts: vec![
            ("/", true, false),
            ("/proj", false, false),
            ("/proj/.git", false, false),
            ("/proj/.git/config", true, false),
            ("/dev", true, false),
            ("/home", false, true),
            // A pinned directory, a file anchor (the masked file) and an observed anchor.
            ("/proj/config", false, false),
            ("/proj/config/secrets.json", true, false),
            ("/proj/secrets", false, true),
        ],
    }
}

/// A predicted (path, errno), or none.
type Expected = Option<(&'static [u8], &'static str)>;

#[test]
fn predictions_follow_the_kernel_order_of_checks() {
    let v = fake();
    let w = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    let some = |s: &'static str| Some((s.as_bytes(), "EROFS"));
    let xdev = |s: &'static str| Some((s.as_bytes(), "EXDEV"));
    let cases: Vec<(Op<'_>, Expected)> = vec![
        (Op::Open(b"/etc/passwd", libc::O_WRONLY), some("/etc/passwd")),
        (Op::Open(b"/etc/new", w), some("/etc/new")),
        (Op::Open(b"/etc/new", libc::O_WRONLY), None), // ENOENT, not a denial
        (Op::Open(b"/etc/passwd", libc::O_CREAT), None), // a read-only open of it
        (Op::Open(b"/etc/passwd", libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY), None),
        (Op::Open(b"/etc", libc::O_WRONLY), None), // EISDIR
        (Op::Open(b"/etc/passwd", libc::O_PATH | libc::O_WRONLY), None),
        (Op::Open(b"/dev/null", libc::O_WRONLY), None), // a device: no write to the mount
        (Op::Open(b"/proj/a.txt", w), None),
        (Op::Open(b"/proj/b.txt", w), None),
        (Op::Open(b"/proj/.git/config", libc::O_RDWR), some("/proj/.git/config")),
        (Op::Open(b"/etc", libc::O_TMPFILE | libc::O_WRONLY), some("/etc")),
        (Op::Open(b"/home/.ssh/x", w), None), // the observer filesystem records it
        (Op::Create(b"/home/newdir"), None),
        (Op::Modify(b"/home/.ssh", true), None),
        (Op::Two { old: b"/home/x", new: b"/etc/x", link: false }, None),
        (Op::Create(b"/etc"), None), // EEXIST first
        (Op::Create(b"/etc/d"), some("/etc/d")),
        (Op::Create(b"/proj/d"), None),
        (Op::Create(b"/nowhere/d"), None), // ENOENT
        (Op::Remove(b"/etc/passwd"), some("/etc/passwd")),
        (Op::Remove(b"/etc/missing"), some("/etc/missing")), // EROFS before the lookup
        (Op::Remove(b"/proj/a.txt"), None),
        (Op::Two { old: b"/proj/a.txt", new: b"/etc/a", link: false }, xdev("/etc/a")),
        (Op::Two { old: b"/etc/passwd", new: b"/etc/b", link: false }, some("/etc/passwd")),
        (Op::Two { old: b"/etc/passwd", new: b"/proj/p", link: false }, xdev("/etc/passwd")),
        (Op::Two { old: b"/etc/passwd", new: b"/proj/p", link: true }, xdev("/etc/passwd")),
        (Op::Two { old: b"/proj/a.txt", new: b"/proj/b", link: false }, None),
        (Op::Two { old: b"/proj/a.txt", new: b"/etc/passwd", link: true }, None), // EEXIST
        (Op::Two { old: b"/proj/a.txt", new: b"/etc/l", link: true }, some("/etc/l")),
        (Op::Modify(b"/etc/passwd", true), some("/etc/passwd")),
        (Op::Modify(b"/proj/a.txt", true), None),
        (Op::Modify(b"/proj/.git/config", true), some("/proj/.git/config")),
        (Op::Modify(b"/etc/missing", true), None),
    ];
    for (op, expected) in cases {
        let got = classify::predict(&v, op).map(|d| (d.path, d.errno));
        assert_eq!(got, expected, "{op:?}");
    }
}

#[test]
fn mount_points_cannot_be_renamed_removed_or_linked_away() {
    let v = fake();
    let busy = |s: &'static str| Some((s.as_bytes(), "EBUSY"));
    let xdev = |s: &'static str| Some((s.as_bytes(), "EXDEV"));
    let two = |old: &'static str, new: &'static str, link| Op::Two {
        old: old.as_bytes(),
        new: new.as_bytes(),
        link,
    };
    let cases: Vec<(Op<'_>, Expected)> = vec![
        // A pinned directory, renamed, exchanged (the same call shape) or removed.
        (two("/proj/config", "/proj/config-moved", false), busy("/proj/config")),
        (two("/proj/src", "/proj/config", false), busy("/proj/config")),
        (Op::Remove(b"/proj/config"), busy("/proj/config")),
        // Across two writable mounts, "same mount" is checked first.
        (two("/proj/config", "/proj/.git/x", false), xdev("/proj/config")),
        // A file anchor (the masked file bound over it).
        (
            two("/proj/config/secrets.json", "/proj/config/s", false),
            busy("/proj/config/secrets.json"),
        ),
        (Op::Remove(b"/proj/config/secrets.json"), busy("/proj/config/secrets.json")),
        (two("/proj/config/secrets.json", "/proj/l", true), xdev("/proj/config/secrets.json")),
        (two("/proj/config/secrets.json", "/proj/a.txt", true), None), // EEXIST
        // The observer's anchor itself, without touching it.
        (two("/proj/secrets", "/proj/s2", false), busy("/proj/secrets")),
        (Op::Remove(b"/proj/secrets"), busy("/proj/secrets")),
        // Inside the observer: its own records.
        (two("/proj/secrets/a", "/proj/secrets/b", false), None),
        // A missing source is ENOENT before the target's EBUSY; plain files are not held.
        (two("/proj/missing", "/proj/config", false), None),
        (two("/proj/a.txt", "/proj/b.txt", false), None),
        (Op::Remove(b"/proj/a.txt"), None),
        // A protected file in a pinned directory; a read-only parent is EROFS first.
        (Op::Remove(b"/proj/.git/config"), busy("/proj/.git/config")),
        (Op::Remove(b"/etc/passwd"), Some((b"/etc/passwd".as_slice(), "EROFS"))),
    ];
    for (op, expected) in cases {
        let got = classify::predict(&v, op).map(|d| (d.path, d.errno));
        assert_eq!(got, expected, "{op:?}");
    }
}

#[test]
fn relative_paths_and_the_callers_own_names_resolve() {
    let abs = |base: Option<&str>, path: &str| {
        classify::absolute(42, base.map(str::as_bytes), path.as_bytes())
            .map(|p| String::from_utf8(p).unwrap())
    };
    assert_eq!(abs(None, "/etc//passwd/"), Some("/etc/passwd".into()));
    assert_eq!(abs(Some("/proj"), "./src/../x"), Some("/proj/src/../x".into()));
    assert_eq!(abs(Some("/proj"), ""), Some("/proj".into()), "AT_EMPTY_PATH: the dirfd");
    assert_eq!(abs(None, "rel"), None, "no base: nothing to resolve against");
    assert_eq!(abs(Some("pipe:[123]"), "x"), None);
    assert_eq!(abs(None, "/proc/self/fd/3"), Some("/proc/42/fd/3".into()));
    assert_eq!(abs(None, "/proc/thread-self"), Some("/proc/42".into()));
    assert_eq!(abs(None, "/dev/stdout"), Some("/proc/42/fd/1".into()));
    assert_eq!(abs(None, "/dev/fd/5"), Some("/proc/42/fd/5".into()));
    assert_eq!(abs(None, "/proc/selfish"), Some("/proc/selfish".into()));
    assert_eq!(classify::parent(b"/a/b"), b"/a");
    assert_eq!(classify::parent(b"/a"), b"/");
}

#[test]
fn connects_off_loopback_are_targets() {
    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut b = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        b.extend(port.to_be_bytes());
        b.extend(ip);
        b.extend([0; 8]);
        b
    }
    fn v6(ip: std::net::Ipv6Addr, port: u16) -> Vec<u8> {
        let mut b = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        b.extend(port.to_be_bytes());
        b.extend([0; 4]);
        b.extend(ip.octets());
        b.extend([0; 4]);
        b
    }
    assert_eq!(classify::connect_target(&v4([10, 1, 2, 3], 443)), Some("10.1.2.3:443".into()));
    assert_eq!(classify::connect_target(&v4([127, 0, 0, 53], 53)), None);
    assert_eq!(classify::connect_target(&v4([0, 0, 0, 0], 80)), None);
    let ip: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert_eq!(classify::connect_target(&v6(ip, 8443)), Some("[2001:db8::1]:8443".into()));
    assert_eq!(classify::connect_target(&v6(std::net::Ipv6Addr::LOCALHOST, 1)), None);
    let mapped: std::net::Ipv6Addr = "::ffff:127.0.0.1".parse().unwrap();
    assert_eq!(classify::connect_target(&v6(mapped, 1)), None);
    let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    unix.extend(b"/run/x.sock\0");
    assert_eq!(classify::connect_target(&unix), None);
    assert_eq!(classify::connect_target(&[2]), None, "short address");
}

#[test]
fn fuse_mount_points_come_from_mountinfo() {
    let table = b"22 1 0:21 / / ro,relatime - ext4 /dev/sda rw\n\
        30 22 0:40 / /home/a\\040b rw,nosuid - fuse.paddock-observe paddock rw\n\
        31 22 0:41 / /tmp rw - tmpfs tmpfs rw\n";
    assert_eq!(classify::fuse_mount_points(table), vec![b"/home/a b".to_vec()]);
}

#[test]
fn records_round_trip_and_malformed_lines_are_counted() {
    let rec = NotifyRecord {
        pid: 7,
        kind: RecordKind::UnixSocket,
        syscall: "socket".into(),
        path: None,
        target: None,
        errno: "EPERM".into(),
    };
    let write = NotifyRecord {
        pid: 8,
        kind: RecordKind::Write,
        syscall: "openat".into(),
        path: Some(Bytes(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"/etc/\xff").to_owned(),
        )),
        target: None,
        errno: "EROFS".into(),
    };
    let mut stream = rec.to_line();
    stream.extend(b"{\"pid\": \"x\"}\nnot json\n\n");
    stream.extend(vec![b'a'; super::MAX_LINE + 10]);
    stream.push(b'\n');
    stream.extend(write.to_line());
    stream.extend(b"{\"pid\":1"); // cut off at EOF
    let mut got = Vec::new();
    let malformed = read_records(stream.as_slice(), |r| got.push(r));
    assert_eq!(got, vec![rec.clone(), write]);
    assert_eq!(malformed, 4);
    let line = String::from_utf8(rec.to_line()).unwrap();
    assert_eq!(
        line,
        "{\"pid\":7,\"kind\":\"unix-socket\",\"syscall\":\"socket\",\"path\":null,\"target\":null,\"errno\":\"EPERM\"}\n"
    );
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    super::kernel_version(&release) >= (major, minor)
}

#[test]
fn kernel_versions_parse() {
    assert_eq!(super::kernel_version("6.1.0-18-amd64\n"), (6, 1));
    assert_eq!(super::kernel_version("5.4.0"), (5, 4));
    assert_eq!(super::kernel_version("6.18.44-fc-v669"), (6, 18));
    assert_eq!(super::kernel_version("garbage"), (0, 0));
    assert!(super::kernel_version("5.4.0") < super::MIN_KERNEL);
    assert!(super::kernel_version("5.10.1") >= super::MIN_KERNEL);
}

#[test]
fn the_server_refuses_unix_sockets_records_and_fails_closed_once_stopped() {
    use super::serve::Server;
    use super::unix::Grants;
    let opts = Options { record_connects: true, refuse_unix_sockets: true, unix_grants: false };
    let program = filter::program(opts, true);
    let addr = |ip: [u8; 4]| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: 443u16.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip) },
        sin_zero: [0; 8],
    };
    let (far, near) = (addr([10, 1, 2, 3]), addr([127, 0, 0, 1]));
    let (mut pair, mut report, mut go) = ([0; 2], [0; 2], [0; 2]);
    // SAFETY: valid two-int arrays.
    unsafe {
        assert_eq!(libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, pair.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(report.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(go.as_mut_ptr()), 0);
    }
    // SAFETY: the child makes raw syscalls on data prepared before the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let errno = || *libc::__errno_location();
            let put = |v: i32| libc::write(report[1], (&raw const v).cast(), 4);
            install_and_send(&program, pair[1]);
            let rc = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            put(if rc < 0 { errno() } else { 0 });
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            libc::connect(-1, (&raw const far).cast(), len);
            libc::connect(-1, (&raw const near).cast(), len);
            let mut byte = 0u8;
            libc::read(go[0], (&raw mut byte).cast(), 1); // the server is stopped now
            let rc = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            put(if rc < 0 { errno() } else { 0 });
            libc::_exit(0);
        }
    }
    // SAFETY: closing the child's ends in the parent.
    unsafe {
        libc::close(pair[1]);
        libc::close(report[1]);
        libc::close(go[0]);
    }
    let listener = fdpass::recv_fd(pair[0]).unwrap().expect("the child sends its listener");
    let (records_read, records_write) = std::io::pipe().unwrap();
    let server =
        Server::start(listener, Some(OwnedFd::from(records_write).into()), opts, Grants::default())
            .unwrap();
    let mut first = [0u8; 4];
    // SAFETY: reading into a valid buffer.
    assert_eq!(unsafe { libc::read(report[0], first.as_mut_ptr().cast(), 4) }, 4);
    // The connects come after the first report: wait for them to be answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let stats = loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(std::time::Instant::now() < deadline, "the child's connects were never answered");
        // /proc/PID/wchan-free check: the child blocks in read(go) once both connects ran.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if stat.split(' ').next() == Some(&libc::SYS_read.to_string()) {
            break server.stop(std::time::Duration::from_secs(5)).expect("the server stops");
        }
    };
    // SAFETY: releasing the child, then waiting for it and reading its last report.
    let (status, second) = unsafe {
        libc::write(go[1], [1u8].as_ptr().cast(), 1);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        let mut b = [0u8; 4];
        let n = libc::read(report[0], b.as_mut_ptr().cast(), 4);
        for fd in [pair[0], report[0], go[1]] {
            libc::close(fd);
        }
        (status, (n == 4).then(|| i32::from_ne_bytes(b)))
    };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child: {status:#x}");
    assert_eq!(i32::from_ne_bytes(first), libc::EPERM, "socket(AF_UNIX) is refused");
    assert_eq!(second, Some(libc::ENOSYS), "no listener: notified calls fail (closed)");
    let mut records = Vec::new();
    assert_eq!(read_records(records_read, |r| records.push(r)), 0);
    let child = u32::try_from(pid).unwrap();
    let expected = vec![
        NotifyRecord {
            pid: child,
            kind: RecordKind::UnixSocket,
            syscall: "socket".into(),
            path: None,
            target: None,
            errno: "EPERM".into(),
        },
        NotifyRecord {
            pid: child,
            kind: RecordKind::Network,
            syscall: "connect".into(),
            path: None,
            target: Some("10.1.2.3:443".into()),
            errno: "ENETUNREACH".into(),
        },
    ];
    assert_eq!(records, expected);
    assert_eq!((stats.received, stats.recorded), (3, 2), "{stats:?}");
    assert_eq!(stats.sync_wake_up, kernel_at_least(6, 6), "{stats:?}");
}
