//! From strace events to [`Violation`]s: which failed calls were the sandbox saying no.
//!
//! - A **read denial** is `ENOENT`/`EACCES` on a path under a read-deny anchor that the
//!   policy does not make visible again (`anchor_hiding`), or a successful open of a hidden
//!   file (the sandbox shows it empty; the violation has no errno). A task's own missing
//!   files elsewhere are not violations.
//! - A **write denial** is `EROFS`/`EACCES`/`EPERM` on a write-intent call (an open for
//!   writing, creating or truncating, `mkdir`, `unlink`, `rename`, `link`, `symlink`,
//!   `truncate`, the `chmod`/`chown` family, `mknod`) on a path the policy does not make
//!   writable; or `EBUSY`/`EXDEV` on a rename, removal or hard link of a path the walls
//!   hold in place (a pinned directory, a deny anchor, a protected path: mount points).
//! - A **unix-socket denial** is `EPERM` from a `socket(AF_UNIX, ...)` or
//!   `socketpair(AF_UNIX, ...)` that the seccomp filter refuses under this policy (asked of
//!   the filter's own rules, [`crate::seccomp_query`], never restated here).
//! - A **network denial** is a `connect` to an internet address that failed because the
//!   network is not granted (`ENETUNREACH`, `EHOSTUNREACH`, `EACCES`, `EPERM`).
//!
//! Relative paths resolve against the dirfd's `-y` decoration (`AT_FDCWD</dir>` included),
//! else the calling process's working directory as the trace shows it: `chdir`/`fchdir`
//! move it, `clone`/`fork`/`vfork` hand it to the child. Paths are then canonicalized the
//! way the policy is (through a [`Host`], with a per-directory cache) before the policy is
//! asked.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::seccomp::FilterOptions;
use crate::seccomp_query;
use paddock_policy::{
    AbsPathBuf, FileKind, Host, NetworkPolicy, ResolvedPolicy, Violation, ViolationKind,
};
use paddock_strace_parse::{Arg, CwdChange, Denial, DenialTracker, Event, Fd, PathArg, Syscall};

/// A violation found in the trace, with the path as the task spelled it (made absolute,
/// before links were followed), for `report.linked`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The violation (count 1).
    pub violation: Violation,
    /// The spelled path, for file denials.
    pub spelled: Option<PathBuf>,
}

/// Follows working directories through a trace and classifies its failed calls.
#[derive(Debug)]
pub struct Classifier<H: Host> {
    policy: ResolvedPolicy,
    host: H,
    default_cwd: PathBuf,
    /// Per pid: the raw `AT_FDCWD<...>` text last seen (to skip re-decoding) and the cwd.
    cwds: HashMap<u32, (Vec<u8>, PathBuf)>,
    tracker: DenialTracker,
    /// Canonical forms of directories already looked up.
    canon_dirs: HashMap<PathBuf, PathBuf>,
    /// With a gate: the `execve` argument text that marks the sandbox's setup as done, and
    /// the pids seen before it (bwrap's and the supervisor's own calls are not the task's).
    gate: Option<Gate>,
    /// Hidden files (file deny anchors): the sandbox shows each as an empty file, so an
    /// open of one succeeds. Each with a finder for its name, to skip other lines cheaply.
    file_anchors: Vec<(memchr::memmem::Finder<'static>, PathBuf)>,
    /// The seccomp filter's options under this policy (strace runs without the observers).
    filter: FilterOptions,
}

#[derive(Debug)]
enum Gate {
    /// strace runs bwrap: everything up to the supervisor's `execve` is setup.
    Exec { marker: Vec<u8>, open: bool, setup_pids: std::collections::HashSet<u32> },
    /// strace is attached to the supervisor, whose pid this is once known (0 before):
    /// everything but the supervisor itself is the task.
    Supervisor(std::sync::Arc<std::sync::atomic::AtomicU32>),
    /// strace runs inside the sandbox and its command is the shim: its first successful
    /// `execve` is the shim's, the second the task's; everything from then on is the task.
    Shim { execs: u8 },
}

impl<H: Host> Classifier<H> {
    /// A classifier for `policy`; processes whose cwd the trace has not shown yet are in
    /// `default_cwd` (the task's).
    pub fn new(policy: ResolvedPolicy, host: H, default_cwd: &Path) -> Classifier<H> {
        Classifier {
            filter: seccomp_query::options_for(&policy, false),
            policy,
            host,
            default_cwd: default_cwd.to_path_buf(),
            cwds: HashMap::new(),
            tracker: DenialTracker::new(),
            canon_dirs: HashMap::new(),
            gate: None,
            file_anchors: Vec::new(),
        }
        .with_file_anchors()
    }

