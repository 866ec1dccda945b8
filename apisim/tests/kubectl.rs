//! The real kubectl against the simulator, through a generated kubeconfig. Every test asserts the
//! resulting server state, not only kubectl's exit code.
//!
//! kubectl must be installed (`apt-get update && apt-get install -y kubectl`); without it these
//! tests fail loudly.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{RunningSim, SimConfig};
use common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

struct Kubectl {
    sim: RunningSim,
    dir: tempfile::TempDir,
}

impl Kubectl {
    async fn new() -> Self {
        kubectl_path();
        let sim = start(SimConfig::default()).await;
        let dir = tempfile::tempdir().unwrap();
        sim.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
        Kubectl { sim, dir }
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(kubectl_path());
        c.args(args)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Out {
        kubectl_output(self.command(args), args).await
    }

    async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(
            o.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            o.stdout, o.stderr
        );
        o.stdout
    }

    fn file(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }

    fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let s = self.sim.store();
        s.get(s.rid("v1", plural), ns, name).ok().map(|o| o.value())
    }

    fn requests(&self, method: &str, path: &str) -> Vec<apisim::RequestRecord> {
        self.sim
            .request_log()
            .entries()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
    tier: front
spec:
  containers:
  - name: main
    image: nginx:1
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_pods_all_namespaces() {
    let k = Kubectl::new().await;
    Workload::seed(k.sim.store().clone(), WorkloadConfig::new(30, 3, 9)).unwrap();
    let out = k.ok(&["get", "pods", "-A", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&out).unwrap();
    let mut got: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap(),
                p["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    got.sort();
    let store = k.sim.store();
    let expected: Vec<String> = store
        .list_all(store.rid("v1", "pods"))
        .iter()
        .map(|o| o.key())
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got.len(), 30);
    let table = k.ok(&["get", "pods", "-A"]).await;
    assert!(table.starts_with("NAMESPACE"), "{table}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "server-side Table columns"
    );
    assert!(table.lines().skip(1).all(|l| l.contains("/1")), "{table}");
    assert_eq!(table.lines().count(), 31);
    let lists = k.requests("GET", "/api/v1/pods");
    assert!(
        lists
            .iter()
            .any(|r| r.param("limit").as_deref() == Some("500")),
        "{lists:?}"
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_sees_another_clients_event() {
    let k = Kubectl::new().await;
    let store = k.sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    store
        .create(
            cms,
            Some("default"),
            configmap("early", "default", json!({})),
        )
        .unwrap();
    let mut child = k
        .command(&["get", "configmaps", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let log = k.sim.request_log().clone();
    eventually("kubectl's watch request", || {
        let log = log.clone();
        async move {
            log.entries()
                .iter()
                .any(|r| r.path == "/api/v1/namespaces/default/configmaps" && r.is_watch())
        }
    })
    .await;
    store
        .create(
            cms,
            Some("default"),
            configmap("late", "default", json!({})),
        )
        .unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(l) = lines.next_line().await.unwrap() {
            seen.push(l.clone());
            if l == "configmap/late" {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("kubectl get -w did not print the new object; saw {seen:?}"));
    assert_eq!(seen.first().map(String::as_str), Some("configmap/early"));
    let watch = k
        .requests("GET", "/api/v1/namespaces/default/configmaps")
        .into_iter()
        .find(|r| r.is_watch())
        .unwrap();
    assert!(watch.param("resourceVersion").is_some());
    child.kill().await.unwrap();
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_from_file() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    let out = k.ok(&["create", "-f", &f]).await;
    assert_eq!(out.trim(), "pod/web created");
    let pod = k.get("pods", "default", "web").expect("pod stored");
    assert_eq!(pod["metadata"]["labels"]["tier"], "front");
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1");
    let posts = k.requests("POST", "/api/v1/namespaces/default/pods");
    assert_eq!(posts.len(), 1);
    assert_eq!(
        posts[0].param("fieldManager").as_deref(),
        Some("kubectl-create")
    );
    // A second create is AlreadyExists.
    let o = k.run(&["create", "-f", &f]).await;
    assert!(!o.ok && o.stderr.contains("AlreadyExists"), "{}", o.stderr);
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_client_side_creates_updates_and_prunes_fields() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    assert_eq!(k.ok(&["apply", "-f", &f]).await.trim(), "pod/web created");
    let pod = k.get("pods", "default", "web").unwrap();
    assert!(
        pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    // Change the image and drop a label: the three-way strategic merge must remove it.
    let f = k.file(
        "pod.yaml",
        &POD.replace("nginx:1", "nginx:2")
            .replace("    tier: front\n", ""),
    );
    assert_eq!(
        k.ok(&["apply", "-f", &f]).await.trim(),
        "pod/web configured"
    );
    let pod = k.get("pods", "default", "web").unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:2");
    assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
    let patches = k.requests("PATCH", "/api/v1/namespaces/default/pods/web");
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].content_type,
        "application/strategic-merge-patch+json"
    );
    // Unchanged apply is a no-op on the server.
    let rv = pod["metadata"]["resourceVersion"].clone();
    assert_eq!(k.ok(&["apply", "-f", &f]).await.trim(), "pod/web unchanged");
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["metadata"]["resourceVersion"],
        rv
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_server_side() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", &f]).await.trim(),
        "pod/web serverside-applied"
    );
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:1"
    );
    let f = k.file("pod.yaml", &POD.replace("nginx:1", "nginx:3"));
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", &f]).await.trim(),
        "pod/web serverside-applied"
    );
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:3"
    );
    let patches = k.requests("PATCH", "/api/v1/namespaces/default/pods/web");
    assert_eq!(patches.len(), 2);
    assert!(patches
        .iter()
        .all(|p| p.content_type == "application/apply-patch+yaml"));
    assert_eq!(patches[0].param("fieldManager").as_deref(), Some("kubectl"));
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_and_label() {
    let k = Kubectl::new().await;
    let store = k.sim.store();
    store
        .create(
            store.rid("v1", "configmaps"),
            Some("default"),
            configmap("cfg", "default", json!({"a": "1"})),
        )
        .unwrap();
    k.ok(&[
        "patch",
        "configmap",
        "cfg",
        "-p",
        r#"{"data":{"s":"strategic"}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "configmap",
        "cfg",
        "--type=merge",
        "-p",
        r#"{"data":{"m":"merge","k":null}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "configmap",
        "cfg",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"json"}]"#,
    ])
    .await;
    k.ok(&["label", "configmap", "cfg", "team=blue"]).await;
    k.ok(&["label", "configmap", "cfg", "a-"]).await;
    let cm = k.get("configmaps", "default", "cfg").unwrap();
    assert_eq!(
        cm["data"],
        json!({"s": "strategic", "m": "merge", "j": "json"})
    );
    assert_eq!(cm["metadata"]["labels"], json!({"team": "blue"}));
    let types: Vec<String> = k
        .requests("PATCH", "/api/v1/namespaces/default/configmaps/cfg")
        .into_iter()
        .map(|r| r.content_type)
        .collect();
    assert_eq!(
        types,
        vec![
            "application/strategic-merge-patch+json",
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/merge-patch+json"
        ]
    );
    // A failing JSON patch leaves the object alone and reports the reason.
    let o = k
        .run(&[
            "patch",
            "configmap",
            "cfg",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/data/nope"}]"#,
        ])
        .await;
    assert!(!o.ok);
    assert_eq!(
        k.get("configmaps", "default", "cfg").unwrap()["data"],
        cm["data"]
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_including_conflict() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    k.ok(&["create", "-f", &f]).await;
    let current = k.ok(&["get", "pod", "web", "-o", "json"]).await;
    let mut v: Value = serde_json::from_str(&current).unwrap();
    v["spec"]["containers"][0]["image"] = json!("nginx:replaced");
    let f = k.file("replace.json", &v.to_string());
    assert_eq!(
        k.ok(&["replace", "-f", &f]).await.trim(),
        "pod/web replaced"
    );
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:replaced"
    );
    // The file still carries the old resourceVersion: 409.
    v["spec"]["containers"][0]["image"] = json!("nginx:stale");
    let f = k.file("stale.json", &v.to_string());
    let o = k.run(&["replace", "-f", &f]).await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("Conflict") && o.stderr.contains("the object has been modified"),
        "{}",
        o.stderr
    );
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:replaced"
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_wait_including_finalizers() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    k.ok(&["create", "-f", &f]).await;
    assert_eq!(
        k.ok(&["delete", "pod", "web", "--wait"]).await.trim(),
        "pod \"web\" deleted"
    );
    assert!(k.get("pods", "default", "web").is_none());

    // With a finalizer, delete --wait blocks until the finalizer is removed by someone else.
    let store = k.sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    let mut cm = configmap("held", "default", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
    store.create(cms, Some("default"), cm).unwrap();
    let mut child = k
        .command(&["delete", "configmap", "held", "--wait", "--timeout=120s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let s2 = store.clone();
    eventually("deletionTimestamp set", || {
        let s2 = s2.clone();
        async move {
            s2.get(cms, "default", "held")
                .map(|o| o.value()["metadata"]["deletionTimestamp"].is_string())
                .unwrap_or(false)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "delete --wait must block while a finalizer holds the object"
    );
    store
        .update_with(
            cms,
            "default",
            "held",
            apisim::Subresource::Main,
            |mut v| {
                v["metadata"]["finalizers"] = json!([]);
                Ok(v)
            },
        )
        .unwrap();
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(store.get(cms, "default", "held").is_err());
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_definition_serves_a_new_kind() {
    let k = Kubectl::new().await;
    let crd = k.file(
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
",
    );
    k.ok(&["apply", "-f", &crd]).await;
    let w = k.file(
        "w.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &w]).await.trim(),
        "widget.example.com/w1 created"
    );
    let out = k.ok(&["get", "wd", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["items"][0]["spec"]["size"], 3);
    let store = k.sim.store();
    let rid = store
        .registry()
        .find("example.com", "v1", "widgets")
        .unwrap();
    assert_eq!(
        store.get(rid, "default", "w1").unwrap().value()["spec"]["size"],
        3
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_a_deployment() {
    let k = Kubectl::new().await;
    let d = k.file(
        "d.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx
",
    );
    k.ok(&["apply", "-f", &d]).await;
    assert_eq!(
        k.ok(&["scale", "deployment", "web", "--replicas=5"])
            .await
            .trim(),
        "deployment.apps/web scaled"
    );
    let store = k.sim.store();
    let dep = store
        .get(store.rid("apps/v1", "deployments"), "default", "web")
        .unwrap()
        .value();
    assert_eq!(dep["spec"]["replicas"], 5);
    assert_eq!(dep["metadata"]["generation"], 2);
    assert_eq!(dep["status"]["observedGeneration"], 2);
    assert_eq!(dep["status"]["availableReplicas"], 5);
    // The status is kept in step, so a rollout is complete at once.
    let t = std::time::Instant::now();
    let out = k
        .ok(&["rollout", "status", "deployment/web", "--timeout=30s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imperative_create_of_namespace_configmap_and_secret() {
    // kubectl sends these bodies as protobuf.
    let k = Kubectl::new().await;
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&[
        "create",
        "configmap",
        "c1",
        "-n",
        "team",
        "--from-literal=a=b",
    ])
    .await;
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "team",
        "--from-literal=pw=hunter2",
    ])
    .await;
    let store = k.sim.store();
    let ns = store
        .get(store.rid("v1", "namespaces"), "", "team")
        .unwrap()
        .value();
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    assert!(ns["metadata"].get("generateName").is_none());
    let cm = store
        .get(store.rid("v1", "configmaps"), "team", "c1")
        .unwrap()
        .value();
    assert_eq!(cm["data"], json!({"a": "b"}));
    let s = store
        .get(store.rid("v1", "secrets"), "team", "s1")
        .unwrap()
        .value();
    assert_eq!(s["data"], json!({"pw": "aHVudGVyMg=="}));
    assert_eq!(s["type"], "Opaque");
    let posts: Vec<_> = k
        .sim
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert!(
        posts
            .iter()
            .all(|r| r.content_type == "application/vnd.kubernetes.protobuf"),
        "{posts:?}"
    );
    k.sim.shutdown().await;
}

const DEPLOY_MANIFEST: &str = "apiVersion: v1
kind: ServiceAccount
metadata: {name: wasm-informer, namespace: NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: wasm-informer-NS}
rules:
- apiGroups: ['']
  resources: [pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: wasm-informer-NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: wasm-informer-NS}
subjects:
- {kind: ServiceAccount, name: wasm-informer, namespace: NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader-election, namespace: NS}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader-election, namespace: NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader-election}
subjects:
- {kind: ServiceAccount, name: wasm-informer, namespace: NS}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: wasm-informer, namespace: NS}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: wasm-informer}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: wasm-informer, namespace: NS}
spec:
  replicas: 2
  selector: {matchLabels: {app: wasm-informer}}
  template:
    metadata: {labels: {app: wasm-informer}}
    spec:
      serviceAccountName: wasm-informer
      containers:
      - name: host
        image: example.com/wasm-informer:0.1
";

/// (apiVersion, plural, namespace, name) of every object in DEPLOY_MANIFEST for namespace `ns`.
fn manifest_objects(ns: &str) -> Vec<(&'static str, &'static str, String, String)> {
    vec![
        (
            "v1",
            "serviceaccounts",
            ns.to_string(),
            "wasm-informer".to_string(),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "clusterroles",
            String::new(),
            format!("wasm-informer-{ns}"),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "clusterrolebindings",
            String::new(),
            format!("wasm-informer-{ns}"),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "roles",
            ns.to_string(),
            "leader-election".to_string(),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "rolebindings",
            ns.to_string(),
            "leader-election".to_string(),
        ),
        (
            "policy/v1",
            "poddisruptionbudgets",
            ns.to_string(),
            "wasm-informer".to_string(),
        ),
        (
            "apps/v1",
            "deployments",
            ns.to_string(),
            "wasm-informer".to_string(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_manifests_with_rbac_apply_dry_run_server_side_and_for_real() {
    let k = Kubectl::new().await;
    let store = k.sim.store().clone();
    let stored = |ns: &str| -> Vec<Option<Value>> {
        manifest_objects(ns)
            .into_iter()
            .map(|(av, plural, ns, name)| {
                store
                    .get(store.rid(av, plural), &ns, &name)
                    .ok()
                    .map(|o| o.value())
            })
            .collect()
    };
    for ns in ["informer", "informer2"] {
        k.ok(&["create", "namespace", ns]).await;
    }
    let f = k.file("deploy.yaml", &DEPLOY_MANIFEST.replace("NS", "informer"));
    let rv = store.current_rv();
    for args in [
        vec!["apply", "--dry-run=server", "-f", &f],
        vec!["apply", "--server-side", "--dry-run=server", "-f", &f],
    ] {
        let out = k.ok(&args).await;
        assert_eq!(out.lines().count(), 7, "{out}");
        assert!(out.contains("(server dry run)"), "{out}");
    }
    assert_eq!(store.current_rv(), rv, "dry runs persist nothing");
    assert!(stored("informer").iter().all(Option::is_none));

    let out = k.ok(&["apply", "--server-side", "-f", &f]).await;
    assert!(out.contains("clusterrolebinding.rbac.authorization.k8s.io/wasm-informer-informer serverside-applied"), "{out}");
    let objs = stored("informer");
    assert!(objs.iter().all(Option::is_some), "{objs:?}");
    let crb = objs[2].as_ref().unwrap();
    assert_eq!(crb["subjects"][0]["name"], "wasm-informer");
    assert_eq!(crb["roleRef"]["kind"], "ClusterRole");
    let pdb = objs[5].as_ref().unwrap();
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(pdb["metadata"]["managedFields"][0]["operation"], "Apply");
    // Applying the same manifest again changes nothing.
    let rv = store.current_rv();
    k.ok(&["apply", "--server-side", "-f", &f]).await;
    assert_eq!(store.current_rv(), rv);
    let out = k
        .ok(&[
            "get",
            "sa,role,rolebinding,pdb,deployment",
            "-n",
            "informer",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(out.lines().count(), 5, "{out}");
    let out = k
        .ok(&[
            "rollout",
            "status",
            "-n",
            "informer",
            "deployment/wasm-informer",
        ])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");

    // Client-side apply into the other namespace, then delete everything from the file.
    let f2 = k.file("deploy2.yaml", &DEPLOY_MANIFEST.replace("NS", "informer2"));
    k.ok(&["apply", "-f", &f2]).await;
    let objs = stored("informer2");
    assert!(objs
        .iter()
        .all(|o| o.as_ref().is_some_and(|o| o["metadata"]["annotations"]
            ["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string())));
    k.ok(&["delete", "-f", &f2]).await;
    assert!(stored("informer2").iter().all(Option::is_none));
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cascade_policies_through_kubectl() {
    let k = Kubectl::new().await;
    let store = k.sim.store().clone();
    let deps = store.rid("apps/v1", "deployments");
    let cms = store.rid("v1", "configmaps");
    for (name, cascade) in [("bg", "background"), ("fg", "foreground"), ("or", "orphan")] {
        let d = store
            .create(
                deps,
                Some("default"),
                json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"a": name}},
                    "template": {"metadata": {"labels": {"a": name}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
            )
            .unwrap();
        let mut cm = configmap(&format!("{name}-child"), "default", json!({}));
        cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": d.uid, "blockOwnerDeletion": true}]);
        store.create(cms, Some("default"), cm).unwrap();
        k.ok(&[
            "delete",
            "deployment",
            name,
            &format!("--cascade={cascade}"),
        ])
        .await;
        assert!(store.get(deps, "default", name).is_err(), "{cascade}");
        let child = store.get(cms, "default", &format!("{name}-child"));
        assert_eq!(child.is_ok(), cascade == "orphan", "{cascade}");
    }
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_after_client_side_apply_and_its_conflicts() {
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    k.ok(&["apply", "-f", &f]).await;
    // kubectl's first server-side apply takes over what its client-side apply managed, as the
    // apiserver allows the manager "kubectl" for fields of the last-applied configuration.
    let f = k.file("pod.yaml", &POD.replace("nginx:1", "nginx:2"));
    k.ok(&["apply", "--server-side", "-f", &f]).await;
    let pod = k.get("pods", "default", "web").unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:2");
    let managers: Vec<&str> = pod["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");
    // Another manager changing the image conflicts and is told who owns it...
    let o = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &k.file("pod3.yaml", &POD.replace("nginx:1", "nginx:3")),
        ])
        .await;
    assert!(!o.ok);
    assert!(
        o.stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .spec.containers[name=\"main\"].image"),
        "{}",
        o.stderr
    );
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    // ...and takes it with --force-conflicts.
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        &k.file("pod3.yaml", &POD.replace("nginx:1", "nginx:3")),
    ])
    .await;
    assert_eq!(
        k.get("pods", "default", "web").unwrap()["spec"]["containers"][0]["image"],
        "nginx:3"
    );
    k.sim.shutdown().await;
}

// The three error texts below are what kubectl 1.33 prints against a real cluster: the 422
// Status of `errors.NewInvalid` (apimachinery/pkg/api/errors/errors.go) with the messages of
// apimachinery/pkg/util/validation/validation.go IsDNS1123Subdomain, pkg/apis/core/validation
// validateContainers and pkg/registry/apps/deployment/strategy.go's immutable selector, as
// kubectl's cmdutil checkErr prints them (`The <Kind> "<name>" is invalid: <field>: <message>`
// from details.causes for an Invalid error; `error: <message>` for the wrapped error of
// `create configmap`, pkg/cmd/create/create_configmap.go "failed to create configmap: %v").

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_apiservers_error_for_a_bad_configmap_name() {
    let k = Kubectl::new().await;
    let o = k.run(&["create", "configmap", "Bad_Name"]).await;
    assert!(!o.ok, "{}", o.stdout);
    assert_eq!(
        o.stderr,
        format!("error: failed to create configmap: ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MESSAGE}\n")
    );
    assert!(k.get("configmaps", "default", "Bad_Name").is_none());
    let posts = k.requests("POST", "/api/v1/namespaces/default/configmaps");
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].status, 422);
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_apiservers_error_for_a_pod_without_containers() {
    let k = Kubectl::new().await;
    let f = k.file(
        "empty-pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nocontainers\nspec: {}\n",
    );
    let o = k.run(&["create", "-f", &f]).await;
    assert!(!o.ok, "{}", o.stdout);
    assert_eq!(
        o.stderr,
        "The Pod \"nocontainers\" is invalid: spec.containers: Required value\n"
    );
    assert!(k.get("pods", "default", "nocontainers").is_none());
    // The same through apply of labels only, which would create the Pod.
    let labels_only = k.file(
        "labels-only.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nocontainers\n  labels:\n    app: web\n",
    );
    let o = k.run(&["apply", "--server-side", "-f", &labels_only]).await;
    assert!(!o.ok, "{}", o.stdout);
    assert_eq!(
        o.stderr,
        "The Pod \"nocontainers\" is invalid: spec.containers: Required value\n"
    );
    assert!(k.get("pods", "default", "nocontainers").is_none());
    k.sim.shutdown().await;
}

const DEPLOYMENT_V1: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: main
        image: nginx:1
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_apiservers_error_for_an_immutable_deployment_selector() {
    let k = Kubectl::new().await;
    let v1 = k.file("dep-v1.yaml", DEPLOYMENT_V1);
    k.ok(&["apply", "-f", &v1]).await;
    // The selector and the template labels change together, so only the immutability rule
    // is broken.
    let v2 = k.file(
        "dep-v2.yaml",
        &DEPLOYMENT_V1
            .replace(
                "    matchLabels:\n      app: web\n",
                "    matchLabels:\n      app: web\n      track: canary\n",
            )
            .replace(
                "      labels:\n        app: web\n",
                "      labels:\n        app: web\n        track: canary\n",
            ),
    );
    let o = k.run(&["apply", "-f", &v2]).await;
    assert!(!o.ok, "{}", o.stdout);
    assert_eq!(
        o.stderr,
        "The Deployment \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"track\":\"canary\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable\n"
    );
    let stored = k.sim.store();
    let d = stored
        .get(stored.rid("apps/v1", "deployments"), "default", "web")
        .unwrap()
        .value();
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    k.sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_recorded_through_events_k8s_io_shows_in_get_events_and_describe_pod() {
    use kube::Resource;
    use kube_runtime::events::{Event, EventType, Recorder, Reporter};
    let k = Kubectl::new().await;
    let f = k.file("pod.yaml", POD);
    k.ok(&["create", "-f", &f]).await;
    let client = client(&k.sim);
    let pod: k8s_openapi::api::core::v1::Pod = kube::Api::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "example.com/web-watcher".into(),
            instance: Some("watcher-0".into()),
        },
    );
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Configured".into(),
                note: Some("pod web configured".into()),
                action: "Configure".into(),
                secondary: None,
            },
            &pod.object_ref(&()),
        )
        .await
        .expect("the event is accepted");
    let posted = k.requests("POST", "/apis/events.k8s.io/v1/namespaces/default/events");
    assert_eq!(posted.len(), 1, "recorded through events.k8s.io");
    assert_eq!(posted[0].status, 201);

    let table = k.ok(&["get", "events", "-A"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "LAST",
            "SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "MESSAGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = lines
        .next()
        .expect("one event")
        .split_whitespace()
        .collect();
    assert_eq!(row[0], "default", "{table}");
    assert_eq!(
        &row[2..],
        [
            "Normal",
            "Configured",
            "pod/web",
            "pod",
            "web",
            "configured"
        ],
        "{table}"
    );
    let listed = k.requests("GET", "/api/v1/events");
    assert!(!listed.is_empty(), "kubectl get events reads core v1");

    let described = k.ok(&["describe", "pod", "web"]).await;
    let events = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    let rows: Vec<Vec<&str>> = events
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        rows[0],
        ["Type", "Reason", "Age", "From", "Message"],
        "{events}"
    );
    let event_row = &rows[2];
    assert_eq!(event_row[0], "Normal", "{events}");
    assert_eq!(event_row[1], "Configured", "{events}");
    assert_eq!(
        &event_row[3..],
        ["example.com/web-watcher", "pod", "web", "configured"],
        "{events}"
    );
    let uid = pod.metadata.uid.unwrap();
    let searches = k.requests("GET", "/api/v1/namespaces/default/events");
    assert!(
        searches.iter().any(|r| r
            .param("fieldSelector")
            .is_some_and(|s| s.contains("involvedObject.name=web")
                && s.contains(&format!("involvedObject.uid={uid}")))),
        "describe searches core events by the pod's name and uid: {searches:?}"
    );
    k.sim.shutdown().await;
}
