//! Paths of the Rust plugins and check fixtures, compiled to `wasm32-wasip2`
//! components by this crate's build script (so `cargo test` builds them).
//!
//! Invariant: every path named here existed when the crate was built.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
