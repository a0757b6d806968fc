//! bwrap started before its plan exists, so that its start-up overlaps the runner's.
//!
//! bwrap spends about 0.65 ms after its exec (loading its libraries, reading the kernel's
//! overflow ids, probing SELinux) before it reads its arguments from [`ARGS_FD`]; the runner
//! spends about as long after its own start loading the config, resolving the policy,
//! planning and placing the placeholders. Every plan has the same bwrap command line
//! ([`crate::bwrap_argv`]) and payload descriptors, so bwrap can start first
//! and wait, blocked on an empty pipe at [`ARGS_FD`], with another pipe at [`SUPERVISOR_FD`],
//! empty memfds at the other payload descriptors, the signal channel at [`SIGNAL_FD`] and
//! `paddock-supervisor-nolibc` open at [`crate::SUPERVISOR_EXE_FD`] (for bwrap to copy in).
//! A write grant's clone needs no descriptor of its own: it goes on the signal channel
//! (`crate::grant_clones`).
//! Once planned, the arguments are written into their pipe, which is closed: bwrap goes on.
//! Only then, while bwrap sets the sandbox up, the runner makes what the supervisor alone
//! needs (the placeholders it mounts inside at a write grant's root: `after_args` of
//! [`crate::runtime::exec::Waiting::complete`]), writes the memfds, and last the supervisor's
//! payload into its pipe, which it closes. The supervisor reads that payload to the pipe's
//! end before anything else, so it starts on a whole payload, written after everything it
//! reads later, or on one cut short (the runner killed or failed in between), which it
//! refuses. The task's standard streams are given to bwrap from the start (inherited,
//! `/dev/null` or pipes: a library caller's command says which before its plan exists).
//!
//! A run whose network is not the host's gets a bwrap waiting in a network namespace of its
//! own, made (with its loopback up) by the child before it executes bwrap, where that child
//! may (as root, or in the observed run's user namespace): bwrap is told `--share-net` and
//! keeps it, so that the dearest part of its clone is done while the runner plans. A plan on
//! the host's network does not fit such a bwrap.
//!
//! A run itemized by the observers gets a bwrap waiting in a private mount namespace (and a
//! user namespace mapping the runner's ids, when not root) that the child makes before it
//! executes bwrap, with the record pipe at [`RECORD_FD`]: once planned, a short-lived
//! `vfork` child joins that namespace (`setns`; the runner has threads, which `setns` of a
//! user namespace refuses) and makes there what the child of an unprepared spawn makes
//! before it executes bwrap: the observer's FUSE mount and the self mounts. bwrap then
//! reads its setup and nests its own namespaces in that one, as it would have.
//!
//! A plan that needs anything else (a tracer around bwrap, inherited channels, other
//! streams, the observers when the waiting bwrap was not started for them, or the other way
//! round) is spawned as usual and the waiting bwrap is killed.
//!
//! The overlap needs the two on different CPUs. After a spawn the kernel often wakes the
//! runner on the CPU the new child runs on (half of the runs on a 2-CPU machine with
//! `posix_spawn`), where they take turns while another CPU idles, and the runner cannot move
//! the child away since it does not get to run. So bwrap is started by a child of our own
//! that runs beside the runner ([`crate::vfork::spawn_beside`] on x86-64: the
//! runner goes on while it executes) and is moved to the runner's other CPUs at once; the
//! runner then works beside it. Before it hands over the setup
//! (bwrap is blocked reading it then) the runner gives bwrap its whole affinity back, so the
//! sandbox, which bwrap forks once it has read its setup, has the affinity paddock had.
//!
//! A runner killed before it has written everything leaves bwrap reading arguments cut
//! short: the supervisor's bind is the last of them, and bwrap's command is the supervisor,
//! so nothing runs (and the supervisor refuses to run anything unless it is the sandbox's
//! pid 1); killed after, it leaves the supervisor a payload cut short, which runs nothing
//! either. Arguments up to the pipe's capacity are written with one `write`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::Context;
use crate::runtime::{Result, bail};
use crate::{
    ARGS_FD, NOTIFIER_EXE_FD, NOTIFY_BPF_FD, RECORD_FD, SECCOMP_FD, SIGNAL_FD, SUPERVISOR_FD,
};
use paddock_policy::{AbsPathBuf, FileFd, SpawnPlan};

