//! The seccomp filter: its rules as data (pure, snapshot-tested everywhere) and their
//! compilation to a BPF program with `seccompiler` (Linux).
//!
//! The filter is a deny-list over a default of "allow": a filter cannot see paths or socket
//! addresses (pointers), so the mounts and namespaces are the walls for those, and the filter
//! closes the doors that bypass them. Every refusal is EPERM, except `clone3` (ENOSYS, so that
//! libc falls back to `clone`, whose flags the filter can read) and syscall numbers above
//! [`MAX_REVIEWED_NR`] (ENOSYS: a syscall newer than this list is refused, not allowed).
//!
//! Decisions, with the case that forces each:
//! - `socket`: only `AF_INET`, `AF_INET6`, `AF_NETLINK` with `NETLINK_ROUTE` (getaddrinfo and
//!   `ip` need it), and `AF_UNIX` when unix sockets are granted (UNX-01, NET-16: no VSOCK,
//!   ALG, PACKET, ...).
//! - `socketpair(AF_UNIX, SOCK_DGRAM)` is refused when unix sockets are not granted: a
//!   datagram pair can `sendto` any pathname socket (UNX-02). Stream and seqpacket pairs
//!   cannot: `connect` on a connected socket is EISCONN, and a seqpacket `sendmsg` ignores the
//!   address and sends to the peer only. Both are needed by ordinary programs (pipelines, and
//!   Rust's `std::process::Command`, which passes a pidfd over a seqpacket pair, so `cargo`
//!   cannot build anything without it). When unix sockets are granted,
//!   `socket(AF_UNIX, SOCK_DGRAM)` is allowed anyway, so refusing the pair adds nothing.
//!   When only paths are granted, `socket(AF_UNIX)` is allowed for streams and seqpackets
//!   alone and the supervisor decides each `connect` ([`crate::notify::unix`]).
//! - `ioctl(TIOCSTI)`, `ioctl(TIOCLINUX)`: the command is compared as 32 bits (`Dword`), so
//!   `TIOCSTI | 1 << 32` matches too (TTY-01/03/04, SEC-02).
//! - `io_uring_*`: io_uring performs socket/open/connect without the filtered syscalls (SEC-01).
//! - keyring calls (PRC-07), `bpf`, `perf_event_open`, `userfaultfd` (kernel attack surface).
//! - the mount API old and new, `pivot_root`, `chroot` (PRC-08, Flatpak CVE-2021-41133),
//!   `unshare`, `setns`, and `clone` with any namespace flag (PRC-05, also where bwrap cannot
//!   `--disable-userns`).
//! - module and kexec calls.
//! - `ptrace` and `process_vm_*` stay allowed: every process the task can see is its own and
//!   runs under this same filter; the supervisor (pid 1) is non-dumpable, bwrap's monitor is
//!   outside the pid namespace, and kernels since 4.8 re-run the filter after a tracer changes
//!   a syscall. Debuggers and strace keep working inside.
//! - A foreign-architecture call (i386 `int 0x80`) kills the process: seccompiler's arch check
//!   (SEC-03). An x32 number (`nr >= 0x40000000`) gets EPERM from an explicit prelude, which
//!   seccompiler lacks (SEC-05, seccompiler#74).

use std::fmt::Write as _;

/// The highest syscall number this list was reviewed against (`removexattrat`, the same on
/// x86_64 and aarch64 since numbers are shared from 424 on). Anything above gets ENOSYS, so
/// a new syscall (such as `open_tree_attr`, 467) is refused until reviewed.
pub const MAX_REVIEWED_NR: u32 = 466;

/// The x32 ABI bit.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_NETLINK: u64 = 16;
const NETLINK_ROUTE: u64 = 0;
const SOCK_DGRAM: u64 = 2;
const SOCK_RAW: u64 = 3;
const SOCK_TYPE_MASK: u64 = 0xf;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const CLONE_NAMESPACE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", 0x0002_0000),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", 0x0800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
];

/// How a matching call is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Fails with EPERM.
    Eperm,
    /// Fails with ENOSYS.
    Enosys,
}

