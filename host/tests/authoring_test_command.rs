//! `wasm-informer test`: a plugin's unit test without a cluster. The oracle
//! is the fixture itself: which writes the probe plugin's `[config]` makes,
//! which of them its grants allow, and what the simulator must answer for
//! the fixture's objects (a replace with the fixture's resourceVersion
//! succeeds, one with an older resourceVersion conflicts).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn write(dir: &Path, rel: &str, text: &str) {
    std::fs::write(dir.join(rel), text).unwrap();
}

/// Runs `test` in `dir` on the probe, which answers every event with its
/// outcomes as an error (`--allow-errors`); returns the exit code, the JSON
/// output and stderr.
fn test(dir: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["--allow-errors"];
    args.extend_from_slice(extra);
    test_strict(dir, &args)
}

/// Runs `test` in `dir` with exactly `extra`.
fn test_strict(dir: &Path, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::new(BIN)
        .args(["test", "plugin.toml", "--objects", "objects.yaml"])
        .args(extra)
        .arg("--cache-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasmtime-cache-tests"))
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap_or(-1), v, stderr)
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: a
  namespace: demo
  uid: 11111111-2222-3333-4444-555555555555
  resourceVersion: "41"
  labels: {app: web}
spec:
  containers: [{name: c, image: "img:1"}]
"#;

#[test]
fn test_lists_every_write_attempted_as_a_dry_run_with_the_simulator_s_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let pod: Value = serde_saphyr::from_str(POD).unwrap();
    let mut replaced = pod.clone();
    replaced["metadata"]["labels"]["x"] = json!("1");
    let mut stale = replaced.clone();
    stale["metadata"]["resourceVersion"] = json!("40");
    let ops = json!([
        {"call": "replace", "resource": "v1/pods", "namespace": "demo", "name": "a", "body": replaced},
        {"call": "patch", "resource": "v1/pods", "namespace": "demo", "name": "a", "patch": "merge",
         "body": {"metadata": {"labels": {"y": "2"}}}},
        {"call": "create", "resource": "v1/configmaps", "namespace": "demo",
         "body": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}},
        {"call": "delete", "resource": "v1/configmaps", "namespace": "demo", "name": "cm"},
        {"call": "replace", "resource": "v1/pods", "namespace": "demo", "name": "a", "body": stale},
    ]);
    let manifest = json!({
        "name": "probe",
        "wasm": plugin_artifacts::API_PROBE,
        "resources": ["v1/pods"],
        "write": [
            {"resource": "v1/pods", "verbs": ["replace", "patch"]},
            {"resource": "v1/configmaps", "verbs": ["create"]},
        ],
        "config": {"ops": ops},
    });
    let manifest: toml::Value = toml::Value::try_from(&manifest).unwrap();
    write(d, "plugin.toml", &toml::to_string(&manifest).unwrap());
    write(d, "objects.yaml", POD);
    let (code, out, stderr) = test(d, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out["dry_run"], true);
    let steps = out["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "one object, no changes: {out}");
    assert_eq!(steps[0]["event"]["key"], "demo/a");
    let writes = steps[0]["writes"].as_array().unwrap();
    let got: Vec<(String, String, Option<u64>)> = writes
        .iter()
        .map(|w| {
            (
                w["verb"].as_str().unwrap().to_string(),
                w["outcome"].as_str().unwrap().to_string(),
                w["code"].as_u64(),
            )
        })
        .collect();
    let want = |v: &str, o: &str, c: Option<u64>| (v.to_string(), o.to_string(), c);
    assert_eq!(
        got,
        vec![
            want("replace", "ok", Some(200)),
            want("patch", "ok", Some(200)),
            want("create", "ok", Some(201)),
            want("delete", "forbidden", None),
            want("replace", "conflict", Some(409)),
        ],
        "{out}"
    );
    assert_eq!(writes[1]["body"], ops[1]["body"], "the body as sent");
    assert_eq!(writes[3]["name"], "cm");
    // What the plugin was answered (the probe returns it as its error).
    let answers: Value = serde_json::from_str(steps[0]["error"].as_str().unwrap()).unwrap();
    let replaced_answer = &answers[0]["object"];
    assert_eq!(replaced_answer["metadata"]["labels"]["x"], "1");
    assert_eq!(
        replaced_answer["metadata"]["uid"], pod["metadata"]["uid"],
        "answers name the fixture's uid"
    );
    let patched = &answers[1]["object"]["metadata"]["labels"];
    assert_eq!(
        patched,
        &json!({"app": "web", "y": "2"}),
        "dry run: the replace was not kept"
    );
    assert_eq!(answers[3]["error"], "forbidden");
    assert_eq!(answers[4]["error"], "conflict");
    assert_eq!(out["summary"]["writes"], 5);
}

