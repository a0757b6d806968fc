//! Reading a trace: strace writes to a pipe, a thread parses it while the task runs
//! (DESIGN decision 5: no trace file), and what it saw comes back when the task is done.
//!
//! The reader parses lines in place in one buffer ([`Parser::feed_line`]): a line costs no
//! copy and no allocation unless it is a failed call or moves a working directory. It
//! reads in batches (a large pipe, a short nap after a short read), so that strace is not
//! slowed by waking the reader for every line. Reports come only from this pipe, never from
//! the task's output, so a task printing strace-like lines cannot forge or hide a denial
//! (PRC-09).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::{ReportFilter, ResolvedPolicy, ViolationSet};
use paddock_strace_parse::{Event, EventKind, Parser, Record};

use crate::runtime::classify::Classifier;
use crate::runtime::host::RealHost;

/// What looks at each event of a trace.
pub trait Observer: Send + 'static {
    /// One event.
    fn event(&mut self, event: &Event<'_>);
}

/// How long the reader may take to finish after the sandbox is gone: every holder of the
/// pipe's write end is dead by then, so this only guards against the impossible.
const READER_GRACE: Duration = Duration::from_secs(10);

/// How long the trace may stay open after the traced bwrap itself exited. bwrap exits
/// after its sandbox is gone, so nothing legitimate is traced past this; what is left is a
/// child bwrap abandoned before it could arm `--die-with-parent` (it waits forever for a
/// go-ahead from its dead parent), and strace would wait for it forever.
pub const STUCK_GRACE: Duration = Duration::from_secs(2);

/// A reader thread parsing a trace pipe into an observer.
#[derive(Debug)]
pub struct Reader<O> {
    rx: mpsc::Receiver<Finished<O>>,
}

/// What a reader hands back at the end of the trace.
#[derive(Debug)]
pub struct Finished<O> {
    /// The observer, having seen every event.
    pub observer: O,
    /// How many lines the trace had.
    pub lines: u64,
    /// Whether the trace showed any call: strace got as far as tracing bwrap (exit lines
    /// alone come from a strace that failed to start its command).
    pub traced_a_call: bool,
    /// Whether the tracer was stopped because it kept following a process bwrap left
    /// behind when it failed ([`STUCK_GRACE`]).
    pub stopped_stuck_tracer: bool,
}

impl<O: Observer> Reader<O> {
    /// Creates the pipe and starts the reader. Returns the write end (for strace) and the
    /// reader.
    pub fn start(observer: O) -> Result<(OwnedFd, Reader<O>)> {
        Reader::start_with(observer, true)
    }

    /// [`Reader::start`] for a trace whose pids are not this process's to look up (strace
    /// inside the sandbox's pid namespace): no stuck tracer is watched for.
    pub fn start_unwatched(observer: O) -> Result<(OwnedFd, Reader<O>)> {
        Reader::start_with(observer, false)
    }

    fn start_with(observer: O, watched: bool) -> Result<(OwnedFd, Reader<O>)> {
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
                let mut watch = Watch::new(observer, watched);
                let lines = read_trace_napping(&read, &mut watch, || nap_until_hangup(&read));
                let stopped_stuck_tracer = watch.end();
                let traced_a_call = watch.top.is_some();
                let _ = tx.send(Finished {
                    observer: watch.inner,
                    lines,
                    traced_a_call,
                    stopped_stuck_tracer,
                });
            })
            .context("cannot start the trace reader")?;
        Ok((write, Reader { rx }))
    }

    /// Waits for the end of the trace. `None` if the pipe stayed open past the grace
    /// period.
    pub fn finish(self) -> Option<Finished<O>> {
        self.rx.recv_timeout(READER_GRACE).ok()
    }
}

/// Watches the trace for the end of the traced bwrap (the trace's first process), and
/// stops the tracer when the trace outlives it by [`STUCK_GRACE`].
///
/// That happens when bwrap fails between creating its child and letting it go on (bwrap
/// 0.8 reads `/proc/CHILD/ns` there, which fails in a pid namespace that shows another
/// namespace's `/proc`): the child blocks forever on its go-ahead, before it arms
/// `--die-with-parent`, and `strace -f` waits for it. The tracer is stopped by killing its
/// process group (strace is the leader of its own group, see `exec`; bwrap's abandoned
/// child never left it), which is what the runner does anyway once the tracer ends.
struct Watch<O> {
    inner: O,
    /// The traced bwrap's pid (the first one of a call) and the tracer's process group.
    top: Option<(u32, Option<libc::pid_t>)>,
    /// The processes bwrap made.
    children: Vec<u32>,
    /// Shared with the timer thread: the trace ended, or the tracer was stopped.
    state: Option<std::sync::Arc<WatchState>>,
    /// Whether the trace's pids are ours to look up (the tracer is our child).
    watched: bool,
}

