//! The parser proper: turns lines into [`Record`]s, pairing each `<unfinished ...>` with its
//! `<... NAME resumed>` by pid (a thread has at most one call in flight).
//!
//! Memory is bounded by what is in flight: one pending entry per thread that is inside a call,
//! capped at [`MAX_PENDING`] entries and [`MAX_PENDING_BYTES`] bytes, plus at most one held
//! line prefix (at most [`crate::MAX_LINE`] bytes) for strace's stderr splice.
//! Nothing else survives a line.
//!
//! Two strace quirks are handled here because they span lines:
//! - `-Z` (`--failed-only`) in strace 6.1 prints the second half of a split call without pid,
//!   timestamp or `resumed` tag; such a line belongs to the latest `<unfinished ...>`.
//! - Without `-o`, strace writes `strace: Process N attached` into the middle of another
//!   line; the message is cut out and the two halves of the line are joined.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::{Error, PidText};
use crate::event::{Event, EventKind, Record, Return, Syscall, Timestamp};
use crate::line::{self, Body, Line};
use crate::scan::find_close_paren;
#[cfg(test)]
use crate::stream::MAX_LINE;

/// The most calls kept in flight at once; beyond it the oldest is given up (with a diagnostic).
pub const MAX_PENDING: usize = 1 << 16;

/// The most argument bytes kept for calls in flight; beyond it the oldest call is given up.
pub const MAX_PENDING_BYTES: usize = 64 << 20;

/// A multiplicative hasher for pid keys: the pending map is looked up on every call line, and
/// pids are not attacker-chosen keys worth SipHash's cost (a log can only slow its own parse).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by pid (`None` for lines without one).
pub(crate) type PidMap<V> = HashMap<Option<u32>, V, BuildHasherDefault<PidHasher>>;

/// The first half of a split call, waiting for its resume.
#[derive(Debug)]
struct Pending {
    name: String,
    args: Vec<u8>,
    line: u64,
    timestamp: Option<Timestamp>,
}

/// Where records go: a buffer, or a caller's closure (internal iteration, no buffering).
pub(crate) trait Sink<'a> {
    fn push(&mut self, record: Record<'a>);
}

impl<'a> Sink<'a> for Vec<Record<'a>> {
    fn push(&mut self, record: Record<'a>) {
        Vec::push(self, record);
    }
}

/// A closure as a [`Sink`].
struct FnSink<'f, F>(&'f mut F);

impl<'a, F: FnMut(Record<'a>)> Sink<'a> for FnSink<'_, F> {
    fn push(&mut self, record: Record<'a>) {
        (self.0)(record);
    }
}

/// The calls in flight, by pid, with a counting filter in front of the map: most lines are
/// complete calls of threads with nothing pending, and the filter answers those without
/// hashing.
#[derive(Debug)]
struct PendingMap {
    map: PidMap<Pending>,
    counts: Vec<u32>,
    /// The argument bytes held by all pending calls.
    bytes: usize,
    /// (start line, pid) in insertion order, for finding the oldest call in O(1) amortized;
    /// entries whose call is gone are skipped lazily and compacted away.
    order: VecDeque<(u64, Option<u32>)>,
}

const FILTER_SLOTS: usize = 1024;

impl Default for PendingMap {
    fn default() -> Self {
        PendingMap {
            map: PidMap::default(),
            counts: vec![0; FILTER_SLOTS],
            bytes: 0,
            order: VecDeque::new(),
        }
    }
}

impl PendingMap {
    fn slot(pid: Option<u32>) -> usize {
        pid.map_or(0, |p| p as usize % FILTER_SLOTS)
    }

