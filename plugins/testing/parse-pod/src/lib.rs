//! Benchmark plugin: decodes the JSON of every event's object into a typed
//! k8s-openapi `Pod`, the work a kube-runtime reflector of `Pod` does for each
//! watch event, and keeps a running count of the containers it saw so the
//! decode cannot be optimised away. The throughput benchmark (B1) runs it
//! beside the no-op plugin to show what a handler that reads its objects costs.
//!
//! Invariant: `on-event` returns `ok` exactly when the object decoded as a
//! `Pod`; anything else is a handler error naming the object.

use k8s_openapi::api::core::v1::Pod;
use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct ParsePod {
    containers: u64,
}

impl ParsePod {
    fn decode(&mut self, event: &Event) -> Result<()> {
        let pod: Pod = event.decode()?;
        let n = pod.spec.map_or(0, |s| s.containers.len() as u64);
        self.containers = self.containers.wrapping_add(n);
        Ok(())
    }
}

impl Handler for ParsePod {
    fn init(_config: &Config) -> Result<Self> {
        Ok(ParsePod { containers: 0 })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.decode(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.decode(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        self.decode(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.decode(event)
    }
}

export_plugin!(ParsePod);