    fn with_file_anchors(mut self) -> Classifier<H> {
        for a in &self.policy.read_deny {
            if a.kind == Some(FileKind::File)
                && let Some(name) = a.path.file_name()
            {
                let finder = memchr::memmem::Finder::new(name.as_bytes()).into_owned();
                self.file_anchors.push((finder, a.path.as_path().to_path_buf()));
            }
        }
        self
    }

    /// Ignores every process seen until one successfully executes `program` (the sandbox's
    /// supervisor), and that process too: their calls are the sandbox being set up.
    pub fn gated(mut self, program: &[u8]) -> Classifier<H> {
        let mut marker = Vec::with_capacity(program.len() + 2);
        marker.push(b'"');
        marker.extend_from_slice(program);
        marker.push(b'"');
        self.gate = Some(Gate::Exec { marker, open: false, setup_pids: Default::default() });
        self
    }

    /// Ignores the calls of the supervisor whose pid `supervisor` holds (set before the
    /// trace begins): the tracer is attached to it, and what it forks is the task.
    pub fn gated_on_supervisor(
        mut self,
        supervisor: std::sync::Arc<std::sync::atomic::AtomicU32>,
    ) -> Classifier<H> {
        self.gate = Some(Gate::Supervisor(supervisor));
        self
    }

    /// Ignores everything until the trace's second successful `execve`: strace runs inside
    /// the sandbox, its command is the shim, and the shim executes the task.
    pub fn gated_on_shim(mut self) -> Classifier<H> {
        self.gate = Some(Gate::Shim { execs: 0 });
        self
    }

    /// Whether `event` is the task's (not the sandbox setup's). Call once per event, in
    /// order: it also moves the gate.
    pub fn is_task(&mut self, event: &Event<'_>) -> bool {
        let (marker, open, setup_pids) = match self.gate.as_mut() {
            None => return true,
            Some(Gate::Supervisor(pid)) => {
                let supervisor = pid.load(std::sync::atomic::Ordering::SeqCst);
                return supervisor != 0 && event.pid.is_some_and(|p| p != supervisor);
            }
            Some(Gate::Shim { execs }) if *execs >= 2 => return true,
            Some(Gate::Shim { execs }) => {
                if event.syscall().is_some_and(|call| {
                    call.name == "execve"
                        && matches!(call.ret, paddock_strace_parse::Return::Value(_))
                }) {
                    *execs += 1;
                }
                return false;
            }
            Some(Gate::Exec { marker, open, setup_pids }) => (marker, open, setup_pids),
        };
        let Some(pid) = event.pid else { return *open };
        if *open {
            return !setup_pids.contains(&pid);
        }
        setup_pids.insert(pid);
        if let Some(call) = event.syscall()
            && call.name == "execve"
            && matches!(call.ret, paddock_strace_parse::Return::Value(_))
            && call.args.starts_with(marker.as_slice())
        {
            *open = true;
        }
        false
    }

    /// The policy classified against.
    pub fn policy(&self) -> &ResolvedPolicy {
        &self.policy
    }

    /// Looks at one event; returns the violation it shows, if any.
    pub fn observe(&mut self, event: &Event<'_>) -> Option<Found> {
        if !self.is_task(event) {
            return None;
        }
        self.observe_task(event)
    }

    /// [`Classifier::observe`] for an event already known to be the task's.
    pub fn observe_task(&mut self, event: &Event<'_>) -> Option<Found> {
        if let (Some(pid), Some(call)) = (event.pid, event.syscall()) {
            self.track_cwd(pid, call);
        }
        let denial = self.tracker.observe(event);
        let call = event.syscall()?;
        match denial {
            Some(d) => self.classify(&d, call),
            None => self.hidden_file_opened(event, call),
        }
    }

