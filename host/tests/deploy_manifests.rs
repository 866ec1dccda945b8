//! The manifests of `examples/deploy/`, applied with the real kubectl to
//! apisim the way docs/RUNNING-IN-A-CLUSTER.md says: server-side, first with
//! `--dry-run=server` (nothing is stored), then for real (every object is
//! stored as written), then once more (nothing changes). The oracle is the
//! simulator's store.
//!
//! kubectl must be installed (`/usr/bin/kubectl`); without it this test fails
//! loudly.

use std::path::{Path, PathBuf};
use std::process::Command;

use apisim::resource::ResourceType;
use apisim::{RunningSim, Sim, SimConfig};
use serde_json::Value;
use wasm_informer::config::{ClusterMode, HostSettings};

fn kubectl() -> PathBuf {
    for p in ["/usr/bin/kubectl", "/usr/local/bin/kubectl"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("kubectl is not installed: apt-get update && apt-get install -y kubectl");
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("examples/deploy")
}

struct Cluster {
    sim: RunningSim,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn run(&self, args: &[&str]) -> (bool, String) {
        // The simulator serves on this runtime's other workers meanwhile.
        tokio::task::block_in_place(|| self.run_blocking(args))
    }

    fn run_blocking(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(kubectl())
            .args(args)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path())
            .output()
            .expect("kubectl runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\n{text}");
        text
    }

    /// An object from the store: (group/version, plural, namespace, name).
    fn get(&self, gv: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let s = self.sim.store();
        s.get(s.rid(gv, plural), ns, name).ok().map(|o| o.value())
    }
}

