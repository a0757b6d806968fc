//! The system calls the supervisor makes, issued directly (`syscall` on x86-64), without a C
//! library: each returns its result or the errno the kernel gave.
//!
//! Only numbers, types and constants come from the `libc` crate (which is `no_std` and
//! declares its functions without linking them); none of its functions is called, so the
//! binary built without a C library has nothing of one to resolve.

use core::arch::asm;

use libc::{c_int, c_long};

/// A failed call: the kernel's errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

/// The kernel's sigset, one bit per signal (the size the `rt_sig*` calls take).
pub type SigSet = u64;
const SIGSET_SIZE: usize = core::mem::size_of::<SigSet>();

/// The bit of `sig` in a [`SigSet`].
pub const fn sig_bit(sig: c_int) -> SigSet {
    1 << (sig - 1)
}

/// A raw system call with up to six arguments.
///
/// # Safety
/// The arguments must be what call `nr` takes: pointers valid for what it reads and writes.
unsafe fn syscall6(nr: c_long, args: [usize; 6]) -> Result<usize, Errno> {
    let ret: isize;
    // SAFETY: the caller passes valid arguments for the call; `syscall` clobbers rcx and r11
    // only, and the kernel does not touch the stack.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if (-4095..0).contains(&ret) {
        // In -4095..-1: an errno.
        Err(Errno(-(ret as i32)))
    } else {
        Ok(ret as usize)
    }
}

macro_rules! call {
    ($nr:expr $(, $arg:expr)* $(,)?) => {{
        let mut args = [0usize; 6];
        let given = [$($arg as usize),*];
        args[..given.len()].copy_from_slice(&given);
        // SAFETY: see each caller: it passes what the call takes.
        unsafe { syscall6($nr, args) }
    }};
}

pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize, Errno> {
    call!(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len())
}

pub fn write(fd: c_int, buf: &[u8]) -> Result<usize, Errno> {
    call!(libc::SYS_write, fd, buf.as_ptr(), buf.len())
}

pub fn close(fd: c_int) {
    let _ = call!(libc::SYS_close, fd);
}

/// Closes every descriptor from `first` up; one by one (to 1023) where `close_range` is
/// missing (before Linux 5.9).
pub fn close_from(first: c_int) {
    if call!(libc::SYS_close_range, first, u32::MAX, 0).is_err() {
        for fd in first..1024 {
            close(fd);
        }
    }
}

pub fn getpid() -> c_int {
    call!(libc::SYS_getpid).map_or(0, |pid| pid as c_int)
}

pub fn prctl(option: c_int, arg: usize) -> Result<usize, Errno> {
    call!(libc::SYS_prctl, option, arg, 0, 0, 0)
}

/// Anonymous private memory, zeroed, readable and writable.
pub fn map(len: usize) -> Result<*mut u8, Errno> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    call!(libc::SYS_mmap, 0, len, prot, flags, -1i64, 0).map(|a| a as *mut u8)
}

/// Grows a mapping of [`map`], moving it if need be.
pub fn remap(addr: *mut u8, old: usize, new: usize) -> Result<*mut u8, Errno> {
    call!(libc::SYS_mremap, addr, old, new, libc::MREMAP_MAYMOVE).map(|a| a as *mut u8)
}

pub fn block(set: SigSet) -> Result<(), Errno> {
    call!(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &raw const set, 0, SIGSET_SIZE).map(drop)
}

pub fn unblock(set: SigSet) {
    let _ = call!(libc::SYS_rt_sigprocmask, libc::SIG_UNBLOCK, &raw const set, 0, SIGSET_SIZE);
}

/// `sig` back to its default disposition.
pub fn set_default(sig: c_int) {
    // The kernel's `struct sigaction`: handler, flags, restorer, mask.
    let action = [libc::SIG_DFL, 0, 0, 0];
    let _ = call!(libc::SYS_rt_sigaction, sig, action.as_ptr(), 0, SIGSET_SIZE);
}

/// A non-blocking, close-on-exec signalfd for `set`.
pub fn signalfd(set: SigSet) -> Result<c_int, Errno> {
    let flags = libc::SFD_CLOEXEC | libc::SFD_NONBLOCK;
    call!(libc::SYS_signalfd4, -1isize, &raw const set, SIGSET_SIZE, flags).map(|fd| fd as c_int)
}

