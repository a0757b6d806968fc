//! Driving the [`Parser`] over input: a byte slice (zero-copy) or any [`BufRead`] (incremental,
//! bounded memory), both as iterators of [`Record`]s.

use std::collections::VecDeque;
use std::io::BufRead;

use crate::error::Error;
use crate::event::Record;
use crate::pairing::Parser;

/// The longest line kept; the rest of a longer line is dropped with a diagnostic. strace's
/// longest lines (4 KiB paths in `\xNN` form, `-s` large buffers) stay far below it.
pub const MAX_LINE: usize = 1 << 20;

/// Parses a whole log held in memory. Events borrow from `input`.
pub fn parse_slice(input: &[u8]) -> SliceRecords<'_> {
    Parser::new().slice(input)
}

/// Parses a whole log held in memory, handing each record to `f` (internal iteration: no
/// buffering between the parser and `f`, the fastest way through a log).
///
/// ```
/// use paddock_strace_parse::{DenialTracker, Record, parse_slice_with};
///
/// let log = b"7 openat(AT_FDCWD, \"/x\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
/// let mut tracker = DenialTracker::new();
/// let mut failed = Vec::new();
/// parse_slice_with(log, |record| {
///     if let Record::Event(event) = record {
///         failed.extend(tracker.observe(&event));
///     }
/// });
/// assert_eq!(failed[0].paths[0].bytes, b"/x");
/// ```
pub fn parse_slice_with<'a>(input: &'a [u8], mut f: impl FnMut(Record<'a>)) {
    let mut parser = Parser::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(nl) => (&rest[..nl], &rest[nl + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        parser.feed_line(line, &mut f);
        rest = next;
    }
    parser.finish_with(f);
}

/// Parses a log as it is read: records come out line by line, so a caller sees events while
/// the traced task still runs. Memory is bounded by [`MAX_LINE`] and the calls in flight.
pub fn parse_reader<R: BufRead>(reader: R) -> ReaderRecords<R> {
    Parser::new().reader(reader)
}

impl Parser {
    /// Runs this parser over a slice (see [`parse_slice`]).
    pub fn slice(self, input: &[u8]) -> SliceRecords<'_> {
        SliceRecords { parser: self, rest: input, out: Vec::new(), done: false }
    }

    /// Runs this parser over a reader (see [`parse_reader`]).
    pub fn reader<R: BufRead>(self, reader: R) -> ReaderRecords<R> {
        ReaderRecords { parser: self, reader, buf: Vec::new(), out: VecDeque::new(), done: false }
    }
}

/// The records of a log in memory; see [`parse_slice`].
#[derive(Debug)]
pub struct SliceRecords<'a> {
    parser: Parser,
    rest: &'a [u8],
    /// The records of the current line, in reverse order (taken with `pop`).
    out: Vec<Record<'a>>,
    done: bool,
}

impl<'a> Iterator for SliceRecords<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        loop {
            if let Some(r) = self.out.pop() {
                return Some(r);
            }
            if self.rest.is_empty() {
                if self.done {
                    return None;
                }
                self.done = true;
                self.parser.finish(&mut self.out);
                self.out.reverse();
                continue;
            }
            let (line, rest) = match memchr::memchr(b'\n', self.rest) {
                Some(nl) => (&self.rest[..nl], &self.rest[nl + 1..]),
                None => (self.rest, &self.rest[self.rest.len()..]),
            };
            self.rest = rest;
            self.parser.push_line(line, &mut self.out);
            self.out.reverse();
        }
    }
}

/// The records of a log read incrementally; see [`parse_reader`]. Events are owned.
#[derive(Debug)]
pub struct ReaderRecords<R> {
    parser: Parser,
    reader: R,
    buf: Vec<u8>,
    out: VecDeque<Record<'static>>,
    done: bool,
}

impl<R: BufRead> ReaderRecords<R> {
    /// Reads one line into `self.buf` (without `\n`), keeping at most [`MAX_LINE`] bytes.
    /// Returns whether a line was read and whether it was cut.
    fn read_line(&mut self) -> std::io::Result<Option<bool>> {
        self.buf.clear();
        let mut cut = false;
        let mut any = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(any.then_some(cut));
            }
            any = true;
            let (take, used, end) = match memchr::memchr(b'\n', chunk) {
                Some(nl) => (&chunk[..nl], nl + 1, true),
                None => (chunk, chunk.len(), false),
            };
            let room = MAX_LINE.saturating_sub(self.buf.len());
            if take.len() > room {
                cut = true;
            }
            self.buf.extend_from_slice(&take[..take.len().min(room)]);
            self.reader.consume(used);
            if end {
                return Ok(Some(cut));
            }
        }
    }
}

impl<R: BufRead> Iterator for ReaderRecords<R> {
    type Item = Record<'static>;

    fn next(&mut self) -> Option<Record<'static>> {
        loop {
            if let Some(r) = self.out.pop_front() {
                return Some(r);
            }
            if self.done {
                return None;
            }
            let mut fresh = Vec::new();
            match self.read_line() {
                Ok(Some(cut)) => {
                    self.parser.push_line(&self.buf, &mut fresh);
                    if cut {
                        let line = self.parser.lines();
                        fresh
                            .push(Record::Diagnostic(Error::LineTooLong { line, limit: MAX_LINE }));
                    }
                }
                Ok(None) => {
                    self.done = true;
                    self.parser.finish(&mut fresh);
                }
                Err(source) => {
                    self.done = true;
                    let line = self.parser.lines() + 1;
                    fresh.push(Record::Diagnostic(Error::Read { line, source }));
                }
            }
            self.out.extend(fresh.into_iter().map(Record::into_owned));
        }
    }
}
