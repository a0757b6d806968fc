//! Serving the notifications: a thread of the supervisor that receives each notified call,
//! reads its path or address from the caller, predicts the kernel's answer, lets the call
//! run (or refuses `socket(AF_UNIX)`), and writes a record for each predicted denial.
//!
//! Order per call: receive; read the caller's memory (`process_vm_readv`, page by page, at
//! most `PATH_MAX` bytes to the NUL); check the notification is still valid (the caller
//! may have died and its pid been reused, which would make what was read someone else's);
//! classify (the caller is blocked, so its cwd and fds are as the call will see them);
//! answer; and only if the answer reached a waiting call, write the record. A call a signal
//! interrupted before the answer is not recorded: if it restarts, its new notification is.
//! An answer that reached its call also proves the caller was alive, blocked in that call,
//! through the whole classification: its `/proc/PID` entries were its own.
//!
//! The thread never blocks the supervisor's exit: [`Server::stop`] waits a bounded time and
//! then leaves it to die with the process. If it stops early (an unexpected error), it
//! closes the listener, and the kernel then fails every notified call with `ENOSYS`:
//! `socket(AF_UNIX)` stays refused (fail closed), writes fail loudly rather than hang.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc;
use std::time::Duration;

use crate::notify::classify::{self, Live, Op, Shape};
use crate::notify::filter::{self, Call, Options};
use crate::notify::unix::{self, Grants, UnixAddr};
use crate::notify::{NotifyRecord, RecordKind};
use crate::payload::Bytes;

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (kernel 6.6): the supervisor runs on the caller's
/// CPU, which cuts the round trip from ~50 us to ~9 us.
const SYNC_WAKE_UP: u64 = 1;
/// The longest path read from the caller (`PATH_MAX`).
const PATH_MAX: usize = 4096;
/// The longest socket address read.
const SOCKADDR_MAX: usize = 128;

/// The running notification thread.
#[derive(Debug)]
pub struct Server {
    stop: Option<OwnedFd>,
    done: mpsc::Receiver<Stats>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a server did, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Notifications received.
    pub received: u64,
    /// Records written.
    pub recorded: u64,
    /// Whether `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` is on.
    pub sync_wake_up: bool,
}

impl Server {
    /// Starts serving `listener`, writing records to `records` (when itemizing), connecting
    /// the task's unix sockets to `grants` alone when there are any.
    pub fn start(
        listener: OwnedFd,
        records: Option<File>,
        opts: Options,
        grants: Grants,
    ) -> std::io::Result<Server> {
        // The flags travel by value, not behind a pointer (despite the ioctl's `_IOW` code).
        // SAFETY: an ioctl on our own listener with an integer argument.
        let sync = unsafe {
            libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, SYNC_WAKE_UP)
        } == 0;
        // Older kernels (< 6.6) answer EINVAL or ENOTTY: notifications work, only slower.
        let mut fds = [0; 2];
        // SAFETY: a valid two-int array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here alone.
        let (stop_read, stop_write) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (tx, done) = mpsc::channel();
        let thread =
            std::thread::Builder::new().name("paddock-notify".to_owned()).spawn(move || {
                let mut stats = Stats { sync_wake_up: sync, ..Stats::default() };
                let listener = std::sync::Arc::new(listener);
                serve(&listener, &stop_read, records, opts, &grants, &mut stats);
                let _ = tx.send(stats);
            })?;
        Ok(Server { stop: Some(stop_write), done, thread: Some(thread) })
    }

    /// Stops serving: waits at most `wait` for the thread to finish the call in hand, and
    /// returns what it did (`None` if it did not finish in time; it then dies with the
    /// process).
    pub fn stop(mut self, wait: Duration) -> Option<Stats> {
        drop(self.stop.take());
        let stats = self.done.recv_timeout(wait).ok();
        if stats.is_some()
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
        stats
    }
}

/// The 8-byte-aligned buffer the kernel's notification structures are read into.
struct Buf(Vec<u64>);

