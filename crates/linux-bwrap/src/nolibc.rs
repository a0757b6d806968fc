//! Plans for `paddock-supervisor-nolibc`, the supervisor without a C library: a task that
//! needs nothing of the supervisor but its walls starts it instead of `paddock-supervisor`,
//! 0.3 ms sooner (its module doc says why).
//!
//! [`without_libc`] turns a plan made by [`crate::LinuxBwrap`] into one that binds that
//! supervisor and hands it its payload in its own format ([`encode`]), when the supervisor
//! payload asks for nothing else (no relays, observers or tracer): the same task, argv,
//! environment, working directory, filter and signal channel. Any other plan is left as it
//! is. The runner applies it last, to runs it does not trace: strace inside the sandbox runs
//! `paddock-supervisor`'s shim, and the tracers name the supervisor they follow.
//!
//! # The payload
//!
//! NUL-terminated fields, in this order, each a byte string that cannot hold a NUL:
//!
//! ```text
//! paddock-exec-payload  VERSION  CWD  SECCOMP_FD  SIGNAL_FD|-  MOUNT_IDS_FD|-
//! INNERC  (r|w)PATH...  PROGRAM  ARGC  ARG...  ENVC  KEY=VALUE...
//! ```
//!
//! Each inner mount ([`SupervisorPayload::inner_mounts`]) is its path after one byte: `r`
//! read-only, `w` as it is, `m` masked with the file at [`crate::INNER_MASK_PATH`]. Numbers
//! are decimal. Nothing follows the last variable. The supervisor reads it without
//! copying: the fields are the strings `execve` takes.

use paddock_policy::{AbsPathBuf, SpawnPlan};

use crate::payload::SupervisorPayload;

/// The first field of every payload.
pub const MAGIC: &str = "paddock-exec-payload";
/// The executable's name, next to `paddock`.
pub const SUPERVISOR_NOLIBC_EXE: &str = "paddock-supervisor-nolibc";

