//! The C library's allocation functions (`malloc`, `free` and the rest) over [`Allocator`],
//! which the binaries built with musl define in place of musl's own
//! ([`crate::c_allocation_functions`]).
//!
//! Rust's allocations already go to [`Allocator`]; what is left to musl's allocator is what
//! musl allocates itself, chiefly `opendir`'s directory stream: about 2 KiB, which musl's
//! allocator (mallocng) maps as a group of its own and unmaps again at `closedir`. A run
//! reads some twenty directories, so that was twenty `mmap`/`munmap` pairs, and an `munmap`
//! in a process whose memory another task uses (the prespawned child shares the runner's
//! until it executes bwrap; the observer's threads) flushes that task's CPU's TLB with an
//! interrupt, which a virtual machine makes dear: routing these to [`Allocator`] took 0.6
//! to 0.9 ms off a run (interleaved A/B against the build before, ARCHITECTURE.md).
//!
//! Each block carries a header of two words just before it, the size and alignment of the
//! whole allocation it ends, so that `free` hands [`Allocator`] the layout it was made with.
//! The block starts one alignment (at least [`MIN_ALIGN`]) past the allocation's start.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_void};

use super::Allocator;

/// The header before each block: the whole allocation's size and alignment.
type Header = [usize; 2];

/// The header's size; it fits in the alignment's worth of bytes before the block.
const HEADER: usize = std::mem::size_of::<Header>();

/// `malloc`'s alignment: `max_align_t`'s on the 64-bit platforms musl builds are made for.
pub const MIN_ALIGN: usize = 16;

const _: () = assert!(HEADER <= MIN_ALIGN);

/// The whole allocation for a block of `size` bytes aligned to `align` (a power of two);
/// `None` when it would not fit the address space.
fn whole(size: usize, align: usize) -> Option<Layout> {
    let align = align.max(MIN_ALIGN);
    Layout::from_size_align(size.checked_add(align)?, align).ok()
}

fn out_of_memory() -> *mut c_void {
    // SAFETY: the calling thread's errno, which the C library keeps for it.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
    std::ptr::null_mut()
}

/// A block of `size` bytes aligned to `align` (a power of two), zeroed if asked.
fn allocate(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    let Some(layout) = whole(size, align) else { return out_of_memory() };
    // SAFETY: a layout of a non-zero size (at least the alignment).
    let start =
        unsafe { if zeroed { Allocator.alloc_zeroed(layout) } else { Allocator.alloc(layout) } };
    if start.is_null() {
        return out_of_memory();
    }
    // SAFETY: the block starts one alignment into the allocation, which is that much
    // longer than the block; the header's bytes are the last of that alignment's worth, in
    // the allocation, and aligned for words (the block is aligned to at least 16).
    unsafe {
        let block = start.add(layout.align());
        block.sub(HEADER).cast::<Header>().write([layout.size(), layout.align()]);
        block.cast()
    }
}

/// The allocation a block of [`allocate`] ends, and its layout.
///
/// # Safety
/// `block` came from [`allocate`] and was not freed.
unsafe fn allocation_of(block: *mut c_void) -> (*mut u8, Layout) {
    let block = block.cast::<u8>();
    // SAFETY: the header `allocate` wrote just before the block.
    let [size, align] = unsafe { block.sub(HEADER).cast::<Header>().read() };
    // SAFETY: the allocation starts one alignment before the block; its layout was valid.
    unsafe { (block.sub(align), Layout::from_size_align_unchecked(size, align)) }
}

/// C's `malloc`.
pub fn malloc(size: usize) -> *mut c_void {
    allocate(size, MIN_ALIGN, false)
}

/// C's `calloc`: zeroed, and null when the product overflows.
pub fn calloc(count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        Some(size) => allocate(size, MIN_ALIGN, true),
        None => out_of_memory(),
    }
}

/// C's `free`.
///
/// # Safety
/// `block` is null or came from one of this module's functions and was not freed.
pub unsafe fn free(block: *mut c_void) {
    if block.is_null() {
        return;
    }
    // SAFETY: the caller's block, of this module.
    let (start, layout) = unsafe { allocation_of(block) };
    // SAFETY: the allocation, with the layout it was made with.
    unsafe { Allocator.dealloc(start, layout) };
}

