//! The system allocator, counting the bytes live: shared by the examples
//! that measure what a structure costs on the heap (`history_bytes`,
//! `probe_state_bytes`), each with `#[path = "support/counting.rs"] mod
//! counting;` and `#[global_allocator] static GLOBAL: counting::Counting =
//! counting::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting the bytes live in [`live`].
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The bytes allocated and not yet freed, through [`Counting`].
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: a pointer this allocator gave, with its layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: as `realloc`'s contract.
        unsafe { System.realloc(p, l, new) }
    }
}
