//! The supervisor's work, as `paddock_linux_bwrap::supervisor` does it for a payload without
//! relays, a tracer or unix sockets granted by path: the same steps in the same order, the
//! same exit codes and messages.
//!
//! As pid 1 of the sandbox it makes itself non-dumpable and the subreaper, reads its payload,
//! makes its inner mounts (`inner`, when there are some) and drops every capability,
//! reads the BPF program (closing both descriptors), finds the `PATH` candidates, blocks
//! SIGCHLD into a signalfd, and starts the task in a child that shares its memory until it
//! executes. The child enters its own process group, unblocks SIGCHLD, enters the working
//! directory, closes every descriptor above 2, gives SIGPIPE its default, sets no_new_privs,
//! loads the filter and executes the first candidate that runs (126 or 127 as a shell would
//! when none does). The supervisor then relays the polite signals read from the signal
//! channel to the task's group, reaps whatever is reparented to it, and exits with the task's
//! status (128+N for signal N), killing what is left of the task's group.
//!
//! An observed run's payload adds the notification filter and its server. The child keeps
//! its end of a socket pair at fd 3 through the descriptor sweep, installs the notification
//! filter after the main one with a new listener, sends the listener up and executes at once
//! (the kernel holds the notified calls until they are answered). This process holds the
//! listener without serving it: a task that ends within a millisecond without a notified
//! call ends as any other. At the first notification, or once the task has run for that
//! millisecond, it executes the server it was handed (`Server::hand_over`:
//! `paddock-supervisor __serve-notify`, from a copy nobody may read, so never dumpable), which
//! goes on as pid 1 from here; failing that, the task is killed and the run ends with 125.

// A failure carries its message in place (there is no allocator to box it), and the error
// path runs at most once per process.
#![allow(clippy::result_large_err)]

use core::ffi::CStr;
use core::fmt::Write;

use libc::c_int;

use crate::message::Message;
use crate::payload::{self, Payload};
use crate::sys::{self, Errno};
use crate::{arena, constants::*, inner};

/// Runs the supervisor with the process's arguments; returns its exit code.
pub fn main(argv: &[&CStr]) -> c_int {
    match run(argv) {
        Ok(code) => code,
        Err(why) => {
            let mut msg = Message::new();
            let _ = write!(msg, "paddock: sandbox supervisor: ");
            msg.bytes(why.text());
            msg.bytes(b"\n");
            msg.write_to(2);
            EXIT_SUPERVISOR
        }
    }
}

/// Why the task was not run.
#[derive(Debug)]
pub struct Failure(Message);

