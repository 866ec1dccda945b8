//! Fault plugin: handles events normally but panics on every n-th event it sees
//! (counted per instance). `[config] n = 3` (default 3; `n = 1` panics always).
//!
//! Invariant: events 1..n-1 of an instance succeed, event n traps.

use serde::Deserialize;
use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

#[derive(Deserialize)]
struct Settings {
    #[serde(default = "default_n")]
    n: u64,
}

fn default_n() -> u64 {
    3
}

struct PanicEveryN {
    n: u64,
    seen: u64,
}

impl Handler for PanicEveryN {
    fn init(config: &Config) -> Result<Self> {
        let s: Settings = config.parse()?;
        if s.n == 0 {
            return Err("[config] n must be at least 1".into());
        }
        Ok(PanicEveryN { n: s.n, seen: 0 })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.count(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.count(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        self.count(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.count(event)
    }
}

impl PanicEveryN {
    fn count(&mut self, event: &Event) -> Result<()> {
        self.seen += 1;
        if self.seen.is_multiple_of(self.n) {
            panic!(
                "panic-every-n: event {} ({}) is number {}",
                event.key(),
                self.n,
                self.seen
            );
        }
        Ok(())
    }
}

export_plugin!(PanicEveryN);
