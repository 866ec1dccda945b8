//! A counting global allocator: wraps mimalloc (the allocator the
//! `wasm-informer` binary ships with; both sides of every comparison run on it)
//! and keeps the number of live heap bytes, so memory benchmarks can report
//! exactly what a cache holds.
//!
//! Invariant: `live_bytes()` equals bytes allocated minus bytes freed through this
//! allocator since the process started (realloc counts as free + alloc).
//!
//! Cost: the count is kept in [`SLOTS`] cache-line-sized counters, and each
//! thread adds to its own (chosen once per thread, round robin), so an
//! allocation costs one thread-local read and one uncontended relaxed atomic
//! add on a cache line no other thread writes while there are no more threads
//! than slots. No cache line moves between cores on the allocation path, so
//! timed runs on several threads do not serialise on the counter. Beyond
//! [`SLOTS`] threads, slots are shared (still exact, being atomic). A slot may
//! go negative (memory allocated on one thread and freed on another); only the
//! sum, read by [`live_bytes`] (a walk over every slot, 32 KiB), means anything.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use mimalloc::MiMalloc;

/// The counting allocator; installed as `#[global_allocator]` in `main.rs`.
pub struct CountingAlloc;

/// Number of per-thread counters: more than the threads any measured side runs.
pub const SLOTS: usize = 256;

/// One counter on a cache line of its own.
#[repr(align(128))]
struct Slot(AtomicI64);

/// Counters summed on read, one written per thread.
pub struct Counters {
    slots: [Slot; SLOTS],
}

impl Counters {
    /// All counters at zero.
    pub const fn new() -> Self {
        Counters {
            slots: [const { Slot(AtomicI64::new(0)) }; SLOTS],
        }
    }

    /// Adds `delta` to the calling thread's counter.
    #[inline]
    pub fn add(&self, delta: i64) {
        self.slots[slot()].0.fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum over every counter.
    pub fn sum(&self) -> i64 {
        self.slots.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` and without a destructor: reading it never allocates and works
    // while a thread is being torn down, as an allocator requires.
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's slot, chosen on its first allocation.
#[inline]
fn slot() -> usize {
    SLOT.try_with(|s| {
        let i = s.get();
        if i != usize::MAX {
            return i;
        }
        let i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        s.set(i);
        i
    })
    .unwrap_or(0)
}

static LIVE: Counters = Counters::new();

// SAFETY: every method forwards to mimalloc with the same arguments; the counter
// is only bookkeeping and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { MiMalloc.alloc(layout) };
        if !p.is_null() {
            LIVE.add(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.add(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(ptr, layout) };
        LIVE.add(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Live heap bytes allocated through the global allocator.
pub fn live_bytes() -> i64 {
    LIVE.sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes counted on one thread and uncounted on another sum to zero, and
    /// the sum is exact with more threads than slots.
    #[test]
    fn counters_sum_to_allocated_minus_freed_across_threads() {
        let c = std::sync::Arc::new(Counters::new());
        let threads = SLOTS + 17;
        let adders: Vec<_> = (0..threads)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(i as i64 + 1);
                    }
                })
            })
            .collect();
        for t in adders {
            t.join().unwrap();
        }
        let added: i64 = (1..=threads as i64).map(|n| n * 1000).sum();
        assert_eq!(c.sum(), added);
        let c2 = c.clone();
        std::thread::spawn(move || c2.add(-added)).join().unwrap();
        assert_eq!(c.sum(), 0);
    }

    /// The installed allocator counts a large allocation made and freed on
    /// different threads (other tests allocate meanwhile, hence the margin).
    #[test]
    fn live_bytes_follow_an_allocation_freed_on_another_thread() {
        const N: usize = 256 << 20;
        let _one = crate::mem::MEMORY_TESTS.lock();
        let before = live_bytes();
        let v = std::thread::spawn(|| vec![7u8; N]).join().unwrap();
        let held = live_bytes() - before;
        std::thread::spawn(move || drop(v)).join().unwrap();
        let after = live_bytes() - before;
        assert!(
            (N as i64 - (16 << 20)..N as i64 + (16 << 20)).contains(&held),
            "held {held}"
        );
        assert!(after.abs() < 16 << 20, "after free {after}");
    }
}
