//! The filter applied for real, in a forked child (never in the test process): every blocked
//! call gets its errno, and ordinary calls still work.
//!
//! The child allocates nothing after `fork` (the test process has other threads): it makes
//! raw syscalls and reports the index of the first check that failed as its exit code.

#![allow(clippy::unwrap_used)] // test code: a failed setup step is a failed test

use crate::seccomp::{self, FilterOptions};

const AF_UNIX: i64 = 1;
const AF_INET: i64 = 2;
const AF_NETLINK: i64 = 16;
const AF_VSOCK: i64 = 40;
const AF_ALG: i64 = 38;
const SOCK_STREAM: i64 = 1;
const SOCK_DGRAM: i64 = 2;
const SOCK_SEQPACKET: i64 = 5;
const SOCK_CLOEXEC: i64 = 0o2000000;
const TIOCSTI: i64 = 0x5412;
const TIOCLINUX: i64 = 0x541C;
const CLONE_NEWUSER: i64 = 0x1000_0000;

/// One call and the errno it must give (0: it must succeed).
struct Probe {
    name: &'static str,
    nr: i64,
    args: [i64; 6],
    errno: i32,
}

fn probes(unix: bool) -> Vec<Probe> {
    let p = |name, nr, args, errno| Probe { name, nr, args, errno };
    let unix_errno = if unix { 0 } else { libc::EPERM };
    // A buffer the io_uring and socketpair calls may write into, leaked so that it outlives
    // the child (it is only touched by the kernel).
    let buf = Box::leak(Box::new([0i64; 32])).as_mut_ptr() as i64;
    vec![
        p("getpid", libc::SYS_getpid, [0; 6], 0),
        p("socket(AF_INET)", libc::SYS_socket, [AF_INET, SOCK_STREAM, 0, 0, 0, 0], 0),
        p("socket(AF_UNIX)", libc::SYS_socket, [AF_UNIX, SOCK_STREAM, 0, 0, 0, 0], unix_errno),
        p(
            "socket(AF_UNIX|hi)",
            libc::SYS_socket,
            [AF_UNIX | 1 << 32, SOCK_STREAM, 0, 0, 0, 0],
            unix_errno,
        ),
        p("socket(AF_VSOCK)", libc::SYS_socket, [AF_VSOCK, SOCK_STREAM, 0, 0, 0, 0], libc::EPERM),
        p("socket(AF_ALG)", libc::SYS_socket, [AF_ALG, 5, 0, 0, 0, 0], libc::EPERM),
        p("socket(AF_NETLINK, ROUTE)", libc::SYS_socket, [AF_NETLINK, SOCK_DGRAM, 0, 0, 0, 0], 0),
        p(
            "socket(AF_NETLINK, SOCK_DIAG)",
            libc::SYS_socket,
            [AF_NETLINK, SOCK_DGRAM, 4, 0, 0, 0],
            libc::EPERM,
        ),
        p(
            "socketpair(UNIX, STREAM)",
            libc::SYS_socketpair,
            [AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, buf, 0, 0],
            0,
        ),
        p(
            "socketpair(UNIX, DGRAM)",
            libc::SYS_socketpair,
            [AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, buf, 0, 0],
            unix_errno,
        ),
        p(
            "socketpair(UNIX, SEQPACKET)",
            libc::SYS_socketpair,
            [AF_UNIX, SOCK_SEQPACKET, 0, buf, 0, 0],
            // Allowed: a connected seqpacket pair cannot address anyone but its peer, and
            // Rust's process spawning needs it.
            0,
        ),
        p("io_uring_setup", libc::SYS_io_uring_setup, [1, buf, 0, 0, 0, 0], libc::EPERM),
        p("io_uring_enter", libc::SYS_io_uring_enter, [-1, 0, 0, 0, 0, 0], libc::EPERM),
        p("ioctl(TIOCSTI)", libc::SYS_ioctl, [0, TIOCSTI, buf, 0, 0, 0], libc::EPERM),
        p(
            "ioctl(TIOCSTI|1<<32)",
            libc::SYS_ioctl,
            [0, TIOCSTI | 1 << 32, buf, 0, 0, 0],
            libc::EPERM,
        ),
        p("ioctl(TIOCLINUX)", libc::SYS_ioctl, [0, TIOCLINUX, buf, 0, 0, 0], libc::EPERM),
        p("keyctl", libc::SYS_keyctl, [0, 0, 0, 0, 0, 0], libc::EPERM),
        p("add_key", libc::SYS_add_key, [0; 6], libc::EPERM),
        p("request_key", libc::SYS_request_key, [0; 6], libc::EPERM),
        p("bpf", libc::SYS_bpf, [0; 6], libc::EPERM),
        p("perf_event_open", libc::SYS_perf_event_open, [0; 6], libc::EPERM),
        p("userfaultfd", libc::SYS_userfaultfd, [0; 6], libc::EPERM),
        p("fsopen", libc::SYS_fsopen, [0; 6], libc::EPERM),
        p("open_tree", libc::SYS_open_tree, [0; 6], libc::EPERM),
        p("move_mount", libc::SYS_move_mount, [0; 6], libc::EPERM),
        p("mount_setattr", libc::SYS_mount_setattr, [0; 6], libc::EPERM),
        p("mount", libc::SYS_mount, [0; 6], libc::EPERM),
        p("umount2", libc::SYS_umount2, [0; 6], libc::EPERM),
        p("pivot_root", libc::SYS_pivot_root, [0; 6], libc::EPERM),
        p("unshare(CLONE_NEWUSER)", libc::SYS_unshare, [CLONE_NEWUSER, 0, 0, 0, 0, 0], libc::EPERM),
        p("setns", libc::SYS_setns, [-1, 0, 0, 0, 0, 0], libc::EPERM),
        p(
            "clone(CLONE_NEWUSER)",
            libc::SYS_clone,
            [CLONE_NEWUSER | i64::from(libc::SIGCHLD), 0, 0, 0, 0, 0],
            libc::EPERM,
        ),
        p("clone3", libc::SYS_clone3, [0; 6], libc::ENOSYS),
        p("init_module", libc::SYS_init_module, [0; 6], libc::EPERM),
        p("kexec_load", libc::SYS_kexec_load, [0; 6], libc::EPERM),
        p("x32 getpid", 0x4000_0000 + 39, [0; 6], libc::EPERM),
        p("nr 467 (unreviewed)", 467, [0; 6], libc::ENOSYS),
        p("getppid", libc::SYS_getppid, [0; 6], 0),
    ]
}