/// A comparison of one argument, always on its low 32 bits (`Dword`): every argument the
/// filter reads is an `int` or a 32-bit flag word, and comparing 64 bits would let high
/// garbage bits slip past (SEC-02).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cond {
    /// Argument index (0-5).
    pub arg: u8,
    /// The comparison.
    pub op: CondOp,
    /// The value compared with.
    pub value: u64,
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CondOp {
    /// `arg == value`.
    Eq,
    /// `arg != value`.
    Ne,
    /// `arg & mask == value`.
    MaskedEq(u64),
}

/// The rule for one syscall: it matches when any of `when` matches (each an AND of
/// conditions), or always when `when` is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallRule {
    /// The syscall's name.
    pub name: &'static str,
    /// What a match gets.
    pub action: Action,
    /// Alternatives; each is a conjunction.
    pub when: Vec<Vec<Cond>>,
}

/// What the filter depends on in the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterOptions {
    /// `socket(AF_UNIX)` and datagram socket pairs are allowed.
    pub unix_sockets: bool,
    /// `socket(AF_UNIX)` is left to the supervisor's notification filter (`--itemize
    /// observe`), which records the attempt and refuses it with `EPERM`; the supervisor
    /// refuses to start the task if it cannot install that filter.
    pub unix_sockets_notified: bool,
    /// `allow.unix-sockets` is a list of paths: `socket(AF_UNIX)` of the stream and seqpacket
    /// kinds is allowed, and the supervisor's notification filter decides every `connect`.
    /// Datagram ones stay refused: a datagram socket reaches a path with `sendto`/`sendmsg`,
    /// whose address (or `msghdr`) the task could rewrite between a check and the kernel's
    /// read; stream and seqpacket sockets ignore a send's address.
    pub unix_socket_paths: bool,
}

fn eq(arg: u8, value: u64) -> Cond {
    Cond { arg, op: CondOp::Eq, value }
}

fn ne(arg: u8, value: u64) -> Cond {
    Cond { arg, op: CondOp::Ne, value }
}

fn always(name: &'static str) -> SyscallRule {
    SyscallRule { name, action: Action::Eperm, when: Vec::new() }
}

/// The filter's rules for a policy, in a fixed order.
pub fn rules(opts: FilterOptions) -> Vec<SyscallRule> {
    let mut out = Vec::new();

    let mut families = vec![ne(0, AF_INET), ne(0, AF_INET6), ne(0, AF_NETLINK)];
    if opts.unix_sockets || opts.unix_sockets_notified || opts.unix_socket_paths {
        families.push(ne(0, AF_UNIX));
    }
    let kind = |t| Cond { arg: 1, op: CondOp::MaskedEq(SOCK_TYPE_MASK), value: t };
    let mut socket_when = vec![families, vec![eq(0, AF_NETLINK), ne(2, NETLINK_ROUTE)]];
    if opts.unix_socket_paths && !opts.unix_sockets {
        // `SOCK_RAW` is a datagram socket to `AF_UNIX`.
        socket_when.push(vec![eq(0, AF_UNIX), kind(SOCK_DGRAM)]);
        socket_when.push(vec![eq(0, AF_UNIX), kind(SOCK_RAW)]);
    }
    out.push(SyscallRule { name: "socket", action: Action::Eperm, when: socket_when });
    if !opts.unix_sockets {
        out.push(SyscallRule {
            name: "socketpair",
            action: Action::Eperm,
            when: vec![vec![eq(0, AF_UNIX), kind(SOCK_DGRAM)]],
        });
    }
    out.push(SyscallRule {
        name: "ioctl",
        action: Action::Eperm,
        when: vec![vec![eq(1, TIOCSTI)], vec![eq(1, TIOCLINUX)]],
    });
    out.push(SyscallRule {
        name: "clone",
        action: Action::Eperm,
        when: CLONE_NAMESPACE_FLAGS
            .iter()
            .map(|(_, flag)| vec![Cond { arg: 0, op: CondOp::MaskedEq(*flag), value: *flag }])
            .collect(),
    });
    out.push(SyscallRule { name: "clone3", action: Action::Enosys, when: Vec::new() });
    for name in [
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "unshare",
        "setns",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
    ] {
        out.push(always(name));
    }
    out
}

