//! Fuzz target: any bytes, as a log, must parse without panicking, through the slice, reader
//! and internal-iteration paths alike (same records), and the denials of them must build.
//! Memory stays bounded by construction (`MAX_LINE`, `MAX_PENDING`); a log that broke that
//! would show here as an out-of-memory report. Run with `cargo fuzz run parse` in
//! `crates/strace-parse`.

#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use paddock_strace_parse::quote::{StringStyle, decode, encode};
use paddock_strace_parse::{Record, denials, parse_reader, parse_slice, parse_slice_with};

fuzz_target!(|data: &[u8]| {
    let from_slice: Vec<_> = parse_slice(data).map(Record::into_owned).collect();
    // A tiny buffer makes lines cross reads at every position.
    let from_reader: Vec<_> = parse_reader(BufReader::with_capacity(7, data)).collect();
    let mut from_with = Vec::new();
    parse_slice_with(data, |r| from_with.push(r.into_owned()));
    assert_eq!(from_slice.len(), from_reader.len());
    assert_eq!(from_slice.len(), from_with.len());
    for d in denials(parse_slice(data)) {
        let _ = d.to_json();
    }
    assert_eq!(decode(&encode(data, StringStyle::Default)), data);
});
