//! Test plugin: returns every field of each event it receives, as JSON, in its
//! `err` result, so a test can compare what the guest saw with what the host
//! sent.
//!
//! Invariant: `on-event` always returns `err(<the event as JSON>)`.

use serde_json::{json, Value};
use wasm_informer_sdk::{export_plugin, Config, Event, EventKind, Handler, ObjectMeta, Result};

struct Echo;

fn meta(m: &ObjectMeta) -> Value {
    let kv = |l: &[wasm_informer_sdk::KeyValue]| -> Vec<(String, String)> {
        l.iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect()
    };
    json!({
        "namespace": m.namespace,
        "name": m.name,
        "uid": m.uid,
        "resource_version": m.resource_version,
        "generation": m.generation,
        "labels": kv(&m.labels),
        "annotations": kv(&m.annotations),
        "creation_timestamp": m.creation_timestamp,
        "deletion_timestamp": m.deletion_timestamp,
        "owner_uids": m.owner_uids,
    })
}

fn echo(e: &Event) -> Result<()> {
    let kind = match e.kind() {
        EventKind::Added => "added",
        EventKind::Updated => "updated",
        EventKind::Deleted => "deleted",
        EventKind::Synced => "synced",
    };
    let v = json!({
        "kind": kind,
        "resource": e.resource(),
        "key": e.key(),
        "meta": meta(e.meta()),
        "json": e.json(),
        "old_meta": e.old_meta().map(meta),
        "is_in_initial_list": e.is_in_initial_list(),
        "final_state_unknown": e.final_state_unknown(),
    });
    Err(v.to_string().into())
}

impl Handler for Echo {
    fn init(_config: &Config) -> Result<Self> {
        Ok(Echo)
    }

    fn on_add(&mut self, e: &Event) -> Result<()> {
        echo(e)
    }

    fn on_update(&mut self, e: &Event) -> Result<()> {
        echo(e)
    }

    fn on_delete(&mut self, e: &Event) -> Result<()> {
        echo(e)
    }

    fn on_sync(&mut self, e: &Event) -> Result<()> {
        echo(e)
    }
}

export_plugin!(Echo);