    /// A successful read of a hidden file (it reads as empty in the sandbox).
    fn hidden_file_opened(&mut self, event: &Event<'_>, call: &Syscall<'_>) -> Option<Found> {
        if self.file_anchors.is_empty()
            || !matches!(&*call.name, "open" | "openat" | "openat2" | "execve")
            || !matches!(call.ret, paddock_strace_parse::Return::Value(_))
            || !self.file_anchors.iter().any(|(f, _)| f.find(&call.args).is_some())
        {
            return None;
        }
        let d = Denial::from_call(event, call, "", "");
        if is_write_intent(&d.syscall, d.flags.as_deref()) {
            return None;
        }
        let (canon, spelled) = self.resolve(d.pid, d.paths.first()?)?;
        self.file_anchors.iter().any(|(_, a)| *a == canon).then(|| Found {
            violation: Violation {
                kind: ViolationKind::Read,
                path: Some(canon),
                target: None,
                syscall: Some(d.syscall.to_string()),
                errno: None,
                count: 1,
            },
            spelled: Some(spelled),
        })
    }

    /// The working directory of `pid` as the trace last showed it.
    pub fn cwd_of(&self, pid: Option<u32>) -> &Path {
        pid.and_then(|p| self.cwds.get(&p)).map_or(self.default_cwd.as_path(), |c| c.1.as_path())
    }

    fn track_cwd(&mut self, pid: u32, call: &Syscall<'_>) {
        let raw: &[u8] = &call.args;
        if raw.starts_with(b"AT_FDCWD<") {
            let first = call.args().next();
            if let Some(first) = first {
                let text = first.raw();
                if self.cwds.get(&pid).is_none_or(|c| c.0 != text)
                    && let Some(dir) = first.as_fd().and_then(|f| f.decoration)
                {
                    self.cwds.insert(pid, (text.to_vec(), path_from(dir)));
                }
            }
        }
        match &*call.name {
            "clone" | "clone3" | "fork" | "vfork" => {
                if let Some(child) = child_pid(call) {
                    let cwd = self.cwd_of(Some(pid)).to_path_buf();
                    self.cwds.insert(child, (Vec::new(), cwd));
                }
            }
            "chdir" | "fchdir" => match call.cwd_change() {
                Some(CwdChange::Path(p)) => {
                    let dir = self.cwd_of(Some(pid)).join(path_from(p.bytes));
                    let dir = AbsPathBuf::new_lexical(&dir).map_or(dir, AbsPathBuf::into_path_buf);
                    self.cwds.insert(pid, (Vec::new(), dir));
                }
                Some(CwdChange::Fd(fd)) => {
                    if let Some(dir) = fd.decoration {
                        self.cwds.insert(pid, (Vec::new(), path_from(dir)));
                    }
                }
                None => {}
            },
            _ => {}
        }
    }

