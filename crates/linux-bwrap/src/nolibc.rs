//! Plans for `paddock-supervisor-nolibc`, the supervisor without a C library: a task that
//! needs nothing of the supervisor but its walls starts it instead of `paddock-supervisor`,
//! 0.3 ms sooner (its module doc says why).
//!
//! [`without_libc`] turns a plan made by [`crate::LinuxBwrap`] into one that copies that
//! supervisor into the sandbox (`repoint`) and hands it its payload in its own format ([`encode`]), when the supervisor
//! payload asks for nothing else (no relays, observers or tracer): the same task, argv,
//! environment, working directory, filter and signal channel. Any other plan is left as it
//! is. The runner applies it last, to runs it does not trace: strace inside the sandbox runs
//! `paddock-supervisor`'s shim, and the tracers name the supervisor they follow.
//!
//! Runs the observers itemize go to it too, when the runner has `paddock-supervisor`'s copy
//! nobody may read to hand it ([`with_notifier`], `crate::runtime::exec_only`): it starts the
//! task as it starts any other, the task's child installing the notification filter (at
//! [`crate::NOTIFY_BPF_FD`]) after the main one and sending its listener up; at the task's
//! first notified call, or once it has run for a millisecond, it executes that copy (at
//! [`crate::NOTIFIER_EXE_FD`]) in its own process, which serves the listener from then on
//! (`supervisor::serve_notify`). A task that ends sooner without such a call never pays for
//! the server's start.
//!
//! # The payload
//!
//! NUL-terminated fields, in this order, each a byte string that cannot hold a NUL:
//!
//! ```text
//! paddock-exec-payload  VERSION  CWD  SECCOMP_FD  SIGNAL_FD|-  MOUNT_IDS_FD|-
//! NOTIFY_BPF_FD|-  NOTIFIER_EXE_FD|-  NOTIFIERC  NOTIFIER_ARG...
//! INNERC  (r|w)PATH...  PROGRAM  ARGC  ARG...  ENVC  KEY=VALUE...
//! ```
//!
//! The notifier's fields are `-`, `-`, `0` for a run that is not observed; for one that is,
//! its arguments are the server's command line but for the `--task PID --listener FD` the
//! supervisor adds. Each inner mount ([`SupervisorPayload::inner_mounts`]) is its path after
//! one byte: `r` read-only, `w` as it is, `m` masked with the empty file the supervisor
//! makes at [`crate::INNER_MASK_PATH`], `e` an empty read-only tmpfs over it, `v` the
//! sandbox's devices in the tmpfs there (`crate::devices`), `c` the runner's clone of the write
//! grant there, the next one received on the signal channel; `R` and `W` are `r` and `w` below
//! such a grant, made only when its clone came without them. Numbers are decimal. Nothing
//! follows the last variable. The supervisor reads it without copying: the fields are the
//! strings `execve` takes.

use paddock_policy::{AbsPathBuf, FileFd, Payload, SpawnPlan};

use crate::payload::SupervisorPayload;

/// The first field of every payload.
pub const MAGIC: &str = "paddock-exec-payload";
/// The executable's name, next to `paddock`.
pub const SUPERVISOR_NOLIBC_EXE: &str = "paddock-supervisor-nolibc";
/// The name of the notification filter's payload.
pub const NOTIFY_BPF_PAYLOAD: &str = "notify-bpf";

