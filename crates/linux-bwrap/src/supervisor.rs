//! The supervisor: paddock re-executed inside the sandbox as its pid 1 (`paddock __supervise`).
//!
//! It reads its payload, makes itself non-dumpable (the task cannot ptrace it or read its
//! memory or environment through `/proc/1`), makes the payload's inner mounts in a mount
//! namespace of its own ([`crate::private_ns::SelfMounts::mount_inside`]), drops every
//! capability it holds (those bwrap kept for the inner mounts, or for this drop as root
//! without a user namespace; any failure runs nothing), forks the task into its own process
//! group,
//! and in the child only closes every descriptor above 2, sets no_new_privs, loads the
//! seccomp program and execs. Loading the program failing is fatal before exec (SEC-08).
//! The parent relays polite signals read from the signal descriptor to the task's group,
//! reaps every process reparented to it, and exits with the task's status (128+N for signal
//! N). When it exits, the kernel kills whatever is left in the pid namespace.
//!
//! The payload's relays (port grants, the egress proxy's port: see [`crate::bridges`]) run
//! here, as threads of the supervisor, never under the task's filter. They start after the
//! fork (the child stays single-threaded and signal-safe; the threads inherit the blocked
//! SIGCHLD) and before the task execs: the child waits on a gate pipe until they listen, so
//! the task's first connection finds them. They stop when the task is done.
//!
//! strace inside the sandbox ([`crate::trace::inside`]): the child executes strace (`-DD`)
//! in place of the task, keeping only the task's BPF program (for the shim) and strace's log
//! descriptor; the child stays strace's tracee and becomes the task through the shim. Once
//! the task is done, the supervisor waits (bounded) for strace, its child by then, to write
//! the last lines.
//!
//! `--itemize observe` ([`crate::notify`]): when the payload has a record descriptor, the
//! child also installs the notification filter after the main one, with a new listener, and
//! passes the listener up a socket pair prepared before the fork (kept at fd 3 through the
//! descriptor sweep), closes its copies and executes at once: the kernel holds every call the
//! filter notifies until the supervisor, once the child has executed, serves the listener on
//! a thread (the child shares the supervisor's memory until then, as without observers). No
//! listener, no task: installing the filter failing (a listener already in the chain:
//! `EBUSY`; a kernel before 5.0) is exit 125 before the task runs, because
//! `socket(AF_UNIX)` is refused by that filter alone. A supervisor that then cannot serve
//! it kills the task and exits 125: until then the notified calls waited, unanswered (a
//! listener closed unserved fails them with `ENOSYS`), so the walls never depended on the
//! server. Not waiting for the server saves the task a round trip between the two processes
//! and a copy of the supervisor (`fork`) on every observed run (0.1 ms here).
//! An observed run that `paddock-supervisor-nolibc` started comes here once its task makes
//! a notified call, through `__serve-notify` (`serve_notify`): the listener is served from
//! then on, by this process as the sandbox's pid 1.
//! Unix sockets granted by path ([`crate::notify::unix`]) install the same filter whatever
//! the itemizing, without a record descriptor; the grants' sockets are opened before the
//! fork, and a kernel without `pidfd_getfd` refuses the run.
//!
//! Exit codes of its own: 125 (supervisor error, the task never ran), 126 (found but not
//! executable), 127 (not found), as a shell would.

mod reap;
mod serve_notify;
mod task_end;
mod tracer;

pub use reap::{POLITE_SIGNALS, status_code};
use reap::{await_children, end_the_rest, kill_all_but_strace, supervise};
pub use task_end::TaskEnd;

pub(crate) use serve_notify::main_from_args as serve_notify_main;

use std::ffi::{CString, OsString};

use crate::launch::{self, Launch, die};
use crate::notify;
use crate::payload::{SandboxRelay, SupervisorPayload};
use tracer::Tracer;