impl Failure {
    fn text(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

macro_rules! fail {
    ($($fmt:tt)*) => {{
        let mut msg = Message::new();
        let _ = write!(msg, $($fmt)*);
        Failure(msg)
    }};
}

/// `--payload-fd N`, after `__supervise` when it is there.
pub fn parse_args(argv: &[&CStr]) -> Result<c_int, Failure> {
    let rest = match argv.iter().position(|a| a.to_bytes() == SUPERVISE_SUBCOMMAND) {
        Some(i) => &argv[i + 1..],
        None => argv.get(1..).unwrap_or_default(),
    };
    match rest {
        [flag, value] if flag.to_bytes() == b"--payload-fd" => {
            payload::parse_int(value.to_bytes()).ok_or_else(|| fail!("invalid --payload-fd"))
        }
        _ => Err(fail!("usage: paddock-supervisor-nolibc __supervise --payload-fd N (internal)")),
    }
}

/// Everything the child needs, prepared before the spawn: it only makes system calls.
#[derive(Debug)]
struct Child<'a> {
    cwd: &'a CStr,
    program: &'a CStr,
    candidates: &'a [*const u8],
    argv: *const *const u8,
    envp: *const *const u8,
    filter: &'a [libc::sock_filter],
    /// An observed run's notification filter, and the child's end of the socket pair its
    /// listener goes up.
    notify: Option<(&'a [libc::sock_filter], c_int)>,
    sigchld: sys::SigSet,
}

fn run(argv: &[&CStr]) -> Result<c_int, Failure> {
    // Only ever the sandbox's pid 1 (`--as-pid-1` in a new pid namespace): anything else is
    // not inside a sandbox, and the task is not run.
    if sys::getpid() != 1 {
        return Err(fail!("not the sandbox's pid 1: refusing to run the task outside a sandbox"));
    }
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0);
    let _ = sys::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    let payload_fd = parse_args(argv)?;
    let bytes = arena::read_all(payload_fd)
        .map_err(|Errno(e)| fail!("cannot read payload fd {payload_fd}: errno {e}"))?;
    let mut payload = payload::parse(bytes)
        .map_err(|why| fail!("supervisor payload on fd {payload_fd}: {why}"))?;
    same_version(payload.version)?;
    // The binds bwrap left to the supervisor, then every capability dropped (bwrap kept two
    // for them; as root without a user namespace, `CAP_SETPCAP` for this very drop), before
    // any path is checked or anything runs.
    let mut namespace_left = None;
    if !payload.inner_mounts.first().is_none_or(|m| m.is_null()) {
        match inner::mount_all(payload.inner_mounts, payload.signal_fd) {
            Ok(left) => namespace_left = left,
            Err((path, what, Errno(e))) => {
                let mut msg = Message::new();
                msg.bytes(b"inner mount");
                if let Some(path) = path {
                    msg.bytes(b" of ");
                    msg.bytes(path.to_bytes());
                }
                let _ = write!(msg, ": {what}: errno {e}");
                return Err(Failure(msg));
            }
        }
    }
    if !sys::drop_capabilities() {
        return Err(fail!("cannot drop every capability; the task was not run"));
    }
    // Everything is mounted: each bound path must still be what the runner recorded
    // (SYM-03), or the task does not run.
    if let Some(fd) = payload.mount_ids_fd {
        let ids = arena::read_all(fd)
            .map_err(|Errno(e)| fail!("cannot read payload fd {fd}: errno {e}"))?;
        let id_of = |path: &CStr| sys::statx_id(path.as_ptr().cast()).ok();
        match payload::check_mount_ids(ids, id_of) {
            Ok(()) => {}
            Err(payload::MountIdsError::Malformed(why)) => return Err(fail!("{why}")),
            Err(payload::MountIdsError::Differs(path)) => {
                let mut msg = Message::new();
                msg.bytes(path.to_bytes());
                msg.bytes(b" is not what paddock granted (it was replaced while the sandbox was being set up); refusing to run the task. Run again once nothing else changes it");
                return Err(Failure(msg));
            }
        }
    }
    let filter = read_filter(payload.seccomp_fd, "the seccomp program")?;
    // An observed run: the notification filter the task's child installs after the main
    // one, and the socket pair its listener comes up.
    let mut notify = match payload.notify.take() {
        Some(n) => Some((read_filter(n.filter_fd, "the notification filter")?, n)),
        None => None,
    };
    let pair = match notify {
        Some(_) => Some(sys::socket_pair().map_err(|Errno(e)| fail!("socketpair: errno {e}"))?),
        None => None,
    };
    let candidates =
        candidates(&payload).map_err(|Errno(e)| fail!("cannot find the program: errno {e}"))?;

    // SIGCHLD arrives through a signalfd, so one poll waits for both a child and a polite
    // signal. Blocked before the spawn so that no exit is missed.
    let sigchld = sys::sig_bit(libc::SIGCHLD);
    sys::block(sigchld).map_err(|Errno(e)| fail!("sigprocmask: errno {e}"))?;
    let sfd = sys::signalfd(sigchld).map_err(|Errno(e)| fail!("signalfd: errno {e}"))?;

    let child = Child {
        cwd: payload.cwd,
        program: payload.program,
        candidates,
        argv: payload.argv.as_ptr(),
        envp: payload.envp.as_ptr(),
        filter,
        notify: notify.as_ref().zip(pair).map(|((filter, _), [child_end, _])| (*filter, child_end)),
        sigchld,
    };
    const STACK: usize = 256 * 1024;
    let stack = arena::array::<u8>(STACK).map_err(|Errno(e)| fail!("mmap: errno {e}"))?;
    // SAFETY: the stack is ours and unused by anything else; its top is page-aligned. The
    // child reads `child`, which lives until this process resumes (after the child executed
    // or exited), and only makes system calls (`child_main`).
    let task = unsafe {
        sys::spawn_vfork(child_main, (&raw const child) as usize, stack.as_mut_ptr().add(STACK))
    }
    .map_err(|Errno(e)| fail!("clone: errno {e}"))?;
    // Failing (it already executed and did it) is harmless.
    sys::setpgid(task, task);
    // bwrap's mount namespace goes now, while the task runs (see `inner::mount_all`).
    if let Some(fd) = namespace_left {
        sys::close(fd);
    }
    let listener = match pair {
        Some([child_end, parent_end]) => {
            // Closing our copy of the child's end: end of file if it died before sending.
            sys::close(child_end);
            let received = sys::recv_fd(parent_end);
            sys::close(parent_end);
            match received {
                Ok(listener) => listener,
                Err(Errno(e)) => {
                    // Its notified calls would wait for an answer nobody gives.
                    sys::kill(task, libc::SIGKILL);
                    return Err(fail!("cannot receive the notification listener: errno {e}"));
                }
            }
        }
        None => None,
    };
    // The byte tells the runner the sandbox is up; a closed channel is not an error.
    if let Some(fd) = payload.signal_fd {
        sys::send_byte(fd, STARTED);
    }
    let server = match (listener, notify.take()) {
        (Some(listener), Some((_, n))) => Some(Server { listener, notify: n }),
        _ => None,
    };
    supervise(task, sfd, payload.signal_fd, server)
}

/// A BPF program read from `fd` (closing it), as `sock_filter`s.
fn read_filter(fd: c_int, what: &str) -> Result<&'static [libc::sock_filter], Failure> {
    let bpf =
        arena::read_all(fd).map_err(|Errno(e)| fail!("cannot read payload fd {fd}: errno {e}"))?;
    if bpf.is_empty() {
        return Err(fail!("{what} is empty; refusing to run the task unfiltered"));
    }
    if !bpf.len().is_multiple_of(8) {
        return Err(fail!("a BPF program of {} bytes is malformed", bpf.len()));
    }
    #[cfg(target_endian = "big")]
    compile_error!("the BPF program is little endian, as `sock_filter` is on this target");
    // SAFETY: the mapping is page-aligned and holds whole 8-byte `sock_filter`s, little
    // endian as the struct's fields are here.
    Ok(unsafe {
        core::slice::from_raw_parts(bpf.as_ptr().cast::<libc::sock_filter>(), bpf.len() / 8)
    })
}