/// Waits for one of `fds` to be ready, at most `nanos` nanoseconds.
pub fn poll(fds: &mut [libc::pollfd], nanos: u64) -> Result<usize, Errno> {
    let timeout = libc::timespec {
        tv_sec: (nanos / 1_000_000_000) as i64,
        tv_nsec: (nanos % 1_000_000_000) as i64,
    };
    call!(libc::SYS_ppoll, fds.as_mut_ptr(), fds.len(), &raw const timeout, 0, SIGSET_SIZE)
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_nanos() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let _ = call!(libc::SYS_clock_gettime, libc::CLOCK_MONOTONIC, &raw mut now);
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

/// Reaps one child without waiting: `Ok(None)` when none has changed state.
pub fn reap_any() -> Result<Option<(c_int, c_int)>, Errno> {
    let mut status: c_int = 0;
    let pid = call!(libc::SYS_wait4, -1isize, &raw mut status, libc::WNOHANG, 0)?;
    Ok((pid != 0).then_some((pid as c_int, status)))
}

/// Waits for any child and reaps it (its pid): `Err(ECHILD)` once there is none left.
pub fn reap_waiting() -> Result<c_int, Errno> {
    let mut status: c_int = 0;
    loop {
        match call!(libc::SYS_wait4, -1isize, &raw mut status, 0, 0) {
            Err(Errno(libc::EINTR)) => {}
            other => return other.map(|pid| pid as c_int),
        }
    }
}

pub fn kill(pid: c_int, sig: c_int) {
    let _ = call!(libc::SYS_kill, pid as isize, sig);
}

pub fn setpgid(pid: c_int, pgid: c_int) {
    let _ = call!(libc::SYS_setpgid, pid, pgid);
}

/// One byte on a socket, never blocking and never raising SIGPIPE.
pub fn send_byte(fd: c_int, byte: u8) {
    send(fd, &[byte]);
}

/// `bytes` on a socket in one call, never blocking and never raising SIGPIPE.
pub fn send(fd: c_int, bytes: &[u8]) {
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    let _ = call!(libc::SYS_sendto, fd, bytes.as_ptr(), bytes.len(), flags, 0, 0);
}

/// What the children reaped so far used (`getrusage(RUSAGE_CHILDREN)`): user + system CPU
/// time in microseconds and the largest one's peak resident set in KiB; zeros on failure.
pub fn children_usage() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    if call!(libc::SYS_getrusage, libc::RUSAGE_CHILDREN, &raw mut usage).is_err() {
        return (0, 0);
    }
    let micros = |t: libc::timeval| {
        (t.tv_sec.max(0) as u64).saturating_mul(1_000_000).saturating_add(t.tv_usec.max(0) as u64)
    };
    let cpu = micros(usage.ru_utime).saturating_add(micros(usage.ru_stime));
    (cpu, usage.ru_maxrss.max(0) as u64)
}

pub fn chdir(path: *const u8) -> Result<(), Errno> {
    call!(libc::SYS_chdir, path).map(drop)
}

/// `statx(path)` without following a symlink at its end: the device, the inode and, when
/// the kernel says it (5.8 and later), the mount's id.
pub fn statx_id(path: *const u8) -> Result<(u64, u64, Option<u64>), Errno> {
    let mut stx = core::mem::MaybeUninit::<libc::statx>::uninit();
    let mask = libc::STATX_INO | libc::STATX_MNT_ID;
    let flags = libc::AT_SYMLINK_NOFOLLOW;
    call!(libc::SYS_statx, libc::AT_FDCWD, path, flags, mask, stx.as_mut_ptr())?;
    // SAFETY: statx succeeded and filled the buffer.
    let stx = unsafe { stx.assume_init() };
    // The kernel's encoding of a device number (`makedev`), as `stat`'s `st_dev` has it.
    let (major, minor) = (u64::from(stx.stx_dev_major), u64::from(stx.stx_dev_minor));
    let dev = ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff);
    let mnt = (stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id);
    Ok((dev, stx.stx_ino, mnt))
}

/// Whether `path` may exist: false only when `stat` says it does not (ENOENT, ENOTDIR).
pub fn may_exist(path: *const u8) -> bool {
    let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
    let found = call!(libc::SYS_newfstatat, libc::AT_FDCWD, path, st.as_mut_ptr(), 0);
    !matches!(found, Err(Errno(libc::ENOENT | libc::ENOTDIR)))
}

