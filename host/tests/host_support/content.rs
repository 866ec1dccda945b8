//! Content oracles for the end-to-end tests: a config directory copied into a
//! temp dir with the simulator's own churn off (the test writes instead,
//! through the API, so it knows what the server holds), writes and fresh
//! lists through kube-client against the embedded simulator, and what plugins
//! logged, parsed from the host's stderr.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::cache_dir;

/// Copies `src` (host.toml and plugins/*.toml) to `dst`: component paths and
/// the cache made absolute, the simulator's churn set to `churn`, and
/// `extra` manifests (file name, text) added.
pub fn copy_config(src: &Path, dst: &Path, churn: f64, extra: &[(&str, String)]) {
    std::fs::create_dir_all(dst.join("plugins")).unwrap();
    let mut host: toml::Table =
        toml::from_str(&std::fs::read_to_string(src.join("host.toml")).unwrap()).unwrap();
    host.insert("metrics_addr".into(), "127.0.0.1:0".into());
    host.insert("cache_dir".into(), cache_dir().display().to_string().into());
    let sim = host
        .entry("sim")
        .or_insert_with(|| toml::Value::Table(Default::default()));
    sim.as_table_mut()
        .unwrap()
        .insert("churn_per_second".into(), churn.into());
    std::fs::write(dst.join("host.toml"), toml::to_string(&host).unwrap()).unwrap();
    for e in std::fs::read_dir(src.join("plugins")).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let mut m: toml::Table = toml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let wasm = src.join("plugins").join(m["wasm"].as_str().unwrap());
        m.insert("wasm".into(), wasm.display().to_string().into());
        std::fs::write(
            dst.join("plugins").join(p.file_name().unwrap()),
            toml::to_string(&m).unwrap(),
        )
        .unwrap();
    }
    for (name, text) in extra {
        std::fs::write(dst.join("plugins").join(name), text).unwrap();
    }
}

/// An `echo` observer in log mode on `resource`, tagged `tag` (its component
/// from the test guests).
pub fn echo_observer(name: &str, resource: &str, tag: &str) -> String {
    format!(
        "name = \"{name}\"\nwasm = \"{}\"\nresources = [\"{resource}\"]\nqueue_capacity = 100000\n[config]\nlog = true\ntag = \"{tag}\"\n",
        PathBuf::from(plugin_artifacts::ECHO).display()
    )
}

/// The view an echo observer rebuilt from what it logged (`plugin=NAME`,
/// `echo TAG KIND KEY rv=RV ...`): key -> resourceVersion.
pub fn echo_view(log: &[String], plugin: &str, tag: &str) -> BTreeMap<String, u64> {
    let mut v = BTreeMap::new();
    let needle = format!("echo {tag} ");
    let field = format!("plugin={plugin}");
    for l in log.iter().filter(|l| l.contains(&field)) {
        let Some(rest) = l.split(&needle).nth(1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let rv = f[2].trim_start_matches("rv=").parse().unwrap_or(0);
        if f[0] == "deleted" {
            v.remove(f[1]);
        } else {
            v.insert(f[1].to_string(), rv);
        }
    }
    v
}

/// A kube client for the kubeconfig the host wrote.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let yaml = std::fs::read_to_string(kubeconfig).unwrap();
    kube_informer::reflector::client_from_kubeconfig_yaml(&yaml)
        .await
        .unwrap()
}

fn key(ns: Option<&String>, name: Option<&String>) -> String {
    match ns {
        Some(ns) => format!("{ns}/{}", name.unwrap()),
        None => name.unwrap().clone(),
    }
}

/// key -> resourceVersion of every `K`, from a fresh list.
async fn list_versions<K>(client: &kube::Client) -> BTreeMap<String, u64>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| {
            let m = o.meta();
            (
                key(m.namespace.as_ref(), m.name.as_ref()),
                m.resource_version.as_ref().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// key -> resourceVersion of every pod, from a fresh list.
pub async fn list_pods(client: &kube::Client) -> BTreeMap<String, u64> {
    list_versions::<Pod>(client).await
}

/// key -> resourceVersion of every Deployment, from a fresh list.
pub async fn list_deployments(client: &kube::Client) -> BTreeMap<String, u64> {
    list_versions::<Deployment>(client).await
}

/// Ready pods per namespace, from a fresh list.
pub async fn ready_per_namespace(client: &kube::Client) -> BTreeMap<String, u64> {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let e = out
            .entry(p.metadata.namespace.unwrap_or_default())
            .or_default();
        *e += u64::from(ready);
    }
    out
}

/// The last count of Ready pods pod-ready-counter logged for each namespace
/// (`ready pods: namespace NS R/T ; ...`; it logs when R changes).
pub fn ready_counter_findings(log: &[String], plugin: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let field = format!("plugin={plugin}");
    for l in log.iter().filter(|l| l.contains(&field)) {
        let Some(rest) = l.split("ready pods: namespace ").nth(1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let (r, _total) = f[1].split_once('/').unwrap();
        out.insert(f[0].to_string(), r.parse().unwrap());
    }
    out
}

/// Writes `n` changes to pods through the API, as a client would: flips of
/// the Ready condition, deletes and creates (copies of an existing pod under
/// a new name). Returns how many of each.
pub async fn churn_pods(client: &kube::Client, n: usize, seed: u64) -> (usize, usize, usize) {
    let all: Api<Pod> = Api::all(client.clone());
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut flips, mut deletes, mut creates) = (0, 0, 0);
    for i in 0..n {
        let pods = all.list(&ListParams::default()).await.unwrap().items;
        let p = &pods[rng.random_range(0..pods.len())];
        let ns = p.metadata.namespace.clone().unwrap();
        let name = p.metadata.name.clone().unwrap();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        match rng.random_range(0..10) {
            0 => {
                api.delete(&name, &DeleteParams::default()).await.unwrap();
                deletes += 1;
            }
            1 => {
                let mut copy = p.clone();
                copy.metadata = kube::api::ObjectMeta {
                    name: Some(format!("{name}-c{i}")),
                    namespace: Some(ns.clone()),
                    labels: p.metadata.labels.clone(),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &copy).await.unwrap();
                creates += 1;
            }
            _ => {
                let ready = if rng.random_bool(0.5) {
                    "True"
                } else {
                    "False"
                };
                let patch = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": ready}]}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
                flips += 1;
            }
        }
    }
    (flips, deletes, creates)
}