/// The listener of a running observed task, and how to start its server.
struct Server<'a> {
    listener: c_int,
    notify: payload::Notify<'a>,
}

impl Server<'_> {
    /// Becomes the listener's server: executes `paddock-supervisor` in this process (pid 1,
    /// the task's parent and the ancestor of everything it starts, which reading their
    /// memory needs where Yama restricts `ptrace` to ancestors), with the task's pid and the
    /// listener's descriptor after the payload's arguments. The executable is a copy nobody
    /// may read, so the new image is not dumpable from its first instruction: the task,
    /// same user, can never open `/proc/1/mem`. Returns only on failure.
    fn hand_over(self, task: c_int) -> Failure {
        let n = self.notify;
        let (Ok(pid), Ok(fd)) = (decimal(task), decimal(self.listener)) else {
            return fail!("mmap failed starting the notification server");
        };
        let at = n.server_argc;
        n.server_argv[at] = c"--task".as_ptr().cast();
        n.server_argv[at + 1] = pid;
        n.server_argv[at + 2] = c"--listener".as_ptr().cast();
        n.server_argv[at + 3] = fd;
        let envp = [core::ptr::null::<u8>()];
        let Errno(e) = sys::execveat_when_free(n.server_fd, n.server_argv.as_ptr(), envp.as_ptr());
        fail!("cannot start the notification server: errno {e}")
    }
}

