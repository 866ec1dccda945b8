//! The bad-configuration matrix at the parsing level (I9): each broken host.toml or
//! manifest yields one exact error naming file, line, column, key and reason, and a
//! broken manifest never hides the valid ones beside it.

use std::path::{Path, PathBuf};

use wasm_informer::config::{scan_manifests, ConfigDir, HostSettings, Limits, PluginManifest};

struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("plugins")).unwrap();
        std::fs::write(tmp.path().join("plugins/ok.wasm"), b"\0asm").unwrap();
        Self { tmp }
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::write(&p, text).unwrap();
        p
    }
}

const GOOD: &str = "name = \"good\"\nwasm = \"ok.wasm\"\nresources = [\"v1/pods\"]\n";

/// Parses one manifest and returns its error message with the temp dir stripped.
fn manifest_error(text: &str) -> String {
    let d = Dir::new();
    let p = d.write("plugins/bad.toml", text);
    let err = PluginManifest::load(&p, &Limits::default()).unwrap_err();
    assert_eq!(err.file, p, "the error must name the file");
    err.to_string()
        .replace(&format!("{}/", d.tmp.path().display()), "")
}

fn host_error(text: &str) -> String {
    let d = Dir::new();
    let p = d.write("host.toml", text);
    let err = HostSettings::load(&p).unwrap_err();
    err.to_string()
        .replace(&format!("{}/", d.tmp.path().display()), "")
}

#[test]
fn bad_toml_names_line_and_column() {
    assert_eq!(
        manifest_error("name = \"x\"\nwasm = \"ok.wasm\nresources = [\"v1/pods\"]\n"),
        "plugins/bad.toml:2:16: invalid TOML: invalid basic string, expected `\"`"
    );
}

#[test]
fn unknown_key_is_an_error() {
    let msg = manifest_error(&format!("{GOOD}queue_capacty = 10\n"));
    assert!(
        msg.starts_with(
            "plugins/bad.toml:4:1: key `queue_capacty`: unknown key; did you mean \"queue_capacity\"? (expected one of "
        ),
        "{msg}"
    );
    assert!(msg.contains("`queue_capacity`"), "{msg}");
}

#[test]
fn unknown_resource_syntax() {
    assert_eq!(
        manifest_error("name = \"x\"\nwasm = \"ok.wasm\"\nresources = [\"v1/pods\", \"pods\"]\n"),
        "plugins/bad.toml:3:25: key `resources`: invalid resource \"pods\": expected VERSION/PLURAL (for example \"v1/pods\") or GROUP/VERSION/PLURAL (for example \"apps/v1/deployments\")"
    );
}

#[test]
fn missing_wasm_file() {
    let d = Dir::new();
    let p = d.write(
        "plugins/bad.toml",
        "name = \"x\"\nwasm = \"../build/nope.wasm\"\nresources = [\"v1/pods\"]\n",
    );
    let err = PluginManifest::load(&p, &Limits::default()).unwrap_err();
    assert_eq!(err.position, Some((2, 8)));
    assert_eq!(err.key.as_deref(), Some("wasm"));
    let missing = format!("file not found: {}: ", d.path("build/nope.wasm").display());
    assert!(err.reason.starts_with(&missing), "{}", err.reason);
    assert!(
        err.reason.contains("build the plugin first"),
        "{}",
        err.reason
    );
}

#[test]
fn missing_required_key() {
    assert_eq!(
        manifest_error("name = \"x\"\nresources = [\"v1/pods\"]\n"),
        "plugins/bad.toml:1:1: key `wasm`: required key is missing"
    );
}

#[test]
fn wrong_type_names_the_key() {
    assert_eq!(
        manifest_error(&format!("{GOOD}timeout_ms = \"fast\"\n")),
        "plugins/bad.toml:4:14: key `timeout_ms`: invalid type: string \"fast\", expected u64"
    );
}

#[test]
fn out_of_range_limit() {
    assert_eq!(
        manifest_error(&format!("{GOOD}queue_capacity = 0\n")),
        "plugins/bad.toml:4:18: key `queue_capacity`: 0 is out of range: must be between 1 and 1048576"
    );
}

#[test]
fn bad_label_selector_and_namespace() {
    let msg = manifest_error(&format!("{GOOD}label_selector = \"app in (a\"\n"));
    assert!(
        msg.starts_with("plugins/bad.toml:4:18: key `label_selector`: invalid label selector: "),
        "{msg}"
    );
    assert_eq!(
        manifest_error(&format!("{GOOD}namespace = \"Kube_System\"\n")),
        "plugins/bad.toml:4:13: key `namespace`: invalid namespace \"Kube_System\": must be an RFC 1123 label (lower-case letters, digits and '-', at most 63)"
    );
}

#[test]
fn bad_plugin_name() {
    assert_eq!(
        manifest_error("name = \"My Plugin\"\nwasm = \"ok.wasm\"\nresources = [\"v1/pods\"]\n"),
        "plugins/bad.toml:1:8: key `name`: invalid plugin name \"My Plugin\": use 1-63 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit"
    );
}

