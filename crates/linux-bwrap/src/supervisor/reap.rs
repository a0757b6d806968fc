//! The supervisor once the task runs, as the sandbox's pid 1: relaying the runner's polite
//! signals to the task's group, reaping everything reparented to it until the task exits,
//! the exit code (the task's, 128+N for signal N), and the end of what is left: the rest of
//! the pid namespace killed and reaped before the runner hears `EXITED`
//! ([`super::EXITED`]). With strace inside, what the task left is killed but strace, which
//! is awaited to write its last lines.

use super::{EXIT_SUPERVISOR, TaskEnd};

/// Kills every process of the sandbox but this one and strace (whose executable is
/// [`crate::trace::STRACE_PATH`]): what the task left behind after its group was killed.
/// Scanned twice, for what forked during the first pass.
pub(super) fn kill_all_but_strace() {
    let own = std::process::id();
    for _ in 0..2 {
        let Ok(entries) = std::fs::read_dir("/proc") else { return };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let strace = std::fs::read_link(entry.path().join("exe"))
                .is_ok_and(|exe| exe.as_os_str() == crate::trace::STRACE_PATH);
            if pid == own || strace {
                continue;
            }
            if let Ok(pid) = libc::pid_t::try_from(pid) {
                // SAFETY: kill with integers, on a process of this pid namespace.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Reaps children until none is left or `limit` has passed, waking on SIGCHLD (`sfd`).
pub(super) fn await_children(sfd: i32, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid status pointer.
            match unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } {
                0 => break,
                pid if pid > 0 => {}
                _ => return, // ECHILD: nobody left.
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX).max(1);
        let mut pfd = libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; then draining the non-blocking signalfd into a buffer of
        // the right size.
        unsafe {
            libc::poll(&mut pfd, 1, ms);
            let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
            while libc::read(sfd, info.as_mut_ptr().cast(), info.len()) > 0 {}
        }
    }
}

/// The exit code for a wait status: the task's, 128+N for signal N
/// ([`EXIT_SUPERVISOR`] for anything else). `paddock-supervisor-nolibc` has its own copy,
/// checked against this one by its tests.
pub fn status_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        EXIT_SUPERVISOR
    }
}

/// Relays signals and reaps until the task exits; returns its exit code, and the signal
/// channel unless it was closed meanwhile.
pub(super) fn supervise(
    task: libc::pid_t,
    sfd: i32,
    mut signal_fd: Option<i32>,
) -> (i32, Option<i32>) {
    loop {
        let mut fds = [
            libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: signal_fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: a valid array of two pollfd; a negative fd is ignored by poll.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // Should not happen; fall through to reaping so that we never spin blind.
        }
        if fds[0].revents != 0 {
            let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
            // SAFETY: reading into a buffer of the right size; the fd is non-blocking.
            while unsafe { libc::read(sfd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
        }
        // Reap everything reparented to us; return when the task itself is gone.
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if pid == task {
                // Whatever the task left in its group goes with it; the rest of the pid
                // namespace is ended by `end_the_rest`, or dies when we, its pid 1, exit.
                // SAFETY: signalling a process group we created.
                unsafe { libc::kill(-task, libc::SIGKILL) };
                return (status_code(status), signal_fd);
            }
        }
        if let Some(fd) = signal_fd
            && fds[1].revents != 0
        {
            let mut buf = [0u8; 16];
            // SAFETY: reading into a valid buffer.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            let again = n < 0
                && matches!(
                    std::io::Error::last_os_error().raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN)
                );
            if n == 0 {
                // The runner holds its end until bwrap is gone: end of file while the task
                // runs means the runner died. The sandbox goes with it even if the parent-death
                // signal bwrap arranged did not arrive.
                // SAFETY: signalling the task's process group.
                unsafe { libc::kill(-task, libc::SIGKILL) };
                return (128 + libc::SIGKILL, signal_fd);
            } else if n < 0 && !again {
                // SAFETY: closing our own descriptor.
                unsafe { libc::close(fd) };
                signal_fd = None;
            } else if n > 0 {
                for &sig in &buf[..usize::try_from(n).unwrap_or(0)] {
                    if is_polite(i32::from(sig)) {
                        // SAFETY: signalling the task's process group.
                        unsafe { libc::kill(-task, i32::from(sig)) };
                    }
                }
            }
        }
    }
}

/// Once the task has exited and the supervisor is done (a tracer inside has written its
/// last lines, the relays are stopped): kills what is left of the sandbox (as the kernel
/// would when this process, its pid 1, exits), reaps it all, and tells the runner how the
/// task ended ([`TaskEnd`]: [`EXITED`](super::EXITED), `code` and what everything reaped used), which may
/// then finish while the kernel tears the namespaces down.
pub(super) fn end_the_rest(signal_fd: Option<i32>, code: i32) {
    // SAFETY: kill with integers: every process of this pid namespace but us.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid status pointer.
        if unsafe { libc::waitpid(-1, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
        {
            break;
        }
    }
    if let Some(fd) = signal_fd {
        let message = TaskEnd::of_children(code).encode();
        // SAFETY: sending from a valid buffer of its length, never blocking.
        unsafe {
            libc::send(
                fd,
                message.as_ptr().cast(),
                message.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }
}

/// The signals the runner may relay to the task's group.
pub const POLITE_SIGNALS: [i32; 6] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2];

fn is_polite(sig: i32) -> bool {
    POLITE_SIGNALS.contains(&sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(status_code(3 << 8), 3);
        assert_eq!(status_code(libc::SIGKILL), 137);
    }
}
