//! `paddock-supervisor __serve-notify`: the supervisor of an observed run, taking over from
//! `paddock-supervisor-nolibc` once the task has made its first notified call or run for a
//! millisecond.
//!
//! The supervisor without a C library starts an observed task as it starts any other (the
//! walls, the task's child installing the main filter and then the notification filter,
//! whose listener it sends up), and holds the listener without serving it: a task that ends
//! within a millisecond without a call the filter notifies ends without the notifier's start
//! on its path (glibc's, the payload's parse, a thread: about 0.75 ms here), and a longer one
//! has it beside it. At the first notification, or after that millisecond, it executes this
//! binary in its own process, so the server stays pid 1, the parent of the task and the
//! ancestor of everything it starts (reading their memory needs that where Yama restricts
//! `ptrace` to ancestors), and its walls stay where they were: no capability, the same
//! namespaces, no filter. The runner hands it a copy of `paddock-supervisor` nobody may read
//! (`runtime::exec_only`): executed, the process is not dumpable from its first instruction,
//! so the task, the same user, never gets to open `/proc/1/mem` before `main` runs.
//!
//! A notified call waits meanwhile (the kernel holds it until answered). This process
//! serves the listener on a thread (`notify::serve`), relays polite signals and reaps until
//! the task exits, as `super::reap::supervise` does, and exits with its status. Everything before
//! the task's start (the payload, the inner mounts, the capabilities, the mount identities,
//! the `STARTED` byte) was done by the supervisor it replaces.
//!
//! Its command line (the runner writes all but the last four, `crate::nolibc`):
//! `__serve-notify --version V --record-fd N --signal-fd N|- --options [c][u]|- --task PID
//! --listener N`; `c` notifies `connect`, `u` refuses `socket(AF_UNIX)`.

use std::ffi::OsString;

use super::reap::{end_the_rest, supervise};
use super::{EXIT_SUPERVISOR, inherited, same_version};
use crate::notify;

use crate::SERVE_NOTIFY_SUBCOMMAND;

/// What the command line says.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    version: String,
    record_fd: i32,
    signal_fd: Option<i32>,
    opts: notify::filter::Options,
    task: libc::pid_t,
    listener: i32,
}

fn parse_args(args: &[OsString]) -> Result<Args, String> {
    let usage = || {
        format!(
            "usage: paddock-supervisor {SERVE_NOTIFY_SUBCOMMAND} --version V --record-fd N \
             --signal-fd N|- --options [c][u]|- --task PID --listener N (internal)"
        )
    };
    let args: Vec<&str> =
        args.iter().map(|a| a.to_str()).collect::<Option<_>>().ok_or_else(usage)?;
    let number = |s: &str| s.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(usage);
    match args.as_slice() {
        [
            "--version",
            version,
            "--record-fd",
            record,
            "--signal-fd",
            signal,
            "--options",
            options,
            "--task",
            task,
            "--listener",
            listener,
        ] => {
            let known = options.chars().all(|c| matches!(c, 'c' | 'u')) || *options == "-";
            if !known {
                return Err(usage());
            }
            Ok(Args {
                version: (*version).to_owned(),
                record_fd: number(record)?,
                signal_fd: if *signal == "-" { None } else { Some(number(signal)?) },
                opts: notify::filter::Options {
                    record_connects: options.contains('c'),
                    refuse_unix_sockets: options.contains('u'),
                    unix_grants: false,
                },
                task: number(task)?,
                listener: number(listener)?,
            })
        }
        _ => Err(usage()),
    }
}

/// The entry point: `args` after the subcommand. Returns the process's exit code.
pub fn main_from_args(args: &[OsString]) -> i32 {
    // Before anything else, though the copy nobody may read made it so already.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("paddock: sandbox supervisor: {message}");
            EXIT_SUPERVISOR
        }
    }
}

fn run(args: &[OsString]) -> Result<i32, String> {
    // Only ever the sandbox's pid 1, the task's parent, where the supervisor without a C
    // library executed it.
    if std::process::id() != 1 {
        return Err("not the sandbox's pid 1: refusing to serve outside a sandbox".to_owned());
    }
    let args = parse_args(args)?;
    let task = args.task;
    let served = start(&args);
    let server = match served {
        Ok(server) => server,
        Err(e) => {
            // Its notified calls would wait for ever.
            // SAFETY: signalling the task's process group, ours.
            unsafe { libc::kill(-task, libc::SIGKILL) };
            return Err(e);
        }
    };
    let (sfd, _mask) = super::sigchld_fd()?;
    let (code, signal_fd) = supervise(task, sfd, args.signal_fd);
    // Bounded: a record write stuck on a full pipe must not keep the sandbox alive.
    server.stop(std::time::Duration::from_secs(1));
    end_the_rest(signal_fd, code);
    Ok(code)
}

/// Checks the version and starts serving the listener.
fn start(args: &Args) -> Result<notify::serve::Server, String> {
    same_version(&args.version)?;
    // The server's executable came on a descriptor of its own, left open across `execveat`.
    // SAFETY: closing a descriptor number of our own process; EBADF when absent is fine.
    unsafe { libc::close(crate::NOTIFIER_EXE_FD) };
    let listener = inherited(args.listener, "notification listener")?;
    let records = std::fs::File::from(inherited(args.record_fd, "record")?);
    let grants = notify::unix::Grants::new(&[], false);
    notify::serve::Server::start(listener, Some(records), args.opts, grants)
        .map_err(|e| format!("cannot serve the write notifications: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<OsString> {
        s.iter().map(Into::into).collect()
    }

    #[test]
    fn the_command_line_the_supervisor_without_libc_builds_is_read() {
        let line = [
            "--version",
            "1.2.3",
            "--record-fd",
            "7",
            "--signal-fd",
            "6",
            "--options",
            "cu",
            "--task",
            "2",
            "--listener",
            "5",
        ];
        let got = parse_args(&args(&line)).unwrap();
        assert_eq!(got.version, "1.2.3");
        assert_eq!((got.record_fd, got.signal_fd, got.task, got.listener), (7, Some(6), 2, 5));
        assert!(got.opts.record_connects && got.opts.refuse_unix_sockets && !got.opts.unix_grants);
        let mut none = line;
        none[5] = "-";
        none[7] = "-";
        let got = parse_args(&args(&none)).unwrap();
        assert_eq!(got.signal_fd, None);
        assert!(!got.opts.record_connects && !got.opts.refuse_unix_sockets);
    }

    #[test]
    fn anything_else_is_refused() {
        let good = [
            "--version",
            "1",
            "--record-fd",
            "7",
            "--signal-fd",
            "6",
            "--options",
            "c",
            "--task",
            "2",
            "--listener",
            "5",
        ];
        for (at, bad) in [(3, "x"), (3, "-1"), (7, "z"), (9, ""), (11, "-")] {
            let mut line = good;
            line[at] = bad;
            assert!(parse_args(&args(&line)).is_err(), "{line:?}");
        }
        assert!(parse_args(&args(&good[..10])).is_err());
    }

    #[test]
    fn outside_a_sandbox_it_serves_nothing() {
        let e = run(&args(&["--version", "1"])).unwrap_err();
        assert!(e.contains("not the sandbox's pid 1"), "{e}");
    }
}
