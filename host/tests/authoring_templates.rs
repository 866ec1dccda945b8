//! A plugin author's first steps, as CI checks them for every language: in
//! a temporary directory outside the repository, `wasm-informer new`, the
//! project's own build command, `wasm-informer test` with the generated
//! fixture (whose expected output was worked out by hand from the fixture
//! and the template's source), and the built component in `run --sim`,
//! where it must receive events. The oracle for the last step is the
//! plugin's own log lines on the host's stderr and the report's counters.

use crate::host_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use host_support::{http_get, kubectl_raw, repo_root, sample, HostProc, LONG};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

/// Runs a command in `dir`; panics with its output unless it succeeds.
fn run(dir: &Path, program: &str, args: &[&str], env_remove: &[&str]) -> String {
    let mut c = Command::new(program);
    c.args(args).current_dir(dir);
    for v in env_remove {
        c.env_remove(v);
    }
    let out = c.output().unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{program} {args:?} in {} failed ({}):\n{text}",
        dir.display(),
        out.status
    );
    text
}

/// `new` into a fresh directory outside the repository.
fn new_project(tmp: &Path, lang: &str, world: &str, name: &str) -> PathBuf {
    let out = run(
        tmp,
        BIN,
        &["new", "--lang", lang, "--world", world, name],
        &[],
    );
    assert!(out.contains("created"), "{out}");
    let dir = tmp.join(name);
    assert!(
        !dir.starts_with(repo_root()),
        "the project must live outside the repository"
    );
    dir
}

/// A persistent place for a language's build output, so that repeated runs
/// of this test build incrementally (a fresh clone builds once).
fn shared_build_dir(what: &str) -> PathBuf {
    let d = repo_root().join("target/authoring-templates").join(what);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `test` with the generated fixture; returns its JSON output.
fn test_with_fixture(dir: &Path) -> serde_json::Value {
    let out = Command::new(BIN)
        .args([
            "test",
            "plugin.toml",
            "--objects",
            "fixtures/objects.yaml",
            "--events",
            "fixtures/events.yaml",
            "--expect",
            "fixtures/expected.json",
            "--cache-dir",
        ])
        .arg(repo_root().join("target/wasm-cache"))
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "test failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

/// Loads the project's manifest into `run --sim` from a config directory
/// and waits for the plugin's own log lines about events (or reconciles).
fn loads_into_run_sim(dir: &Path, name: &str, log_needle: &str) {
    let cfg = tempfile::tempdir().unwrap();
    std::fs::create_dir(cfg.path().join("plugins")).unwrap();
    std::fs::write(
        cfg.path().join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n[sim]\npods = 30\nnamespaces = 2\nchurn_per_second = 5\ndeployments = 10\n",
            repo_root().join("target/wasm-cache").display()
        ),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    let parsed: toml::Table = toml::from_str(&manifest).unwrap();
    let wasm = dir.join(parsed["wasm"].as_str().unwrap());
    let manifest = manifest.replace(
        parsed["wasm"].as_str().unwrap(),
        &wasm.display().to_string(),
    );
    std::fs::write(cfg.path().join(format!("plugins/{name}.toml")), manifest).unwrap();
    let report = cfg.path().join("report.json");
    let mut host = HostProc::run_sim(
        cfg.path().to_str().unwrap(),
        &["--duration", "3", "--report", report.to_str().unwrap()],
    );
    host.wait_line(&["plugin loaded", name], LONG);
    host.wait_line(&[&format!("plugin={name}"), log_needle], LONG);
    let status = host.wait_exit(Duration::from_secs(120));
    assert!(status.success(), "{status}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let p = &r["plugins"][name];
    assert_eq!(p["traps"], 0, "{p}");
    if parsed.contains_key("for") {
        let ok = p["controller"]["reconciles"]["ok"].as_u64().unwrap_or(0);
        assert!(ok > 0, "no reconcile ended ok: {p}");
    } else {
        assert!(p["delivered"]["added"].as_u64().unwrap() > 0, "{p}");
    }
}

/// What one world's fixture must show, in every language: the writes its
/// expected output counts, and the log line `run --sim` waits for.
fn world_facts(world: &str) -> (u64, &'static str) {
    match world {
        "event-handler" => (2, "pods in"),
        "controller" => (2, "labelled"),
        other => panic!("no world {other}"),
    }
}

/// `new`, the project's build command, `test` with its fixture, `run --sim`.
fn first_steps(lang: &str, world: &str, build: &dyn Fn(&Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("first-{lang}-{world}");
    let dir = new_project(tmp.path(), lang, world, &name);
    build(&dir);
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("plugin.toml")).unwrap()).unwrap();
    let wasm = dir.join(manifest["wasm"].as_str().unwrap());
    assert!(wasm.is_file(), "the build wrote no {}", wasm.display());
    let out = test_with_fixture(&dir);
    assert_eq!(out["plugin"], name.as_str());
    let (writes, needle) = world_facts(world);
    assert_eq!(out["summary"]["writes"], writes, "{out}");
    assert_eq!(out["dry_run"], true, "{out}");
    loads_into_run_sim(&dir, &name, needle);
}

fn rust_build(dir: &Path) {
    // The build output lives outside the temporary directory so that a
    // second run compiles only the plugin; the path the manifest names
    // (target/wasm32-wasip2/release/...) resolves through the link.
    std::os::unix::fs::symlink(shared_build_dir("rust-target"), dir.join("target")).unwrap();
    run(
        dir,
        "cargo",
        &["build", "--release", "--quiet"],
        &["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTFLAGS"],
    );
}

fn js_build(dir: &Path) {
    // The first build installs componentize-js with `npm ci` itself.
    let out = run(dir, "npm", &["run", "build"], &[]);
    assert!(out.contains("installing componentize-js"), "{out}");
}

fn python_build(dir: &Path) {
    // The first build makes the project's own virtual environment and
    // installs componentize-py into it (pip's cache keeps that short).
    let out = run(dir, "python3", &["build.py"], &[]);
    assert!(out.contains("installing componentize-py"), "{out}");
    assert!(dir.join(".venv/bin/componentize-py").is_file());
}

fn c_build(dir: &Path) {
    run(dir, "make", &[], &[]);
}

#[test]
fn rust_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("rust", "event-handler", &rust_build);
}

#[test]
fn rust_controller_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("rust", "controller", &rust_build);
}

