//! The child that starts the waiting bwrap ([`spawn_elsewhere`]): its setup, made before
//! the clone ([`ChildSetup`]: it allocates nothing and calls nothing of the C library once
//! running, on the runner's memory), what it does before it executes bwrap (what
//! `posix_spawn` would, then the network namespace and the device clones it makes where it
//! may), and [`Starting`], which keeps that setup alive until the child has executed.

use std::os::fd::{AsRawFd, RawFd};

use crate::error::Context;
use crate::runtime::Result;
use paddock_policy::AbsPathBuf;

/// Blocks every signal in this thread (a child sharing its memory starts with that mask);
/// returns the mask it had, for `pthread_sigmask(SIG_SETMASK, ..)` once the child is out of
/// the way.
pub(super) fn block_every_signal() -> libc::sigset_t {
    // SAFETY: sigfillset and pthread_sigmask with valid pointers.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

/// The child starting bwrap, and what it reads, until it has executed.
pub(super) struct Starting {
    pub(super) pid: libc::pid_t,
    /// On x86-64 the child runs beside the runner; elsewhere the runner waited for it.
    #[cfg(target_arch = "x86_64")]
    beside: crate::vfork::Beside,
    setup: Box<ChildSetup>,
}

impl Starting {
    /// Waits until the child has executed bwrap or failed to (the errno of its `execve`).
    pub(super) fn executed(self) -> std::io::Result<()> {
        #[cfg(target_arch = "x86_64")]
        self.beside.wait_exec();
        match self.setup.failed.load(std::sync::atomic::Ordering::Acquire) {
            0 => Ok(()),
            errno => Err(std::io::Error::from_raw_os_error(errno)),
        }
    }
}

/// Everything the child reads, made before it starts: it allocates nothing and calls
/// nothing of the C library ([`ChildSetup::exec`]).
struct ChildSetup {
    program: std::ffi::CString,
    _argv: Vec<std::ffi::CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp: [*const libc::c_char; 1],
    /// (descriptor, where bwrap gets it).
    targets: Vec<(RawFd, RawFd)>,
    /// The CPUs the child moves to, when the runner has others than its own.
    others: Option<libc::cpu_set_t>,
    /// The namespace the child enters before it executes bwrap (an observed run's).
    namespace: Option<crate::private_ns::PrivateNamespace>,
    /// Whether the child makes the sandbox's network namespace then
    /// ([`crate::private_ns::enter_new_network_with`]).
    private_network: bool,
    /// Whether the child clones the host's devices for the supervisor, once its
    /// descriptors are placed ([`crate::devices::place_clones_with`]).
    clone_mounts: bool,
    /// With `clone_mounts`: the terminal the child's stdout is, cloned too (best effort:
    /// without it the sandbox has no `/dev/console`).
    terminal: Option<std::ffi::CString>,
    /// The errno of the child's `execve`, once it failed.
    failed: std::sync::atomic::AtomicI32,
}

// SAFETY: its pointers point into its own strings (heap buffers that move with it) or are
// null; nothing in it is tied to a thread.
unsafe impl Send for ChildSetup {}

/// The child's view of its setup, which the parent keeps boxed until the child has executed.
struct SetupRef(*const ChildSetup);

// SAFETY: the pointer is only read, by the child, while the box it points into lives.
unsafe impl Send for SetupRef {}

/// A system call as the child makes it: directly on x86-64, where it runs beside the
/// runner and shares its errno (`vfork::raw`); through libc's `syscall` elsewhere, where the
/// runner waits. The kernel's result either way (-errno on failure).
///
/// # Safety
/// As [`crate::vfork::raw::syscall`].
unsafe fn sys(nr: libc::c_long, a: [usize; 6]) -> isize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's.
        unsafe { crate::vfork::raw::syscall(nr, a) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's.
        let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if r < 0 {
            -(std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as isize)
        } else {
            r as isize
        }
    }
}