/// Empties the capability bounding set, then the effective, permitted and inheritable sets
/// (see `launch::drop_capabilities` in paddock-linux-bwrap, which this mirrors); true when
/// that worked.
pub fn drop_capabilities() -> bool {
    let mut dropped = true;
    for cap in 0..64usize {
        let held = match prctl(libc::PR_CAPBSET_READ, cap) {
            Ok(held) => held == 1,
            // Past the kernel's last capability: so is every one after it.
            Err(Errno(libc::EINVAL)) => break,
            Err(_) => false,
        };
        if held && prctl(libc::PR_CAPBSET_DROP, cap).is_err() {
            dropped = false;
        }
    }
    // _LINUX_CAPABILITY_VERSION_3, this thread; two all-zero data words.
    let header: [u32; 2] = [0x2008_0522, 0];
    let data = [0u32; 6];
    let cleared = call!(libc::SYS_capset, header.as_ptr(), data.as_ptr()).is_ok();
    dropped && cleared
}

/// Loads the seccomp program `filter` (after no_new_privs, which an unprivileged process
/// needs for it).
pub fn load_filter(filter: &[libc::sock_filter]) -> Result<(), (&'static str, Errno)> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(|e| ("set no_new_privs", e))?;
    let len = u16::try_from(filter.len()).map_err(|_| ("load a program that long", Errno(0)))?;
    let prog = libc::sock_fprog { len, filter: filter.as_ptr().cast_mut() };
    call!(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &raw const prog)
        .map(drop)
        .map_err(|e| ("load the seccomp filter", e))
}

/// Loads `filter` as a user-notification filter: the descriptor of its new listener
/// (close-on-exec), for the supervisor to serve.
pub fn load_notify_filter(filter: &[libc::sock_filter]) -> Result<c_int, Errno> {
    let len = u16::try_from(filter.len()).map_err(|_| Errno(libc::EINVAL))?;
    let prog = libc::sock_fprog { len, filter: filter.as_ptr().cast_mut() };
    let flags = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    call!(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &raw const prog)
        .map(|fd| fd as c_int)
}

/// A connected pair of close-on-exec `SOCK_SEQPACKET` unix sockets.
pub fn socket_pair() -> Result<[c_int; 2], Errno> {
    let mut fds: [c_int; 2] = [-1, -1];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    call!(libc::SYS_socketpair, libc::AF_UNIX, kind, 0, fds.as_mut_ptr())?;
    Ok(fds)
}

/// One `SCM_RIGHTS` control message carrying one descriptor, laid out as x86-64's
/// `cmsghdr` and its data (`CMSG_SPACE(4)` bytes, `CMSG_LEN(4)` of them used).
#[repr(C)]
struct FdControl {
    len: usize,
    level: c_int,
    kind: c_int,
    fd: c_int,
    pad: c_int,
}

/// `CMSG_LEN(sizeof(int))` on x86-64.
const FD_CONTROL_LEN: usize = 20;

/// A message of one byte at `byte` and the control message `control`.
fn fd_message(iov: &mut libc::iovec, control: &mut FdControl) -> libc::msghdr {
    // SAFETY: msghdr is plain data, for which all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (control as *mut FdControl).cast();
    msg.msg_controllen = core::mem::size_of::<FdControl>() as _;
    msg
}

/// Sends `fd` over `sock` with one data byte, never raising SIGPIPE.
pub fn send_fd(sock: c_int, fd: c_int) -> Result<(), Errno> {
    let mut byte = b'L';
    let mut iov = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    let mut control = FdControl {
        len: FD_CONTROL_LEN,
        level: libc::SOL_SOCKET,
        kind: libc::SCM_RIGHTS,
        fd,
        pad: 0,
    };
    let msg = fd_message(&mut iov, &mut control);
    loop {
        match call!(libc::SYS_sendmsg, sock, &raw const msg, libc::MSG_NOSIGNAL) {
            Err(Errno(libc::EINTR)) => continue,
            other => return other.map(drop),
        }
    }
}

/// Receives a descriptor sent by [`send_fd`], not close-on-exec. `Ok(None)`: the peer
/// closed without sending one.
pub fn recv_fd(sock: c_int) -> Result<Option<c_int>, Errno> {
    Ok(recv_fd_with(sock)?.map(|(_, fd)| fd))
}

