//! One line of strace output, taken apart without allocating: the prefix (pid, `-Y` comm,
//! timestamp) and the body (a call, half a call, a signal, an exit, a message of strace).
//!
//! Pairing the halves of split calls is [`crate::pairing`]'s job; this module only says what
//! each line is.

use std::borrow::Cow;
use std::time::Duration;

use crate::event::{Return, Timestamp, parse_duration};
use crate::scan::{self, find_close_paren};

/// The marker strace appends to the first half of a split call.
const UNFINISHED: &[u8] = b" <unfinished ...>";
/// The marker of a call in flight when strace detached.
const DETACHED: &[u8] = b" <detached ...>";

/// A line taken apart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Line<'a> {
    pub pid: Option<u32>,
    pub timestamp: Option<Timestamp>,
    pub body: Body<'a>,
}

/// What a line says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Body<'a> {
    /// `NAME(ARGS) = RET`.
    Call {
        name: &'a str,
        args: &'a [u8],
        tail: Tail<'a>,
    },
    /// `NAME(ARGS <unfinished ...>`: the arguments printed so far.
    Unfinished {
        name: &'a str,
        args: &'a [u8],
    },
    /// `NAME(ARGS <detached ...>`.
    Detached {
        name: &'a str,
        args: &'a [u8],
    },
    /// `<... NAME resumed>REST`: the text after the tag (more arguments, `)`, `= RET`).
    Resumed {
        name: &'a str,
        rest: &'a [u8],
    },
    Signal {
        signal: &'a str,
        info: &'a [u8],
    },
    Stopped {
        signal: &'a str,
    },
    Exited {
        code: i32,
    },
    Killed {
        signal: &'a str,
        core_dumped: bool,
    },
    Superseded {
        by: u32,
    },
    Message {
        text: &'a [u8],
    },
    Note {
        text: &'a [u8],
    },
}

/// The end of a call: the outcome and the `-T` duration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tail<'a> {
    pub ret: Return<'a>,
    pub duration: Option<Duration>,
}

/// Why a line did not parse (the reason of [`crate::Error::Malformed`]).
pub(crate) type Reason = &'static str;

/// Parses a line (without its newline). `Err` carries the reason it is not a line strace writes.
pub(crate) fn parse(line: &[u8]) -> Result<Line<'_>, Reason> {
    let (pid, rest) = split_pid(line);
    let (timestamp, rest) = split_timestamp(rest);
    let body = parse_body(rest)?;
    Ok(Line { pid, timestamp, body })
}

/// Splits `[pid N] ` (stderr output), `N ` (`-f -o`), or `N<comm> ` (`-Y`) off the line.
fn split_pid(line: &[u8]) -> (Option<u32>, &[u8]) {
    if let Some(rest) = line.strip_prefix(b"[pid ") {
        let rest = scan::trim_start(rest);
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        if let (Some(pid), Some(after)) =
            (parse_u32(&rest[..digits]), rest[digits..].strip_prefix(b"]"))
        {
            return (Some(pid), after.strip_prefix(b" ").unwrap_or(after));
        }
        return (None, line);
    }
    let digits = line.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return (None, line);
    }
    let Some(pid) = parse_u32(&line[..digits]) else { return (None, line) };
    match line.get(digits) {
        Some(b' ') => (Some(pid), scan::trim_start(&line[digits..])),
        Some(b'<') => match scan::skip_decoration(line, digits) {
            Some(end) if line.get(end) == Some(&b' ') => {
                (Some(pid), scan::trim_start(&line[end..]))
            }
            _ => (None, line),
        },
        _ => (None, line),
    }
}

/// Splits a `-t`/`-tt`/`-ttt`/`-r` timestamp off the line (`-r` is right-aligned).
fn split_timestamp(s: &[u8]) -> (Option<Timestamp>, &[u8]) {
    let t = scan::trim_start(s);
    if !t.first().is_some_and(u8::is_ascii_digit) {
        return (None, s);
    }
    let Some(space) = memchr::memchr(b' ', t) else { return (None, s) };
    match Timestamp::parse(&t[..space]) {
        Some(ts) => (Some(ts), &t[space + 1..]),
        None => (None, s),
    }
}