/// C's `realloc`: the contents kept up to the smaller size; on failure null, and the block
/// left as it was. `realloc(p, 0)` returns a block of no bytes, as musl's does.
///
/// # Safety
/// As for [`free`].
pub unsafe fn realloc(block: *mut c_void, size: usize) -> *mut c_void {
    if block.is_null() {
        return malloc(size);
    }
    // SAFETY: the caller's block, of this module.
    let (start, layout) = unsafe { allocation_of(block) };
    if layout.align() == MIN_ALIGN {
        let Some(new) = whole(size, MIN_ALIGN) else { return out_of_memory() };
        // SAFETY: the allocation with its layout; the new size is non-zero and fits (`whole`).
        let moved = unsafe { Allocator.realloc(start, layout, new.size()) };
        if moved.is_null() {
            return out_of_memory();
        }
        // SAFETY: the same place in the resized allocation as `allocate` uses.
        unsafe {
            let block = moved.add(MIN_ALIGN);
            block.sub(HEADER).cast::<Header>().write([new.size(), MIN_ALIGN]);
            return block.cast();
        }
    }
    // A block of a larger alignment (`aligned_alloc`'s) moves into one of malloc's: realloc
    // promises malloc's alignment only.
    let moved = malloc(size);
    if !moved.is_null() {
        // SAFETY: two live blocks, each at least this long; the old one is the caller's.
        unsafe {
            let len = (layout.size() - layout.align()).min(size);
            std::ptr::copy_nonoverlapping(block.cast::<u8>(), moved.cast::<u8>(), len);
            free(block);
        }
    }
    moved
}

/// C's `aligned_alloc` (and `memalign`): null with `EINVAL` unless `align` is a power of two.
pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        // SAFETY: the calling thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return std::ptr::null_mut();
    }
    allocate(size, align, false)
}

/// C's `posix_memalign`: `EINVAL` unless `align` is a power of two and a multiple of a
/// pointer's size, `ENOMEM` when out of memory; `*out` is set only on success.
///
/// # Safety
/// `out` is valid for a write.
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let block = allocate(size, align, false);
    if block.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's pointer, valid for a write.
    unsafe { out.write(block) };
    0
}

/// C's `malloc_usable_size`: the bytes the block may use (0 for null).
///
/// # Safety
/// As for [`free`].
pub unsafe fn malloc_usable_size(block: *mut c_void) -> usize {
    if block.is_null() {
        return 0;
    }
    // SAFETY: the caller's block, of this module.
    let (_, layout) = unsafe { allocation_of(block) };
    layout.size() - layout.align()
}

