//! Memory without an allocator: every buffer is a mapping of its own, never freed (the
//! supervisor makes a handful, and the process is short-lived; its exit returns them).

use libc::c_int;

use crate::sys::{self, Errno};

/// `count` zeroed values of a plain type (integers, pointers, C structs of those), in memory
/// of their own.
pub fn array<T: Copy>(count: usize) -> Result<&'static mut [T], Errno> {
    let len = count.checked_mul(core::mem::size_of::<T>()).ok_or(Errno(libc::ENOMEM))?;
    let ptr = sys::map(len.max(1))?;
    // SAFETY: a fresh private mapping of `len` bytes (page-aligned, so aligned for `T`),
    // zeroed, which is a valid `T` for the plain types this is used for; nobody else has it.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr.cast::<T>(), count) })
}

/// Everything `fd` holds until end of file, then closes it (the descriptor was handed to the
/// supervisor alone, and must not reach the task).
pub fn read_all(fd: c_int) -> Result<&'static mut [u8], Errno> {
    let mut cap = 64 * 1024;
    let mut ptr = sys::map(cap)?;
    let mut len = 0;
    let result = loop {
        if len == cap {
            match sys::remap(ptr, cap, cap * 2) {
                Ok(moved) => (ptr, cap) = (moved, cap * 2),
                Err(e) => break Err(e),
            }
        }
        // SAFETY: `ptr` maps `cap` bytes of our own, of which `len` are filled.
        let free = unsafe { core::slice::from_raw_parts_mut(ptr.add(len), cap - len) };
        match sys::read(fd, free) {
            Ok(0) => break Ok(()),
            Ok(n) => len += n,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => break Err(e),
        }
    };
    sys::close(fd);
    result?;
    // SAFETY: the first `len` bytes of the mapping, filled by `read`.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr, len) })
}
