//! Prewarmed sandboxes: a run whose sandbox is set up before its task is known.
//!
//! A task runner that sandboxes every test file pays bwrap's setup (namespaces, mounts,
//! the observers) on every spawn. A prewarmed run does all of it ahead: it is planned and
//! spawned as usual, but its supervisor payload has a [`task_fd`] and the supervisor, once
//! everything is mounted and checked, waits there. [`run_plan_full`] waits too, right after
//! the spawn, for a [`Handover`] on the run's [`Deferred`] channel: the task's command,
//! environment, working directory, streams and timeout. It sends them down as one
//! [`TaskHandover`] with the three streams (`SCM_RIGHTS`) and goes on as any run does from
//! there: the timeout, the capture of piped output and the caller's signals start then. A
//! run whose channel closes before a hand-over is killed unused.
//!
//! A prewarmed sandbox runs one task only; nothing of it is shared with another. Both ends
//! of the hand-over are here: the runner's ([`hand_over`]) and the supervisor's
//! (`receive_task`).
//!
//! [`task_fd`]: crate::payload::SupervisorPayload::task_fd
//! [`run_plan_full`]: crate::runtime::supervise
//! [`TaskHandover`]: crate::payload::TaskHandover

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::error::Context;
use crate::payload::{Bytes, SupervisorPayload, TaskHandover};
use crate::runtime::exec::{Output, Stream};
use crate::runtime::{Result, bail};

/// The descriptor the supervisor of a prewarmed sandbox receives its task on.
pub const TASK_FD: i32 = 11;

/// The task a prewarmed run is handed.
#[derive(Debug)]
pub struct Handover {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Variables set on top of the policy's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Variables removed from the policy's environment.
    pub env_remove: Vec<OsString>,
    /// The working directory (canonical; the same path inside).
    pub cwd: AbsPathBuf,
    /// Where the task's standard streams go.
    pub stdio: Output,
    /// Kill the task after this long, from the hand-over on.
    pub timeout: Option<Duration>,
}

/// What a prewarmed run waits with.
#[derive(Debug)]
pub struct Deferred {
    /// Where its task comes from; closed unused, the run ends without one.
    pub handover: crossbeam_channel::Receiver<Handover>,
    /// The policy's environment, before the plan added its own variables.
    pub policy_env: Vec<(OsString, OsString)>,
}

/// Where a run's [`Deferred`] waits for the spawn that uses it.
#[derive(Clone, Debug, Default)]
pub struct DeferredSlot(Arc<Mutex<Option<Deferred>>>);

impl DeferredSlot {
    /// A slot holding `deferred`.
    pub fn new(deferred: Option<Deferred>) -> DeferredSlot {
        DeferredSlot(Arc::new(Mutex::new(deferred)))
    }

    /// Whether the run is prewarmed (its task not handed over yet).
    pub fn is_set(&self) -> bool {
        self.0.lock().is_ok_and(|d| d.is_some())
    }

    /// Takes it, for the one spawn that waits.
    pub fn take(&self) -> Option<Deferred> {
        self.0.lock().ok().and_then(|mut d| d.take())
    }
}

/// `plan` with its supervisor told to wait for its task on [`TASK_FD`].
pub fn deferred_plan(mut plan: SpawnPlan) -> Result<SpawnPlan> {
    let Some(payload) = plan.payloads.iter_mut().find(|p| p.fd == crate::SUPERVISOR_FD) else {
        bail!("the plan has no supervisor payload to prewarm");
    };
    let mut supervisor = SupervisorPayload::from_bytes(&payload.bytes, payload.fd)?;
    supervisor.task_fd = Some(TASK_FD);
    payload.bytes = supervisor.to_bytes();
    Ok(plan)
}

