//! The API server a plugin under `wasm-informer test` writes to: the
//! embedded simulator, in this process on a loopback port, holding the
//! fixture's objects; every write reaches it as a dry run, so it validates
//! and answers with the would-be object and keeps nothing.
//!
//! Job: seed the simulator with the fixture's objects and replay the
//! fixture's changes into it, so that a write finds what the plugin's cache
//! shows; send the plugin's requests through the host's own [`KubeApi`];
//! record each request and its status for the test's output; answer Events
//! itself (they are recorded, not validated). The simulator gives objects
//! its own uids and resourceVersions, so a request that names the fixture's
//! (a precondition, a replace's `metadata`) is translated to the simulator's
//! and its answer back to the fixture's.
//!
//! Invariants: nothing is ever persisted by a plugin's write (the runtime
//! sends every write with `dryRun=All`, see `HostServices::dry_run`); the
//! simulator listens on 127.0.0.1 only and lives as long as the test.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use apisim::{RunningSim, Sim, SimConfig, Subresource};
use kube_informer::resource::{ResourceId, ResourceSpec};
use parking_lot::Mutex;
use serde_json::Value;
use wasm_informer_runtime::capability::api::{
    ApiRequest, ApiResponse, ClusterApi, Exchange, Tenure, Verb,
};
use wasm_informer_runtime::capability::events::EVENTS_RESOURCE;

use super::capture::{Effect, Effects};
use crate::fixture::FixtureObject;
use crate::kube_api::KubeApi;

/// The identity of one object in the fixture and in the simulator.
#[derive(Debug, Clone, Default)]
struct Ids {
    file_uid: String,
    file_rv: String,
    file_created: Option<String>,
    sim_uid: String,
    sim_rv: String,
}

/// The simulator behind a test, and the plugin's view of it.
pub struct FixtureApi {
    sim: RunningSim,
    kube: Arc<KubeApi>,
    effects: Effects,
    ids: Mutex<HashMap<(String, String), Ids>>,
}

impl std::fmt::Debug for FixtureApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixtureApi")
            .field("url", &self.sim.url())
            .finish()
    }
}

fn meta_str(v: &Value, field: &str) -> String {
    v["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn rid(store: &apisim::Store, resource: &str) -> apisim::ResourceId {
    let (gv, plural) = resource.rsplit_once('/').unwrap_or(("v1", resource));
    store.rid(gv, plural)
}

/// Replaces `from` by `to` where a request or an answer names an object's
/// uid or resourceVersion: `metadata.uid`, `metadata.resourceVersion`, and
/// the values of JSON-patch operations on those paths.
fn swap_ids(body: &mut Value, uid: (&str, &str), rv: (&str, &str)) {
    let swap = |v: &mut Value, (from, to): (&str, &str)| {
        if !from.is_empty() && v.as_str() == Some(from) {
            *v = Value::String(to.to_string());
        }
    };
    if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(v) = m.get_mut("uid") {
            swap(v, uid);
        }
        if let Some(v) = m.get_mut("resourceVersion") {
            swap(v, rv);
        }
    }
    if let Some(ops) = body.as_array_mut() {
        for op in ops {
            let path = op["path"].as_str().unwrap_or_default().to_string();
            if let Some(v) = op.get_mut("value") {
                match path.as_str() {
                    "/metadata/uid" => swap(v, uid),
                    "/metadata/resourceVersion" => swap(v, rv),
                    _ => {}
                }
            }
        }
    }
}

impl FixtureApi {
    /// Starts an empty simulator on a free loopback port. Must be called on
    /// the Tokio runtime that will carry the plugin's requests.
    pub async fn start(effects: Effects) -> Result<Self, String> {
        let sim = Sim::new(SimConfig::default())
            .start("127.0.0.1:0".parse().expect("valid address"))
            .await
            .map_err(|e| format!("cannot start the simulator: {e:#}"))?;
        let client = kube_informer::reflector::client_from_kubeconfig_yaml(&sim.kubeconfig_yaml())
            .await
            .map_err(|e| format!("simulator client: {e}"))?;
        let kube = KubeApi::new(client, tokio::runtime::Handle::current());
        Ok(Self {
            sim,
            kube,
            effects,
            ids: Mutex::new(HashMap::new()),
        })
    }

