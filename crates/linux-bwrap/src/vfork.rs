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
        let top = stack.as_mut_ptr().add(STACK);
        let top = top.sub(top as usize % 16);
        libc::clone(
            entry::<F>,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_mut(&mut slot).cast(),
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid)
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
}
