//! Test plugin: returns every field of each event it receives, read through
//! the 0.2 object references, as JSON, in its `err` result, so a test can
//! compare what the guest saw with what the host sent. With `[config] log = true` it logs one line per event instead and
//! returns `ok`: `echo TAG KIND KEY rv=RV initial=BOOL fsu=BOOL` (TAG is
//! `[config] tag`, default `-`), so a test can rebuild, from the plugin's own
//! log, the view each version of it received.
//!
//! Invariant: `on-event` returns `err(<the event as JSON>)`, or, in log mode,
//! logs exactly one line for the event and returns `ok`.

use serde_json::{json, Value};
use wasm_informer_sdk::{export_plugin, info, Config, Event, EventKind, Handler, Object, Result};

struct Echo {
    /// Log mode: the tag of each line.
    log: Option<String>,
}

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

fn kind(e: &Event) -> &'static str {
    match e.kind() {
        EventKind::Added => "added",
        EventKind::Updated => "updated",
        EventKind::Deleted => "deleted",
        EventKind::Synced => "synced",
    }
}

impl Echo {
    fn event(&self, e: &Event) -> Result<()> {
        let Some(tag) = &self.log else {
            return echo(e);
        };
        info!(
            "echo {tag} {} {} rv={} initial={} fsu={}",
            kind(e),
            e.object().key(),
            e.object().resource_version(),
            e.is_in_initial_list(),
            e.final_state_unknown()
        );
        Ok(())
    }
}

fn echo(e: &Event) -> Result<()> {
    let kind = kind(e);
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
    fn init(config: &Config) -> Result<Self> {
        let log = config.get::<bool>("log")?.unwrap_or(false);
        let tag = config.get::<String>("tag")?.unwrap_or_else(|| "-".into());
        Ok(Echo {
            log: log.then_some(tag),
        })
    }

    fn on_add(&mut self, e: &Event) -> Result<()> {
        self.event(e)
    }

    fn on_update(&mut self, e: &Event) -> Result<()> {
        self.event(e)
    }

    fn on_delete(&mut self, e: &Event) -> Result<()> {
        self.event(e)
    }

    fn on_sync(&mut self, e: &Event) -> Result<()> {
        self.event(e)
    }
}

export_plugin!(Echo);
