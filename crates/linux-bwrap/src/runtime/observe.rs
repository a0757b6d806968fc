//! `--itemize observe`: itemized denials without strace, from two observers that cost
//! nothing where no denial can happen.
//!
//! - The observer filesystem ([`crate::observe_fs`]), served here for the
//!   task's lifetime and mounted in place of each deny anchor, records every attempt to find,
//!   list or change what an anchor hides (a *read* denial, or a *write* one for changes).
//! - The supervisor's notification filter ([`crate::notify`]) sees write-intent
//!   calls, `connect` and `socket(AF_UNIX)` inside the sandbox and sends a record up the
//!   record pipe for each one the walls will refuse.
//!
//! Both produce [`Violation`]s of the same shape as the strace path (`crate::runtime::trace_log`), filtered
//! by the same [`ReportFilter`]. The mounts, the network namespace and the seccomp filter stay
//! the walls: except for `socket(AF_UNIX)` (which the supervisor refuses after recording it,
//! failing closed if it cannot), the observers only watch.
//!
//! [`choose`] picks the mechanism for a run: `auto` observes where the host can
//! ([`HostFacts::observe`]), else traces with strace, else runs without itemizing.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Context;
use crate::notify::{NotifyRecord, RecordKind};
use crate::observe_fs::{FsOp, FsRecord, ObserverMount};
use crate::runtime::Result;
use crate::runtime::supervise::Notes;
use crate::trace::TraceOptions;
use paddock_policy::{
    HostFacts, ItemizeMode, ReportFilter, ResolvedPolicy, SpawnPlan, Violation, ViolationKind,
    ViolationSet,
};

use crate::runtime::classify::sandbox_owned;
use crate::runtime::itemized::Ran;
use crate::runtime::supervise::RunOptions;

/// The name a report gives this mechanism (`"itemized_by"`).
pub const ITEMIZED_BY: &str = "observe";

/// At most this many distinct violations are kept per run; a task that makes more (a flood
/// of distinct names) gets the rest counted, not stored, so memory stays bounded.
const MAX_DISTINCT: usize = 10_000;

/// How a run is itemized.
#[derive(Clone, Debug)]
pub enum Mechanism {
    /// The observers.
    Observe,
    /// strace, with these options.
    Strace(TraceOptions),
    /// Not itemized.
    Off,
}

impl Mechanism {
    /// Whether the plan must be made for the observers (`Task::observe`).
    pub fn observes(&self) -> bool {
        matches!(self, Mechanism::Observe)
    }
}

/// The mechanism for `mode` on this host, and a note for the user when it is not what was
/// asked for. Observers `toggles` turns off are taken as unavailable.
pub fn choose(
    mode: ItemizeMode,
    facts: &HostFacts,
    toggles: crate::runtime::Toggles,
) -> (Mechanism, Option<String>) {
    let observe = facts.observe && toggles.observers;
    let strace = |mode| match crate::runtime::strace::choose(mode, facts) {
        (Some(t), note) => (Mechanism::Strace(t), note),
        (None, note) => (Mechanism::Off, note),
    };
    match mode {
        ItemizeMode::Off => (Mechanism::Off, None),
        ItemizeMode::Strace => strace(ItemizeMode::Strace),
        ItemizeMode::Auto if observe => (Mechanism::Observe, None),
        ItemizeMode::Auto => strace(ItemizeMode::Auto),
        ItemizeMode::Observe if observe => (Mechanism::Observe, None),
        ItemizeMode::Observe => {
            let (mechanism, _) = strace(ItemizeMode::Auto);
            let instead = match mechanism {
                Mechanism::Strace(_) => "itemizing with strace",
                _ => "denials are enforced but not itemized",
            };
            (
                mechanism,
                Some(format!(
                    "--itemize observe is not available on this host ({instead}); `paddock check` says why"
                )),
            )
        }
    }
}