impl Buf {
    fn new(bytes: usize) -> Buf {
        Buf(vec![0; bytes.div_ceil(8)])
    }
}

fn notif_sizes() -> (usize, usize) {
    let mut sizes =
        libc::seccomp_notif_sizes { seccomp_notif: 0, seccomp_notif_resp: 0, seccomp_data: 0 };
    // SAFETY: seccomp(GET_NOTIF_SIZES) fills the struct it is given.
    unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_NOTIF_SIZES, 0, &raw mut sizes);
    }
    (
        usize::from(sizes.seccomp_notif).max(std::mem::size_of::<libc::seccomp_notif>()),
        usize::from(sizes.seccomp_notif_resp).max(std::mem::size_of::<libc::seccomp_notif_resp>()),
    )
}

fn serve(
    listener: &std::sync::Arc<OwnedFd>,
    stop: &OwnedFd,
    mut records: Option<File>,
    opts: Options,
    grants: &Grants,
    stats: &mut Stats,
) {
    let fd = listener.as_raw_fd();
    let calls = filter::notified(opts, records.is_some());
    let view = Live::load();
    let (req_size, resp_size) = notif_sizes();
    let mut req = Buf::new(req_size);
    let mut resp = Buf::new(resp_size);
    loop {
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: a valid array of two pollfd.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if fds[1].revents != 0 {
            return; // the task is done
        }
        if fds[0].revents & libc::POLLIN == 0 {
            // POLLHUP: no task uses the filter any more.
            return;
        }
        req.0.fill(0);
        // SAFETY: the buffer holds at least the kernel's `seccomp_notif`.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, req.0.as_mut_ptr()) } != 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                // The caller went away meanwhile, or a signal: nothing to answer.
                Some(libc::ENOENT | libc::EINTR) => continue,
                _ => return,
            }
        }
        stats.received += 1;
        // SAFETY: the buffer is 8-byte aligned and at least `seccomp_notif` long, and the
        // kernel filled it.
        let notif = unsafe { &*req.0.as_ptr().cast::<libc::seccomp_notif>() };
        let (answer, record) = if grants.is_empty() || notif.data.nr != CONNECT_NR {
            handle(fd, notif, &calls, &view)
        } else {
            match connect_for_task(fd, notif, grants, opts.record_connects) {
                Decided::Now(answer, record) => (answer, record),
                Decided::Later(sock, addr) => {
                    // A blocking connect of another family may take long: on a thread of
                    // its own, so that the task's other calls are not held behind it.
                    let later = (
                        std::sync::Arc::clone(listener),
                        notif.id,
                        notif.pid,
                        opts.record_connects,
                    );
                    let writer = records.as_ref().and_then(|r| r.try_clone().ok());
                    let spawned = std::thread::Builder::new()
                        .name("paddock-connect".to_owned())
                        .spawn(move || connect_later(&later, &sock, &addr, writer));
                    if spawned.is_ok() {
                        continue;
                    }
                    (Some(Answer::Error(libc::EAGAIN)), None)
                }
            }
        };
        let Some(answer) = answer else { continue };
        resp.0.fill(0);
        // SAFETY: the buffer holds at least `seccomp_notif_resp`.
        let out = unsafe { &mut *resp.0.as_mut_ptr().cast::<libc::seccomp_notif_resp>() };
        out.id = notif.id;
        match answer {
            Answer::Continue => out.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Answer::Error(errno) => out.error = -errno,
            Answer::Done => {}
        }
        // SAFETY: sending a filled response struct.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, resp.0.as_mut_ptr()) } != 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                // A kernel without CONTINUE (the supervisor checks the version first): fail
                // the call rather than leave it waiting forever.
                out.flags = 0;
                out.error = -libc::ENOSYS;
                // SAFETY: as above.
                unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, resp.0.as_mut_ptr()) };
            }
            continue; // ENOENT: interrupted before the answer; a restart is notified anew
        }
        if let Some(record) = record
            && let Some(records) = records.as_mut()
        {
            stats.recorded += 1;
            // A closed record pipe must not stop the serving: calls would hang.
            let _ = records.write_all(&record.to_line());
        }
    }
}

