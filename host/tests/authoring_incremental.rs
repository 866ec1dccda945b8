//! Measurement (ignored by default; run with `--ignored --nocapture`): how
//! long a new JavaScript or Python component, differing from one compiled
//! before in one function of the plugin's source, takes to its first event,
//! with and without cranelift's incremental compilation cache, and neither
//! component checked ahead (`wasm-informer check`).
//!
//! First event = compile (module cache miss: new bytes) + instantiate +
//! `init` + one `on-event` call, through the production runtime. Three
//! cases: no incremental cache (a full compile); the incremental cache warm
//! in memory (a reload in a running host, after the previous version); the
//! incremental cache on disk only (a new process, as after restarting
//! `dev` or the host).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_informer::notification::{EventKind, Notification};
use wasm_informer::commands::test::cache::FixtureCache;
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    CallOutcome, EngineConfig, LoadedPlugin, PluginEngine, PluginInstance, PluginSpec, PluginStatus,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the JS template twice: as it is, and with one function changed.
fn js_pair(work: &Path) -> (PathBuf, PathBuf) {
    let src = std::fs::read_to_string(root().join("sdk/js/template/plugin.js")).unwrap();
    let src = src.replace("'../src/informer.js'", "'../../../sdk/js/src/informer.js'");
    let changed = src.replace("namespace-objects=${peers}", "peers=${peers + 0}");
    assert_ne!(src, changed);
    let mut out = Vec::new();
    for (tag, text) in [("a", &src), ("b", &changed)] {
        let dir = work.join(format!("js-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plugin.js"), text).unwrap();
        let wasm = work.join(format!("js-{tag}.wasm"));
        sh(Command::new("node")
            .current_dir(root())
            .arg("sdk/js/build.mjs")
            .arg(dir.join("plugin.js"))
            .arg(&wasm)
            .args(["--wit", "wit/v0.1"]));
        out.push(wasm);
    }
    (out[0].clone(), out[1].clone())
}

/// Builds the Python template twice: as it is, and with one function changed.
fn py_pair(work: &Path) -> (PathBuf, PathBuf) {
    let src = std::fs::read_to_string(root().join("sdk/python/template/app.py")).unwrap();
    let changed = src.replace("namespace-objects={peers}", "peers={peers + 0}");
    assert_ne!(src, changed);
    let mut out = Vec::new();
    for (tag, text) in [("a", &src), ("b", &changed)] {
        let dir = work.join(format!("py-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("app.py"), text).unwrap();
        let wasm = work.join(format!("py-{tag}.wasm"));
        sh(Command::new(root().join(".venv/bin/componentize-py"))
            .current_dir(&dir)
            .args(["-d"])
            .arg(root().join("wit/v0.1"))
            .args(["-w", "event-handler", "componentize", "-p"])
            .arg(&dir)
            .arg("-p")
            .arg(root().join("sdk/python"))
            .args(["app", "-o"])
            .arg(&wasm));
        out.push(wasm);
    }
    (out[0].clone(), out[1].clone())
}

/// Compile + instantiate + init + one event; returns (compile, total).
fn first_event(engine: &Arc<PluginEngine>, wasm: &Path) -> (Duration, Duration) {
    let cache = Arc::new(FixtureCache::new(Default::default(), Default::default()));
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "1"}});
    let obj = cache.object(&pod).unwrap();
    cache.upsert("v1/pods", obj.clone()).unwrap();
    let mut spec = PluginSpec::new("measured");
    spec.read = vec!["v1/pods".into()];
    spec.limits.fuel_per_event = 500_000_000;
    spec.limits.timeout_ms = 10_000;
    let started = Instant::now();
    let plugin = LoadedPlugin::from_file(engine, spec, wasm).unwrap();
    let compiled = started.elapsed();
    let status = Arc::new(PluginStatus::new("measured"));
    let log = Arc::new(LogSink::new("measured".into(), engine.config().log, status));
    let view: Arc<dyn kube_informer::CacheView> = cache;
    let mut i = PluginInstance::start(engine, &plugin, Granted::cache_only(&plugin, view, log))
        .unwrap_or_else(|e| panic!("start: {e}"));
    let n = Notification {
        kind: EventKind::Added,
        resource: "v1/pods".into(),
        key: "ns/a".into(),
        object: obj,
        old: None,
        in_initial_list: true,
        final_state_unknown: false,
    };
    assert_eq!(i.handle(&n), CallOutcome::Ok);
    (compiled, started.elapsed())
}

fn engine(dir: &Path, incremental: bool) -> Arc<PluginEngine> {
    PluginEngine::new(EngineConfig {
        cache_dir: Some(dir.to_path_buf()),
        incremental,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// Waits until the incremental store's background writes have settled.
fn settle(dir: &Path) {
    let inc = wasm_informer_runtime::incremental::dir_beside(dir);
    let count = || walk_count(&inc);
    let mut last = count();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = count();
        if now == last {
            return;
        }
        last = now;
    }
}

fn walk_count(d: &Path) -> usize {
    std::fs::read_dir(d)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk_count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn measure(lang: &str, a: &Path, b: &Path) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // No incremental cache: a full compile of the new component.
    let t = tempfile::tempdir().unwrap();
    let (c, full) = first_event(&engine(&t.path().join("c"), false), b);
    println!(
        "B6 {lang} new component, full compile: first event {:.0} ms (compile {:.0} ms)",
        ms(full),
        ms(c)
    );
    // A running host: the previous version compiled in the same engine.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("c");
    let e = engine(&dir, true);
    let (c0, cold) = first_event(&e, a);
    println!(
        "B6 {lang} first version, incremental cache cold: first event {:.0} ms (compile {:.0} ms)",
        ms(cold),
        ms(c0)
    );
    let (c, warm) = first_event(&e, b);
    println!("B6 {lang} new component (one function changed), incremental cache in memory: first event {:.0} ms (compile {:.0} ms)", ms(warm), ms(c));
    drop(e);
    settle(&dir);
    // A new process: only the entries on disk.
    std::fs::remove_dir_all(&dir).unwrap();
    let (c, disk) = first_event(&engine(&dir, true), b);
    println!("B6 {lang} new component (one function changed), incremental cache on disk, new process: first event {:.0} ms (compile {:.0} ms)", ms(disk), ms(c));
}

#[test]
#[ignore = "measurement: builds JS and Python components (10-30 s each) and compiles them cold"]
fn b6_new_javascript_and_python_components_with_the_incremental_cache() {
    let work = root().join("target/authoring-incremental");
    std::fs::create_dir_all(&work).unwrap();
    let (a, b) = js_pair(&work);
    measure("JavaScript", &a, &b);
    let (a, b) = py_pair(&work);
    measure("Python", &a, &b);
}