    fn classify(&mut self, d: &Denial, call: &Syscall<'_>) -> Option<Found> {
        let errno = &*d.errno;
        let name = &*d.syscall;
        let found = |kind, path: Option<PathBuf>, target: Option<String>, spelled| Found {
            violation: Violation {
                kind,
                path,
                target,
                syscall: Some(name.to_owned()),
                errno: Some(errno.to_owned()),
                count: 1,
            },
            spelled,
        };
        match name {
            "socket" | "socketpair" => (errno == "EPERM" && unix_socket_refused(self.filter, call))
                .then(|| found(ViolationKind::UnixSocket, None, Some("AF_UNIX".into()), None)),
            "connect" if errno == "EACCES" && unix_path_grants(&self.policy) => {
                // The supervisor refused an ungranted path (`allow.unix-sockets = [paths]`).
                let sockaddr = call.args().nth(1)?;
                if sockaddr.field("sa_family")?.raw() != b"AF_UNIX" {
                    return None;
                }
                let name = sockaddr.field("sun_path")?.as_str()?;
                if name.truncated || name.bytes.first() == Some(&0) {
                    return None;
                }
                let path = self.cwd_of(d.pid).join(path_from(name.bytes));
                let path = AbsPathBuf::new_lexical(&path).map_or(path, AbsPathBuf::into_path_buf);
                Some(found(ViolationKind::UnixSocket, Some(path), None, None))
            }
            "connect" => {
                if matches!(self.policy.network, NetworkPolicy::On)
                    || !matches!(errno, "ENETUNREACH" | "EHOSTUNREACH" | "EACCES" | "EPERM")
                {
                    return None;
                }
                let target = inet_target(&call.args().nth(1)?)?;
                Some(found(ViolationKind::Network, None, Some(target), None))
            }
            "bind" | "clone" | "clone3" | "fork" | "vfork" | "chdir" | "fchdir" => None,
            _ => {
                if d.paths.is_empty() || d.incomplete {
                    return None;
                }
                let pid = d.pid;
                if is_write_intent(name, d.flags.as_deref()) {
                    if matches!(errno, "EBUSY" | "EXDEV") {
                        return self.held_in_place(pid, d).map(|(canon, spelled)| {
                            found(ViolationKind::Write, Some(canon), None, Some(spelled))
                        });
                    }
                    if !matches!(errno, "EROFS" | "EACCES" | "EPERM") {
                        return None;
                    }
                    let candidates: Vec<&PathArg> = match name {
                        "symlink" | "symlinkat" => d.paths.iter().skip(1).collect(),
                        _ => d.paths.iter().collect(),
                    };
                    let mut first = None;
                    for p in candidates {
                        let spelled = self.absolute(pid, p)?;
                        let canon = self.canonical(&spelled);
                        if !self.writable(&canon) && !sandbox_owned(&canon) {
                            first = Some((canon, spelled));
                            break;
                        }
                    }
                    let (canon, spelled) = first?;
                    Some(found(ViolationKind::Write, Some(canon), None, Some(spelled)))
                } else {
                    if !matches!(errno, "ENOENT" | "EACCES") {
                        return None;
                    }
                    let p = d.paths.first()?;
                    let spelled = self.absolute(pid, p)?;
                    if self.policy.read_deny.is_empty() {
                        return None;
                    }
                    let canon = self.canonical(&spelled);
                    let abs = AbsPathBuf::new_lexical(&canon)?;
                    self.policy.anchor_hiding(&abs)?;
                    Some(found(ViolationKind::Read, Some(canon), None, Some(spelled)))
                }
            }
        }
    }

    /// A path argument of `pid` made absolute (as spelled) and canonical: `(canonical,
    /// spelled)`. `None` when it cannot be placed (a truncated path, an undecorated dirfd).
    pub fn resolve(&mut self, pid: Option<u32>, p: &PathArg) -> Option<(PathBuf, PathBuf)> {
        let spelled = self.absolute(pid, p)?;
        let canon = self.canonical(&spelled);
        Some((canon, spelled))
    }

    /// For a rename, removal or link refused with `EBUSY` or `EXDEV`: the first of its paths
    /// that the walls hold in place (a pinned directory, a deny anchor, a protected path or
    /// a grant: a mount point inside the sandbox), `(canonical, spelled)`.
    fn held_in_place(&mut self, pid: Option<u32>, d: &Denial) -> Option<(PathBuf, PathBuf)> {
        if !matches!(
            &*d.syscall,
            "rename"
                | "renameat"
                | "renameat2"
                | "unlink"
                | "unlinkat"
                | "rmdir"
                | "link"
                | "linkat"
        ) {
            return None;
        }
        // A link's new name is created, never held; only what it links is.
        let take = if d.syscall.starts_with("link") { 1 } else { d.paths.len() };
        for p in d.paths.iter().take(take) {
            let spelled = self.absolute(pid, p)?;
            // These calls act on the name itself: a protected link is held, not its target.
            let canon = self.canonical_parent(&spelled);
            let Some(abs) = AbsPathBuf::new_lexical(&canon) else { continue };
            if held(&self.policy, &abs) {
                return Some((canon, spelled));
            }
        }
        None
    }

    fn writable(&self, canon: &Path) -> bool {
        let Some(abs) = AbsPathBuf::new_lexical(canon) else { return false };
        self.private_tmp(canon) || self.policy.is_writable(&abs)
    }

