//! Test plugin for the 0.1 world, built against `wit/v0.1` with wit-bindgen
//! alone (no SDK): a plugin as it was written before 0.2, which the host must
//! keep running unchanged. It returns every field of each event it receives,
//! as JSON, in its `err` result, so a test can compare what the guest saw with
//! what the host sent.
//!
//! Invariant: `on-event` always returns `err(<the event as JSON>)`.

wit_bindgen::generate!({ path: "../../../wit/v0.1", world: "event-handler" });

use exports::wasm_informer::plugin::handler::Guest;
use serde_json::{json, Value};
use wasm_informer::plugin::types::{Event, EventKind, KeyValue, ObjectMeta};

struct Echo;

fn meta(m: &ObjectMeta) -> Value {
    let kv = |l: &[KeyValue]| -> Vec<(String, String)> {
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

impl Guest for Echo {
    fn init(_config: String) -> Result<(), String> {
        Ok(())
    }

    fn on_event(e: Event) -> Result<(), String> {
        let kind = match e.kind {
            EventKind::Added => "added",
            EventKind::Updated => "updated",
            EventKind::Deleted => "deleted",
            EventKind::Synced => "synced",
        };
        let v = json!({
            "kind": kind,
            "resource": e.resource,
            "key": e.key,
            "meta": meta(&e.object.meta),
            "json": e.object.json,
            "old_meta": e.old_object.as_ref().map(|o| meta(&o.meta)),
            "is_in_initial_list": e.is_in_initial_list,
            "final_state_unknown": e.final_state_unknown,
        });
        Err(v.to_string())
    }
}

export!(Echo);
