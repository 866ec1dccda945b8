//! A plugin that reads five fields of every event's object through the
//! `objects` interface and does nothing else: the benchmark subject for the
//! cost of a plugin that looks at what it is handed (B2).
//!
//! Invariant: every event reads the object's namespace, name, uid,
//! resourceVersion and its `app` label, one host call each, and returns `ok`.

use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct ReadFields {
    /// Bytes read, kept so that the reads are not optimised away.
    read: u64,
}

impl ReadFields {
    fn read(&mut self, event: &Event) -> Result<()> {
        let o = event.object();
        let n = o.namespace().map_or(0, |s| s.len())
            + o.name().len()
            + o.uid().len()
            + o.resource_version().len()
            + o.label("app").map_or(0, |s| s.len());
        self.read = self.read.wrapping_add(n as u64);
        Ok(())
    }
}

impl Handler for ReadFields {
    fn init(_config: &Config) -> Result<Self> {
        Ok(ReadFields { read: 0 })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.read(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.read(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        self.read(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.read(event)
    }
}

export_plugin!(ReadFields);
