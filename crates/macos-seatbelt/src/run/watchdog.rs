//! What a `kill -9` of the runner leaves behind: nothing. macOS has no parent-death signal
//! and no pid namespace, so each run starts a watchdog first: a `/bin/sh` in a process group
//! of its own, deaf to the terminal's signals, reading a pipe whose only writer is the
//! runner.
//!
//! The runner (and the task's own child, between fork and exec, before anything of the
//! task runs) writes `pid N` for each process group the run starts; at the end it writes
//! `done` and the watchdog exits. If the pipe ends without `done`, the runner is gone: the
//! watchdog kills every group it was told of and removes the run's directories (`rm -rf`
//! follows no link the task left there).
//!
//! The pipe's write end is close-on-exec, so no task ever holds it (a task that did would
//! keep the watchdog waiting for as long as it lives).

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use crate::command::command;
use crate::error::Error;

/// The watchdog's program: told process groups, then `done` or the end of its input.
const SCRIPT: &str = r#"trap '' INT HUP TERM QUIT TSTP TTIN TTOU
groups=
while IFS= read -r line; do
  case $line in
    done) exit 0 ;;
    "pid "*) groups="$groups ${line#pid }" ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
for d in "$@"; do rm -rf -- "$d"; done
"#;

/// A run's watchdog; [`Watchdog::done`] dismisses it, dropping it without that is the
/// runner's death to the watchdog (it cleans up).
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    pipe: Option<std::io::PipeWriter>,
}

impl Watchdog {
    /// Starts the watchdog of a run whose directories are `dirs` (removed if the runner
    /// dies).
    pub(crate) fn start(dirs: &[PathBuf]) -> Result<Watchdog, Error> {
        let failed = |e: std::io::Error| Error::Run {
            what: "start the run's watchdog".to_owned(),
            message: e.to_string(),
        };
        let (reader, writer) = std::io::pipe().map_err(failed)?;
        let child = command("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("paddock-watchdog")
            .args(dirs)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(failed)?;
        Ok(Watchdog { child, pipe: Some(writer) })
    }

    /// The pipe's write end, for a child to announce its own group between fork and exec
    /// ([`announce_self`]).
    pub(crate) fn fd(&self) -> RawFd {
        self.pipe.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Tells the watchdog of the process group `pgid`.
    pub(crate) fn watch(&mut self, pgid: u32) {
        if let Some(pipe) = &mut self.pipe {
            let _ = writeln!(pipe, "pid {pgid}");
        }
    }

    /// The run ended and cleaned up after itself: the watchdog leaves everything alone.
    pub(crate) fn done(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(b"done\n");
        }
        let _ = self.child.wait();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Not dismissed (an error path): the runner cleans up itself, so tell the watchdog
        // the run is done rather than have it act as if the runner had died.
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(b"done\n");
            drop(pipe);
            let _ = self.child.wait();
        }
    }
}

/// Writes `pid <own pid>\n` to `fd`: called in a child between fork and exec, so it uses
/// only `getpid` and `write` (async-signal-safe) and no allocation.
pub(crate) fn announce_self(fd: RawFd) {
    let mut buf = [0u8; 32];
    let prefix = b"pid ";
    buf[..prefix.len()].copy_from_slice(prefix);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut len = prefix.len();
    let end = buf.len() - 1;
    len += paddock_policy::write_decimal(pid, &mut buf[len..end]);
    buf[len] = b'\n';
    len += 1;
    // SAFETY: `buf[..len]` is initialized memory of ours; a failed write leaves the run
    // unwatched, never unsafe.
    let _ = unsafe { libc::write(fd, buf.as_ptr().cast(), len) };
}
