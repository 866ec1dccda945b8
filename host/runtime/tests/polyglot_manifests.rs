//! The example manifests of the JavaScript, Python and C plugins
//! (config/plugins/{deployment-auditor,image-policy,restart-alarm}.toml) work in
//! the production plugin runtime: the `.wasm` they name passes the host's
//! component check, their limits are valid, and with exactly those limits,
//! that `[config]` and those API grants (`[[write]]`, `events`) each plugin
//! handles a small workload without an error or a trap, and reports exactly
//! the findings the workload holds (judged by what it logged, against the rule
//! applied to the objects sent). The grants are exactly what the plugin uses: every
//! request it sent (to a recording fake API server) is allowed by a grant,
//! every grant was used, and `events = true` only where it recorded Events.

use crate::log_capture;
use crate::runtime_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use parking_lot::Mutex;
use runtime_support::FakeCache;
use serde_json::json;
use wasm_informer_runtime::capability::api::{
    ApiRequest, ApiResponse, ClusterApi, Exchange, Tenure,
};
use wasm_informer_runtime::capability::kube::{EventsGrant, Grants, KubeSettings, WriteGrant};
use wasm_informer_runtime::{
    check_file, EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginLimits, PluginRunner,
    PluginSpec, PluginState,
};

/// An API server that accepts every request and records it: a write answers
/// with its body (or a stub of the object it names).
#[derive(Default)]
struct RecordingApi {
    requests: Mutex<Vec<ApiRequest>>,
}

impl ClusterApi for RecordingApi {
    fn call(
        &self,
        request: &ApiRequest,
        _deadline: Instant,
        _tenure: Option<Tenure>,
        _stop: &wasm_informer_runtime::Stop,
    ) -> Exchange {
        self.requests.lock().push(request.clone());
        let body = request
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
            .filter(|b| b["metadata"]["name"].is_string())
            .unwrap_or_else(|| {
                let t = &request.target;
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": t.name().map(|n| n.as_str()),
                                    "namespace": t.namespace().map(|n| n.as_str())}})
            });
        Exchange {
            sent: Some(request.line(None)),
            result: Ok(ApiResponse {
                code: 200,
                retry_after: None,
                body: body.to_string(),
            }),
        }
    }
}

const LIMIT_KEYS: &[&str] = &["fuel_per_event", "timeout_ms", "memory_mb"];

struct Manifest {
    wasm: PathBuf,
    spec: PluginSpec,
    resources: Vec<String>,
}

