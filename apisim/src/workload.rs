//! Deterministic workload generator: realistic pods (about 3 KB of JSON each, with labels, owner
//! references, status conditions and managedFields) across several namespaces, and churn at a
//! given rate mixing creates, status updates and deletes; optionally Deployments (containers with
//! ports, labels, some labelled `expose: "true"`) with their own churn (port changes, relabels,
//! creates, deletes).
//!
//! Invariant: for a given [`WorkloadConfig`] (including its seed) the sequence of generated
//! objects and operations is identical from run to run; only server-set fields (uid,
//! creationTimestamp, resourceVersion) differ. Deployments draw from their own generator, so
//! the pods and pod churn of a configuration without deployment churn are the same whether or
//! not it seeds deployments.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::resource::ResourceId;
use crate::status::ApiError;
use crate::store::{Store, Subresource};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadConfig {
    /// Pods created by [`Workload::seed`].
    pub pods: usize,
    /// Namespaces the pods are spread over (`ns-0` ... `ns-{M-1}`).
    pub namespaces: usize,
    /// Random seed.
    pub seed: u64,
    /// Number of distinct node names used for `spec.nodeName`.
    pub nodes: usize,
    /// Relative weight of creates in churn.
    pub create_weight: u32,
    /// Relative weight of status updates in churn.
    pub status_weight: u32,
    /// Relative weight of deletes in churn.
    pub delete_weight: u32,
    /// Deployments created by [`Workload::seed`] (after the pods), spread over the same
    /// namespaces. Default 0.
    pub deployments: usize,
    /// Fraction (0 to 1) of generated Deployments labelled `expose: "true"`. Default 0.25.
    pub expose_fraction: f64,
    /// Relative weight of Deployment operations in churn (port change, relabel, create, delete);
    /// 0 (the default) leaves Deployments alone.
    pub deployment_churn_weight: u32,
}

impl WorkloadConfig {
    /// `pods` pods over `namespaces` namespaces, seeded with `seed`; churn mixes 25% creates, 50%
    /// status updates and 25% deletes (so the pod count stays roughly constant).
    pub fn new(pods: usize, namespaces: usize, seed: u64) -> Self {
        WorkloadConfig {
            pods,
            namespaces: namespaces.max(1),
            seed,
            nodes: 16,
            create_weight: 1,
            status_weight: 2,
            delete_weight: 1,
            deployments: 0,
            expose_fraction: 0.25,
            deployment_churn_weight: 0,
        }
    }

    /// Also seeds `n` Deployments, a fraction `expose_fraction` of them labelled `expose: "true"`.
    pub fn with_deployments(mut self, n: usize, expose_fraction: f64) -> Self {
        self.deployments = n;
        self.expose_fraction = expose_fraction.clamp(0.0, 1.0);
        self
    }

    /// Mixes Deployment operations into churn with relative weight `weight`.
    pub fn with_deployment_churn(mut self, weight: u32) -> Self {
        self.deployment_churn_weight = weight;
        self
    }
}

/// One churn operation, as performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Created `namespace/name`.
    Create(String),
    /// Updated the status of `namespace/name`.
    UpdateStatus(String),
    /// Deleted `namespace/name`.
    Delete(String),
    /// Created the Deployment `namespace/name`.
    CreateDeployment(String),
    /// Changed the container ports of the Deployment `namespace/name`.
    ChangeDeploymentPorts(String),
    /// Changed the labels (including `expose`) of the Deployment `namespace/name`.
    RelabelDeployment(String),
    /// Deleted the Deployment `namespace/name`.
    DeleteDeployment(String),
}

/// A workload bound to a store.
#[derive(Debug)]
pub struct Workload {
    store: Arc<Store>,
    config: WorkloadConfig,
    rng: StdRng,
    pods: ResourceId,
    live: Vec<(String, String)>,
    next_index: u64,
    deployments: ResourceId,
    drng: StdRng,
    live_deployments: Vec<(String, String)>,
    next_deployment: u64,
}

/// Seed offset of the Deployment generator, so pods draw the same numbers with or without it.
const DEPLOYMENT_SEED: u64 = 0x6465_706c_6f79_6d74;