/// Applies the filter in a forked child and returns `None` if every probe behaved, or the
/// failing probe's name and what it got.
fn run_in_child(unix: bool) -> Option<String> {
    let bpf = seccomp::compile(&seccomp::rules(FilterOptions {
        unix_sockets: unix,
        unix_sockets_notified: false,
        unix_socket_paths: false,
    }))
    .unwrap();
    let probes = probes(unix);
    let prog: Vec<seccompiler::sock_filter> = bpf
        .chunks_exact(8)
        .map(|c| seccompiler::sock_filter {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).unwrap(),
        filter: prog.as_ptr().cast_mut().cast(),
    };
    let mut pipe = [0i32; 2];
    // SAFETY: a valid two-int array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the child makes raw syscalls only and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: raw syscalls with valid arguments; nothing is allocated.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &fprog as *const _,
                ) != 0
            {
                libc::_exit(200);
            }
            for (i, p) in probes.iter().enumerate() {
                let a = p.args;
                let rc = libc::syscall(p.nr, a[0], a[1], a[2], a[3], a[4], a[5]);
                if rc == 0 && p.nr == libc::SYS_clone {
                    libc::_exit(0); // a clone that got through: its child leaves at once
                }
                let errno = if rc < 0 { *libc::__errno_location() } else { 0 };
                if errno != p.errno {
                    let report = [u8::try_from(errno).unwrap_or(255)];
                    libc::write(pipe[1], report.as_ptr().cast(), 1);
                    libc::_exit(i32::try_from(i + 1).unwrap_or(255));
                }
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end, reading into a valid buffer, waiting.
    let (status, got) = unsafe {
        libc::close(pipe[1]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        let mut b = [0u8; 1];
        let n = libc::read(pipe[0], b.as_mut_ptr().cast(), 1);
        libc::close(pipe[0]);
        (status, if n == 1 { i32::from(b[0]) } else { -1 })
    };
    assert!(libc::WIFEXITED(status), "child died: status {status:#x}");
    match libc::WEXITSTATUS(status) {
        0 => None,
        200 => Some("the filter could not be applied".to_owned()),
        i => {
            let p = &probes[usize::try_from(i - 1).unwrap()];
            Some(format!("{}: expected errno {}, got {}", p.name, p.errno, got))
        }
    }
}

#[test]
fn blocked_calls_fail_and_ordinary_calls_work_without_unix_sockets() {
    assert_eq!(run_in_child(false), None);
}

#[test]
fn unix_sockets_granted_allows_af_unix_but_nothing_else() {
    assert_eq!(run_in_child(true), None);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_foreign_arch_call_kills_the_process() {
    let bpf = seccomp::compile(&seccomp::rules(FilterOptions {
        unix_sockets: false,
        unix_sockets_notified: false,
        unix_socket_paths: false,
    }))
    .unwrap();
    let prog: Vec<seccompiler::sock_filter> = bpf
        .chunks_exact(8)
        .map(|c| seccompiler::sock_filter {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    // SAFETY: the child applies the filter and makes one i386 `socket(AF_UNIX)` through
    // `int 0x80` (eax 359), which the arch check must kill.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above; nothing is allocated.
        unsafe {
            if seccompiler::apply_filter(&prog).is_err() {
                libc::_exit(200);
            }
            let mut ret: i64 = 359;
            // rbx is reserved by LLVM: swap it in and out around the trap.
            std::arch::asm!(
                "xchg {b}, rbx",
                "int 0x80",
                "xchg {b}, rbx",
                b = inout(reg) 1i64 => _,
                inout("rax") ret,
                in("rcx") 1i64,
                in("rdx") 0i64,
            );
            libc::_exit(if ret >= 0 { 1 } else { 2 });
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS,
        "status {status:#x}"
    );
}

/// What a BPF program answers for `(nr, args)` on x86_64 (or `arch`), run by a small
/// interpreter of the instructions the compiled filter uses. Unknown instructions panic.
fn emulate(program: &[u8], arch: u32, nr: u32, args: &[u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_le_bytes());
    data[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    let ins: Vec<(u16, u8, u8, u32)> = program
        .chunks_exact(8)
        .map(|c| {
            (
                u16::from_le_bytes([c[0], c[1]]),
                c[2],
                c[3],
                u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let (code, jt, jf, k) = ins[pc];
        let branch = |taken: bool| pc + 1 + usize::from(if taken { jt } else { jf });
        pc = match code {
            0x20 => {
                let at = k as usize;
                acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                pc + 1
            }
            0x54 => {
                acc &= k;
                pc + 1
            }
            0x05 => pc + 1 + k as usize,
            0x15 => branch(acc == k),
            0x25 => branch(acc > k),
            0x35 => branch(acc >= k),
            0x45 => branch(acc & k != 0),
            0x06 => return k,
            other => panic!("instruction {other:#x} at {pc} is not emulated"),
        };
    }
}

// The emulated data layout is x86_64's: elsewhere the test does not exist (rather than pass).
#[cfg(target_arch = "x86_64")]
#[test]
fn the_compiled_filter_answers_every_syscall_number_as_its_rules_say() {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const ALLOW: u32 = 0x7fff_0000;
    let errno = |e: i32| 0x0005_0000 | e as u32;
    for unix_sockets in [false, true] {
        let opts =
            FilterOptions { unix_sockets, unix_sockets_notified: false, unix_socket_paths: false };
        let rules = seccomp::rules(opts);
        let program = seccomp::compile(&rules).unwrap();
        // The arguments each rule compares with, and values around them, with and without
        // high bits set (compared as 32 bits: SEC-02).
        let mut values: Vec<u64> = vec![0, 1, 2, 5, 10, 16, 0x5412, 0x541c, 0xffff_ffff];
        for rule in &rules {
            for cond in rule.when.iter().flatten() {
                values.extend([cond.value, cond.value ^ 1, cond.value | 1 << 32]);
                if let seccomp::CondOp::MaskedEq(mask) = cond.op {
                    values.extend([mask, !mask & 0xffff_ffff]);
                }
            }
        }
        let named: Vec<(i64, &str)> = rules
            .iter()
            .filter_map(|r| seccomp::syscall_nr(r.name).map(|nr| (nr, r.name)))
            .collect();
        for nr in 0..=seccomp::MAX_REVIEWED_NR + 3 {
            let name = named.iter().find(|(n, _)| *n == i64::from(nr)).map(|(_, name)| *name);
            for (i, v) in values.iter().enumerate() {
                // Each value in each argument position, the others varied too.
                for pos in 0..3 {
                    let mut args = [values[(i + 1) % values.len()]; 6];
                    args[pos] = *v;
                    let got = emulate(&program, AUDIT_ARCH_X86_64, nr, &args);
                    let want = if nr > seccomp::MAX_REVIEWED_NR {
                        errno(libc::ENOSYS)
                    } else {
                        match name.and_then(|n| crate::seccomp_query::verdict(&rules, n, &args)) {
                            None => ALLOW,
                            Some(seccomp::Action::Eperm) => errno(libc::EPERM),
                            Some(seccomp::Action::Enosys) => errno(libc::ENOSYS),
                        }
                    };
                    assert_eq!(
                        got, want,
                        "nr {nr} ({name:?}) args {args:x?}, unix sockets {unix_sockets}"
                    );
                }
            }
        }
        // x32 numbers are refused, a foreign architecture is killed.
        assert_eq!(emulate(&program, AUDIT_ARCH_X86_64, 0x4000_0000, &[0; 6]), errno(libc::EPERM));
        assert_eq!(emulate(&program, 0x4000_0003, 0, &[0; 6]), 0x8000_0000);
    }
}