#[test]
fn js_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("js", "event-handler", &js_build);
}

#[test]
fn js_controller_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("js", "controller", &js_build);
}

#[test]
fn python_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("python", "event-handler", &python_build);
}

#[test]
fn python_controller_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("python", "controller", &python_build);
}

#[test]
fn c_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("c", "event-handler", &c_build);
}

#[test]
fn c_controller_template_builds_tests_and_runs_outside_the_repository() {
    first_steps("c", "controller", &c_build);
}

/// A Python project's own modules beside `app.py` are importable: the build
/// (which imports `app` while it bundles it) fails on a module it left out.
#[test]
fn python_template_imports_the_project_s_other_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_project(tmp.path(), "python", "event-handler", "with-helper");
    std::fs::write(dir.join("helper.py"), "GREETING = \"hello\"\n").unwrap();
    let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
    std::fs::write(
        dir.join("app.py"),
        format!("{app}\nimport helper\n\nassert helper.GREETING == \"hello\"\n"),
    )
    .unwrap();
    python_build(&dir);
    assert!(dir.join("dist/with-helper.wasm").is_file());
}

/// The event-handler template, run unchanged with `run --sim` and the default
/// simulator (600 pods, 40 changes a second) for 60 s, keeps up: once it has
/// had its replay, its queue never overflows again and `/readyz` stays 200;
/// and no apply of it created a Pod (it applies with must-exist, so a pod
/// deleted while its event waited is never re-created spec-less): the
/// simulator's request log has no apply answered 201.
#[test]
fn the_rust_template_keeps_up_with_the_default_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "keeps-up";
    let dir = new_project(tmp.path(), "rust", "event-handler", name);
    rust_build(&dir);
    let cfg = tempfile::tempdir().unwrap();
    std::fs::create_dir(cfg.path().join("plugins")).unwrap();
    // No [sim] table: the simulator's defaults, as `run --sim` has them.
    std::fs::write(
        cfg.path().join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n",
            repo_root().join("target/wasm-cache").display()
        ),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    let parsed: toml::Table = toml::from_str(&manifest).unwrap();
    let wasm = dir.join(parsed["wasm"].as_str().unwrap());
    let manifest = manifest.replace(
        parsed["wasm"].as_str().unwrap(),
        &wasm.display().to_string(),
    );
    std::fs::write(cfg.path().join(format!("plugins/{name}.toml")), manifest).unwrap();
    let kubeconfig = cfg.path().join("kubeconfig");
    let mut host = HostProc::run_sim(
        cfg.path().to_str().unwrap(),
        &[
            "--duration",
            "60",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ],
    );
    let addr = host.metrics_addr();
    let started = std::time::Instant::now();
    let overflowed = |body: &str| {
        sample(
            body,
            &format!("wasm_informer_plugin_overflowed_total{{plugin=\"{name}\"}}"),
        )
        .unwrap_or(0.0)
    };
    // Ready once its replay is done.
    let at_replay = loop {
        let (code, _) = http_get(addr, "/readyz");
        if code == 200 {
            break overflowed(&http_get(addr, "/metrics").1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "never ready: {}",
            http_get(addr, "/readyz").1
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Then it keeps up for the rest of the minute.
    while started.elapsed() < Duration::from_secs(55) {
        let (code, why) = http_get(addr, "/readyz");
        assert_eq!(code, 200, "not ready again: {why}");
        std::thread::sleep(Duration::from_secs(1));
    }
    let (_, metrics) = http_get(addr, "/metrics");
    assert_eq!(
        overflowed(&metrics),
        at_replay,
        "its queue overflowed after its replay"
    );
    let labelled = sample(&metrics, &format!("wasm_informer_plugin_api_requests_total{{plugin=\"{name}\",verb=\"patch\",code=\"200\"}}"))
        .unwrap_or(0.0);
    assert!(labelled > 0.0, "it labelled no pod:\n{metrics}");
    let log: serde_json::Value = serde_json::from_slice(&kubectl_raw(
        &kubeconfig,
        &["get", "--raw", "/_sim/requests"],
        None,
    ))
    .unwrap();
    let created: Vec<_> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["method"] == "PATCH"
                && r["contentType"] == "application/apply-patch+yaml"
                && r["status"] == 201
        })
        .collect();
    assert!(
        created.is_empty(),
        "applies that created a Pod: {created:?}"
    );
    let status = host.wait_exit(Duration::from_secs(120));
    assert!(status.success(), "{status}");
}
