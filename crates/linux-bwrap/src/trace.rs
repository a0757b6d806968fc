//! Running a sandbox plan under strace, so that its denials can be itemized.
//!
//! [`wrap`] turns a bwrap plan into a plan whose program is strace and whose traced command
//! is the original bwrap command line. strace runs on the host, outside the sandbox: it
//! traces bwrap and follows (`-f`) into the sandbox, so the tracer is invisible to the task
//! (`TracerPid` reads 0 inside the pid namespace) and out of its reach. strace writes its
//! log to the write end of a pipe the runner hands it on descriptor [`Traced::fd`]
//! (`-o /proc/self/fd/N`): no trace file ever exists. The supervisor closes that descriptor
//! with every other one before it executes the task, so the task cannot write into the log.
//!
//! The traced calls are the ones that reveal a denial ([`TRACED_SYSCALLS`]) plus the ones a
//! classifier needs to follow working directories (`chdir`, `fchdir`, the `clone` family),
//! and one for speed (`set_robust_list`, see there).
//! `-y` decorates descriptors (and `AT_FDCWD`) with the paths they stand for (not `-yy`:
//! its socket details cost a netlink query per socket and serve no classification).

use std::ffi::{OsStr, OsString};

use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::payload::{Bytes, StraceInside, SupervisorPayload};

/// The calls traced: those that reveal denials, those that move working directories, and
/// `set_robust_list`. A `?` prefix tells strace to skip a name its version does not know.
///
/// `set_robust_list` reveals nothing; it is there for speed. With `--seccomp-bpf`, strace
/// learns that a new thread or process carries its filter only at that task's first
/// traced call, and until then stops it at every call (`PTRACE_SYSCALL`). glibc calls
/// `set_robust_list` first thing in every new thread and forked child, so each one costs one
/// stop instead of one per call (a `git status` thread doing thousands of `lstat`s).
pub const TRACED_SYSCALLS: &str = "open,openat,?openat2,creat,mkdir,mkdirat,unlink,unlinkat,rmdir,\
rename,renameat,?renameat2,link,linkat,symlink,symlinkat,truncate,chmod,fchmodat,?fchmodat2,\
chown,lchown,fchownat,mknod,mknodat,execve,?execveat,connect,bind,socket,socketpair,chdir,fchdir,\
clone,?clone3,fork,vfork,set_robust_list";

/// How to trace.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// strace's absolute path, from the trusted probe (never a `PATH` lookup).
    pub strace: AbsPathBuf,
    /// Whether strace knows `--seccomp-bpf` (5.3 and later): only traced calls stop the
    /// task. Calls the sandbox's own seccomp filter refuses are then invisible to strace
    /// (the kernel ranks `SECCOMP_RET_ERRNO` above `SECCOMP_RET_TRACE`), so refused
    /// `socket(AF_UNIX)` calls are itemized only without it.
    pub seccomp_bpf: bool,
}

/// A plan wrapped in strace.
#[derive(Clone, Debug)]
pub struct Traced {
    /// The plan to perform: strace running the original command.
    pub plan: SpawnPlan,
    /// The descriptor (in strace) that must be the write end of the trace pipe.
    pub fd: i32,
}

/// strace's options for tracing the way paddock does ([`TraceOptions::seccomp_bpf`]), with
/// the log written to `log`, ending with `--` (the traced command follows). Benchmarks use
/// it for a plain-strace baseline that traces exactly what paddock traces.
pub fn strace_options(seccomp_bpf: bool, log: &OsStr) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["-f".into()];
    if seccomp_bpf {
        argv.push("--seccomp-bpf".into());
    }
    argv.extend(
        [
            // `-q`, not `-qq`: exit lines stay, so the reader sees bwrap itself end.
            "-q",
            "-y",
            "-e",
            "signal=none",
            "-e",
            &format!("trace={TRACED_SYSCALLS}"),
            "-o",
        ]
        .map(OsString::from),
    );
    argv.push(log.to_os_string());
    argv.push("--".into());
    argv
}

/// strace's options for attaching to the supervisor (pid `pid` in the runner's namespace)
/// and following what it forks, the log written to `log`. Without `--seccomp-bpf`: strace
/// can install its filter only in a process it starts (see [`attach`]).
pub fn attach_options(pid: u32, log: &OsStr) -> Vec<OsString> {
    let mut argv = strace_options(false, log);
    // `--` ends the options before a command; attaching has none.
    argv.pop();
    argv.extend(["-p".into(), pid.to_string().into()]);
    argv
}

