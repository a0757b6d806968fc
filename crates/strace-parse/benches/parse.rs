//! Throughput of the parser on a large synthetic `strace -f` openat trace, against a naive
//! line-by-line regex parser as the baseline.
//!
//! The trace is generated here, deterministically: 24 threads opening files (a third of them
//! missing, some names with spaces, quotes and escapes), a quarter of the calls split into
//! `<unfinished ...>`/`resumed>` pairs as under real contention, plus the `fstat`/`read`/
//! `close` traffic around each open. The parser is measured through its iterator
//! (`parse_slice`) and through internal iteration (`parse_slice_with`). Run with
//! `cargo bench -p paddock-strace-parse --bench parse -- --measurement-time 5`.

// A bench that cannot build its input should stop loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use paddock_strace_parse::{DenialTracker, Record, denials, parse_slice, parse_slice_with};
use regex::bytes::Regex;

/// A small deterministic PRNG (xorshift), so the trace is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn synthetic_trace(target_bytes: usize) -> Vec<u8> {
    use std::io::Write;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(target_bytes + 4096);
    let dirs = ["/usr/lib/python3.11", "/home/user/project/src", "/etc", "/nonexistent/cache dir"];
    let names =
        ["mod.py", "__init__.cpython-311.pyc", "config \"local\".toml", "caf\\303\\251.txt", "x"];
    let mut pending: Vec<(u32, usize)> = Vec::new();
    while out.len() < target_bytes {
        let pid = 4000 + (rng.next() % 24) as u32;
        let r = rng.next();
        let dir = dirs[(r % 4) as usize];
        let name = names[((r >> 8) % 5) as usize];
        let missing = (r >> 16).is_multiple_of(3);
        let ret: &str = if missing { "-1 ENOENT (No such file or directory)" } else { "3" };
        if (r >> 24).is_multiple_of(4) && !pending.iter().any(|(p, _)| *p == pid) {
            writeln!(
                out,
                "{pid:<5} openat(AT_FDCWD, \"{dir}/{name}\", O_RDONLY|O_CLOEXEC <unfinished ...>"
            )
            .unwrap();
            pending.push((pid, (r % 3) as usize));
        } else {
            writeln!(
                out,
                "{pid:<5} openat(AT_FDCWD, \"{dir}/{name}\", O_RDONLY|O_CLOEXEC) = {ret}"
            )
            .unwrap();
            if !missing {
                writeln!(out, "{pid:<5} newfstatat(3, \"\", {{st_mode=S_IFREG|0644, st_size=4096, ...}}, AT_EMPTY_PATH) = 0").unwrap();
                writeln!(out, "{pid:<5} read(3, \"import os\\nimport sys\\n\\nfrom . import \"..., 4096) = 4096").unwrap();
                writeln!(out, "{pid:<5} close(3)                          = 0").unwrap();
            }
        }
        if pending.len() > 3 {
            let (p, kind) = pending.remove(0);
            let ret = if kind == 0 { "-1 EACCES (Permission denied)" } else { "4" };
            writeln!(out, "{p:<5} <... openat resumed>)             = {ret}").unwrap();
        }
    }
    for (p, _) in pending {
        writeln!(out, "{p:<5} <... openat resumed>)             = 4").unwrap();
    }
    out
}

/// The naive baseline: one regex per line, capturing pid, name and outcome (no pairing, no
/// string decoding: it does less than the parser and is still slower).
fn regex_baseline(input: &[u8], re: &Regex) -> (usize, usize) {
    let (mut calls, mut failed) = (0, 0);
    for line in input.split(|&b| b == b'\n') {
        if let Some(c) = re.captures(line) {
            calls += 1;
            if c.get(5).is_some() {
                failed += 1;
            }
        }
    }
    (calls, failed)
}

fn bench(c: &mut Criterion) {
    let input = synthetic_trace(32 << 20);
    let lines = input.iter().filter(|&&b| b == b'\n').count();
    eprintln!(
        "synthetic trace: {} bytes, {lines} lines, {:.1} bytes/line",
        input.len(),
        input.len() as f64 / lines as f64
    );
    let re = Regex::new(
        r#"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*?)(?:<unfinished \.\.\.>|\)\s+=\s+(?:-1 (E[A-Z0-9]+) \(([^)]*)\)|(\S+)))$"#,
    )
    .unwrap();
    // Both sides must see the same failures, or the comparison means nothing.
    let ours = denials(parse_slice(&input)).count();
    let (_, theirs) = regex_baseline(&input, &re);
    assert_eq!(ours, theirs, "parser and baseline disagree on the number of failed calls");
    eprintln!("failed calls: {ours}");

    let mut g = c.benchmark_group("strace_f_openat");
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.sample_size(10);
    g.bench_function("paddock_events", |b| {
        b.iter(|| parse_slice(black_box(&input)).filter(|r| matches!(r, Record::Event(_))).count())
    });
    g.bench_function("paddock_denials", |b| {
        b.iter(|| denials(parse_slice(black_box(&input))).count())
    });
    // Internal iteration (`parse_slice_with`): the same parse, no buffering between parser
    // and consumer.
    g.bench_function("paddock_events_internal", |b| {
        b.iter(|| {
            let mut n = 0usize;
            parse_slice_with(black_box(&input), |r| {
                n += usize::from(matches!(r, Record::Event(_)))
            });
            n
        })
    });
    g.bench_function("paddock_denials_internal", |b| {
        b.iter(|| {
            let mut tracker = DenialTracker::new();
            let mut n = 0usize;
            parse_slice_with(black_box(&input), |r| {
                if let Record::Event(e) = r {
                    n += usize::from(tracker.observe(&e).is_some());
                }
            });
            n
        })
    });
    g.bench_function("regex_baseline", |b| b.iter(|| regex_baseline(black_box(&input), &re)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