/// Exit code when the supervisor itself fails and the task never ran.
pub const EXIT_SUPERVISOR: i32 = 125;
/// Exit code when the program exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the program is not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// The byte written up the signal channel once the task has been forked: the runner tells a
/// sandbox that never started (bwrap's own error) from a task that failed.
pub const STARTED: u8 = b'S';
/// The byte written up the signal channel once the task has exited and every other process
/// of the sandbox has been killed and reaped, first of the [`TaskEnd`] message: the runner
/// cleans up (the placeholders) and finishes the run while the kernel tears the sandbox's
/// namespaces down, before bwrap is gone.
pub const EXITED: u8 = b'E';
/// The byte the supervisor sends up the signal channel when its payload says
/// `wait_for_tracer`: the runner reads the supervisor's pid from the message's credentials
/// (`SO_PASSCRED`: the kernel gives it in the runner's pid namespace) and attaches strace.
pub const TRACE_ME: u8 = b'T';
/// The byte the runner sends down once strace is attached (a signal number is never 0).
pub const TRACED: u8 = 0;

/// The supervisor's entry point. `args` are the process arguments; everything up to and
/// including `__supervise` is skipped, then `--payload-fd N` is expected. Returns the exit
/// code for the process.
pub fn main_from_args(args: &[OsString]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("paddock: sandbox supervisor: {message}");
            EXIT_SUPERVISOR
        }
    }
}

/// A payload planned by another version of paddock is refused: a `paddock-supervisor` left
/// over from another install would misread it.
fn same_version(planned_by: &str) -> Result<(), String> {
    if planned_by == crate::payload::PAYLOAD_VERSION {
        return Ok(());
    }
    Err(format!(
        "this supervisor is version {}, the runner that planned the task is {}: install paddock \
         and paddock-supervisor together",
        crate::payload::PAYLOAD_VERSION,
        if planned_by.is_empty() { "older" } else { planned_by }
    ))
}

fn parse_args(args: &[OsString]) -> Result<i32, String> {
    let rest = match args.iter().position(|a| a == crate::SUPERVISE_SUBCOMMAND) {
        Some(i) => &args[i + 1..],
        None => args,
    };
    match rest {
        [flag, value] if flag == "--payload-fd" => value
            .to_str()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "invalid --payload-fd".to_owned()),
        _ => Err("usage: paddock __supervise --payload-fd N (internal)".to_owned()),
    }
}

pub(crate) fn read_fd(fd: i32) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: the descriptor was handed to this process by the runner for us alone; taking
    // ownership closes it when read, so it never reaches the task.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(|e| format!("cannot read payload fd {fd}: {e}"))?;
    Ok(buf)
}

/// Everything the child needs, prepared before `fork` so that the child allocates nothing.
struct Prepared {
    launch: Launch,
    cwd: CString,
    /// The gate pipe (read, write): the child closes its copy of the write end and waits
    /// for EOF on the read end before it runs anything.
    gate: Option<(i32, i32)>,
    /// `--itemize observe`: the notification program and the socket pair (child's end,
    /// supervisor's end) the listener travels on.
    notify: Option<NotifyPrep>,
    /// strace inside the sandbox: the child executes it in place of the task.
    tracer: Option<Tracer>,
}

/// The notification filter, prepared before the fork.
struct NotifyPrep {
    program: Vec<libc::sock_filter>,
    child_sock: i32,
    parent_sock: i32,
}

/// The descriptor the child keeps its end of the listener socket pair on while it sweeps
/// every other descriptor above 2.
const NOTIFY_SOCK_FD: i32 = 3;

fn prepare(payload: &SupervisorPayload, bpf: Vec<u8>) -> Result<Prepared, String> {
    let launch = Launch::new(
        &payload.program.0,
        payload.args.iter().map(|a| a.0.as_os_str()),
        payload.env.iter().map(|(k, v)| (k.0.as_os_str(), v.0.as_os_str())),
        bpf,
    )?;
    Ok(Prepared {
        launch,
        cwd: launch::cstring(&payload.cwd.0)?,
        gate: None,
        notify: None,
        tracer: None,
    })
}

/// Takes the record descriptor (when itemizing) and prepares the notification filter and its
/// socket pair.
fn prepare_notify(
    payload: &SupervisorPayload,
) -> Result<(NotifyPrep, Option<std::fs::File>, notify::filter::Options), String> {
    notify::kernel_supported().map_err(|e| format!("write notifications: {e}"))?;
    let unix_grants = !payload.unix_socket_grants.is_empty();
    if unix_grants {
        notify::unix::kernel_supported()?;
    }
    let records = match payload.record_fd {
        Some(fd) => Some(std::fs::File::from(inherited(fd, "record")?)),
        None => None,
    };
    let opts = notify::filter::Options {
        record_connects: payload.record_connects,
        refuse_unix_sockets: payload.refuse_unix_sockets,
        unix_grants,
    };
    let (child_sock, parent_sock) =
        crate::fdpass::socket_pair().map_err(|e| format!("socketpair: {e}"))?;
    // Closed by hand around the fork (see `NotifyPrep`).
    let prep = NotifyPrep {
        program: notify::filter::program(opts, records.is_some()),
        child_sock: std::os::fd::IntoRawFd::into_raw_fd(child_sock),
        parent_sock: std::os::fd::IntoRawFd::into_raw_fd(parent_sock),
    };
    Ok((prep, records, opts))
}