use crate::runtime::exec::{Output, SpawnedChild};

mod child;

use child::{Starting, block_every_signal, spawn_elsewhere};
#[cfg(test)]
use child::{caught_signals, sig_caught_in};

/// Which bwrap a run waits with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrespawnKind {
    /// Spawned plainly: not itemized, or by strace attached to the supervisor.
    Plain,
    /// In a namespace of its own, for the observers ([`Prespawned::start_observed`]).
    Observed,
}

impl PrespawnKind {
    /// The bwrap a run itemized by `mode` (the caller's; `None`: the config's, `auto` unless
    /// it says otherwise) waits with, if any: plainly when not itemized or itemized by strace
    /// attached to the supervisor, in a namespace of its own for the observers. strace
    /// around bwrap spawns it its own way. `observed` says whether the observers would
    /// itemize the run (asked only when it matters). A guess the config proves wrong costs a
    /// bwrap started and killed on another CPU.
    pub fn for_mode(
        mode: Option<paddock_policy::ItemizeMode>,
        toggles: crate::runtime::Toggles,
        observed: impl FnOnce() -> bool,
    ) -> Option<PrespawnKind> {
        use paddock_policy::ItemizeMode;
        match mode {
            Some(ItemizeMode::Off) => Some(PrespawnKind::Plain),
            Some(ItemizeMode::Strace) => toggles.strace_attach.then_some(PrespawnKind::Plain),
            None | Some(ItemizeMode::Auto | ItemizeMode::Observe) => {
                observed().then_some(PrespawnKind::Observed)
            }
        }
    }

    /// [`PrespawnKind::for_mode`] on a probed host: the observers itemize where `facts`
    /// and `toggles` allow them ([`crate::runtime::observe::choose`]).
    pub fn for_run(
        mode: Option<paddock_policy::ItemizeMode>,
        toggles: crate::runtime::Toggles,
        facts: &paddock_policy::HostFacts,
    ) -> Option<PrespawnKind> {
        PrespawnKind::for_mode(mode, toggles, || {
            let mode = mode.unwrap_or(paddock_policy::ItemizeMode::Auto);
            crate::runtime::observe::choose(mode, facts, toggles).0.observes()
        })
    }

    /// Whether it waits for an observed run.
    pub fn observed(self) -> bool {
        self == PrespawnKind::Observed
    }
}

/// A bwrap waiting for its arguments. Dropped unused, it is killed and reaped.
pub struct Prespawned {
    /// The child until it has executed bwrap ([`Prespawned::started`]).
    starting: Option<Starting>,
    child: Option<SpawnedChild>,
    program: AbsPathBuf,
    /// The write end of the pipe bwrap reads its arguments from.
    args: Option<File>,
    /// The runner's ends of the payload memfds, with the descriptor each is at in bwrap.
    payloads: Vec<(RawFd, File)>,
    /// The pipe the supervisor reads its payload from, at [`SUPERVISOR_FD`] in bwrap.
    payload_pipe: Option<PayloadPipe>,
    signal_tx: Option<UnixStream>,
    /// The runner's CPU affinity, given back to bwrap before its setup, when it started on
    /// fewer CPUs.
    affinity: Option<libc::cpu_set_t>,
    /// For an observed run: the private namespace bwrap waits in, where the observer is
    /// mounted once planned ([`Prespawned::start_observed`]).
    namespace: Option<crate::private_ns::PrivateNamespace>,
    /// For an observed run: the record pipe, whose write end bwrap has at [`RECORD_FD`]
    /// (read end, write end), until the run takes it ([`PrespawnSlot::take_record_for`]).
    record: Option<(OwnedFd, OwnedFd)>,
    /// Whether the run took the record pipe: only then does an observed plan fit.
    record_taken: bool,
    /// For an observed run: `paddock-supervisor` (the path it was found at) and the
    /// runner's copy of the descriptor of its copy nobody may read, which bwrap has at
    /// [`NOTIFIER_EXE_FD`] ([`crate::nolibc::with_notifier`]).
    notifier: Option<(std::path::PathBuf, OwnedFd)>,
    /// Where the task's standard streams go: bwrap has them already.
    output: Output,
    /// Whether this process's threads are kept on the runner's CPU until bwrap gets its
    /// setup ([`Prespawned::keep_runner_off_bwraps_cpus`]).
    runner_pinned: bool,
    /// Whether bwrap waits in a network namespace of its own, made by the child that
    /// executed it: it is told to keep it ([`with_network_kept`]).
    private_network: bool,
    /// Whether bwrap has the clones of the host's devices at [`crate::DEVICES_FD`] and after.
    devices: bool,
    /// The host files bwrap has open for a plan's [`SpawnPlan::file_fds`]: the supervisor
    /// without a C library at [`crate::SUPERVISOR_EXE_FD`], when it was given.
    files: Vec<FileFd>,
}