enum Answer {
    Continue,
    Error(i32),
    /// The call succeeded (the supervisor made it): returns 0.
    Done,
}

#[allow(clippy::cast_possible_truncation)] // syscall numbers are small
const CONNECT_NR: i32 = libc::SYS_connect as i32;

/// What [`connect_for_task`] decided.
enum Decided {
    /// The answer (`None`: no longer valid) and the record, now.
    Now(Option<Answer>, Option<NotifyRecord>),
    /// A blocking connect of a socket of another family, with the address copied: made and
    /// answered on a thread of its own.
    Later(OwnedFd, Vec<u8>),
}

/// Answers a `connect` with unix sockets granted by path (see [`unix`]): the kernel never
/// runs the call itself, since what it would re-read (the descriptor number's socket, the
/// address) could have been changed by another thread of the task since the check.
fn connect_for_task(
    fd: i32,
    notif: &libc::seccomp_notif,
    grants: &Grants,
    record_connects: bool,
) -> Decided {
    use Decided::Now;
    let pid = notif.pid;
    let args = notif.data.args;
    let refuse = |errno| Now(Some(Answer::Error(errno)), None);
    let Ok(pidfd) = unix::task_pidfd(pid) else {
        return Now(id_valid(fd, notif.id).then_some(Answer::Error(libc::EACCES)), None);
    };
    // The pidfd is the caller's, not a reused pid's, only if the call is still waiting.
    if !id_valid(fd, notif.id) {
        return Now(None, None);
    }
    #[allow(clippy::cast_possible_truncation)] // the descriptor is an int
    let sock = match unix::task_fd(&pidfd, args[0] as u32 as i32) {
        Ok(sock) => sock,
        Err(libc::EBADF) => return refuse(libc::EBADF),
        // Not ours to read (a task that made itself non-dumpable): refused, never let run.
        Err(_) => return refuse(libc::EACCES),
    };
    let Some(domain) = unix::socket_domain(&sock) else { return refuse(libc::ENOTSOCK) };
    let max = if domain == libc::AF_UNIX { unix::SOCKADDR_UN_LEN } else { SOCKADDR_MAX };
    let len = usize::try_from(args[2] & 0xffff_ffff).unwrap_or(usize::MAX);
    if len > max && domain == libc::AF_UNIX {
        return refuse(libc::EINVAL);
    }
    let Some(addr) = read_mem(pid, args[1], len.min(max)) else { return refuse(libc::EFAULT) };
    if !id_valid(fd, notif.id) {
        return Now(None, None);
    }
    if domain != libc::AF_UNIX {
        let nonblocking = {
            // SAFETY: F_GETFL on a descriptor we own.
            let flags = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
            flags >= 0 && flags & libc::O_NONBLOCK != 0
        };
        if !nonblocking {
            return Decided::Later(sock, addr);
        }
        let result = unix::connect_raw(&sock, &addr);
        let record = network_record(pid, &addr, result, record_connects);
        return Now(Some(result.map_or_else(Answer::Error, |()| Answer::Done)), record);
    }
    let refused = |path: Vec<u8>| NotifyRecord {
        pid,
        kind: RecordKind::UnixSocket,
        syscall: "connect".to_owned(),
        path: Some(Bytes(std::ffi::OsStr::from_bytes(&path).to_os_string())),
        target: None,
        errno: "EACCES".to_owned(),
    };
    match unix::parse_addr(&addr) {
        Err(errno) => refuse(errno),
        Ok(UnixAddr::Abstract(_)) if grants.abstract_shared => refuse(libc::EACCES),
        Ok(UnixAddr::Abstract(name)) => Now(
            Some(unix::connect_raw(&sock, &name).map_or_else(Answer::Error, |()| Answer::Done)),
            None,
        ),
        Ok(UnixAddr::Path(path)) => {
            let base = if path.starts_with(b"/") { None } else { classify::base_dir(pid, None) };
            let Some(absolute) = classify::absolute(pid, base.as_deref(), &path) else {
                return refuse(libc::EACCES);
            };
            // The path as spelled first (the common case, one lookup fewer), then resolved.
            let target = grants
                .target(&absolute, None)
                .or_else(|| grants.target(&absolute, unix::canonical(&absolute).as_deref()));
            match target {
                Some(Ok(target)) => Now(
                    Some(
                        unix::connect_path(&sock, &target.path)
                            .map_or_else(Answer::Error, |()| Answer::Done),
                    ),
                    None,
                ),
                Some(Err(errno)) => refuse(errno),
                None => Now(Some(Answer::Error(libc::EACCES)), Some(refused(absolute))),
            }
        }
    }
}

