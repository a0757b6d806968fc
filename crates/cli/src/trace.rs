//! Running a plan traced: strace writes to a pipe, a thread parses it while the task runs
//! (DESIGN decision 5: no trace file), and what it saw comes back when the task is done.
//!
//! The reader parses lines in place in one buffer ([`Parser::feed_line`]): a line costs no
//! copy and no allocation unless it is a failed call or moves a working directory. It
//! reads in batches (a large pipe, a short nap after a short read), so that strace is not
//! slowed by waking the reader for every line. Reports come only from this pipe, never from the task's output, so
//! a task printing strace-like lines cannot forge or hide a denial (PRC-09).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result};
use paddock_linux_bwrap::trace::{TraceOptions, wrap};
use paddock_policy::{
    AbsPathBuf, HostFacts, ItemizeMode, ReportFilter, ResolvedPolicy, SpawnPlan, Violation,
    ViolationSet,
};
use paddock_strace_parse::{Event, Parser, Record};

use crate::classify::Classifier;
use crate::host::RealHost;
use crate::supervise::{RunOptions, RunOutcome, run_plan_in, run_plan_with};

/// What looks at each event of a trace.
pub trait Observer: Send + 'static {
    /// One event.
    fn event(&mut self, event: &Event<'_>);
}

/// How long the reader may take to finish after the sandbox is gone: every holder of the
/// pipe's write end is dead by then, so this only guards against the impossible.
const READER_GRACE: Duration = Duration::from_secs(10);

/// A reader thread parsing a trace pipe into an observer.
#[derive(Debug)]
pub struct Reader<O> {
    rx: mpsc::Receiver<(O, u64)>,
}

impl<O: Observer> Reader<O> {
    /// Creates the pipe and starts the reader. Returns the write end (for strace) and the
    /// reader.
    pub fn start(mut observer: O) -> Result<(OwnedFd, Reader<O>)> {
        let mut fds = [0; 2];
        // SAFETY: a valid two-int array; the result is checked.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("cannot create the trace pipe");
        }
        // SAFETY: two fresh descriptors that we now own.
        let (read, write) = unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A large pipe lets strace write on while the reader naps. Best effort: the limit
        // (fs.pipe-max-size) may be lower.
        for size in [BUF, 256 * 1024] {
            // SAFETY: fcntl on a descriptor we own, with an integer argument.
            if unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) }
                > 0
            {
                break;
            }
        }
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("paddock-trace".into())
            .spawn(move || {
                let lines = read_trace(read, &mut observer);
                let _ = tx.send((observer, lines));
            })
            .context("cannot start the trace reader")?;
        Ok((write, Reader { rx }))
    }

    /// Waits for the end of the trace: the observer and the number of lines read. `None`
    /// if the pipe stayed open past the grace period.
    pub fn finish(self) -> Option<(O, u64)> {
        self.rx.recv_timeout(READER_GRACE).ok()
    }
}

/// The reader's buffer: also the most a line can be before it is cut.
const BUF: usize = 1 << 20;
/// A read shorter than this means strace is writing slowly: the reader naps
/// ([`NAP`]) so that lines pile up in the pipe instead of waking it (and costing strace a
/// wake-up) one line at a time.
const SHORT_READ: usize = 64 * 1024;
const NAP: Duration = Duration::from_millis(2);

/// Parses a trace until EOF, handing each event to `observer`; returns the line count.
/// Lines are parsed in place in one buffer: no copy and no allocation per line.
pub fn read_trace<R: Read, O: Observer + ?Sized>(mut input: R, observer: &mut O) -> u64 {
    let mut parser = Parser::new();
    let mut buf = vec![0u8; BUF];
    let mut filled = 0;
    let mut count = 0;
    let mut eof = false;
    while !eof {
        let n = match input.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => {
                eof = true;
                0
            }
            Ok(n) => n,
        };
        filled += n;
        let mut start = 0;
        while let Some(nl) = memchr(b'\n', &buf[start..filled]) {
            count += 1;
            parser.feed_line(&buf[start..start + nl], |r| {
                if let Record::Event(e) = r {
                    observer.event(&e);
                }
            });
            start += nl + 1;
        }
        if start == 0 && filled == buf.len() || eof && start < filled {
            // A line longer than the buffer (cut), or the last line without its newline.
            count += 1;
            parser.feed_line(&buf[..filled], |r| {
                if let Record::Event(e) = r {
                    observer.event(&e);
                }
            });
            start = filled;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if !eof && n < SHORT_READ {
            std::thread::sleep(NAP);
        }
    }
    parser.finish_with(|r| {
        if let Record::Event(e) = r {
            observer.event(&e);
        }
    });
    count
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|b| *b == needle)
}

/// The observer of `paddock run`: classified, filtered, deduplicated violations.
#[derive(Debug)]
pub struct Violations {
    classifier: Classifier<RealHost>,
    /// Violations kept by the report filter.
    pub reported: ViolationSet,
    /// How many denials the filter dropped (enforced silently).
    pub silent: u64,
}

