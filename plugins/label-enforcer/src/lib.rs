//! Example plugin that writes: gives every pod that lacks it a label (default
//! `team`) whose value comes from an annotation of the pod's namespace (by
//! default the same key), by server-side apply with must-exist (a pod deleted
//! since the event is never re-created) as field manager
//! `wasm-informer/label-enforcer`.
//!
//! Level-triggered: on every add, update and resync of a pod it compares the
//! pod's label with its namespace's annotation; a namespace that gains or
//! changes the annotation is handled when its pods are next seen (the
//! manifest's `resync_seconds`). It never changes a pod whose label is
//! already right, so its own apply's update event is a no-op.
//!
//! Manifest (`config/plugins/label-enforcer.toml`): `resources = ["v1/pods"]`,
//! `read = ["v1/namespaces"]`, and
//! `[[write]] resource = "v1/pods" verbs = ["patch"]`.

use serde::Deserialize;
use serde_json::json;
use wasm_informer_sdk::kube::{self, ApplyParams};
use wasm_informer_sdk::{cache, export_plugin, info, warn, Config, Event, Handler, Result};

#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    /// The pod label to enforce.
    label: String,
    /// The namespace annotation holding its value.
    annotation: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            label: "team".into(),
            annotation: "team".into(),
        }
    }
}

struct Enforcer {
    settings: Settings,
}

impl Enforcer {
    fn enforce(&mut self, event: &Event) -> Result<()> {
        let pod = event.object();
        // A pod being deleted is left alone.
        if pod.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        let Some(ns) = pod.namespace() else {
            return Ok(());
        };
        let Some(namespace) = cache::get_object("v1/namespaces", &ns)? else {
            return Ok(());
        };
        let Some(want) = namespace.annotation(&self.settings.annotation) else {
            return Ok(());
        };
        if pod.label(&self.settings.label).as_deref() == Some(want.as_str()) {
            return Ok(());
        }
        let name = pod.name();
        let intent = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": { self.settings.label.as_str(): want },
            },
        });
        // The pod may be gone since the event: must-exist never re-creates it.
        match kube::apply(
            "v1/pods",
            Some(&ns),
            &name,
            &intent,
            ApplyParams::existing(),
        ) {
            Ok(_) => {
                let dry = if kube::dry_run() { " (dry run)" } else { "" };
                info!("labelled {ns}/{name} {}={want}{dry}", self.settings.label);
                Ok(())
            }
            // Gone since the event: nothing to enforce.
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => {
                warn!("cannot label {ns}/{name}: {e}");
                Err(e)
            }
        }
    }
}

impl Handler for Enforcer {
    fn init(config: &Config) -> Result<Self> {
        Ok(Enforcer {
            settings: config.parse()?,
        })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.enforce(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.enforce(event)
    }

    fn on_sync(&mut self, event: &Event) -> Result<()> {
        self.enforce(event)
    }
}

export_plugin!(Enforcer);
