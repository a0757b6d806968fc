//! The event model: what one line (or one paired `<unfinished ...>`/`<... resumed>` couple) of
//! an strace log says.
//!
//! Events borrow from the input when they can ([`std::borrow::Cow`]): parsing a slice allocates
//! nothing for a complete call; only a call split over two lines owns its joined arguments.

use std::borrow::Cow;
use std::time::Duration;

use crate::args::{Args, parse_int};
use crate::error::Error;

/// One item of a parsed log: an event, or a diagnostic about the log (the parse goes on).
#[derive(Debug)]
pub enum Record<'a> {
    /// Something the traced tasks did, or strace said.
    Event(Event<'a>),
    /// A line that did not parse, a call never resumed, a resume without a start, ...
    Diagnostic(Error),
}

impl Record<'_> {
    /// Detaches the record from the input it borrows.
    pub fn into_owned(self) -> Record<'static> {
        match self {
            Record::Event(e) => Record::Event(e.into_owned()),
            Record::Diagnostic(d) => Record::Diagnostic(d),
        }
    }
}

/// One event: the pid it is about, when, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    /// The 1-based line where the event completed (the `resumed` line of a split call).
    pub line: u64,
    /// The thread id strace printed (`-f`), or the one given for a `-ff` file; `None` when
    /// the log has no pid column (no `-f`, or the single-process start of a stderr log).
    pub pid: Option<u32>,
    /// The timestamp printed before the event (for a split call: the one of its start).
    pub timestamp: Option<Timestamp>,
    /// What happened.
    pub kind: EventKind<'a>,
}

impl Event<'_> {
    /// Detaches the event from the input it borrows.
    pub fn into_owned(self) -> Event<'static> {
        Event {
            line: self.line,
            pid: self.pid,
            timestamp: self.timestamp,
            kind: self.kind.into_owned(),
        }
    }

    /// The syscall, when this event is one.
    pub fn syscall(&self) -> Option<&Syscall<'_>> {
        match &self.kind {
            EventKind::Syscall(s) => Some(s),
            _ => None,
        }
    }
}

/// The kinds of event strace reports.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventKind<'a> {
    /// A system call (complete, or paired from its two halves).
    Syscall(Syscall<'a>),
    /// `--- SIGCHLD {si_signo=SIGCHLD, ...} ---`: a signal was delivered.
    Signal {
        /// The signal's name (`SIGCHLD`).
        signal: Cow<'a, str>,
        /// The raw siginfo text between the braces, braces included.
        info: Cow<'a, [u8]>,
    },
    /// `--- stopped by SIGSTOP ---`.
    Stopped {
        /// The stopping signal.
        signal: Cow<'a, str>,
    },
    /// `+++ exited with N +++`.
    Exited {
        /// The exit status.
        code: i32,
    },
    /// `+++ killed by SIGKILL +++` (or `... (core dumped) +++`).
    Killed {
        /// The killing signal.
        signal: Cow<'a, str>,
        /// Whether strace said `(core dumped)`.
        core_dumped: bool,
    },
    /// `+++ superseded by execve in pid N +++`: a non-leader thread execve'd and took over this
    /// pid; its pending `execve` resumes under this pid.
    Superseded {
        /// The thread that called execve.
        by: u32,
    },
    /// `strace: ...`: a message of strace itself (an attach, a detach, or strace failing).
    StraceMessage {
        /// The text after `strace: `.
        text: Cow<'a, [u8]>,
    },
    /// `[ Process PID=N runs in 32 bit mode. ]` and other bracketed notes.
    Note {
        /// The text between the brackets.
        text: Cow<'a, [u8]>,
    },
}

