//! Failed calls ("denials"), ready for the policy crate to classify: which task, which call,
//! which paths (each with the dirfd it is relative to), which flags, which errno.
//!
//! Every failed call is reported, whatever its errno: telling a sandbox denial (`EACCES`,
//! `EPERM`, `EROFS`) from an ordinary miss (`ENOENT`) needs the policy, so it is not done here.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::args::{Arg, FdArg};
use crate::event::{Event, EventKind, Record, Return, Syscall};
use crate::pairing::{MAX_PENDING, PidMap};
use crate::syscalls;

/// One failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The line where the failure was printed (for an interrupted call: its `rt_sigreturn`).
    pub line: u64,
    /// The thread id (`None` when the log has no pid column).
    pub pid: Option<u32>,
    /// The syscall's name; borrowed from a static table for the ones the crate knows.
    pub syscall: Cow<'static, str>,
    /// The path arguments in argument order (a unix socket's `sun_path` included).
    pub paths: Vec<PathArg>,
    /// The flags or mode argument as printed (`O_RDONLY|O_CLOEXEC`, `R_OK`).
    pub flags: Option<String>,
    /// The errno name (`ENOENT`); borrowed from a static table for the common ones.
    pub errno: Cow<'static, str>,
    /// strace's text for the errno.
    pub errno_text: Cow<'static, str>,
    /// Whether the start of the call was missing from the log (its paths are then unknown).
    pub incomplete: bool,
}

/// A path argument of a failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathArg {
    /// Which argument it is (`pathname`, `oldpath`, `newpath`, `target`, `sun_path`, ...).
    pub role: &'static str,
    /// The dirfd it is relative to (`AT_FDCWD`, `4`, with its `-y` decoration when printed).
    pub dirfd: Option<FdArg>,
    /// The exact bytes (of a truncated path: exactly those strace printed).
    pub bytes: Vec<u8>,
    /// Whether strace cut the path (`"..."...`).
    pub truncated: bool,
}

impl Denial {
    /// Builds the denial of a failed call with `errno`.
    pub fn from_call(
        event: &Event<'_>,
        call: &Syscall<'_>,
        errno: &str,
        errno_text: &str,
    ) -> Denial {
        let mut d = Denial {
            line: event.line,
            pid: event.pid,
            syscall: Cow::Owned(String::new()),
            paths: Vec::new(),
            flags: None,
            errno: intern(errno, ERRNOS.iter().map(|(name, _)| *name)),
            errno_text: intern(
                errno_text,
                ERRNOS.iter().filter(|(n, _)| *n == errno).map(|(_, t)| *t),
            ),
            incomplete: call.orphan,
        };
        let known = syscalls::lookup(&call.name);
        d.syscall = match known.map(|(name, _)| name).or_else(|| syscalls::static_name(&call.name))
        {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(call.name.to_string()),
        };
        let Some((_, spec)) = known.filter(|_| !call.orphan) else { return d };
        // No path argument of any call is past the sixth: a fixed array spares an allocation.
        let mut args: [Option<Arg<'_>>; 8] = [None; 8];
        for (slot, arg) in args.iter_mut().zip(call.args()) {
            *slot = Some(arg);
        }
        for ps in spec.paths {
            let Some(s) = nth(&args, Some(ps.path)).and_then(|a| a.as_str()) else { continue };
            let dirfd = nth(&args, ps.dirfd).and_then(|a| a.as_fd());
            d.paths.push(PathArg { role: ps.role, dirfd, bytes: s.bytes, truncated: s.truncated });
        }
        if let Some(i) = spec.sockaddr {
            let sun =
                nth(&args, Some(i)).and_then(|a| a.find_field("sun_path")).and_then(|a| a.as_str());
            if let Some(s) = sun {
                d.paths.push(PathArg {
                    role: "sun_path",
                    dirfd: None,
                    bytes: s.bytes,
                    truncated: s.truncated,
                });
            }
        }
        d.flags = spec
            .flags
            .and_then(|i| nth(&args, Some(i)))
            .map(|a| String::from_utf8_lossy(a.without_comment()).into_owned());
        d
    }

    /// Whether any path was cut by strace.
    pub fn truncated(&self) -> bool {
        self.paths.iter().any(|p| p.truncated)
    }

    /// The dirfd of the first path, if it has one.
    pub fn dirfd(&self) -> Option<&FdArg> {
        self.paths.first().and_then(|p| p.dirfd.as_ref())
    }

    /// The one-line JSON view printed by the `denials` example, a contract with tools outside
    /// this repository: `{"pid": N, "syscall": "openat", "paths": ["<hex>", ...],
    /// "truncated": false, "errno": "ENOENT"}` (`pid` is `null` without a pid column).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(96);
        match self.pid {
            Some(pid) => {
                let _ = write!(s, "{{\"pid\": {pid}");
            }
            None => s.push_str("{\"pid\": null"),
        }
        // Syscall and errno names are C identifiers: nothing to escape.
        let _ = write!(s, ", \"syscall\": \"{}\", \"paths\": [", self.syscall);
        for (i, p) in self.paths.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push('"');
            for b in &p.bytes {
                let _ = write!(s, "{b:02x}");
            }
            s.push('"');
        }
        let _ =
            write!(s, "], \"truncated\": {}, \"errno\": \"{}\"}}", self.truncated(), self.errno);
        s
    }
}