/// The payload for `paddock-supervisor-nolibc`, or `None` when `p` needs
/// `paddock-supervisor` (relays, a tracer, unix sockets granted by path, a prewarmed task;
/// the observers unless `observed`, when it needs them) or holds what this format cannot (a
/// NUL byte, a variable name with `=`), which that supervisor then reports.
pub fn encode(p: &SupervisorPayload, observed: bool) -> Option<Vec<u8>> {
    let plain = p.relays.is_empty()
        && p.unix_socket_grants.is_empty()
        && !p.wait_for_tracer
        && p.strace_inside.is_none()
        && p.task_fd.is_none();
    let notifies = p.record_fd.is_some() || p.record_connects || p.refuse_unix_sockets;
    if !plain
        || notifies != observed
        || (observed && p.record_fd.is_none())
        || p.env.iter().any(|(k, _)| k.0.as_encoded_bytes().contains(&b'='))
    {
        return None;
    }
    let mut out = Vec::new();
    let mut field = |bytes: &[u8]| -> Option<()> {
        if bytes.contains(&0) {
            return None;
        }
        out.extend_from_slice(bytes);
        out.push(0);
        Some(())
    };
    let number = |n: i32| usize::try_from(n).ok().map(|n| n.to_string());
    let optional = |fd: Option<i32>| match fd {
        Some(fd) => number(fd),
        None => Some("-".to_owned()),
    };
    field(MAGIC.as_bytes())?;
    field(p.version.as_bytes())?;
    field(p.cwd.0.as_encoded_bytes())?;
    field(number(p.seccomp_fd)?.as_bytes())?;
    for fd in [p.signal_fd, p.mount_ids_fd] {
        field(optional(fd)?.as_bytes())?;
    }
    match p.record_fd.filter(|_| observed) {
        None => ["-", "-", "0"].into_iter().try_for_each(|f| field(f.as_bytes()))?,
        Some(record_fd) => {
            field(number(crate::NOTIFY_BPF_FD)?.as_bytes())?;
            field(number(crate::NOTIFIER_EXE_FD)?.as_bytes())?;
            let options = match (p.record_connects, p.refuse_unix_sockets) {
                (false, false) => "-",
                (true, false) => "c",
                (false, true) => "u",
                (true, true) => "cu",
            };
            let args = [
                crate::SUPERVISOR_EXE.to_owned(),
                crate::SERVE_NOTIFY_SUBCOMMAND.to_owned(),
                "--version".to_owned(),
                p.version.clone(),
                "--record-fd".to_owned(),
                number(record_fd)?,
                "--signal-fd".to_owned(),
                optional(p.signal_fd)?,
                "--options".to_owned(),
                options.to_owned(),
            ];
            field(args.len().to_string().as_bytes())?;
            args.iter().try_for_each(|a| field(a.as_bytes()))?;
        }
    }
    field(p.inner_mounts.len().to_string().as_bytes())?;
    for m in &p.inner_mounts {
        let kind: &[u8] = match (m.mask, m.empty_dir, m.read_only) {
            _ if m.devices => b"v",
            _ if m.grant_clone => b"c",
            (true, _, _) => b"m",
            (false, true, _) => b"e",
            (false, false, true) if m.in_grant_clone => b"R",
            (false, false, false) if m.in_grant_clone => b"W",
            (false, false, true) => b"r",
            (false, false, false) => b"w",
        };
        field(&[kind, m.path.0.as_encoded_bytes()].concat())?;
    }
    field(p.program.0.as_encoded_bytes())?;
    field(p.args.len().to_string().as_bytes())?;
    for arg in &p.args {
        field(arg.0.as_encoded_bytes())?;
    }
    field(p.env.len().to_string().as_bytes())?;
    for (key, value) in &p.env {
        field(&[key.0.as_encoded_bytes(), b"=", value.0.as_encoded_bytes()].concat())?;
    }
    Some(out)
}

/// `plan` run by `supervisor` (the `paddock-supervisor-nolibc` executable) when its payload
/// allows ([`encode`]); else `None`, and `plan` stays as it is.
pub fn without_libc(plan: &SpawnPlan, supervisor: &AbsPathBuf) -> Option<SpawnPlan> {
    repoint(plan, supervisor, false)
}

/// An observed `plan` run by `supervisor` (the `paddock-supervisor-nolibc` executable), its
/// notification filter at [`crate::NOTIFY_BPF_FD`]: the runner must give the child
/// `paddock-supervisor`'s copy nobody may read at [`crate::NOTIFIER_EXE_FD`]. `None` when
/// the payload needs more than the observers of `paddock-supervisor` ([`encode`]).
pub fn with_notifier(plan: &SpawnPlan, supervisor: &AbsPathBuf) -> Option<SpawnPlan> {
    repoint(plan, supervisor, true)
}

