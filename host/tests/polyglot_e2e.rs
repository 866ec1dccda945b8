//! End to end: the JavaScript, Python and C example plugins (WIT 0.2) run in
//! the real `wasm-informer` binary against the API simulator (`wasm-informer
//! sim`, seeded with Pods and Deployments, no churn), with the grants of their
//! example manifests, and act on the cluster exactly as their policies imply
//! for the objects the simulator serves:
//! - each logs exactly its findings (the `plugin=NAME` log lines);
//! - image-policy in enforce mode leaves its violation annotation on exactly
//!   the violating pods, with exactly their disallowed registries
//!   (`kubectl get pods -o json`);
//! - every plugin's Warning Events (`kubectl get events.events.k8s.io -o
//!   json`, `reportingController: wasm-informer/PLUGIN`) are about exactly the
//!   objects it found, one Event per object and reason, repeats folded into
//!   `series.count`.
//!
//! The expectation is computed independently, from what `kubectl get -o
//! json` returns for the same simulator before the host starts, so the test
//! checks the whole path: list/watch, cache, delivery, the WIT boundary, the
//! guest's logic and its cache queries, the kube and events capabilities, and
//! the server's state.
//!
//! Needs the plugins built (`scripts/build-plugins.sh`) and kubectl.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");
const RESTART_THRESHOLD: i64 = 2;
const ANNOTATION: &str = "image-policy.wasm-informer.dev/violation";
/// The auditor's required labels: the simulator's Deployments have `app` but
/// neither of the others, so each misses two (one Event, `series.count` 2).
const REQUIRED_LABELS: [&str; 3] = ["team", "app", "cost-center"];
/// image-policy's allowlist: the simulator's web and api pods comply.
const ALLOWED: [&str; 3] = [
    "registry.k8s.io",
    "registry.example/web",
    "registry.example/api",
];

/// Whether a normalised image is allowed, as image-policy decides.
fn allowed(full: &str) -> bool {
    ALLOWED
        .iter()
        .any(|p| full == *p || full.starts_with(&format!("{p}/")))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn wasm(name: &str) -> PathBuf {
    let p = root().join(format!("target/plugins/{name}.wasm"));
    assert!(
        p.exists(),
        "{} is missing: build the plugins first with scripts/setup.sh && scripts/build-plugins.sh",
        p.display()
    );
    p
}

/// Kills the child on drop, so a failing test leaves no process behind.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_config(dir: &Path) {
    let cache = root().join("target/wasmtime-cache-tests");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::write(
        dir.join("host.toml"),
        format!(
            r#"metrics_addr = "127.0.0.1:0"
cache_dir = {cache:?}
[sim]
pods = 60
namespaces = 3
nodes = 3
seed = 11
churn_per_second = 0
"#
        ),
    )
    .unwrap();
    // The grants are those of the example manifests in config/plugins/;
    // the write rate is raised so that the test does not wait on pacing.
    let manifest = |name: &str, resource: &str, fuel: u64, grants: &str, config: &str| {
        std::fs::write(
            dir.join(format!("plugins/{name}.toml")),
            format!(
                r#"name = "{name}"
wasm = {:?}
resources = ["{resource}"]
read = ["{resource}"]
queue_capacity = 4096
fuel_per_event = {fuel}
timeout_ms = 5000
memory_mb = 128
resync_seconds = 0
write_qps = 100
write_burst = 100
{grants}

[config]
{config}
"#,
                wasm(name).display().to_string()
            ),
        )
        .unwrap();
    };
    manifest(
        "deployment-auditor",
        "apps/v1/deployments",
        500_000_000,
        "events = true",
        r#"required_labels = ["team", "app", "cost-center"]
allowed_label_values = { tier = ["frontend", "backend"] }"#,
    );
    manifest(
        "image-policy",
        "v1/pods",
        500_000_000,
        r#"events = true
[[write]]
resource = "v1/pods"
verbs = ["patch"]"#,
        r#"mode = "enforce"
allowed_registries = ["registry.k8s.io", "registry.example/web", "registry.example/api"]"#,
    );
    manifest(
        "restart-alarm",
        "v1/pods",
        100_000_000,
        "events = true",
        &format!("threshold = {RESTART_THRESHOLD}\nevents = true"),
    );
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Value {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap(),
        o["metadata"]["name"].as_str().unwrap()
    )
}