fn run(args: &[OsString]) -> Result<i32, String> {
    // Only ever the sandbox's pid 1 (`--as-pid-1` in a new pid namespace): anything else is
    // not inside a sandbox, and the task is not run.
    if std::process::id() != 1 {
        return Err(
            "not the sandbox's pid 1: refusing to run the task outside a sandbox".to_owned()
        );
    }
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let payload_fd = parse_args(args)?;
    let mut payload = SupervisorPayload::from_bytes(&read_fd(payload_fd)?, payload_fd)
        .map_err(|e| e.to_string())?;
    same_version(&payload.version)?;
    // The binds bwrap left to the supervisor, then every capability dropped (bwrap kept two
    // for them; as root without a user namespace, `CAP_SETPCAP` for this very drop), before
    // any path is checked, any thread starts or anything runs.
    if !payload.inner_mounts.is_empty() {
        let mounts = crate::private_ns::SelfMounts::inner(&payload.inner_mounts)?;
        // The write grants' clones, which the runner sends before anything else.
        let count = payload.inner_mounts.iter().filter(|m| m.grant_clone).count();
        let clones = match (count, payload.signal_fd) {
            (0, _) => Vec::new(),
            (_, Some(fd)) => crate::grant_clones::receive(fd, count)?,
            (_, None) => return Err("write grants to attach, but no signal channel".to_owned()),
        };
        mounts.mount_inside(clones)?;
    }
    if !crate::launch::drop_capabilities() {
        return Err("cannot drop every capability; the task was not run".to_owned());
    }
    // Everything is mounted: each bound path must still be what the runner recorded
    // (SYM-03), or the task does not run.
    if let Some(fd) = payload.mount_ids_fd {
        crate::mount_ids::verify(&read_fd(fd)?)?;
    }
    // A prewarmed sandbox: everything above is done; the task and its streams come now.
    if let Some(fd) = payload.task_fd {
        match crate::runtime::warm::receive_task(fd)? {
            Some(task) => {
                payload.program = task.program;
                payload.args = task.args;
                payload.env = task.env;
                payload.cwd = task.cwd;
            }
            // Torn down unused: nothing runs.
            None => return Ok(0),
        }
    }
    // Before the program is read: the shim reads it again from the same descriptor.
    let tracer = match &payload.strace_inside {
        Some(_) if !payload.unix_socket_grants.is_empty() => {
            // Its filter would come before the notification filter, which the shim does not
            // install: the grants would not be enforced.
            return Err(
                "unix sockets granted by path cannot be enforced with strace inside the sandbox"
                    .to_owned(),
            );
        }
        Some(si) if payload.record_fd.is_some() => {
            return Err(format!(
                "{} and the observers cannot both itemize one run",
                String::from_utf8_lossy(si.program.0.as_encoded_bytes())
            ));
        }
        Some(si) => Some(Tracer::prepare(si, &payload.args, payload.seccomp_fd)?),
        None => None,
    };
    let bpf = read_fd(payload.seccomp_fd)?;
    if bpf.is_empty() {
        return Err("the seccomp program is empty; refusing to run the task unfiltered".to_owned());
    }
    let mut prepared = prepare(&payload, bpf)?;
    prepared.tracer = tracer;
    let mut notify_setup = None;
    if payload.record_fd.is_some() || !payload.unix_socket_grants.is_empty() {
        let (prep, records, opts) = prepare_notify(&payload)?;
        prepared.notify = Some(prep);
        // Opened now, before the task exists: see `notify::unix::Grants`.
        let mut grants = notify::unix::Grants::new(&payload.unix_socket_grants, true);
        grants.abstract_shared = payload.unix_abstract_shared;
        notify_setup = Some((records, opts, grants));
    }
    let signal_fd = payload.signal_fd;
    let gate_write = if payload.relays.is_empty() {
        None
    } else {
        let mut fds = [0; 2];
        // SAFETY: a valid two-int array; the result is checked.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        prepared.gate = Some((fds[0], fds[1]));
        Some(fds[1])
    };

    // SIGCHLD arrives through a signalfd, so one poll waits for both a child and a polite
    // signal. Block it before fork so that no exit is missed.
    let (sfd, mask) = sigchld_fd()?;

    if payload.wait_for_tracer
        && let Some(code) = wait_for_tracer(signal_fd)
    {
        return Ok(code);
    }

    let pid = if prepared.gate.is_none() {
        // The child shares this process's memory until it execs: it only makes syscalls on
        // data prepared before (the supervisor is single-threaded here: no relays, and the
        // notifier's thread starts once the child has executed, so the allocator is nobody
        // else's while it runs).
        crate::vfork::spawn(|| child(&prepared, &mask)).map_err(|e| format!("clone: {e}"))?
    } else {
        // The child waits for the relays, which this process starts after the fork: a child
        // that shares its memory could not wait.
        // SAFETY: the supervisor is single-threaded, so the child may run any code; it only
        // calls async-signal-safe functions and exits through `_exit` or `execve`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            child(&prepared, &mask);
        }
        pid
    };
    let relays = match gate_write {
        None => Vec::new(),
        Some(gate) => {
            let started = start_relays(&payload.relays);
            // SAFETY: closing our ends of the gate: EOF lets the child go on (or, on
            // failure, it is killed first and never runs the task).
            unsafe {
                if started.is_err() {
                    libc::kill(pid, libc::SIGKILL);
                }
                libc::close(gate);
                if let Some((read, _)) = prepared.gate {
                    libc::close(read);
                }
            }
            started?
        }
    };
    let notifier = match (&prepared.notify, notify_setup) {
        (Some(prep), Some((records, opts, grants))) => {
            Some(serve_notifications(pid, prep, records, opts, grants)?)
        }
        _ => None,
    };
    // SAFETY: setpgid on our own child; failing (it already exec'd and did it) is harmless.
    // The write tells the runner the sandbox is up; a closed channel is not an error.
    unsafe {
        libc::setpgid(pid, pid);
        if let Some(fd) = signal_fd {
            libc::send(fd, [STARTED].as_ptr().cast(), 1, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT);
        }
    }
    let (code, signal_fd) = supervise(pid, sfd, signal_fd);
    if let Some(server) = notifier.flatten() {
        // Bounded: a record write stuck on a full pipe must not keep the sandbox alive.
        server.stop(std::time::Duration::from_secs(1));
    }
    // Stopping joins the relays' threads and removes the sockets the supervisor served.
    if prepared.tracer.is_some() {
        // strace is our child now (its parent left, and we are the subreaper): it writes
        // the task's last lines once every process it follows is gone. What left the
        // task's group (a `setsid` daemon) would keep it waiting: everything else goes
        // first, and the wait is bounded anyway.
        kill_all_but_strace();
        await_children(sfd, std::time::Duration::from_secs(2));
    }
    drop(relays);
    end_the_rest(signal_fd, code);
    Ok(code)
}

