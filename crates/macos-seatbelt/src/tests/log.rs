//! The deny-record parser on sample `log stream` output (`test_data/log/`).

use expect_test::{expect, expect_file};
use paddock_policy::{Violation, ViolationKind};

use crate::{LogLine, log_stream_args, parse_log_line, parse_log_stream};

const TAG: &str = "paddock-0123456789abcdef";

fn show(v: &Violation) -> String {
    let mut out = format!("{:?} x{}", v.kind, v.count);
    if let Some(p) = &v.path {
        out.push_str(&format!(" path={}", p.display()));
    }
    if let Some(t) = &v.target {
        out.push_str(&format!(" target={t}"));
    }
    out
}

#[track_caller]
fn check_lines(input: &str, expect: expect_test::ExpectFile) {
    let mut out = String::new();
    for (i, line) in input.lines().enumerate() {
        let shown = match parse_log_line(line) {
            LogLine::Denial(v) => show(&v),
            LogLine::Unrecognized { operation, .. } => format!("unrecognized {operation}"),
            LogLine::Other => "other".to_owned(),
        };
        out.push_str(&format!("{:>2}: {shown}\n", i + 1));
    }
    expect.assert_eq(&out);
}

#[test]
fn ndjson_lines() {
    check_lines(
        include_str!("../../test_data/log/stream.ndjson"),
        expect_file!["../../test_data/log/stream.lines.txt"],
    );
}

#[test]
fn compact_lines() {
    check_lines(
        include_str!("../../test_data/log/compact.log"),
        expect_file!["../../test_data/log/compact.lines.txt"],
    );
}

#[test]
fn stream_keyed_to_the_tag_and_deduplicated() {
    let (violations, notes) =
        parse_log_stream(include_str!("../../test_data/log/stream.ndjson"), Some(TAG));
    let mut out: Vec<String> = violations.iter().map(show).collect();
    out.extend(notes);
    expect_file!["../../test_data/log/stream.report.txt"].assert_eq(&(out.join("\n") + "\n"));
    assert!(violations.iter().all(|v| v.path.as_deref() != Some("/Users/other/secret".as_ref())));
    let id_rsa = violations
        .iter()
        .find(|v| {
            v.kind == ViolationKind::Read
                && v.path.as_deref() == Some("/Users/u/.ssh/id_rsa".as_ref())
        })
        .unwrap();
    assert_eq!(id_rsa.count, 4, "one report and three duplicates");
}

#[test]
fn malformed_lines_never_panic() {
    for line in [
        "Sandbox: ",
        "Sandbox: x deny(",
        "Sandbox: x(1) deny(1)",
        "Sandbox: 5 duplicate reports for ",
        "{\"eventMessage\": 5}",
        "{not json",
        "Sandbox: a deny(b) deny(1) file-read-data /x",
    ] {
        let _ = parse_log_line(line);
    }
    assert_eq!(parse_log_line("Sandbox: x(1) deny(1)"), LogLine::Other);
}

#[test]
fn duplicate_counts_saturate_instead_of_overflowing() {
    let line = format!("Sandbox: {} duplicate reports for cat deny(1) file-read-data /x", u64::MAX);
    let (violations, _) = parse_log_stream(&format!("{line}\n{line}\n"), None);
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].count, u64::MAX);
}

#[test]
fn the_monitor_predicate() {
    expect![[r#"["stream", "--style", "ndjson", "--predicate", "eventMessage CONTAINS \"paddock-0123456789abcdef\""]"#]]
        .assert_eq(&format!("{:?}", log_stream_args(TAG)));
}