#[test]
fn duplicate_name_across_manifests_keeps_the_first() {
    let d = Dir::new();
    d.write("plugins/a.toml", GOOD);
    d.write("plugins/b.toml", &format!("# same name again\n{GOOD}"));
    d.write(
        "plugins/c.toml",
        "name = \"other\"\nwasm = \"ok.wasm\"\nresources = [\"apps/v1/deployments\"]\n",
    );
    let scan = scan_manifests(d.tmp.path(), &Limits::default());
    let names: Vec<&str> = scan.manifests.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["good", "other"],
        "valid manifests must survive a bad neighbour"
    );
    assert_eq!(scan.errors.len(), 1);
    let msg = scan.errors[0]
        .to_string()
        .replace(&format!("{}/", d.tmp.path().display()), "");
    assert_eq!(
        msg,
        "plugins/b.toml:2:8: key `name`: duplicate plugin name \"good\": already defined in plugins/a.toml:1:8"
    );
}

#[test]
fn manifest_values_and_defaults() {
    let d = Dir::new();
    let p = d.write(
        "plugins/full.toml",
        "name = \"full\"\nwasm = \"ok.wasm\"\nresources = [\"v1/pods\", \"apps/v1/deployments\"]\nnamespace = \"team-a\"\nlabel_selector = \"app in (web, api),!canary\"\nread = [\"v1/nodes\"]\nfuel_per_event = 5000\nresync_seconds = 30\n[config]\nthreshold = 3\nname = \"x\"\n",
    );
    let defaults = Limits {
        queue_capacity: 77,
        ..Limits::default()
    };
    let m = PluginManifest::load(&p, &defaults).unwrap();
    assert_eq!(m.name, "full");
    assert_eq!(m.wasm, d.path("plugins/ok.wasm"));
    assert_eq!(m.resource_ids(), vec!["v1/pods", "apps/v1/deployments"]);
    assert_eq!(
        m.readable(),
        vec!["v1/pods", "apps/v1/deployments", "v1/nodes"]
    );
    assert_eq!(m.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        m.label_selector.as_deref(),
        Some("app in (web, api),!canary")
    );
    assert_eq!(
        m.limits.queue_capacity, 77,
        "unset limits come from host defaults"
    );
    assert_eq!(m.limits.fuel_per_event, 5000);
    assert_eq!(m.limits.resync_seconds, 30);
    let cfg: serde_json::Value = serde_json::from_str(&m.config_json).unwrap();
    assert_eq!(cfg, serde_json::json!({"threshold": 3, "name": "x"}));
}

#[test]
fn host_toml_full_and_errors() {
    let d = Dir::new();
    let p = d.write(
        "host.toml",
        "metrics_addr = \"127.0.0.1:0\"\nresources = [\"v1/pods\"]\ncache_dir = \"cache\"\n[defaults]\nqueue_capacity = 64\n[transform]\nstrip_managed_fields = false\n[indexers.\"v1/pods\"]\nnode = \"spec.nodeName\"\n[sim]\npods = 50\nchurn_per_second = 0\n",
    );
    let h = HostSettings::load(&p).unwrap();
    assert_eq!(h.metrics_addr.port(), 0);
    assert_eq!(h.prewarm, vec!["v1/pods"]);
    assert_eq!(h.cache_dir, Some(d.path("cache")));
    assert_eq!(h.defaults.queue_capacity, 64);
    assert!(!h.transform.strip_managed_fields);
    assert_eq!(h.indexers["v1/pods"][0].name, "node");
    assert_eq!(h.indexers["v1/pods"][0].path, "spec.nodeName");
    assert_eq!(h.sim.pods, 50);
    assert_eq!(h.sim.churn_per_second, 0.0);

    assert_eq!(
        host_error("metrics_addr = \"localhost\"\n"),
        "host.toml:1:16: key `metrics_addr`: \"localhost\" is not a socket address like \"127.0.0.1:9898\""
    );
    assert_eq!(
        host_error("[defaults]\nmemory_mb = 100000\n"),
        "host.toml:2:13: key `defaults.memory_mb`: 100000 is out of range: must be between 1 and 4096"
    );
    assert_eq!(
        host_error("[indexers.\"v1/pods\"]\nnamespace = \"metadata.namespace\"\n"),
        "host.toml:2:1: key `indexers.v1/pods.namespace`: the index \"namespace\" is built in and cannot be redefined"
    );
    let msg = host_error("[transform]\nstrip = true\n");
    assert!(
        msg.starts_with("host.toml:2:1: key `strip`: unknown key"),
        "{msg}"
    );
}

#[test]
fn config_dir_without_host_toml_uses_defaults() {
    let d = Dir::new();
    let c = ConfigDir::open(d.tmp.path()).unwrap();
    assert_eq!(c.host.metrics_addr.to_string(), "127.0.0.1:9898");
    let err = ConfigDir::open(Path::new("/nonexistent/config")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/nonexistent/config: config directory not found"
    );
}

#[test]
fn a_shadow_may_not_bring_grants_of_its_own_nor_shadow_itself() {
    let msg = manifest_error(&format!("{GOOD}shadow_of = \"live\"\nwrite_qps = 50\n"));
    assert!(
        msg.starts_with("plugins/bad.toml:5:13: key `write_qps`: a shadow writes only in dry run, under the grants and API settings of `live`"),
        "{msg}"
    );
    let msg = manifest_error(&format!(
        "{GOOD}shadow_of = \"live\"\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n"
    ));
    assert!(
        msg.contains("key `write`: a shadow writes only in dry run"),
        "{msg}"
    );
    let msg = manifest_error(&format!("{GOOD}shadow_of = \"good\"\n"));
    assert!(
        msg.contains("key `shadow_of`: names this plugin itself"),
        "{msg}"
    );
    let msg = manifest_error(&format!("{GOOD}shadow_of = \"Not_A Name\"\n"));
    assert!(msg.contains("key `shadow_of`"), "{msg}");
}
