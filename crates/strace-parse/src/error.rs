//! The crate's one error type, used both for hard failures and for the diagnostics that parsing
//! reports while it goes on.

use std::io;

/// What went wrong while reading or parsing an strace log.
///
/// Parsing never stops at a bad line: everything except [`Error::Read`] is a *diagnostic*, reported
/// next to the events (see [`crate::Record::Diagnostic`]) while parsing continues. Every variant
/// carries the 1-based line number it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The underlying reader failed; the stream ends after this.
    #[error("line {line}: failed to read the strace log: {source}")]
    Read {
        /// The line that was being read.
        line: u64,
        /// The reader's error.
        #[source]
        source: io::Error,
    },
    /// A line that is not in any shape strace writes.
    #[error("line {line}: malformed line ({reason}): {excerpt}")]
    Malformed {
        /// The offending line.
        line: u64,
        /// Which part did not parse.
        reason: &'static str,
        /// The start of the line, lossily decoded, for people to read (never for paths).
        excerpt: String,
    },
    /// A line longer than the parser's limit; its tail was dropped.
    #[error("line {line}: line longer than {limit} bytes was cut")]
    LineTooLong {
        /// The offending line.
        line: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// A `<... NAME resumed>` line with no `<unfinished ...>` start for that pid.
    #[error("line {line}: pid {pid}: `{syscall}` resumed without an unfinished start")]
    OrphanResume {
        /// The resume line.
        line: u64,
        /// The pid, as printed (`-` when the log has no pid column).
        pid: PidText,
        /// The syscall named by the resume.
        syscall: String,
    },
    /// An `<unfinished ...>` call that never resumed (the process died, strace detached, or the
    /// log ended).
    #[error("line {line}: pid {pid}: `{syscall}` started here never resumed")]
    Unresumed {
        /// The line where the call started.
        line: u64,
        /// The pid, as printed (`-` when the log has no pid column).
        pid: PidText,
        /// The syscall that was left unfinished.
        syscall: String,
    },
    /// More calls (or more of their bytes) were in flight than the parser keeps; the oldest
    /// one, started at `line`, was given up.
    #[error(
        "line {line}: too much in flight (over {limit} unfinished calls, or over their byte \
         limit), gave up the oldest"
    )]
    TooManyPending {
        /// The line where the oldest pending call started.
        line: u64,
        /// The limit on calls in flight.
        limit: usize,
    },
}

impl Error {
    /// The 1-based line number the error is about.
    pub fn line(&self) -> u64 {
        match self {
            Error::Read { line, .. }
            | Error::Malformed { line, .. }
            | Error::LineTooLong { line, .. }
            | Error::OrphanResume { line, .. }
            | Error::Unresumed { line, .. }
            | Error::TooManyPending { line, .. } => *line,
        }
    }

    pub(crate) fn malformed(line: u64, reason: &'static str, text: &[u8]) -> Error {
        let cut = &text[..text.len().min(80)];
        Error::Malformed { line, reason, excerpt: String::from_utf8_lossy(cut).into_owned() }
    }
}

/// A pid for messages: the number, or `-` when the log has no pid column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidText(pub Option<u32>);

impl std::fmt::Display for PidText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(pid) => write!(f, "{pid}"),
            None => f.write_str("-"),
        }
    }
}