    /// Whether `canon` is in the task's private `/tmp` (not the project, if that is there).
    pub fn private_tmp(&self, canon: &Path) -> bool {
        self.policy.private_tmp
            && canon.starts_with("/tmp")
            && !canon.starts_with(self.policy.project_dir.as_path())
    }

    /// The path made absolute against its dirfd or the process's cwd, folded lexically.
    fn absolute(&self, pid: Option<u32>, p: &PathArg) -> Option<PathBuf> {
        let rel = Path::new(OsStr::from_bytes(&p.bytes));
        if p.truncated {
            return None;
        }
        let joined = if rel.is_absolute() {
            rel.to_path_buf()
        } else {
            let base = match &p.dirfd {
                Some(fd) => match (fd.fd, &fd.decoration) {
                    (_, Some(dir)) if dir.first() == Some(&b'/') => {
                        Path::new(OsStr::from_bytes(dir)).to_path_buf()
                    }
                    (Fd::AtFdcwd, _) => self.cwd_of(pid).to_path_buf(),
                    _ => return None,
                },
                None => self.cwd_of(pid).to_path_buf(),
            };
            base.join(rel)
        };
        AbsPathBuf::new_lexical(&joined).map(AbsPathBuf::into_path_buf)
    }

    /// Canonical the way the policy is: the parent directory through the host (cached),
    /// the last component followed only when it is a link.
    fn canonical(&mut self, path: &Path) -> PathBuf {
        let joined = self.canonical_parent(path);
        match self.host.kind(&joined) {
            Ok(Some(FileKind::Symlink)) => paddock_policy::canonicalize(&self.host, &joined)
                .map_or(joined, |(p, _)| p.into_path_buf()),
            _ => joined,
        }
    }

    /// The parent directory canonical through the host (cached), the last component as it
    /// is: what a call that does not follow a final link (a removal, a rename) acts on.
    fn canonical_parent(&mut self, path: &Path) -> PathBuf {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return path.to_path_buf();
        };
        let dir = match self.canon_dirs.get(parent) {
            Some(d) => d.clone(),
            None => {
                let d = paddock_policy::canonicalize(&self.host, parent)
                    .map_or_else(|_| parent.to_path_buf(), |(p, _)| p.into_path_buf());
                if self.canon_dirs.len() > 4096 {
                    self.canon_dirs.clear();
                }
                self.canon_dirs.insert(parent.to_path_buf(), d.clone());
                d
            }
        };
        dir.join(name)
    }
}

/// Whether the walls make `path` a mount point, which cannot be renamed or removed: a pinned
/// directory, a deny anchor, an existing protected path, a grant or an exception.
fn held(policy: &ResolvedPolicy, path: &AbsPathBuf) -> bool {
    policy.pinned.contains(path)
        || policy
            .read_deny
            .iter()
            .any(|a| &a.path == path || a.exceptions.iter().any(|e| &e.path == path))
        || policy.write.iter().any(|g| &g.path == path)
        || policy.protected.iter().any(|p| {
            &p.path == path
                || matches!(&p.state, paddock_policy::ProtectedState::Missing { first_missing } if first_missing == path)
        })
}

/// Paths the sandbox itself provides (not the policy's to grant): `/proc`, `/sys`, `/dev`.
pub fn sandbox_owned(path: &Path) -> bool {
    ["/proc", "/sys", "/dev"].iter().any(|p| path.starts_with(p))
}

/// Whether a call with these flags means to create, change or remove.
pub fn is_write_intent(syscall: &str, flags: Option<&str>) -> bool {
    match syscall {
        "open" | "openat" | "openat2" => flags.is_some_and(|f| {
            ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_TMPFILE"].iter().any(|w| f.contains(w))
        }),
        "creat" | "mkdir" | "mkdirat" | "unlink" | "unlinkat" | "rmdir" | "rename" | "renameat"
        | "renameat2" | "link" | "linkat" | "symlink" | "symlinkat" | "truncate" | "truncate64"
        | "chmod" | "fchmodat" | "fchmodat2" | "chown" | "lchown" | "fchownat" | "mknod"
        | "mknodat" | "utime" | "utimes" | "utimensat" | "setxattr" | "lsetxattr"
        | "removexattr" | "lremovexattr" => true,
        _ => false,
    }
}