/// Errno names and strace's texts for them (glibc's `strerror`), so that the denials of a
/// log share them instead of allocating each.
const ERRNOS: &[(&str, &str)] = &[
    ("ENOENT", "No such file or directory"),
    ("EACCES", "Permission denied"),
    ("EPERM", "Operation not permitted"),
    ("EROFS", "Read-only file system"),
    ("EEXIST", "File exists"),
    ("ENOTDIR", "Not a directory"),
    ("EISDIR", "Is a directory"),
    ("EINVAL", "Invalid argument"),
    ("EINTR", "Interrupted system call"),
    ("EAGAIN", "Resource temporarily unavailable"),
    ("EBADF", "Bad file descriptor"),
    ("ECHILD", "No child processes"),
    ("ELOOP", "Too many levels of symbolic links"),
    ("ENAMETOOLONG", "File name too long"),
    ("ENOTEMPTY", "Directory not empty"),
    ("EXDEV", "Invalid cross-device link"),
    ("ETXTBSY", "Text file busy"),
    ("ENOEXEC", "Exec format error"),
    ("ENOSYS", "Function not implemented"),
    ("ENODATA", "No data available"),
    ("ENOTTY", "Inappropriate ioctl for device"),
    ("ESPIPE", "Illegal seek"),
    ("EPIPE", "Broken pipe"),
    ("ENOSPC", "No space left on device"),
    ("EBUSY", "Device or resource busy"),
    ("ENXIO", "No such device or address"),
    ("ENODEV", "No such device"),
    ("ESRCH", "No such process"),
    ("ECONNREFUSED", "Connection refused"),
    ("ENETUNREACH", "Network is unreachable"),
    ("EHOSTUNREACH", "No route to host"),
    ("ENOTCONN", "Transport endpoint is not connected"),
    ("EADDRINUSE", "Address already in use"),
    ("EADDRNOTAVAIL", "Cannot assign requested address"),
    ("EAFNOSUPPORT", "Address family not supported by protocol"),
    ("EPROTONOSUPPORT", "Protocol not supported"),
    ("EOPNOTSUPP", "Operation not supported"),
    ("ETIMEDOUT", "Connection timed out"),
    ("ECONNRESET", "Connection reset by peer"),
    ("EMFILE", "Too many open files"),
    ("ENOMEM", "Cannot allocate memory"),
    ("EFAULT", "Bad address"),
    ("EDQUOT", "Disk quota exceeded"),
];

/// `s` as a static string when `candidates` has it, else owned.
fn intern(s: &str, mut candidates: impl Iterator<Item = &'static str>) -> Cow<'static, str> {
    match candidates.find(|c| *c == s) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(s.to_owned()),
    }
}

/// The argument at `index`, if there is one.
fn nth<'a>(args: &[Option<Arg<'a>>], index: Option<usize>) -> Option<Arg<'a>> {
    args.get(index?).copied().flatten()
}

/// Turns events into denials, one event at a time (a push API for callers that parse a live
/// pipe).
///
/// It holds one thing across events: per thread, a call interrupted by a signal
/// (`= ? ERESTARTSYS`). If the thread's next `rt_sigreturn` fails with `EINTR`, that is the
/// interrupted call failing, and it is reported as such, in place of the `rt_sigreturn`.
#[derive(Debug, Default)]
pub struct DenialTracker {
    interrupted: PidMap<Denial>,
}

impl DenialTracker {
    /// A tracker with nothing pending.
    pub fn new() -> Self {
        DenialTracker::default()
    }

    /// Looks at one event; returns the denial it completes, if any.
    pub fn observe(&mut self, event: &Event<'_>) -> Option<Denial> {
        let call = match &event.kind {
            EventKind::Syscall(call) => call,
            EventKind::Exited { .. } | EventKind::Killed { .. } => {
                self.interrupted.remove(&event.pid);
                return None;
            }
            _ => return None,
        };
        let is_sigreturn = matches!(&*call.name, "rt_sigreturn" | "sigreturn");
        match &call.ret {
            Return::Error { errno, text } => {
                if is_sigreturn
                    && errno == "EINTR"
                    && let Some(mut d) = self.interrupted.remove(&event.pid)
                {
                    d.line = event.line;
                    return Some(d);
                }
                Some(Denial::from_call(event, call, errno, text))
            }
            Return::Restart { .. } => {
                if self.interrupted.len() < MAX_PENDING || self.interrupted.contains_key(&event.pid)
                {
                    let d = Denial::from_call(event, call, "EINTR", "Interrupted system call");
                    self.interrupted.insert(event.pid, d);
                }
                None
            }
            _ => {
                if is_sigreturn || call.name == "restart_syscall" {
                    self.interrupted.remove(&event.pid);
                }
                None
            }
        }
    }
}

/// The denials of a stream of records, in order of completion; diagnostics are skipped (keep
/// them by driving a [`DenialTracker`] yourself).
pub fn denials<'a, I>(records: I) -> Denials<I::IntoIter>
where
    I: IntoIterator<Item = Record<'a>>,
{
    Denials { records: records.into_iter(), tracker: DenialTracker::new() }
}

/// The iterator returned by [`denials`].
#[derive(Debug)]
pub struct Denials<I> {
    records: I,
    tracker: DenialTracker,
}

impl<'a, I: Iterator<Item = Record<'a>>> Iterator for Denials<I> {
    type Item = Denial;

    fn next(&mut self) -> Option<Denial> {
        for record in self.records.by_ref() {
            if let Record::Event(event) = record
                && let Some(d) = self.tracker.observe(&event)
            {
                return Some(d);
            }
        }
        None
    }
}