/// Blocks SIGCHLD and opens a non-blocking signalfd for it: the descriptor, and the mask (a
/// child unblocks it).
fn sigchld_fd() -> Result<(i32, libc::sigset_t), String> {
    let mut mask = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initializes the set; sigaddset and sigprocmask get valid pointers.
    let (mask, sfd) = unsafe {
        libc::sigemptyset(mask.as_mut_ptr());
        let mut mask = mask.assume_init();
        libc::sigaddset(&mut mask, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
        let sfd = libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        (mask, sfd)
    };
    if sfd < 0 {
        return Err(format!("signalfd: {}", std::io::Error::last_os_error()));
    }
    Ok((sfd, mask))
}

/// Receives the listener the child sent before it executed the task, and starts serving it.
/// `Ok(None)`: the child died before sending it (its own message and exit code tell why).
/// Any other failure kills the task, whose notified calls are waiting for an answer.
fn serve_notifications(
    pid: libc::pid_t,
    prep: &NotifyPrep,
    records: Option<std::fs::File>,
    opts: notify::filter::Options,
    grants: notify::unix::Grants,
) -> Result<Option<notify::serve::Server>, String> {
    // SAFETY: closing the supervisor's copy of the child's end: EOF if the child dies.
    unsafe { libc::close(prep.child_sock) };
    let started = crate::fdpass::recv_fd(prep.parent_sock)
        .map_err(|e| format!("cannot receive the notification listener: {e}"))
        .and_then(|listener| match listener {
            None => Ok(None),
            Some(listener) => notify::serve::Server::start(listener, records, opts, grants)
                .map(Some)
                .map_err(|e| format!("cannot serve the write notifications: {e}")),
        });
    if started.is_err() {
        // SAFETY: killing our own child, the task, not reaped yet.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SAFETY: closing our end: the listener came over it (or the child is dead).
    unsafe { libc::close(prep.parent_sock) };
    started
}

/// Asks the runner for a tracer and waits until it is attached. `Some(code)` when the task
/// must not run: the runner is gone (EOF), or sent a polite signal instead (the user gave
/// up while strace attached).
///
/// Attaching needs `ptrace` rights over this non-dumpable process: the runner's strace has
/// them (same user, and the sandbox's user namespace is its child). Under Yama's
/// `ptrace_scope` 1 it would also need to be an ancestor, which it is not; allowing any
/// tracer for this short window lets it in, and only processes with those rights anyway
/// (the task does not exist yet and has no capabilities). The window closes once traced.
fn wait_for_tracer(channel: Option<i32>) -> Option<i32> {
    let Some(fd) = channel else { return Some(EXIT_SUPERVISOR) };
    // SAFETY: prctl with integer arguments; EINVAL without Yama is fine.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    // SAFETY: a one-byte send from a valid buffer on our own socket.
    let sent = unsafe { libc::send(fd, [TRACE_ME].as_ptr().cast(), 1, libc::MSG_NOSIGNAL) };
    let answer = if sent == 1 { read_byte(fd) } else { None };
    // SAFETY: as above; 0 takes the permission back.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, 0, 0, 0, 0) };
    match answer {
        Some(TRACED) => None,
        Some(sig) => Some(128 + i32::from(sig)),
        None => Some(EXIT_SUPERVISOR),
    }
}

/// One byte from a blocking or non-blocking descriptor: `None` at EOF or on an error.
fn read_byte(fd: i32) -> Option<u8> {
    loop {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. Interrupted (the tracer attaching): tried again.
        if unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte read into a valid buffer.
        match unsafe { libc::recv(fd, (&raw mut byte).cast(), 1, libc::MSG_DONTWAIT) } {
            1 => return Some(byte),
            0 => return None,
            _ => match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => {}
                _ => return None,
            },
        }
    }
}

/// Starts the payload's relays, all or none.
fn start_relays(relays: &[SandboxRelay]) -> Result<Vec<paddock_portbridge::RelayHandle>, String> {
    use paddock_portbridge::{HandoffToTcp, RelayOptions, TcpToUnix};
    let mut handles = Vec::new();
    for relay in relays {
        let handle = match relay {
            SandboxRelay::TcpToUnix { port, socket } => {
                TcpToUnix::start(*port, std::path::Path::new(&socket.0), RelayOptions::default())
            }
            SandboxRelay::Inbound { fd, ports } => {
                let channel = inherited(*fd, "inbound connection")?;
                // A host client may arrive before the task's server listens: it is held
                // while the server starts (connect_wait), not refused.
                let options = RelayOptions {
                    connect_wait: std::time::Duration::from_secs(30),
                    ..RelayOptions::default()
                };
                let targets: Vec<(u16, std::net::SocketAddr)> = ports
                    .iter()
                    .map(|&p| (p, std::net::SocketAddr::from(([127, 0, 0, 1], p))))
                    .collect();
                HandoffToTcp::start(channel, &targets, options)
            }
        };
        handles.push(handle.map_err(|e| format!("cannot start a bridge in the sandbox: {e}"))?);
    }
    Ok(handles)
}

/// Takes a descriptor the runner handed to the supervisor (`what` it is, for the error),
/// close-on-exec from now on; the child's sweep closes its copy before the task runs.
pub(super) fn inherited(fd: i32, what: &str) -> Result<std::os::fd::OwnedFd, String> {
    // SAFETY: F_SETFD on a descriptor number; a closed one fails with EBADF.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(format!(
            "the {what} descriptor {fd} is not open: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the descriptor is open (checked above) and the payload gives it to the
    // supervisor alone.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// The child's side of the notification setup: installs the filter with a listener, sends
/// it up fd 3 (the supervisor serves it once the child has executed), and closes both. Exits
/// 125 on any failure. No allocation.
fn install_notify(program: &[libc::sock_filter]) {
    fn fail(what: &[u8], errno: i32) -> ! {
        let mut msg = [0u8; 256];
        let mut len = 0;
        for part in [b"paddock: cannot ".as_slice(), what, b" (errno ".as_slice()] {
            msg[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        let mut digits = [0u8; 12];
        let mut n = errno.unsigned_abs();
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + u8::try_from(n % 10).unwrap_or(0);
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for part in
            [&digits[i..], b"); unix sockets depend on it; the task was not run\n".as_slice()]
        {
            msg[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        // SAFETY: write and _exit are async-signal-safe; the buffer is valid.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), len);
            libc::_exit(EXIT_SUPERVISOR)
        }
    }
    let listener = match notify::filter::install(program) {
        Ok(fd) => fd,
        Err(errno) => fail(b"install the write-notification filter", errno),
    };
    if let Err(errno) = crate::fdpass::send_fd(NOTIFY_SOCK_FD, listener) {
        fail(b"pass the notification listener to the supervisor", errno);
    }
    // SAFETY: closing our copy: the message in the socket holds the listener now.
    unsafe { libc::close(listener) };
    // SAFETY: closing the socket pair's end; nothing of it reaches the task.
    unsafe { libc::close(NOTIFY_SOCK_FD) };
}

/// The task's side of the fork. Never returns.
fn child(p: &Prepared, mask: &libc::sigset_t) -> ! {
    // SAFETY: plain syscalls on our own process with valid arguments.
    unsafe {
        if let Some((gate, write_end)) = p.gate {
            // Wait until the supervisor's relays listen (EOF), retrying an interrupted read.
            libc::close(write_end);
            let mut byte = 0u8;
            while libc::read(gate, (&raw mut byte).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
        libc::setpgid(0, 0);
        libc::sigprocmask(libc::SIG_UNBLOCK, mask, std::ptr::null_mut());
        if libc::chdir(p.cwd.as_ptr()) != 0 {
            die(EXIT_SUPERVISOR, b"paddock: cannot enter the working directory inside the sandbox; is it readable under the policy (grant it with allow.read)?\n");
        }
    }
    if let Some(tracer) = &p.tracer {
        tracer.exec(p.launch.env());
    }
    // Every descriptor above 2 goes: payloads, the signal pipe, the signalfd, the record
    // descriptor (SEC-09, FSR-06); the listener's socket stays at fd 3 until exec.
    let mut first = 3;
    if let Some(n) = &p.notify {
        // SAFETY: dup2 on descriptors of our own process.
        if n.child_sock != NOTIFY_SOCK_FD && unsafe { libc::dup2(n.child_sock, NOTIFY_SOCK_FD) } < 0
        {
            die(
                EXIT_SUPERVISOR,
                b"paddock: cannot keep the notification socket; the task was not run\n",
            );
        }
        first = NOTIFY_SOCK_FD + 1;
    }
    p.launch.exec(first, || {
        if let Some(n) = &p.notify {
            install_notify(&n.program);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_accept_full_or_trailing_argv() {
        let full: Vec<OsString> =
            ["paddock", "__supervise", "--payload-fd", "4"].iter().map(Into::into).collect();
        assert_eq!(parse_args(&full), Ok(4));
        assert_eq!(parse_args(&full[2..]), Ok(4));
        assert!(parse_args(&full[..2]).is_err());
    }

    #[test]
    fn outside_a_sandbox_it_runs_nothing() {
        // A test process is never pid 1: bwrap run without its arguments (a runner killed
        // before writing them) would start the supervisor outside any sandbox.
        let e = run(&["--payload-fd".into(), "0".into()]).unwrap_err();
        assert!(e.contains("not the sandbox's pid 1"), "{e}");
    }

    #[test]
    fn a_payload_of_another_version_is_refused() {
        assert!(same_version(crate::payload::PAYLOAD_VERSION).is_ok());
        for other in ["", "0.0.1", "99.0.0"] {
            let e = same_version(other).unwrap_err();
            assert!(e.contains("install paddock and paddock-supervisor together"), "{e}");
        }
    }
}