/// The record of an inet connect that failed (when connects are recorded).
fn network_record(
    pid: u32,
    addr: &[u8],
    result: Result<(), i32>,
    record_connects: bool,
) -> Option<NotifyRecord> {
    let errno = match result {
        Err(libc::ENETUNREACH) => "ENETUNREACH",
        Err(libc::EHOSTUNREACH) => "EHOSTUNREACH",
        _ => return None,
    };
    let target = classify::connect_target(addr).filter(|_| record_connects)?;
    Some(NotifyRecord {
        pid,
        kind: RecordKind::Network,
        syscall: "connect".to_owned(),
        path: None,
        target: Some(target),
        errno: errno.to_owned(),
    })
}

/// Makes a blocking connect of a socket that is not a unix one and answers it.
fn connect_later(
    (listener, id, pid, record_connects): &(std::sync::Arc<OwnedFd>, u64, u32, bool),
    sock: &OwnedFd,
    addr: &[u8],
    records: Option<File>,
) {
    let result = unix::connect_raw(sock, addr);
    let mut resp = Buf::new(notif_sizes().1);
    // SAFETY: the buffer holds at least `seccomp_notif_resp`.
    let out = unsafe { &mut *resp.0.as_mut_ptr().cast::<libc::seccomp_notif_resp>() };
    out.id = *id;
    if let Err(errno) = result {
        out.error = -errno;
    }
    // SAFETY: sending a filled response struct on the listener this thread holds.
    let sent = unsafe {
        libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, resp.0.as_mut_ptr())
    } == 0;
    if sent
        && let Some(mut records) = records
        && let Some(record) = network_record(*pid, addr, result, *record_connects)
    {
        let _ = records.write_all(&record.to_line());
    }
}

fn id_valid(fd: i32, id: u64) -> bool {
    // SAFETY: an ioctl with a pointer to a valid u64.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &raw const id) == 0 }
}

/// Decides one notification: the answer (`None`: no longer valid) and the record, if any.
fn handle(
    fd: i32,
    notif: &libc::seccomp_notif,
    calls: &[Call],
    view: &Live,
) -> (Option<Answer>, Option<NotifyRecord>) {
    let pid = notif.pid;
    let args = notif.data.args;
    let Some(call) = filter::lookup(calls, i64::from(notif.data.nr)) else {
        return (Some(Answer::Continue), None);
    };
    let record = |kind, path: Option<&[u8]>, target, errno: &str| NotifyRecord {
        pid,
        kind,
        syscall: call.name.to_owned(),
        path: path.map(|p| Bytes(std::ffi::OsStr::from_bytes(p).to_os_string())),
        target,
        errno: errno.to_owned(),
    };
    match call.shape {
        Shape::Socket => {
            // The filter only notifies AF_UNIX: refuse, and record.
            let rec = record(RecordKind::UnixSocket, None, None, "EPERM");
            if !id_valid(fd, notif.id) {
                return (None, None);
            }
            (Some(Answer::Error(libc::EPERM)), Some(rec))
        }
        Shape::Connect => {
            let len = usize::try_from(args[2]).unwrap_or(0).min(SOCKADDR_MAX);
            let addr = read_mem(pid, args[1], len);
            if !id_valid(fd, notif.id) {
                return (None, None);
            }
            let rec = addr
                .as_deref()
                .and_then(classify::connect_target)
                .map(|t| record(RecordKind::Network, None, Some(t), "ENETUNREACH"));
            (Some(Answer::Continue), rec)
        }
        shape => match write_denial(fd, notif, shape, view) {
            Err(()) => (None, None),
            Ok(denial) => (
                Some(Answer::Continue),
                denial.map(|(path, errno)| record(RecordKind::Write, Some(&path), None, errno)),
            ),
        },
    }
}