    /// The simulator's table of kinds (for resolving fixture objects).
    pub fn registry(&self) -> &apisim::resource::Registry {
        self.sim.store().registry()
    }

    fn remember(&self, o: &FixtureObject, stored: &apisim::ObjectRef) {
        let v = &o.value;
        let sim = stored.value();
        self.ids.lock().insert(
            (o.resource.clone(), o.key()),
            Ids {
                file_uid: meta_str(v, "uid"),
                file_rv: meta_str(v, "resourceVersion"),
                file_created: v["metadata"]["creationTimestamp"]
                    .as_str()
                    .map(str::to_string),
                sim_uid: stored.uid.clone(),
                sim_rv: meta_str(&sim, "resourceVersion"),
            },
        );
    }

    fn ensure_namespace(&self, ns: Option<&str>) {
        if let Some(ns) = ns {
            // Already there is as good as created.
            let _ = self.sim.store().create_namespace(ns);
        }
    }

    /// Creates `o` in the simulator, as it is in the fixture (its namespace
    /// too, when the fixture has none). A refusal is returned for a warning:
    /// the plugin's cache still holds the object.
    pub fn seed(&self, o: &FixtureObject) -> Result<(), String> {
        let store = self.sim.store();
        self.ensure_namespace(o.namespace());
        let mut v = o.value.clone();
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        if o.resource == "v1/namespaces" {
            // The default namespaces exist from the start.
            if store.get(rid(store, &o.resource), "", o.name()).is_ok() {
                let _ = store.delete(rid(store, &o.resource), "", o.name(), None);
            }
        }
        let stored = store
            .create(rid(store, &o.resource), o.namespace(), v)
            .map_err(|e| format!("{} {}: {}", o.resource, o.key(), e.message))?;
        self.remember(o, &stored);
        Ok(())
    }

    /// Replaces `o`'s state in the simulator by the fixture's new one.
    pub fn modify(&self, o: &FixtureObject) -> Result<(), String> {
        let store = self.sim.store();
        let new = o.value.clone();
        let stored = store
            .update_with(
                rid(store, &o.resource),
                o.namespace().unwrap_or(""),
                o.name(),
                Subresource::Main,
                move |cur| {
                    let mut v = new;
                    if let Some(m) = v["metadata"].as_object_mut() {
                        m.insert(
                            "resourceVersion".into(),
                            cur["metadata"]["resourceVersion"].clone(),
                        );
                        m.insert("uid".into(), cur["metadata"]["uid"].clone());
                        m.remove("managedFields");
                    }
                    Ok(v)
                },
            )
            .map_err(|e| format!("{} {}: {}", o.resource, o.key(), e.message))?;
        self.remember(o, &stored);
        Ok(())
    }

    /// Deletes `o` from the simulator.
    pub fn delete(&self, o: &FixtureObject) -> Result<(), String> {
        let store = self.sim.store();
        self.ids.lock().remove(&(o.resource.clone(), o.key()));
        store
            .delete(
                rid(store, &o.resource),
                o.namespace().unwrap_or(""),
                o.name(),
                None,
            )
            .map(|_| ())
            .map_err(|e| format!("{} {}: {}", o.resource, o.key(), e.message))
    }

    /// Stops the simulator.
    pub async fn shutdown(self) {
        self.sim.shutdown().await;
    }

    fn ids_of(&self, r: &ApiRequest) -> Option<Ids> {
        self.ids.lock().get(&(r.resource(), r.key())).cloned()
    }

