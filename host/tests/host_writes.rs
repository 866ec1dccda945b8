//! Plugins that write, end to end: the host against a separate simulator
//! process, checked afterwards through kubectl (the cluster's state, not the
//! plugin's log).
//!
//! - The Rust `label-enforcer` gives every pod of an annotated namespace the
//!   namespace's `team` label by server-side apply, as field manager
//!   `wasm-informer/label-enforcer`, including pods created while it runs and
//!   the pods of a namespace that gains the annotation later; every write is an
//!   audit line.
//! - The same with `run --dry-run`: the audit lines say dry run and nothing
//!   changes on the server.
//! - `wasm-informer rbac` for the default config applies with kubectl (server
//!   side, dry run and for real) and grants exactly what the manifests declare.

use crate::host_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use host_support::*;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

/// The simulator's workload: no churn, the test makes the changes.
const SIM: &str = "[sim]\npods = 90\nnamespaces = 3\nchurn_per_second = 0\n";

/// A config directory with the label-enforcer, resyncing every 2 s.
fn enforcer_config(dir: &Path) -> PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("plugins")).unwrap();
    std::fs::write(
        config.join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n",
            cache_dir().display()
        ),
    )
    .unwrap();
    std::fs::write(
        config.join("plugins/label-enforcer.toml"),
        format!(
            r#"name = "label-enforcer"
wasm = "{}"
resources = ["v1/pods"]
read = ["v1/namespaces"]
resync_seconds = 2

[[write]]
resource = "v1/pods"
verbs = ["patch"]

[config]
label = "team"
annotation = "team"
"#,
            plugin_wasm("label-enforcer").display()
        ),
    )
    .unwrap();
    config
}

fn run_host(config: &Path, kubeconfig: &Path, extra: &[&str]) -> HostProc {
    let mut args = vec![
        "run",
        "--config",
        config.to_str().unwrap(),
        "--status",
        "never",
    ];
    args.extend_from_slice(extra);
    let mut host = HostProc::spawn_env(&args, &[("KUBECONFIG", kubeconfig.to_str().unwrap())]);
    host.wait_line(&["running 1 plugin(s)"], LONG);
    host
}

