//! {{name}}: a wasm-informer plugin of the world `event-handler`.
//!
//! For every pod it is told about, it logs one line with the number of pods
//! cached in the pod's namespace, and it gives a pod that lacks the label
//! `[config] label` that label, with the value `[config] value`, by
//! server-side apply, then records a `Normal` Event about the pod. It decides
//! from the pod as the cache holds it when the event is handled, not from the
//! event's copy (which may be stale), and the apply must find the pod (a pod
//! deleted while its event waited is never re-created), so the manifest
//! grants only `patch` on pods.
//!
//! `wasm-informer test plugin.toml --objects fixtures/objects.yaml --events
//! fixtures/events.yaml --expect fixtures/expected.json` runs it against the
//! fixtures, with every write a dry run (see README.md).

use serde::Deserialize;
use serde_json::json;
use wasm_informer_sdk::kube::{self, ApplyParams};
use wasm_informer_sdk::{
    cache, events, export_plugin, info, Config, Event, EventKind, Handler, Result,
};

/// The manifest's `[config]` table.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    /// The label every pod should have.
    label: String,
    /// The value given to a pod that lacks it.
    value: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            label: "team".into(),
            value: "unassigned".into(),
        }
    }
}

struct Plugin {
    settings: Settings,
}

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Added => "added",
        EventKind::Updated => "updated",
        EventKind::Deleted => "deleted",
        EventKind::Synced => "synced",
    }
}

impl Plugin {
    fn check(&mut self, event: &Event) -> Result<()> {
        let pod = event.object();
        let ns = pod.namespace().unwrap_or_default();
        // A query of the host's shared cache: no API call.
        let peers = cache::list_objects("v1/pods", Some(&ns), None)?.len();
        info!(
            "{} {} ({peers} pods in {ns})",
            kind_name(event.kind()),
            event.key()
        );
        let Settings { label, value } = &self.settings;
        // The event may be stale (the plugin was busy, the pod changed since):
        // decide from the pod as the cache holds it now, so a pod labelled
        // meanwhile is not written again, and one deleted is left alone.
        let Some(pod) = cache::get_object("v1/pods", &event.key())? else {
            info!("gone {}", event.key());
            return Ok(());
        };
        if pod.label(label).is_some() || pod.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        // Server-side apply of just the label: owned by `wasm-informer/{{name}}`.
        let intent = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod.name(),
                "namespace": ns,
                "labels": { label.as_str(): value },
            },
        });
        // The pod may be gone since the event: must-exist never re-creates it.
        let must_exist = ApplyParams {
            must_exist: true,
            ..ApplyParams::default()
        };
        match kube::apply("v1/pods", Some(&ns), &pod.name(), &intent, must_exist) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {
                info!("gone {}", event.key());
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        events::normal(&pod, "Labelled", "Label", &format!("set {label}={value}"))?;
        info!("labelled {} {label}={value}", event.key());
        Ok(())
    }
}

impl Handler for Plugin {
    fn init(config: &Config) -> Result<Self> {
        Ok(Plugin {
            settings: config.parse()?,
        })
    }

    fn on_add(&mut self, event: &Event) -> Result<()> {
        self.check(event)
    }

    fn on_update(&mut self, event: &Event) -> Result<()> {
        self.check(event)
    }

    fn on_delete(&mut self, event: &Event) -> Result<()> {
        info!("deleted {}", event.key());
        Ok(())
    }
}

export_plugin!(Plugin);