/// [`recv_fd`], with the message's data byte.
pub fn recv_fd_with(sock: c_int) -> Result<Option<(u8, c_int)>, Errno> {
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&raw mut byte).cast(), iov_len: 1 };
    let mut control = FdControl { len: 0, level: 0, kind: 0, fd: -1, pad: 0 };
    let mut msg = fd_message(&mut iov, &mut control);
    let n = loop {
        match call!(libc::SYS_recvmsg, sock, &raw mut msg, 0) {
            Err(Errno(libc::EINTR)) => continue,
            other => break other?,
        }
    };
    let carried = n > 0
        && msg.msg_controllen >= FD_CONTROL_LEN as _
        && control.len == FD_CONTROL_LEN
        && control.level == libc::SOL_SOCKET
        && control.kind == libc::SCM_RIGHTS;
    Ok(carried.then_some((byte, control.fd)))
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`: executes the file `fd` is open on. Returns
/// only on failure.
pub fn execveat(fd: c_int, argv: *const *const u8, envp: *const *const u8) -> Errno {
    let empty = c"".as_ptr();
    match call!(libc::SYS_execveat, fd, empty, argv, envp, libc::AT_EMPTY_PATH) {
        Ok(_) => Errno(0),
        Err(e) => e,
    }
}

/// [`execveat`], tried again every millisecond for 100 ms while the file is open for writing
/// somewhere (`ETXTBSY`): for a moment it may be (its maker's descriptor, or a copy of it in
/// a child another thread of a task runner cloned meanwhile, held until that child
/// executes). Returns only on failure.
pub fn execveat_when_free(fd: c_int, argv: *const *const u8, envp: *const *const u8) -> Errno {
    let mut tries = 0;
    loop {
        let e = execveat(fd, argv, envp);
        if e.0 != libc::ETXTBSY || tries == 100 {
            return e;
        }
        tries += 1;
        let _ = poll(&mut [], 1_000_000);
    }
}

/// `dup3(old, new, 0)`: `new` becomes `old`, not close-on-exec.
pub fn dup_to(old: c_int, new: c_int) -> Result<(), Errno> {
    call!(libc::SYS_dup3, old, new, 0).map(drop)
}

pub fn execve(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> Errno {
    match call!(libc::SYS_execve, path, argv, envp) {
        Ok(_) => Errno(0),
        Err(e) => e,
    }
}

pub fn exit(code: c_int) -> ! {
    loop {
        let _ = call!(libc::SYS_exit_group, code);
    }
}

/// Starts a child that shares this process's memory and runs `entry(arg)` on `stack` (its
/// top, 16-byte aligned), this process waiting until the child executes or exits
/// (`CLONE_VM | CLONE_VFORK`). Returns the child's pid.
///
/// # Safety
/// `stack_top` is the top of memory nobody else uses while the child runs; `entry` never
/// returns and only makes system calls on memory that stays valid (see `supervise`).
pub unsafe fn spawn_vfork(
    entry: extern "C" fn(usize) -> !,
    arg: usize,
    stack_top: *mut u8,
) -> Result<c_int, Errno> {
    let flags = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize;
    let ret: isize;
    // SAFETY: clone(flags, newsp, 0, 0, 0). The child resumes after `syscall` with rax = 0,
    // rsp = `stack_top` and the parent's other registers, and calls `entry(arg)` at once
    // (from r12 and r13), never touching the parent's frame; `entry` never returns (`ud2`
    // would trap). The parent continues past the label with the pid (or -errno) in rax.
    unsafe {
        asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone as isize => ret,
            in("rdi") flags,
            in("rsi") stack_top,
            in("rdx") 0usize,
            in("r10") 0usize,
            in("r8") 0usize,
            in("r12") entry as usize,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    if (-4095..0).contains(&ret) { Err(Errno(-(ret as i32))) } else { Ok(ret as c_int) }
}

pub fn unshare(flags: c_int) -> Result<(), Errno> {
    call!(libc::SYS_unshare, flags).map(drop)
}

/// `mount(2)`; null pointers where a bind or a remount takes none.
pub fn mount(source: *const u8, target: *const u8, flags: libc::c_ulong) -> Result<(), Errno> {
    call!(libc::SYS_mount, source, target, 0usize, flags, 0usize).map(drop)
}

/// `O_PATH | O_NOFOLLOW` of `path`: the file itself, a link not followed.
pub fn open_path(path: *const u8) -> Result<c_int, Errno> {
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    call!(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0).map(|fd| fd as c_int)
}

/// `open(path, O_RDONLY | O_CLOEXEC)`.
pub fn open_read(path: *const u8) -> Result<c_int, Errno> {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC;
    call!(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0).map(|fd| fd as c_int)
}

/// Makes the empty mode-0000 file `path`, never through a link nor over an existing one.
pub fn create_empty(path: *const u8) -> Result<(), Errno> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = call!(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0)?;
    close(fd as c_int);
    Ok(())
}

/// `unlink(path)`.
pub fn unlink(path: *const u8) -> Result<(), Errno> {
    call!(libc::SYS_unlinkat, libc::AT_FDCWD, path, 0).map(drop)
}

/// `openat(dir, name, flags, mode)`.
pub fn open_at(dir: c_int, name: *const u8, flags: c_int, mode: u32) -> Result<c_int, Errno> {
    call!(libc::SYS_openat, dir, name, flags | libc::O_CLOEXEC, mode).map(|fd| fd as c_int)
}

/// Whether `fd` is an open descriptor (`fcntl(F_GETFD)`).
pub fn is_open(fd: c_int) -> bool {
    call!(libc::SYS_fcntl, fd, libc::F_GETFD).is_ok()
}

/// `symlinkat(target, dir, name)`.
pub fn symlink_at(target: *const u8, dir: c_int, name: *const u8) -> Result<(), Errno> {
    call!(libc::SYS_symlinkat, target, dir, name).map(drop)
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: c_int, name: *const u8, mode: u32) -> Result<(), Errno> {
    call!(libc::SYS_mkdirat, dir, name, mode).map(drop)
}

/// The file type bits and the device number of `fd` (`fstat`'s `st_mode & S_IFMT`,
/// `st_rdev`).
pub fn device_of(fd: c_int) -> Result<(u32, u64), Errno> {
    // SAFETY: an all-zero `struct stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    call!(libc::SYS_fstat, fd, &mut st as *mut libc::stat)?;
    Ok((st.st_mode & libc::S_IFMT, st.st_rdev))
}