/// Runs `plan` (made with `Task::observe`) with the observers. `Ok(None)` when they could not
/// be started (the reason is printed): nothing ran, and the caller may run the task another
/// way.
pub fn run(
    plan: &SpawnPlan,
    policy: &ResolvedPolicy,
    opts: &RunOptions,
    runtime_dir: Option<&Path>,
) -> Result<Option<Ran>> {
    let observer = plan.observer.as_ref().context("the plan has no observers")?;
    let (mount, server) = match crate::observe_fs::open(observer) {
        Ok(pair) => pair,
        Err(e) => {
            opts.notes.push(format!("note: the observers could not start: {e}"));
            return Ok(None);
        }
    };
    let (light, notifier) = without_libc(plan, opts).unzip();
    let plan = light.as_ref().unwrap_or(plan);
    // A bwrap waiting for an observed run has the record pipe already (its write end at its
    // place): read from that one.
    let (record_rx, record_tx) = match opts.prespawned.take_record_for(plan, opts.stdio) {
        Some(pair) => pair,
        None => nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot make the record pipe")?,
    };
    // Each reader sends what it saw when its source ends: the record pipe when the supervisor
    // and bwrap are gone, the observer's channel when its serving thread is; or, once the
    // supervisor told the task's end (everything was recorded before it), when what is
    // there is read and `stop` is dropped.
    let (done_tx, done_rx) = crossbeam_channel::bounded::<Seen>(2);
    let notified_tx = done_tx.clone();
    let (stop_rx, stop) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("cannot make a pipe")?;
    std::thread::Builder::new()
        .name("paddock-records".into())
        .spawn(move || {
            let pipe = UntilStopped { pipe: File::from(record_rx), stop: stop_rx };
            drop(notified_tx.send(collect_notified(pipe)))
        })
        .context("cannot start the record reader")?;
    let records = server.records();
    let (stop_fs, stopped_fs) = crossbeam_channel::bounded::<()>(0);
    std::thread::Builder::new()
        .name("paddock-fs-records".into())
        .spawn(move || {
            let mut seen = Seen::default();
            loop {
                crossbeam_channel::select! {
                    recv(records) -> r => match r {
                        Ok(r) => seen.add(from_fs(&r)),
                        Err(_) => break,
                    },
                    recv(stopped_fs) -> _ => {
                        records.try_iter().for_each(|r| seen.add(from_fs(&r)));
                        break;
                    }
                }
            }
            drop(done_tx.send(seen));
        })
        .context("cannot start the observer reader")?;

    let spawned = run_observed(plan, opts, runtime_dir, record_tx, notifier, &mount);
    let teardown = spawned.as_ref().ok().and_then(|o| o.teardown.clone());
    let leftover = match teardown {
        // Nothing of the sandbox runs and everything it did was answered, so recorded: the
        // readers take what is there and end, and the serving thread, whose connection ends
        // with the namespaces the kernel is still tearing down, is awaited after bwrap.
        Some(teardown) => {
            drop((stop, stop_fs));
            teardown.and_then(move || drop(server.finish()));
            Vec::new()
        }
        // The sandbox is gone (or never started): the filesystem's connection ends with its
        // mount namespace, and the record pipe with the supervisor.
        None => {
            let leftover = server.finish();
            drop((stop, stop_fs));
            leftover
        }
    };
    let outcome = match spawned {
        Ok(outcome) => outcome,
        Err(e) if is_mount_failure(&e) => {
            opts.notes.push(format!("note: the observers could not start: {e}"));
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    // A reader that does not end is stuck on a descriptor something still holds: its
    // records are lost, not waited for.
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(3);
    for _ in 0..2 {
        match done_rx.recv_deadline(deadline) {
            Ok(part) => seen.merge(part),
            Err(_) => {
                opts.notes.push("note: an observer did not finish; some denials may be missing");
                break;
            }
        }
    }
    for r in &leftover {
        seen.add(from_fs(r));
    }
    let violations = seen.report(policy, &opts.notes);
    Ok(Some(Ran { outcome, itemized_by: Some(ITEMIZED_BY), violations }))
}

fn run_observed(
    plan: &SpawnPlan,
    opts: &RunOptions,
    runtime_dir: Option<&Path>,
    record_tx: OwnedFd,
    notifier: Option<OwnedFd>,
    mount: &ObserverMount,
) -> Result<crate::runtime::supervise::RunOutcome> {
    let mut extra = vec![(record_tx, crate::RECORD_FD)];
    extra.extend(notifier.map(|fd| (fd, crate::NOTIFIER_EXE_FD)));
    crate::runtime::supervise::run_plan_observed(plan, opts, runtime_dir, extra, Some(mount))
}

/// `plan` started by `paddock-supervisor-nolibc`, and the descriptor of its notifier's
/// executable (`paddock-supervisor`'s copy nobody may read), when both supervisors are here
/// and the plan needs nothing else ([`crate::nolibc::with_notifier`]). `None`: `plan` runs
/// as it is. The waiting bwrap has the descriptor when it was started for such a run.
fn without_libc(plan: &SpawnPlan, opts: &RunOptions) -> Option<(SpawnPlan, OwnedFd)> {
    if plan.backend != crate::BACKEND_NAME {
        return None;
    }
    let nolibc =
        opts.supervisor_nolibc.clone().and_then(paddock_policy::AbsPathBuf::new_lexical)?;
    let supervisor = opts.notifier.as_deref()?;
    let light = crate::nolibc::with_notifier(plan, &nolibc)?;
    let fd = match opts.prespawned.notifier_for(supervisor) {
        Some(fd) => fd,
        None => crate::runtime::exec_only::open(supervisor).ok()?,
    };
    Some((light, fd))
}

/// A spawn that failed in the child before bwrap ran (the observer's mount): the task never
/// started, so running it another way is safe.
fn is_mount_failure(e: &crate::Error) -> bool {
    e.is_spawn_failure()
}

/// The record pipe, read to its end, or until `stop` is closed and nothing is left in it:
/// bwrap, still exiting after the supervisor told the task's end, holds a copy of its
/// write end.
struct UntilStopped {
    pipe: File,
    stop: OwnedFd,
}

impl std::io::Read for UntilStopped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        loop {
            let mut fds = [
                libc::pollfd { fd: self.pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: a valid array of two pollfd.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                return self.pipe.read(buf);
            }
            if fds[1].revents != 0 {
                return Ok(0);
            }
        }
    }
}

fn collect_notified(read: UntilStopped) -> Seen {
    let mut seen = Seen::default();
    let malformed = crate::notify::read_records(read, |r| {
        if let Some(v) = from_notify(&r) {
            seen.add(v);
        }
    });
    seen.malformed = malformed;
    seen
}

/// What the observers saw, deduplicated, before the report filter.
#[derive(Debug, Default)]
struct Seen {
    set: ViolationSet,
    dropped: u64,
    malformed: u64,
}

impl Seen {
    fn add(&mut self, v: Violation) {
        if !self.set.add_bounded(v, MAX_DISTINCT) {
            self.dropped += 1;
        }
    }

    fn merge(&mut self, other: Seen) {
        for v in other.set.into_vec() {
            self.add(v);
        }
        self.dropped += other.dropped;
        self.malformed += other.malformed;
    }

    /// The violations the report shows. A lookup of a name the same run then tried to create
    /// is one write denial, not a read and a write: the kernel looks a name up before it
    /// creates it.
    fn report(self, policy: &ResolvedPolicy, notes: &Notes) -> Vec<Violation> {
        if self.dropped > 0 {
            notes.push(format!(
                "note: more than {MAX_DISTINCT} distinct denials; {} more were not itemized",
                self.dropped
            ));
        }
        if self.malformed > 0 {
            notes.push(format!(
                "note: {} malformed records from the sandbox were ignored",
                self.malformed
            ));
        }
        let all = self.set.into_vec();
        if all.is_empty() {
            // The filter compiles the policy's globs: not for nothing to filter.
            return all;
        }
        let written: Vec<PathBuf> = all
            .iter()
            .filter(|v| v.kind == ViolationKind::Write)
            .filter_map(|v| v.path.clone())
            .collect();
        let filter = ReportFilter::new(policy);
        let mut out = ViolationSet::new();
        for v in all {
            let shadowed = v.kind == ViolationKind::Read
                && v.syscall.as_deref() == Some(LOOKUP)
                && v.path.as_ref().is_some_and(|p| written.contains(p));
            if !shadowed && filter.keep(&v, None) {
                out.add(v);
            }
        }
        out.into_vec()
    }
}

/// `path` with its parent canonicalized on the host (the sandbox's paths are the host's), as
/// the strace path canonicalizes: `src/../lnk` is reported as `lnk`, through a linked parent
/// as its target. The name itself is kept: it may not exist, or be the link that was meant.
fn canonical_parent(path: PathBuf) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            std::fs::canonicalize(parent).map_or_else(|_| path.clone(), |p| p.join(name))
        }
        _ => path,
    }
}

