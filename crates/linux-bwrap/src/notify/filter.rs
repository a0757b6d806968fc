//! The notification filter: which calls are sent to the supervisor, as a hand-built
//! classic-BPF program, and its installation with a listener.
//!
//! The program is a list of `nr == N` tests, each followed by its body; its layout:
//!
//! ```text
//!   ld arch; jeq NATIVE ? next : ret ALLOW     (foreign arches: see below)
//!   ld nr
//!   jeq openat ? body : skip body
//!     ld args[2] (low 32 bits); jset WRITE_FLAGS ? ret NOTIFY : ret ALLOW
//!   jeq mkdirat ? body : skip body
//!     ret NOTIFY
//!   ...
//!   ret ALLOW
//! ```
//!
//! A body that loads an argument ends in returns on both branches, so the accumulator still
//! holds `nr` wherever a test runs. Every jump is forward and short (a body is at most four
//! instructions), so the 8-bit offsets never overflow.
//!
//! Foreign architectures (i386 `int 0x80`) and x32 numbers are allowed *here*: the main
//! filter, which is always installed first, kills the first and refuses the second, and the
//! kernel applies the strictest answer of all filters (kill > errno > notify > allow).
//! Arguments are compared on their low 32 bits, as the main filter does: the flags and the
//! address family are `int`s, and high garbage bits must not hide a write flag.

use crate::notify::classify::Shape;

/// The filter's options, from the supervisor payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Notify `connect` (the network is not fully on).
    pub record_connects: bool,
    /// Notify `socket(AF_UNIX)`, which the supervisor refuses.
    pub refuse_unix_sockets: bool,
    /// Unix sockets granted by path: notify `connect`, which the supervisor then makes
    /// itself ([`crate::notify::unix`]).
    pub unix_grants: bool,
}

/// The flags that make an `open` a write: access mode, create, truncate. `O_TMPFILE`
/// includes `O_DIRECTORY` and always comes with a write access mode.
pub const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

const AF_UNIX: u32 = libc::AF_UNIX as u32;

/// `AUDIT_ARCH_*` of the architecture this is built for, if its syscall table is known here
/// (x86_64; aarch64 and riscv64, which share the generic table without the legacy calls).
/// Elsewhere [`program`] is empty, installing it fails, and observe mode refuses to run.
#[cfg(target_arch = "x86_64")]
pub const NATIVE_ARCH: Option<u32> = Some(0xC000_003E);
/// `AUDIT_ARCH_*` of the architecture this is built for (see the x86_64 one).
#[cfg(target_arch = "aarch64")]
pub const NATIVE_ARCH: Option<u32> = Some(0xC000_00B7);
/// `AUDIT_ARCH_*` of the architecture this is built for (see the x86_64 one).
#[cfg(target_arch = "riscv64")]
pub const NATIVE_ARCH: Option<u32> = Some(0xC000_00F3);
/// `AUDIT_ARCH_*` of the architecture this is built for (see the x86_64 one).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub const NATIVE_ARCH: Option<u32> = None;

// Numbers shared by every architecture since 424 (libc lacks some of them).
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// One notified syscall: its number, name, and where its paths are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The number on this architecture.
    pub nr: i64,
    /// The name recorded.
    pub name: &'static str,
    /// The arguments' layout.
    pub shape: Shape,
}

const fn call(nr: i64, name: &'static str, shape: Shape) -> Call {
    Call { nr, name, shape }
}

/// `AT_FDCWD` as an argument index: "no dirfd argument, relative to the cwd".
const CWD: Option<u8> = None;

/// The notified calls of this architecture (without the optional `connect` and `socket`).
pub fn calls() -> Vec<Call> {
    use Shape::*;
    let mut v = vec![
        call(libc::SYS_openat, "openat", Open { dirfd: Some(0), path: 1, flags: Some(2) }),
        call(libc::SYS_openat2, "openat2", OpenHow { dirfd: 0, path: 1, how: 2 }),
        call(libc::SYS_mkdirat, "mkdirat", Create { dirfd: Some(0), path: 1 }),
        call(libc::SYS_mknodat, "mknodat", Create { dirfd: Some(0), path: 1 }),
        call(libc::SYS_unlinkat, "unlinkat", Remove { dirfd: Some(0), path: 1 }),
        call(
            libc::SYS_renameat2,
            "renameat2",
            Two { old: (Some(0), 1), new: (Some(2), 3), link: false },
        ),
        call(libc::SYS_linkat, "linkat", Two { old: (Some(0), 1), new: (Some(2), 3), link: true }),
        call(libc::SYS_symlinkat, "symlinkat", Create { dirfd: Some(1), path: 2 }),
        call(libc::SYS_truncate, "truncate", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_fchmodat, "fchmodat", Modify { dirfd: Some(0), path: 1, nofollow: None }),
        call(SYS_FCHMODAT2, "fchmodat2", Modify { dirfd: Some(0), path: 1, nofollow: Some(3) }),
        call(libc::SYS_fchownat, "fchownat", Modify { dirfd: Some(0), path: 1, nofollow: Some(4) }),
        call(
            libc::SYS_utimensat,
            "utimensat",
            Modify { dirfd: Some(0), path: 1, nofollow: Some(3) },
        ),
        call(libc::SYS_setxattr, "setxattr", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_lsetxattr, "lsetxattr", Modify { dirfd: CWD, path: 0, nofollow: NOFOLLOW }),
        call(libc::SYS_removexattr, "removexattr", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(
            libc::SYS_lremovexattr,
            "lremovexattr",
            Modify { dirfd: CWD, path: 0, nofollow: NOFOLLOW },
        ),
        call(SYS_SETXATTRAT, "setxattrat", Modify { dirfd: Some(0), path: 1, nofollow: Some(2) }),
        call(
            SYS_REMOVEXATTRAT,
            "removexattrat",
            Modify { dirfd: Some(0), path: 1, nofollow: Some(2) },
        ),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        call(libc::SYS_open, "open", Open { dirfd: CWD, path: 0, flags: Some(1) }),
        call(libc::SYS_creat, "creat", Open { dirfd: CWD, path: 0, flags: None }),
        call(libc::SYS_mkdir, "mkdir", Create { dirfd: CWD, path: 0 }),
        call(libc::SYS_mknod, "mknod", Create { dirfd: CWD, path: 0 }),
        call(libc::SYS_unlink, "unlink", Remove { dirfd: CWD, path: 0 }),
        call(libc::SYS_rmdir, "rmdir", Remove { dirfd: CWD, path: 0 }),
        call(libc::SYS_rename, "rename", Two { old: (CWD, 0), new: (CWD, 1), link: false }),
        call(
            libc::SYS_renameat,
            "renameat",
            Two { old: (Some(0), 1), new: (Some(2), 3), link: false },
        ),
        call(libc::SYS_link, "link", Two { old: (CWD, 0), new: (CWD, 1), link: true }),
        call(libc::SYS_symlink, "symlink", Create { dirfd: CWD, path: 1 }),
        call(libc::SYS_chmod, "chmod", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_chown, "chown", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_lchown, "lchown", Modify { dirfd: CWD, path: 0, nofollow: NOFOLLOW }),
        call(libc::SYS_utime, "utime", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_utimes, "utimes", Modify { dirfd: CWD, path: 0, nofollow: None }),
        call(libc::SYS_futimesat, "futimesat", Modify { dirfd: Some(0), path: 1, nofollow: None }),
    ]);
    v
}

