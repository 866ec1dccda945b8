//! A plugin that accepts every event and does nothing: the benchmark subject and
//! the healthy neighbour in fault-containment tests.
//!
//! Invariant: every `on-event` returns `ok` in constant time.

use wasm_informer_sdk::{export_plugin, Config, Handler, Result};

struct Noop;

impl Handler for Noop {
    fn init(_config: &Config) -> Result<Self> {
        Ok(Noop)
    }
}

export_plugin!(Noop);