fn parse_body(s: &[u8]) -> Result<Body<'_>, Reason> {
    match s.first() {
        Some(b'<') => {
            let rest = s.strip_prefix(b"<... ").ok_or("expected `<... NAME resumed>`")?;
            let (name, rest) = split_name(rest).ok_or("expected a syscall name")?;
            let rest = rest.strip_prefix(b" resumed>").ok_or("expected ` resumed>`")?;
            Ok(Body::Resumed { name, rest })
        }
        Some(b'-') => parse_signal(s).ok_or("expected `--- SIGNAL {...} ---`"),
        Some(b'+') => parse_exit(s).ok_or("expected `+++ exited with N +++` or similar"),
        Some(b'[') => {
            let text = s.strip_prefix(b"[ ").and_then(|t| t.strip_suffix(b" ]"));
            Ok(Body::Note { text: text.ok_or("expected `[ ... ]`")? })
        }
        _ => {
            if let Some(text) = s.strip_prefix(b"strace: ") {
                return Ok(Body::Message { text });
            }
            let (name, rest) = split_name(s).ok_or("expected a syscall name")?;
            let args = rest.strip_prefix(b"(").ok_or("expected `(` after the syscall name")?;
            if let Some(args) = args.strip_suffix(UNFINISHED) {
                return Ok(Body::Unfinished { name, args });
            }
            if let Some(args) = args.strip_suffix(DETACHED) {
                return Ok(Body::Detached { name, args });
            }
            let close = find_close_paren(args, 0, 1).ok_or("no `)` closing the arguments")?;
            let tail = parse_tail(&args[close + 1..])?;
            Ok(Body::Call { name, args: &args[..close], tail })
        }
    }
}

/// Parses the text after a call's closing `)`: padding, `= RET`, an optional ` <DURATION>`.
pub(crate) fn parse_tail(s: &[u8]) -> Result<Tail<'_>, Reason> {
    let s = scan::trim_start(s);
    let s = s.strip_prefix(b"=").ok_or("expected `= ` after the arguments")?;
    let mut s = scan::trim(s);
    let mut duration = None;
    if s.last() == Some(&b'>')
        && let Some(lt) = memchr::memrchr(b'<', s)
        && lt > 0
        && s[lt - 1] == b' '
        && let Some(d) = parse_duration(&s[lt + 1..s.len() - 1])
    {
        duration = Some(d);
        s = scan::trim(&s[..lt]);
    }
    Ok(Tail { ret: parse_return(s)?, duration })
}

fn parse_return(s: &[u8]) -> Result<Return<'_>, Reason> {
    if s.is_empty() {
        return Err("no return value after `=`");
    }
    if let Some(rest) = s.strip_prefix(b"?") {
        if rest.is_empty() {
            return Ok(Return::Unknown);
        }
        let (errno, text) = errno_and_text(scan::trim_start(rest)).ok_or("bad `? ERESTART*`")?;
        return Ok(Return::Restart { errno, text });
    }
    if let Some(rest) = s.strip_prefix(b"-1 ")
        && rest.first().is_some_and(|c| c.is_ascii_uppercase())
    {
        let (errno, text) = errno_and_text(rest).ok_or("bad `-1 ERRNO (text)`")?;
        return Ok(Return::Error { errno, text });
    }
    Ok(Return::Value(Cow::Borrowed(s)))
}

/// `ENOENT (No such file or directory)` (possibly followed by ` (INJECTED)`).
fn errno_and_text(s: &[u8]) -> Option<(Cow<'_, str>, Cow<'_, str>)> {
    let (errno, rest) = split_name(s)?;
    let rest = scan::trim_start(rest);
    let text = match rest.strip_prefix(b"(") {
        Some(inner) => {
            let close = memchr::memchr(b')', inner)?;
            std::str::from_utf8(&inner[..close]).ok()?
        }
        None if rest.is_empty() => "",
        None => return None,
    };
    Some((Cow::Borrowed(errno), Cow::Borrowed(text)))
}

/// Splits a C identifier (`openat`, `syscall_0x3e7`, `SIGCHLD`) off the front.
fn split_name(s: &[u8]) -> Option<(&str, &[u8])> {
    let n = s.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
    if n == 0 || s[0].is_ascii_digit() {
        return None;
    }
    // Identifiers are ASCII, so this cannot fail.
    let name = std::str::from_utf8(&s[..n]).ok()?;
    Some((name, &s[n..]))
}

fn parse_signal(s: &[u8]) -> Option<Body<'_>> {
    let inner = s.strip_prefix(b"--- ")?.strip_suffix(b" ---")?;
    if let Some(sig) = inner.strip_prefix(b"stopped by ") {
        let (signal, rest) = split_name(sig)?;
        return rest.is_empty().then_some(Body::Stopped { signal });
    }
    let (signal, rest) = split_name(inner)?;
    Some(Body::Signal { signal, info: scan::trim(rest) })
}

