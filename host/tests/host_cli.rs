//! The CLI contract: `check` on a manifest or component (exit codes and the
//! reason), `sim` writing a usable kubeconfig, and `run` refusing a bad host.toml
//! with the file, position, key and reason.

use crate::host_support;

use std::process::Command;
use std::time::Duration;

use host_support::*;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasm-informer"));
    c.current_dir(repo_root());
    c
}

#[test]
fn check_accepts_a_good_manifest_and_rejects_a_wrong_world() {
    let fx = Fixture::new("");
    fx.copy_wasm(plugin_artifacts::POD_READY_COUNTER, "good");
    fx.copy_wasm(plugin_artifacts::FIXTURE_WRONG_WORLD, "wrong");
    let good = fx.write(
        "plugins/good.toml",
        "name = \"good\"\nwasm = \"../wasm/good.wasm\"\nresources = [\"v1/pods\"]\n",
    );
    let out = bin()
        .args(["check", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("event-handler"));

    let wrong = fx.write(
        "plugins/wrong.toml",
        "name = \"wrong\"\nwasm = \"../wasm/wrong.wasm\"\nresources = [\"v1/pods\"]\n",
    );
    let out = bin()
        .args(["check", wrong.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("wrong.wasm"),
        "the error must name the file: {err}"
    );

    let bad = fx.write(
        "plugins/bad.toml",
        "name = \"bad\"\nwasm = \"../wasm/good.wasm\"\nresources = [\"pods\"]\n",
    );
    let out = bin()
        .args(["check", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "error: {}:3:14: key `resources`: invalid resource \"pods\": expected VERSION/PLURAL (for example \"v1/pods\") or GROUP/VERSION/PLURAL (for example \"apps/v1/deployments\")",
            bad.display()
        )
    );
}

#[test]
fn run_refuses_a_bad_host_toml() {
    let fx = Fixture::new("[defaults]\nmemory_mb = 0\n");
    let out = bin()
        .args(["run", "--config", fx.dir().to_str().unwrap(), "--sim"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "error: {}:5:13: key `defaults.memory_mb`: 0 is out of range: must be between 1 and 4096",
        fx.path("host.toml").display()
    );
    assert!(err.lines().any(|l| l == want), "{err}");
}

#[test]
fn sim_serves_and_writes_a_kubeconfig() {
    let tmp = tempfile::tempdir().unwrap();
    let kc = tmp.path().join("kubeconfig");
    let mut sim = HostProc::spawn(&[
        "sim",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
        kc.to_str().unwrap(),
        "--duration",
        "30",
    ]);
    let line = sim.wait_line(&["wasm-informer: simulator at http://"], LONG);
    let url = line
        .split("at http://")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let yaml = std::fs::read_to_string(&kc).unwrap();
    assert!(yaml.contains(&format!("server: http://{url}")), "{yaml}");
    let (code, body) = http_get(url.parse().unwrap(), "/api/v1/namespaces/ns-0/pods?limit=5");
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    sim.terminate();
    assert!(sim.wait_exit(Duration::from_secs(60)).success());
}

#[test]
fn run_uses_the_kubeconfig_and_context() {
    // A simulator stands in for the cluster; `run` finds it through KUBECONFIG
    // and --context, exactly as it would a real cluster.
    let fx = Fixture::new("");
    fx.copy_wasm(plugin_artifacts::POD_READY_COUNTER, "counter");
    fx.write(
        "plugins/counter.toml",
        "name = \"counter\"\nwasm = \"../wasm/counter.wasm\"\nresources = [\"v1/pods\"]\nread = [\"v1/pods\"]\n",
    );
    let kc = fx.path("kubeconfig");
    let mut sim = HostProc::spawn(&[
        "sim",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
        kc.to_str().unwrap(),
    ]);
    sim.wait_line(&["wasm-informer: simulator at http://"], LONG);

    let report = fx.path("r.json");
    let mut cmd = bin();
    cmd.env("KUBECONFIG", &kc).args([
        "run",
        "--config",
        fx.dir().to_str().unwrap(),
        "--context",
        "apisim",
        "--duration",
        "5",
        "--report",
        report.to_str().unwrap(),
        "--status",
        "never",
    ]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(
        r["plugins"]["counter"]["delivered"]["added"]
            .as_u64()
            .unwrap()
            > 0,
        "{r}"
    );
    assert_eq!(r["informers"]["v1/pods"]["synced"], true);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("reason=\"duration elapsed\""), "{err}");

    let mut cmd = bin();
    cmd.env("KUBECONFIG", &kc).args([
        "run",
        "--config",
        fx.dir().to_str().unwrap(),
        "--context",
        "nope",
        "--duration",
        "1",
    ]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: kubeconfig context \"nope\": "),
        "{err}"
    );
    sim.terminate();
    assert!(sim.wait_exit(Duration::from_secs(60)).success());
}

#[test]
fn record_then_replay_two_versions_prints_their_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("config");
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::write(
        dir.join("host.toml"),
        "metrics_addr = \"127.0.0.1:0\"\n[sim]\npods = 30\nnamespaces = 2\nchurn_per_second = 10\ndeployments = 0\n",
    )
    .unwrap();
    let manifest = |name: &str, label: &str, extra: &str| {
        format!(
            "name = \"{name}\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\nread = [\"v1/namespaces\"]\nmemory_mb = 32\n{extra}\n[config]\nlabel = \"{label}\"\nannotation = \"team\"\n",
            plugin_artifacts::LABEL_ENFORCER
        )
    };
    let live = dir.join("plugins/enforcer.toml");
    std::fs::write(
        &live,
        manifest(
            "enforcer",
            "team",
            "[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n",
        ),
    )
    .unwrap();
    let next = tmp.path().join("enforcer-next.toml");
    std::fs::write(
        &next,
        manifest("enforcer-next", "squad", "shadow_of = \"enforcer\"\n"),
    )
    .unwrap();
    let rec = tmp.path().join("stream.rec");
    let out = bin()
        .args(["record", "--config"])
        .arg(&dir)
        .args(["--sim", "--duration", "3", "--out"])
        .arg(&rec)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // 30 pods and the simulator's namespaces, then the churn's events.
    let objects: u64 = err
        .split("recorded ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary line: {err}"));
    assert!(objects >= 32, "{err}");
    // The live version over the recording: its intended writes, one per pod
    // of the annotated namespace at least.
    let out = bin()
        .arg("test")
        .arg(&live)
        .arg("--replay")
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let intents = v["intents"].as_array().unwrap();
    assert!(!intents.is_empty(), "{v}");
    assert!(intents
        .iter()
        .all(|i| i["method"] == "PATCH" && i["resource"] == "v1/pods"));
    // Against a version that writes another label: every compared write
    // differs, and the exit status says so.
    let out = bin()
        .arg("test")
        .arg(&live)
        .arg("--replay")
        .arg(&rec)
        .arg("--against")
        .arg(&next)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("-        \"team\": \"team-a\""), "{text}");
    assert!(text.contains("+        \"squad\": \"team-a\""), "{text}");
    assert!(
        text.contains(&format!(
            "enforcer-next against enforcer: 0 same, {} differs",
            intents.len()
        )),
        "{text}"
    );
}
