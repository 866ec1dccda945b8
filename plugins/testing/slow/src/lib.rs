//! Fault plugin: sleeps `ms` milliseconds per event through the WASI monotonic
//! clock (so it waits without burning fuel or CPU). `[config] ms = 10` by default;
//! `init_ms` (default 0) makes `init` sleep that long too, as a plugin that
//! loads state when it starts.
//!
//! Invariant: every `on-event` returns `ok` after at least `ms` milliseconds,
//! and `init` returns after at least `init_ms`.

use std::time::{Duration, Instant};

use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct Slow {
    delay: Duration,
}

impl Handler for Slow {
    fn init(config: &Config) -> Result<Self> {
        std::thread::sleep(Duration::from_millis(config.get("init_ms")?.unwrap_or(0)));
        Ok(Slow {
            delay: Duration::from_millis(config.get("ms")?.unwrap_or(10)),
        })
    }

    fn on_add(&mut self, _event: &Event) -> Result<()> {
        self.nap()
    }

    fn on_update(&mut self, _event: &Event) -> Result<()> {
        self.nap()
    }

    fn on_delete(&mut self, _event: &Event) -> Result<()> {
        self.nap()
    }

    fn on_sync(&mut self, _event: &Event) -> Result<()> {
        self.nap()
    }
}

impl Slow {
    fn nap(&self) -> Result<()> {
        let start = Instant::now();
        std::thread::sleep(self.delay);
        if start.elapsed() < self.delay {
            return Err(format!("slept only {:?} of {:?}", start.elapsed(), self.delay).into());
        }
        Ok(())
    }
}

export_plugin!(Slow);