fn parse_exit(s: &[u8]) -> Option<Body<'_>> {
    let inner = s.strip_prefix(b"+++ ")?.strip_suffix(b" +++")?;
    if let Some(code) = inner.strip_prefix(b"exited with ") {
        let code = std::str::from_utf8(code).ok()?.parse().ok()?;
        return Some(Body::Exited { code });
    }
    if let Some(sig) = inner.strip_prefix(b"killed by ") {
        let (signal, rest) = split_name(sig)?;
        let core_dumped = match rest {
            b"" => false,
            b" (core dumped)" => true,
            _ => return None,
        };
        return Some(Body::Killed { signal, core_dumped });
    }
    let by = inner.strip_prefix(b"superseded by execve in pid ")?;
    Some(Body::Superseded { by: parse_u32(by)? })
}

fn parse_u32(t: &[u8]) -> Option<u32> {
    if t.is_empty() || t.len() > 10 {
        return None;
    }
    let v = t
        .iter()
        .try_fold(0u64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0')))?;
    u32::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(line: &str, expect: expect_test::Expect) {
        let got = match parse(line.as_bytes()) {
            Ok(l) => format!("{:?} {:?} {}", l.pid, l.timestamp, show(&l.body)),
            Err(e) => format!("error: {e}"),
        };
        expect.assert_eq(&got);
    }

    fn show(b: &Body<'_>) -> String {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match b {
            Body::Call { name, args, tail } => {
                format!("call {name} [{}] {:?} {:?}", s(args), tail.ret, tail.duration)
            }
            Body::Unfinished { name, args } => format!("unfinished {name} [{}]", s(args)),
            Body::Detached { name, args } => format!("detached {name} [{}]", s(args)),
            Body::Resumed { name, rest } => format!("resumed {name} [{}]", s(rest)),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn prefixes() {
        use expect_test::expect;
        check(
            "8817  brk(NULL)                         = 0x33cb000",
            expect![[
                r#"Some(8817) None call brk [NULL] Value([48, 120, 51, 51, 99, 98, 48, 48, 48]) None"#
            ]],
        );
        check(
            "[pid 20239] openat(AT_FDCWD, \"/n\", O_RDONLY) = -1 ENOENT (No such file or directory)",
            expect![[
                r#"Some(20239) None call openat [AT_FDCWD, "/n", O_RDONLY] Error { errno: "ENOENT", text: "No such file or directory" } None"#
            ]],
        );
        check(
            "19240      0.000011 openat(AT_FDCWD, \"/x\", O_RDONLY <unfinished ...>",
            expect![[
                r#"Some(19240) Some(Seconds { secs: 0, nanos: 11000 }) unfinished openat [AT_FDCWD, "/x", O_RDONLY]"#
            ]],
        );
        check(
            "19208 16:54:52.464197 <... openat resumed>) = 4</etc> <0.000038>",
            expect![[
                r#"Some(19208) Some(TimeOfDay { secs: 60892, nanos: Some(464197000) }) resumed openat [) = 4</etc> <0.000038>]"#
            ]],
        );
        check(
            "19320<probe> gettid()                   = 19320<probe>",
            expect![[
                r#"Some(19320) None call gettid [] Value([49, 57, 51, 50, 48, 60, 112, 114, 111, 98, 101, 62]) None"#
            ]],
        );
        check(
            ")                                       = -1 EACCES (Permission denied)",
            expect![[r#"error: expected a syscall name"#]],
        );
    }

    #[test]
    fn other_lines() {
        use expect_test::expect;
        check(
            "19348 +++ killed by SIGKILL +++",
            expect![[r#"Some(19348) None Killed { signal: "SIGKILL", core_dumped: false }"#]],
        );
        check(
            "19350 +++ killed by SIGSEGV (core dumped) +++",
            expect![[r#"Some(19350) None Killed { signal: "SIGSEGV", core_dumped: true }"#]],
        );
        check("+++ exited with 3 +++", expect![[r#"None None Exited { code: 3 }"#]]);
        check(
            "19353 +++ superseded by execve in pid 19354 +++",
            expect![[r#"Some(19353) None Superseded { by: 19354 }"#]],
        );
        check(
            "19346 --- stopped by SIGSTOP ---",
            expect![[r#"Some(19346) None Stopped { signal: "SIGSTOP" }"#]],
        );
        check(
            "19342 pause()                           = ? ERESTARTNOHAND (To be restarted if no handler)",
            expect![[
                r#"Some(19342) None call pause [] Restart { errno: "ERESTARTNOHAND", text: "To be restarted if no handler" } None"#
            ]],
        );
        check(
            "19370 clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=2, tv_nsec=500000000},  <detached ...>",
            expect![[
                r#"Some(19370) None detached clock_nanosleep [CLOCK_REALTIME, 0, {tv_sec=2, tv_nsec=500000000}, ]"#
            ]],
        );
    }
}