impl Violations {
    /// An observer for `policy`, the task starting in `cwd`.
    pub fn new(policy: ResolvedPolicy, cwd: &Path) -> Violations {
        Violations {
            classifier: Classifier::new(policy, RealHost, cwd)
                .gated(paddock_linux_bwrap::SUPERVISOR_PATH.as_bytes()),
            reported: ViolationSet::new(),
            silent: 0,
        }
    }
}

impl Observer for Violations {
    fn event(&mut self, event: &Event<'_>) {
        if let Some(found) = self.classifier.observe(event) {
            let filter = ReportFilter::new(self.classifier.policy());
            if filter.keep(&found.violation, found.spelled.as_deref()) {
                self.reported.add(found.violation);
            } else {
                self.silent += 1;
            }
        }
    }
}

/// How (and whether) to trace, from the policy's `report.itemize` and the host. The second
/// value is a note for the user when the choice differs from what was asked.
pub fn choose(mode: ItemizeMode, facts: &HostFacts) -> (Option<TraceOptions>, Option<String>) {
    let strace = facts.strace.as_ref().and_then(AbsPathBuf::new_lexical);
    match (mode, strace) {
        (ItemizeMode::Off, _) => (None, None),
        (ItemizeMode::Strace | ItemizeMode::Observe, None) => (
            None,
            Some(
                "strace was not found: denials are enforced but not itemized (run `paddock check`)"
                    .into(),
            ),
        ),
        (ItemizeMode::Auto, None) => (None, None),
        // `strace`: every syscall stop, so calls the seccomp filter refuses show too.
        (ItemizeMode::Strace, Some(strace)) => {
            (Some(TraceOptions { strace, seccomp_bpf: false }), None)
        }
        (ItemizeMode::Observe, Some(strace)) => (
            Some(TraceOptions { strace, seccomp_bpf: facts.strace_seccomp_bpf }),
            Some("--itemize observe is not available yet; itemizing with strace".into()),
        ),
        (ItemizeMode::Auto, Some(strace)) => {
            (Some(TraceOptions { strace, seccomp_bpf: facts.strace_seccomp_bpf }), None)
        }
    }
}

/// A finished run and what the trace said.
#[derive(Debug)]
pub struct Ran {
    /// How the task ended.
    pub outcome: RunOutcome,
    /// `Some("strace")` when the run was itemized.
    pub itemized_by: Option<&'static str>,
    /// The reported violations.
    pub violations: Vec<Violation>,
}

/// Runs `plan`, traced when `trace` says so. When strace fails on its own (the task never
/// started and strace wrote nothing), the task is run once more untraced, and stderr says so.
pub fn run(
    plan: &SpawnPlan,
    trace: Option<&TraceOptions>,
    policy: &ResolvedPolicy,
    cwd: &AbsPathBuf,
    opts: &RunOptions,
    runtime_dir: Option<&Path>,
) -> Result<Ran> {
    let Some(topts) = trace else {
        let outcome = run_plan_in(plan, opts, runtime_dir)?;
        return Ok(Ran { outcome, itemized_by: None, violations: Vec::new() });
    };
    let traced = wrap(plan.clone(), topts);
    let (write, reader) = Reader::start(Violations::new(policy.clone(), cwd.as_path()))?;
    let outcome = run_plan_with(&traced.plan, opts, runtime_dir, vec![(write, traced.fd)])?;
    let finished = reader.finish();
    let lines = finished.as_ref().map_or(0, |f| f.1);
    if !outcome.started && !outcome.timed_out && lines == 0 {
        eprintln!(
            "paddock: strace failed before the task started (its message is above); running the task once more without itemizing denials"
        );
        let outcome = run_plan_in(plan, opts, runtime_dir)?;
        return Ok(Ran { outcome, itemized_by: None, violations: Vec::new() });
    }
    match finished {
        Some((v, _)) => {
            Ok(Ran { outcome, itemized_by: Some("strace"), violations: v.reported.into_vec() })
        }
        None => {
            eprintln!("paddock: the trace did not end with the task; denials are not itemized");
            Ok(Ran { outcome, itemized_by: None, violations: Vec::new() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `chunk` bytes per read.
    struct Trickle<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(self.data.len()).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[derive(Default)]
    struct Names(Vec<String>);

    impl Observer for Names {
        fn event(&mut self, event: &Event<'_>) {
            if let Some(call) = event.syscall() {
                self.0.push(format!("{}:{}", event.pid.unwrap_or(0), call.name));
            }
        }
    }

    #[test]
    fn lines_split_across_reads_and_a_last_line_without_newline_are_parsed() {
        let log = b"1 openat(AT_FDCWD, \"/a\", O_RDONLY) = 3\n\
            2 mkdir(\"/b\", 0777 <unfinished ...>\n\
            1 unlink(\"/c\") = -1 EROFS (Read-only file system)\n\
            2 <... mkdir resumed>) = -1 EROFS (Read-only file system)\n\
            3 chdir(\"/d\") = 0";
        for chunk in [1, 7, 64, 1 << 20] {
            let mut names = Names::default();
            let lines = read_trace(Trickle { data: log, chunk }, &mut names);
            assert_eq!(lines, 5, "chunk {chunk}");
            assert_eq!(names.0, ["1:openat", "1:unlink", "2:mkdir", "3:chdir"], "chunk {chunk}");
        }
    }
}
