//! An exact, streaming, fast parser of what `strace -f` writes, and the failed calls in it.
//!
//! paddock runs a task under `strace -f` to say afterwards which of its file and network calls
//! were denied. This crate turns that output into [`Event`]s (a syscall with its arguments and
//! outcome, a signal, an exit, a message of strace itself), pairs the two halves of calls that
//! strace split between threads, and yields every failed call as a [`Denial`] with its paths
//! decoded to the exact bytes. It makes no OS calls: input is a byte slice or any
//! [`std::io::BufRead`], and paths stay bytes (`Vec<u8>`, [`std::ffi::OsString`]) end to end.
//!
//! # Example
//!
//! ```
//! use paddock_strace_parse::{denials, parse_slice};
//!
//! let log = br#"8817  openat(AT_FDCWD, "/etc/passwd", O_RDONLY) = 4
//! 8902  openat(AT_FDCWD, "/root/my \"notes\"", O_RDONLY|O_CLOEXEC <unfinished ...>
//! 8903  gettid()                          = 8903
//! 8902  <... openat resumed>)             = -1 EACCES (Permission denied)
//! "#;
//! let failed: Vec<_> = denials(parse_slice(log)).collect();
//! assert_eq!(failed.len(), 1);
//! assert_eq!(failed[0].pid, Some(8902));
//! assert_eq!(failed[0].errno, "EACCES");
//! assert_eq!(failed[0].paths[0].bytes, b"/root/my \"notes\"");
//! assert_eq!(failed[0].flags.as_deref(), Some("O_RDONLY|O_CLOEXEC"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Terminology
//!
//! - **Line**: one line of strace output. Under `-f` it starts with the thread id.
//! - **Split call**: a call strace printed in two lines, `NAME(ARGS <unfinished ...>` and later
//!   `<... NAME resumed>ARGS) = RET`, because another thread printed in between. The parser
//!   pairs them by pid into one [`Syscall`] event.
//! - **Event**: what one line, or one paired split call, says ([`EventKind`]).
//! - **Diagnostic**: something wrong with the log itself (a malformed line, a resume without
//!   its start, a call never resumed), reported as an [`Error`] next to the events. Parsing
//!   never stops for one.
//! - **Denial**: a call that failed (`= -1 ERRNO`), with its paths, dirfds, flags and errno.
//!   Whether it was the sandbox that said no is for the policy crate to decide.
//!
//! # Streaming and memory
//!
//! [`parse_reader`] reads any [`std::io::BufRead`] line by line and yields records as they
//! complete, so events come out while the traced task still runs (paddock reads strace from a
//! pipe). [`parse_slice`] does the same over bytes in memory without copying them, and
//! [`parse_slice_with`] hands records to a closure instead (internal iteration, the fastest
//! path). Memory is bounded whatever the log's size: one line (at most [`MAX_LINE`] bytes) and
//! the calls in flight (at most [`MAX_PENDING`] of them, [`MAX_PENDING_BYTES`] in all). [`Parser`] is the push form of the same
//! machine, for callers that own the read loop.
//!
//! # Supported input
//!
//! strace 6.x output with or without `-f`, `-ff` per-thread files (see [`ff_tid`] and
//! [`Parser::with_pid`]), `-t`/`-tt`/`-ttt`/`-r`, `-T`, `-y`/`-yy`, `-Y`, every `-x`/`-X`
//! string mode, `-s` truncation, `-Z` (including strace 6.1's untagged resume lines), and the
//! stderr form (`[pid N]` prefixes, attach messages spliced into lines).
//!
//! # Crate features
//!
//! None. The crate is `#![forbid(unsafe_code)]` and depends only on `memchr` and `thiserror`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
mod denial;
mod error;
mod event;
mod line;
mod pairing;
pub mod quote;
mod scan;
mod stream;
mod syscalls;

pub use args::{Arg, Args, Fd, FdArg, StrArg};
pub use denial::{Denial, DenialTracker, Denials, PathArg, denials};
pub use error::{Error, PidText};
pub use event::{Event, EventKind, Record, Return, Syscall, Timestamp};
pub use pairing::{MAX_PENDING, MAX_PENDING_BYTES, Parser};
pub use stream::{
    MAX_LINE, ReaderRecords, SliceRecords, parse_reader, parse_slice, parse_slice_with,
};
pub use syscalls::CwdChange;

/// The thread id of a `strace -ff -o PREFIX` file, taken from its name `PREFIX.<tid>`.
///
/// ```
/// assert_eq!(paddock_strace_parse::ff_tid(b"trace.19503"), Some(19503));
/// assert_eq!(paddock_strace_parse::ff_tid(b"trace.log"), None);
/// ```
pub fn ff_tid(file_name: &[u8]) -> Option<u32> {
    let dot = memchr::memrchr(b'.', file_name)?;
    let digits = &file_name[dot + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}