/// What the auditor must report: the required labels, and tier one of
/// frontend or backend.
fn expected_auditor(deployments: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for d in deployments {
        let labels = &d["metadata"]["labels"];
        for label in REQUIRED_LABELS {
            if labels.get(label).is_none() {
                out.push(format!(
                    "violation deployment={} missing-label={label}",
                    key(d)
                ));
            }
        }
        if let Some(tier) = labels["tier"].as_str() {
            if tier != "frontend" && tier != "backend" {
                out.push(format!(
                    "violation deployment={} label=tier value={tier} allowed=frontend|backend",
                    key(d)
                ));
            }
        }
    }
    out
}

/// Registry and repository path of an image, as the container runtime resolves it.
fn normalise(image: &str) -> String {
    let r = image.split('@').next().unwrap();
    let (first, rest) = r.split_once('/').unwrap_or((r, ""));
    let (registry, mut path) = if !rest.is_empty()
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        (first.to_string(), rest.to_string())
    } else if r.contains('/') {
        ("docker.io".to_string(), r.to_string())
    } else {
        ("docker.io".to_string(), format!("library/{r}"))
    };
    if let Some(colon) = path.rfind(':') {
        if colon > path.rfind('/').unwrap_or(0) {
            path.truncate(colon);
        }
    }
    format!("{registry}/{path}")
}