fn manifest(name: &str) -> Manifest {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../config/plugins/{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let table: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(table["name"].as_str(), Some(name));
    let wasm = path.parent().unwrap().join(table["wasm"].as_str().unwrap());
    assert!(
        wasm.exists(),
        "{} is missing: build the plugins first with scripts/setup.sh && scripts/build-plugins.sh",
        wasm.display()
    );
    let strings = |k: &str| -> Vec<String> {
        table[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let mut limit_table = toml::Table::new();
    for k in LIMIT_KEYS {
        limit_table.insert(k.to_string(), table[*k].clone());
    }
    let limits: PluginLimits = toml::Value::Table(limit_table).try_into().unwrap();
    limits.validate().unwrap();
    let grants = table
        .get("write")
        .and_then(|w| w.as_array())
        .into_iter()
        .flatten()
        .map(|w| {
            let verbs: Vec<String> = w["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            WriteGrant::new(
                w["resource"].as_str().unwrap(),
                w.get("subresource").and_then(|s| s.as_str()),
                &verbs,
                None,
            )
            .unwrap()
        })
        .collect();
    let resources = strings("resources");
    let events = table
        .get("events")
        .and_then(|e| e.as_bool())
        .unwrap_or(false);
    let kube = KubeSettings {
        grants,
        // As the host grants `events = true` to a plugin that reads
        // cluster-wide: any namespace, about what it watches.
        events: events.then(|| EventsGrant {
            namespaces: None,
            regarding: resources.iter().cloned().collect(),
        }),
        ..KubeSettings::default()
    };
    let config = table
        .get("config")
        .cloned()
        .unwrap_or(toml::Value::Table(Default::default()));
    Manifest {
        wasm,
        resources,
        spec: PluginSpec {
            name: name.to_string(),
            config_json: serde_json::to_string(&config).unwrap(),
            read: strings("read"),
            limits,
            kube,
        },
    }
}

fn object(json: serde_json::Value) -> ObjectRef {
    Arc::new(Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap())
}

/// What a plugin did with its manifest.
struct Run {
    /// The lines it logged.
    lines: Vec<String>,
    /// Requests it sent, other than Events.
    writes: Vec<ApiRequest>,
    /// Requests that recorded Events.
    events: usize,
}

/// Runs the plugin of `name` with its manifest over `objects` (all added, after
/// being cached), against a recording API server.
async fn run_manifest(name: &str, objects: Vec<ObjectRef>) -> Run {
    log_capture::plugin_log();
    let m = manifest(name);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasmtime-cache-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(dir),
        ..EngineConfig::default()
    })
    .unwrap();

    let report = check_file(&engine, &m.wasm).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(report.world.contains("event-handler"), "{report}");

    let resource = m.resources[0].clone();
    let cache = Arc::new(FakeCache::default());
    for o in &objects {
        cache.insert(&resource, o.clone());
    }
    let settings = m.spec.kube.clone();
    let plugin = LoadedPlugin::from_file(&engine, m.spec, &m.wasm).unwrap();
    let api = Arc::new(RecordingApi::default());
    let services = HostServices::with_api(cache, api.clone(), Grants::new(settings.clone()));
    let mut runner = PluginRunner::start(engine.clone(), plugin, services)
        .await
        .unwrap();
    for o in &objects {
        let n = Arc::new(Notification {
            kind: EventKind::Added,
            resource: resource.as_str().into(),
            key: o.key().into(),
            object: o.clone(),
            old: None,
            in_initial_list: true,
            final_state_unknown: false,
        });
        assert_eq!(runner.handle(n).await, Delivery::Ok, "{name}");
    }
    let snap = runner.status().snapshot();
    assert_eq!(snap.state, PluginState::Running, "{snap:?}");
    assert_eq!(snap.errors, 0, "{snap:?}");
    assert_eq!(snap.traps, 0, "{snap:?}");
    assert_eq!(snap.delivered.added, objects.len() as u64);
    let requests = api.requests.lock().clone();
    let (events, writes): (Vec<_>, Vec<_>) = requests
        .into_iter()
        .partition(|r| r.resource() == "events.k8s.io/v1/events");
    // Exactly the grants it uses: each request is allowed by one, each grant
    // allowed one, and Events only with `events = true`.
    for w in &writes {
        assert!(settings.allowing(w).is_some(), "{name}: {w:?} not granted");
    }
    let used: BTreeSet<String> = writes
        .iter()
        .map(|w| format!("{} {}", w.resource(), w.verb.as_str()))
        .collect();
    let granted: BTreeSet<String> = settings
        .grants
        .iter()
        .flat_map(|g| {
            g.verbs
                .iter()
                .map(move |v| format!("{} {}", g.resource, v.as_str()))
        })
        .collect();
    assert_eq!(used, granted, "{name}: the grants are exactly what it uses");
    assert_eq!(
        settings.events.is_some(),
        !events.is_empty(),
        "{name}: events = true exactly when it records Events"
    );
    let lines = log_capture::lines_of(name);
    assert_eq!(lines.len() as u64, snap.log_lines, "{lines:?}");
    Run {
        lines,
        writes,
        events: events.len(),
    }
}

/// The objects a plugin reported, from its lines starting with `prefix`
/// (`violation deployment=shop/cart ...` -> `shop/cart`).
fn findings(lines: &[String], prefix: &str) -> std::collections::BTreeSet<String> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| rest.split_whitespace().next().unwrap().to_string())
        .collect()
}

fn deployment(
    ns: &str,
    name: &str,
    labels: serde_json::Value,
    annotations: serde_json::Value,
) -> ObjectRef {
    object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "uid": format!("u-{name}"), "resourceVersion": "7",
                     "labels": labels, "annotations": annotations},
        "spec": {"replicas": 1}}))
}

