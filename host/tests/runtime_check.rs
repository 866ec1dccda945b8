//! `wasm-informer check`: each bad component gets its own clear message naming
//! the file and the reason and a non-zero exit; a valid plugin prints its
//! world, imports and exports and exits 0.

#[path = "runtime_support/mod.rs"]
mod runtime_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use runtime_support::engine;
use wasm_informer::runtime::{check_bytes, check_file, CheckError};

/// The bad cases, as (file name, bytes).
fn bad_cases(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let noop = std::fs::read(plugin_artifacts::NOOP).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    vec![
        (
            "not-wasm",
            write("notes.wasm", b"this is a text file, not wasm\n"),
        ),
        ("core-module", write("core.wasm", b"\0asm\x01\0\0\0")),
        (
            "truncated",
            write("truncated.wasm", &noop[..noop.len() / 2]),
        ),
        (
            "wrong-world",
            PathBuf::from(plugin_artifacts::FIXTURE_WRONG_WORLD),
        ),
        (
            "wrong-version",
            PathBuf::from(plugin_artifacts::FIXTURE_WRONG_VERSION),
        ),
        (
            "extra-import",
            PathBuf::from(plugin_artifacts::FIXTURE_EXTRA_IMPORT),
        ),
    ]
}

#[test]
fn each_bad_component_gets_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine();
    let mut messages = BTreeSet::new();
    for (case, path) in bad_cases(dir.path()) {
        let err = check_file(&engine, &path).unwrap_err();
        let ok = match case {
            "not-wasm" => matches!(err, CheckError::NotWasm { .. }),
            "core-module" => matches!(err, CheckError::CoreModule { .. }),
            "truncated" => matches!(err, CheckError::Truncated { .. }),
            "wrong-world" => matches!(err, CheckError::WrongWorld { .. }),
            "wrong-version" => matches!(err, CheckError::WrongVersion { .. }),
            "extra-import" => matches!(err, CheckError::UnsupportedImports { .. }),
            _ => unreachable!(),
        };
        assert!(ok, "{case}: unexpected error {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{case}: {msg}");
        // The message's text after the path is distinct per case.
        let reason = msg.split_once(": ").unwrap().1.to_string();
        let head: String = reason.chars().take(24).collect();
        assert!(messages.insert(head), "{case}: message not distinct: {msg}");
    }
    let extra = check_file(&engine, Path::new(plugin_artifacts::FIXTURE_EXTRA_IMPORT))
        .unwrap_err()
        .to_string();
    assert!(extra.contains("wasi:keyvalue/store@0.2.0-draft"), "{extra}");
    let version = check_file(&engine, Path::new(plugin_artifacts::FIXTURE_WRONG_VERSION))
        .unwrap_err()
        .to_string();
    assert!(
        version.contains("0.2.0") && version.contains("0.1.0"),
        "{version}"
    );
    let missing = check_file(&engine, &dir.path().join("absent.wasm")).unwrap_err();
    assert!(matches!(missing, CheckError::Read { .. }), "{missing:?}");
}

#[test]
fn every_rust_plugin_passes() {
    let engine = engine();
    for (name, path) in plugin_artifacts::ALL {
        if name.starts_with("fixture-") {
            continue;
        }
        let r = check_file(&engine, Path::new(path)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.world, "wasm-informer:plugin/event-handler@0.1.0");
        assert_eq!(
            r.exports,
            vec!["wasm-informer:plugin/handler@0.1.0".to_string()]
        );
        assert!(
            r.imports
                .iter()
                .all(|i| i.starts_with("wasi:") || i.starts_with("wasm-informer:plugin/")),
            "{name}: {:?}",
            r.imports
        );
    }
    let noop = std::fs::read(plugin_artifacts::NOOP).unwrap();
    let r = check_bytes(&engine, "noop", &noop).unwrap();
    let text = r.to_string();
    assert!(
        text.contains("world: wasm-informer:plugin/event-handler@0.1.0"),
        "{text}"
    );
    assert!(
        text.contains("exports:\n  wasm-informer:plugin/handler@0.1.0"),
        "{text}"
    );
}

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
        text.contains("world: wasm-informer:plugin/event-handler@0.1.0"),
        "{text}"
    );
    assert!(text.contains("imports:"), "{text}");
    assert!(text.contains("wasm-informer:plugin/cache@0.1.0"), "{text}");

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

#[test]
fn the_compilation_cache_lives_in_the_configured_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("wasm-cache");
    let engine = wasm_informer::runtime::PluginEngine::new(wasm_informer::runtime::EngineConfig {
        cache_dir: Some(cache_dir.clone()),
        ..Default::default()
    })
    .unwrap();
    let noop = std::fs::read(plugin_artifacts::NOOP).unwrap();
    engine.compile(&noop).unwrap();
    let entries = || compiled_entries(&cache_dir);
    let files = wait_for_entries(&cache_dir);
    // A second compile is served from the cache: no new entry is written.
    engine.compile(&noop).unwrap();
    assert_eq!(entries(), files);
}

/// The compiled entries of a cache directory, sorted. wasmtime's cache worker
/// also writes usage statistics (`*.stats`, `*.wip-*`) in the background; only
/// the compiled entries count.
fn compiled_entries(cache_dir: &Path) -> Vec<PathBuf> {
    let mut e: Vec<PathBuf> = walk(cache_dir)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.ends_with(".stats") && !name.contains(".wip-")
        })
        .collect();
    e.sort();
    e
}

/// Waits (at most 30 s) for the first compiled entry, and returns them all.
fn wait_for_entries(cache_dir: &Path) -> Vec<PathBuf> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut files = compiled_entries(cache_dir);
    while files.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        files = compiled_entries(cache_dir);
    }
    assert!(
        !files.is_empty(),
        "no cache entry under {}: {:?}",
        cache_dir.display(),
        walk(cache_dir)
    );
    files
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
    let files = wait_for_entries(&cache_dir);
    let engine = wasm_informer::runtime::PluginEngine::new(wasm_informer::runtime::EngineConfig {
        cache_dir: Some(cache_dir.clone()),
        ..Default::default()
    })
    .unwrap();
    engine
        .compile(&std::fs::read(plugins.join("noop.wasm")).unwrap())
        .unwrap();
    assert_eq!(
        compiled_entries(&cache_dir),
        files,
        "the host's engine found the checked component in the cache"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