/// The rules as text, one syscall a line, for snapshots and `paddock plan`.
pub fn render(rules: &[SyscallRule]) -> String {
    let mut out = String::new();
    let _ =
        writeln!(out, "prelude: foreign arch -> kill; nr >= {X32_SYSCALL_BIT:#x} (x32) -> EPERM");
    let _ = writeln!(out, "prelude: nr > {MAX_REVIEWED_NR} -> ENOSYS");
    for rule in rules {
        let action = match rule.action {
            Action::Eperm => "EPERM",
            Action::Enosys => "ENOSYS",
        };
        if rule.when.is_empty() {
            let _ = writeln!(out, "{}: {action}", rule.name);
            continue;
        }
        let alts: Vec<String> = rule
            .when
            .iter()
            .map(|conj| {
                let parts: Vec<String> = conj
                    .iter()
                    .map(|c| match c.op {
                        CondOp::Eq => format!("arg{} == {:#x}", c.arg, c.value),
                        CondOp::Ne => format!("arg{} != {:#x}", c.arg, c.value),
                        CondOp::MaskedEq(m) => format!("arg{} & {m:#x} == {:#x}", c.arg, c.value),
                    })
                    .collect();
                format!("({})", parts.join(" && "))
            })
            .collect();
        let _ = writeln!(out, "{}: {action} when {}", rule.name, alts.join(" || "));
    }
    out.push_str("default: allow\n");
    out
}

