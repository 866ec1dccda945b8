//! Fault plugin: every event enters an infinite loop. The host must stop it with
//! fuel exhaustion or the wall-clock deadline, whichever comes first.
//!
//! Invariant: `on-event` never returns.

use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct SpinForever;

impl Handler for SpinForever {
    fn init(_config: &Config) -> Result<Self> {
        Ok(SpinForever)
    }

    fn on_add(&mut self, _event: &Event) -> Result<()> {
        spin()
    }

    fn on_update(&mut self, _event: &Event) -> Result<()> {
        spin()
    }

    fn on_delete(&mut self, _event: &Event) -> Result<()> {
        spin()
    }

    fn on_sync(&mut self, _event: &Event) -> Result<()> {
        spin()
    }
}

fn spin() -> Result<()> {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

export_plugin!(SpinForever);