/// Makes `plan` ready for a tracer attached from the host instead of strace running bwrap:
/// its supervisor asks for one ([`crate::supervisor::TRACE_ME`]) and starts the task only
/// once it is traced. strace then follows the task from its fork, like a plain strace
/// inside the sandbox, and skips bwrap's own setup: a thousand calls of mounting and
/// reading `/proc/self/mountinfo` that, stopped at every call, cost tens of milliseconds.
/// For the `strace` mode, which stops at every call (without `--seccomp-bpf`) so that the
/// calls the seccomp filter refuses show too.
pub fn attach(mut plan: SpawnPlan) -> Result<SpawnPlan, crate::Error> {
    for payload in plan.payloads.iter_mut().filter(|p| p.name == "supervisor") {
        let mut sp = SupervisorPayload::from_bytes(&payload.bytes, payload.fd)?;
        sp.wait_for_tracer = true;
        payload.bytes = sp.to_bytes();
    }
    plan.diagnostics.push(
        "itemizing denials with strace attached to the supervisor before the task starts \
         (log on a pipe, never on disk)"
            .to_owned(),
    );
    Ok(plan)
}

/// The `TracerPid:` of a `/proc/PID/status` text: who traces that process (0: nobody, or a
/// tracer outside the reader's pid namespace).
pub fn tracer_pid(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok())
}

/// Where [`inside`] binds strace in the sandbox.
pub const STRACE_PATH: &str = "/dev/.paddock-strace";
/// The hidden subcommand strace runs inside the sandbox: it loads the task's filter and
/// executes the task (`crate::shim`).
pub const SHIM_SUBCOMMAND: &str = "__shim";
/// The descriptor the shim reads the task's BPF program from.
pub const SHIM_BPF_FD: i32 = 3;

/// Makes `plan` run strace inside the sandbox, with `--seccomp-bpf`, for `--itemize auto`
/// where the observers are unavailable: strace can install its filter only in a process it
/// starts, and strace on the host would have to start bwrap and stop at each of its setup
/// calls (a hundred, 20 ms and more). Inside, it starts where a plain strace in the sandbox
/// would: the supervisor's child executes strace (the host's `strace`, bound read-only at
/// [`STRACE_PATH`]) in place of the task, with the log on descriptor [`Traced::fd`];
/// strace (`-DD`) leaves that child its tracee, which executes the shim (`__shim`), which
/// loads the task's seccomp filter (strace's own goes first) and executes the task. The
/// task stays the supervisor's child; strace runs in a process group of its own, untouched
/// by the signals meant for the task.
///
/// strace is not under the task's filter (it must trace) and runs as the task's user. The
/// shim closes every inherited descriptor, the log included, before the task runs, and
/// puts the task in a Landlock domain that keeps it from any ptrace access to strace and
/// from signalling it (see `crate::shim`): the kernel must scope signals
/// ([`crate::shim::signal_scoping_available`]), which the caller checks.
pub fn inside(mut plan: SpawnPlan, strace: &AbsPathBuf) -> Result<Traced, crate::Error> {
    let fd = plan.free_fd();
    for payload in plan.payloads.iter_mut() {
        match payload.name.as_str() {
            "bwrap-args" => {
                for arg in [OsStr::new("--ro-bind"), strace.as_os_str(), OsStr::new(STRACE_PATH)] {
                    payload.bytes.extend_from_slice(arg.as_encoded_bytes());
                    payload.bytes.push(0);
                }
            }
            "supervisor" => {
                let mut sp = SupervisorPayload::from_bytes(&payload.bytes, payload.fd)?;
                let log = format!("/proc/self/fd/{fd}");
                let mut args = vec![Bytes("-DD".into())];
                args.extend(strace_options(true, OsStr::new(&log)).into_iter().map(Bytes));
                args.extend(
                    [
                        crate::SUPERVISOR_PATH,
                        SHIM_SUBCOMMAND,
                        "--bpf-fd",
                        &SHIM_BPF_FD.to_string(),
                        "--",
                    ]
                    .map(|a| Bytes(a.into())),
                );
                sp.strace_inside =
                    Some(StraceInside { program: Bytes(STRACE_PATH.into()), args, log_fd: fd });
                payload.bytes = sp.to_bytes();
            }
            _ => {}
        }
    }
    plan.diagnostics.push(format!(
        "itemizing denials with strace --seccomp-bpf inside the sandbox (log on descriptor {fd}, \
         never on disk)"
    ));
    Ok(Traced { plan, fd })
}