#[derive(Default)]
struct WatchState {
    ended: std::sync::atomic::AtomicBool,
    stopped: std::sync::atomic::AtomicBool,
}

impl<O> Watch<O> {
    fn new(inner: O, watched: bool) -> Watch<O> {
        Watch { inner, top: None, children: Vec::new(), state: None, watched }
    }

    /// The trace ended: disarms the timer. Returns whether it stopped the tracer.
    fn end(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.state.as_ref().is_some_and(|s| {
            s.ended.store(true, SeqCst);
            s.stopped.load(SeqCst)
        })
    }

    fn arm(&mut self, group: libc::pid_t) {
        use std::sync::atomic::Ordering::SeqCst;
        let state = std::sync::Arc::new(WatchState::default());
        self.state = Some(state.clone());
        let timer =
            std::thread::Builder::new().name("paddock-trace-watch".into()).spawn(move || {
                std::thread::sleep(STUCK_GRACE);
                if !state.ended.load(SeqCst) && is_our_child(group) {
                    state.stopped.store(true, SeqCst);
                    // SAFETY: killpg with integers. The group's leader is our child, unreaped
                    // (checked just now, and the runner reaps it only after it ends): the id
                    // is still its own.
                    unsafe { libc::killpg(group, libc::SIGKILL) };
                }
            });
        // Without a timer, a stuck tracer is what it was before: nothing else to do.
        drop(timer);
    }
}

/// Whether `pid` is a child of this process (exited or not), without reaping it.
fn is_our_child(pid: libc::pid_t) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    let id = libc::id_t::try_from(pid).unwrap_or(0);
    // SAFETY: waitid on one pid with a valid out-parameter; WNOWAIT leaves it unreaped.
    id != 0 && unsafe { libc::waitid(libc::P_PID, id, &mut info, flags) } == 0
}

impl<O: Observer> Observer for Watch<O> {
    fn event(&mut self, event: &Event<'_>) {
        if let Some(pid) = event.pid.filter(|_| self.top.is_some() || event.syscall().is_some()) {
            let top = *self.top.get_or_insert_with(|| {
                // The first call is bwrap's own execve: bwrap is traced, so its group is
                // the tracer's (unless bwrap is gone already: then its children name it).
                let group = self.watched.then(|| libc::pid_t::try_from(pid).ok()).flatten();
                (pid, group.and_then(tracer_group))
            });
            if top.0 == pid && self.watched {
                match &event.kind {
                    EventKind::Syscall(call)
                        if matches!(&*call.name, "clone" | "clone3" | "fork" | "vfork") =>
                    {
                        if let Some(child) = call.ret.value().and_then(|v| u32::try_from(v).ok()) {
                            self.children.push(child);
                        }
                    }
                    EventKind::Exited { .. } | EventKind::Killed { .. } if self.state.is_none() => {
                        // bwrap's children that never left the tracer's group are the ones
                        // that would keep it waiting; any of them names the group.
                        let group = top.1.or_else(|| {
                            self.children
                                .iter()
                                .filter_map(|c| libc::pid_t::try_from(*c).ok())
                                .find_map(tracer_group)
                        });
                        if let Some(group) = group {
                            self.arm(group);
                        }
                    }
                    _ => {}
                }
            }
        }
        self.inner.event(event);
    }
}

/// The process group of `pid` if it is the group of one of our children (the tracer's).
fn tracer_group(pid: libc::pid_t) -> Option<libc::pid_t> {
    // SAFETY: getpgid with an integer.
    let group = unsafe { libc::getpgid(pid) };
    (group > 0 && is_our_child(group)).then_some(group)
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
pub fn read_trace<R: Read, O: Observer + ?Sized>(input: R, observer: &mut O) -> u64 {
    read_trace_napping(input, observer, || std::thread::sleep(NAP))
}

/// Naps [`NAP`] unless the pipe's write end closes meanwhile: `poll` without `POLLIN` wakes
/// for the hang-up only, so lines still pile up while strace runs, and the end of the trace
/// is not kept waiting for the nap.
fn nap_until_hangup(pipe: &File) {
    let mut fd = libc::pollfd { fd: pipe.as_raw_fd(), events: 0, revents: 0 };
    let ms = libc::c_int::try_from(NAP.as_millis()).unwrap_or(2);
    // SAFETY: one valid pollfd; any outcome ends the nap.
    unsafe { libc::poll(&mut fd, 1, ms) };
}

/// [`read_trace`] with its own way of napping after a short read.
fn read_trace_napping<R: Read, O: Observer + ?Sized>(
    mut input: R,
    observer: &mut O,
    mut nap: impl FnMut(),
) -> u64 {
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
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..filled]) {
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
            nap();
        }
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
    /// The policy's ignore patterns, compiled at the first denial.
    ignore: std::cell::OnceCell<paddock_policy::IgnoreGlobs>,
}