/// `nofollow` of a call that never follows a final symlink (`lchown`, `lsetxattr`).
const NOFOLLOW: Option<u8> = Some(u8::MAX);

/// The notified `connect`.
pub const CONNECT: Call = call(libc::SYS_connect, "connect", Shape::Connect);
/// The notified `socket(AF_UNIX)`.
pub const SOCKET: Call = call(libc::SYS_socket, "socket", Shape::Socket);

/// The calls notified under `opts`: the write-intent calls only when itemizing (`record`).
pub fn notified(opts: Options, record: bool) -> Vec<Call> {
    let mut v = if record { calls() } else { Vec::new() };
    if opts.record_connects || opts.unix_grants {
        v.push(CONNECT);
    }
    if opts.refuse_unix_sockets {
        v.push(SOCKET);
    }
    v
}

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;

// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The offset of the low 32 bits of argument `i`.
const fn arg_lo(i: u8) -> u32 {
    let base = 16 + 8 * i as u32;
    if cfg!(target_endian = "little") { base } else { base + 4 }
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The body run when `nr` matched: it ends in a return on every branch.
fn body(call: &Call) -> Vec<libc::sock_filter> {
    // An argument test: ld arg; test ? ret NOTIFY : ret ALLOW.
    let test = |arg: u8, code: u16, k: u32| {
        vec![
            stmt(LD_W_ABS, arg_lo(arg)),
            jump(code, k, 0, 1),
            stmt(RET_K, RET_NOTIFY),
            stmt(RET_K, RET_ALLOW),
        ]
    };
    match call.shape {
        Shape::Open { flags: Some(arg), .. } => test(arg, JSET_K, WRITE_FLAGS),
        Shape::Socket => test(0, JEQ_K, AF_UNIX),
        _ => vec![stmt(RET_K, RET_NOTIFY)],
    }
}

/// The notification program for `opts` (empty on an architecture without a table here);
/// `record`: itemizing, the write-intent calls are notified too.
pub fn program(opts: Options, record: bool) -> Vec<libc::sock_filter> {
    let Some(native) = NATIVE_ARCH else { return Vec::new() };
    let mut prog = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, native, 1, 0),
        stmt(RET_K, RET_ALLOW),
        stmt(LD_W_ABS, OFF_NR),
    ];
    for call in notified(opts, record) {
        let body = body(&call);
        let Ok(nr) = u32::try_from(call.nr) else { continue };
        // A body is one or four instructions: the offset always fits.
        let skip = u8::try_from(body.len()).unwrap_or(u8::MAX);
        prog.push(jump(JEQ_K, nr, 0, skip));
        prog.extend(body);
    }
    prog.push(stmt(RET_K, RET_ALLOW));
    prog
}

/// Installs `prog` on the calling thread with a new listener and returns the listener's
/// descriptor, or the errno. No allocation: callable in a forked child. no_new_privs must be
/// set already (the main filter sets it). Fails with `EBUSY` when a filter with a listener
/// is already installed (only one per chain).
pub fn install(prog: &[libc::sock_filter]) -> Result<i32, i32> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| libc::EINVAL)?,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp(2) with a valid program that outlives the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &raw const fprog,
        )
    };
    if fd < 0 {
        // SAFETY: reading this thread's errno.
        return Err(unsafe { *libc::__errno_location() });
    }
    i32::try_from(fd).map_err(|_| libc::EBADF)
}

/// The call with number `nr` among `calls`.
pub fn lookup(calls: &[Call], nr: i64) -> Option<&Call> {
    calls.iter().find(|c| c.nr == nr)
}