/// Builds one Deployment body; everything in it comes from `rng`, so it is deterministic.
pub fn deployment_body(
    rng: &mut StdRng,
    namespace: &str,
    index: u64,
    expose_fraction: f64,
) -> Value {
    let app = APPS[rng.random_range(0..APPS.len())];
    let tier = TIERS[rng.random_range(0..TIERS.len())];
    let name = format!("{app}-{index:04}");
    let replicas = rng.random_range(1..=4);
    let version = format!("1.{}.{}", rng.random_range(0..30), rng.random_range(0..10));
    let mut labels = json!({
        "app": app,
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/part-of": "shop",
        "tier": tier,
    });
    if rng.random_bool(expose_fraction.clamp(0.0, 1.0)) {
        labels["expose"] = json!("true");
    }
    let ports = deployment_ports(rng);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"owner": format!("team-{}@example.com", rng.random_range(0..6))},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app, "instance": name}},
            "template": {
                "metadata": {"labels": {"app": app, "instance": name, "tier": tier}},
                "spec": {
                    "containers": [{
                        "name": "main",
                        "image": format!("registry.example/{app}:{version}"),
                        "ports": ports,
                        "env": [{"name": "APP", "value": app}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                    }],
                    "serviceAccountName": "default",
                },
            },
        },
    })
}

fn deployment_ports(rng: &mut StdRng) -> Value {
    const HTTP: [u16; 4] = [8080, 8000, 3000, 9000];
    let mut ports = vec![
        json!({"name": "http", "containerPort": HTTP[rng.random_range(0..HTTP.len())], "protocol": "TCP"}),
    ];
    if rng.random_bool(0.5) {
        ports.push(json!({"name": "metrics", "containerPort": 9090, "protocol": "TCP"}));
    }
    if rng.random_bool(0.2) {
        ports.push(json!({"name": "grpc", "containerPort": 50051, "protocol": "TCP"}));
    }
    Value::Array(ports)
}

const BASE_EPOCH: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn ts(offset_secs: i64) -> String {
    chrono::DateTime::from_timestamp(BASE_EPOCH + offset_secs, 0)
        .expect("timestamp in range")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn hex(rng: &mut StdRng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).expect("digit"))
        .collect()
}

fn fake_uid(rng: &mut StdRng) -> String {
    format!(
        "{}-{}-4{}-a{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 3),
        hex(rng, 3),
        hex(rng, 12)
    )
}

const APPS: [&str; 8] = [
    "web", "api", "worker", "cache", "gateway", "billing", "search", "auth",
];
const TIERS: [&str; 3] = ["frontend", "backend", "data"];

/// Builds one pod body; everything in it comes from `rng`, so it is deterministic.
pub fn pod_body(rng: &mut StdRng, namespace: &str, index: u64, nodes: usize) -> Value {
    let app = APPS[rng.random_range(0..APPS.len())];
    let tier = TIERS[rng.random_range(0..TIERS.len())];
    let hash = hex(rng, 10);
    let rs = format!("{app}-{hash}");
    let name = format!("{rs}-{index:06}");
    let node = format!("node-{:03}", rng.random_range(0..nodes.max(1)));
    let start = rng.random_range(0..86_400);
    let ip = format!(
        "10.{}.{}.{}",
        rng.random_range(0..255),
        rng.random_range(0..255),
        rng.random_range(1..255)
    );
    let host_ip = format!(
        "192.168.{}.{}",
        rng.random_range(0..255),
        rng.random_range(1..255)
    );
    let version = format!("1.{}.{}", rng.random_range(0..30), rng.random_range(0..10));
    let image = format!("registry.example/{app}:{version}");
    let ready = rng.random_bool(0.9);
    let restarts = rng.random_range(0..3);
    let image_id = format!("sha256:{}", hex(rng, 64));
    let container_id = format!("containerd://{}", hex(rng, 64));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app": app,
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "shop",
                "tier": tier,
                "pod-template-hash": hash,
                "release": if rng.random_bool(0.2) { "canary" } else { "stable" },
            },
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": ts(start - 3600),
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs,
                "uid": fake_uid(rng),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts(start),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:generateName": {},
                            "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                            "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{hash}\"}}"): {}},
                        },
                        "f:spec": {
                            "f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {}}},
                            "f:restartPolicy": {},
                            "f:terminationGracePeriodSeconds": {},
                        },
                    },
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts(start + 5),
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {
                        "f:status": {
                            "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
                            "f:containerStatuses": {},
                            "f:hostIP": {},
                            "f:phase": {},
                            "f:podIP": {},
                            "f:startTime": {},
                        },
                    },
                },
            ],
        },
        "spec": {
            "containers": [{
                "name": "main",
                "image": image,
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}, {"containerPort": 9090, "name": "metrics", "protocol": "TCP"}],
                "env": [{"name": "APP", "value": app}, {"name": "TIER", "value": tier}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ts(start + 2)},
                {"type": "Initialized", "status": "True", "lastTransitionTime": ts(start)},
                {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": ts(start + 4)},
                {"type": "ContainersReady", "status": if ready { "True" } else { "False" }, "lastTransitionTime": ts(start + 4)},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(start)},
            ],
            "hostIP": host_ip,
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts(start),
            "qosClass": "Burstable",
            "containerStatuses": [{
                "name": "main",
                "ready": ready,
                "restartCount": restarts,
                "started": true,
                "image": image,
                "imageID": image_id,
                "containerID": container_id,
                "state": {"running": {"startedAt": ts(start + 3)}},
            }],
        },
    })
}

