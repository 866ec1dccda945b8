//! wasm-informer: shared Kubernetes informers feeding sandboxed WebAssembly
//! event handlers.
//!
//! The modules follow the data flow (see `docs/ARCHITECTURE.md`):
//! reflector → delta_fifo → indexer → processor/listener → plugin runtime.

pub mod backoff;
pub mod cache_view;
pub mod cli;
pub mod config;
pub mod delta_fifo;
pub mod drain;
pub mod handler;
pub mod host;
pub mod indexer;
pub mod informer;
pub mod latency;
pub mod listener;
pub mod metrics;
pub mod notification;
pub mod object;
pub mod processor;
pub mod reflector;
pub mod reload;
pub mod report;
pub mod resource;
pub mod runtime;
pub mod sim;
pub mod status;