    fn insert(&mut self, pid: Option<u32>, p: Pending) {
        self.bytes += p.args.len();
        self.order.push_back((p.line, pid));
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order.retain(|(line, pid)| map.get(pid).is_some_and(|p| p.line == *line));
            // The new call is not in the map yet, so compaction dropped it: put it back.
            self.order.push_back((p.line, pid));
        }
        match self.map.insert(pid, p) {
            None => self.counts[Self::slot(pid)] += 1,
            Some(old) => self.bytes -= old.args.len(),
        }
    }

    fn remove(&mut self, pid: &Option<u32>) -> Option<Pending> {
        let slot = Self::slot(*pid);
        if self.counts[slot] == 0 {
            return None;
        }
        let p = self.map.remove(pid)?;
        self.counts[slot] -= 1;
        self.bytes -= p.args.len();
        Some(p)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn oldest(&mut self) -> Option<Option<u32>> {
        while let Some(&(line, pid)) = self.order.front() {
            if self.map.get(&pid).is_some_and(|p| p.line == line) {
                return Some(pid);
            }
            self.order.pop_front();
        }
        None
    }

    fn drain(&mut self) -> impl Iterator<Item = (Option<u32>, Pending)> + '_ {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.bytes = 0;
        self.order.clear();
        self.map.drain()
    }
}

/// A push parser: feed it lines, collect records. [`crate::parse_slice`] and
/// [`crate::parse_reader`] drive one for you.
#[derive(Debug, Default)]
pub struct Parser {
    pending: PendingMap,
    /// The pid of the latest `<unfinished ...>` line, for `-Z` continuation lines.
    last_unfinished: Option<Option<u32>>,
    /// The pid for lines without a pid column (a `-ff` file).
    default_pid: Option<u32>,
    /// The start of a line that strace interrupted with a message of its own.
    carry: Option<Vec<u8>>,
    line: u64,
}

impl Parser {
    /// A parser for a `-f` log (or any log with a pid column, or none).
    pub fn new() -> Self {
        Parser::default()
    }

    /// Lines without a pid column are attributed to `pid` (the tid of a `-ff` file).
    pub fn with_pid(mut self, pid: u32) -> Self {
        self.default_pid = Some(pid);
        self
    }