    /// Answers an Event write without the simulator: a create echoes its
    /// body, a series patch answers an empty object.
    fn event(&self, r: &ApiRequest) -> ApiResponse {
        let code = if r.verb == Verb::Create { 201 } else { 200 };
        self.effects.push(Effect::Request {
            request: Box::new(r.clone()),
            code,
            refusal: None,
        });
        ApiResponse {
            code,
            retry_after: None,
            body: match r.verb {
                Verb::Create => r.body.clone().unwrap_or_else(|| "{}".into()),
                _ => "{}".into(),
            },
        }
    }
}

impl ClusterApi for FixtureApi {
    fn call(
        &self,
        request: &ApiRequest,
        deadline: Instant,
        tenure: Option<Tenure>,
        stop: &wasm_informer_runtime::Stop,
    ) -> Exchange {
        if request.resource() == EVENTS_RESOURCE {
            return Exchange {
                sent: Some(request.line(None)),
                result: Ok(self.event(request)),
            };
        }
        let ids = self.ids_of(request);
        let mut sent = request.clone();
        if let Some(ids) = &ids {
            if let Some(body) = &sent.body {
                if let Ok(mut v) = serde_json::from_str::<Value>(body) {
                    swap_ids(
                        &mut v,
                        (&ids.file_uid, &ids.sim_uid),
                        (&ids.file_rv, &ids.sim_rv),
                    );
                    sent.body = Some(v.to_string());
                }
            }
            let d = &mut sent.delete;
            if d.uid.as_deref() == Some(ids.file_uid.as_str()) && !ids.file_uid.is_empty() {
                d.uid = Some(ids.sim_uid.clone());
            }
            if d.resource_version.as_deref() == Some(ids.file_rv.as_str())
                && !ids.file_rv.is_empty()
            {
                d.resource_version = Some(ids.sim_rv.clone());
            }
        }
        let Exchange { sent, result } = self.kube.call(&sent, deadline, tenure, stop);
        self.effects.push(Effect::Request {
            request: Box::new(request.clone()),
            code: result.as_ref().map(|a| a.code).unwrap_or(0),
            refusal: result
                .as_ref()
                .ok()
                .filter(|a| !(200..300).contains(&a.code))
                .map(|a| a.body.clone()),
        });
        let mut answer = match result {
            Ok(a) => a,
            Err(e) => {
                return Exchange {
                    sent,
                    result: Err(e),
                }
            }
        };
        if let Some(ids) = &ids {
            if let Ok(mut v) = serde_json::from_str::<Value>(&answer.body) {
                swap_ids(
                    &mut v,
                    (&ids.sim_uid, &ids.file_uid),
                    (&ids.sim_rv, &ids.file_rv),
                );
                if let (Some(created), Some(m)) = (&ids.file_created, v["metadata"].as_object_mut())
                {
                    if m.contains_key("creationTimestamp") {
                        m.insert("creationTimestamp".into(), created.clone().into());
                    }
                }
                answer.body = v.to_string();
            }
        }
        Exchange {
            sent,
            result: Ok(answer),
        }
    }

    fn resolve(&self, id: &ResourceId) -> Result<ResourceSpec, String> {
        self.kube.resolve(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_ids_in_metadata_and_json_patch_tests_only_when_they_match() {
        let mut v =
            serde_json::json!({"metadata": {"uid": "f-uid", "resourceVersion": "7", "name": "x"}});
        swap_ids(&mut v, ("f-uid", "s-uid"), ("7", "42"));
        assert_eq!(v["metadata"]["uid"], "s-uid");
        assert_eq!(v["metadata"]["resourceVersion"], "42");
        let mut v = serde_json::json!({"metadata": {"resourceVersion": "6"}});
        swap_ids(&mut v, ("f-uid", "s-uid"), ("7", "42"));
        assert_eq!(
            v["metadata"]["resourceVersion"], "6",
            "a stale version stays stale"
        );
        let mut ops = serde_json::json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "7"}
        ]);
        swap_ids(&mut ops, ("f-uid", "s-uid"), ("7", "42"));
        assert_eq!(ops[0]["value"], "42");
        assert_eq!(ops[1]["value"], "7");
    }
}