/// The payload for `paddock-supervisor-nolibc`, or `None` when `p` needs
/// `paddock-supervisor` (relays, observers, a tracer) or holds what this format cannot (a NUL
/// byte, a variable name with `=`), which that supervisor then reports.
pub fn encode(p: &SupervisorPayload) -> Option<Vec<u8>> {
    let plain = p.relays.is_empty()
        && p.record_fd.is_none()
        && !p.record_connects
        && !p.refuse_unix_sockets
        && p.unix_socket_grants.is_empty()
        && !p.wait_for_tracer
        && p.strace_inside.is_none()
        && p.task_fd.is_none();
    if !plain || p.env.iter().any(|(k, _)| k.0.as_encoded_bytes().contains(&b'=')) {
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
    let number = |n: usize| n.to_string();
    field(MAGIC.as_bytes())?;
    field(p.version.as_bytes())?;
    field(p.cwd.0.as_encoded_bytes())?;
    field(number(usize::try_from(p.seccomp_fd).ok()?).as_bytes())?;
    for fd in [p.signal_fd, p.mount_ids_fd] {
        match fd {
            Some(fd) => field(number(usize::try_from(fd).ok()?).as_bytes())?,
            None => field(b"-")?,
        }
    }
    field(number(p.inner_mounts.len()).as_bytes())?;
    for m in &p.inner_mounts {
        let kind: &[u8] = match (m.mask, m.read_only) {
            (true, _) => b"m",
            (false, true) => b"r",
            (false, false) => b"w",
        };
        field(&[kind, m.path.0.as_encoded_bytes()].concat())?;
    }
    field(p.program.0.as_encoded_bytes())?;
    field(number(p.args.len()).as_bytes())?;
    for arg in &p.args {
        field(arg.0.as_encoded_bytes())?;
    }
    field(number(p.env.len()).as_bytes())?;
    for (key, value) in &p.env {
        field(&[key.0.as_encoded_bytes(), b"=", value.0.as_encoded_bytes()].concat())?;
    }
    Some(out)
}

/// `plan` run by `supervisor` (the `paddock-supervisor-nolibc` executable) when its payload
/// allows ([`encode`]); else `None`, and `plan` stays as it is.
pub fn without_libc(plan: &SpawnPlan, supervisor: &AbsPathBuf) -> Option<SpawnPlan> {
    let mut plan = plan.clone();
    let sup = plan.payloads.iter_mut().find(|p| p.name == "supervisor")?;
    let encoded = encode(&SupervisorPayload::from_bytes(&sup.bytes, sup.fd).ok()?)?;
    sup.bytes = encoded;
    // The supervisor's bind is the last op, so the last three arguments (see `ops`).
    let args = plan.payloads.iter_mut().find(|p| p.name == "bwrap-args")?;
    let fields: Vec<&[u8]> = args.bytes.strip_suffix(&[0])?.split(|&b| b == 0).collect();
    let [.., bind, _src, dest] = fields.as_slice() else { return None };
    if *bind != b"--ro-bind" || *dest != crate::SUPERVISOR_PATH.as_bytes() {
        return None;
    }
    let kept = fields.len() - 3;
    let mut bytes = Vec::with_capacity(args.bytes.len());
    for arg in fields[..kept].iter().copied().chain([
        b"--ro-bind".as_slice(),
        supervisor.as_os_str().as_encoded_bytes(),
        dest,
    ]) {
        bytes.extend_from_slice(arg);
        bytes.push(0);
    }
    args.bytes = bytes;
    Some(plan)
}

/// The last three arguments of a plan's bwrap setup, for tests.
#[cfg(test)]
fn last_op(plan: &SpawnPlan) -> Vec<&std::ffi::OsStr> {
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
    all[all.len().saturating_sub(3)..].to_vec()
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
        let bytes = encode(&plain()).unwrap();
        expect_test::expect![[r#"
            "paddock-exec-payload\01.2.3\0/work/p\05\06\0-\00\0sh\03\0sh\0-c\0echo é\01\0PATH=/usr/bin:/bin\0"
        "#]]
        .assert_debug_eq(&String::from_utf8(bytes).unwrap());
        let inner = vec![
            crate::payload::InnerMount {
                path: Bytes("/work/p/.git".into()),
                read_only: false,
                mask: false,
            },
            crate::payload::InnerMount {
                path: Bytes("/work/p/.bashrc".into()),
                read_only: true,
                mask: true,
            },
        ];
        let with_inner = encode(&SupervisorPayload { inner_mounts: inner, ..plain() }).unwrap();
        assert!(
            String::from_utf8(with_inner)
                .unwrap()
                .contains(concat!("\0-\0", "2\0w/work/p/.git\0m/work/p/.bashrc\0sh\0")),
            "each inner mount after the count, its kind byte first"
        );
        let no_channel = encode(&SupervisorPayload { signal_fd: None, ..plain() }).unwrap();
        assert!(String::from_utf8(no_channel).unwrap().contains(concat!("\0-\0-\0", "0\0sh\0")));
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
            assert_eq!(encode(&p), None, "{p:?}");
        }
    }

    #[test]
    fn an_untraced_plan_binds_the_supervisor_without_libc_in_the_same_place() {
        let plan = plan_of(false);
        let exe = AbsPathBuf::new_lexical("/opt/paddock/paddock-supervisor-nolibc").unwrap();
        let light = without_libc(&plan, &exe).unwrap();
        assert_eq!(
            last_op(&light),
            [
                OsStr::new("--ro-bind"),
                OsStr::new("/opt/paddock/paddock-supervisor-nolibc"),
                OsStr::new(crate::SUPERVISOR_PATH)
            ]
        );
        // Everything before the supervisor's bind is the same, and so are the argv, the
        // filter and the signal channel.
        let before = |p: &SpawnPlan| {
            let a = &p.payloads.iter().find(|p| p.name == "bwrap-args").unwrap().bytes;
            let cut = a[..a.len() - 1].iter().rposition(|&b| b == 0).unwrap();
            let cut = a[..cut].iter().rposition(|&b| b == 0).unwrap();
            a[..cut].to_vec()
        };
        assert_eq!(before(&light), before(&plan));
        assert_eq!(light.argv, plan.argv);
        assert_eq!(light.signal_fd, plan.signal_fd);
        let bpf = |p: &SpawnPlan| {
            p.payloads.iter().find(|p| p.name == "seccomp-bpf").map(|p| (p.fd, p.bytes.clone()))
        };
        assert_eq!(bpf(&light), bpf(&plan));
        let sup = light.payloads.iter().find(|p| p.name == "supervisor").unwrap();
        assert!(sup.bytes.starts_with(b"paddock-exec-payload\0"));

        // An observed plan needs the full supervisor.
        assert!(without_libc(&plan_of(true), &exe).is_none());
    }
}