async fn cluster() -> Cluster {
    kubectl();
    let sim = Sim::new(SimConfig::default());
    // The kinds the manifests use beyond the simulator's defaults.
    let r = sim.store().registry();
    r.register(
        ResourceType::new("", "v1", "ServiceAccount", "serviceaccounts", true)
            .with_short_names(&["sa"]),
    );
    r.register(ResourceType::new(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ));
    r.register(ResourceType::new(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ));
    r.register(ResourceType::new(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
    ));
    r.register(ResourceType::new(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ));
    r.register(
        ResourceType::new(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        )
        .with_short_names(&["pdb"])
        .with_status(),
    );
    let sim = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    sim.write_kubeconfig(dir.path().join("kubeconfig")).unwrap();
    Cluster { sim, dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_manifests_apply_server_side_with_a_dry_run_first_then_for_real() {
    let k = cluster().await;
    let dir = deploy_dir();
    let ns_file = dir.join("00-namespace.yaml");
    let (ns_file, dir) = (ns_file.to_str().unwrap(), dir.to_str().unwrap());

    // The namespace: dry run, then for real.
    let out = k.ok(&["apply", "--server-side", "--dry-run=server", "-f", ns_file]);
    assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    assert!(
        k.get("v1", "namespaces", "", "wasm-informer").is_none(),
        "the dry run stored the namespace"
    );
    k.ok(&["apply", "--server-side", "-f", ns_file]);
    assert!(k.get("v1", "namespaces", "", "wasm-informer").is_some());

    // Everything: dry run stores nothing, then for real.
    let out = k.ok(&["apply", "--server-side", "--dry-run=server", "-f", dir]);
    for kind in [
        "serviceaccount/wasm-informer",
        "clusterrole.rbac.authorization.k8s.io/wasm-informer",
        "rolebinding.rbac.authorization.k8s.io/wasm-informer-leases",
        "configmap/wasm-informer-config",
        "deployment.apps/wasm-informer",
        "poddisruptionbudget.policy/wasm-informer",
    ] {
        assert!(
            out.contains(&format!("{kind} serverside-applied (server dry run)")),
            "{kind}:\n{out}"
        );
    }
    assert!(k
        .get("apps/v1", "deployments", "wasm-informer", "wasm-informer")
        .is_none());
    assert!(k
        .get("v1", "configmaps", "wasm-informer", "wasm-informer-config")
        .is_none());
    k.ok(&["apply", "--server-side", "-f", dir]);

    // What is stored is what the manifests say.
    let d = k
        .get("apps/v1", "deployments", "wasm-informer", "wasm-informer")
        .expect("deployment");
    assert_eq!(d["spec"]["replicas"], 3);
    let pod = &d["spec"]["template"];
    assert_eq!(
        pod["metadata"]["annotations"]["prometheus.io/scrape"],
        "true"
    );
    assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], "9898");
    assert_eq!(pod["spec"]["serviceAccountName"], "wasm-informer");
    let main = &pod["spec"]["containers"][0];
    assert_eq!(main["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(main["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert!(
        main["resources"]["requests"]["cpu"].is_string()
            && main["resources"]["limits"]["memory"].is_string()
    );
    let env: Vec<&str> = main["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        env.contains(&"POD_NAME") && env.contains(&"POD_NAMESPACE"),
        "{env:?}"
    );
    let mounts: Vec<&str> = main["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    assert!(
        mounts.contains(&"/etc/wasm-informer")
            && mounts.contains(&"/var/lib/wasm-informer/plugins"),
        "{mounts:?}"
    );
    assert_eq!(pod["spec"]["initContainers"][0]["name"], "plugins");

    let pdb = k
        .get(
            "policy/v1",
            "poddisruptionbudgets",
            "wasm-informer",
            "wasm-informer",
        )
        .expect("pdb");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let role = k
        .get(
            "rbac.authorization.k8s.io/v1",
            "roles",
            "wasm-informer",
            "wasm-informer-leases",
        )
        .expect("role");
    assert_eq!(role["rules"][0]["resources"][0], "leases");
    let verbs: Vec<&str> = role["rules"][0]["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for v in ["get", "list", "watch", "create", "update", "delete"] {
        assert!(verbs.contains(&v), "the lease role lacks {v}");
    }
    let cr = k
        .get(
            "rbac.authorization.k8s.io/v1",
            "clusterroles",
            "",
            "wasm-informer",
        )
        .expect("clusterrole");
    assert!(cr["rules"].to_string().contains("\"pods\""));
    assert!(k
        .get("v1", "serviceaccounts", "wasm-informer", "wasm-informer")
        .is_some());
    assert!(k
        .get(
            "rbac.authorization.k8s.io/v1",
            "clusterrolebindings",
            "",
            "wasm-informer"
        )
        .is_some());

    // The ConfigMap's host.toml is a valid host.toml in leader mode, and the
    // Deployment mounts every key of it.
    let cm = k
        .get("v1", "configmaps", "wasm-informer", "wasm-informer-config")
        .expect("configmap");
    let host_toml = cm["data"]["host.toml"].as_str().unwrap();
    let settings = HostSettings::parse(Path::new("/etc/wasm-informer/host.toml"), host_toml)
        .unwrap_or_else(|e| panic!("the ConfigMap's host.toml: {e}"));
    assert_eq!(settings.cluster.mode, ClusterMode::Leader);
    assert_eq!(settings.metrics_addr.port(), 9898);
    let items = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap()["configMap"]["items"]
        .to_string();
    for key in cm["data"].as_object().unwrap().keys() {
        assert!(
            items.contains(&format!("\"{key}\"")),
            "the Deployment does not mount {key}"
        );
    }

    // Applying again changes nothing.
    let before = d["metadata"]["resourceVersion"].clone();
    k.ok(&["apply", "--server-side", "-f", dir]);
    let after = k
        .get("apps/v1", "deployments", "wasm-informer", "wasm-informer")
        .unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"], before,
        "a second apply changed the Deployment"
    );
    // kubectl reads it back.
    let out = k.ok(&[
        "get",
        "deployment",
        "wasm-informer",
        "-n",
        "wasm-informer",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(out.trim(), "3");
    k.sim.shutdown().await;
}