/// `plan` with the supervisor's bind replaced by a copy of `supervisor`, and its payload in
/// this format; for an `observed` plan, with the notification filter's payload too.
///
/// The copy: bwrap's `--file` writes what it reads from [`crate::SUPERVISOR_EXE_FD`] (the
/// runner opens `supervisor` there: [`SpawnPlan::file_fds`]) to a new file at the same
/// [`crate::SUPERVISOR_PATH`] in the sandbox's fresh `/dev`, executable by everyone and
/// writable by no one. This supervisor is small (~50 KiB), and copying it costs bwrap less
/// than a bind, for which bwrap reads and parses the whole mount table (a quarter of a
/// millisecond on a small host). It stays the last op: arguments cut short leave no
/// supervisor to run.
fn repoint(plan: &SpawnPlan, supervisor: &AbsPathBuf, observed: bool) -> Option<SpawnPlan> {
    let mut plan = plan.clone();
    let sup = plan.payloads.iter_mut().find(|p| p.name == "supervisor")?;
    let payload = SupervisorPayload::from_bytes(&sup.bytes, sup.fd).ok()?;
    sup.bytes = encode(&payload, observed)?;
    if observed {
        plan.payloads.push(Payload {
            name: NOTIFY_BPF_PAYLOAD.to_owned(),
            fd: crate::NOTIFY_BPF_FD,
            bytes: notify_bpf(&payload)?,
        });
    }
    // The supervisor's bind is the last op, so the last three arguments (see `ops`).
    let args = plan.payloads.iter_mut().find(|p| p.name == "bwrap-args")?;
    let fields: Vec<&[u8]> = args.bytes.strip_suffix(&[0])?.split(|&b| b == 0).collect();
    let [.., bind, _src, dest] = fields.as_slice() else { return None };
    if *bind != b"--ro-bind" || *dest != crate::SUPERVISOR_PATH.as_bytes() {
        return None;
    }
    let kept = fields.len() - 3;
    let fd = crate::SUPERVISOR_EXE_FD.to_string();
    let mut bytes = Vec::with_capacity(args.bytes.len());
    for arg in fields[..kept].iter().copied().chain([
        b"--perms".as_slice(),
        b"0555",
        b"--file",
        fd.as_bytes(),
        dest,
    ]) {
        bytes.extend_from_slice(arg);
        bytes.push(0);
    }
    args.bytes = bytes;
    plan.file_fds.push(FileFd { fd: crate::SUPERVISOR_EXE_FD, path: supervisor.clone() });
    Some(plan)
}

