//! The process without a C library: its entry point `_start`, the panic handler, and the
//! memory functions the compiler emits calls to (`memcpy`, `memmove`, `memset`, `memcmp`,
//! `bcmp`), which a C library would otherwise provide.

use core::arch::{asm, global_asm};
use core::ffi::{CStr, c_char};

use crate::{supervise, sys};

// The kernel starts the process here with `rsp` at argc, then the argv pointers: the stack
// is realigned for the call (it is 16-byte aligned at entry, and the call pushes 8 bytes as
// the ABI expects) and the frame pointer zeroed, as for any outermost frame.
global_asm!(
    ".globl _start",
    ".type _start, @function",
    "_start:",
    "xor ebp, ebp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {entry}",
    "ud2",
    entry = sym entry,
);

/// The most arguments read; bwrap passes four. More is a usage error.
const MAX_ARGS: usize = 16;

/// # Safety
/// Called once, by `_start`, with the stack pointer the kernel gave the process.
unsafe extern "C" fn entry(sp: *const usize) -> ! {
    // SAFETY: at process entry `sp` points at argc, followed by argc pointers to
    // NUL-terminated strings (and a NULL), which stay valid for the process's life.
    let (argc, argv) = unsafe { (*sp, sp.add(1).cast::<*const c_char>()) };
    let mut args: [&CStr; MAX_ARGS] = [c""; MAX_ARGS];
    let count = if argc > MAX_ARGS { 0 } else { argc };
    for (i, slot) in args.iter_mut().enumerate().take(count) {
        // SAFETY: as above, for i < argc.
        *slot = unsafe { CStr::from_ptr(*argv.add(i)) };
    }
    sys::exit(supervise::main(&args[..count]))
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    let _ = sys::write(2, b"paddock: sandbox supervisor: internal error; the task was not run\n");
    sys::exit(crate::constants::EXIT_SUPERVISOR)
}

/// # Safety
/// As C's `memcpy`: valid, non-overlapping regions of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: `rep movsb` copies rcx bytes from rsi to rdi, forwards (the ABI guarantees
    // the direction flag is clear); the caller gives valid regions.
    unsafe {
        asm!("rep movsb", inout("rcx") n => _, inout("rdi") dst => _, inout("rsi") src => _,
            options(nostack, preserves_flags));
    }
    dst
}

/// # Safety
/// As C's `memmove`: valid regions of `n` bytes, which may overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize).wrapping_sub(src as usize) >= n {
        // The destination starts before the source, or after its end: forwards is safe.
        // SAFETY: as for `memcpy`, which copies forwards.
        return unsafe { memcpy(dst, src, n) };
    }
    // SAFETY: backwards from the last byte (the direction flag set for the copy and cleared
    // again, as the ABI requires); the caller gives valid regions.
    unsafe {
        asm!("std", "rep movsb", "cld",
            inout("rcx") n => _,
            inout("rdi") dst.add(n).wrapping_sub(1) => _,
            inout("rsi") src.add(n).wrapping_sub(1) => _,
            options(nostack));
    }
    dst
}

/// # Safety
/// As C's `memset`: a valid region of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dst: *mut u8, byte: i32, n: usize) -> *mut u8 {
    // SAFETY: `rep stosb` stores al into rcx bytes from rdi, forwards; the region is valid.
    unsafe {
        asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _, in("al") byte as u8,
            options(nostack, preserves_flags));
    }
    dst
}

/// # Safety
/// As C's `memcmp`: valid regions of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: i < n, inside both regions. Volatile reads keep the compiler from turning
        // this loop into a call to `memcmp` itself.
        let (x, y) = unsafe { (a.add(i).read_volatile(), b.add(i).read_volatile()) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// # Safety
/// As C's `bcmp`: valid regions of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcmp(a, b, n) }
}

/// # Safety
/// As C's `strlen`: a NUL-terminated string (`CStr::from_ptr` calls it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn strlen(s: *const c_char) -> usize {
    let mut n = 0;
    // SAFETY: every byte up to the NUL is inside the string. Volatile, as in `memcmp`.
    while unsafe { s.add(n).read_volatile() } != 0 {
        n += 1;
    }
    n
}

/// The unwinder's personality routine, which the precompiled core refers to from its unwind
/// tables. Nothing unwinds here (panics abort, and there is no unwinder to call it), so it is
/// never called; a debug build, which keeps those tables, needs the symbol to link.
#[unsafe(no_mangle)]
pub extern "C" fn rust_eh_personality() {}
