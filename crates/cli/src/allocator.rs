//! The binaries' memory allocator where the C library's is slow to use (musl's): dlmalloc for
//! ordinary sizes, pages of their own from the kernel for large ones, as glibc's allocator
//! does.
//!
//! Built with musl, paddock starts in a tenth of the time a static glibc takes (no `cpuid`
//! probing of the CPU's caches, which exits to the hypervisor in a virtual machine), but
//! musl's allocator made the planning twice as slow. dlmalloc is quick for the many small
//! allocations of a plan; its Rust port takes every size from one heap, though, so a large
//! zeroed buffer (the observer's 16 MiB FUSE read buffer) would be cleared byte by byte.
//! Large sizes here are fresh anonymous mappings, zero already, returned to the kernel when
//! freed and grown with `mremap`. mimalloc was measured too: slower to start than the
//! planning it speeds up.
//!
//! The library never installs it: a program embedding paddock keeps its own allocator. The
//! binaries do (`#[global_allocator]`) when built for musl, and route the C library's own
//! allocations to it as well ([`c_api`]).

use std::alloc::{GlobalAlloc, Layout};

pub mod c_api;

/// See the module doc.
#[derive(Debug)]
pub struct Allocator;

/// The size from which an allocation is a mapping of its own (glibc's default threshold is
/// 128 KiB; this one keeps buffers of a few hundred KiB in the heap).
const LARGE: usize = 256 * 1024;

/// The kernel's page size on the platforms musl builds are made for; mappings are whole
/// pages, so their alignment is at least this.
const PAGE: usize = 4096;

/// dlmalloc's global heap (its state is its own, and only a binary that installs
/// [`Allocator`] uses it).
const SMALL: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn is_large(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= PAGE
}

fn pages(size: usize) -> usize {
    size.div_ceil(PAGE) * PAGE
}

/// A fresh anonymous mapping of `size` bytes (zeroed by the kernel), or null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: a new private anonymous mapping; nothing of ours is at the address returned.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages(size),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast() }
}

// SAFETY: every block comes either from dlmalloc or from a mapping of its own, chosen by its
// layout alone (`is_large`), which `dealloc` and `realloc` are given unchanged, so each block
// goes back to where it came from; mappings are page-aligned, which serves any alignment
// `is_large` admits.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's layout, of a non-zero size.
            unsafe { SMALL.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            map(layout.size())
        } else {
            // SAFETY: as in `alloc`.
            unsafe { SMALL.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout) {
            // SAFETY: `ptr` is the mapping `alloc` made for this layout, of these pages.
            unsafe { libc::munmap(ptr.cast(), pages(layout.size())) };
        } else {
            // SAFETY: `ptr` came from dlmalloc with this layout.
            unsafe { SMALL.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller promises `new_size`, rounded up to the alignment, fits an
        // `isize`; the alignment is the block's.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(layout), is_large(new_layout)) {
            // SAFETY: a dlmalloc block resized to a size dlmalloc keeps.
            (false, false) => unsafe { SMALL.realloc(ptr, layout, new_size) },
            (true, true) => {
                // SAFETY: `ptr` is a mapping of `pages(layout.size())` bytes; the kernel
                // moves it whole if it must (new pages are zero).
                let p = unsafe {
                    libc::mremap(
                        ptr.cast(),
                        pages(layout.size()),
                        pages(new_size),
                        libc::MREMAP_MAYMOVE,
                    )
                };
                if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast() }
            }
            _ => {
                // SAFETY: a non-zero size (`new_size` is at least the smaller of the two
                // sides of the boundary, or the old block is large and the new one not).
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: two distinct live blocks, each at least this long; the old one
                    // goes back where it came from.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn large_blocks_are_zeroed_mappings_and_small_ones_come_from_the_heap() {
        let a = Allocator;
        for size in [1, 100, LARGE - 1, LARGE, 16 * 1024 * 1024 + 4096] {
            let l = layout(size, 8);
            // SAFETY: a non-zero layout; the block is written within its size, then freed
            // with the same layout.
            unsafe {
                let p = a.alloc_zeroed(l);
                assert!(!p.is_null());
                let bytes = std::slice::from_raw_parts_mut(p, size);
                assert!(bytes.iter().all(|b| *b == 0), "{size} bytes not zeroed");
                bytes.fill(0xa5);
                a.dealloc(p, l);
            }
        }
    }

    #[test]
    fn a_block_keeps_its_bytes_when_resized_across_the_large_boundary_both_ways() {
        let a = Allocator;
        let mut l = layout(1000, 16);
        // SAFETY: blocks used within their sizes and resized with the layouts they have.
        unsafe {
            let mut p = a.alloc(l);
            for (i, b) in std::slice::from_raw_parts_mut(p, 1000).iter_mut().enumerate() {
                *b = i as u8;
            }
            for new_size in [LARGE + 10, 4 * LARGE, LARGE + 1, 500, 2 * LARGE] {
                p = a.realloc(p, l, new_size);
                assert!(!p.is_null());
                assert_eq!(p as usize % 16, 0, "alignment lost at {new_size}");
                let kept = std::slice::from_raw_parts(p, 500);
                assert!(kept.iter().enumerate().all(|(i, b)| *b == i as u8), "at {new_size}");
                l = layout(new_size, 16);
            }
            a.dealloc(p, l);
        }
    }

    #[test]
    fn a_large_block_aligned_beyond_a_page_comes_from_the_heap_aligned() {
        let a = Allocator;
        let l = layout(LARGE, 2 * PAGE);
        // SAFETY: a non-zero layout, freed with itself.
        unsafe {
            let p = a.alloc(l);
            assert!(!p.is_null());
            assert_eq!(p as usize % (2 * PAGE), 0);
            a.dealloc(p, l);
        }
    }
}