#[test]
fn a_trapping_plugin_exits_non_zero_and_the_next_change_meets_a_fresh_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "plugin.toml",
        &format!(
            "name = \"panicky\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\n[config]\nn = 2\n",
            plugin_artifacts::PANIC_EVERY_N
        ),
    );
    write(d, "objects.yaml", POD);
    let b = POD.replace("name: a", "name: b");
    let c = POD.replace("name: a", "name: c");
    write(d, "events.yaml", &format!("{b}\n---\n{c}"));
    let (code, out, stderr) = test(d, &["--events", "events.yaml"]);
    assert_eq!(code, 1, "a trap fails the test: {stderr}");
    assert!(stderr.contains("trapped"), "{stderr}");
    let steps = out["steps"].as_array().unwrap();
    let outcomes: Vec<&str> = steps
        .iter()
        .map(|s| s["outcome"].as_str().unwrap())
        .collect();
    // Per instance: the 2nd event panics; the fresh one counts from 1 again.
    assert_eq!(outcomes, vec!["ok", "trap", "ok"], "{out}");
    assert_eq!(steps[1]["trap"]["kind"], "panic");
    assert_eq!(steps[1]["restart"]["outcome"], "ok");
    assert_eq!(steps[2]["event"]["key"], "demo/c");
    assert_eq!(out["summary"]["traps"], 1);
}

#[test]
fn expect_compares_and_names_each_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "plugin.toml",
        &format!(
            "name = \"panicky\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\n[config]\nn = 5\n",
            plugin_artifacts::PANIC_EVERY_N
        ),
    );
    write(d, "objects.yaml", POD);
    write(
        d,
        "good.json",
        r#"{"steps": [{"event": {"kind": "added", "key": "demo/a"}, "outcome": "ok", "writes": []}]}"#,
    );
    write(
        d,
        "bad.json",
        r#"{"steps": [{"event": {"kind": "updated"}}, {}]}"#,
    );
    let (code, _, stderr) = test(d, &["--expect", "good.json"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = test(d, &["--expect", "bad.json"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("$.steps: expected 2 item(s), got 1"),
        "{stderr}"
    );
}

#[test]
fn bad_fixtures_are_input_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "plugin.toml",
        &format!(
            "name = \"panicky\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\n",
            plugin_artifacts::PANIC_EVERY_N
        ),
    );
    write(
        d,
        "objects.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
    );
    let out = Command::new(BIN)
        .args(["test", "plugin.toml", "--objects", "objects.yaml"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("objects.yaml") && stderr.contains("namespace"),
        "{stderr}"
    );
}

/// The simulator behind `test` validates as the API server does: a write a
/// real cluster would refuse (a label value with a space, a Pod without
/// containers) is reported per call as kubectl prints the server's error,
/// and `test` fails unless `--allow-invalid`.
#[test]
fn test_fails_on_a_write_the_api_server_would_refuse_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let ops = json!([
        {"call": "patch", "resource": "v1/pods", "namespace": "demo", "name": "a", "patch": "merge",
         "body": {"metadata": {"labels": {"team": "platform team!"}}}},
        {"call": "create", "resource": "v1/pods", "namespace": "demo",
         "body": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {"containers": []}}},
        {"call": "patch", "resource": "v1/pods", "namespace": "demo", "name": "a", "patch": "merge",
         "body": {"metadata": {"labels": {"team": "platform"}}}},
    ]);
    let manifest = json!({
        "name": "probe",
        "wasm": plugin_artifacts::API_PROBE,
        "resources": ["v1/pods"],
        "write": [{"resource": "v1/pods", "verbs": ["patch", "create"]}],
        "config": {"ops": ops},
    });
    let manifest: toml::Value = toml::Value::try_from(&manifest).unwrap();
    write(d, "plugin.toml", &toml::to_string(&manifest).unwrap());
    write(d, "objects.yaml", POD);
    let (code, out, stderr) = test(d, &[]);
    assert_eq!(code, 1, "{stderr}");
    let writes = out["steps"][0]["writes"].as_array().unwrap();
    assert_eq!(writes.len(), 3, "{out}");
    assert_eq!(writes[0]["outcome"], "invalid");
    assert_eq!(writes[0]["code"], 422);
    let causes = writes[0]["error"]["causes"].as_array().unwrap();
    assert_eq!(causes[0]["field"], "metadata.labels");
    assert_eq!(writes[1]["outcome"], "invalid");
    assert_eq!(writes[1]["error"]["causes"][0]["field"], "spec.containers");
    assert_eq!(writes[2]["outcome"], "ok");
    assert_eq!(out["summary"]["invalid"], 2, "{out}");
    // As kubectl prints the server's refusal, one line per invalid write.
    assert!(
        stderr.contains("patch v1/pods demo/a: The Pod \"a\" is invalid: metadata.labels: Invalid value: \"platform team!\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("The Pod \"empty\" is invalid: spec.containers: Required value"),
        "{stderr}"
    );
    let (code, out, _) = test(d, &["--allow-invalid"]);
    assert_eq!(code, 0);
    assert_eq!(out["summary"]["invalid"], 2);
}

