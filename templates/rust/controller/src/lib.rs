//! {{name}}: a wasm-informer plugin of the world `controller`.
//!
//! It makes sure every Deployment carries the label `[config] label` =
//! `[config] value` (default `managed-by=wasm-informer`), by a JSON merge
//! patch, and records a `Normal` Event `Labelled` when it sets it.
//!
//! Level-triggered: it is given the key of a Deployment to look at, never
//! what changed, and reads the current state from the host's cache. The host
//! never reconciles one key twice at once; an error is retried with backoff,
//! a terminal one is not.
//!
//! `wasm-informer test plugin.toml --objects fixtures/objects.yaml --events
//! fixtures/events.yaml --expect fixtures/expected.json` runs it against the
//! fixtures, with every write a dry run (see README.md).

use serde::Deserialize;
use serde_json::json;
use wasm_informer_sdk::kube::{self, Patch};
use wasm_informer_sdk::{
    events, export_controller, info, Action, ApiError, Config, ReconcileError, Reconciler,
    Request, Result,
};

/// The manifest's `[config]` table.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    /// The label every Deployment should have.
    label: String,
    /// Its value.
    value: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            label: "managed-by".into(),
            value: "wasm-informer".into(),
        }
    }
}

struct Controller {
    settings: Settings,
}

impl Reconciler for Controller {
    fn init(config: &Config) -> Result<Self> {
        Ok(Controller {
            settings: config.parse()?,
        })
    }

    fn reconcile(&mut self, request: &Request) -> std::result::Result<Action, ReconcileError> {
        // The cached state; `None` when the object is gone.
        let Some(object) = request.object()? else {
            info!("gone {}", request.key);
            return Ok(Action::done());
        };
        let Settings { label, value } = &self.settings;
        if object.label(label).as_deref() == Some(value.as_str()) {
            return Ok(Action::done());
        }
        let patch = Patch::Merge(json!({ "metadata": { "labels": { label.as_str(): value } } }));
        let ns = request.namespace.as_deref();
        match kube::patch(&request.resource, ns, &request.name, &patch, false) {
            Ok(_) => {}
            // Deleted since: nothing to do.
            Err(e) if e.is_not_found() => return Ok(Action::done()),
            // The server refuses this label: retrying cannot help.
            Err(e) if matches!(e.api(), Some(ApiError::Invalid(_))) => {
                return Err(ReconcileError::terminal(e.message()))
            }
            // Anything else is retried with backoff.
            Err(e) => return Err(e.into()),
        }
        events::normal(&object, "Labelled", "Label", &format!("set {label}={value}"))?;
        info!("labelled {} {label}={value}", request.key);
        Ok(Action::done())
    }
}

export_controller!(Controller);
