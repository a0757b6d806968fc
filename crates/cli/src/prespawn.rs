//! bwrap started before its plan exists, so that its start-up overlaps the runner's.
//!
//! bwrap spends about 0.65 ms after its exec (loading its libraries, reading the kernel's
//! overflow ids, probing SELinux) before it reads its arguments from [`ARGS_FD`]; the runner
//! spends about as long after its own start loading the config, resolving the policy,
//! planning and placing the placeholders. Every plan has the same bwrap command line
//! ([`paddock_linux_bwrap::bwrap_argv`]) and payload descriptors, so bwrap can start first
//! and wait, blocked on an empty pipe at [`ARGS_FD`], with empty memfds at the payload
//! descriptors and the signal channel at [`SIGNAL_FD`]. Once planned, the payloads are
//! written into the memfds, then the arguments into the pipe, which is closed: bwrap goes
//! on. A plan that needs anything else (an observer namespace, a tracer around bwrap,
//! inherited channels, piped output) is spawned as usual and the waiting bwrap is killed.
//!
//! A runner killed before it has written everything leaves bwrap reading arguments cut
//! short: the supervisor's bind is the last of them, and bwrap's command is the supervisor,
//! so nothing runs (and the supervisor refuses to run anything unless it is the sandbox's
//! pid 1). Arguments up to the pipe's capacity are written with one `write`.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use paddock_linux_bwrap::{ARGS_FD, SECCOMP_FD, SIGNAL_FD, SUPERVISOR_FD};
use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::exec::{Invocation, Output, SpawnedChild};

/// A bwrap waiting for its arguments. Dropped unused, it is killed and reaped.
#[derive(Debug)]
pub struct Prespawned {
    child: Option<SpawnedChild>,
    program: AbsPathBuf,
    /// The write end of the pipe bwrap reads its arguments from.
    args: Option<File>,
    /// The runner's ends of the payload memfds, with the descriptor each is at in bwrap.
    payloads: Vec<(RawFd, File)>,
    signal_tx: Option<UnixStream>,
}

impl Prespawned {
    /// Starts `bwrap` with every plan's command line and descriptors, waiting for its
    /// arguments.
    pub fn start(bwrap: &AbsPathBuf) -> Result<Prespawned> {
        let (args_r, args_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot create bwrap's argument pipe")?;
        let mut keep: Vec<OwnedFd> = vec![args_r];
        let mut pairs: Vec<(RawFd, RawFd)> = vec![(keep[0].as_raw_fd(), ARGS_FD)];
        let mut payloads = Vec::new();
        for (name, fd) in [("supervisor", SUPERVISOR_FD), ("seccomp-bpf", SECCOMP_FD)] {
            let memfd = crate::exec::memfd_with(name, &[])?;
            pairs.push((memfd.as_raw_fd(), fd));
            payloads.push((fd, File::from(memfd)));
        }
        let (ours, theirs) = crate::exec::signal_channel()?;
        pairs.push((theirs.as_raw_fd(), SIGNAL_FD));
        keep.push(OwnedFd::from(theirs));
        let max_target = pairs.iter().map(|p| p.1).max().unwrap_or(2);
        let argv = paddock_linux_bwrap::bwrap_argv();
        let run =
            Invocation { program: bwrap.as_path(), argv: &argv, env: &[], cwd: Path::new("/") };
        let child = crate::exec::spawn_posix(&run, Output::Inherit, &pairs, max_target)
            .with_context(|| format!("cannot start {}", bwrap))?;
        drop(keep);
        Ok(Prespawned {
            child: Some(child),
            program: bwrap.clone(),
            args: Some(File::from(args_w)),
            payloads,
            signal_tx: Some(ours),
        })
    }

    /// Whether `plan` can be handed to this bwrap: the same program and command line, no
    /// environment, `/` as cwd, payloads only at the descriptors it has, the signal channel
    /// at its place, output inherited, and nothing else for the child (`simple`: no extra
    /// or inherited descriptors, no observer).
    pub fn fits(&self, plan: &SpawnPlan, output: Output, simple: bool) -> bool {
        let descriptors = plan
            .payloads
            .iter()
            .all(|p| p.fd == ARGS_FD || self.payloads.iter().any(|(fd, _)| *fd == p.fd));
        simple
            && output == Output::Inherit
            && plan.program == self.program
            && plan.argv == paddock_linux_bwrap::bwrap_argv()
            && plan.env.is_empty()
            && plan.cwd.as_path() == Path::new("/")
            && plan.signal_fd == Some(SIGNAL_FD)
            && plan.observer.is_none()
            && descriptors
    }

    /// Writes `plan`'s payloads into the memfds, then its arguments into the pipe and closes
    /// it: bwrap goes on. Returns the child and the runner's end of the signal channel.
    pub fn complete(mut self, plan: &SpawnPlan) -> Result<(SpawnedChild, Option<UnixStream>)> {
        for payload in &plan.payloads {
            if payload.fd == ARGS_FD {
                continue;
            }
            if let Some((_, file)) = self.payloads.iter_mut().find(|(fd, _)| *fd == payload.fd) {
                // The memfd's offset is shared with bwrap's copy: back to the start for the
                // supervisor's read.
                file.write_all(&payload.bytes)
                    .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
                    .with_context(|| format!("cannot prepare the {} payload", payload.name))?;
            }
        }
        let args = plan.payloads.iter().find(|p| p.fd == ARGS_FD).map_or(&[][..], |p| &p.bytes);
        let mut pipe = self.args.take().context("bwrap's arguments were written already")?;
        pipe.write_all(args).context("cannot hand bwrap its arguments")?;
        drop(pipe);
        let child = self.child.take().context("bwrap is gone")?;
        Ok((child, self.signal_tx.take()))
    }
}

impl Drop for Prespawned {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            // Killed before it reads its (never written) arguments, then reaped.
            if let Ok(pid) = i32::try_from(child.pid) {
                // SAFETY: kill on our own child, not reaped yet, so the pid is still its.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            let _ = child.wait();
        }
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
}
