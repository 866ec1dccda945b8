//! Deterministic workload generator: realistic pods (about 3 KB of JSON each, with labels, owner
//! references, status conditions and managedFields) across several namespaces, and churn at a
//! given rate mixing creates, status updates and deletes.
//!
//! Invariant: for a given [`WorkloadConfig`] (including its seed) the sequence of generated
//! objects and operations is identical from run to run; only server-set fields (uid,
//! creationTimestamp, resourceVersion) differ.

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
        }
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
        let mut w = Workload {
            rng: StdRng::seed_from_u64(config.seed),
            store,
            pods,
            live: Vec::with_capacity(config.pods),
            next_index: 0,
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
        Ok(w)
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
        let total = (c.create_weight + c.status_weight + c.delete_weight).max(1);
        let roll = self.rng.random_range(0..total);
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