/// namespace → team annotation, from the server.
fn teams(kubeconfig: &Path) -> BTreeMap<String, String> {
    kubectl_json(kubeconfig, &["get", "namespaces", "-o", "json"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| {
            Some((
                n["metadata"]["name"].as_str()?.to_string(),
                n["metadata"]["annotations"]["team"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn pods(kubeconfig: &Path) -> Vec<Value> {
    kubectl_json(
        kubeconfig,
        &["get", "pods", "-A", "-o", "json", "--show-managed-fields"],
    )["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Pods whose `team` label differs from their namespace's annotation.
fn unlabelled(kubeconfig: &Path) -> Vec<String> {
    let teams = teams(kubeconfig);
    pods(kubeconfig)
        .iter()
        .filter_map(|p| {
            let ns = p["metadata"]["namespace"].as_str()?;
            let want = teams.get(ns)?;
            let have = p["metadata"]["labels"]["team"].as_str();
            (have != Some(want.as_str())).then(|| format!("{ns}/{}", p["metadata"]["name"]))
        })
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn create_pod(kubeconfig: &Path, ns: &str, name: &str) {
    let pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"new"}}}},"spec":{{"containers":[{{"name":"c","image":"img:1"}}]}}}}"#
    );
    kubectl_raw(kubeconfig, &["create", "-f", "-"], Some(&pod));
}

#[test]
fn label_enforcer_labels_every_pod_by_server_side_apply() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(dir.path(), SIM);
    let before = teams(&kubeconfig);
    assert_eq!(
        before.len(),
        2,
        "two of three namespaces annotated: {before:?}"
    );
    let unannotated = "ns-2";
    assert!(!before.contains_key(unannotated));
    let config = enforcer_config(dir.path());
    let mut host = run_host(&config, &kubeconfig, &[]);

    // The seeded pods of annotated namespaces get their label.
    wait_until("the seeded pods to be labelled", LONG, || {
        unlabelled(&kubeconfig).is_empty()
    });
    // A pod created while it runs (a live event).
    create_pod(&kubeconfig, "ns-0", "late");
    // A namespace that gains the annotation (seen at the pods' next resync).
    kubectl_raw(
        &kubeconfig,
        &["annotate", "namespace", unannotated, "team=team-late"],
        None,
    );
    wait_until(
        "the new pod and the late namespace's pods",
        Duration::from_secs(60),
        || unlabelled(&kubeconfig).is_empty(),
    );
    let addr: std::net::SocketAddr = host
        .log()
        .iter()
        .find_map(|l| l.strip_prefix("wasm-informer: metrics at http://"))
        .and_then(|rest| rest.trim_end_matches("/metrics").trim().parse().ok())
        .expect("the host printed its metrics address");
    let (status, metrics) = http_get(addr, "/metrics");
    assert_eq!(status, 200);
    host.terminate();
    host.wait_exit(Duration::from_secs(60));

    let teams = teams(&kubeconfig);
    assert_eq!(teams.len(), 3);
    let pods = pods(&kubeconfig);
    let mut labelled = 0;
    for p in &pods {
        let ns = p["metadata"]["namespace"].as_str().unwrap();
        assert_eq!(
            p["metadata"]["labels"]["team"].as_str(),
            Some(teams[ns].as_str()),
            "{ns}/{}",
            p["metadata"]["name"]
        );
        // The label is owned by the plugin's field manager, by apply.
        let owners: Vec<&Value> = p["metadata"]["managedFields"]
            .as_array()
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        let ours = owners
            .iter()
            .find(|m| m["manager"] == "wasm-informer/label-enforcer")
            .unwrap_or_else(|| panic!("no managedFields entry of the plugin: {owners:?}"));
        assert_eq!(ours["operation"], "Apply");
        assert!(
            ours["fieldsV1"]["f:metadata"]["f:labels"]
                .get("f:team")
                .is_some(),
            "{ours}"
        );
        labelled += 1;
    }
    assert!(labelled > 90, "{labelled}");
    // Every request is counted by outcome and timed in the API request
    // histogram: at least one patch per pod the server holds labelled by the
    // plugin, and as many durations as requests.
    let sample = |prefix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(prefix) && l.contains("plugin=\"label-enforcer\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let requests = sample("wasm_informer_plugin_api_requests_total{");
    let timed = sample("wasm_informer_plugin_api_request_duration_seconds_count{");
    assert!(
        requests >= labelled as f64,
        "{requests} requests for {labelled} pods"
    );
    assert_eq!(timed, requests, "every request timed:\n{metrics}");
    assert!(
        sample("wasm_informer_plugin_api_request_duration_seconds_sum{") > 0.0,
        "{metrics}"
    );
    // One audit line per write, naming plugin, verb, resource, key and outcome.
    let log = host.log();
    let audits: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("audit") && l.contains("plugin=label-enforcer"))
        .collect();
    assert!(
        audits.len() >= labelled,
        "{} audit lines for {labelled} pods",
        audits.len()
    );
    let late = audits
        .iter()
        .find(|l| l.contains("key=ns-0/late"))
        .expect("an audit line for the late pod");
    for part in [
        "verb=\"patch\"",
        "patch=\"apply\"",
        "resource=v1/pods",
        "dry_run=false",
        "outcome=\"ok\"",
        "latency_ms=",
    ] {
        assert!(late.contains(part), "{part} missing in {late}");
    }
}

#[test]
fn label_enforcer_under_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(dir.path(), SIM);
    let config = enforcer_config(dir.path());
    let rvs = |kc: &Path| -> BTreeMap<String, String> {
        pods(kc)
            .iter()
            .map(|p| {
                (
                    format!(
                        "{}/{}",
                        p["metadata"]["namespace"].as_str().unwrap(),
                        p["metadata"]["name"].as_str().unwrap()
                    ),
                    p["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect()
    };
    let before = rvs(&kubeconfig);
    let mut host = run_host(&config, &kubeconfig, &["--dry-run"]);
    // Every pod of an annotated namespace gets a dry-run write.
    let annotated: BTreeSet<String> = teams(&kubeconfig).into_keys().collect();
    let want = before
        .keys()
        .filter(|k| annotated.contains(k.split('/').next().unwrap()))
        .count();
    host.wait_line(&["dry run"], LONG);
    let started = Instant::now();
    loop {
        let n = host
            .log()
            .iter()
            .filter(|l| {
                l.contains("audit") && l.contains("dry_run=true") && l.contains("outcome=\"ok\"")
            })
            .count();
        if n >= want {
            break;
        }
        assert!(started.elapsed() < LONG, "{n} of {want} dry-run writes");
        std::thread::sleep(Duration::from_millis(250));
    }
    host.terminate();
    host.wait_exit(Duration::from_secs(60));
    assert_eq!(rvs(&kubeconfig), before, "nothing changed on the server");
    assert_eq!(unlabelled(&kubeconfig).len(), want, "no pod got the label");
}

#[test]
fn rbac_output_applies_and_covers_exactly_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(dir.path(), SIM);
    let config = repo_root().join("config");
    let out = Command::new(BIN)
        .args(["rbac", "--config"])
        .arg(&config)
        .args(["--namespace", "ops", "--service-account", "informer"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    for mode in [
        &["apply", "--server-side", "--dry-run=server", "-f", "-"][..],
        &["apply", "--dry-run=server", "-f", "-"][..],
        &["apply", "--server-side", "-f", "-"][..],
    ] {
        kubectl_raw(&kubeconfig, mode, Some(&yaml));
    }
    // The expected rules, from the manifests themselves (parsed here, not by
    // the host): list/watch on every resource an informer serves, each
    // [[write]] grant's verbs (RBAC names), events create/patch where granted.
    let rbac_verb = |v: &str| match v {
        "replace" => "update".to_string(),
        other => other.to_string(),
    };
    let target = |id: &str, sub: Option<&str>| -> (String, String) {
        let parts: Vec<&str> = id.split('/').collect();
        let (group, plural) = match parts.as_slice() {
            [_, p] => ("", *p),
            [g, _, p] => (*g, *p),
            _ => panic!("{id}"),
        };
        let res = match sub {
            Some(s) => format!("{plural}/{s}"),
            None => plural.to_string(),
        };
        (group.to_string(), res)
    };
    let mut cluster: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut namespaced: BTreeMap<String, BTreeMap<(String, String), BTreeSet<String>>> =
        BTreeMap::new();
    for entry in std::fs::read_dir(config.join("plugins")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let m: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let strings = |k: &str| -> Vec<String> {
            m.get(k)
                .and_then(|v| v.as_array())
                .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_default()
        };
        // What a manifest watches: its resources and reads, and a
        // controller's `for`, `owns` and `[[watches]]` resources.
        let controller = m
            .get("for")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .into_iter()
            .chain(strings("owns"))
            .chain(
                m.get("watches")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|w| w.get("resource").and_then(|r| r.as_str()))
                    .map(str::to_string),
            );
        for r in strings("resources")
            .into_iter()
            .chain(strings("read"))
            .chain(controller)
        {
            cluster
                .entry(target(&r, None))
                .or_default()
                .extend(["list".to_string(), "watch".to_string()]);
        }
        for w in m
            .get("write")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let t = target(
                w["resource"].as_str().unwrap(),
                w.get("subresource").and_then(|s| s.as_str()),
            );
            let verbs: Vec<String> = w["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| rbac_verb(v.as_str().unwrap()))
                .collect();
            match w.get("namespaces").and_then(|n| n.as_array()) {
                None => cluster.entry(t).or_default().extend(verbs),
                Some(list) => {
                    for ns in list {
                        namespaced
                            .entry(ns.as_str().unwrap().to_string())
                            .or_default()
                            .entry(t.clone())
                            .or_default()
                            .extend(verbs.clone());
                    }
                }
            }
        }
        if m.get("events").and_then(|v| v.as_bool()) == Some(true) {
            let ev = ("events.k8s.io".to_string(), "events".to_string());
            let verbs = ["create".to_string(), "patch".to_string()];
            match m.get("namespace").and_then(|v| v.as_str()) {
                None => cluster.entry(ev).or_default().extend(verbs),
                Some(ns) => namespaced
                    .entry(ns.to_string())
                    .or_default()
                    .entry(ev)
                    .or_default()
                    .extend(verbs),
            }
        }
    }
    // What the server holds.
    let rules = |obj: &Value| -> BTreeMap<(String, String), BTreeSet<String>> {
        let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for r in obj["rules"].as_array().unwrap() {
            for g in r["apiGroups"].as_array().unwrap() {
                for res in r["resources"].as_array().unwrap() {
                    out.entry((
                        g.as_str().unwrap().to_string(),
                        res.as_str().unwrap().to_string(),
                    ))
                    .or_default()
                    .extend(
                        r["verbs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|v| v.as_str().unwrap().to_string()),
                    );
                }
            }
        }
        out
    };
    let role = kubectl_json(
        &kubeconfig,
        &["get", "clusterrole", "wasm-informer", "-o", "json"],
    );
    assert_eq!(rules(&role), cluster, "the ClusterRole");
    let binding = kubectl_json(
        &kubeconfig,
        &["get", "clusterrolebinding", "wasm-informer", "-o", "json"],
    );
    assert_eq!(binding["subjects"][0]["name"], "informer");
    assert_eq!(binding["subjects"][0]["namespace"], "ops");
    for (ns, want) in &namespaced {
        // A namespaced grant already covered cluster-wide adds no Role rule.
        let want: BTreeMap<_, BTreeSet<String>> = want
            .iter()
            .map(|(t, v)| {
                let c = cluster.get(t).cloned().unwrap_or_default();
                (t.clone(), v.difference(&c).cloned().collect())
            })
            .filter(|(_, v): &(_, BTreeSet<String>)| !v.is_empty())
            .collect();
        if want.is_empty() {
            continue;
        }
        let role = kubectl_json(
            &kubeconfig,
            &["get", "role", "wasm-informer", "-n", ns, "-o", "json"],
        );
        assert_eq!(rules(&role), want, "the Role in {ns}");
    }
}

/// examples/deploy/20-rbac.yaml is what `wasm-informer rbac` derives from the
/// config directory the deployment mounts (examples/deploy/30-config.yaml's
/// ConfigMap), Leases included: regenerate it when that config changes.
#[test]
fn deploy_rbac_is_what_wasm_informer_rbac_derives_from_the_deployed_config() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(dir.path(), SIM);
    let deploy = repo_root().join("examples/deploy");
    kubectl_raw(
        &kubeconfig,
        &[
            "apply",
            "-f",
            deploy.join("00-namespace.yaml").to_str().unwrap(),
        ],
        None,
    );
    let cm: Value = serde_json::from_slice(&kubectl_raw(
        &kubeconfig,
        &[
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            deploy.join("30-config.yaml").to_str().unwrap(),
        ],
        None,
    ))
    .unwrap();
    // The config directory as the Deployment mounts it; components are not
    // needed to derive RBAC, so each manifest points at an empty stand-in.
    let config = dir.path().join("deployed");
    std::fs::create_dir_all(config.join("plugins")).unwrap();
    let stand_in = dir.path().join("component.wasm");
    std::fs::write(&stand_in, b"").unwrap();
    for (file, text) in cm["data"].as_object().unwrap() {
        let text = text.as_str().unwrap();
        if file == "host.toml" {
            std::fs::write(config.join(file), text).unwrap();
        } else {
            let text: String = text
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with("wasm =") {
                        format!("wasm = {:?}", stand_in.display().to_string())
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::fs::write(config.join("plugins").join(file), text).unwrap();
        }
    }
    let out = Command::new(BIN)
        .args(["rbac", "--config"])
        .arg(&config)
        .args([
            "--namespace",
            "wasm-informer",
            "--service-account",
            "wasm-informer",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let derived = String::from_utf8(out.stdout).unwrap();
    let committed = std::fs::read_to_string(deploy.join("20-rbac.yaml")).unwrap();
    assert_eq!(
        body(&committed),
        body(&derived),
        "examples/deploy/20-rbac.yaml differs from `wasm-informer rbac` of the deployed config"
    );
    assert!(derived.contains("\nkind: Role\n") && derived.contains("coordination.k8s.io"));
}
