//! Fault plugin: every event writes `lines` messages through the log import and
//! `lines` lines each to stdout and stderr. `[config] lines = 2000` by default.
//!
//! Invariant: `on-event` returns `ok` after writing; the host must absorb (and
//! rate-limit) the flood without slowing other plugins.

use std::io::Write;

use wasm_informer_sdk::{export_plugin, info, Config, Event, Handler, Result};

struct LogFlood {
    lines: u64,
}

impl Handler for LogFlood {
    fn init(config: &Config) -> Result<Self> {
        Ok(LogFlood {
            lines: config.get("lines")?.unwrap_or(2000),
        })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.flood(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.flood(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        self.flood(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.flood(event)
    }
}

impl LogFlood {
    fn flood(&mut self, event: &Event) -> Result<()> {
        let mut out = std::io::stdout().lock();
        let mut err = std::io::stderr().lock();
        for i in 0..self.lines {
            info!("flood {} line {i}", event.key());
            let _ = writeln!(out, "stdout flood {} line {i}", event.key());
            let _ = writeln!(err, "stderr flood {} line {i}", event.key());
        }
        let _ = out.flush();
        let _ = err.flush();
        Ok(())
    }
}

export_plugin!(LogFlood);
