//! Prints every failed call of an strace log as one JSON object per line, in log order of
//! completion: `{"pid": N, "syscall": "openat", "paths": ["<hex>", ...], "truncated": false,
//! "errno": "ENOENT"}`. Tools outside this repository rely on these exact keys.
//!
//! Usage: `cargo run -p paddock-strace-parse --example denials -- LOG`, where LOG is a log file
//! or the folder of a `strace -ff -o PREFIX` run (files `PREFIX.<tid>`, read in tid order).
//! Diagnostics about the log go to stderr.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::Path;

use paddock_strace_parse::{DenialTracker, Parser, Record, ff_tid};

/// Writes the JSON lines for the log at `path` to `out`, and diagnostics to `diag`.
pub fn run(path: &Path, out: &mut dyn Write, diag: &mut dyn Write) -> io::Result<()> {
    if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let name = entry.file_name();
            if let Some(tid) = ff_tid(name.as_encoded_bytes()) {
                files.push((tid, entry.path()));
            }
        }
        files.sort();
        for (tid, file) in files {
            print_file(&file, Parser::new().with_pid(tid), out, diag)?;
        }
        Ok(())
    } else {
        print_file(path, Parser::new(), out, diag)
    }
}

fn print_file(
    path: &Path,
    parser: Parser,
    out: &mut dyn Write,
    diag: &mut dyn Write,
) -> io::Result<()> {
    let reader = BufReader::new(File::open(path)?);
    let mut tracker = DenialTracker::new();
    for record in parser.reader(reader) {
        match record {
            Record::Event(event) => {
                if let Some(denial) = tracker.observe(&event) {
                    writeln!(out, "{}", denial.to_json())?;
                }
            }
            Record::Diagnostic(d) => writeln!(diag, "{}: {d}", path.display())?,
        }
    }
    Ok(())
}

#[allow(dead_code)] // The corpus test includes this file for `run` only.
fn main() {
    let Some(log) = std::env::args_os().nth(1) else {
        eprintln!("usage: denials LOG   (a strace log file, or a folder of -ff files)");
        std::process::exit(2);
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(Path::new(&log), &mut out, &mut io::stderr()).and_then(|()| out.flush());
    if let Err(e) = result {
        eprintln!("denials: {}: {e}", Path::new(&log).display());
        std::process::exit(1);
    }
}