fn images(pod: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        for c in pod["spec"][field].as_array().into_iter().flatten() {
            out.push((
                c["name"].as_str().unwrap().to_string(),
                c["image"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// What image-policy must report: every container outside the allowlist.
fn expected_images(pods: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for p in pods {
        let ns = p["metadata"]["namespace"].as_str().unwrap();
        for (c, image) in images(p) {
            let full = normalise(&image);
            if allowed(&full) {
                continue;
            }
            let same = pods
                .iter()
                .filter(|q| q["metadata"]["namespace"].as_str() == Some(ns))
                .filter(|q| images(q).iter().any(|(_, i)| normalise(i) == full))
                .count();
            let registry = full.split('/').next().unwrap();
            out.push(format!(
                "violation pod={} container={c} image={image} registry={registry} same-image-in-namespace={same}",
                key(p)
            ));
        }
    }
    out
}

fn restarts(pod: &Value) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for field in ["initContainerStatuses", "containerStatuses"] {
        for s in pod["status"][field].as_array().into_iter().flatten() {
            out.push((
                s["name"].as_str().unwrap().to_string(),
                s["restartCount"].as_i64().unwrap_or(0),
            ));
        }
    }
    out
}

/// What restart-alarm must report at the threshold.
fn expected_alarms(pods: &[Value]) -> Vec<String> {
    let alarming = |p: &Value| restarts(p).iter().any(|(_, n)| *n >= RESTART_THRESHOLD);
    let mut out = Vec::new();
    for p in pods {
        let ns = p["metadata"]["namespace"].as_str();
        let k = pods
            .iter()
            .filter(|q| q["metadata"]["namespace"].as_str() == ns && alarming(q))
            .count();
        for (c, n) in restarts(p) {
            if n >= RESTART_THRESHOLD {
                out.push(format!(
                    "alarm pod={} container={c} restarts={n} threshold={RESTART_THRESHOLD} namespace-pods-alarming={k}",
                    key(p)
                ));
            }
        }
    }
    out
}

/// (plugin, regarding namespace/name, reason) -> occurrences: the Warning
/// Events each plugin must have recorded, computed from the findings the
/// policies imply (one occurrence per finding).
type EventCounts = BTreeMap<(String, String, String), u64>;

fn expected_events(deployments: &[Value], pods: &[Value]) -> EventCounts {
    let mut out = EventCounts::new();
    let mut add = |plugin: &str, o: &Value, reason: &str| {
        *out.entry((plugin.to_string(), key(o), reason.to_string()))
            .or_default() += 1;
    };
    for d in deployments {
        let labels = &d["metadata"]["labels"];
        for label in REQUIRED_LABELS {
            if labels.get(label).is_none() {
                add("deployment-auditor", d, "MissingLabel");
            }
        }
        if let Some(tier) = labels["tier"].as_str() {
            if tier != "frontend" && tier != "backend" {
                add("deployment-auditor", d, "DisallowedLabelValue");
            }
        }
    }
    for p in pods {
        for (_, image) in images(p) {
            if !allowed(&normalise(&image)) {
                add("image-policy", p, "DisallowedRegistry");
            }
        }
        for (_, n) in restarts(p) {
            if n >= RESTART_THRESHOLD {
                add("restart-alarm", p, "RestartThreshold");
            }
        }
    }
    out
}

/// Pod key -> the violation annotation image-policy must leave on it: its
/// disallowed registries, sorted, comma-separated.
fn expected_annotations(pods: &[Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in pods {
        let registries: BTreeSet<String> = images(p)
            .iter()
            .map(|(_, i)| normalise(i))
            .filter(|full| !allowed(full))
            .map(|full| full.split('/').next().unwrap().to_string())
            .collect();
        if !registries.is_empty() {
            out.insert(key(p), registries.into_iter().collect::<Vec<_>>().join(","));
        }
    }
    out
}

/// Pod key -> its violation annotation, for the pods that have one.
fn annotations(pods: &Value) -> BTreeMap<String, String> {
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            p["metadata"]["annotations"][ANNOTATION]
                .as_str()
                .map(|a| (key(p), a.to_string()))
        })
        .collect()
}

/// The Warning Events of wasm-informer plugins, folded as the server holds
/// them: one Event per object and reason, its occurrences in `series.count`.
/// Also checks that each Event's `regarding` names the object's kind and uid.
fn warning_events(events: &Value, uids: &BTreeMap<String, (String, String)>) -> EventCounts {
    let mut out = EventCounts::new();
    for e in events["items"].as_array().unwrap() {
        let Some(plugin) = e["reportingController"]
            .as_str()
            .and_then(|c| c.strip_prefix("wasm-informer/"))
        else {
            continue;
        };
        if e["type"] != "Warning" {
            continue;
        }
        let r = &e["regarding"];
        let k = format!(
            "{}/{}",
            r["namespace"].as_str().unwrap_or_default(),
            r["name"].as_str().unwrap_or_default()
        );
        if let Some((kind, uid)) = uids.get(&k) {
            assert_eq!(r["kind"].as_str(), Some(kind.as_str()), "{e}");
            assert_eq!(r["uid"].as_str(), Some(uid.as_str()), "{e}");
        }
        let count = e["series"]["count"].as_u64().unwrap_or(1);
        let slot = out
            .entry((
                plugin.to_string(),
                k,
                e["reason"].as_str().unwrap().to_string(),
            ))
            .or_default();
        assert_eq!(*slot, 0, "two Events for one object and reason: {e}");
        *slot = count;
    }
    out
}

/// The (plugin, message) of a plugin log line on the host's stderr, which the
/// host writes as `... LEVEL plugin: MESSAGE plugin=NAME stream="log"`.
fn plugin_message(line: &str) -> Option<(String, String)> {
    let (_, rest) = line.split_once(" plugin: ")?;
    let at = rest.rfind(" plugin=")?;
    let message = rest[..at].to_string();
    let plugin = rest[at + " plugin=".len()..]
        .split_whitespace()
        .next()?
        .to_string();
    Some((plugin, message))
}

/// The findings (`violation ...`, `alarm ...`) each plugin logged, sorted.
fn findings(lines: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (plugin, message) in lines.iter().filter_map(|l| plugin_message(l)) {
        if message.starts_with("violation ") || message.starts_with("alarm ") {
            out.entry(plugin).or_default().push(message);
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

#[test]
fn every_example_plugin_reports_exactly_its_findings_in_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    write_config(&config);
    let kubeconfig = dir.path().join("kubeconfig.yaml");

    let _sim = Proc(
        Command::new(BIN)
            .args([
                "sim",
                "--listen",
                "127.0.0.1:0",
                "--duration",
                "600",
                "--config",
            ])
            .arg(&config)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
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

    let deployments = kubectl(&kubeconfig, &["get", "deployments", "-A", "-o", "json"]);
    let pods = kubectl(&kubeconfig, &["get", "pods", "-A", "-o", "json"]);
    let deployments = deployments["items"].as_array().unwrap().clone();
    let pods = pods["items"].as_array().unwrap().clone();
    assert!(!deployments.is_empty() && !pods.is_empty());

    let mut expected: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    expected.insert("deployment-auditor", expected_auditor(&deployments));
    expected.insert("image-policy", expected_images(&pods));
    expected.insert("restart-alarm", expected_alarms(&pods));
    for (plugin, lines) in &expected {
        assert!(
            !lines.is_empty(),
            "the seeded workload gives {plugin} nothing to find"
        );
    }
    let want_annotations = expected_annotations(&pods);
    let want_events = expected_events(&deployments, &pods);
    assert!(
        want_annotations.len() < pods.len(),
        "some pods must comply, to show they are left alone"
    );
    assert!(
        want_events.values().any(|n| *n > 1),
        "some object must have repeats, to show they fold into a series"
    );
    let uids: BTreeMap<String, (String, String)> = deployments
        .iter()
        .map(|d| ("Deployment", d))
        .chain(pods.iter().map(|p| ("Pod", p)))
        .map(|(kind, o)| {
            (
                key(o),
                (
                    kind.to_string(),
                    o["metadata"]["uid"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    assert!(
        pods.iter()
            .all(|p| p["metadata"]["annotations"][ANNOTATION].is_null()),
        "no pod carries the annotation before the host runs"
    );

    let mut host = Proc(
        Command::new(BIN)
            .args(["run", "--status", "never", "--config"])
            .arg(&config)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stderr = host.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });

    // Collect until every expected finding has appeared (JS and Python plugins
    // compile for up to ~30 s each on a cold cache), then a little longer to
    // catch any extra finding.
    for v in expected.values_mut() {
        v.sort();
    }
    let complete = |lines: &[String]| {
        let got = findings(lines);
        expected.iter().all(|(plugin, want)| {
            let have = got.get(*plugin).cloned().unwrap_or_default();
            want.iter().all(|m| have.contains(m))
        })
    };
    let mut lines: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !complete(&lines) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    let settle = Instant::now() + Duration::from_secs(3);
    while let Ok(l) = rx.recv_timeout(settle.saturating_duration_since(Instant::now())) {
        lines.push(l);
    }
    assert!(
        host.0.try_wait().unwrap().is_none(),
        "the host exited early:\n{}",
        lines.join("\n")
    );

    let got = findings(&lines);
    for (plugin, want) in &expected {
        eprintln!("{plugin}: {} findings expected", want.len());
        let have = got.get(*plugin).cloned().unwrap_or_default();
        assert_eq!(
            &have, want,
            "{plugin}: logged findings differ from the expected ones"
        );
    }
    assert_eq!(
        got.len(),
        expected.len(),
        "findings from unexpected plugins: {got:?}"
    );

    // The cluster: wait until the writes have landed (the findings are logged
    // before the plugin's API calls return), then compare exactly.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (have_annotations, have_events) = loop {
        let pods = kubectl(&kubeconfig, &["get", "pods", "-A", "-o", "json"]);
        let events = kubectl(
            &kubeconfig,
            &["get", "events.events.k8s.io", "-A", "-o", "json"],
        );
        let state = (annotations(&pods), warning_events(&events, &uids));
        if (state.0 == want_annotations && state.1 == want_events) || Instant::now() > deadline {
            break state;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "image-policy: {} pods annotated; {} Warning Events ({} occurrences)",
        have_annotations.len(),
        have_events.len(),
        have_events.values().sum::<u64>()
    );
    assert_eq!(
        have_annotations, want_annotations,
        "the violation annotation is on exactly the violating pods, with their registries"
    );
    assert_eq!(
        have_events, want_events,
        "each plugin's Warning Events are about exactly the objects it found, repeats in series.count"
    );
    assert!(
        host.0.try_wait().unwrap().is_none(),
        "the host exited early"
    );
}