impl ChildSetup {
    /// The child's side: what `posix_spawn` would do, then `execve`; on failure the errno
    /// goes into `failed`. Only system calls, on this setup.
    fn exec(&self) -> libc::c_int {
        use std::sync::atomic::Ordering;
        let set_size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: each call gets valid pointers into this setup or the child's own stack,
        // sized as the kernel expects (its sigset is 8 bytes, its sigaction 4 words).
        unsafe {
            if let Some(set) = &self.others {
                sys(
                    libc::SYS_sched_setaffinity,
                    [0, set_size, std::ptr::from_ref(set) as usize, 0, 0, 0],
                );
            }
            let caught = caught_signals();
            for sig in 1..=64usize {
                let handled = match caught {
                    Some(mask) => mask & (1 << (sig - 1)) != 0,
                    None => {
                        let mut old = [0u64; 4];
                        let queried = sys(
                            libc::SYS_rt_sigaction,
                            [sig, 0, old.as_mut_ptr() as usize, 8, 0, 0],
                        ) == 0;
                        queried && old[0] != libc::SIG_DFL as u64 && old[0] != libc::SIG_IGN as u64
                    }
                };
                if handled || sig == libc::SIGPIPE as usize {
                    let default = [0u64; 4];
                    sys(libc::SYS_rt_sigaction, [sig, default.as_ptr() as usize, 0, 8, 0, 0]);
                }
            }
            if let Some(namespace) = &self.namespace
                && let Err(errno) = namespace.enter_with(sys)
            {
                self.failed.store(errno, Ordering::Release);
                sys(libc::SYS_exit_group, [127, 0, 0, 0, 0, 0]);
            }
            if self.private_network
                && let Err(errno) = crate::private_ns::enter_new_network_with(sys)
            {
                self.failed.store(errno, Ordering::Release);
                sys(libc::SYS_exit_group, [127, 0, 0, 0, 0, 0]);
            }
            sys(libc::SYS_setpgid, [0; 6]);
            // Every descriptor of this child's table (the runner's, copied at the clone)
            // close-on-exec, then those placed below: nothing the runner's caller holds
            // reaches bwrap (FSR-06, ENV-03), and the caller's own table stays as it is.
            let cloexec = libc::CLOSE_RANGE_CLOEXEC as usize;
            let mut ok = sys(libc::SYS_close_range, [3, u32::MAX as usize, cloexec, 0, 0, 0]) == 0;
            ok = ok && sys(libc::SYS_chdir, [c"/".as_ptr() as usize, 0, 0, 0, 0, 0]) == 0;
            for &(fd, dst) in &self.targets {
                // dup3 (the sources are above every target, never equal to one).
                ok = ok
                    && sys(libc::SYS_dup3, [fd as usize, dst as usize, 0, 0, 0, 0]) == dst as isize;
            }
            if ok
                && self.clone_mounts
                && let Err(errno) = crate::devices::place_clones_with(sys)
            {
                self.failed.store(errno, Ordering::Release);
                sys(libc::SYS_exit_group, [127, 0, 0, 0, 0, 0]);
            }
            if let (true, Some(terminal)) = (ok && self.clone_mounts, &self.terminal) {
                let _ = crate::devices::place_terminal_with(sys, terminal);
            }
            let mut errno = libc::EBADF;
            if ok {
                let empty = 0u64;
                sys(
                    libc::SYS_rt_sigprocmask,
                    [libc::SIG_SETMASK as usize, std::ptr::from_ref(&empty) as usize, 0, 8, 0, 0],
                );
                let argv = self.argv_ptrs.as_ptr() as usize;
                let r = sys(
                    libc::SYS_execve,
                    [self.program.as_ptr() as usize, argv, self.envp.as_ptr() as usize, 0, 0, 0],
                );
                errno = i32::try_from(-r).unwrap_or(libc::EINVAL);
            }
            self.failed.store(errno, Ordering::Release);
            sys(libc::SYS_exit_group, [127, 0, 0, 0, 0, 0]);
        }
        127
    }
}