impl EventKind<'_> {
    fn into_owned(self) -> EventKind<'static> {
        fn s(c: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(c.into_owned())
        }
        fn b(c: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
            Cow::Owned(c.into_owned())
        }
        match self {
            EventKind::Syscall(c) => EventKind::Syscall(c.into_owned()),
            EventKind::Signal { signal, info } => {
                EventKind::Signal { signal: s(signal), info: b(info) }
            }
            EventKind::Stopped { signal } => EventKind::Stopped { signal: s(signal) },
            EventKind::Exited { code } => EventKind::Exited { code },
            EventKind::Killed { signal, core_dumped } => {
                EventKind::Killed { signal: s(signal), core_dumped }
            }
            EventKind::Superseded { by } => EventKind::Superseded { by },
            EventKind::StraceMessage { text } => EventKind::StraceMessage { text: b(text) },
            EventKind::Note { text } => EventKind::Note { text: b(text) },
        }
    }
}

/// A system call: its name, its arguments as strace printed them, and its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Syscall<'a> {
    /// The name (`openat`, `syscall_0x3e7` for an unknown number).
    pub name: Cow<'a, str>,
    /// The raw argument text between the parentheses (both halves joined for a split call).
    pub args: Cow<'a, [u8]>,
    /// The outcome.
    pub ret: Return<'a>,
    /// The time spent in the call (`-T`).
    pub duration: Option<Duration>,
    /// The line where the call started (differs from [`Event::line`] for a split call).
    pub start_line: u64,
    /// Whether the call was printed in two halves (`<unfinished ...>` ... `resumed>`).
    pub split: bool,
    /// Whether the start of the call is missing (a resume without its start; the arguments are
    /// then only those after the split point). A diagnostic was reported too.
    pub orphan: bool,
}

impl<'a> Syscall<'a> {
    /// The top-level arguments, split and ready for typed access.
    pub fn args(&self) -> Args<'_> {
        Args::new(&self.args)
    }

    /// For `restart_syscall(<... resuming interrupted read ...>)`, the name of the call that
    /// is being resumed (`read`).
    pub fn resuming(&self) -> Option<&str> {
        let rest = self.args.strip_prefix(b"<... resuming interrupted ")?;
        let name = rest.strip_suffix(b" ...>")?;
        std::str::from_utf8(name).ok()
    }

    /// Detaches the call from the input it borrows.
    pub fn into_owned(self) -> Syscall<'static> {
        Syscall {
            name: Cow::Owned(self.name.into_owned()),
            args: Cow::Owned(self.args.into_owned()),
            ret: self.ret.into_owned(),
            duration: self.duration,
            start_line: self.start_line,
            split: self.split,
            orphan: self.orphan,
        }
    }
}

/// How a call ended, as strace printed it after `=`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Return<'a> {
    /// A value: `0`, `0x33cb000`, `4</etc>` (with `-y`), `1 /* 19437 in strace's PID NS */`,
    /// `0x18800 (flags O_RDONLY|...)`. The raw text; see [`Return::value`] and
    /// [`Return::decoration`].
    Value(Cow<'a, [u8]>),
    /// `-1 ENOENT (No such file or directory)`.
    Error {
        /// The errno name (`ENOENT`).
        errno: Cow<'a, str>,
        /// strace's text for it (`No such file or directory`).
        text: Cow<'a, str>,
    },
    /// `? ERESTARTSYS (To be restarted if SA_RESTART is set)`: interrupted by a signal; the
    /// kernel restarts the call or it fails with `EINTR` (shown on the next `rt_sigreturn`).
    Restart {
        /// The `ERESTART*` name.
        errno: Cow<'a, str>,
        /// strace's text for it.
        text: Cow<'a, str>,
    },
    /// `?`: no return value (exit, a superseded execve, a task killed inside the call).
    Unknown,
    /// `<detached ...>`: strace detached while the call was in flight.
    Detached,
    /// The call was left `<unfinished ...>` and never resumed (a diagnostic says so too).
    Unfinished,
}