#[cfg(target_os = "linux")]
pub use linux::{apply, compile, syscall_nr};

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch, sock_filter,
    };

    use super::{Action, CondOp, MAX_REVIEWED_NR, SyscallRule, X32_SYSCALL_BIT};
    use crate::error::Error;

    /// The number of a syscall on this architecture, or `None` if it has none.
    pub fn syscall_nr(name: &str) -> Option<i64> {
        let nr = match name {
            "socket" => libc::SYS_socket,
            "socketpair" => libc::SYS_socketpair,
            "ioctl" => libc::SYS_ioctl,
            "clone" => libc::SYS_clone,
            "clone3" => libc::SYS_clone3,
            "io_uring_setup" => libc::SYS_io_uring_setup,
            "io_uring_enter" => libc::SYS_io_uring_enter,
            "io_uring_register" => libc::SYS_io_uring_register,
            "keyctl" => libc::SYS_keyctl,
            "add_key" => libc::SYS_add_key,
            "request_key" => libc::SYS_request_key,
            "bpf" => libc::SYS_bpf,
            "perf_event_open" => libc::SYS_perf_event_open,
            "userfaultfd" => libc::SYS_userfaultfd,
            "mount" => libc::SYS_mount,
            "umount2" => libc::SYS_umount2,
            "pivot_root" => libc::SYS_pivot_root,
            "chroot" => libc::SYS_chroot,
            "fsopen" => libc::SYS_fsopen,
            "fsconfig" => libc::SYS_fsconfig,
            "fsmount" => libc::SYS_fsmount,
            "fspick" => libc::SYS_fspick,
            "move_mount" => libc::SYS_move_mount,
            "open_tree" => libc::SYS_open_tree,
            "mount_setattr" => libc::SYS_mount_setattr,
            "unshare" => libc::SYS_unshare,
            "setns" => libc::SYS_setns,
            "kexec_load" => libc::SYS_kexec_load,
            "kexec_file_load" => libc::SYS_kexec_file_load,
            "init_module" => libc::SYS_init_module,
            "finit_module" => libc::SYS_finit_module,
            "delete_module" => libc::SYS_delete_module,
            _ => return None,
        };
        Some(nr)
    }

    fn arch() -> Result<TargetArch, Error> {
        TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|e| Error::Seccomp { syscall: "filter".to_owned(), message: e.to_string() })
    }

    /// seccompiler's program for the rules of `action`, and the syscall numbers it has rules
    /// for (every other number it lets through).
    fn program(rules: &[SyscallRule], action: Action) -> Result<(BpfProgram, Vec<u32>), Error> {
        let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for rule in rules.iter().filter(|r| r.action == action) {
            let err = |e: seccompiler::BackendError| Error::Seccomp {
                syscall: rule.name.to_owned(),
                message: e.to_string(),
            };
            let Some(nr) = syscall_nr(rule.name) else { continue };
            let mut chain = Vec::new();
            for conj in &rule.when {
                let conds = conj
                    .iter()
                    .map(|c| {
                        let op = match c.op {
                            CondOp::Eq => SeccompCmpOp::Eq,
                            CondOp::Ne => SeccompCmpOp::Ne,
                            CondOp::MaskedEq(m) => SeccompCmpOp::MaskedEq(m),
                        };
                        SeccompCondition::new(c.arg, SeccompCmpArgLen::Dword, op, c.value)
                            .map_err(err)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                chain.push(SeccompRule::new(conds).map_err(err)?);
            }
            map.insert(nr, chain);
        }
        let nrs: Vec<u32> = map.keys().filter_map(|nr| u32::try_from(*nr).ok()).collect();
        let errno = match action {
            Action::Eperm => libc::EPERM,
            Action::Enosys => libc::ENOSYS,
        };
        let filter = SeccompFilter::new(
            map,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch()?,
        )
        .map_err(|e| Error::Seccomp { syscall: "filter".to_owned(), message: e.to_string() })?;
        let program = BpfProgram::try_from(filter)
            .map_err(|e| Error::Seccomp { syscall: "filter".to_owned(), message: e.to_string() })?;
        Ok((program, nrs))
    }

    /// `BPF_LD | BPF_W | BPF_ABS` (0x00 | 0x00 | 0x20).
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
    const BPF_JMP_JGT_K: u16 = 0x05 | 0x20;
    const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
    const BPF_RET_K: u16 = 0x06;
    /// `BPF_JMP | BPF_JA`: an unconditional jump by `k`.
    const BPF_JA: u16 = 0x05;
    /// `SECCOMP_RET_ALLOW`.
    const RET_ALLOW: u32 = 0x7fff_0000;
    /// A `ja` whose offset `dispatch` fills in: to the end of the dispatch.
    const TO_PROGRAM: u32 = u32::MAX;
    /// `SECCOMP_RET_ERRNO`.
    const RET_ERRNO: u32 = 0x0005_0000;
    /// The length of seccompiler's arch check: load arch, compare, kill.
    const ARCH_CHECK_LEN: usize = 3;

    fn stmt(code: u16, k: u32) -> sock_filter {
        sock_filter { code, jt: 0, jf: 0, k }
    }

    fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
        sock_filter { code, jt, jf, k }
    }

    /// A binary search for the syscall number (in the accumulator) among `nrs` (sorted):
    /// one of them jumps past the emitted code, where seccompiler's program starts; any other
    /// number is allowed on the spot.
    ///
    /// seccompiler tests the numbers one after the other, so an allowed call walked the whole
    /// chain, and so did the kernel: when a filter is attached it runs it once per syscall
    /// number to cache which ones are always allowed (Linux 5.11), which took 115 us per task
    /// for 231 instructions walked linearly (measured: the attach cost grows with the
    /// instructions a number walks through). With the search, an allowed number takes about
    /// six comparisons.
    fn dispatch(nrs: &[u32]) -> Result<Vec<sock_filter>, Error> {
        let mut out = Vec::new();
        emit_search(nrs, &mut out)?;
        let len = out.len();
        for (pc, ins) in out.iter_mut().enumerate() {
            if ins.code == BPF_JA && ins.k == TO_PROGRAM {
                ins.k = jump_offset(len - pc - 1)?;
            }
        }
        Ok(out)
    }

    /// A jump offset as BPF stores it; one that does not fit fails the compilation (a
    /// wrong offset would let a filtered call through).
    fn jump_offset<T: TryFrom<usize>>(by: usize) -> Result<T, Error> {
        T::try_from(by).map_err(|_| Error::Seccomp {
            syscall: "filter".to_owned(),
            message: format!("a jump of {by} in the syscall search does not fit BPF's offsets"),
        })
    }

    fn emit_search(nrs: &[u32], out: &mut Vec<sock_filter>) -> Result<(), Error> {
        if nrs.len() <= 4 {
            // jeq nr_i -> the `ja` after the `ret`; none matched: allowed.
            for (i, nr) in nrs.iter().enumerate() {
                out.push(jump(BPF_JMP_JEQ_K, *nr, jump_offset(nrs.len() - i)?, 0));
            }
            out.push(stmt(BPF_RET_K, RET_ALLOW));
            out.push(stmt(BPF_JA, TO_PROGRAM));
            return Ok(());
        }
        let mid = nrs.len() / 2;
        let at = out.len();
        out.push(jump(BPF_JMP_JGE_K, nrs[mid], 0, 0));
        emit_search(&nrs[..mid], out)?;
        out[at].jt = jump_offset(out.len() - at - 1)?;
        emit_search(&nrs[mid..], out)
    }

    /// Compiles the rules to a BPF program, as raw little-endian `sock_filter` bytes.
    ///
    /// Layout: seccompiler's arch check (foreign arch: kill), then this crate's prelude
    /// (x32: EPERM; above [`MAX_REVIEWED_NR`]: ENOSYS; the ENOSYS rules, i.e. `clone3`), then
    /// a binary search that allows every number seccompiler has no rule for (`dispatch`),
    /// then seccompiler's EPERM program after its own arch check. BPF jumps are relative and only
    /// go forward, so splicing whole programs keeps every jump inside its own part.
    pub fn compile(rules: &[SyscallRule]) -> Result<Vec<u8>, Error> {
        let (eperm, eperm_nrs) = program(rules, Action::Eperm)?;
        let arch_check = &eperm[..ARCH_CHECK_LEN.min(eperm.len())];
        let enosys_nrs: Vec<u32> = rules
            .iter()
            .filter(|r| r.action == Action::Enosys && r.when.is_empty())
            .filter_map(|r| syscall_nr(r.name))
            .filter_map(|nr| u32::try_from(nr).ok())
            .collect();
        if rules.iter().any(|r| r.action == Action::Enosys && !r.when.is_empty()) {
            return Err(Error::Seccomp {
                syscall: "filter".to_owned(),
                message: "conditional ENOSYS rules are not supported".to_owned(),
            });
        }

        // Prelude, with n = enosys_nrs.len():
        //   0      ld nr
        //   1      jge X32 -> EPERM
        //   2      jgt MAX -> ENOSYS
        //   3..3+n jeq nr_i -> ENOSYS
        //   3+n    ja over the two returns (jeq 0 == 0 style: an unconditional skip)
        //   4+n    ret ENOSYS
        //   5+n    ret EPERM
        //   6+n    the search (`dispatch`), then seccompiler's program, which reloads nr itself
        let n = enosys_nrs.len();
        let offset = |from: usize, to: usize| u8::try_from(to - from - 1).unwrap_or(u8::MAX);
        let ret_enosys = 4 + n;
        let ret_eperm = 5 + n;
        let cont = 6 + n;
        let mut prelude = vec![stmt(BPF_LD_W_ABS, 0)];
        prelude.push(jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, offset(1, ret_eperm), 0));
        prelude.push(jump(BPF_JMP_JGT_K, MAX_REVIEWED_NR, offset(2, ret_enosys), 0));
        for (i, nr) in enosys_nrs.iter().enumerate() {
            prelude.push(jump(BPF_JMP_JEQ_K, *nr, offset(3 + i, ret_enosys), 0));
        }
        // `ja` (BPF_JMP | BPF_JA = 0x05) takes its offset in k.
        prelude.push(stmt(0x05, u32::try_from(cont - (3 + n) - 1).unwrap_or(0)));
        prelude.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
        prelude.push(stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32));

        let search = dispatch(&eperm_nrs)?;
        let mut all: Vec<sock_filter> =
            Vec::with_capacity(eperm.len() + prelude.len() + search.len());
        all.extend_from_slice(arch_check);
        all.extend(prelude);
        all.extend(search);
        all.extend_from_slice(&eperm[arch_check.len()..]);
        if all.len() >= 4096 {
            return Err(Error::Seccomp {
                syscall: "filter".to_owned(),
                message: format!("{} instructions", all.len()),
            });
        }
        let mut bytes = Vec::with_capacity(all.len() * 8);
        for ins in &all {
            bytes.extend_from_slice(&ins.code.to_le_bytes());
            bytes.push(ins.jt);
            bytes.push(ins.jf);
            bytes.extend_from_slice(&ins.k.to_le_bytes());
        }
        Ok(bytes)
    }

    /// Sets no_new_privs and loads the program (bytes from [`compile`]) into the calling
    /// thread. Fails closed: any error means the caller must not run the task (SEC-08).
    pub fn apply(bytes: &[u8]) -> Result<(), Error> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
            return Err(Error::Apply {
                message: format!("a BPF program of {} bytes is malformed", bytes.len()),
            });
        }
        let prog: Vec<sock_filter> = bytes
            .chunks_exact(8)
            .map(|c| sock_filter {
                code: u16::from_le_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        seccompiler::apply_filter(&prog).map_err(|e| Error::Apply { message: e.to_string() })
    }
}
