//! A counting global allocator: wraps mimalloc (the allocator the
//! `wasm-informer` binary ships with; both sides of every comparison run on it)
//! and keeps the number of live heap bytes, so memory benchmarks can report
//! exactly what a cache holds.
//!
//! Invariant: `live_bytes()` equals bytes allocated minus bytes freed through this
//! allocator since the process started (realloc counts as free + alloc).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};

use mimalloc::MiMalloc;

/// The counting allocator; installed as `#[global_allocator]` in `main.rs`.
pub struct CountingAlloc;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method forwards to mimalloc with the same arguments; the counter
// is only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

/// Live heap bytes allocated through the global allocator.
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}