/// The task's hand-over message: the planned environment with the caller's variables set
/// and removed, but for those the plan sets itself (`TMPDIR`, the proxy's): as a run that
/// is not prewarmed composes them.
pub fn task_message(
    plan: &SpawnPlan,
    policy_env: &[(OsString, OsString)],
    h: &Handover,
) -> Result<TaskHandover> {
    let Some(payload) = plan.payloads.iter().find(|p| p.fd == crate::SUPERVISOR_FD) else {
        bail!("the plan has no supervisor payload");
    };
    let planned = SupervisorPayload::from_bytes(&payload.bytes, payload.fd)?.env;
    // What the plan added or changed over the policy's environment is the plan's.
    let plan_owned = |key: &OsString| {
        key == "TMPDIR"
            || planned.iter().any(|(k, v)| {
                k.0 == *key && !policy_env.iter().any(|(pk, pv)| pk == key && *pv == v.0)
            })
    };
    let mut env: Vec<(Bytes, Bytes)> = planned
        .iter()
        .filter(|(k, _)| plan_owned(&k.0) || !h.env_remove.contains(&k.0))
        .filter(|(k, _)| plan_owned(&k.0) || !h.env.iter().any(|(n, _)| *n == k.0))
        .cloned()
        .collect();
    for (key, value) in &h.env {
        if !plan_owned(key) {
            env.push((Bytes(key.clone()), Bytes(value.clone())));
        }
    }
    let Some(program) = h.command.first() else { bail!("no program to run") };
    Ok(TaskHandover {
        program: Bytes(program.clone()),
        args: h.command.iter().cloned().map(Bytes).collect(),
        env,
        cwd: Bytes(h.cwd.as_os_str().to_os_string()),
    })
}

/// The task's three streams as `stdio` says, and the runner's ends of the piped ones
/// (stdout, stderr).
#[derive(Debug)]
pub struct Streams {
    /// What the task gets as its stdin, stdout and stderr.
    pub task: [OwnedFd; 3],
    /// The read end of a piped stdout.
    pub stdout: Option<std::fs::File>,
    /// The read end of a piped stderr.
    pub stderr: Option<std::fs::File>,
}

/// Opens the task's streams: the runner's own (a duplicate), `/dev/null`, or a pipe.
pub fn streams(stdio: Output) -> Result<Streams> {
    let null = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map(OwnedFd::from)
            .context("cannot open /dev/null for the task")
    };
    let own = |fd: i32| {
        // SAFETY: borrowing this process's standard descriptor only for the duplicate.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        borrowed.try_clone_to_owned().context("cannot duplicate the runner's stream")
    };
    let stdin = match stdio.stdin {
        Stream::Inherit => own(0)?,
        // A piped stdin gets nothing written: it reads as `/dev/null` does.
        Stream::Null | Stream::Piped => null()?,
    };
    let out = |stream: Stream, fd: i32| -> Result<(OwnedFd, Option<std::fs::File>)> {
        match stream {
            Stream::Inherit => Ok((own(fd)?, None)),
            Stream::Null => Ok((null()?, None)),
            Stream::Piped => {
                let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                    .context("cannot create the task's pipe")?;
                Ok((write, Some(std::fs::File::from(read))))
            }
        }
    };
    let (stdout, stdout_read) = out(stdio.stdout, 1)?;
    let (stderr, stderr_read) = out(stdio.stderr, 2)?;
    Ok(Streams { task: [stdin, stdout, stderr], stdout: stdout_read, stderr: stderr_read })
}

/// Sends the task and its streams down `sock` to the waiting supervisor.
pub fn hand_over(sock: &OwnedFd, message: &TaskHandover, streams: &[OwnedFd; 3]) -> Result<()> {
    let fds: Vec<i32> = streams.iter().map(AsRawFd::as_raw_fd).collect();
    crate::fdpass::send_with_fds(sock.as_fd(), &message.to_bytes(), &fds)
        .context("cannot hand the task to its sandbox")
}

// The supervisor's end.

/// The most bytes of one task hand-over (its arguments and environment).
const MAX_HANDOVER: usize = 1 << 20;

