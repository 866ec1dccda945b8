//! B6: hot-reload latency, from a manifest change to the first event handled by
//! the new version, with 5k objects replayed; for a Rust and a JS plugin.
//!
//! Invariant: measured only with a real plugin runtime; otherwise the row fails
//! and says why.

use anyhow::{bail, Result};

use super::Ctx;
use crate::table::Row;

/// Runs B6.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    bail!(
        "reloading a plugin with {} objects replayed needs the WebAssembly plugin runtime, which this build does not have",
        ctx.plan.b6_objects
    )
}