fn pod(ns: &str, name: &str, image: &str, restarts: i64) -> ObjectRef {
    object(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "uid": format!("u-{name}"), "resourceVersion": "3"},
        "spec": {"containers": [{"name": "main", "image": image}]},
        "status": {"containerStatuses": [{"name": "main", "restartCount": restarts}]}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_auditor_manifest_runs_in_the_runtime() {
    let run = run_manifest(
        "deployment-auditor",
        vec![
            deployment(
                "shop",
                "web",
                json!({"team": "a", "app": "web", "tier": "frontend"}),
                json!({"owner": "x"}),
            ),
            deployment(
                "shop",
                "cart",
                json!({"app": "cart"}),
                json!({"owner": "x"}),
            ),
            deployment("kube-system", "dns", json!({}), json!({})),
        ],
    )
    .await;
    // The policy line from init, and one violation (cart lacks `team`),
    // recorded as one Warning Event; no writes.
    assert_eq!(run.lines.len(), 2, "{:?}", run.lines);
    assert_eq!(run.events, 1);
    assert!(run.writes.is_empty());
    // cart lacks the required `team`; web has everything; kube-system is exempt.
    assert_eq!(
        findings(&run.lines, "violation deployment="),
        ["shop/cart".to_string()].into(),
        "{:?}",
        run.lines
    );
    assert!(
        run.lines
            .iter()
            .any(|l| l == "violation deployment=shop/cart missing-label=team"),
        "{:?}",
        run.lines
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_policy_manifest_runs_in_the_runtime() {
    let run = run_manifest(
        "image-policy",
        vec![
            pod("prod", "a", "nginx:1.25", 0),
            pod("prod", "b", "registry.example/app:1", 0),
            pod("kube-system", "c", "registry.example/proxy:1", 0),
        ],
    )
    .await;
    // The policy line from init, and one violation (b's registry): in
    // enforce mode, one annotation patch of b and one Warning Event.
    assert_eq!(run.lines.len(), 2, "{:?}", run.lines);
    assert_eq!(run.events, 1);
    let patched: Vec<_> = run.writes.iter().map(|w| w.key()).collect();
    assert_eq!(patched, vec!["prod/b"]);
    let body: serde_json::Value =
        serde_json::from_str(run.writes[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"metadata": {"annotations": {"image-policy.wasm-informer.dev/violation": "registry.example"}}})
    );
    // b's registry is not allowed; nginx is docker.io/library; kube-system is
    // exempt.
    assert_eq!(
        findings(&run.lines, "violation pod="),
        ["prod/b".to_string()].into(),
        "{:?}",
        run.lines
    );
    assert!(
        run.lines
            .iter()
            .any(|l| l.starts_with("violation pod=prod/b") && l.contains("registry.example/app:1")),
        "{:?}",
        run.lines
    );
    assert!(
        !findings(&run.lines, "violation pod=").contains("kube-system/c"),
        "{:?}",
        run.lines
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_alarm_manifest_runs_in_the_runtime() {
    let run = run_manifest(
        "restart-alarm",
        vec![
            pod("prod", "a", "x", 6),
            pod("prod", "b", "x", 4),
            pod("dev", "c", "x", 0),
        ],
    )
    .await;
    // The policy line from init, and one alarm (a restarted 6 times, threshold
    // 5), recorded as one Warning Event.
    assert_eq!(run.lines.len(), 2, "{:?}", run.lines);
    assert_eq!(run.events, 1);
    assert!(run.writes.is_empty());
    // a restarted 6 times, over the threshold of 5; b and c did not.
    assert_eq!(
        findings(&run.lines, "alarm pod="),
        ["prod/a".to_string()].into(),
        "{:?}",
        run.lines
    );
    assert!(
        run.lines
            .iter()
            .any(|l| l.starts_with("alarm pod=prod/a") && l.contains("restarts=6 threshold=5")),
        "{:?}",
        run.lines
    );
}
