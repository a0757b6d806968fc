//! Fuzzes the seatbelt deny-record parser: `log stream` output (ndjson, compact or syslog
//! style) is written by the system, but its messages carry the sandboxed task's paths and
//! names. Any text must parse without panicking, line by line and as a stream, with and
//! without the run's tag, and every denial must keep its count. Run with `cargo fuzz run
//! log_stream` in `crates/macos-seatbelt`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use paddock_macos_seatbelt::{LogLine, parse_log_line, parse_log_stream};

const TAG: &str = "paddock-0123456789abcdef";

fn count_of(line: &LogLine) -> u64 {
    match line {
        LogLine::Denial(v) => v.count,
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut denied = 0u64;
    for line in text.lines() {
        let parsed = parse_log_line(line);
        if let LogLine::Denial(v) = &parsed {
            assert!(v.count >= 1, "a denial counts at least once: {line:?}");
        }
        denied = denied.saturating_add(count_of(&parsed));
    }
    let (all, _) = parse_log_stream(&text, None);
    let total: u64 = all.iter().map(|v| v.count).fold(0, u64::saturating_add);
    assert_eq!(total, denied, "the stream's counts are the lines' counts");
    let (tagged, _) = parse_log_stream(&text, Some(TAG));
    assert!(tagged.len() <= all.len());
});
