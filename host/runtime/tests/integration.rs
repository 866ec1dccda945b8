//! The runtime's integration tests, one module per file of this
//! directory, built as one test binary: one link of the crate and its
//! dependencies instead of one per file, and one copy of the shared
//! support modules.
//!
//! Run one file's tests with `cargo test -p wasm-informer-runtime --test integration FILE::`.

mod check_support;
mod log_capture;
mod polyglot_support;
mod runtime_support;

mod controller_workers;
mod polyglot_c;
mod polyglot_containment;
mod polyglot_guest_faults;
mod polyglot_js;
mod polyglot_manifests;
mod polyglot_measure;
mod polyglot_python;
mod polyglot_runtime_cost;
mod polyglot_sdk;
mod polyglot_templates;
mod polyglot_worlds;
mod runtime_check;
mod runtime_containment;
mod runtime_events;
mod runtime_sandbox;
