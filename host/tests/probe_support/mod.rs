//! The world of the tests of plugins that act on the cluster: a simulator,
//! the host's own [`KubeApi`] in front of it, and the `api-probe` test plugin,
//! which makes the calls its config lists and answers with their outcomes.
//! The oracle of every test built on it is what the simulator holds and its
//! request log (what was actually sent), never the plugin's report.

#![allow(dead_code)]

use std::sync::Arc;

use apisim::{RunningSim, Sim, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use serde_json::{json, Value};
use wasm_informer::kube_api::KubeApi;
use wasm_informer_runtime::capability::api::ClusterApi;
use wasm_informer_runtime::capability::kube::{EventsGrant, Grants, KubeSettings, WriteGrant};
use wasm_informer_runtime::{
    EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginLimits, PluginRunner, PluginSpec,
};

/// No cache: these plugins only call the API.
pub struct NoCache;

impl CacheView for NoCache {
    fn get(&self, r: &str, _: &str) -> Result<Option<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn list(
        &self,
        r: &str,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn by_index(&self, r: &str, _: &str, _: &str) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn has_synced(&self, r: &str) -> Result<bool, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
}

pub struct World {
    pub sim: RunningSim,
    pub client: kube::Client,
    pub engine: Arc<PluginEngine>,
    pub api: Arc<dyn ClusterApi>,
}

pub async fn world() -> World {
    world_with(SimConfig::default()).await
}

/// The world on a simulator configured by `config`; the test's own client
/// is the admin.
pub async fn world_with(config: SimConfig) -> World {
    let sim = Sim::new(config);
    let sim = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // The admin's kubeconfig (its token is in group system:masters).
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(&sim.kubeconfig_yaml())
        .await
        .unwrap();
    for ns in ["team-a", "team-b"] {
        sim.store().create_namespace(ns).unwrap();
    }
    let api: Arc<dyn ClusterApi> = KubeApi::new(client.clone(), tokio::runtime::Handle::current());
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasmtime-cache-tests"),
        ),
        ..EngineConfig::default()
    })
    .unwrap();
    World {
        sim,
        client,
        engine,
        api,
    }
}

/// `events = true` for a plugin that watches pods cluster-wide.
pub fn pod_events() -> EventsGrant {
    EventsGrant {
        namespaces: None,
        regarding: ["v1/pods".to_string()].into(),
    }
}

pub fn grant(resource: &str, sub: Option<&str>, verbs: &[&str], ns: Option<&[&str]>) -> WriteGrant {
    let verbs: Vec<String> = verbs.iter().map(|s| s.to_string()).collect();
    let ns: Option<Vec<String>> = ns.map(|n| n.iter().map(|s| s.to_string()).collect());
    WriteGrant::new(resource, sub, &verbs, ns.as_deref()).unwrap()
}

impl World {
    /// A probe plugin running `ops` on every event, with `settings`.
    pub async fn probe(&self, ops: Value, settings: KubeSettings) -> (PluginRunner, Grants) {
        self.probe_with(ops, settings, |_| {}).await
    }

    /// The services a probe with `settings` runs with, before `customize`.
    pub fn services(&self, settings: &KubeSettings) -> HostServices {
        HostServices {
            identity: "test-host".into(),
            ..HostServices::with_api(
                Arc::new(NoCache),
                self.api.clone(),
                Grants::new(settings.clone()),
            )
        }
    }

    /// A probe plugin running `ops` on every event, with `settings` and the
    /// services `customize` leaves (a shared quota, the host's Leases, ...).
    pub async fn probe_with(
        &self,
        ops: Value,
        settings: KubeSettings,
        customize: impl FnOnce(&mut HostServices),
    ) -> (PluginRunner, Grants) {
        let mut services = self.services(&settings);
        customize(&mut services);
        self.probe_in(ops, settings, services).await
    }

    /// A probe plugin running `ops` on every event, with `settings` and the
    /// runtime limits `limits`.
    pub async fn probe_limited(
        &self,
        ops: Value,
        settings: KubeSettings,
        limits: PluginLimits,
    ) -> (PluginRunner, Grants) {
        let services = self.services(&settings);
        self.probe_spec(ops, settings, services, limits).await
    }

    /// A probe plugin running `ops` on every event, with `settings`, under
    /// `services`.
    pub async fn probe_in(
        &self,
        ops: Value,
        settings: KubeSettings,
        services: HostServices,
    ) -> (PluginRunner, Grants) {
        self.probe_spec(ops, settings, services, PluginLimits::default())
            .await
    }

    async fn probe_spec(
        &self,
        ops: Value,
        settings: KubeSettings,
        services: HostServices,
        limits: PluginLimits,
    ) -> (PluginRunner, Grants) {
        let mut spec = PluginSpec::new("probe");
        spec.config_json = json!({ "ops": ops }).to_string();
        spec.kube = settings;
        spec.limits = limits;
        let plugin = LoadedPlugin::from_file(
            &self.engine,
            spec,
            std::path::Path::new(plugin_artifacts::API_PROBE),
        )
        .unwrap();
        let grants = services.grants.clone();
        let runner = PluginRunner::start(self.engine.clone(), plugin, services)
            .await
            .unwrap();
        (runner, grants)
    }

    pub async fn seed_pod(&self, ns: &str, name: &str) -> Pod {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "namespace": ns, "labels": { "app": "web" } },
            "spec": { "containers": [{ "name": "c", "image": "img:1" }] },
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap()
    }

    pub async fn pod(&self, ns: &str, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap()
    }

    /// Writes the simulator received: every request but GET.
    pub fn writes(&self) -> Vec<apisim::request_log::RequestRecord> {
        self.sim
            .request_log()
            .entries()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }
}

/// One event about `pod`, to trigger the probe's ops; returns their outcomes.
pub async fn trigger(runner: &mut PluginRunner, pod: &Pod) -> Vec<Value> {
    let raw = serde_json::to_vec(pod).unwrap();
    let object = Arc::new(Object::from_json(&raw, &Transform::default()).unwrap());
    let n = Arc::new(Notification {
        kind: EventKind::Added,
        resource: "v1/pods".into(),
        key: object.key().into(),
        object,
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    });
    match runner.handle(n).await {
        Delivery::HandlerError(m) => serde_json::from_str(&m).unwrap(),
        other => panic!("the probe answers with its outcomes, got {other:?}"),
    }
}

pub fn label_patch(ns: &str, name: &str, value: &str) -> Value {
    json!({
        "call": "patch", "resource": "v1/pods", "namespace": ns, "name": name,
        "patch": "merge", "body": { "metadata": { "labels": { "touched": value } } },
    })
}

/// Runs `ops` once, in a fresh probe with `settings`, on an event about `pod`.
pub async fn run_ops(w: &World, ops: Value, settings: &KubeSettings, pod: &Pod) -> Vec<Value> {
    let (mut r, _) = w.probe(ops, settings.clone()).await;
    trigger(&mut r, pod).await
}

pub fn assert_ok(out: &[Value]) {
    for o in out {
        assert_eq!(o["ok"], true, "{o}");
    }
}
