//! wasm-informer: shared Kubernetes informers feeding sandboxed WebAssembly
//! event handlers.
//!
//! The modules follow the data flow (see `docs/ARCHITECTURE.md`):
//! reflector → delta_fifo → indexer → processor/listener → plugin runtime.

pub mod object;
pub mod notification;
pub mod handler;
pub mod cache_view;
pub mod runtime;
