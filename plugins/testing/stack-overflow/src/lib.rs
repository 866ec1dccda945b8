//! Fault plugin: every event recurses without bound until the Wasm call stack
//! overflows.
//!
//! Invariant: `on-event` never returns.

use std::hint::black_box;

use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct StackOverflow;

impl Handler for StackOverflow {
    fn init(_config: &Config) -> Result<Self> {
        Ok(StackOverflow)
    }

    fn on_add(&mut self, _event: &Event) -> Result<()> {
        overflow()
    }

    fn on_update(&mut self, _event: &Event) -> Result<()> {
        overflow()
    }

    fn on_delete(&mut self, _event: &Event) -> Result<()> {
        overflow()
    }

    fn on_sync(&mut self, _event: &Event) -> Result<()> {
        overflow()
    }
}

fn overflow() -> Result<()> {
    let depth = recurse(black_box(1), black_box(2), black_box(3));
    Err(format!("recursion unexpectedly ended at {depth}").into())
}

/// Keeps several values live across the call so each frame costs native stack,
/// and uses the result afterwards so the call is not a tail call.
#[inline(never)]
fn recurse(a: u64, b: u64, c: u64) -> u64 {
    if a == u64::MAX {
        return b ^ c;
    }
    let x = a.wrapping_mul(31).wrapping_add(b);
    let y = b.wrapping_mul(17) ^ c;
    let z = c.rotate_left(7).wrapping_add(a);
    let r = recurse(black_box(a + 1), black_box(x), black_box(y));
    black_box(r.wrapping_add(x) ^ y ^ z)
}

export_plugin!(StackOverflow);
