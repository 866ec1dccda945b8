//! The informer's integration tests, one module per file of this
//! directory, built as one test binary: one link of the crate and its
//! dependencies instead of one per file, and one copy of the shared
//! support modules.
//! `informer_memory` stays a binary of its own: it installs a counting
//! global allocator, and no other test may allocate beside it.
//!
//! Run one file's tests with `cargo test -p kube-informer --test integration FILE::`.

mod informer_support;
mod workqueue_support;

mod informer_backoff;
mod informer_convergence;
mod informer_dispatch;
mod informer_ownership;
mod informer_reflector;
mod informer_resync;
mod informer_shard;
mod informer_shared;
mod workqueue_ageing;
mod workqueue_guarantees;
mod workqueue_handover;
mod workqueue_sharding;