    /// The number of lines fed so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// Parses one line (without its `\n`), appending what it yields to `out`.
    pub fn push_line<'a>(&mut self, line: &'a [u8], out: &mut Vec<Record<'a>>) {
        self.feed(line, out);
    }

    /// Parses one line (without its `\n`), handing each record to `f` as it is made.
    ///
    /// This is the internal-iteration form of [`Parser::push_line`]: nothing is buffered, so
    /// it is the fastest way through a log.
    pub fn feed_line<'a>(&mut self, line: &'a [u8], mut f: impl FnMut(Record<'a>)) {
        self.feed(line, &mut FnSink(&mut f));
    }

    /// Like [`Parser::finish`], handing each record to `f`.
    pub fn finish_with<'a>(&mut self, mut f: impl FnMut(Record<'a>)) {
        self.finish_into(&mut FnSink(&mut f));
    }

    fn feed<'a>(&mut self, line: &'a [u8], out: &mut impl Sink<'a>) {
        self.line += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(mut joined) = self.carry.take() {
            joined.extend_from_slice(line);
            let mut owned = Vec::new();
            self.push_whole(&joined, &mut owned);
            for r in owned {
                out.push(r.into_owned());
            }
            return;
        }
        self.push_whole(line, out);
    }

    /// Flushes the calls still in flight at the end of the log: each becomes an event with
    /// [`Return::Unfinished`] and an [`Error::Unresumed`] diagnostic.
    pub fn finish<'a>(&mut self, out: &mut Vec<Record<'a>>) {
        self.finish_into(out);
    }

    fn finish_into<'a>(&mut self, out: &mut impl Sink<'a>) {
        if let Some(carry) = self.carry.take() {
            let mut owned = Vec::new();
            self.push_whole(&carry, &mut owned);
            for r in owned {
                out.push(r.into_owned());
            }
        }
        let mut left: Vec<_> = self.pending.drain().collect();
        left.sort_by_key(|(_, p)| p.line);
        for (pid, p) in left {
            Self::give_up(pid, p, out);
        }
        self.last_unfinished = None;
    }

    fn push_whole<'a>(&mut self, line: &'a [u8], out: &mut impl Sink<'a>) {
        if self.split_off_message(line, out) {
            return;
        }
        match line::parse(line) {
            Ok(parsed) => self.on_line(parsed, out),
            Err(reason) => {
                if !self.try_continuation(line, out) {
                    out.push(Record::Diagnostic(Error::malformed(self.line, reason, line)));
                }
            }
        }
    }

    /// strace's stderr output can end a partial line with `strace: Process N attached`; the
    /// line goes on at the start of the next one. Emits the message and keeps the start.
    fn split_off_message<'a>(&mut self, line: &'a [u8], out: &mut impl Sink<'a>) -> bool {
        if !(line.ends_with(b" attached") || line.ends_with(b" detached")) {
            return false;
        }
        let Some(at) = memchr::memmem::rfind(line, b"strace: Process ") else { return false };
        if at == 0 || !line[at + 16..].iter().take_while(|c| c.is_ascii_digit()).any(|_| true) {
            return false;
        }
        out.push(Record::Event(Event {
            line: self.line,
            pid: None,
            timestamp: None,
            kind: EventKind::StraceMessage { text: Cow::Borrowed(&line[at + 8..]) },
        }));
        if at > crate::stream::MAX_LINE {
            // Repeated splices must not grow a held line without bound.
            out.push(Record::Diagnostic(Error::LineTooLong {
                line: self.line,
                limit: crate::stream::MAX_LINE,
            }));
        } else {
            self.carry = Some(line[..at].to_vec());
        }
        true
    }

    /// A `-Z` continuation: the rest of the latest unfinished call, with no prefix at all.
    fn try_continuation<'a>(&mut self, line: &'a [u8], out: &mut impl Sink<'a>) -> bool {
        let Some(pid) = self.last_unfinished else { return false };
        let Some(p) = self.pending.remove(&pid) else { return false };
        match self.complete(pid, None, p, line) {
            Ok(event) => {
                self.last_unfinished = None;
                out.push(Record::Event(event));
                true
            }
            Err((p, _)) => {
                self.pending.insert(pid, p);
                false
            }
        }
    }

    fn on_line<'a>(&mut self, parsed: Line<'a>, out: &mut impl Sink<'a>) {
        let pid = parsed.pid.or(self.default_pid);
        let line = self.line;
        let event = |kind| Record::Event(Event { line, pid, timestamp: parsed.timestamp, kind });
        // A thread making a new call has left its previous one for good.
        if matches!(parsed.body, Body::Call { .. } | Body::Detached { .. })
            && let Some(old) = self.pending.remove(&pid)
        {
            Self::give_up(pid, old, out);
        }
        match parsed.body {
            Body::Call { name, args, tail } => out.push(event(EventKind::Syscall(Syscall {
                name: Cow::Borrowed(name),
                args: Cow::Borrowed(args),
                ret: tail.ret,
                duration: tail.duration,
                start_line: line,
                split: false,
                orphan: false,
            }))),
            Body::Unfinished { name, args } => {
                if let Some(old) = self.pending.remove(&pid) {
                    Self::give_up(pid, old, out);
                }
                while self.pending.len() >= MAX_PENDING
                    || (self.pending.len() > 0
                        && self.pending.bytes + args.len() > MAX_PENDING_BYTES)
                {
                    if !self.evict_oldest(out) {
                        break;
                    }
                }
                let p = Pending {
                    name: name.to_owned(),
                    args: {
                        // Room for the rest of the arguments, which are joined on resume.
                        let mut v = Vec::with_capacity(args.len() + 128);
                        v.extend_from_slice(args);
                        v
                    },
                    line,
                    timestamp: parsed.timestamp,
                };
                self.pending.insert(pid, p);
                self.last_unfinished = Some(pid);
            }
            Body::Detached { name, args } => out.push(event(EventKind::Syscall(Syscall {
                name: Cow::Borrowed(name),
                args: Cow::Borrowed(args.strip_suffix(b" ").unwrap_or(args)),
                ret: Return::Detached,
                duration: None,
                start_line: line,
                split: false,
                orphan: false,
            }))),
            Body::Resumed { name, rest } => self.on_resumed(pid, parsed.timestamp, name, rest, out),
            Body::Signal { signal, info } => out.push(event(EventKind::Signal {
                signal: Cow::Borrowed(signal),
                info: Cow::Borrowed(info),
            })),
            Body::Stopped { signal } => {
                out.push(event(EventKind::Stopped { signal: Cow::Borrowed(signal) }))
            }
            Body::Exited { code } => {
                self.on_exit(pid, out);
                out.push(event(EventKind::Exited { code }));
            }
            Body::Killed { signal, core_dumped } => {
                self.on_exit(pid, out);
                out.push(event(EventKind::Killed { signal: Cow::Borrowed(signal), core_dumped }));
            }
            Body::Superseded { by } => {
                // The execve'ing thread takes over this pid: its call resumes under it.
                self.on_exit(pid, out);
                if let Some(p) = self.pending.remove(&Some(by)) {
                    self.pending.insert(pid, p);
                }
                out.push(event(EventKind::Superseded { by }));
            }
            Body::Message { text } => {
                out.push(event(EventKind::StraceMessage { text: Cow::Borrowed(text) }))
            }
            Body::Note { text } => out.push(event(EventKind::Note { text: Cow::Borrowed(text) })),
        }
    }

    fn on_resumed<'a>(
        &mut self,
        pid: Option<u32>,
        timestamp: Option<Timestamp>,
        name: &'a str,
        rest: &'a [u8],
        out: &mut impl Sink<'a>,
    ) {
        match self.pending.remove(&pid) {
            Some(p) if p.name == name => {
                if self.last_unfinished == Some(pid) {
                    self.last_unfinished = None;
                }
                match self.complete(pid, timestamp, p, rest) {
                    Ok(event) => out.push(Record::Event(event)),
                    Err((p, reason)) => {
                        out.push(Record::Diagnostic(Error::malformed(self.line, reason, rest)));
                        Self::give_up(pid, p, out);
                    }
                }
            }
            other => {
                if let Some(p) = other {
                    Self::give_up(pid, p, out);
                }
                out.push(Record::Diagnostic(Error::OrphanResume {
                    line: self.line,
                    pid: PidText(pid),
                    syscall: name.to_owned(),
                }));
                let Some(close) = crate::scan::find_close_paren(rest, 0, 1) else {
                    out.push(Record::Diagnostic(Error::malformed(
                        self.line,
                        "no `)` after the resume",
                        rest,
                    )));
                    return;
                };
                let tail = match line::parse_tail(&rest[close + 1..]) {
                    Ok(t) => t,
                    Err(reason) => {
                        out.push(Record::Diagnostic(Error::malformed(self.line, reason, rest)));
                        return;
                    }
                };
                out.push(Record::Event(Event {
                    line: self.line,
                    pid,
                    timestamp,
                    kind: EventKind::Syscall(Syscall {
                        name: Cow::Borrowed(name),
                        args: Cow::Borrowed(&rest[..close]),
                        ret: tail.ret,
                        duration: tail.duration,
                        start_line: self.line,
                        split: true,
                        orphan: true,
                    }),
                }));
            }
        }
    }

    /// Completes a pending start with the text after its resume point: joins the two, then
    /// finds the end of the arguments in the whole. Joining first means a split anywhere, even
    /// inside a string, gives the same event as the unsplit line. On failure the pending call
    /// is handed back unchanged.
    fn complete(
        &mut self,
        pid: Option<u32>,
        timestamp: Option<Timestamp>,
        mut p: Pending,
        rest: &[u8],
    ) -> Result<Event<'static>, (Pending, line::Reason)> {
        let prefix = p.args.len();
        p.args.extend_from_slice(rest);
        let parsed = match find_close_paren(&p.args, 0, 1) {
            Some(close) => line::parse_tail(&p.args[close + 1..])
                .map(|t| (close, t.ret.into_owned(), t.duration)),
            None => Err("no `)` closing the arguments after the resume"),
        };
        let (close, ret, duration) = match parsed {
            Ok(v) => v,
            Err(reason) => {
                p.args.truncate(prefix);
                return Err((p, reason));
            }
        };
        p.args.truncate(close);
        Ok(Event {
            line: self.line,
            pid,
            timestamp: p.timestamp.or(timestamp),
            kind: EventKind::Syscall(Syscall {
                name: Cow::Owned(p.name),
                args: Cow::Owned(p.args),
                ret,
                duration,
                start_line: p.line,
                split: true,
                orphan: false,
            }),
        })
    }

    /// A process ended: a call of it still in flight will never resume.
    fn on_exit<'a>(&mut self, pid: Option<u32>, out: &mut impl Sink<'a>) {
        if let Some(p) = self.pending.remove(&pid) {
            Self::give_up(pid, p, out);
        }
    }

    /// Gives up the oldest pending call; returns whether there was one.
    fn evict_oldest<'a>(&mut self, out: &mut impl Sink<'a>) -> bool {
        let oldest = self.pending.oldest();
        if let Some(pid) = oldest
            && let Some(p) = self.pending.remove(&pid)
        {
            out.push(Record::Diagnostic(Error::TooManyPending {
                line: p.line,
                limit: MAX_PENDING,
            }));
            Self::give_up(pid, p, out);
            return true;
        }
        false
    }

    /// Reports a call that will never resume: a diagnostic plus an event, so the attempt and
    /// its arguments are not lost.
    fn give_up<'a>(pid: Option<u32>, p: Pending, out: &mut impl Sink<'a>) {
        out.push(Record::Diagnostic(Error::Unresumed {
            line: p.line,
            pid: PidText(pid),
            syscall: p.name.clone(),
        }));
        out.push(Record::Event(Event {
            line: p.line,
            pid,
            timestamp: p.timestamp,
            kind: EventKind::Syscall(Syscall {
                name: Cow::Owned(p.name),
                args: Cow::Owned(p.args),
                ret: Return::Unfinished,
                duration: None,
                start_line: p.line,
                split: true,
                orphan: false,
            }),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostics(records: &[Record<'_>]) -> Vec<String> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Diagnostic(d) => Some(d.to_string()),
                Record::Event(_) => None,
            })
            .collect()
    }

    #[test]
    fn pending_calls_are_capped() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        for pid in 1..=MAX_PENDING + 2 {
            let line = format!("{pid} read(0,  <unfinished ...>");
            parser.feed_line(line.as_bytes(), |r| out.push(r.into_owned()));
        }
        assert_eq!(parser.pending.len(), MAX_PENDING);
        let d = diagnostics(&out);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(d[0].starts_with("line 1: too much in flight"), "{d:?}");
        assert!(d[1].starts_with("line 1: pid 1: `read` started here never resumed"), "{d:?}");
    }

    #[test]
    fn pending_bytes_are_capped() {
        let mut parser = Parser::new();
        let big = "x".repeat(MAX_PENDING_BYTES / 3);
        let lines: Vec<String> =
            (1..=4).map(|pid| format!("{pid} write(1, \"{big}\", 1 <unfinished ...>")).collect();
        let mut out = Vec::new();
        for line in &lines {
            parser.push_line(line.as_bytes(), &mut out);
        }
        assert!(parser.pending.bytes <= MAX_PENDING_BYTES);
        assert_eq!(parser.pending.len(), 2);
        assert_eq!(diagnostics(&out).len(), 4);
    }

    #[test]
    fn spliced_messages_do_not_grow_a_held_line_forever() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        let chunk = "y".repeat(MAX_LINE / 2);
        for n in 0..4 {
            let line = format!("{chunk}strace: Process {n} attached");
            parser.feed_line(line.as_bytes(), |r| out.push(r.into_owned()));
            assert!(parser.carry.as_ref().is_none_or(|c| c.len() <= MAX_LINE));
        }
        assert!(diagnostics(&out).iter().any(|d| d.contains("line longer than")));
    }
}