impl Workload {
    /// Creates the namespaces and `config.pods` pods in `store`.
    pub fn seed(store: Arc<Store>, config: WorkloadConfig) -> Result<Workload, ApiError> {
        let pods = store.rid("v1", "pods");
        let deployments = store.rid("apps/v1", "deployments");
        let mut w = Workload {
            rng: StdRng::seed_from_u64(config.seed),
            drng: StdRng::seed_from_u64(config.seed ^ DEPLOYMENT_SEED),
            store,
            pods,
            live: Vec::with_capacity(config.pods),
            next_index: 0,
            deployments,
            live_deployments: Vec::with_capacity(config.deployments),
            next_deployment: 0,
            config,
        };
        for i in 0..w.config.namespaces {
            let name = format!("ns-{i}");
            match w.store.create_namespace(&name) {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        for _ in 0..w.config.pods {
            w.create()?;
        }
        for _ in 0..w.config.deployments {
            w.create_deployment()?;
        }
        Ok(w)
    }

    /// Keys (`namespace/name`) of the Deployments this workload believes exist, in creation order.
    pub fn deployment_keys(&self) -> Vec<String> {
        self.live_deployments
            .iter()
            .map(|(n, d)| format!("{n}/{d}"))
            .collect()
    }

    fn create_deployment(&mut self) -> Result<String, ApiError> {
        let idx = self.next_deployment;
        self.next_deployment += 1;
        let ns = format!("ns-{}", idx % self.config.namespaces as u64);
        let body = deployment_body(&mut self.drng, &ns, idx, self.config.expose_fraction);
        let name = body["metadata"]["name"].as_str().expect("name").to_string();
        self.store.create(self.deployments, Some(&ns), body)?;
        self.live_deployments.push((ns.clone(), name.clone()));
        Ok(format!("{ns}/{name}"))
    }

    /// One Deployment operation, chosen by the Deployment generator.
    fn deployment_step(&mut self) -> Result<Op, ApiError> {
        let roll = self.drng.random_range(0..4);
        if self.live_deployments.is_empty() || roll == 0 {
            return self.create_deployment().map(Op::CreateDeployment);
        }
        let i = self.drng.random_range(0..self.live_deployments.len());
        let (ns, name) = self.live_deployments[i].clone();
        let key = format!("{ns}/{name}");
        let r = match roll {
            1 => {
                let ports = deployment_ports(&mut self.drng);
                self.store
                    .update_with(self.deployments, &ns, &name, Subresource::Main, |mut v| {
                        v["spec"]["template"]["spec"]["containers"][0]["ports"] = ports;
                        Ok(v)
                    })
                    .map(|_| Op::ChangeDeploymentPorts(key))
            }
            2 => {
                let expose = self
                    .drng
                    .random_bool(self.config.expose_fraction.clamp(0.0, 1.0));
                let tier = TIERS[self.drng.random_range(0..TIERS.len())];
                self.store
                    .update_with(self.deployments, &ns, &name, Subresource::Main, |mut v| {
                        let labels = &mut v["metadata"]["labels"];
                        labels["tier"] = json!(tier);
                        match (expose, labels.as_object_mut()) {
                            (true, Some(m)) => {
                                m.insert("expose".into(), json!("true"));
                            }
                            (false, Some(m)) => {
                                m.remove("expose");
                            }
                            _ => {}
                        }
                        Ok(v)
                    })
                    .map(|_| Op::RelabelDeployment(key))
            }
            _ => {
                self.live_deployments.swap_remove(i);
                return match self.store.delete(self.deployments, &ns, &name, None) {
                    Ok(_) | Err(ApiError { code: 404, .. }) => Ok(Op::DeleteDeployment(key)),
                    Err(e) => Err(e),
                };
            }
        };
        match r {
            Err(e) if e.code == 404 => {
                self.live_deployments.swap_remove(i);
                self.create_deployment().map(Op::CreateDeployment)
            }
            r => r,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WorkloadConfig {
        &self.config
    }

    /// Keys (`namespace/name`) of the pods this workload believes exist, in creation order.
    pub fn live_keys(&self) -> Vec<String> {
        self.live.iter().map(|(n, p)| format!("{n}/{p}")).collect()
    }

    fn create(&mut self) -> Result<String, ApiError> {
        let idx = self.next_index;
        self.next_index += 1;
        let ns = format!("ns-{}", idx % self.config.namespaces as u64);
        let body = pod_body(&mut self.rng, &ns, idx, self.config.nodes);
        let name = body["metadata"]["name"].as_str().expect("name").to_string();
        self.store.create(self.pods, Some(&ns), body)?;
        let key = format!("{ns}/{name}");
        self.live.push((ns, name));
        Ok(key)
    }

    /// Performs one churn operation, chosen by the seeded generator.
    pub fn step(&mut self) -> Result<Op, ApiError> {
        let c = &self.config;
        let pod_total = c.create_weight + c.status_weight + c.delete_weight;
        let total = (pod_total + c.deployment_churn_weight).max(1);
        let roll = self.rng.random_range(0..total);
        if roll >= pod_total && c.deployment_churn_weight > 0 {
            return self.deployment_step();
        }
        if self.live.is_empty() || roll < c.create_weight {
            return self.create().map(Op::Create);
        }
        let i = self.rng.random_range(0..self.live.len());
        if roll < c.create_weight + c.status_weight {
            let (ns, name) = self.live[i].clone();
            let flip = self.rng.random_bool(0.5);
            let t = ts(86_400 + self.next_index as i64 + self.rng.random_range(0..1000));
            let r = self
                .store
                .update_with(self.pods, &ns, &name, Subresource::Status, |mut v| {
                    let st = &mut v["status"];
                    if let Some(cs) = st["containerStatuses"][0]["restartCount"].as_i64() {
                        st["containerStatuses"][0]["restartCount"] = json!(cs + 1);
                    }
                    let ready = if flip { "True" } else { "False" };
                    if let Some(conds) = st["conditions"].as_array_mut() {
                        for c in conds.iter_mut() {
                            if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                                c["status"] = json!(ready);
                                c["lastTransitionTime"] = json!(t);
                            }
                        }
                    }
                    st["containerStatuses"][0]["ready"] = json!(flip);
                    Ok(v)
                });
            match r {
                Ok(_) => Ok(Op::UpdateStatus(format!("{ns}/{name}"))),
                Err(e) if e.code == 404 => {
                    self.live.swap_remove(i);
                    self.create().map(Op::Create)
                }
                Err(e) => Err(e),
            }
        } else {
            let (ns, name) = self.live.swap_remove(i);
            match self.store.delete(self.pods, &ns, &name, None) {
                Ok(_) | Err(ApiError { code: 404, .. }) => Ok(Op::Delete(format!("{ns}/{name}"))),
                Err(e) => Err(e),
            }
        }
    }

    /// Runs churn at `rate` operations per second on the tokio runtime until the handle is stopped.
    pub fn churn(self, rate: f64) -> ChurnHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let (s2, o2) = (stop.clone(), ops.clone());
        let task = tokio::spawn(async move {
            let mut w = self;
            let start = tokio::time::Instant::now();
            let mut done: u64 = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !s2.load(Ordering::SeqCst) {
                tick.tick().await;
                let due = (start.elapsed().as_secs_f64() * rate) as u64;
                while done < due && !s2.load(Ordering::SeqCst) {
                    if let Err(e) = w.step() {
                        tracing::warn!(error = %e, "workload churn step failed");
                    }
                    done += 1;
                    o2.store(done, Ordering::SeqCst);
                }
            }
            w
        });
        ChurnHandle { stop, ops, task }
    }
}

/// A running churn task.
#[derive(Debug)]
pub struct ChurnHandle {
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Workload>,
}

impl ChurnHandle {
    /// Operations performed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// Stops churning and returns the workload (for more steps or inspection).
    pub async fn stop(self) -> Workload {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("churn task does not panic")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_about_3kb_and_deterministic() {
        let mut a = StdRng::seed_from_u64(7);
        let mut b = StdRng::seed_from_u64(7);
        for i in 0..20 {
            let pa = pod_body(&mut a, "ns-0", i, 16);
            let pb = pod_body(&mut b, "ns-0", i, 16);
            assert_eq!(pa, pb);
            let len = serde_json::to_vec(&pa).unwrap().len();
            assert!((2500..=4000).contains(&len), "pod JSON is {len} bytes");
        }
    }

    #[test]
    fn same_seed_same_operations() {
        let run = |seed| {
            let store = Arc::new(Store::new(100_000));
            let mut w = Workload::seed(store.clone(), WorkloadConfig::new(50, 3, seed)).unwrap();
            let ops: Vec<Op> = (0..200).map(|_| w.step().unwrap()).collect();
            let names: Vec<String> = store
                .list_all(store.rid("v1", "pods"))
                .iter()
                .map(|o| o.key())
                .collect();
            (ops, names, w.live_keys())
        };
        let (ops1, names1, live1) = run(42);
        let (ops2, names2, live2) = run(42);
        assert_eq!(ops1, ops2);
        assert_eq!(names1, names2);
        let mut sorted = live1.clone();
        sorted.sort();
        assert_eq!(sorted, names1, "workload's view matches the store");
        assert_eq!(live1, live2);
        let (ops3, _, _) = run(43);
        assert_ne!(ops1, ops3);
        assert!(ops1.iter().any(|o| matches!(o, Op::Delete(_))));
        assert!(ops1.iter().any(|o| matches!(o, Op::UpdateStatus(_))));
        assert!(ops1.iter().any(|o| matches!(o, Op::Create(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn churn_runs_at_rate() {
        let store = Arc::new(Store::new(100_000));
        let w = Workload::seed(store.clone(), WorkloadConfig::new(10, 2, 1)).unwrap();
        let rv0 = store.current_rv();
        let h = w.churn(100.0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let w = h.stop().await;
        let writes = store.current_rv() - rv0;
        assert!(
            (150..=250).contains(&writes),
            "{writes} writes in 2 s at 100/s"
        );
        assert_eq!(w.config().pods, 10);
    }
}

#[cfg(test)]
mod deployment_tests {
    use super::*;

    fn pod_names(store: &Store) -> Vec<String> {
        store
            .list_all(store.rid("v1", "pods"))
            .iter()
            .map(|o| String::from_utf8(o.json.to_vec()).unwrap())
            .map(|j| {
                let mut v: Value = serde_json::from_str(&j).unwrap();
                for f in ["uid", "creationTimestamp", "resourceVersion"] {
                    v["metadata"].as_object_mut().unwrap().remove(f);
                }
                v.to_string()
            })
            .collect()
    }

    #[test]
    fn deployments_do_not_change_the_pods() {
        let plain = Arc::new(Store::new(100_000));
        let mut a = Workload::seed(plain.clone(), WorkloadConfig::new(40, 3, 11)).unwrap();
        let with = Arc::new(Store::new(100_000));
        let mut b = Workload::seed(
            with.clone(),
            WorkloadConfig::new(40, 3, 11).with_deployments(30, 0.5),
        )
        .unwrap();
        assert_eq!(
            pod_names(&plain),
            pod_names(&with),
            "same pods, byte for byte"
        );
        let ops_a: Vec<Op> = (0..100).map(|_| a.step().unwrap()).collect();
        let ops_b: Vec<Op> = (0..100).map(|_| b.step().unwrap()).collect();
        assert_eq!(ops_a, ops_b, "same pod churn without deployment churn");
        let deps = with.list_all(with.rid("apps/v1", "deployments"));
        assert_eq!(deps.len(), 30);
        let exposed = deps
            .iter()
            .filter(|d| d.labels.get("expose").map(String::as_str) == Some("true"))
            .count();
        assert!(
            (5..=25).contains(&exposed),
            "{exposed} of 30 exposed at 0.5"
        );
        let namespaces: std::collections::BTreeSet<&str> =
            deps.iter().map(|d| d.namespace.as_str()).collect();
        assert_eq!(namespaces.len(), 3);
        for d in &deps {
            let v = d.value();
            let ports = v["spec"]["template"]["spec"]["containers"][0]["ports"]
                .as_array()
                .unwrap();
            assert!(!ports.is_empty());
            assert_eq!(
                v["status"]["availableReplicas"], v["spec"]["replicas"],
                "status kept in step"
            );
        }
        assert_eq!(b.deployment_keys().len(), 30);
    }

    #[test]
    fn deployment_churn_is_deterministic_and_keeps_status_in_step() {
        let run = || {
            let store = Arc::new(Store::new(100_000));
            let cfg = WorkloadConfig::new(10, 2, 3)
                .with_deployments(10, 0.3)
                .with_deployment_churn(4);
            let mut w = Workload::seed(store.clone(), cfg).unwrap();
            let ops: Vec<Op> = (0..300).map(|_| w.step().unwrap()).collect();
            (store, w, ops)
        };
        let (store, w, ops) = run();
        let (_, _, ops2) = run();
        assert_eq!(ops, ops2);
        for kind in ["Create", "Ports", "Relabel", "Delete"] {
            assert!(
                ops.iter().any(|o| match o {
                    Op::CreateDeployment(_) => kind == "Create",
                    Op::ChangeDeploymentPorts(_) => kind == "Ports",
                    Op::RelabelDeployment(_) => kind == "Relabel",
                    Op::DeleteDeployment(_) => kind == "Delete",
                    _ => false,
                }),
                "no {kind} in {ops:?}"
            );
        }
        let rid = store.rid("apps/v1", "deployments");
        let mut keys: Vec<String> = store.list_all(rid).iter().map(|o| o.key()).collect();
        keys.sort();
        let mut want = w.deployment_keys();
        want.sort();
        assert_eq!(keys, want, "the workload's view matches the store");
        for d in store.list_all(rid) {
            let v = d.value();
            assert_eq!(
                v["status"]["observedGeneration"],
                v["metadata"]["generation"]
            );
        }
    }
}

#[cfg(test)]
mod balance_tests {
    use super::*;

    #[test]
    fn churn_keeps_the_pod_count_roughly_stable() {
        let store = Arc::new(Store::new(100_000));
        let mut w = Workload::seed(store.clone(), WorkloadConfig::new(200, 4, 5)).unwrap();
        let mut counts = (0, 0, 0);
        for _ in 0..4000 {
            match w.step().unwrap() {
                Op::Create(_) => counts.0 += 1,
                Op::UpdateStatus(_) => counts.1 += 1,
                Op::Delete(_) => counts.2 += 1,
                other => panic!("no deployment churn configured: {other:?}"),
            }
        }
        let pods = store.list_all(store.rid("v1", "pods")).len();
        assert_eq!(pods, 200 + counts.0 - counts.2, "{counts:?}");
        // 25% creates and 25% deletes: the difference stays within a few standard deviations.
        assert!(
            (pods as i64 - 200).abs() < 250,
            "{pods} pods after {counts:?}"
        );
        assert!((counts.1 as i64 - 2000).abs() < 250, "{counts:?}");
    }
}
