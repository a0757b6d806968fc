//! Data-driven cases: every `test_data/{ok,err}/NNNN_name.strace` is parsed and rendered (events,
//! typed arguments, diagnostics, denials) next to it as `.txt`. Update the expectations with
//! `UPDATE_EXPECT=1 cargo test -p paddock-strace-parse`, then review the diff.

use std::fmt::Write as _;
use std::path::Path;

use paddock_strace_parse::{
    Arg, CwdChange, DenialTracker, Event, EventKind, Fd, FdArg, Record, Return, Syscall,
    parse_reader, parse_slice, parse_slice_with,
};

fn show_bytes(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

fn show_arg(a: &Arg<'_>) -> String {
    if a.is_null() {
        return "NULL".to_owned();
    }
    if let Some(s) = a.as_str() {
        let cut = if s.truncated { " (truncated)" } else { "" };
        return format!("str b\"{}\"{cut}", show_bytes(&s.bytes));
    }
    if let Some(n) = a.as_int() {
        return format!("int {n}");
    }
    if let Some(fd) = a.as_fd() {
        return show_fd(&fd);
    }
    if let Some(flags) = a.as_flags() {
        return format!("flags {}", flags.join(" | "));
    }
    format!("raw {}", show_bytes(a.raw()))
}

fn show_fd(fd: &FdArg) -> String {
    let mut s = match fd.fd {
        Fd::AtFdcwd => "fd AT_FDCWD".to_owned(),
        Fd::Num(n) => format!("fd {n}"),
    };
    if let Some(d) = &fd.decoration {
        let _ = write!(s, " <b\"{}\">", show_bytes(d));
    }
    if let Some(d) = &fd.detail {
        let _ = write!(s, " detail b\"{}\"", show_bytes(d));
    }
    s
}

fn show_ret(r: &Return<'_>) -> String {
    match r {
        Return::Value(v) => {
            let mut s = format!("= {}", show_bytes(v));
            if let Some(d) = r.decoration() {
                let _ = write!(s, " (decoration b\"{}\")", show_bytes(&d));
            }
            s
        }
        Return::Error { errno, text } => format!("= -1 {errno} ({text})"),
        Return::Restart { errno, text } => format!("= ? {errno} ({text})"),
        Return::Unknown => "= ?".to_owned(),
        Return::Detached => "<detached>".to_owned(),
        Return::Unfinished => "<never resumed>".to_owned(),
        other => format!("{other:?}"),
    }
}

fn show_call(out: &mut String, c: &Syscall<'_>) {
    let _ = write!(out, "{}(..) {}", c.name, show_ret(&c.ret));
    if let Some(d) = c.duration {
        let _ = write!(out, " took {d:?}");
    }
    if c.split {
        let _ = write!(out, " [split, started line {}]", c.start_line);
    }
    if c.orphan {
        out.push_str(" [orphan]");
    }
    if let Some(r) = c.resuming() {
        let _ = write!(out, " [resuming {r}]");
    }
    match c.cwd_change() {
        Some(CwdChange::Path(p)) => {
            let _ = write!(out, " [cwd now b\"{}\"]", show_bytes(&p.bytes));
        }
        Some(CwdChange::Fd(fd)) => {
            let _ = write!(out, " [cwd now {}]", show_fd(&fd));
        }
        _ => {}
    }
    out.push('\n');
    for (i, a) in c.args().enumerate() {
        let _ = writeln!(out, "    arg{i}: {}", show_arg(&a));
    }
}

fn show_event(out: &mut String, e: &Event<'_>) {
    let pid = e.pid.map_or("-".to_owned(), |p| p.to_string());
    let _ = write!(out, "L{} pid {pid}", e.line);
    if let Some(ts) = e.timestamp {
        let _ = write!(out, " at {ts:?}");
    }
    out.push_str(": ");
    match &e.kind {
        EventKind::Syscall(c) => show_call(out, c),
        EventKind::StraceMessage { text } => {
            let _ = writeln!(out, "strace says b\"{}\"", show_bytes(text));
        }
        EventKind::Signal { signal, info } => {
            let _ = writeln!(out, "signal {signal} {}", show_bytes(info));
        }
        EventKind::Note { text } => {
            let _ = writeln!(out, "note b\"{}\"", show_bytes(text));
        }
        other => {
            let _ = writeln!(out, "{other:?}");
        }
    }
}

fn render(input: &[u8]) -> String {
    let mut out = String::new();
    let mut tracker = DenialTracker::new();
    let mut denials = Vec::new();
    for record in parse_slice(input) {
        match record {
            Record::Event(e) => {
                show_event(&mut out, &e);
                denials.extend(tracker.observe(&e));
            }
            Record::Diagnostic(d) => {
                let _ = writeln!(out, "diagnostic: {d}");
            }
        }
    }
    out.push_str("\ndenials:\n");
    for d in &denials {
        let _ = writeln!(out, "{}", d.to_json());
        for p in &d.paths {
            let dirfd =
                p.dirfd.as_ref().map(|f| format!(" dirfd {}", show_fd(f))).unwrap_or_default();
            let _ = writeln!(out, "    {} b\"{}\"{dirfd}", p.role, show_bytes(&p.bytes));
        }
        if let Some(f) = &d.flags {
            let _ = writeln!(out, "    flags {f}");
        }
    }
    out
}

#[test]
fn test_data_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data");
    let mut n = 0;
    for kind in ["ok", "err"] {
        let mut inputs: Vec<_> = std::fs::read_dir(root.join(kind))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "strace"))
            .collect();
        inputs.sort();
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            let rendered = render(&bytes);
            // `ok` cases are clean logs; `err` cases exist to show their diagnostics.
            assert_eq!(
                kind == "err",
                rendered.contains("diagnostic:"),
                "{}: diagnostics only in err/ cases",
                input.display()
            );
            // The reader path must yield exactly what the slice path yields.
            // A tiny read buffer makes every line cross reads.
            let via_reader: Vec<_> = parse_reader(std::io::BufReader::with_capacity(3, &bytes[..]))
                .filter_map(|r| match r {
                    Record::Event(e) => Some(e),
                    Record::Diagnostic(_) => None,
                })
                .collect();
            let via_slice: Vec<_> = parse_slice(&bytes)
                .filter_map(|r| match r {
                    Record::Event(e) => Some(e.into_owned()),
                    Record::Diagnostic(_) => None,
                })
                .collect();
            assert_eq!(via_reader, via_slice, "{}: reader and slice differ", input.display());
            let mut via_with = Vec::new();
            parse_slice_with(&bytes, |r| {
                if let Record::Event(e) = r {
                    via_with.push(e.into_owned());
                }
            });
            assert_eq!(via_with, via_slice, "{}: internal iteration differs", input.display());
            expect_test::expect_file![input.with_extension("txt")].assert_eq(&rendered);
            n += 1;
        }
    }
    assert!(n >= 8, "only {n} test_data cases");
}
