//! wasm-informer: shared Kubernetes informers feeding sandboxed WebAssembly
//! event handlers.
//!
//! The modules follow the data flow (see `docs/ARCHITECTURE.md`):
//! reflector → delta_fifo → indexer → processor/listener → plugin runtime.

pub mod cache_view;
pub mod cli;
pub mod config;
pub mod handler;
pub mod latency;
pub mod metrics;
pub mod notification;
pub mod object;
pub mod reload;
pub mod report;
pub mod status;
