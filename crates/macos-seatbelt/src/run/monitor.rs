//! The violation monitor: a `log stream` started before the task, keyed to its log tag,
//! whose lines are parsed into violations when the task is done.
//!
//! Every deny rule of the task's profile carries `(with message "TAG")`, so the predicate
//! `eventMessage CONTAINS "TAG"` selects this task's denials and no other sandbox's. The
//! stream must be running before the task starts or the first denials are lost: [`start`]
//! waits for the line `log` prints when it begins streaming. The unified log delivers
//! records a little after the fact, so [`finish`] waits a grace period before it stops the
//! stream: `SIGTERM` to its process group, then `SIGKILL` if it is still there after
//! [`STOP_LIMIT`].
//!
//! The program is a path the caller gives ([`LOG_PROGRAM`] on macOS), so that the monitor
//! runs on every Unix against a stand-in.
//!
//! [`start`]: LogMonitor::start_with
//! [`finish`]: LogMonitor::finish

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use paddock_policy::Violation;

use crate::command::command;
use crate::error::Error;
use crate::violation::{LOG_PROGRAM, log_stream_args, parse_log_stream};

/// How long a stopped `log` gets to exit after `SIGTERM` before it is killed.
pub const STOP_LIMIT: Duration = Duration::from_secs(1);

/// A running `log stream` collecting one task's denials.
#[derive(Debug)]
pub struct LogMonitor {
    /// `log`, until it is stopped (and reaped: its group id is then no longer ours).
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
    tag: String,
    notes: Vec<String>,
}

impl LogMonitor {
    /// [`LogMonitor::start_with`] macOS's own `log` ([`LOG_PROGRAM`]).
    pub fn start(tag: &str, ready_within: Duration) -> Result<LogMonitor, Error> {
        LogMonitor::start_with(Path::new(LOG_PROGRAM), tag, ready_within)
    }

    /// Starts `program stream ...` for `tag`, in a process group of its own, and waits up to
    /// `ready_within` for it to announce that it streams. If it exits before, that is an
    /// error (with its stderr); if it is still silent when the time is up, the monitor runs
    /// on and says so in its notes, because denials are enforced either way and only their
    /// report is at stake.
    pub fn start_with(
        program: &Path,
        tag: &str,
        ready_within: Duration,
    ) -> Result<LogMonitor, Error> {
        let mut child = command(program)
            .args(log_stream_args(tag))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::Spawn { program: program.to_path_buf(), message: e.to_string() })?;
        let Some(stdout) = child.stdout.take() else {
            stop(&mut child);
            return Err(Error::Spawn {
                program: program.to_path_buf(),
                message: "no stdout pipe".to_owned(),
            });
        };

        let lines = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let sink = Arc::clone(&lines);
        let reader = std::thread::Builder::new()
            .name("paddock-log".into())
            .spawn(move || {
                let mut ready = Some(ready_tx);
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(tx) = ready.take() {
                        // The first line is `Filtering the log data using ...`: streaming began.
                        let _ = tx.send(());
                    }
                    if let Ok(mut all) = sink.lock() {
                        all.push(line);
                    }
                }
            })
            .map_err(|e| {
                stop(&mut child);
                Error::Spawn { program: program.to_path_buf(), message: e.to_string() }
            })?;

        let mut notes = Vec::new();
        match ready_rx.recv_timeout(ready_within) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Its output ended before a line: it exited, or will without streaming.
                stop(&mut child);
                let stderr = read_all(child.stderr.take());
                let _ = reader.join();
                return Err(Error::MonitorNotReady { seconds: ready_within.as_secs(), stderr });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if exited(&child) {
                    stop(&mut child);
                    let stderr = read_all(child.stderr.take());
                    let _ = reader.join();
                    return Err(Error::MonitorNotReady { seconds: ready_within.as_secs(), stderr });
                }
                notes.push(format!(
                    "`log stream` did not announce itself within {} s; denials of the task's first \
                     moments may be missing from the report",
                    ready_within.as_secs()
                ));
            }
        }
        Ok(LogMonitor {
            child: Some(child),
            lines,
            reader: Some(reader),
            tag: tag.to_owned(),
            notes,
        })
    }

    /// The pid of `log`.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Waits `grace` for late records, stops the stream and returns the task's violations
    /// (deduplicated) and notes (unmapped denials, a late start).
    pub fn finish(mut self, grace: Duration) -> (Vec<Violation>, Vec<String>) {
        std::thread::sleep(grace);
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let text = match self.lines.lock() {
            Ok(all) => all.join("\n"),
            Err(_) => String::new(),
        };
        let (violations, mut notes) = parse_log_stream(&text, Some(&self.tag));
        let mut all_notes = std::mem::take(&mut self.notes);
        all_notes.append(&mut notes);
        (violations, all_notes)
    }
}

impl Drop for LogMonitor {
    fn drop(&mut self) {
        // A monitor dropped without `finish` (the runner failed) must not leave `log` behind.
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }
}

/// Stops `log` and whatever it started: `SIGTERM` to its group, `SIGKILL` after
/// [`STOP_LIMIT`], then reaps it. Called once per child: the group is signalled only while
/// its leader is unreaped, so that its id is still `log`'s.
fn stop(child: &mut Child) {
    kill_group(child, libc::SIGTERM);
    let until = Instant::now() + STOP_LIMIT;
    while Instant::now() < until && !exited(child) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its children (a stand-in's `sleep`) may hold the pipe: they go too.
    kill_group(child, libc::SIGKILL);
    let _ = child.wait();
}

/// Whether `log` has ended, without reaping it.
fn exited(child: &Child) -> bool {
    libc::pid_t::try_from(child.id())
        .map_or(true, |pid| super::supervise::exited(pid).unwrap_or(true))
}

fn kill_group(child: &Child, sig: i32) {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else { return };
    // SAFETY: killpg with integers; the group is the monitor's own (process_group(0)).
    unsafe { libc::killpg(pgid, sig) };
}

fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text);
    }
    text
}
