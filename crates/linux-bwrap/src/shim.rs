//! `paddock __shim --bpf-fd N -- ARGV...`: the last step before the task when strace runs
//! inside the sandbox ([`crate::trace::inside`]). strace executes the shim as the command it
//! traces (with strace's own filter installed); the shim reads the task's BPF program from
//! descriptor N and executes `ARGV[0]` (looked up in its `PATH`) with `ARGV` and its own
//! environment, the task's, which strace passed on. It goes through the same launch as the
//! supervisor's child (`crate::launch`): every descriptor above 2 closed (strace's log
//! among them), SIGPIPE at its default, the filter loaded, 126 or 127 as a shell would. The
//! working directory is the task's already.
//!
//! First, the shim checks that strace follows it (else it stops: see `require_tracer`).
//! Then it puts itself, and so the task and everything it starts, in a Landlock
//! domain that scopes signals (`scope_signals`). strace runs outside it, as the same user
//! and not under the task's seccomp filter (it must trace): Landlock refuses a process in a
//! domain every `ptrace` access to a process outside it (`ptrace`, `/proc/PID/mem`,
//! `/proc/PID/fd`, `process_vm_writev`, `pidfd_getfd`) and, scoped, every signal to it. So
//! the task can neither take strace over nor stop or kill it to hide its denials.

use std::ffi::OsString;

use crate::launch::Launch;
use crate::supervisor::EXIT_SUPERVISOR;

/// The shim's entry point: `args` follow the `__shim` subcommand. Returns only on an error
/// before the exec (the exit code, 125).
pub fn main_from_args(args: &[OsString]) -> i32 {
    match run(args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("paddock: sandbox shim: {message}; the task was not run");
            EXIT_SUPERVISOR
        }
    }
}

fn run(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let (fd, argv) = match args {
        [flag, fd, dashes, argv @ ..]
            if flag == "--bpf-fd" && dashes == "--" && !argv.is_empty() =>
        {
            let fd = fd.to_str().and_then(|f| f.parse::<i32>().ok());
            (fd.ok_or_else(|| "invalid --bpf-fd".to_owned())?, argv)
        }
        _ => return Err("usage: paddock __shim --bpf-fd N -- PROGRAM [ARGS...] (internal)".into()),
    };
    let bpf = crate::supervisor::read_fd(fd)?;
    if bpf.is_empty() {
        return Err("the seccomp program is empty; refusing to run the task unfiltered".into());
    }
    require_tracer()?;
    scope_signals()?;
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let launch = Launch::new(
        &argv[0],
        argv.iter().map(OsString::as_os_str),
        env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())),
        bpf,
    )?;
    launch.exec(3, || {})
}

/// Refuses to go on unless a tracer follows this process: strace may have failed to attach
/// and left its command running untraced (`-D` does that), and a task that ran untraced
/// where itemizing was promised could not be run again under another tracer without
/// running twice. A tracer outside the sandbox reads as 0 here (its pid is not in this pid
/// namespace); inside, only paddock's strace exists before the task.
fn require_tracer() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    match crate::trace::tracer_pid(&status) {
        Some(pid) if pid != 0 => Ok(()),
        _ => Err("strace is not tracing it".into()),
    }
}

/// The Landlock ABI that scopes signals (`LANDLOCK_SCOPE_SIGNAL`, Linux 6.12).
const SCOPED_SIGNALS_ABI: libc::c_long = 6;
/// `LANDLOCK_SCOPE_SIGNAL`.
const LANDLOCK_SCOPE_SIGNAL: u64 = 1 << 1;
/// `LANDLOCK_CREATE_RULESET_VERSION`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// `struct landlock_ruleset_attr` as of ABI 6.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// Whether this kernel can scope signals with Landlock (ABI 6 or later, enabled): what
/// running strace inside the sandbox needs (see the module documentation).
pub fn signal_scoping_available() -> bool {
    // SAFETY: the version query takes no attribute (null, size 0) and returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi >= SCOPED_SIGNALS_ABI
}

/// Restricts this process (and what it executes and starts) to a Landlock domain that
/// handles no access but scopes signals: no ptrace access and no signal to any process
/// outside the domain. Sets no_new_privs, which Landlock needs (the seccomp filter sets it
/// anyway).
fn scope_signals() -> Result<(), String> {
    if !signal_scoping_available() {
        return Err("this kernel cannot scope signals with Landlock (Linux 6.12 or later)".into());
    }
    let attr =
        RulesetAttr { handled_access_fs: 0, handled_access_net: 0, scoped: LANDLOCK_SCOPE_SIGNAL };
    // SAFETY: a valid attribute of the size passed, no flags; the result is checked.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    let ruleset =
        i32::try_from(ruleset).map_err(|_| "landlock_create_ruleset failed".to_owned())?;
    if ruleset < 0 {
        return Err(format!("landlock_create_ruleset: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: prctl with integer arguments; landlock_restrict_self on the ruleset we own,
    // which is closed right after.
    let rc = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        let rc = libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32);
        libc::close(ruleset);
        rc
    };
    if rc != 0 {
        return Err(format!("landlock_restrict_self: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_refused_before_anything_runs() {
        for args in [
            &[][..],
            &["--bpf-fd", "x", "--", "true"],
            &["--bpf-fd", "3", "--"],
            &["--bpf-fd", "3", "true"],
        ] {
            let args: Vec<OsString> = args.iter().map(Into::into).collect();
            assert!(run(&args).is_err(), "{args:?}");
        }
    }
}
