//! The embedded API simulator behind `run --sim` and `sim`: apisim seeded by the
//! workload generator (pods, and Deployments with container ports, some
//! labelled `expose: "true"`) plus a set of plain Deployments, churned while it
//! runs.
//!
//! Job: start the simulator on 127.0.0.1, write a kubeconfig for it, build a
//! kube client, churn pods at the configured rate and touch one Deployment every
//! second, and at the end say how many objects of each resource exist, so a
//! report can be checked against the simulator.
//!
//! Invariant: everything is seeded from [`SimSettings::seed`]; churn stops
//! before the simulator does, so final counts are stable once [`EmbeddedSim::stop_churn`]
//! returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use apisim::workload::{ChurnHandle, Workload, WorkloadConfig};
use apisim::{RunningSim, Sim, SimConfig, Subresource};
use serde_json::json;

use crate::config::SimSettings;

/// Resources the embedded simulator is seeded with, as resource ids.
pub const SEEDED: [&str; 3] = ["v1/pods", "apps/v1/deployments", "v1/namespaces"];

/// What the report counts in the simulator at exit: the seeded resources and
/// the Services the example controller keeps.
const COUNTED: [&str; 4] = [
    "v1/pods",
    "apps/v1/deployments",
    "v1/namespaces",
    "v1/services",
];

/// A running embedded simulator with its churn.
pub struct EmbeddedSim {
    sim: Option<RunningSim>,
    churn: Option<ChurnHandle>,
    deploy_stop: Arc<AtomicBool>,
    deploy_task: Option<tokio::task::JoinHandle<()>>,
    kubeconfig: PathBuf,
}

impl std::fmt::Debug for EmbeddedSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedSim")
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

fn deployment(ns: &str, i: usize) -> serde_json::Value {
    let app = ["web", "api", "worker", "cache"][i % 4];
    let tier = ["frontend", "backend", "data"][i % 3];
    let mut labels = json!({"app": app, "tier": tier});
    // Every third Deployment lacks the `team` label, so policy plugins have findings.
    if !i.is_multiple_of(3) {
        labels["team"] = json!(format!("team-{}", i % 5));
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": format!("{app}-{i:03}"),
            "namespace": ns,
            "labels": labels,
            "annotations": {"owner": format!("owner-{}@example.com", i % 7)},
        },
        "spec": {
            "replicas": 1 + (i % 3),
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "main", "image": format!("registry.k8s.io/{app}:1.{}", i % 10)}]},
            },
        },
    })
}

/// The `team` annotation of namespace `ns-{i}` in the seeded workload.
pub fn team_of(i: usize) -> String {
    format!("team-{}", (b'a' + (i % 26) as u8) as char)
}

impl EmbeddedSim {
    /// Starts the simulator on `listen`, seeds it, writes its kubeconfig to
    /// `kubeconfig` and starts churning.
    pub async fn start(
        settings: &SimSettings,
        listen: std::net::SocketAddr,
        kubeconfig: &Path,
    ) -> anyhow::Result<Self> {
        let sim = Sim::new(SimConfig {
            rbac: settings.rbac,
            tls: settings.rbac,
            sharded_list_and_watch: settings.sharded_list_and_watch,
            ..SimConfig::default()
        });
        for (token, user) in &settings.tokens {
            sim.tokens().add(token, user, &[]);
        }
        let store = sim.store().clone();
        let mut wc = WorkloadConfig::new(settings.pods, settings.namespaces, settings.seed)
            .with_deployments(settings.deployments, settings.expose_fraction)
            .with_deployment_churn(settings.deployment_churn);
        wc.nodes = settings.nodes;
        let workload = Workload::seed(store.clone(), wc)
            .map_err(|e| anyhow::anyhow!("seeding the simulator: {e:?}"))?;
        // Every namespace but the last has a `team` annotation, which the
        // label-enforcer example copies onto the namespace's pods.
        let nsr = store.rid("v1", "namespaces");
        for i in 0..settings.namespaces.saturating_sub(1) {
            let team = team_of(i);
            store
                .update_with(nsr, "", &format!("ns-{i}"), Subresource::Main, |mut v| {
                    v["metadata"]["annotations"]["team"] = json!(team);
                    Ok(v)
                })
                .map_err(|e| anyhow::anyhow!("annotating namespaces: {e:?}"))?;
        }
        let deploy = store.rid("apps/v1", "deployments");
        let n_deploy = (settings.pods / 10).max(4);
        for i in 0..n_deploy {
            let ns = format!("ns-{}", i % settings.namespaces);
            store
                .create(deploy, Some(&ns), deployment(&ns, i))
                .map_err(|e| anyhow::anyhow!("seeding deployments: {e:?}"))?;
        }
        let running = sim.start(listen).await?;
        running.write_kubeconfig(kubeconfig)?;
        let churn =
            (settings.churn_per_second > 0.0).then(|| workload.churn(settings.churn_per_second));
        let deploy_stop = Arc::new(AtomicBool::new(false));
        let deploy_task = (settings.churn_per_second > 0.0).then(|| {
            let stop = deploy_stop.clone();
            let namespaces = settings.namespaces;
            tokio::spawn(async move {
                let mut i = 0usize;
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    let idx = i % n_deploy;
                    let ns = format!("ns-{}", idx % namespaces);
                    let name = deployment(&ns, idx)["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let r = store.update_with(deploy, &ns, &name, Subresource::Main, |mut v| {
                        let replicas = v["spec"]["replicas"].as_u64().unwrap_or(1);
                        v["spec"]["replicas"] = json!(1 + (replicas % 4));
                        Ok(v)
                    });
                    if let Err(e) = r {
                        tracing::debug!(error = ?e, "deployment churn step failed");
                    }
                    i += 1;
                }
            })
        });
        Ok(Self {
            sim: Some(running),
            churn,
            deploy_stop,
            deploy_task,
            kubeconfig: kubeconfig.to_path_buf(),
        })
    }

    /// The simulator's base URL.
    pub fn url(&self) -> String {
        self.sim.as_ref().map(|s| s.url()).unwrap_or_default()
    }

    /// The simulator.
    pub fn running(&self) -> Option<&RunningSim> {
        self.sim.as_ref()
    }

    /// Where the kubeconfig was written.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kube client for the simulator.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let yaml = self
            .sim
            .as_ref()
            .map(|s| s.kubeconfig_yaml())
            .ok_or_else(|| anyhow::anyhow!("simulator stopped"))?;
        kube_informer::reflector::client_from_kubeconfig_yaml(&yaml)
            .await
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// Stops all churn; object counts are stable afterwards.
    pub async fn stop_churn(&mut self) {
        if let Some(c) = self.churn.take() {
            c.stop().await;
        }
        self.deploy_stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.deploy_task.take() {
            let _ = t.await;
        }
    }

    /// Objects per seeded resource id, now.
    pub fn object_counts(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        if let Some(s) = &self.sim {
            let store = s.store();
            for id in COUNTED {
                let (gv, plural) = id.rsplit_once('/').expect("resource id has a slash");
                let rid = store.rid(gv, plural);
                out.insert(id.to_string(), store.list_all(rid).len() as u64);
            }
        }
        out
    }

    /// Stops churn and the simulator.
    pub async fn shutdown(mut self) {
        self.stop_churn().await;
        if let Some(s) = self.sim.take() {
            s.shutdown().await;
        }
    }
}
