//! Running a plan traced: strace writes to a pipe, a thread parses it while the task runs
//! (DESIGN decision 5: no trace file), and what it saw comes back when the task is done.
//!
//! The reader reuses one line buffer and parses each line in place
//! ([`Parser::feed_line`]): a line costs no allocation unless it is a failed call or moves
//! a working directory. Reports come only from this pipe, never from the task's output, so
//! a task printing strace-like lines cannot forge or hide a denial (PRC-09).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
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
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("paddock-trace".into())
            .spawn(move || {
                let lines = read_trace(BufReader::with_capacity(256 * 1024, read), &mut observer);
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

/// Parses a trace until EOF, handing each event to `observer`; returns the line count.
pub fn read_trace<R: BufRead, O: Observer + ?Sized>(mut input: R, observer: &mut O) -> u64 {
    let mut parser = Parser::new();
    let mut line = Vec::with_capacity(4096);
    let mut count = 0;
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        count += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        parser.feed_line(&line, |r| {
            if let Record::Event(e) = r {
                observer.event(&e);
            }
        });
    }
    parser.finish_with(|r| {
        if let Record::Event(e) = r {
            observer.event(&e);
        }
    });
    count
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