/// Waits on `fd` for the task of a prewarmed sandbox: its [`TaskHandover`] and its three
/// standard streams, which become this process's (the task inherits them). `None` when the
/// runner closed the socket instead (the sandbox is torn down unused).
pub(crate) fn receive_task(
    fd: i32,
) -> std::result::Result<Option<crate::payload::TaskHandover>, String> {
    let received = loop {
        match crate::fdpass::recv_with_fds(fd, MAX_HANDOVER) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other.map_err(|e| format!("receiving the task: {e}"))?,
        }
    };
    // SAFETY: closing the socket this process was given for the hand-over alone.
    unsafe { libc::close(fd) };
    let Some((bytes, streams)) = received else { return Ok(None) };
    if streams.len() != 3 {
        return Err(format!("the task came with {} streams, not 3", streams.len()));
    }
    for (target, stream) in streams.iter().enumerate() {
        let target = i32::try_from(target).unwrap_or(2);
        // SAFETY: dup2 onto the standard descriptors from ones we own; checked.
        if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(stream), target) } < 0 {
            return Err(format!("dup2: {}", std::io::Error::last_os_error()));
        }
    }
    drop(streams);
    crate::payload::TaskHandover::from_bytes(&bytes, fd).map(Some).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_policy::Payload;

    fn plan_with_env(env: &[(&str, &str)]) -> SpawnPlan {
        let payload = SupervisorPayload {
            program: Bytes("true".into()),
            args: vec![Bytes("true".into())],
            env: env.iter().map(|(k, v)| (Bytes((*k).into()), Bytes((*v).into()))).collect(),
            cwd: Bytes("/p".into()),
            ..Default::default()
        };
        crate::tests::bare_plan(vec![Payload {
            name: "supervisor".into(),
            fd: crate::SUPERVISOR_FD,
            bytes: payload.to_bytes(),
        }])
    }

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    #[test]
    fn the_callers_variables_apply_over_the_policys_but_never_over_the_plans() {
        let plan = plan_with_env(&[
            ("PATH", "/usr/bin"),
            ("LANG", "C"),
            ("HTTP_PROXY", "http://127.0.0.1:3128"),
            ("TMPDIR", "/tmp"),
        ]);
        let policy_env = os(&[("PATH", "/usr/bin"), ("LANG", "C"), ("HTTP_PROXY", "http://mine")]);
        let h = Handover {
            command: vec!["make".into(), "-j2".into()],
            env: os(&[("PATH", "/opt/bin"), ("FOO", "1"), ("HTTP_PROXY", "x"), ("TMPDIR", "/e")]),
            env_remove: vec!["LANG".into()],
            cwd: AbsPathBuf::new_lexical("/p/sub").unwrap(),
            stdio: Output::INHERIT,
            timeout: None,
        };
        let m = task_message(&plan, &policy_env, &h).unwrap();
        let env: Vec<(String, String)> = m
            .env
            .iter()
            .map(|(k, v)| (k.0.to_string_lossy().into_owned(), v.0.to_string_lossy().into_owned()))
            .collect();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/opt/bin"));
        assert_eq!(get("FOO"), Some("1"));
        assert_eq!(get("LANG"), None, "removed");
        assert_eq!(get("HTTP_PROXY"), Some("http://127.0.0.1:3128"), "the plan's proxy stays");
        assert_eq!(get("TMPDIR"), Some("/tmp"), "the plan's TMPDIR stays");
        assert_eq!(env.iter().filter(|(n, _)| n == "PATH").count(), 1, "{env:?}");
        assert_eq!(m.program.0, "make");
        assert_eq!(m.args.len(), 2);
        assert_eq!(m.cwd.0, "/p/sub");
    }

    #[test]
    fn a_deferred_plan_tells_the_supervisor_where_its_task_comes() {
        let plan = deferred_plan(plan_with_env(&[])).unwrap();
        let payload = &plan.payloads[0];
        let back = SupervisorPayload::from_bytes(&payload.bytes, payload.fd).unwrap();
        assert_eq!(back.task_fd, Some(TASK_FD));
    }
}