impl Violations {
    /// An observer for `policy`, the task starting in `cwd`.
    pub fn new(policy: ResolvedPolicy, cwd: &Path) -> Violations {
        Violations {
            classifier: Classifier::new(policy, RealHost, cwd)
                .gated(crate::SUPERVISOR_PATH.as_bytes()),
            reported: ViolationSet::new(),
            silent: 0,
            ignore: std::cell::OnceCell::new(),
        }
    }

    /// An observer for a trace of strace inside the sandbox, whose command is the shim (see
    /// [`crate::runtime::inside`]).
    pub fn inside(policy: ResolvedPolicy, cwd: &Path) -> Violations {
        Violations {
            classifier: Classifier::new(policy, RealHost, cwd).gated_on_shim(),
            reported: ViolationSet::new(),
            silent: 0,
            ignore: std::cell::OnceCell::new(),
        }
    }

    /// An observer for a trace attached to the supervisor whose pid `supervisor` will hold
    /// before the trace begins (see [`crate::runtime::attach`]).
    pub fn attached(
        policy: ResolvedPolicy,
        cwd: &Path,
        supervisor: std::sync::Arc<std::sync::atomic::AtomicU32>,
    ) -> Violations {
        Violations {
            classifier: Classifier::new(policy, RealHost, cwd).gated_on_supervisor(supervisor),
            reported: ViolationSet::new(),
            silent: 0,
            ignore: std::cell::OnceCell::new(),
        }
    }
}

impl Observer for Violations {
    fn event(&mut self, event: &Event<'_>) {
        if let Some(found) = self.classifier.observe(event) {
            let policy = self.classifier.policy();
            let ignore = self.ignore.get_or_init(|| paddock_policy::IgnoreGlobs::new(policy));
            let filter = ReportFilter::with(policy, ignore);
            if filter.keep(&found.violation, found.spelled.as_deref()) {
                self.reported.add(found.violation);
            } else {
                self.silent += 1;
            }
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

    /// A stand-in for strace: our child, leader of its own group, with a "bwrap" in it.
    /// Returns the child and the "bwrap"'s pid as the trace would show it.
    #[allow(clippy::disallowed_methods)] // a test spawns its own stand-in processes
    fn tracer_stand_in() -> (std::process::Child, u32) {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        (child, line.trim().parse().unwrap())
    }

    fn feed(watch: &mut Watch<Names>, log: &str) {
        for r in paddock_strace_parse::parse_slice(log.as_bytes()) {
            if let Record::Event(e) = r {
                watch.event(&e);
            }
        }
    }

    #[test]
    fn a_trace_outliving_bwrap_gets_its_tracer_stopped() {
        use std::os::unix::process::ExitStatusExt;
        let (mut tracer, top) = tracer_stand_in();
        let mut watch = Watch::new(Names::default(), true);
        // bwrap's execve and clone; then bwrap exits, and the trace stays open.
        feed(
            &mut watch,
            &format!(
                "{top} execve(\"/usr/bin/bwrap\", [\"bwrap\"], 0x1 /* 0 vars */) = 0\n\
                 {top} clone(child_stack=NULL, flags=CLONE_NEWPID|SIGCHLD) = {top}\n\
                 {top} +++ exited with 1 +++\n"
            ),
        );
        let status = tracer.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert!(watch.end());
        assert_eq!(watch.inner.0, [format!("{top}:execve"), format!("{top}:clone")]);
    }

    #[test]
    fn a_trace_ending_with_bwrap_leaves_the_tracer_alone() {
        let (mut tracer, top) = tracer_stand_in();
        let mut watch = Watch::new(Names::default(), true);
        feed(
            &mut watch,
            &format!(
                "{top} execve(\"/usr/bin/bwrap\", [\"bwrap\"], 0x1 /* 0 vars */) = 0\n\
                 {top} +++ exited with 0 +++\n"
            ),
        );
        // The pipe reached its end within the grace period.
        assert!(!watch.end());
        std::thread::sleep(STUCK_GRACE + Duration::from_millis(500));
        assert!(tracer.try_wait().unwrap().is_none(), "the tracer was stopped");
        // A trace that never showed bwrap (strace failed to start it) arms nothing.
        let mut idle = Watch::new(Names::default(), true);
        feed(&mut idle, &format!("{top} +++ exited with 1 +++\n"));
        assert!(idle.top.is_none() && idle.state.is_none());
        // SAFETY: killpg of our own child's group (unreaped, so its id is ours).
        unsafe { libc::killpg(tracer.id() as libc::pid_t, libc::SIGKILL) };
        let _ = tracer.wait();
    }
}