/// Defines the C library's allocation functions in the binary that expands it, over this
/// module (see its doc). Only in a binary, and only where the C library lets a program
/// replace them (musl); the library never does it.
#[macro_export]
macro_rules! c_allocation_functions {
    () => {
        /// C's `malloc`: see `paddock::allocator::c_api`.
        #[unsafe(no_mangle)]
        pub extern "C" fn malloc(size: usize) -> *mut std::ffi::c_void {
            $crate::allocator::c_api::malloc(size)
        }

        /// C's `calloc`: see `paddock::allocator::c_api`.
        #[unsafe(no_mangle)]
        pub extern "C" fn calloc(count: usize, size: usize) -> *mut std::ffi::c_void {
            $crate::allocator::c_api::calloc(count, size)
        }

        /// C's `free`: see `paddock::allocator::c_api`.
        ///
        /// # Safety
        /// C's: a block of these functions, or null.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn free(block: *mut std::ffi::c_void) {
            // SAFETY: C's contract, the caller's.
            unsafe { $crate::allocator::c_api::free(block) }
        }

        /// C's `realloc`: see `paddock::allocator::c_api`.
        ///
        /// # Safety
        /// C's: a block of these functions, or null.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn realloc(
            block: *mut std::ffi::c_void,
            size: usize,
        ) -> *mut std::ffi::c_void {
            // SAFETY: C's contract, the caller's.
            unsafe { $crate::allocator::c_api::realloc(block, size) }
        }

        /// C's `aligned_alloc`: see `paddock::allocator::c_api`.
        #[unsafe(no_mangle)]
        pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut std::ffi::c_void {
            $crate::allocator::c_api::aligned_alloc(align, size)
        }

        /// C's `memalign`, as `aligned_alloc`.
        #[unsafe(no_mangle)]
        pub extern "C" fn memalign(align: usize, size: usize) -> *mut std::ffi::c_void {
            $crate::allocator::c_api::aligned_alloc(align, size)
        }

        /// C's `posix_memalign`: see `paddock::allocator::c_api`.
        ///
        /// # Safety
        /// C's: `out` valid for a write.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn posix_memalign(
            out: *mut *mut std::ffi::c_void,
            align: usize,
            size: usize,
        ) -> std::ffi::c_int {
            // SAFETY: C's contract, the caller's.
            unsafe { $crate::allocator::c_api::posix_memalign(out, align, size) }
        }

        /// C's `malloc_usable_size`: see `paddock::allocator::c_api`.
        ///
        /// # Safety
        /// C's: a block of these functions, or null.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn malloc_usable_size(block: *mut std::ffi::c_void) -> usize {
            // SAFETY: C's contract, the caller's.
            unsafe { $crate::allocator::c_api::malloc_usable_size(block) }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<'a>(block: *mut c_void, len: usize) -> &'a mut [u8] {
        // SAFETY: the tests' live blocks, at least `len` long.
        unsafe { std::slice::from_raw_parts_mut(block.cast::<u8>(), len) }
    }

    #[test]
    fn blocks_are_aligned_usable_and_freed() {
        for size in [0, 1, 15, 16, 100, 4096, 300 * 1024] {
            let block = malloc(size);
            assert!(!block.is_null());
            assert_eq!(block as usize % MIN_ALIGN, 0, "size {size}");
            // SAFETY: a live block of this module.
            assert_eq!(unsafe { malloc_usable_size(block) }, size);
            bytes(block, size).fill(0xa5);
            // SAFETY: as above, freed once.
            unsafe { free(block) };
        }
        // SAFETY: null is a no-op.
        unsafe { free(std::ptr::null_mut()) };
        // SAFETY: null has no usable bytes.
        assert_eq!(unsafe { malloc_usable_size(std::ptr::null_mut()) }, 0);
    }

    #[test]
    fn calloc_zeroes_and_refuses_an_overflowing_product() {
        for size in [10, 300 * 1024] {
            let block = calloc(size, 3);
            assert!(bytes(block, size * 3).iter().all(|b| *b == 0));
            // SAFETY: a live block, freed once.
            unsafe { free(block) };
        }
        assert!(calloc(usize::MAX / 2, 3).is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENOMEM));
        assert!(malloc(usize::MAX - 8).is_null());
    }

    #[test]
    fn realloc_keeps_the_contents_across_the_heap_and_mapping_sizes() {
        let mut block = malloc(100);
        for (i, b) in bytes(block, 100).iter_mut().enumerate() {
            *b = i as u8;
        }
        // Up past `LARGE` (a mapping of its own), further, and back down to the heap.
        for size in [1024 * 1024, 3 * 1024 * 1024, 50] {
            // SAFETY: the live block, replaced by the result.
            block = unsafe { realloc(block, size) };
            assert!(!block.is_null());
            assert_eq!(block as usize % MIN_ALIGN, 0);
            // SAFETY: a live block.
            assert_eq!(unsafe { malloc_usable_size(block) }, size);
            assert!(bytes(block, 50).iter().enumerate().all(|(i, b)| *b == i as u8));
        }
        // SAFETY: the live block, freed once.
        unsafe { free(block) };
        // SAFETY: null reallocates as malloc.
        let fresh = unsafe { realloc(std::ptr::null_mut(), 8) };
        assert!(!fresh.is_null());
        // SAFETY: a live block, freed once.
        unsafe { free(fresh) };
    }

    #[test]
    fn aligned_blocks_keep_their_alignment_and_realloc_into_plain_ones() {
        for align in [32, 64, 4096, 64 * 1024] {
            let block = aligned_alloc(align, 1000);
            assert_eq!(block as usize % align, 0, "align {align}");
            bytes(block, 1000).fill(7);
            // SAFETY: a live block.
            assert_eq!(unsafe { malloc_usable_size(block) }, 1000);
            // SAFETY: the live block, replaced by the result.
            let moved = unsafe { realloc(block, 2000) };
            assert!(bytes(moved, 1000).iter().all(|b| *b == 7));
            // SAFETY: a live block, freed once.
            unsafe { free(moved) };
        }
        assert!(aligned_alloc(24, 10).is_null());
        let mut out = std::ptr::null_mut();
        // SAFETY: `out` is valid for a write.
        unsafe {
            assert_eq!(posix_memalign(&mut out, 4, 10), libc::EINVAL);
            assert_eq!(posix_memalign(&mut out, 48, 10), libc::EINVAL);
            assert!(out.is_null());
            assert_eq!(posix_memalign(&mut out, 256, 10), 0);
        }
        assert_eq!(out as usize % 256, 0);
        // SAFETY: a live block, freed once.
        unsafe { free(out) };
    }
}