fn probe_manifest(d: &Path, resources: &[&str], extra: &str) {
    let manifest = json!({
        "name": "probe",
        "wasm": plugin_artifacts::API_PROBE,
        "resources": resources,
        "config": {"ops": []},
    });
    let manifest: toml::Value = toml::Value::try_from(&manifest).unwrap();
    write(
        d,
        "plugin.toml",
        &format!("{extra}{}", toml::to_string(&manifest).unwrap()),
    );
}

/// `test` gives the verdicts `run` gives: a resource the server does not
/// serve is bad input naming the closest one; a change of the events file
/// that reaches no call fails the test (unless `--allow-unmatched`); a run in
/// which every call failed fails it (without `--expect`, which decides).
#[test]
fn test_refuses_what_run_refuses_and_fails_what_did_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "objects.yaml", POD);
    probe_manifest(d, &["v1/pod"], "");
    let out = Command::new(BIN)
        .args(["test", "plugin.toml", "--objects", "objects.yaml"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown resource \"v1/pod\"") && err.contains("did you mean \"v1/pods\"?"),
        "{err}"
    );
    // An event about a ConfigMap, which the plugin does not watch.
    probe_manifest(d, &["v1/pods"], "");
    write(
        d,
        "events.yaml",
        "type: ADDED\nobject:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: cm, namespace: demo}\n",
    );
    let (code, out, stderr) = test(d, &["--events", "events.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(out["unmatched"].as_array().unwrap().len(), 1, "{out}");
    assert!(stderr.contains("reached no call"), "{stderr}");
    // Every call failed (the probe answers every event with an error).
    let (code, out, stderr) = test_strict(d, &["--events", "events.yaml", "--allow-unmatched"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("every call failed"), "{stderr}");
    assert_eq!(out["summary"]["errors"], out["summary"]["steps"]);
}

/// A controller under `test` is driven as the host drives it: a Deployment
/// queues its own key, a Service it controls queues the Deployment's (not
/// its own), and a Service without a controller owner of that kind queues
/// nothing. The oracle is the fixture's owner references.
#[test]
fn a_controller_is_reconciled_for_the_primary_key_each_object_queues() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let manifest = json!({
        "name": "exposer",
        "wasm": plugin_artifacts::SERVICE_EXPOSER,
        "for": "apps/v1/deployments",
        "owns": ["v1/services"],
        "write": [{"resource": "v1/services", "verbs": ["create", "patch", "delete"]}],
    });
    let manifest: toml::Value = toml::Value::try_from(&manifest).unwrap();
    write(d, "plugin.toml", &toml::to_string(&manifest).unwrap());
    let uid = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    write(
        d,
        "objects.yaml",
        &format!(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: demo, uid: {uid}, labels: {{expose: "true", app: web}}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: c, image: "img:1", ports: [{{containerPort: 80}}]}}]}}
"#
        ),
    );
    write(
        d,
        "events.yaml",
        &format!(
            r#"
type: ADDED
object:
  apiVersion: v1
  kind: Service
  metadata:
    name: web
    namespace: demo
    ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: {uid}, controller: true}}]
  spec: {{selector: {{app: web}}, ports: [{{name: port-80, port: 80, targetPort: 80, protocol: TCP}}]}}
---
type: ADDED
object:
  apiVersion: v1
  kind: Service
  metadata: {{name: by-hand, namespace: demo}}
  spec: {{ports: [{{port: 81}}]}}
"#
        ),
    );
    let (code, out, stderr) = test_strict(d, &["--events", "events.yaml", "--allow-unmatched"]);
    assert_eq!(code, 0, "{stderr}\n{out}");
    let reconciled: Vec<(String, String)> = out["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["reconcile"]["resource"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                s["reconcile"]["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let dep = ("apps/v1/deployments".to_string(), "demo/web".to_string());
    assert_eq!(
        reconciled,
        vec![dep.clone(), dep],
        "the Deployment, then its Service's owner; the Service made by hand queues nothing: {out}"
    );
    // The first reconcile applies the Service; the second finds it matching.
    let writes = |i: usize| out["steps"][i]["writes"].as_array().map_or(0, Vec::len);
    assert_eq!((writes(0), writes(1)), (1, 0), "{out}");
}