/// The notification filter `paddock-supervisor` would install for `payload`, as the kernel
/// reads it (code, jt, jf, k per instruction, in this machine's byte order); `None` where
/// this architecture has no such filter.
#[cfg(target_os = "linux")]
fn notify_bpf(payload: &SupervisorPayload) -> Option<Vec<u8>> {
    let opts = crate::notify::filter::Options {
        record_connects: payload.record_connects,
        refuse_unix_sockets: payload.refuse_unix_sockets,
        unix_grants: false,
    };
    let program = crate::notify::filter::program(opts, true);
    if program.is_empty() {
        return None;
    }
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in &program {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.extend_from_slice(&[insn.jt, insn.jf]);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    Some(bytes)
}

/// No notification filter away from Linux: observed plans keep `paddock-supervisor`.
#[cfg(not(target_os = "linux"))]
fn notify_bpf(_: &SupervisorPayload) -> Option<Vec<u8>> {
    None
}

/// The last `n` arguments of a plan's bwrap setup, for tests.
#[cfg(test)]
fn last_args(plan: &SpawnPlan, n: usize) -> Vec<&std::ffi::OsStr> {
    let args = plan.payloads.iter().find(|p| p.name == "bwrap-args").map(|p| &p.bytes[..]);
    let all: Vec<&std::ffi::OsStr> = args
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| {
            // SAFETY: the bytes come from `as_encoded_bytes` of `OsStr`s, split at NULs
            // (ASCII), so every piece is valid encoded bytes.
            unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(a) }
        })
        .collect();
    all[all.len().saturating_sub(n)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{Bytes, SandboxRelay, StraceInside};
    use paddock_policy::{Backend, Task};
    use std::ffi::OsStr;

    fn plan_of(observe: bool) -> SpawnPlan {
        let task = Task { observe, ..crate::tests::task() };
        crate::LinuxBwrap.plan(&crate::tests::policy(), &task, &crate::tests::facts()).unwrap()
    }

    fn plain() -> SupervisorPayload {
        SupervisorPayload {
            version: "1.2.3".to_owned(),
            program: Bytes("sh".into()),
            args: vec![Bytes("sh".into()), Bytes("-c".into()), Bytes("echo é".into())],
            env: vec![(Bytes("PATH".into()), Bytes("/usr/bin:/bin".into()))],
            cwd: Bytes("/work/p".into()),
            seccomp_fd: 5,
            signal_fd: Some(6),
            ..Default::default()
        }
    }

    #[test]
    fn a_plain_payload_is_its_fields_each_ended_by_a_nul() {
        let bytes = encode(&plain(), false).unwrap();
        expect_test::expect![[r#"
            "paddock-exec-payload\01.2.3\0/work/p\05\06\0-\0-\0-\00\00\0sh\03\0sh\0-c\0echo é\01\0PATH=/usr/bin:/bin\0"
        "#]]
        .assert_debug_eq(&String::from_utf8(bytes).unwrap());
        let inner = vec![
            crate::payload::InnerMount::on_itself("/work/p/.git", false),
            crate::payload::InnerMount {
                mask: true,
                ..crate::payload::InnerMount::on_itself("/work/p/.bashrc", true)
            },
            crate::payload::InnerMount {
                empty_dir: true,
                ..crate::payload::InnerMount::on_itself("/home/u/.ssh", true)
            },
        ];
        let with_inner =
            encode(&SupervisorPayload { inner_mounts: inner, ..plain() }, false).unwrap();
        assert!(
            String::from_utf8(with_inner).unwrap().contains(concat!(
                "\0-\0-\0-\0",
                "0\0",
                "3\0w/work/p/.git\0m/work/p/.bashrc\0e/home/u/.ssh\0sh\0"
            )),
            "each inner mount after the count, its kind byte first"
        );
        let no_channel = encode(&SupervisorPayload { signal_fd: None, ..plain() }, false).unwrap();
        assert!(String::from_utf8(no_channel).unwrap().contains(concat!(
            "\0-\0-\0-\0-\0",
            "0\0",
            "0\0sh\0"
        )));
    }

    #[test]
    fn what_only_paddock_supervisor_does_or_this_format_cannot_hold_keeps_the_plan() {
        let needs_more = [
            SupervisorPayload {
                relays: vec![SandboxRelay::Inbound { fd: 8, ports: vec![80] }],
                ..plain()
            },
            SupervisorPayload { record_fd: Some(7), ..plain() },
            SupervisorPayload { refuse_unix_sockets: true, ..plain() },
            SupervisorPayload {
                unix_socket_grants: vec![crate::payload::UnixSocketGrant::default()],
                ..plain()
            },
            SupervisorPayload { wait_for_tracer: true, ..plain() },
            SupervisorPayload {
                strace_inside: Some(StraceInside {
                    program: Bytes("/dev/.paddock-strace".into()),
                    args: Vec::new(),
                    log_fd: 9,
                }),
                ..plain()
            },
            SupervisorPayload { args: vec![Bytes("a\0b".into())], ..plain() },
            SupervisorPayload { env: vec![(Bytes("A=B".into()), Bytes("c".into()))], ..plain() },
            SupervisorPayload { env: vec![(Bytes("A".into()), Bytes("c\0".into()))], ..plain() },
        ];
        for p in needs_more {
            assert_eq!(encode(&p, false), None, "{p:?}");
        }
    }

    #[test]
    fn an_untraced_plan_copies_the_supervisor_without_libc_to_the_same_place_last() {
        let plan = plan_of(false);
        let bind = last_args(&plan, 3);
        assert_eq!(
            (bind[0], bind[2]),
            (OsStr::new("--ro-bind"), OsStr::new(crate::SUPERVISOR_PATH))
        );
        let exe = AbsPathBuf::new_lexical("/opt/paddock/paddock-supervisor-nolibc").unwrap();
        let light = without_libc(&plan, &exe).unwrap();
        let fd = crate::SUPERVISOR_EXE_FD.to_string();
        assert_eq!(
            last_args(&light, 5),
            [
                OsStr::new("--perms"),
                OsStr::new("0555"),
                OsStr::new("--file"),
                OsStr::new(&fd),
                OsStr::new(crate::SUPERVISOR_PATH)
            ]
        );
        // The runner opens it there for bwrap; the plan held no such file before.
        assert!(plan.file_fds.is_empty());
        assert_eq!(light.file_fds, [FileFd { fd: crate::SUPERVISOR_EXE_FD, path: exe.clone() }]);
        assert!(light.free_fd() > crate::SUPERVISOR_EXE_FD);
        // Everything before the supervisor's op is the same, and so are the argv, the
        // filter and the signal channel.
        let before = |p: &SpawnPlan, n: usize| {
            let a = &p.payloads.iter().find(|p| p.name == "bwrap-args").unwrap().bytes;
            let mut cut = a.len() - 1;
            for _ in 0..n {
                cut = a[..cut].iter().rposition(|&b| b == 0).unwrap();
            }
            a[..cut].to_vec()
        };
        assert_eq!(before(&light, 5), before(&plan, 3));
        assert_eq!(light.argv, plan.argv);
        assert_eq!(light.signal_fd, plan.signal_fd);
        let bpf = |p: &SpawnPlan| {
            p.payloads.iter().find(|p| p.name == "seccomp-bpf").map(|p| (p.fd, p.bytes.clone()))
        };
        assert_eq!(bpf(&light), bpf(&plan));
        let sup = light.payloads.iter().find(|p| p.name == "supervisor").unwrap();
        assert!(sup.bytes.starts_with(b"paddock-exec-payload\0"));

        // An observed plan needs the notifier.
        assert!(without_libc(&plan_of(true), &exe).is_none());
        assert!(with_notifier(&plan, &exe).is_none());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn an_observed_plan_gets_the_notification_filter_and_the_servers_command_line() {
        let plan = plan_of(true);
        let exe = AbsPathBuf::new_lexical("/opt/paddock/paddock-supervisor-nolibc").unwrap();
        let light = with_notifier(&plan, &exe).unwrap();
        assert_eq!(last_args(&light, 2)[0], OsStr::new(&crate::SUPERVISOR_EXE_FD.to_string()));
        assert_eq!(light.file_fds, [FileFd { fd: crate::SUPERVISOR_EXE_FD, path: exe.clone() }]);
        let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
        let full = SupervisorPayload::from_bytes(&sup.bytes, sup.fd).unwrap();
        let opts = crate::notify::filter::Options {
            record_connects: full.record_connects,
            refuse_unix_sockets: full.refuse_unix_sockets,
            unix_grants: false,
        };
        // The program `paddock-supervisor` would have installed, byte for byte.
        let bpf = light.payloads.iter().find(|p| p.name == NOTIFY_BPF_PAYLOAD).unwrap();
        assert_eq!(bpf.fd, crate::NOTIFY_BPF_FD);
        let program = crate::notify::filter::program(opts, true);
        assert_eq!(bpf.bytes.len(), program.len() * 8);
        // Each instruction as the kernel reads it: code, jt, jf, k.
        for (insn, bytes) in program.iter().zip(bpf.bytes.chunks(8)) {
            assert_eq!(bytes[..2], insn.code.to_ne_bytes());
            assert_eq!((bytes[2], bytes[3]), (insn.jt, insn.jf));
            assert_eq!(bytes[4..], insn.k.to_ne_bytes());
        }
        assert!(light.free_fd() > crate::NOTIFY_BPF_FD);
        let text = String::from_utf8(
            light.payloads.iter().find(|p| p.name == "supervisor").unwrap().bytes.clone(),
        )
        .unwrap();
        let record = full.record_fd.unwrap();
        let signal = full.signal_fd.unwrap();
        assert!(
            text.contains(&format!(
                concat!("\0{}\0{}\0", "10\0paddock-supervisor\0__serve-notify\0--version\0{}\0--record-fd\0{}\0--signal-fd\0{}\0--options\0"),
                crate::NOTIFY_BPF_FD,
                crate::NOTIFIER_EXE_FD,
                full.version,
                record,
                signal,
            )),
            "{text:?}"
        );
    }
}
