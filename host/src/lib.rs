//! wasm-informer: the host process. It reads a config directory, runs one
//! shared informer per resource ([`kube_informer`]) and feeds every plugin, a
//! sandboxed WebAssembly component ([`wasm_informer_runtime`]), from its own
//! listener.
//!
//! This crate is the top layer, the supervisor: it knows config files, hot
//! reload, metrics, the report and the command line, and wires the two layers
//! beneath it together. Neither of them knows this crate. See
//! `docs/ARCHITECTURE.md` for the map.

// What the operator writes: the config directory.
pub mod config;
pub mod memory;

// Supervision: plugins to listeners, switch-over, reload, shutdown.
pub mod host;
pub mod controller;
pub mod kube_api;
pub mod reload;
pub mod record;
pub mod shadow;
pub mod components;
pub mod drain;

// Replicas: leader election and sharding on Leases.
pub mod cluster;

// What the host reports.
pub mod report;
pub mod throttle;
pub mod metrics;
pub mod status;

// What the host needs from the cluster.
pub mod rbac;

// Running without a cluster, and the command line.
pub mod sim;
pub mod cli;

// Writing, testing and distributing plugins.
pub mod embedded;
pub mod oci;
pub mod fixture;
pub mod commands;