fn path_from(bytes: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

/// The new process's pid as the runner sees it: strace prints the tracee's view and, in
/// another pid namespace, `N /* M in strace's PID NS */`.
fn child_pid(call: &Syscall<'_>) -> Option<u32> {
    let paddock_strace_parse::Return::Value(raw) = &call.ret else { return None };
    let text = std::str::from_utf8(raw).ok()?;
    if let Some(i) = text.find("/* ") {
        let rest = &text[i + 3..];
        if rest.contains("in strace's PID NS")
            && let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok())
        {
            return Some(n);
        }
    }
    call.ret.value().and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0)
}

/// `ip:port` of an `AF_INET`/`AF_INET6` sockaddr as strace prints it.
pub fn inet_target(sockaddr: &Arg<'_>) -> Option<String> {
    let family = sockaddr.field("sa_family")?;
    let port_of = |a: Arg<'_>| -> Option<u16> {
        let t = std::str::from_utf8(a.raw()).ok()?;
        t.strip_prefix("htons(")?.strip_suffix(')')?.parse().ok()
    };
    let quoted = |t: &str| -> Option<String> {
        let start = t.find('"')? + 1;
        let end = start + t[start..].find('"')?;
        Some(t[start..end].to_owned())
    };
    match family.raw() {
        b"AF_INET" => {
            let port = port_of(sockaddr.field("sin_port")?)?;
            let addr = quoted(std::str::from_utf8(sockaddr.field("sin_addr")?.raw()).ok()?)?;
            Some(format!("{addr}:{port}"))
        }
        b"AF_INET6" => {
            let port = port_of(sockaddr.field("sin6_port")?)?;
            let text = std::str::from_utf8(sockaddr.raw()).ok()?;
            let at = text.find("inet_pton(AF_INET6, ")?;
            let addr = quoted(&text[at..])?;
            Some(format!("[{addr}]:{port}"))
        }
        _ => None,
    }
}

/// Whether unix sockets are granted by path, so that the supervisor refuses the others.
fn unix_path_grants(policy: &ResolvedPolicy) -> bool {
    matches!(policy.unix_sockets, paddock_policy::UnixSockets::Paths { .. })
}

/// Whether `call` (a `socket` or `socketpair` as strace shows it) makes an `AF_UNIX` socket
/// that the seccomp filter built with `opts` refuses. False when its arguments cannot be
/// read.
pub fn unix_socket_refused(opts: FilterOptions, call: &Syscall<'_>) -> bool {
    const AF_UNIX: u64 = 1;
    let mut args = call.args();
    let mut next = || args.next().map(|a| socket_constant(a.raw()));
    let (Some(Some(family)), Some(Some(kind))) = (next(), next()) else { return false };
    let protocol = next().flatten().unwrap_or(0);
    family == AF_UNIX && seccomp_query::refuses_socket(opts, &call.name, family, kind, protocol)
}

/// A `socket` argument as strace prints it: a name, flags joined by `|`, or a number.
fn socket_constant(raw: &[u8]) -> Option<u64> {
    raw.split(|b| *b == b'|').try_fold(0u64, |acc, part| {
        let v = match part {
            b"AF_UNIX" | b"AF_LOCAL" | b"PF_UNIX" | b"PF_LOCAL" => 1,
            b"AF_INET" | b"PF_INET" => 2,
            b"AF_INET6" | b"PF_INET6" => 10,
            b"AF_NETLINK" | b"PF_NETLINK" => 16,
            b"SOCK_STREAM" => 1,
            b"SOCK_DGRAM" => 2,
            b"SOCK_RAW" => 3,
            b"SOCK_RDM" => 4,
            b"SOCK_SEQPACKET" => 5,
            b"SOCK_NONBLOCK" => 0o4000,
            b"SOCK_CLOEXEC" => 0o2_000_000,
            b"IPPROTO_IP" | b"NETLINK_ROUTE" => 0,
            n => match n.strip_prefix(b"0x") {
                Some(hex) => u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?,
                None => std::str::from_utf8(n).ok()?.parse().ok()?,
            },
        };
        Some(acc | v)
    })
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