/// A detached filesystem of type `fstype` (`fsopen`, `fsconfig` of each key and value of
/// `options`, `fsmount` with the attributes `attr`).
pub fn fs_detached(
    fstype: *const u8,
    options: &[(*const u8, *const u8)],
    attr: u64,
) -> Result<c_int, Errno> {
    // FSOPEN_CLOEXEC; FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE; FSMOUNT_CLOEXEC.
    let fs = call!(libc::SYS_fsopen, fstype, 1)? as c_int;
    let mut configured = Ok(0);
    for &(key, value) in options {
        configured = configured.and_then(|_| call!(libc::SYS_fsconfig, fs, 1, key, value, 0));
    }
    let mounted = configured
        .and_then(|_| call!(libc::SYS_fsconfig, fs, 6, 0, 0, 0))
        .and_then(|_| call!(libc::SYS_fsmount, fs, 1, attr));
    close(fs);
    mounted.map(|fd| fd as c_int)
}

/// `mount(2)` of a new filesystem of type `fstype` with the options `data`.
pub fn mount_new(
    fstype: *const u8,
    target: *const u8,
    flags: libc::c_ulong,
    data: *const u8,
) -> Result<(), Errno> {
    call!(libc::SYS_mount, fstype, target, fstype, flags, data).map(drop)
}

/// A detached tmpfs with the options `mode`, mounted with the attributes `attr`.
pub fn tmpfs_detached(mode: *const u8, attr: u64) -> Result<c_int, Errno> {
    fs_detached(c"tmpfs".as_ptr().cast(), &[(c"mode".as_ptr().cast(), mode)], attr)
}

/// `open_tree(fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | extra)`: a detached copy of the
/// mount at `fd`.
pub fn open_tree_clone(fd: c_int, extra: libc::c_uint) -> Result<c_int, Errno> {
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_EMPTY_PATH as libc::c_uint
        | extra;
    call!(libc::SYS_open_tree, fd, c"".as_ptr(), flags).map(|fd| fd as c_int)
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH | extra)` setting `attr_set`.
pub fn mount_setattr(fd: c_int, extra: libc::c_uint, attr_set: u64) -> Result<(), Errno> {
    // `struct mount_attr`: attr_set, attr_clr, propagation, userns_fd.
    let attr: [u64; 4] = [attr_set, 0, 0, 0];
    let flags = libc::AT_EMPTY_PATH as libc::c_uint | extra;
    call!(libc::SYS_mount_setattr, fd, c"".as_ptr(), flags, attr.as_ptr(), 32).map(drop)
}

/// `move_mount` of the detached tree `from` onto the file `to` (both descriptors).
pub fn move_mount(from: c_int, to: c_int) -> Result<(), Errno> {
    // MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH.
    let flags: libc::c_uint = 0x04 | 0x40;
    call!(libc::SYS_move_mount, from, c"".as_ptr(), to, c"".as_ptr(), flags).map(drop)
}

/// The mount flags (`ST_*`, as `statvfs` gives them) of the filesystem at `path`.
pub fn mount_flags(path: *const u8) -> Result<u64, Errno> {
    // x86-64's `struct statfs`: fifteen 8-byte words (the libc crate hides `f_flags`):
    // type, bsize, blocks, bfree, bavail, files, ffree, fsid, namelen, frsize, flags, spare.
    let mut words = [0u64; 15];
    call!(libc::SYS_statfs, path, words.as_mut_ptr())?;
    Ok(words[10])
}
