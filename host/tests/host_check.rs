//! `wasm-informer check`: a non-zero exit with the reason and the file for each
//! bad component, the world and imports of a good one, manifests resolved to
//! their `wasm`, and a check that compiles into the config directory's cache.

#[path = "../runtime/tests/check_support/mod.rs"]
mod check_support;

use std::path::Path;
use std::process::Command;

use check_support::{bad_cases, compiled_entries, wait_for_entries};

fn cli(file: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-informer"))
        .arg("check")
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn the_cli_exits_non_zero_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (case, path) in bad_cases(dir.path()) {
        let out = cli(&path);
        assert!(!out.status.success(), "{case}: exit {:?}", out.status);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: "), "{case}: {err}");
        assert!(err.contains(&path.display().to_string()), "{case}: {err}");
    }
    let out = cli(Path::new(plugin_artifacts::POD_READY_COUNTER));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("world: wasm-informer:plugin/event-handler@0.2.1\nversion: 0.2.1\n"),
        "{text}"
    );
    assert!(text.contains("imports:"), "{text}");
    assert!(text.contains("wasm-informer:plugin/cache@0.2.1"), "{text}");
    // A 0.2.0 component runs against 0.2.1, and is named for what it is.
    let out = cli(Path::new(plugin_artifacts::ECHO_V02));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("world: wasm-informer:plugin/event-handler@0.2.0\nversion: 0.2.0\n"),
        "{text}"
    );
    // A 0.1 component is named as such.
    let out = cli(Path::new(plugin_artifacts::NOOP_V01));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("version: 0.1.0\n"), "{text}");

    // A manifest is resolved to its `wasm`, relative to the manifest.
    std::fs::copy(plugin_artifacts::NOOP, dir.path().join("noop.wasm")).unwrap();
    let manifest = dir.path().join("noop.toml");
    std::fs::write(
        &manifest,
        "name = \"noop\"\nwasm = \"noop.wasm\"\nresources = [\"v1/pods\"]\n",
    )
    .unwrap();
    let out = cli(&manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nresources = [\"v1/pods\"]\n").unwrap();
    let out = cli(&bad);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("key `wasm`: required key is missing"),
        "{stderr}"
    );
}

/// `check DIR/plugins/NAME.toml` compiles into DIR's `cache_dir`, so the host
/// (an engine with that cache) then loads the component without compiling.
#[test]
fn checking_a_manifest_precompiles_into_its_config_cache() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(dir.path().join("host.toml"), "cache_dir = \"compiled\"\n").unwrap();
    std::fs::copy(plugin_artifacts::NOOP, plugins.join("noop.wasm")).unwrap();
    let manifest = plugins.join("noop.toml");
    std::fs::write(
        &manifest,
        "name = \"noop\"\nwasm = \"noop.wasm\"\nresources = [\"v1/pods\"]\n",
    )
    .unwrap();
    let cache_dir = dir.path().join("compiled");
    assert!(compiled_entries(&cache_dir).is_empty());
    let out = cli(&manifest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for_entries(&cache_dir);
    // Counted in compilations, not files: the host's engine compiles nothing.
    let engine = wasm_informer_runtime::PluginEngine::new(wasm_informer_runtime::EngineConfig {
        cache_dir: Some(cache_dir.clone()),
        ..Default::default()
    })
    .unwrap();
    engine
        .compile(&std::fs::read(plugins.join("noop.wasm")).unwrap())
        .unwrap();
    let s = engine.compile_stats();
    assert_eq!(
        (s.compiled, s.cache_hits),
        (0, 1),
        "the host's engine found the checked component in the cache: {s:?}"
    );
}

/// `check` of a manifest whose `memory_mb` is below the component's memory
/// floor fails, saying what the component needs and what the cap allows.
#[test]
fn checking_a_manifest_whose_memory_cap_is_below_the_floor_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(plugin_artifacts::NOOP, dir.path().join("noop.wasm")).unwrap();
    let manifest = dir.path().join("tight.toml");
    std::fs::write(
        &manifest,
        "name = \"tight\"\nwasm = \"noop.wasm\"\nresources = [\"v1/pods\"]\nmemory_mb = 1\n",
    )
    .unwrap();
    let out = cli(&manifest);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("noop.wasm: its component needs a linear memory of at least")
            && err.contains("but memory_mb = 1 allows 1 MiB per memory; it was not started"),
        "{err}"
    );
    let ok = dir.path().join("ok.toml");
    std::fs::write(
        &ok,
        "name = \"ok\"\nwasm = \"noop.wasm\"\nresources = [\"v1/pods\"]\nmemory_mb = 8\n",
    )
    .unwrap();
    let out = cli(&ok);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("memory: starts with"));
}

/// `check MANIFEST`, `test` and `run` give one verdict on a manifest and its
/// component: an event handler named by a controller's manifest (`for`), or
/// a controller by an event handler's (`resources`), is refused by each,
/// naming the key.
#[test]
fn check_and_test_refuse_the_world_mismatch_that_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugin.toml");
    std::fs::write(
        &manifest,
        format!(
            "name = \"mismatch\"\nwasm = \"{}\"\nfor = \"apps/v1/deployments\"\n",
            plugin_artifacts::NOOP
        ),
    )
    .unwrap();
    let out = cli(&manifest);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key `for`") && err.contains("is an event handler"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("objects.yaml"),
        "apiVersion: v1\nkind: List\nitems: []\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-informer"))
        .args(["test", "plugin.toml", "--objects", "objects.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key `for`") && err.contains("is an event handler"),
        "{err}"
    );
    // The other way round: a controller named by `resources`.
    std::fs::write(
        &manifest,
        format!(
            "name = \"mismatch\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\n",
            plugin_artifacts::NOOP_CONTROLLER
        ),
    )
    .unwrap();
    let out = cli(&manifest);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("key `resources`") && err.contains("is a controller"),
        "{err}"
    );
}