/// The signals this process has handlers for (bit `n - 1` for signal `n`), from the
/// `SigCgt` line of `/proc/self/status`: one read instead of 64 `rt_sigaction` queries.
/// Called by the child before it executes, so only system calls on its own stack; the
/// child's handlers are its own copy, taken at the clone. `None` when `/proc` cannot say.
pub(super) fn caught_signals() -> Option<u64> {
    let mut buf = [0u8; 4096];
    // SAFETY: a NUL-terminated path, the buffer's own pointer and length, a descriptor
    // this function opened and closes.
    let len = unsafe {
        let path = c"/proc/self/status".as_ptr() as usize;
        let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as usize;
        let fd = sys(libc::SYS_openat, [libc::AT_FDCWD as usize, path, flags, 0, 0, 0]);
        if fd < 0 {
            return None;
        }
        let mut len = 0;
        while len < buf.len() {
            let n = sys(
                libc::SYS_read,
                [fd as usize, buf[len..].as_mut_ptr() as usize, buf.len() - len, 0, 0, 0],
            );
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        sys(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
        len
    };
    sig_caught_in(&buf[..len])
}

/// The mask of a `SigCgt:` line in a `/proc/PID/status` text (16 hex digits).
pub(super) fn sig_caught_in(status: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\nSigCgt:\t";
    let at = status.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let digits = status.get(at..at + 16)?;
    digits.iter().try_fold(0u64, |mask, d| {
        let v = (*d as char).to_digit(16)?;
        Some(mask << 4 | u64::from(v))
    })
}

/// Starts `bwrap` (with every plan's command line, its descriptors at `pairs`' targets) from
/// a child that first moves itself to this process's other CPUs, if it has any; returns it,
/// and this process's affinity when it did move. What the child does before it executes is
/// what `posix_spawn` would: its own process group, `/` as cwd, the descriptors moved (every
/// other one made close-on-exec there), signal handlers back to their default
/// (`SIGPIPE` too; glibc's internal signals as they are here), an empty signal mask.
///
/// On x86-64 the child runs beside the runner (`vfork::spawn_beside`), which goes on with
/// its work: it does not sleep while bwrap's `execve` runs, nor wait for its idle CPU to wake
/// up after. Elsewhere it is a `vfork` child, and the runner pins itself to its own CPU until
/// the child has executed (a vfork parent is woken where the child runs).
pub(super) fn spawn_elsewhere(
    bwrap: &AbsPathBuf,
    pairs: &[(RawFd, RawFd)],
    max_target: RawFd,
    namespace: Option<crate::private_ns::PrivateNamespace>,
    private_network: bool,
    clone_mounts: bool,
    terminal: Option<std::ffi::CString>,
) -> Result<(Starting, Option<libc::cpu_set_t>)> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstr = |b: &[u8]| CString::new(b).context("a NUL byte in bwrap's command line");
    let program = cstr(bwrap.as_os_str().as_bytes())?;
    let argv: Vec<CString> =
        crate::bwrap_argv().iter().map(|a| cstr(a.as_bytes())).collect::<Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());

    let moved = crate::runtime::exec::moved_above(pairs, max_target)
        .context("cannot hand bwrap its descriptors")?;
    let targets: Vec<(RawFd, RawFd)> =
        moved.iter().map(|(fd, dst)| (fd.as_raw_fd(), *dst)).collect();

    // The CPUs but this one, when there are others.
    let set_size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: an all-zero cpu_set_t is the empty set; the calls get valid pointers and sizes.
    let (before, here, others) = unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        let ok = libc::sched_getaffinity(0, set_size, &mut before) == 0;
        let cpu = libc::sched_getcpu();
        let mut others = before;
        let mut here: libc::cpu_set_t = std::mem::zeroed();
        if let Ok(cpu) = usize::try_from(cpu) {
            libc::CPU_CLR(cpu, &mut others);
            libc::CPU_SET(cpu, &mut here);
        }
        let any = ok && cpu >= 0 && libc::CPU_COUNT(&others) > 0;
        (before, here, any.then_some(others))
    };
    let setup = Box::new(ChildSetup {
        program,
        _argv: argv,
        argv_ptrs,
        envp: [std::ptr::null()],
        targets,
        others,
        namespace,
        private_network,
        clone_mounts,
        terminal,
        failed: std::sync::atomic::AtomicI32::new(0),
    });

    // No signal reaches the child before it has reset the handlers it has copies of (they
    // would run on our memory).
    let old_mask = block_every_signal();
    let setup_ref = SetupRef(&*setup);
    #[cfg(target_arch = "x86_64")]
    let spawned = {
        let _ = here;
        let beside = crate::vfork::spawn_beside(move || {
            let setup = setup_ref;
            // SAFETY: the setup is boxed in the `Starting` returned, which waits for the
            // child to have executed before it lets the box go.
            unsafe { &*setup.0 }.exec()
        });
        if let (Ok(child), Some(set)) = (&beside, &others) {
            // A new child may be queued on this CPU, where it would wait for the runner,
            // which does not sleep: moved now, it starts on another.
            // SAFETY: sched_setaffinity on our own child with a valid set.
            unsafe { libc::sched_setaffinity(child.pid(), set_size, set) };
        }
        beside.map(|beside| Starting { pid: beside.pid(), beside, setup })
    };
    #[cfg(not(target_arch = "x86_64"))]
    let spawned = {
        // The kernel wakes a vfork parent where the child runs: pinned to its own CPU
        // until the child has executed, this process stays beside it.
        if others.is_some() {
            // SAFETY: sched_setaffinity on this thread with a valid set.
            unsafe { libc::sched_setaffinity(0, set_size, &here) };
        }
        let pid = crate::vfork::spawn(|| {
            // SAFETY: the setup outlives the child's use: the parent is suspended until the
            // child has executed.
            unsafe { &*setup_ref.0 }.exec()
        });
        if others.is_some() {
            // SAFETY: restoring this thread's affinity.
            unsafe { libc::sched_setaffinity(0, set_size, &before) };
        }
        pid.map(|pid| Starting { pid, setup })
    };
    // SAFETY: restoring this thread's own mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut()) };
    drop(moved);
    let starting = spawned.context("clone")?;
    Ok((starting, others.map(|_| before)))
}
