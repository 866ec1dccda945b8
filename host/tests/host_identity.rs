//! Each plugin acts as its own identity, end to end: the example config with
//! `[identity] impersonate = true`, against a simulator process that
//! authenticates tokens and enforces RBAC, loaded with exactly what
//! `wasm-informer rbac` derives for that config (applied by kubectl as the
//! admin). The host runs with a token of its own ServiceAccount.
//!
//! The verdicts come from the server: the cluster's state read by kubectl
//! (every pod labelled, every exposed Deployment with its Service), and the
//! simulator's request log (who sent each request, as whom, and what the
//! server answered).

use crate::host_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use host_support::content::*;
use host_support::*;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");
const HOST_USER: &str = "system:serviceaccount:wasm-informer:wasm-informer";

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A simulator process enforcing RBAC (over HTTPS), which accepts the token
/// `host` as the host's ServiceAccount; the admin's kubeconfig.
fn simulator(dir: &Path) -> (Proc, PathBuf) {
    let config = dir.join("sim-config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("host.toml"),
        "[sim]\npods = 60\nnamespaces = 3\ndeployments = 12\nexpose_fraction = 0.5\n\
         churn_per_second = 0\nrbac = true\n",
    )
    .unwrap();
    let kubeconfig = dir.join("admin.kubeconfig");
    let sim = Proc(
        Command::new(BIN)
            .args(["sim", "--listen", "127.0.0.1:0", "--duration", "600"])
            .arg("--config")
            .arg(&config)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(["--token", &format!("host={HOST_USER}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while !kubeconfig.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "simulator wrote no kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    (sim, kubeconfig)
}

/// The admin's kubeconfig with the host's token instead.
fn host_kubeconfig(admin: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(admin).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        match line.trim_start().strip_prefix("token:") {
            Some(_) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(&format!("{indent}token: host\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert!(out.contains("token: host"), "no token in {text}");
    let path = dir.join("host.kubeconfig");
    std::fs::write(&path, out).unwrap();
    path
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Pods whose `team` label differs from their namespace's annotation.
fn unlabelled(kubeconfig: &Path) -> Vec<String> {
    let teams: BTreeMap<String, String> =
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
            .collect();
    kubectl_json(kubeconfig, &["get", "pods", "-A", "-o", "json"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let ns = p["metadata"]["namespace"].as_str()?;
            let want = teams.get(ns)?;
            let have = p["metadata"]["labels"]["team"].as_str();
            (have != Some(want.as_str())).then(|| format!("{ns}/{}", p["metadata"]["name"]))
        })
        .collect()
}

/// Exposed Deployments without their Service.
fn unexposed(kubeconfig: &Path) -> Vec<String> {
    let services: Vec<String> = kubectl_json(kubeconfig, &["get", "services", "-A", "-o", "json"])
        ["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s["metadata"]["namespace"].as_str().unwrap(),
                s["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    kubectl_json(
        kubeconfig,
        &[
            "get",
            "deployments",
            "-A",
            "-l",
            "expose=true",
            "-o",
            "json",
        ],
    )["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["metadata"]["namespace"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .filter(|k| !services.contains(k))
        .collect()
}

#[test]
fn every_example_plugin_acts_as_its_own_service_account_under_the_servers_rbac() {
    let tmp = tempfile::tempdir().unwrap();
    let (_sim, admin) = simulator(tmp.path());
    let config = tmp.path().join("config");
    copy_config(&repo_root().join("config"), &config, 0.0, &[]);
    let host_toml = config.join("host.toml");
    let mut host: toml::Table =
        toml::from_str(&std::fs::read_to_string(&host_toml).unwrap()).unwrap();
    host.insert(
        "identity".into(),
        toml::Value::Table(
            toml::from_str("impersonate = true\nnamespace = \"wasm-informer\"").unwrap(),
        ),
    );
    std::fs::write(&host_toml, toml::to_string(&host).unwrap()).unwrap();
    for f in std::fs::read_dir(config.join("plugins")).unwrap().flatten() {
        let m: toml::Table = toml::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        assert!(
            Path::new(m["wasm"].as_str().unwrap()).exists(),
            "{} is missing: build the plugins first (scripts/build-plugins.sh)",
            m["wasm"]
        );
    }

    // The RBAC `wasm-informer rbac` derives, applied by the admin.
    kubectl_raw(&admin, &["create", "namespace", "wasm-informer"], None);
    let rbac = Command::new(BIN)
        .args(["rbac", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        rbac.status.success(),
        "{}",
        String::from_utf8_lossy(&rbac.stderr)
    );
    let yaml = String::from_utf8(rbac.stdout).unwrap();
    kubectl_raw(&admin, &["apply", "--server-side", "-f", "-"], Some(&yaml));
    let accounts = kubectl_json(
        &admin,
        &[
            "get",
            "serviceaccounts",
            "-n",
            "wasm-informer",
            "-o",
            "json",
        ],
    );
    let plugins: Vec<String> = std::fs::read_dir(config.join("plugins"))
        .unwrap()
        .flatten()
        .map(|f| f.path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for p in &plugins {
        assert!(
            accounts["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["metadata"]["name"] == format!("wasm-informer-{p}")),
            "no ServiceAccount for {p}"
        );
    }

    let kubeconfig = host_kubeconfig(&admin, tmp.path());
    let mut host = HostProc::spawn_env(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--status",
            "never",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    host.wait_line(&[&format!("running {} plugin(s)", plugins.len())], LONG);
    wait_until("every pod labelled by label-enforcer", LONG, || {
        unlabelled(&admin).is_empty()
    });
    wait_until("every exposed Deployment with its Service", LONG, || {
        unexposed(&admin).is_empty()
    });

    // The server's account of it: who sent what, as whom, and its answer.
    let log: Vec<Value> = serde_json::from_slice(&kubectl_raw(
        &admin,
        &["get", "--raw", "/_sim/requests"],
        None,
    ))
    .unwrap();
    let mut writes_by: BTreeMap<String, usize> = BTreeMap::new();
    for r in &log {
        let user = r["user"].as_str().unwrap_or_default();
        if user != HOST_USER {
            continue;
        }
        let status = r["status"].as_u64().unwrap();
        let as_user = r["impersonatedUser"].as_str().unwrap_or_default();
        assert!(
            status != 401 && status != 403,
            "the server refused the host: {r}"
        );
        if as_user.is_empty() {
            // The host's own requests: its informers only read.
            assert_eq!(r["method"], "GET", "the host wrote as itself: {r}");
            continue;
        }
        let plugin = as_user
            .strip_prefix("system:serviceaccount:wasm-informer:wasm-informer-")
            .unwrap_or_else(|| panic!("impersonated someone else: {r}"));
        assert!(plugins.iter().any(|p| p == plugin), "{r}");
        let query = r["query"].as_str().unwrap_or_default();
        if let Some(fm) = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("fieldManager="))
        {
            assert_eq!(
                fm,
                format!("wasm-informer%2F{plugin}"),
                "one plugin's write as another's identity: {r}"
            );
        }
        assert!(status < 400 || status == 404 || status == 409, "{r}");
        if r["writtenResourceVersion"].is_u64() {
            *writes_by.entry(plugin.to_string()).or_default() += 1;
        }
    }
    for p in ["label-enforcer", "service-exposer", "image-policy"] {
        assert!(
            writes_by.get(p).copied().unwrap_or(0) > 0,
            "{p} wrote nothing: {writes_by:?}"
        );
    }
    host.terminate();
    host.wait_exit(LONG);
}