/// Wraps `plan` in strace. The trace descriptor is the first number above every descriptor
/// the plan already hands its child ([`SpawnPlan::free_fd`]), so it collides with none.
pub fn wrap(mut plan: SpawnPlan, opts: &TraceOptions) -> Traced {
    let fd = plan.free_fd();
    let mut argv: Vec<OsString> = vec!["strace".into()];
    argv.extend(strace_options(opts.seccomp_bpf, OsStr::new(&format!("/proc/self/fd/{fd}"))));
    argv.push(plan.program.as_os_str().to_os_string());
    argv.extend(plan.argv.iter().skip(1).cloned());
    plan.argv = argv;
    plan.program = opts.strace.clone();
    plan.diagnostics.push(format!(
        "itemizing denials with {}{} (log on descriptor {fd}, never on disk)",
        opts.strace,
        if opts.seccomp_bpf { " --seccomp-bpf" } else { "" }
    ));
    Traced { plan, fd }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paddock_policy::Payload;

    fn plan() -> SpawnPlan {
        SpawnPlan {
            argv: vec!["bwrap".into(), "--args".into(), "3".into()],
            signal_fd: Some(6),
            ..crate::tests::bare_plan(vec![
                Payload { name: "a".into(), fd: 3, bytes: vec![] },
                Payload { name: "b".into(), fd: 9, bytes: vec![] },
            ])
        }
    }

    #[test]
    fn attaching_strace_follows_the_supervisor_and_the_plan_asks_for_it() {
        let argv = attach_options(4242, OsStr::new("/proc/self/fd/3"));
        let argv: Vec<_> = argv.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(argv[0], "-f");
        assert!(!argv.contains(&"--seccomp-bpf") && !argv.contains(&"--"));
        assert_eq!(argv[argv.len() - 2..], ["-p", "4242"]);
        assert!(argv.contains(&"/proc/self/fd/3"));

        let mut p = plan();
        let payload = SupervisorPayload {
            version: crate::payload::PAYLOAD_VERSION.to_owned(),
            program: crate::payload::Bytes("true".into()),
            args: vec![crate::payload::Bytes("true".into())],
            env: Vec::new(),
            cwd: crate::payload::Bytes("/".into()),
            seccomp_fd: 5,
            signal_fd: Some(6),
            ..Default::default()
        };
        p.payloads.push(Payload { name: "supervisor".into(), fd: 4, bytes: payload.to_bytes() });
        let attached = attach(p).unwrap();
        let bytes = &attached.payloads.iter().find(|p| p.name == "supervisor").unwrap().bytes;
        let back = SupervisorPayload::from_bytes(bytes, 4).unwrap();
        assert!(back.wait_for_tracer);
        assert_eq!(SupervisorPayload { wait_for_tracer: false, ..back }, payload);
        // bwrap itself is not traced: the plan still runs it directly.
        assert_eq!(attached.program.as_path(), std::path::Path::new("/usr/bin/bwrap"));
    }

    #[test]
    fn the_tracer_is_read_from_the_status_file() {
        let status = "Name:\tpaddock\nState:\tS (sleeping)\nTracerPid:\t4242\nUid:\t0\n";
        assert_eq!(tracer_pid(status), Some(4242));
        assert_eq!(tracer_pid("TracerPid:\t0\n"), Some(0));
        assert_eq!(tracer_pid("Name:\tx\n"), None);
    }

    #[test]
    fn strace_runs_bwrap_and_writes_above_every_payload() {
        let opts = TraceOptions {
            strace: AbsPathBuf::new_lexical("/usr/bin/strace").unwrap(),
            seccomp_bpf: true,
        };
        let t = wrap(plan(), &opts);
        assert_eq!(t.fd, 10);
        assert_eq!(t.plan.program.as_path(), std::path::Path::new("/usr/bin/strace"));
        let argv: Vec<_> = t.plan.argv.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(argv[..3], ["strace", "-f", "--seccomp-bpf"]);
        assert!(argv.contains(&"/proc/self/fd/10"));
        let dash = argv.iter().position(|a| *a == "--").unwrap();
        assert_eq!(argv[dash + 1..], ["/usr/bin/bwrap", "--args", "3"]);
        let plain = wrap(plan(), &TraceOptions { seccomp_bpf: false, ..opts.clone() });
        assert!(!plain.plan.argv.iter().any(|a| a == "--seccomp-bpf"));
        // A port grant's channel is a descriptor of the child too.
        let mut granted = plan();
        granted.bridges.push(paddock_policy::BridgeSpec::Inbound { ports: vec![80], fd: 12 });
        assert_eq!(wrap(granted, &opts).fd, 13);
    }
}
