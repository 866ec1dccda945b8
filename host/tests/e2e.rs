//! The host's end-to-end tests, one module per file of this directory, built
//! as one test binary: one link of the host and its dependencies instead of
//! one per file, and one copy of the shared support modules (with their own
//! unit tests run once). `audit_lines` stays a binary of its own: it installs
//! the process's global log subscriber.
//!
//! Run one file's tests with `cargo test -p wasm-informer --test e2e FILE::`.

mod cluster_support;
mod host_support;
mod inproc_support;
mod probe_support;

mod authoring_dev;
mod authoring_incremental;
mod authoring_live_view;
mod authoring_oci;
mod authoring_templates;
mod authoring_test_command;
mod authoring_top;
mod cluster_init;
mod cluster_leader;
mod cluster_nemesis;
mod cluster_partition;
mod cluster_sharded;
mod cluster_source_shard;
mod cluster_soak;
mod controller_e2e;
mod deploy_manifests;
mod host_bad_config;
mod host_budgets;
mod host_bulk_load;
mod host_cache;
mod host_check;
mod host_cli;
mod host_config;
mod host_examples;
mod host_faults;
mod host_history;
mod host_identity;
mod host_readiness;
mod host_reload;
mod host_run;
mod host_stop;
mod host_switchover;
mod host_writes;
mod hostile_guest;
mod plugin_writes;
mod polyglot_e2e;
mod request_paths;
mod shadow_diff;