impl std::fmt::Debug for Prespawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prespawned")
            .field("child", &self.child)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl Prespawned {
    /// Starts `bwrap` with every plan's command line and descriptors, waiting for its
    /// arguments.
    pub fn start(bwrap: &AbsPathBuf) -> Result<Prespawned> {
        Prespawned::start_for(bwrap, false, Output::INHERIT, None, None, false)
    }

    /// [`Prespawned::start`] for a run itemized by the observers: bwrap waits in a private
    /// mount namespace of its own (and a user namespace mapping this process's ids, when not
    /// root), which the child enters before it executes bwrap, and has the write end of a
    /// record pipe at [`RECORD_FD`]. Once planned, a short-lived child joins that namespace
    /// and mounts the observer and the plan's self mounts there, as the child of an
    /// unprepared spawn does before it executes bwrap; then bwrap gets its setup.
    pub fn start_observed(bwrap: &AbsPathBuf) -> Result<Prespawned> {
        Prespawned::start_for(bwrap, true, Output::INHERIT, None, None, false)
    }

    /// [`Prespawned::start`] (or [`Prespawned::start_observed`] when `observed`) for a run
    /// whose standard streams are `output`: `/dev/null` or pipes are bwrap's from the start
    /// (a library caller's task knows them before its plan; the binary's inherits its own).
    /// `notifier`, for an observed run: `paddock-supervisor`, when
    /// `paddock-supervisor-nolibc` may start the run ([`crate::probe::notifier_beside`]):
    /// bwrap gets its copy nobody may read ([`crate::nolibc::with_notifier`]).
    /// `nolibc`: `paddock-supervisor-nolibc`, which a plan it may start has bwrap copy into
    /// the sandbox (`crate::nolibc`): bwrap gets it open at [`crate::SUPERVISOR_EXE_FD`].
    /// `private_network`: the run is expected to have a network namespace of its own (its
    /// network is not the host's): the child makes it before it executes bwrap, when it may
    /// (as root, or in the user namespace of an observed run's), so that bwrap's setup,
    /// later, creates none; a plan on the host's network then does not fit.
    pub fn start_for(
        bwrap: &AbsPathBuf,
        observed: bool,
        output: Output,
        notifier: Option<&Path>,
        nolibc: Option<&Path>,
        private_network: bool,
    ) -> Result<Prespawned> {
        let namespace = observed.then(crate::private_ns::PrivateNamespace::for_this_process);
        let private_network = private_network
            && (observed || crate::private_ns::PrivateNamespace::for_this_process().is_root());
        let (args_r, args_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot create bwrap's argument pipe")?;
        let mut keep: Vec<OwnedFd> = vec![args_r];
        let mut pairs: Vec<(RawFd, RawFd)> = vec![(keep[0].as_raw_fd(), ARGS_FD)];
        let streams = crate::runtime::exec::StreamFds::open(output)
            .context("cannot open the task's standard streams")?;
        for (given, fd) in streams.given {
            pairs.push((given.as_raw_fd(), fd));
            keep.push(given);
        }
        let record = match namespace {
            Some(_) => {
                let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                    .context("cannot make the record pipe")?;
                pairs.push((w.as_raw_fd(), RECORD_FD));
                Some((r, w))
            }
            None => None,
        };
        // An observed run may be started by the supervisor without a C library, which then
        // needs the notification filter and the server's executable.
        let notifier = notifier.filter(|_| observed).and_then(|supervisor| {
            let fd = crate::runtime::exec_only::open(supervisor).ok()?;
            Some((supervisor.to_path_buf(), fd))
        });
        if let Some((_, fd)) = &notifier {
            pairs.push((fd.as_raw_fd(), NOTIFIER_EXE_FD));
        }
        let mut files = Vec::new();
        if let Some(path) = nolibc.and_then(AbsPathBuf::new_lexical) {
            let fd = crate::runtime::exec::open_read_only(path.as_path())
                .with_context(|| format!("cannot open {path} for the sandbox"))?;
            pairs.push((fd.as_raw_fd(), crate::SUPERVISOR_EXE_FD));
            keep.push(fd);
            files.push(FileFd { fd: crate::SUPERVISOR_EXE_FD, path });
        }
        let notify_bpf = (crate::nolibc::NOTIFY_BPF_PAYLOAD, NOTIFY_BPF_FD);
        // The supervisor reads its payload to the end of a pipe: written and closed last,
        // once the other payloads are in their memfds (see the module doc).
        let (payload_r, payload_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot create the supervisor's payload pipe")?;
        pairs.push((payload_r.as_raw_fd(), SUPERVISOR_FD));
        let payload_pipe = PayloadPipe { write: File::from(payload_w), read: payload_r };
        let mut payloads = Vec::new();
        for (name, fd) in [
            ("seccomp-bpf", SECCOMP_FD),
            (crate::mount_ids::PAYLOAD_NAME, crate::mount_ids::MOUNT_IDS_FD),
        ]
        .into_iter()
        .chain(notifier.as_ref().map(|_| notify_bpf))
        {
            let memfd = crate::runtime::exec::memfd_with(name, &[])?;
            pairs.push((memfd.as_raw_fd(), fd));
            payloads.push((fd, File::from(memfd)));
        }
        let (ours, theirs) = crate::runtime::exec::signal_channel()?;
        pairs.push((theirs.as_raw_fd(), SIGNAL_FD));
        keep.push(OwnedFd::from(theirs));
        // The clones of the host's devices, made by the child where this process may make
        // them (off the runner's way): a plan that wants them (`SpawnPlan::device_fds`) fits
        // only then. One that does not leaves them to the supervisor, which closes every
        // descriptor it was not told of (slowly: see `for_a_prespawn`).
        let has_devices = crate::devices::for_a_prespawn();
        // And the terminal its stdout is, if it is one and the runner's own: `/dev/console`.
        let terminal = (has_devices && output.stdout == crate::runtime::exec::Stream::Inherit)
            .then(crate::devices::stdout_terminal)
            .flatten();
        let max_target = pairs.iter().map(|p| p.1).max().unwrap_or(2);
        let (starting, affinity) = spawn_elsewhere(
            bwrap,
            &pairs,
            max_target,
            namespace.clone(),
            private_network,
            has_devices,
            terminal,
        )
        .with_context(|| format!("cannot start {}", bwrap))?;
        // The child has copies of its own.
        drop(keep);
        let child =
            SpawnedChild { pid: starting.pid, stdout: streams.stdout, stderr: streams.stderr };
        Ok(Prespawned {
            starting: Some(starting),
            affinity,
            child: Some(child),
            program: bwrap.clone(),
            args: Some(File::from(args_w)),
            payloads,
            payload_pipe: Some(payload_pipe),
            signal_tx: Some(ours),
            namespace,
            record,
            record_taken: false,
            notifier,
            output,
            runner_pinned: false,
            private_network,
            devices: has_devices,
            files,
        })
    }

    /// For a process that is all the runner's (the `paddock` binary, not a library caller):
    /// keeps this thread, and every thread it starts meanwhile, on the CPU it runs on until
    /// bwrap gets its setup, so that what the runner starts for the run (the observer's
    /// threads, the child mounting in bwrap's namespace) leaves bwrap's start-up the CPUs
    /// bwrap was moved to. Then every thread of the process gets back the affinity the runner
    /// had (the threads started meanwhile inherited this one's). Nothing when bwrap was not
    /// moved (one CPU).
    pub fn keep_runner_off_bwraps_cpus(&mut self) {
        if self.affinity.is_none() || self.runner_pinned {
            return;
        }
        // SAFETY: an all-zero cpu_set_t is the empty set; sched_getcpu has no arguments and
        // sched_setaffinity gets a valid set of its size, for this thread.
        unsafe {
            let Ok(cpu) = usize::try_from(libc::sched_getcpu()) else { return };
            let mut here: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut here);
            self.runner_pinned =
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &here) == 0;
        }
    }

    /// Gives every thread of this process the runner's affinity back
    /// ([`Prespawned::keep_runner_off_bwraps_cpus`]).
    fn release_runner(&mut self) {
        let Some(set) = self.affinity.as_ref().filter(|_| self.runner_pinned) else { return };
        self.runner_pinned = false;
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return };
        for tid in tasks.flatten().filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()) {
            // SAFETY: sched_setaffinity with a valid set of its size; a thread that ended
            // meanwhile fails with ESRCH, which is fine.
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
        }
    }

    /// Whether it waits for an observed run ([`Prespawned::start_observed`]).
    pub fn is_observed(&self) -> bool {
        self.namespace.is_some()
    }

    /// The bwrap it runs.
    pub fn program(&self) -> &AbsPathBuf {
        &self.program
    }

    /// Waits for the child to have executed bwrap (it starts beside the runner): whether it
    /// did. If not, it is reaped and the spawn goes on without it.
    pub fn started(&mut self) -> bool {
        if let Some(starting) = self.starting.take()
            && starting.executed().is_err()
            && let Some(child) = self.child.take()
        {
            let _ = child.wait();
        }
        self.child.is_some()
    }

    /// Whether `plan` can be handed to this bwrap: the same program and command line, no
    /// environment, `/` as cwd, payloads only at the descriptors it has, the signal channel
    /// at its place, output inherited, the devices and files the plan wants where it has
    /// them (others it has are closed by the supervisor), and nothing else for the child
    /// (`simple`: no extra or inherited descriptors, no observer).
    fn fits_plan(&self, plan: &SpawnPlan, output: Output, simple: bool) -> bool {
        let descriptors = plan.payloads.iter().all(|p| match p.fd {
            ARGS_FD => true,
            SUPERVISOR_FD => {
                self.payload_pipe.as_ref().is_some_and(|pipe| pipe.holds(p.bytes.len()))
            }
            fd => self.payloads.iter().any(|(at, _)| *at == fd),
        });
        let args = plan.payloads.iter().find(|p| p.fd == ARGS_FD).map_or(&[][..], |p| &p.bytes);
        simple
            && (!self.private_network || off_the_hosts_network(args))
            && output == self.output
            && plan.program == self.program
            && plan.argv == crate::bwrap_argv()
            && plan.env.is_empty()
            && plan.cwd.as_path() == Path::new("/")
            && plan.signal_fd == Some(SIGNAL_FD)
            && plan.observer.is_some() == self.is_observed()
            && plan.device_fds.is_none_or(|fd| fd == crate::DEVICES_FD && self.devices)
            && plan.file_fds.iter().all(|file| self.files.contains(file))
            && descriptors
    }

    /// Joins the namespace bwrap waits in, from a short-lived child (`setns` needs a process
    /// of its own: the runner has threads), and mounts `observer` and `self_mounts` there.
    /// The child shares this process's memory until it exits (`vfork`): it makes system
    /// calls on data prepared before, with every signal blocked.
    fn mount_in_namespace(
        &self,
        observer: Option<&crate::observe_fs::ObserverMount>,
        self_mounts: &crate::private_ns::SelfMounts,
    ) -> std::io::Result<()> {
        use std::sync::atomic::{AtomicI32, Ordering};
        let Some(namespace) = &self.namespace else { return Ok(()) };
        let pid = self.child.as_ref().map(|c| c.pid).ok_or_else(|| {
            std::io::Error::other("the waiting bwrap is gone before its namespace was joined")
        })?;
        // bwrap is our child, not reaped: the pid is still its.
        let open = |name: &str| File::open(format!("/proc/{pid}/ns/{name}"));
        let user = if namespace.is_root() { None } else { Some(open("user")?) };
        let mnt = open("mnt")?;
        let failed = AtomicI32::new(0);
        let join_and_mount = || -> std::io::Result<()> {
            if let Some(user) = &user {
                // SAFETY: setns on a descriptor we own.
                crate::private_ns::check(unsafe {
                    libc::setns(user.as_raw_fd(), libc::CLONE_NEWUSER)
                })?;
            }
            // SAFETY: as above.
            crate::private_ns::check(unsafe { libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS) })?;
            if let Some(observer) = observer {
                observer.mount_here()?;
            }
            self_mounts.mount()
        };
        // The child runs on our memory and must not run our handlers.
        let old_mask = block_every_signal();
        let helper = crate::vfork::spawn(|| match join_and_mount() {
            Ok(()) => 0,
            Err(e) => {
                failed.store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Release);
                1
            }
        });
        // SAFETY: restoring this thread's own mask.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut()) };
        let helper = helper?;
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        while unsafe { libc::waitpid(helper, &mut status, libc::__WALL) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        match failed.load(Ordering::Acquire) {
            0 if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 => Ok(()),
            0 => Err(std::io::Error::other(format!(
                "the child mounting in bwrap's namespace ended with status {status}"
            ))),
            errno => Err(std::io::Error::from_raw_os_error(errno)),
        }
    }

    /// Writes `plan`'s arguments into the pipe and closes it: bwrap goes on. Then, while
    /// bwrap sets the sandbox up, runs `after_args` (what only the supervisor needs, made
    /// meanwhile) and writes the payloads: into the memfds, the supervisor's last, into its
    /// pipe, which is closed. Returns the child and the runner's end of the signal channel.
    /// On an error after the arguments, bwrap is killed and reaped: its supervisor, reading
    /// a payload cut short, would run nothing anyway.
    fn complete_plan(
        mut self,
        plan: &SpawnPlan,
        observer: Option<&crate::observe_fs::ObserverMount>,
        self_mounts: &crate::private_ns::SelfMounts,
        after_args: &mut dyn FnMut() -> Result<()>,
    ) -> Result<(SpawnedChild, Option<UnixStream>)> {
        if !self.started() {
            bail!("{} did not start", self.program);
        }
        // Before bwrap can read its setup: what it binds from the observer must be there.
        self.mount_in_namespace(observer, self_mounts).map_err(|source| crate::Error::Spawn {
            program: self.program.as_path().to_path_buf(),
            source,
        })?;
        self.release_runner();
        if let (Some(set), Some(child)) = (&self.affinity, &self.child) {
            // bwrap waits for its setup: it forks the sandbox once it has read it.
            // SAFETY: sched_setaffinity on our own child with a valid set.
            unsafe {
                libc::sched_setaffinity(child.pid, std::mem::size_of::<libc::cpu_set_t>(), set)
            };
        }
        let args = plan.payloads.iter().find(|p| p.fd == ARGS_FD).map_or(&[][..], |p| &p.bytes);
        let kept;
        let args = if self.private_network {
            kept = with_network_kept(args).context("the plan does not keep a private network")?;
            &kept[..]
        } else {
            args
        };
        let mut pipe = self.args.take().context("bwrap's arguments were written already")?;
        pipe.write_all(args).context("cannot hand bwrap its arguments")?;
        drop(pipe);
        // From here on an error drops `self`, which kills and reaps bwrap.
        after_args()?;
        for payload in plan.payloads.iter().filter(|p| p.fd != ARGS_FD && p.fd != SUPERVISOR_FD) {
            if let Some((_, file)) = self.payloads.iter_mut().find(|(fd, _)| *fd == payload.fd) {
                // The memfd's offset is shared with bwrap's copy: back to the start for the
                // supervisor's read.
                file.write_all(&payload.bytes)
                    .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
                    .with_context(|| format!("cannot prepare the {} payload", payload.name))?;
            }
        }
        let supervisor =
            plan.payloads.iter().find(|p| p.fd == SUPERVISOR_FD).map_or(&[][..], |p| &p.bytes);
        self.payload_pipe
            .take()
            .context("the supervisor's payload was written already")?
            .hand(supervisor)
            .context("cannot hand the supervisor its payload")?;
        let child = self.child.take().context("bwrap is gone")?;
        Ok((child, self.signal_tx.take()))
    }
}