/// `n` in decimal, NUL-terminated, in memory of its own.
fn decimal(n: c_int) -> Result<*const u8, Errno> {
    let buf = arena::array::<u8>(16)?;
    let mut digits = [0u8; 12];
    let (mut n, mut i) = (n.unsigned_abs(), digits.len());
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf[..digits.len() - i].copy_from_slice(&digits[i..]);
    Ok(buf.as_ptr())
}

/// A payload planned by another version of paddock is refused: a supervisor left over from
/// another install would misread it.
fn same_version(planned_by: &[u8]) -> Result<(), Failure> {
    if planned_by == PAYLOAD_VERSION.as_bytes() {
        return Ok(());
    }
    let mut msg = Message::new();
    let _ = write!(
        msg,
        "this supervisor is version {PAYLOAD_VERSION}, the runner that planned the task is "
    );
    msg.bytes(if planned_by.is_empty() { b"older" } else { planned_by });
    msg.bytes(b": install paddock and paddock-supervisor-nolibc together");
    Err(Failure(msg))
}

/// The paths `execve` tries: the program itself when it has a `/`, else one per entry of
/// `PATH` (the default when unset) as execvp does, an empty entry meaning the cwd, without
/// the absolute ones `stat` says do not exist. NULL-terminated.
pub fn candidates(p: &Payload<'_>) -> Result<&'static [*const u8], Errno> {
    let program = p.program.to_bytes();
    if program.contains(&b'/') {
        let one = arena::array::<*const u8>(2)?;
        one[0] = p.program.as_ptr().cast();
        return Ok(one);
    }
    if program.is_empty() {
        return arena::array::<*const u8>(1).map(|none| &*none);
    }
    let path = p.path.unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    let dirs = path.split(|&b| b == b':');
    let (count, bytes) = dirs
        .clone()
        .fold((0, 0), |(n, len), dir| (n + 1, len + dir.len().max(1) + 1 + program.len() + 1));
    let ptrs = arena::array::<*const u8>(count + 1)?;
    let text = arena::array::<u8>(bytes)?;
    let (mut at, mut kept) = (0, 0);
    for dir in dirs {
        let start = at;
        for part in [if dir.is_empty() { b".".as_slice() } else { dir }, b"/", program, b"\0"] {
            text[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        let candidate = text[start..].as_ptr();
        if text[start] != b'/' || sys::may_exist(candidate) {
            ptrs[kept] = candidate;
            kept += 1;
        }
    }
    Ok(&ptrs[..=kept])
}

/// The task's side of the spawn: runs on its own stack in the supervisor's memory until it
/// executes, so it only makes system calls (no allocation, no lock). Never returns.
extern "C" fn child_main(arg: usize) -> ! {
    // SAFETY: `arg` is the `Child` of `run`, alive until the parent resumes, which is after
    // this child has executed or exited.
    let c = unsafe { &*(arg as *const Child<'_>) };
    sys::setpgid(0, 0);
    sys::unblock(c.sigchld);
    if sys::chdir(c.cwd.as_ptr().cast()).is_err() {
        die(EXIT_SUPERVISOR, &[b"paddock: cannot enter the working directory inside the sandbox; is it readable under the policy (grant it with allow.read)?"]);
    }
    // Every descriptor above 2 goes: the payloads, the signal channel, the signalfd, the
    // record pipe, the server's executable (SEC-09, FSR-06); the listener's socket stays at
    // fd 3 until it has been used.
    let mut first = 3;
    if let Some((_, sock)) = c.notify {
        if sock != NOTIFY_SOCK_FD && sys::dup_to(sock, NOTIFY_SOCK_FD).is_err() {
            die(
                EXIT_SUPERVISOR,
                &[b"paddock: cannot keep the notification socket; the task was not run"],
            );
        }
        first = NOTIFY_SOCK_FD + 1;
    }
    sys::close_from(first);
    // Ignored by whoever started bwrap, it would stay ignored across execve; the task starts
    // with the default, as std's `Command` gives.
    sys::set_default(libc::SIGPIPE);
    if !sys::drop_capabilities() {
        die(EXIT_SUPERVISOR, &[b"paddock: cannot drop every capability; the task was not run"]);
    }
    if let Err((what, Errno(e))) = sys::load_filter(c.filter) {
        let mut msg = Message::new();
        let _ = write!(
            msg,
            "paddock: cannot apply the seccomp filter: cannot {what} (errno {e}); the task was not run"
        );
        die(EXIT_SUPERVISOR, &[msg.as_bytes()]);
    }
    if let Some((filter, _)) = c.notify {
        install_notify(filter);
    }
    let mut denied = false;
    for &candidate in c.candidates.iter().take_while(|p| !p.is_null()) {
        let Errno(e) = sys::execve(candidate, c.argv, c.envp);
        if matches!(e, libc::EACCES | libc::EPERM | libc::ENOEXEC | libc::EISDIR) {
            denied = true;
        }
    }
    let program = c.program.to_bytes();
    if denied {
        die(EXIT_NOT_EXECUTABLE, &[b"paddock: ", program, b": permission denied (not executable)"]);
    }
    die(EXIT_NOT_FOUND, &[b"paddock: ", program, b": command not found in the sandbox"])
}

/// The descriptor the child keeps its end of the listener's socket pair on.
const NOTIFY_SOCK_FD: c_int = 3;

/// The child's side of the notification setup, after the main filter: installs `filter`
/// with a listener, sends the listener up [`NOTIFY_SOCK_FD`] and closes both. The task then
/// executes at once: the kernel holds every notified call until the listener is served.
/// Exits 125 on any failure.
fn install_notify(filter: &[libc::sock_filter]) {
    let fail = |what: &str, Errno(e)| -> ! {
        let mut msg = Message::new();
        let _ = write!(
            msg,
            "paddock: cannot {what} (errno {e}); unix sockets depend on it; the task was not run"
        );
        die(EXIT_SUPERVISOR, &[msg.as_bytes()])
    };
    let listener = match sys::load_notify_filter(filter) {
        Ok(fd) => fd,
        Err(e) => fail("install the write-notification filter", e),
    };
    if let Err(e) = sys::send_fd(NOTIFY_SOCK_FD, listener) {
        fail("pass the notification listener to the supervisor", e);
    }
    sys::close(listener);
    sys::close(NOTIFY_SOCK_FD);
}

/// Writes `parts` and a newline to stderr, and exits with `code`.
fn die(code: c_int, parts: &[&[u8]]) -> ! {
    let mut msg = Message::new();
    for part in parts {
        msg.bytes(part);
    }
    msg.bytes(b"\n");
    msg.write_to(2);
    sys::exit(code)
}

/// Once the task has exited: kills what is left of the sandbox (as the kernel would when
/// this process, its pid 1, exits), reaps it all, and tells the runner how the task ended
/// ([`task_end`]), which may then finish while the kernel tears the namespaces down.
fn end_the_rest(signal_fd: Option<c_int>, code: c_int) {
    sys::kill(-1, libc::SIGKILL);
    while sys::reap_waiting().is_ok() {}
    if let Some(fd) = signal_fd {
        let (cpu_micros, max_rss_kib) = sys::children_usage();
        sys::send(fd, &task_end(code, cpu_micros, max_rss_kib));
    }
}

/// The task's end as the runner reads it (`paddock_linux_bwrap::supervisor::TaskEnd`, the
/// tests check the two agree): [`EXITED`], the exit code, the CPU time of everything reaped
/// in microseconds and the largest peak resident set in KiB, both little-endian.
pub fn task_end(code: c_int, cpu_micros: u64, max_rss_kib: u64) -> [u8; 18] {
    let mut out = [0u8; 18];
    out[0] = EXITED;
    out[1] = u8::try_from(code).unwrap_or(EXIT_SUPERVISOR as u8);
    out[2..10].copy_from_slice(&cpu_micros.to_le_bytes());
    out[10..18].copy_from_slice(&max_rss_kib.to_le_bytes());
    out
}

/// The exit code for a wait status: the task's, 128+N for signal N.
pub fn status_code(status: c_int) -> c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        EXIT_SUPERVISOR
    }
}

/// How long an observed task runs before its server is started anyway (if it has not made a
/// notified call by then): a short task that never makes one ends without it, and a longer
/// one has the server's start beside it rather than in the way of its first notified call.
const SERVER_AFTER_NANOS: u64 = 1_000_000;

/// Relays signals and reaps until the task exits; returns its exit code. An observed task's
/// first notified call, or [`SERVER_AFTER_NANOS`] of its running, hands the listener to its
/// server (`Server::hand_over`): this process becomes `paddock-supervisor`, which goes on
/// from here.
fn supervise(
    task: c_int,
    sfd: c_int,
    mut signal_fd: Option<c_int>,
    mut server: Option<Server<'_>>,
) -> Result<c_int, Failure> {
    let serve_by = sys::monotonic_nanos() + SERVER_AFTER_NANOS;
    loop {
        let mut fds = [
            libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: signal_fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
            libc::pollfd {
                fd: server.as_ref().map_or(-1, |s| s.listener),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let wait = match server {
            Some(_) => serve_by.saturating_sub(sys::monotonic_nanos()),
            None => 1_000_000_000,
        };
        // An error (EINTR) falls through to reaping, so that this never spins blind.
        let _ = sys::poll(&mut fds, wait);
        if fds[0].revents != 0 {
            let mut info = [0u8; core::mem::size_of::<libc::signalfd_siginfo>()];
            while sys::read(sfd, &mut info).is_ok_and(|n| n > 0) {}
        }
        // Reap everything reparented to us; return when the task itself is gone.
        while let Ok(Some((pid, status))) = sys::reap_any() {
            if pid == task {
                let code = status_code(status);
                end_the_rest(signal_fd, code);
                return Ok(code);
            }
        }
        let due = fds[2].revents & libc::POLLIN != 0 || sys::monotonic_nanos() >= serve_by;
        if due && let Some(server) = server.take() {
            let why = server.hand_over(task);
            // The task's notified calls would wait for ever.
            sys::kill(-task, libc::SIGKILL);
            return Err(why);
        } else if fds[2].revents != 0 {
            // Hung up: nothing that the filter notifies for is left.
            server = None;
        }
        if let Some(fd) = signal_fd
            && fds[1].revents != 0
        {
            let mut buf = [0u8; 16];
            match sys::read(fd, &mut buf) {
                // The runner holds its end until bwrap is gone: end of file while the task
                // runs means the runner died, and the sandbox goes with it even if the
                // parent-death signal bwrap arranged did not arrive.
                Ok(0) => {
                    sys::kill(-task, libc::SIGKILL);
                    return Ok(128 + libc::SIGKILL);
                }
                Ok(n) => {
                    for &sig in &buf[..n] {
                        if POLITE_SIGNALS.contains(&c_int::from(sig)) {
                            sys::kill(-task, c_int::from(sig));
                        }
                    }
                }
                Err(Errno(libc::EINTR | libc::EAGAIN)) => {}
                Err(_) => {
                    sys::close(fd);
                    signal_fd = None;
                }
            }
        }
    }
}
