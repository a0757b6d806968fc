//! The kernel's seatbelt deny records, parsed into paddock [`Violation`]s.
//!
//! macOS logs each denial as `Sandbox: PROCESS(PID) deny(N) OPERATION ARGUMENT`, for example
//! `Sandbox: cat(4242) deny(1) file-read-data /Users/u/.ssh/id_rsa`, and folds repeats into
//! `Sandbox: 3 duplicate reports for cat deny(1) file-read-data /Users/u/.ssh/id_rsa`. A rule
//! carrying `(with message "TAG")` appends the tag on the next line of the same record.
//! `log stream --style ndjson` wraps each record in a JSON object whose `eventMessage` is
//! that text; `--style compact` and `syslog` print it after a prefix. This module reads all of
//! them, line by line, and never fails: a line that is not a denial is [`LogLine::Other`], and
//! a denial of an operation paddock does not map is [`LogLine::Unrecognized`], kept for the
//! diagnostics.
//!
//! Operations map to kinds as follows: `file-read*` and `process-exec*` → read;
//! `file-write*`, `file-link`, `file-ioctl` … → write; `network-*` with a socket path → unix
//! socket, with an address → network; `system-socket` → unix socket (it is how `socket(AF_UNIX)`
//! is refused); `mach-lookup`, `mach-register`, `lsopen`, `appleevent-send` → mach-lookup;
//! `sysctl-*`, `iokit-get-properties` → system-info.

use std::path::PathBuf;

use paddock_policy::{Violation, ViolationKind, ViolationSet};

/// One line of `log stream` output, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogLine {
    /// A denial, with the number of times it was reported.
    Denial(Violation),
    /// A denial of an operation without a paddock violation kind (`signal`, `iokit-open`).
    Unrecognized {
        /// The seatbelt operation.
        operation: String,
        /// The record's first line.
        message: String,
    },
    /// Anything else: the stream's header, other log records, blank lines.
    Other,
}

/// Parses one line: an ndjson record, or a text line holding `Sandbox: ... deny`.
pub fn parse_log_line(line: &str) -> LogLine {
    match message_of(line) {
        Some(message) => parse_message(first_line(&message)),
        None => LogLine::Other,
    }
}

/// Parses a whole stream. With `tag`, only records carrying it count (the monitor's filter
/// already selects them; this keeps a stray record of another sandbox out of the report).
/// Returns the deduplicated violations and one note per unrecognized denial.
pub fn parse_log_stream(text: &str, tag: Option<&str>) -> (Vec<Violation>, Vec<String>) {
    let mut set = ViolationSet::new();
    let mut notes = Vec::new();
    for line in text.lines() {
        let Some(message) = message_of(line) else { continue };
        if let Some(tag) = tag
            && !message.contains(tag)
        {
            continue;
        }
        match parse_message(first_line(&message)) {
            LogLine::Denial(v) => set.add(v),
            LogLine::Unrecognized { operation, message } => {
                notes.push(format!("unmapped seatbelt denial `{operation}`: {message}"));
            }
            LogLine::Other => {}
        }
    }
    (set.into_vec(), notes)
}

/// The record's message: `eventMessage` of a JSON line, else the line itself.
fn message_of(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if trimmed.starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(trimmed).ok()?;
        return value.get("eventMessage")?.as_str().map(str::to_owned);
    }
    Some(line.to_owned())
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

/// Parses `... Sandbox: PROCESS(PID) deny(N) OPERATION ARGUMENT`.
fn parse_message(message: &str) -> LogLine {
    let Some(at) = message.find("Sandbox: ") else { return LogLine::Other };
    let mut rest = &message[at + "Sandbox: ".len()..];

    let mut count = 1;
    if let Some((n, tail)) = rest.split_once(' ')
        && let (Ok(n), Some(tail)) = (n.parse::<u64>(), duplicate_tail(tail))
    {
        count = n.max(1);
        rest = tail;
    }

    // The process name may hold spaces and parens; the verdict is the first ` deny` that is
    // followed by `(` or a space.
    let Some(deny_at) = find_verdict(rest) else { return LogLine::Other };
    let mut after = &rest[deny_at + " deny".len()..];
    if let Some(stripped) = after.strip_prefix('(') {
        let Some(close) = stripped.find(')') else { return LogLine::Other };
        after = &stripped[close + 1..];
    }
    let after = strip_trailing_tag(after.trim_start());
    let (operation, argument) = match after.split_once(' ') {
        Some((op, arg)) => (op, arg.trim()),
        None => (after.trim_end(), ""),
    };
    if operation.is_empty() {
        return LogLine::Other;
    }
    match violation(operation, argument, count) {
        Some(v) => LogLine::Denial(v),
        None => LogLine::Unrecognized {
            operation: operation.to_owned(),
            message: message.trim().to_owned(),
        },
    }
}