impl Return<'_> {
    /// The numeric value of a [`Return::Value`] (decimal, hex or octal).
    pub fn value(&self) -> Option<i64> {
        match self {
            Return::Value(raw) => {
                let end = raw.iter().position(|c| matches!(c, b' ' | b'<')).unwrap_or(raw.len());
                parse_int(&raw[..end])
            }
            _ => None,
        }
    }

    /// The decoded `-y`/`-Y` decoration of a returned fd or pid (`4</etc>` gives `/etc`).
    pub fn decoration(&self) -> Option<Vec<u8>> {
        match self {
            Return::Value(raw) => crate::args::Arg::new(raw).as_fd()?.decoration,
            _ => None,
        }
    }

    /// The errno name of a failed call.
    pub fn errno(&self) -> Option<&str> {
        match self {
            Return::Error { errno, .. } => Some(errno),
            _ => None,
        }
    }

    pub(crate) fn into_owned(self) -> Return<'static> {
        match self {
            Return::Value(v) => Return::Value(Cow::Owned(v.into_owned())),
            Return::Error { errno, text } => Return::Error {
                errno: Cow::Owned(errno.into_owned()),
                text: Cow::Owned(text.into_owned()),
            },
            Return::Restart { errno, text } => Return::Restart {
                errno: Cow::Owned(errno.into_owned()),
                text: Cow::Owned(text.into_owned()),
            },
            Return::Unknown => Return::Unknown,
            Return::Detached => Return::Detached,
            Return::Unfinished => Return::Unfinished,
        }
    }
}

/// A timestamp as strace printed it (`-t`, `-tt`, `-ttt`, `-r`).
///
/// `-ttt` (seconds since the epoch) and `-r` (seconds since the previous line) print the same
/// shape, so they share [`Timestamp::Seconds`]; the caller knows which option it passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timestamp {
    /// `-t`/`-tt`: wall-clock time of day, `HH:MM:SS[.ffffff]`.
    TimeOfDay {
        /// Seconds since midnight.
        secs: u32,
        /// The fraction in nanoseconds (`None` for `-t`).
        nanos: Option<u32>,
    },
    /// `-ttt` or `-r`: `SECONDS.ffffff`.
    Seconds {
        /// Whole seconds.
        secs: u64,
        /// The fraction in nanoseconds.
        nanos: u32,
    },
}

impl Timestamp {
    /// Parses one timestamp token; `None` if the token is not one.
    pub(crate) fn parse(t: &[u8]) -> Option<Timestamp> {
        let (whole, frac) = match memchr::memchr(b'.', t) {
            Some(dot) => (&t[..dot], Some(parse_fraction(&t[dot + 1..])?)),
            None => (t, None),
        };
        if memchr::memchr(b':', whole).is_some() {
            // `HH:MM:SS` exactly: the part count is checked before anything is accumulated
            // (a token of many `:`-parts once overflowed here), and the sum is checked anyway.
            if memchr::memchr_iter(b':', whole).count() != 2 {
                return None;
            }
            let mut secs = 0u32;
            for part in whole.split(|&c| c == b':') {
                if part.is_empty() || part.len() > 2 {
                    return None;
                }
                let part = u32::try_from(parse_digits(part)?).ok()?;
                secs = secs.checked_mul(60)?.checked_add(part)?;
            }
            Some(Timestamp::TimeOfDay { secs, nanos: frac })
        } else {
            Some(Timestamp::Seconds { secs: parse_digits(whole)?, nanos: frac? })
        }
    }
}

/// Parses a `-T` duration (`0.000012`).
pub(crate) fn parse_duration(t: &[u8]) -> Option<Duration> {
    let dot = memchr::memchr(b'.', t)?;
    Some(Duration::new(parse_digits(&t[..dot])?, parse_fraction(&t[dot + 1..])?))
}

fn parse_digits(t: &[u8]) -> Option<u64> {
    if t.is_empty() || t.len() > 19 {
        return None;
    }
    // 19 digits always fit a u64; checked all the same, so that no length limit is load-bearing.
    t.iter().try_fold(0u64, |acc, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
}

/// A decimal fraction (1 to 9 digits) in nanoseconds.
fn parse_fraction(t: &[u8]) -> Option<u32> {
    if t.is_empty() || t.len() > 9 {
        return None;
    }
    let v = u32::try_from(parse_digits(t)?).ok()?;
    Some(v * 10u32.pow(9 - t.len() as u32))
}
