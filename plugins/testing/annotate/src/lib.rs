//! Benchmark plugin for writes (B9): every pod it sees without the annotation
//! `[config] key` (default `bench.wasm-informer.dev/seen`) gets it, set to the
//! resourceVersion the plugin saw, by one JSON merge patch. Its own patch
//! comes back as an update that already carries the annotation, so each pod
//! is patched once.
//!
//! Manifest: `resources = ["v1/pods"]` and
//! `[[write]] resource = "v1/pods" verbs = ["patch"]`.
//!
//! Invariant: at most one patch per event, and none for a pod that already
//! has the annotation; a failed patch is the event's error.

use serde_json::json;
use wasm_informer_sdk::kube::{self, Patch};
use wasm_informer_sdk::{export_plugin, Config, Event, Handler, Result};

struct Annotate {
    key: String,
}

impl Annotate {
    fn ensure(&self, event: &Event) -> Result<()> {
        let o = event.object();
        if o.annotation(&self.key).is_some() {
            return Ok(());
        }
        let body = json!({"metadata": {"annotations": {&self.key: o.resource_version()}}});
        kube::patch(
            "v1/pods",
            o.namespace().as_deref(),
            &o.name(),
            &Patch::Merge(body),
            false,
        )?;
        Ok(())
    }
}

impl Handler for Annotate {
    fn init(config: &Config) -> Result<Self> {
        let key = config
            .get::<String>("key")?
            .unwrap_or_else(|| "bench.wasm-informer.dev/seen".into());
        Ok(Annotate { key })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.ensure(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.ensure(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.ensure(event)
    }
}

export_plugin!(Annotate);
