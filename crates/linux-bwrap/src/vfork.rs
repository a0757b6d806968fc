//! A child that shares this process's memory until it executes, as `vfork` gives: started
//! with `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, while this process waits.
//!
//! Nothing of the parent is copied (a fork copies its page tables, and the child's exec tears
//! the copy down again), and the child may run code of its own before it executes, which
//! `posix_spawn` does not allow. That code must only make syscalls on data prepared before:
//! it runs on the parent's memory while the parent is suspended, so it must not take a lock
//! another thread may hold (the allocator's), and it must end in `execve` or `_exit`.

/// Runs `child` in a child process sharing this process's memory, and returns its pid once it
/// has executed or exited. `child` ends in `execve` or `_exit`; should it return, its value
/// is the child's exit status.
pub fn spawn<F: FnOnce() -> libc::c_int>(child: F) -> std::io::Result<libc::pid_t> {
    extern "C" fn entry<F: FnOnce() -> libc::c_int>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Option<F>` below, alive until the parent resumes, which is
        // after this child has executed or exited; only this child takes it.
        let slot = unsafe { &mut *arg.cast::<Option<F>>() };
        match slot.take() {
            Some(f) => f(),
            // SAFETY: _exit is async-signal-safe.
            None => unsafe { libc::_exit(125) },
        }
    }
    const STACK: usize = 256 * 1024;
    let mut stack = vec![0u8; STACK];
    let mut slot = Some(child);
    // SAFETY: the stack is ours and outlives the child's use of it (the parent is suspended
    // until the child executes or exits); it grows down from its 16-byte aligned top. The
    // closure runs in the child on this process's memory and never returns (see the module
    // doc for what it may do).
    let pid = unsafe {
        libc::clone(
            entry::<F>,
            stack_top(&mut stack),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_mut(&mut slot).cast(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid)
}

/// The 16-byte aligned top of `stack`, where a child's stack starts (it grows down).
fn stack_top(stack: &mut [u8]) -> *mut libc::c_void {
    let end = stack.as_mut_ptr_range().end;
    end.wrapping_sub(end as usize % 16).cast()
}

/// A child started by [`spawn_beside`], running beside this process in its memory until it
/// executes. Dropped, it waits for that (the child's stack and data go with it).
pub struct Beside {
    pid: libc::pid_t,
    /// 1 until the kernel clears it (`CLONE_CHILD_CLEARTID`) and wakes its futex, when the
    /// child executes or exits.
    running: Box<std::sync::atomic::AtomicI32>,
    _stack: Vec<u8>,
    _child: Box<dyn std::any::Any + Send>,
}

impl std::fmt::Debug for Beside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Beside").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl Beside {
    /// The child's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits until the child has executed or exited.
    pub fn wait_exec(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let value = self.running.load(Ordering::Acquire);
            if value == 0 {
                return;
            }
            // SAFETY: FUTEX_WAIT on a live, aligned i32 of ours while it holds `value`
            // (EAGAIN if it changed meanwhile, EINTR on a signal: both are looked at again).
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.running.as_ptr(),
                    libc::FUTEX_WAIT,
                    value,
                    std::ptr::null::<libc::timespec>(),
                )
            };
        }
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        self.wait_exec();
    }
}

/// Runs `child` in a child process sharing this process's memory, as [`spawn`] does, but
/// without suspending this process: it goes on while the child executes (an `execve` takes
/// 0.2 ms, and a parent that sleeps meanwhile may wait as long again for its idle CPU to
/// wake up in a virtual machine). The child's stack and `child` itself live in the returned
/// [`Beside`] until the child has executed or exited.
///
/// The child shares this process's thread-local storage too, errno included, so it must not
/// call C library functions at all: only [`raw::syscall`], on data that nothing here changes
/// until [`Beside::wait_exec`] returns, ending in `execve` or `exit_group`. Signals should be
/// blocked around the call (the child has a copy of the handlers, which would run on shared
/// memory).
#[cfg(target_arch = "x86_64")]
pub fn spawn_beside<F: FnOnce() -> libc::c_int + Send + 'static>(
    child: F,
) -> std::io::Result<Beside> {
    extern "C" fn entry<F: FnOnce() -> libc::c_int>(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the boxed `Option<F>` of the `Beside`, alive until the child has
        // executed or exited; only this child takes it.
        let slot = unsafe { &mut *arg.cast::<Option<F>>() };
        let code = match slot.take() {
            Some(f) => f(),
            None => 125,
        };
        // SAFETY: exit_group ends this child; nothing of libc runs.
        unsafe { raw::syscall(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]) };
        code
    }
    const STACK: usize = 64 * 1024;
    let mut stack = vec![0u8; STACK];
    let mut slot: Box<Option<F>> = Box::new(Some(child));
    let running = Box::new(std::sync::atomic::AtomicI32::new(1));
    // SAFETY: the stack and the slot are heap memory the returned `Beside` keeps until the
    // child has executed or exited (its drop waits for that); the stack grows down from its
    // 16-byte aligned top. `running` is the child's clear-tid word, which the kernel zeroes
    // and wakes at that moment. The closure only makes raw system calls (see the doc).
    let pid = unsafe {
        raw::clone_on(
            libc::CLONE_VM | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD,
            stack_top(&mut stack),
            running.as_ptr(),
            entry::<F>,
            std::ptr::from_mut::<Option<F>>(&mut slot).cast(),
        )
    };
    // The kernel returns a pid or -errno, both within an `int`.
    let pid = libc::pid_t::try_from(pid).unwrap_or(-libc::EINVAL);
    if pid < 0 {
        return Err(std::io::Error::from_raw_os_error(-pid));
    }
    Ok(Beside { pid, running, _stack: stack, _child: slot })
}

/// System calls without the C library, for a child running beside its parent in shared
/// memory ([`spawn_beside`]): libc's wrappers write errno, which is the parent's.
#[cfg(target_arch = "x86_64")]
pub mod raw {
    /// The call `nr` with `args`; the kernel's return value (-errno on failure).
    ///
    /// # Safety
    /// The arguments must be what call `nr` takes: pointers valid for what it reads and
    /// writes.
    pub unsafe fn syscall(nr: libc::c_long, args: [usize; 6]) -> isize {
        let ret: isize;
        // SAFETY: the caller passes valid arguments; `syscall` clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
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
        ret
    }

    /// `clone(flags)` with the child on `stack` (its 16-byte aligned top), calling
    /// `entry(arg)` there and exiting the process (`exit_group`) with what it returns; the
    /// child's clear-tid word is `child_tid` (`CLONE_CHILD_CLEARTID`). Returns the child's pid
    /// in the parent, or -errno. Not the C library's `clone`: musl refuses
    /// `CLONE_CHILD_CLEARTID` there (a thread it would not know of), and the child here is
    /// no thread, only a process that shares the memory until it executes.
    ///
    /// # Safety
    /// `stack` is the top of memory that stays the child's until it has executed or exited;
    /// `child_tid` stays valid as long; `entry` may only make raw system calls (the child
    /// shares the C library's state with this process, see [`super::spawn_beside`]).
    pub unsafe fn clone_on(
        flags: libc::c_int,
        stack: *mut libc::c_void,
        child_tid: *mut libc::c_int,
        entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
        arg: *mut libc::c_void,
    ) -> isize {
        let ret: isize;
        // SAFETY: the caller's promises. The parent returns from `syscall` as from any call
        // (rcx and r11 clobbered). The child returns from it on `stack` with the parent's
        // registers, `entry` and `arg` among them (r12 and r13 survive the call), calls
        // `entry` on a 16-byte aligned stack and ends in `exit_group`: it never comes back
        // into the code around it.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r13",
                "call r12",
                "mov edi, eax",
                "mov eax, {exit_group}",
                "syscall",
                "ud2",
                "2:",
                exit_group = const libc::SYS_exit_group,
                inlateout("rax") libc::SYS_clone as isize => ret,
                in("rdi") flags as usize,
                in("rsi") stack,
                in("rdx") 0usize,
                in("r10") child_tid,
                in("r8") 0usize,
                in("r12") entry,
                in("r13") arg,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        ret
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_child_runs_its_code_then_execs_and_the_parent_waits_for_that() {
        use std::sync::atomic::{AtomicI32, Ordering};
        // Written by the child before its exec: shared memory, seen once the parent resumes.
        static SEEN: AtomicI32 = AtomicI32::new(0);
        let (path, argv) = (c"/bin/sh", [c"sh".as_ptr(), c"-c".as_ptr(), c"exit 7".as_ptr()]);
        let argv = [argv[0], argv[1], argv[2], std::ptr::null()];
        let env = [std::ptr::null::<libc::c_char>()];
        let pid = super::spawn(|| {
            SEEN.store(1, Ordering::SeqCst);
            // SAFETY: NUL-terminated arrays of valid C strings; _exit is async-signal-safe.
            unsafe {
                libc::execve(path.as_ptr(), argv.as_ptr(), env.as_ptr());
                libc::_exit(127)
            }
        })
        .unwrap();
        assert_eq!(SEEN.load(Ordering::SeqCst), 1, "the parent resumed before the child ran");
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_child_beside_runs_while_the_parent_goes_on_and_its_data_lives_until_it_executes() {
        use std::sync::atomic::{AtomicI32, Ordering};
        static SEEN: AtomicI32 = AtomicI32::new(0);
        let (path, a0, a1, a2) = (c"/bin/sh", c"sh", c"-c", c"exit 7");
        let data = Box::new((
            [a0.as_ptr(), a1.as_ptr(), a2.as_ptr(), std::ptr::null()],
            [std::ptr::null::<libc::c_char>()],
        ));
        let ptrs = (data.0.as_ptr() as usize, data.1.as_ptr() as usize);
        let child = super::spawn_beside(move || {
            SEEN.store(1, Ordering::SeqCst);
            // SAFETY: NUL-terminated arrays of valid C strings, kept alive below.
            unsafe {
                super::raw::syscall(
                    libc::SYS_execve,
                    [path.as_ptr() as usize, ptrs.0, ptrs.1, 0, 0, 0],
                );
            }
            127
        })
        .unwrap();
        child.wait_exec();
        assert_eq!(SEEN.load(Ordering::SeqCst), 1, "the child ran before it executed");
        drop(data);
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        assert_eq!(unsafe { libc::waitpid(child.pid(), &mut status, 0) }, child.pid());
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }
}
