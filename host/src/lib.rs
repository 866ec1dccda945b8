//! wasm-informer: shared Kubernetes informers feeding sandboxed WebAssembly
//! event handlers.
//!
//! The modules follow the data flow (see `docs/ARCHITECTURE.md`):
//! reflector → delta_fifo → indexer → processor/listener → plugin runtime, and
//! around them the host that wires them to a config directory.

// What flows through the pipeline.
pub mod resource;
pub mod str_map;
pub mod object;
pub mod notification;

// The informer, in data-flow order. None of it knows about Wasm.
pub mod backoff;
pub mod reflector;
pub mod delta_fifo;
pub mod indexer;
pub mod processor;
pub mod listener;
pub mod handler;
pub mod informer;
pub mod cache_view;

// The plugin runtime: the only part that knows about Wasm.
pub mod runtime;

// The host: configuration, supervision, hot reload and what it reports.
pub mod config;
pub mod host;
pub mod drain;
pub mod latency;
pub mod reload;
pub mod report;
pub mod metrics;
pub mod status;
pub mod sim;
pub mod cli;
