//! Write notifications (`--itemize observe`): the supervisor's seccomp user-notification
//! filter on write-intent calls and `connect`, and the records it sends to the runner.
//!
//! How it fits together:
//! - [`filter`] builds a small classic-BPF program by hand (seccompiler has no
//!   `SECCOMP_RET_USER_NOTIF` action) that notifies only the calls that can write: `openat`
//!   and `open` with a write or create flag, `creat`, `openat2`, and the `mkdir`, `mknod`,
//!   `unlink`, `rmdir`, `rename`, `link`, `symlink`, `truncate`, `chmod`, `chown`, `utime*`
//!   and `*xattr` families; `connect` when connects are recorded or unix sockets are granted
//!   by path; `socket(AF_UNIX)` when unix sockets are refused. Everything else, ordinary
//!   reads included, never leaves the kernel. With path grants and no itemizing, only
//!   `connect` is notified.
//! - [`unix`]: unix sockets granted by path, whose `connect`s the supervisor makes itself.
//! - The supervisor ([`crate::supervisor`]) installs it in the task child after the main
//!   filter, with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, and receives the listener over a
//!   socket pair ([`crate::fdpass`]). Failing to install it is fatal: `socket(AF_UNIX)` is refused
//!   by it alone in this mode, and with path grants it alone decides every `connect`.
//! - [`serve`] answers the notifications on a thread of the supervisor: it reads the path or
//!   address from the caller, predicts with [`classify`] whether the kernel will refuse the
//!   call (a read-only mount: `EROFS`; no route: `ENETUNREACH`), lets the kernel run every
//!   call (`CONTINUE`: the mounts and the network namespace stay the wall, the notifier only
//!   observes), except `socket(AF_UNIX)`, which it refuses with `EPERM`, and writes one
//!   [`NotifyRecord`] per predicted denial to the record descriptor.
//!
//! A record is a prediction made just before the call runs, from the caller's own view of
//! the mounts (the supervisor runs in the sandbox, so its paths are the sandbox's, which are
//! the host's). Writes that will succeed (write grants, the private `/tmp`) and writes under
//! FUSE mounts (the observer filesystem on deny anchors records those) are not recorded.
//!
//! Duplicates: a notified call interrupted by a signal before the supervisor answers is not
//! recorded (the answer fails with `ENOENT`); if the call is restarted it is notified again
//! and recorded then, once. A call interrupted after it was let through and then restarted
//! (a blocking `open` of a FIFO under `SA_RESTART`) is recorded twice: a reader that counts
//! should count distinct `(syscall, path)` pairs.
//!
//! Not seen: calls on descriptors (`fchmod`, `ftruncate`, `fsetxattr` of a file opened
//! read-only), io_uring (refused by the main filter), and the writes of a task that made
//! itself non-dumpable (the supervisor, without capabilities, can then read neither its
//! memory nor its `/proc/PID/cwd`: the call still runs against the wall, unrecorded).
//! Relative paths need a fresh `/proc` (not the weaker mode's empty one).

use std::io::{BufRead, BufReader, Read};

use serde::{Deserialize, Serialize};

use crate::payload::Bytes;

pub mod classify;
pub mod filter;
pub mod serve;
#[cfg(test)]
mod tests;
pub mod unix;

/// What a record is about.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RecordKind {
    /// A write outside the write grants (a read-only mount).
    Write,
    /// A connection the sandbox's network cannot make.
    Network,
    /// A unix socket the policy does not grant, refused by the supervisor.
    UnixSocket,
}

/// One predicted denial, as the supervisor writes it (one JSON object a line).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct NotifyRecord {
    /// The calling thread's id in the sandbox's pid namespace.
    pub pid: u32,
    /// What kind of denial.
    pub kind: RecordKind,
    /// The syscall's name (`openat`, `mkdir`, `connect`, `socket`, ...).
    pub syscall: String,
    /// For writes: the absolute path refused (the sandbox's view, which is the host's path).
    pub path: Option<Bytes>,
    /// For connects: `ip:port` (IPv6 as `[ip]:port`).
    pub target: Option<String>,
    /// The errno the call gets (or is predicted to get): `EROFS`, `ENETUNREACH`, `EPERM`.
    pub errno: String,
}

impl NotifyRecord {
    /// The record as one line of JSON, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        // Serializing strings, numbers and byte strings into a Vec cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// The oldest kernel the notifier works on: 5.5, for `SECCOMP_USER_NOTIF_FLAG_CONTINUE`
/// (user notifications and `NEW_LISTENER` are 5.0; `SYNC_WAKE_UP`, 6.6, is optional).
pub const MIN_KERNEL: (u32, u32) = (5, 5);

/// Whether the running kernel can serve write notifications, or why not. The supervisor
/// refuses observe mode (exit 125) without them rather than let notified calls hang.
pub fn kernel_supported() -> Result<(), String> {
    let version = kernel_version(&kernel_release()?);
    if version >= MIN_KERNEL {
        Ok(())
    } else {
        Err(format!(
            "Linux {}.{} has no seccomp CONTINUE answers (Linux {}.{} or newer)",
            version.0, version.1, MIN_KERNEL.0, MIN_KERNEL.1
        ))
    }
}

/// The running kernel's release (`6.1.0-18-amd64`), from `uname(2)`: the supervisor asks
/// inside the sandbox, whose `/proc` may be an empty tmpfs (the weaker mode).
pub fn kernel_release() -> Result<String, String> {
    let mut uts = std::mem::MaybeUninit::<libc::utsname>::uninit();
    // SAFETY: uname fills the buffer it is given, of the right type; the result is checked.
    if unsafe { libc::uname(uts.as_mut_ptr()) } != 0 {
        return Err(format!("cannot read the kernel version: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: uname succeeded, so `release` is a NUL-terminated string in the buffer.
    let release = unsafe { std::ffi::CStr::from_ptr(uts.assume_init_ref().release.as_ptr()) };
    Ok(release.to_string_lossy().into_owned())
}

/// `(major, minor)` of a kernel release string such as `6.1.0-18-amd64`.
pub fn kernel_version(release: &str) -> (u32, u32) {
    let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The longest line [`read_records`] accepts; a path is at most 4096 bytes, written as hex
/// at worst, so a genuine record is far shorter.
pub const MAX_LINE: usize = 64 * 1024;

/// Reads records line by line until EOF (or a read error), calling `f` for each. A malformed
/// line (not a record, not UTF-8 JSON, longer than [`MAX_LINE`]) is skipped and counted; the
/// count is returned. Nothing of a malformed line is passed on.
pub fn read_records<R: Read>(input: R, mut f: impl FnMut(NotifyRecord)) -> u64 {
    let mut reader = BufReader::new(input);
    let mut malformed = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        // A read error ends the stream like EOF.
        let (ended, too_long) = read_bounded_line(&mut reader, &mut line).unwrap_or((true, false));
        if too_long {
            malformed += 1;
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<NotifyRecord>(&line) {
                Ok(record) => f(record),
                Err(_) => malformed += 1,
            }
        }
        if ended {
            return malformed;
        }
    }
}

/// Reads one line into `line` (without its newline), keeping at most [`MAX_LINE`] bytes and
/// discarding the rest. Returns (EOF reached, line was too long).
fn read_bounded_line<R: BufRead>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<(bool, bool)> {
    let mut too_long = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((true, too_long));
        }
        let (chunk, used, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        if line.len() + chunk.len() > MAX_LINE {
            too_long = true;
        } else if !too_long {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if done {
            return Ok((false, too_long));
        }
    }
}