/// A path argument: read from the caller and made absolute against its cwd or dirfd.
/// `None` when unreadable (a bad pointer: the call fails with `EFAULT` by itself).
struct PathArg {
    raw: Option<Vec<u8>>,
    dirfd: Option<i32>,
}

fn path_arg(pid: u32, args: &[u64; 6], dirfd: Option<u8>, path: u8) -> PathArg {
    let ptr = args[usize::from(path)];
    // A NULL path (utimensat) means the dirfd itself, like an empty one.
    let raw = if ptr == 0 { Some(Vec::new()) } else { read_cstr(pid, ptr) };
    // The dirfd is an int: its low 32 bits.
    #[allow(clippy::cast_possible_truncation)]
    let dirfd = dirfd.map(|i| args[usize::from(i)] as u32 as i32);
    PathArg { raw, dirfd }
}

fn resolve(pid: u32, arg: &PathArg) -> Option<Vec<u8>> {
    let raw = arg.raw.as_deref()?;
    let base = if raw.starts_with(b"/") { None } else { classify::base_dir(pid, arg.dirfd) };
    classify::absolute(pid, base.as_deref(), raw)
}

/// `Err(())`: the notification went stale while reading; `Ok(denial)`: the denied path and
/// its errno.
fn write_denial(
    fd: i32,
    notif: &libc::seccomp_notif,
    shape: Shape,
    view: &Live,
) -> Result<Option<(Vec<u8>, &'static str)>, ()> {
    let pid = notif.pid;
    let args = &notif.data.args;
    let flag = |i: Option<u8>| i.map_or(0, |i| args[usize::from(i)]);
    #[allow(clippy::cast_possible_truncation)] // flags are ints: their low 32 bits
    let low = |v: u64| v as u32 as i32;
    let (first, second, open_flags) = match shape {
        Shape::Open { dirfd, path, flags } => {
            let f = match flags {
                Some(i) => low(args[usize::from(i)]),
                None => libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            };
            (path_arg(pid, args, dirfd, path), None, f)
        }
        Shape::OpenHow { dirfd, path, how } => {
            let how = read_mem(pid, args[usize::from(how)], 8);
            let f = how
                .and_then(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map_or(0, |b: [u8; 8]| low(u64::from_ne_bytes(b)));
            (path_arg(pid, args, Some(dirfd), path), None, f)
        }
        Shape::Create { dirfd, path }
        | Shape::Remove { dirfd, path }
        | Shape::Modify { dirfd, path, .. } => (path_arg(pid, args, dirfd, path), None, 0),
        Shape::Two { old, new, .. } => {
            (path_arg(pid, args, old.0, old.1), Some(path_arg(pid, args, new.0, new.1)), 0)
        }
        Shape::Connect | Shape::Socket => return Ok(None),
    };
    if !id_valid(fd, notif.id) {
        return Err(());
    }
    let Some(a) = resolve(pid, &first) else { return Ok(None) };
    let b = match &second {
        Some(arg) => match resolve(pid, arg) {
            Some(b) => Some(b),
            None => return Ok(None),
        },
        None => None,
    };
    let op = match shape {
        Shape::Open { .. } | Shape::OpenHow { .. } => Op::Open(&a, open_flags),
        Shape::Create { .. } => Op::Create(&a),
        Shape::Remove { .. } => Op::Remove(&a),
        Shape::Two { link, .. } => Op::Two { old: &a, new: b.as_deref().unwrap_or(b"/"), link },
        Shape::Modify { nofollow, .. } => {
            let nofollow = match nofollow {
                None => false,
                Some(u8::MAX) => true,
                Some(i) => low(flag(Some(i))) & libc::AT_SYMLINK_NOFOLLOW != 0,
            };
            Op::Modify(&a, !nofollow)
        }
        Shape::Connect | Shape::Socket => return Ok(None),
    };
    Ok(classify::predict(view, op).map(|d| (d.path.to_vec(), d.errno)))
}

/// Reads `len` bytes at `addr` in `pid`, page by page (a string may end just before an
/// unmapped page). `None` if nothing could be read.
fn read_mem(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let got = read_into(pid, addr, &mut out, |_| false);
    (got == len).then_some(out)
}

/// Reads a NUL-terminated string of at most `PATH_MAX` bytes (without the NUL).
fn read_cstr(pid: u32, addr: u64) -> Option<Vec<u8>> {
    let mut out = vec![0u8; PATH_MAX];
    let got = read_into(pid, addr, &mut out, |chunk| chunk.contains(&0));
    let end = out[..got].iter().position(|b| *b == 0)?;
    out.truncate(end);
    Some(out)
}

/// Fills `buf` from `addr` one page at a time until `done(chunk)` or a page fails; returns
/// the bytes read.
fn read_into(pid: u32, addr: u64, buf: &mut [u8], done: impl Fn(&[u8]) -> bool) -> usize {
    const PAGE: u64 = 4096;
    let Ok(pid) = libc::pid_t::try_from(pid) else { return 0 };
    let mut got = 0;
    while got < buf.len() {
        let at = addr.wrapping_add(got as u64);
        let room = usize::try_from(PAGE - at % PAGE).unwrap_or(1).min(buf.len() - got);
        let local = libc::iovec { iov_base: buf[got..].as_mut_ptr().cast(), iov_len: room };
        let remote = libc::iovec { iov_base: at as usize as *mut libc::c_void, iov_len: room };
        // SAFETY: `local` points into `buf` with `room` bytes left; the remote range is only
        // read by the kernel, which checks it.
        let n =
            unsafe { libc::process_vm_readv(pid, &raw const local, 1, &raw const remote, 1, 0) };
        let Ok(n) = usize::try_from(n) else { break };
        if n == 0 {
            break;
        }
        let chunk = &buf[got..got + n];
        got += n;
        if done(chunk) {
            break;
        }
    }
    got
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed setup step is a failed test

    use super::{PATH_MAX, read_cstr, read_mem};

    /// Two pages, the second inaccessible: a string may end at the first page's last byte.
    #[test]
    fn strings_are_read_page_by_page_and_bounded() {
        let page = 4096usize;
        // SAFETY: an anonymous mapping of two pages, the second then made inaccessible; only
        // the first page is written, and both are unmapped at the end.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                0
            );
            let first = std::slice::from_raw_parts_mut(base.cast::<u8>(), page);
            first.fill(b'a');
            first[page - 1] = 0;
            let me = std::process::id();
            let start = base as u64;
            // A string ending at the page's last byte, read from 10 bytes before it.
            let tail = read_cstr(me, start + page as u64 - 10).unwrap();
            assert_eq!(tail, vec![b'a'; 9]);
            // The whole page: PATH_MAX - 1 bytes and the NUL fit exactly.
            assert_eq!(read_cstr(me, start).unwrap().len(), PATH_MAX - 1);
            // No NUL before the unreadable page: nothing.
            first[page - 1] = b'a';
            assert_eq!(read_cstr(me, start + 100), None);
            assert_eq!(read_cstr(me, 0), None, "a NULL pointer reads nothing");
            assert_eq!(read_mem(me, start + page as u64 - 4, 8), None, "a short read is no read");
            assert_eq!(read_mem(me, start, 8).unwrap(), vec![b'a'; 8]);
            libc::munmap(base, 2 * page);
        }
    }
}