/// bwrap's arguments `args` (NUL-terminated, [`crate::ops`]'s order: `--unshare-all`
/// first) for a bwrap that waits in the sandbox's network namespace already: `--share-net`
/// added after `--unshare-all`, so that it keeps that one. `None` when the plan is on the
/// host's network (it says `--share-net` itself) or does not start with `--unshare-all`.
fn with_network_kept(args: &[u8]) -> Option<Vec<u8>> {
    let rest = args.strip_prefix(UNSHARE_ALL).filter(|_| off_the_hosts_network(args))?;
    Some([UNSHARE_ALL, SHARE_NET, rest].concat())
}

/// `--unshare-all`, NUL-terminated as bwrap's arguments are.
const UNSHARE_ALL: &[u8] = b"--unshare-all\0";
/// `--share-net`, NUL-terminated.
const SHARE_NET: &[u8] = b"--share-net\0";

/// Whether bwrap's arguments `args` start with `--unshare-all` and never say `--share-net`:
/// a plan whose bwrap may be given the network namespace it waits in ([`with_network_kept`]).
fn off_the_hosts_network(args: &[u8]) -> bool {
    args.starts_with(UNSHARE_ALL)
        && !args.split(|b| *b == 0).any(|field| field == &SHARE_NET[..SHARE_NET.len() - 1])
}