/// The operation name of a failed lookup in the observer filesystem.
const LOOKUP: &str = "lookup";

fn from_fs(r: &FsRecord) -> Violation {
    Violation {
        kind: if r.op.is_write() { ViolationKind::Write } else { ViolationKind::Read },
        path: Some(r.path.clone()),
        target: None,
        syscall: Some(r.op.name().to_owned()),
        // A listing succeeds (it shows only the exceptions): no errno to report.
        errno: (r.op != FsOp::List).then(|| r.errno.to_owned()),
        count: 1,
    }
}

fn from_notify(r: &NotifyRecord) -> Option<Violation> {
    let path = r.path.as_ref().map(|b| canonical_parent(PathBuf::from(b.0.clone())));
    let (kind, target) = match r.kind {
        RecordKind::Write => {
            if path.as_deref().is_none_or(sandbox_owned) {
                return None;
            }
            (ViolationKind::Write, None)
        }
        RecordKind::Network => (ViolationKind::Network, Some(r.target.clone()?)),
        // A refused connect names its socket; a refused `socket()` only its family.
        RecordKind::UnixSocket if path.is_some() => (ViolationKind::UnixSocket, None),
        RecordKind::UnixSocket => (ViolationKind::UnixSocket, Some("AF_UNIX".to_owned())),
    };
    let path = match (kind, &r.path) {
        (ViolationKind::Write, _) => path,
        (ViolationKind::UnixSocket, Some(b)) => Some(PathBuf::from(b.0.clone())),
        _ => None,
    };
    Some(Violation {
        kind,
        path,
        target,
        syscall: Some(r.syscall.clone()),
        errno: Some(r.errno.clone()),
        count: 1,
    })
}
