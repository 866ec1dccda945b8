//! The simulator's integration tests, one module per file of this
//! directory, built as one test binary: one link of the crate and its
//! dependencies instead of one per file, and one copy of the shared
//! support modules.
//!
//! Run one file's tests with `cargo test -p apisim --test integration FILE::`.

mod common;
mod support;

mod api_surface;
mod auth_clients;
mod conformance;
mod consistency;
mod deadline;
mod events;
mod faults;
mod kinds;
mod kube_client;
mod kubectl;
mod paths;
mod rbac;
mod request_log;
mod shard;
mod validation;
mod watch_protocol;
mod writes;
