//! Fault plugin: every event allocates (and touches) 1 MiB blocks until the
//! allocator fails, which aborts the instance once the host refuses to grow its
//! memory.
//!
//! Invariant: `on-event` never returns while memory can still grow.

use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct MemoryBomb {
    hoard: Vec<Vec<u8>>,
}

impl Handler for MemoryBomb {
    fn init(_config: &Config) -> Result<Self> {
        Ok(MemoryBomb { hoard: Vec::new() })
    }

    fn on_add(&mut self, _event: &Event) -> Result<()> {
        self.explode()
    }

    fn on_update(&mut self, _event: &Event) -> Result<()> {
        self.explode()
    }

    fn on_delete(&mut self, _event: &Event) -> Result<()> {
        self.explode()
    }

    fn on_sync(&mut self, _event: &Event) -> Result<()> {
        self.explode()
    }
}

impl MemoryBomb {
    fn explode(&mut self) -> Result<()> {
        loop {
            let block = vec![0xA5u8; 1 << 20];
            self.hoard.push(std::hint::black_box(block));
        }
    }
}

export_plugin!(MemoryBomb);