/// Drops a log tag printed on the deny line itself (` paddock-` and 16 hex digits at the end)
/// rather than on the next line, so that it never becomes part of a path.
fn strip_trailing_tag(text: &str) -> &str {
    let text = text.trim_end();
    if let Some((head, last)) = text.rsplit_once(' ')
        && let Some(hex) = last.strip_prefix("paddock-")
        && hex.len() == 16
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return head.trim_end();
    }
    text
}

/// `duplicate report(s) for ...` → the rest after `for `.
fn duplicate_tail(tail: &str) -> Option<&str> {
    tail.strip_prefix("duplicate reports for ")
        .or_else(|| tail.strip_prefix("duplicate report for "))
}

fn find_verdict(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(" deny") {
        let at = from + i;
        match text[at + " deny".len()..].chars().next() {
            Some('(') | Some(' ') => return Some(at),
            _ => from = at + 1,
        }
    }
    None
}

fn violation(operation: &str, argument: &str, count: u64) -> Option<Violation> {
    let base =
        |kind| Violation { kind, path: None, target: None, syscall: None, errno: None, count };
    let with_path = |kind| {
        let mut v = base(kind);
        if !argument.is_empty() {
            v.path = Some(PathBuf::from(argument));
        }
        v
    };
    let with_target = |kind, target: String| {
        let mut v = base(kind);
        if !target.is_empty() {
            v.target = Some(target);
        }
        v
    };
    let op = operation;
    let v = if op.starts_with("file-read")
        || op.starts_with("process-exec")
        || op == "file-map-executable"
    {
        with_path(ViolationKind::Read)
    } else if op.starts_with("file-write")
        || matches!(
            op,
            "file-link"
                | "file-clone"
                | "file-ioctl"
                | "file-revoke"
                | "file-mknod"
                | "file-chroot"
        )
    {
        with_path(ViolationKind::Write)
    } else if op.starts_with("network-") {
        if argument.starts_with('/') {
            with_path(ViolationKind::UnixSocket)
        } else {
            with_target(ViolationKind::Network, argument.to_owned())
        }
    } else if op == "system-socket" {
        with_target(ViolationKind::UnixSocket, argument.to_owned())
    } else if matches!(op, "mach-lookup" | "mach-register") {
        with_target(ViolationKind::MachLookup, argument.to_owned())
    } else if matches!(op, "lsopen" | "appleevent-send") {
        let target = if argument.is_empty() { op.to_owned() } else { format!("{op} {argument}") };
        with_target(ViolationKind::MachLookup, target)
    } else if op.starts_with("sysctl-") || op == "iokit-get-properties" {
        with_target(ViolationKind::SystemInfo, argument.to_owned())
    } else {
        return None;
    };
    Some(v)
}

/// Where macOS keeps `log`. Absolute for the reason [`SANDBOX_EXEC`](crate::SANDBOX_EXEC) is.
pub const LOG_PROGRAM: &str = "/usr/bin/log";

/// The arguments of the `log stream` that collects one task's denials: newline-delimited
/// JSON (one record per line, multi-line messages escaped) and a predicate on the task's log
/// tag. The tag is paddock's own (`paddock-` and hex digits, checked by the profile builder),
/// so it is safe inside the predicate's quotes.
pub fn log_stream_args(tag: &str) -> Vec<String> {
    vec![
        "stream".to_owned(),
        "--style".to_owned(),
        "ndjson".to_owned(),
        "--predicate".to_owned(),
        format!("eventMessage CONTAINS \"{tag}\""),
    ]
}
