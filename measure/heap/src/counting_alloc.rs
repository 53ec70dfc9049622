//! The counting allocator of the heap-size programs (`src/bin/grant_cache_bytes.rs`,
//! `src/bin/request_cache_bytes.rs`): the system allocator, counting the bytes live, the
//! allocations live and every byte ever allocated. Each program installs [`Counting`] as its
//! global allocator.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicIsize, Ordering},
};

/// Bytes allocated and not yet freed.
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Allocations not yet freed.
static ALLOCATIONS: AtomicIsize = AtomicIsize::new(0);
/// Every byte ever allocated: what a step made on the way, kept or not.
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);

pub struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        ALLOCATED.fetch_add(layout.size() as isize, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        ALLOCATIONS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Bytes live now.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Allocations live now.
pub fn allocations() -> isize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Bytes allocated so far, freed or not.
pub fn allocated() -> isize {
    ALLOCATED.load(Ordering::Relaxed)
}
