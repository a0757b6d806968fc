//! Running the probe's helpers (`bwrap --version`, a sandboxed `true`, strace) with a bound
//! on how long they may take: the probe must answer, never hang the run or `paddock check`.
//!
//! A helper that does not exit within [`LIMIT`] is killed and counts as failed. Its output
//! is read until the helper exits and then only briefly ([`AFTER_EXIT`]): a process it left
//! behind can hold the pipes open for ever (bubblewrap's sandbox child, stuck where the
//! pid namespace and `/proc` disagree, in a session of its own that no group kill reaches).

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The longest a helper may run.
pub const LIMIT: Duration = Duration::from_secs(10);
/// How long output is still read once the helper has exited.
const AFTER_EXIT: Duration = Duration::from_millis(300);

/// What a helper did: whether it exited successfully, and its output (stdout, then
/// stderr), with a last line saying so when it had to be killed.
pub fn output(program: &Path, args: &[&str]) -> Option<(bool, String)> {
    output_within(program, args, LIMIT)
}

fn output_within(program: &Path, args: &[&str], limit: Duration) -> Option<(bool, String)> {
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let (mut out, mut err) = (child.stdout.take()?, child.stderr.take()?);
    for fd in [out.as_raw_fd(), err.as_raw_fd()] {
        // SAFETY: fcntl on descriptors this function owns; integer arguments only.
        unsafe {
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK)
        };
    }
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let status =
        collect(&mut child, (&mut out, &mut err), (&mut stdout, &mut stderr), started + limit);
    let mut text = String::from_utf8_lossy(&stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&stderr));
    match status {
        Some(status) => Some((status.success(), text)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            text.push_str(&format!("\n{} did not finish within {:?}", program.display(), limit));
            Some((false, text))
        }
    }
}

/// Reads both pipes until they end (or [`AFTER_EXIT`] after the child's exit) and returns
/// the child's status; `None` when it was still running at `deadline`. One `poll` waits for
/// output, the pipes' end and the child's exit (a pidfd; without one, Linux before 5.3, it
/// looks again every millisecond), so an answer is never late by a polling period.
fn collect(
    child: &mut Child,
    (out, err): (&mut ChildStdout, &mut ChildStderr),
    (stdout, stderr): (&mut Vec<u8>, &mut Vec<u8>),
    deadline: Instant,
) -> Option<ExitStatus> {
    // SAFETY: pidfd_open with a pid of our own unreaped child and no flags; checked below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0) };
    // SAFETY: a descriptor just opened, owned by nobody else (when the call succeeded).
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as libc::c_int) });
    let mut open = [true, true];
    let mut exited: Option<(ExitStatus, Instant)> = None;
    loop {
        let wake = match exited {
            Some((_, at)) => (at + AFTER_EXIT).min(deadline),
            None => deadline,
        };
        let mut wait = wake.saturating_duration_since(Instant::now()).as_millis().max(1);
        if pidfd.is_none() && exited.is_none() {
            wait = 1;
        }
        let fd_or_none = |on: bool, fd: i32| if on { fd } else { -1 };
        let mut fds = [
            libc::pollfd {
                fd: fd_or_none(open[0], out.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fd_or_none(open[1], err.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fd_or_none(exited.is_none(), pidfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: three valid pollfd structs; a negative fd is ignored by poll.
        unsafe { libc::poll(fds.as_mut_ptr(), 3, i32::try_from(wait).unwrap_or(i32::MAX)) };
        open[0] = open[0] && drain(out, stdout);
        open[1] = open[1] && drain(err, stderr);
        if exited.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            exited = Some((status, Instant::now()));
        }
        match exited {
            Some((status, _)) if !open[0] && !open[1] => return Some(status),
            Some((status, at)) if at.elapsed() >= AFTER_EXIT => return Some(status),
            None if Instant::now() >= deadline => return None,
            _ => {}
        }
    }
}

/// Reads what a non-blocking pipe holds into `buf`; false once it has ended.
fn drain(pipe: &mut impl Read, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_status_are_collected() {
        let (ok, text) = output(Path::new("/bin/sh"), &["-c", "echo out; echo err >&2"]).unwrap();
        assert!(ok);
        assert_eq!(text, "out\nerr\n");
        let (ok, _) = output(Path::new("/bin/sh"), &["-c", "exit 3"]).unwrap();
        assert!(!ok);
    }

    #[test]
    fn a_process_left_holding_the_pipes_does_not_hold_the_answer() {
        // The helper exits at once; what it started keeps its stdout open for a while.
        let started = Instant::now();
        let (ok, text) =
            output(Path::new("/bin/sh"), &["-c", "setsid sleep 30 & echo $!; exit 0"]).unwrap();
        let left: i32 = text.trim().parse().unwrap_or_else(|_| panic!("{text}"));
        let elapsed = started.elapsed();
        // SAFETY: kill with a pid this test's helper started and an integer signal.
        unsafe { libc::kill(left, libc::SIGKILL) };
        assert!(ok, "{text}");
        assert!(elapsed < Duration::from_secs(20), "waited for the leftover: {elapsed:?}");
    }

    #[test]
    fn a_helper_that_does_not_finish_is_killed_and_fails() {
        let (ok, text) = output_within(
            Path::new("/bin/sh"),
            &["-c", "exec sleep 30"],
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(!ok);
        assert!(text.contains("did not finish within"), "{text}");
    }
}