/// The pipe the supervisor reads its payload from until its end. The runner keeps a read
/// end until it has written, so that the write never meets a pipe without readers (a bwrap
/// that failed its setup), and a payload is handed only when the pipe holds it whole: the
/// write never waits for the supervisor either.
struct PayloadPipe {
    write: File,
    read: OwnedFd,
}

impl PayloadPipe {
    /// Whether the pipe holds `len` bytes at once (grown to, when it can be).
    fn holds(&self, len: usize) -> bool {
        let fd = self.write.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own, with integer arguments.
        let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
        if usize::try_from(size).is_ok_and(|size| size >= len) {
            return true;
        }
        let Ok(wanted) = libc::c_int::try_from(len) else { return false };
        // SAFETY: as above; the kernel rounds the size up or refuses it.
        let size = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, wanted) };
        usize::try_from(size).is_ok_and(|size| size >= len)
    }

    /// Writes `bytes` and closes the pipe: the supervisor reads them to their end.
    fn hand(mut self, bytes: &[u8]) -> std::io::Result<()> {
        if !self.holds(bytes.len()) {
            return Err(std::io::Error::other("the pipe cannot hold the payload"));
        }
        self.write.write_all(bytes)?;
        drop(self.read);
        Ok(())
    }
}

impl Drop for Prespawned {
    fn drop(&mut self) {
        self.release_runner();
        // Its memory is ours until it has executed.
        if let Some(starting) = self.starting.take() {
            let _ = starting.executed();
        }
        if let Some(child) = self.child.take() {
            // Killed before it reads its (never written) arguments, or before its supervisor
            // has a whole payload, then reaped.
            // SAFETY: kill on our own child, not reaped yet, so the pid is still its.
            unsafe { libc::kill(child.pid, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
}

impl crate::runtime::exec::Waiting for Prespawned {
    fn fits(
        &self,
        plan: &SpawnPlan,
        output: Output,
        shape: &crate::runtime::exec::SpawnShape,
    ) -> bool {
        let simple = shape.inherits.is_empty()
            && if self.is_observed() {
                // The descriptors handed are the record pipe's write end and the notifier's
                // executable, which bwrap has at their places already (the run took the
                // first, `take_record_for`, and was given the second from here,
                // `notifier_for`); the observer and the self mounts are made in its
                // namespace.
                let extra_fits = match shape.extra.as_slice() {
                    [RECORD_FD] => true,
                    [RECORD_FD, NOTIFIER_EXE_FD] => self.notifier.is_some(),
                    _ => false,
                };
                self.record_taken && extra_fits && shape.observer
            } else {
                shape.extra.is_empty() && !shape.observer && !shape.self_mounts
            };
        self.fits_plan(plan, output, simple)
    }

    fn complete(
        self: Box<Self>,
        plan: &SpawnPlan,
        observer: Option<&crate::observe_fs::ObserverMount>,
        self_mounts: &crate::private_ns::SelfMounts,
        after_args: &mut dyn FnMut() -> Result<()>,
    ) -> Result<(SpawnedChild, Option<UnixStream>)> {
        self.complete_plan(plan, observer, self_mounts, after_args)
    }
}

/// Where a run's prespawned bwrap waits for the spawn that uses it (the first one that fits).
#[derive(Clone, Debug, Default)]
pub struct PrespawnSlot(Arc<Mutex<Option<Prespawned>>>);

impl PrespawnSlot {
    /// A slot holding `pre`.
    pub fn new(pre: Option<Prespawned>) -> PrespawnSlot {
        PrespawnSlot(Arc::new(Mutex::new(pre)))
    }

    /// Takes the waiting bwrap, if there still is one.
    pub fn take(&self) -> Option<Prespawned> {
        self.0.lock().ok().and_then(|mut p| p.take())
    }

    /// For an observed run of `plan` with `output`: the record pipe of the waiting bwrap
    /// (read end, write end), when it waits for an observed run and the plan fits it. The run
    /// reads the records from that read end and hands the write end to the spawn, which,
    /// should the waiting bwrap not be used after all, gives it to the bwrap it spawns.
    pub fn take_record_for(&self, plan: &SpawnPlan, output: Output) -> Option<(OwnedFd, OwnedFd)> {
        let mut slot = self.0.lock().ok()?;
        let pre = slot.as_mut()?;
        if !pre.is_observed() || !pre.fits_plan(plan, output, true) {
            return None;
        }
        let record = pre.record.take()?;
        pre.record_taken = true;
        Some(record)
    }

    /// A descriptor of `supervisor`'s copy nobody may read, when the waiting bwrap has one at
    /// [`NOTIFIER_EXE_FD`] already (an observed run's): the run hands it to the spawn at
    /// that place, which gives it to the bwrap it spawns should the waiting one not be used.
    pub fn notifier_for(&self, supervisor: &Path) -> Option<OwnedFd> {
        let slot = self.0.lock().ok()?;
        let (source, fd) = slot.as_ref()?.notifier.as_ref()?;
        (source == supervisor).then(|| fd.try_clone().ok()).flatten()
    }
}

#[cfg(test)]
mod tests;
