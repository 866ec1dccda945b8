//! Test plugin: returns every field of each event it receives, read through
//! the 0.2 object references, as JSON, in its `err` result, so a test can
//! compare what the guest saw with what the host sent.
//!
//! Invariant: `on-event` always returns `err(<the event as JSON>)`.

use serde_json::{json, Value};
use wasm_informer_sdk::{export_plugin, Config, Event, EventKind, Handler, Object, Result};

struct Echo;

fn object(o: &Object) -> Value {
    let m = o.meta();
    let r = o.reference();
    json!({
        "resource": o.resource(),
        "key": o.key(),
        "namespace": o.namespace(),
        "name": o.name(),
        "uid": o.uid(),
        "resource_version": o.resource_version(),
        "generation": o.generation(),
        "label_app": o.label("app"),
        "annotation_note": o.annotation("note"),
        "labels": o.labels(),
        "annotations": o.annotations(),
        "json": o.json(),
        "meta": {
            "namespace": m.namespace,
            "name": m.name,
            "uid": m.uid,
            "resource_version": m.resource_version,
            "generation": m.generation,
            "labels": m.labels,
            "annotations": m.annotations,
            "creation_timestamp": m.creation_timestamp,
            "deletion_timestamp": m.deletion_timestamp,
            "finalizers": m.finalizers,
            "owner_references": m.owner_references.iter().map(|o| json!({
                "api_version": o.api_version,
                "kind": o.kind,
                "name": o.name,
                "uid": o.uid,
                "controller": o.controller,
            })).collect::<Vec<_>>(),
        },
        "reference": {
            "api_version": r.api_version,
            "kind": r.kind,
            "namespace": r.namespace,
            "name": r.name,
            "uid": r.uid,
        },
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
        "object": object(&e.object()),
        "old": e.old().as_ref().map(object),
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
