//! I4 measured on the heap: a counting global allocator (this test binary
//! holds this one test, so nothing else allocates meanwhile) shows that a
//! listener whose handler never returns holds at most its queue capacity of
//! notifications plus one small entry per key, however many events go by.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use kube_informer::delta_fifo::DeltaFifo;
use kube_informer::handler::{Delivery, Handler};
use kube_informer::indexer::Indexer;
use kube_informer::notification::NotificationRef;
use kube_informer::object::{Object, ObjectRef, Transform};
use kube_informer::processor::Processor;
use kube_informer::HandlerOptions;

/// Live heap bytes, as the allocator sees them.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Never finishes handling its first notification.
struct Stuck;

impl Handler for Stuck {
    async fn handle(&mut self, _n: NotificationRef) -> Delivery {
        std::future::pending::<()>().await;
        Delivery::Ok
    }
}

fn pod(i: usize, rv: usize) -> ObjectRef {
    let raw = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p{i}","namespace":"ns{}","uid":"uid-{i}","resourceVersion":"{rv}","labels":{{"app":"a"}}}},"spec":{{"x":"{}"}}}}"#,
        i % 4,
        "y".repeat(200)
    );
    Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_a_stuck_listener_grows_the_heap_by_its_capacity_and_one_entry_per_key() {
    const KEYS: usize = 10_000;
    const CAPACITY: usize = 1024;
    let indexer = Arc::new(Indexer::new());
    let fifo = DeltaFifo::new(indexer.clone());
    let processor = Processor::new("v1/pods", indexer.clone());
    let drain = || {
        while let Some(p) = fifo.try_pop() {
            processor.handle_deltas(&p);
            fifo.done(&p);
        }
        if fifo.has_synced() && !processor.has_synced() {
            processor.mark_synced();
        }
    };
    fifo.replace((0..KEYS).map(|i| pod(i, i + 1)).collect());
    drain();
    // Every version the test will write, built before measuring: the cache
    // and the versions are the test's, not the listener's.
    let versions: Vec<ObjectRef> = (0..KEYS * 3).map(|i| pod(i % KEYS, KEYS + i + 1)).collect();
    let mut next = 0usize;
    let mut dispatch = |n: usize| {
        for _ in 0..n {
            // A fixed stride over the versions touches every key.
            fifo.update(versions[next % versions.len()].clone());
            next += 7919;
            drain();
        }
    };
    // One pass over every key with no listener, so the Indexer has held a
    // pre-built version of each key once (its own allocations settle).
    dispatch(KEYS);
    let before = live();
    let stuck = processor
        .add_handler(
            Stuck,
            HandlerOptions::named("stuck").queue_capacity(CAPACITY),
        )
        .unwrap();
    // Fill the queue and make every key pending.
    dispatch(CAPACITY + 3 * KEYS);
    let filled = live();
    let pending = stuck.pending_keys();
    // A million more: nothing more may be held.
    dispatch(1_000_000);
    let after = live();
    let held = filled - before;
    let grew = after - filled;
    eprintln!(
        "I4 heap: {KEYS} keys, capacity {CAPACITY}: the stuck listener holds {held} bytes after filling up \
         ({} per key), and grew by {grew} bytes over 1,000,000 more events",
        held / KEYS as isize
    );
    // A full queue plus one entry per key (generous per-entry sizes: a queued
    // notification is an Arc'd record of a few pointers; a pending key a map
    // slot holding the key's Arc and a flag).
    let bound = (CAPACITY * 512 + KEYS * 256) as isize;
    assert!(held <= bound, "held {held} bytes, bound {bound}");
    assert!(
        grew <= (KEYS * 128) as isize,
        "the heap grew by {grew} bytes over a million events beside a stuck listener"
    );
    assert!(pending > KEYS / 2, "most keys were pending: {pending}");
    drop(stuck);
}
