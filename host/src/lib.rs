//! wasm-informer: shared Kubernetes informers feeding sandboxed WebAssembly
//! event handlers.
//!
//! The modules follow the data flow (see `docs/ARCHITECTURE.md`):
//! reflector → delta_fifo → indexer → processor/listener → plugin runtime.

pub mod cache_view;
pub mod handler;
pub mod notification;
pub mod object;
