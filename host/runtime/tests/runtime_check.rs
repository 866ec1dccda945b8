//! Checking a component: each bad component gets its own error naming the
//! file and the reason; a valid plugin reports its world, imports and exports.
//! (The `wasm-informer check` command line is tested in the host crate.)

use crate::check_support;
use crate::runtime_support;

use std::collections::BTreeSet;
use std::path::Path;

use check_support::{bad_cases, compiled_entries};
use runtime_support::engine;
use wasm_informer_runtime::{check_bytes, check_file, CheckError};

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
        version.contains("0.9.0") && version.contains("0.1.0 and 0.2.0"),
        "{version}"
    );
    let missing = check_file(&engine, &dir.path().join("absent.wasm")).unwrap_err();
    assert!(matches!(missing, CheckError::Read { .. }), "{missing:?}");
}

/// The Rust plugins of the `controller` world.
const CONTROLLERS: [&str; 3] = ["noop-controller", "reconcile-probe", "service-exposer"];

#[test]
fn every_rust_plugin_passes() {
    let engine = engine();
    for (name, path) in plugin_artifacts::ALL {
        if name.starts_with("fixture-") {
            continue;
        }
        let r = check_file(&engine, Path::new(path)).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Built with wit-bindgen alone against the frozen WIT 0.1 or 0.2.0,
        // or with the SDK (0.2.1).
        let version = if name.ends_with("-v01") {
            "0.1.0"
        } else if name.ends_with("-v02") {
            "0.2.0"
        } else {
            "0.2.1"
        };
        assert_eq!(r.version, version, "{name}");
        // The SDK's controllers export `reconciler`, its handlers `handler`.
        let (world, export) = if CONTROLLERS.contains(name) {
            ("controller", "reconciler")
        } else {
            ("event-handler", "handler")
        };
        assert_eq!(
            r.world,
            format!("wasm-informer:plugin/{world}@{version}"),
            "{name}"
        );
        assert_eq!(
            r.exports,
            vec![format!("wasm-informer:plugin/{export}@{version}")]
        );
        assert!(
            r.imports
                .iter()
                .all(|i| i.starts_with("wasi:") || i.starts_with("wasm-informer:plugin/")),
            "{name}: {:?}",
            r.imports
        );
    }
    for (wasm, version) in [
        (plugin_artifacts::NOOP, "0.2.1"),
        (plugin_artifacts::ECHO_V02, "0.2.0"),
        (plugin_artifacts::NOOP_V01, "0.1.0"),
    ] {
        let r = check_bytes(&engine, "noop", &std::fs::read(wasm).unwrap()).unwrap();
        let text = r.to_string();
        assert!(
            text.contains(&format!(
                "world: wasm-informer:plugin/event-handler@{version}\nversion: {version}\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "exports:\n  wasm-informer:plugin/handler@{version}"
            )),
            "{text}"
        );
    }
}

/// The compilation cache is used: counted as compilations, not files (a
/// miss would rewrite the same hash-named file): the first compile of a
/// component compiles it, the second, from a fresh engine on the same
/// directory, is a cache hit and compiles nothing.
#[test]
fn the_compilation_cache_lives_in_the_configured_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("wasm-cache");
    let engine_on = |d: &Path| {
        wasm_informer_runtime::PluginEngine::new(wasm_informer_runtime::EngineConfig {
            cache_dir: Some(d.to_path_buf()),
            ..Default::default()
        })
        .unwrap()
    };
    let noop = std::fs::read(plugin_artifacts::NOOP).unwrap();
    let first = engine_on(&cache_dir);
    first.compile(&noop).unwrap();
    let s = first.compile_stats();
    assert_eq!((s.requests, s.compiled, s.cache_hits), (1, 1, 0), "{s:?}");
    assert!(
        !compiled_entries(&cache_dir).is_empty(),
        "the entry is in the configured directory"
    );
    // The same engine, and another one on the same directory, compile nothing.
    first.compile(&noop).unwrap();
    let s = first.compile_stats();
    assert_eq!((s.requests, s.compiled, s.cache_hits), (2, 1, 1), "{s:?}");
    let second = engine_on(&cache_dir);
    second.compile(&noop).unwrap();
    let s = second.compile_stats();
    assert_eq!((s.compiled, s.cache_hits), (0, 1), "{s:?}");
    // A different directory is a different cache.
    let other = engine_on(&dir.path().join("elsewhere"));
    other.compile(&noop).unwrap();
    assert_eq!(other.compile_stats().compiled, 1);
}

/// Item "memory floor above its cap": a component whose memory starts larger
/// than `memory_mb` is a load error that says what it needs and what the cap
/// allows, and that it never ran; `check` of a manifest with that cap says the
/// same. (A Rust component starts with about 17 pages, more than 1 MiB.)
#[test]
fn a_memory_floor_above_the_cap_is_a_load_error_not_a_trap() {
    let engine = engine();
    let noop = std::fs::read(plugin_artifacts::NOOP).unwrap();
    let report = check_bytes(&engine, "noop.wasm", &noop).unwrap();
    let pages = report.memory_floor_pages.expect("noop has a linear memory");
    assert!(
        pages > 16,
        "noop starts with {pages} pages, more than 1 MiB"
    );
    assert!(report
        .to_string()
        .contains(&format!("memory: starts with {pages} pages")));
    let limits = wasm_informer_runtime::PluginLimits {
        memory_mb: 1,
        ..Default::default()
    };
    let mut spec = wasm_informer_runtime::PluginSpec::new("tight");
    spec.limits = limits.clone();
    let err = wasm_informer_runtime::LoadedPlugin::from_bytes(&engine, spec, &noop).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, wasm_informer_runtime::LoadError::MemoryFloor { .. }),
        "{err:?}"
    );
    let needed_mb = (pages * 65536).div_ceil(1 << 20);
    for part in [
        "plugin tight: ".to_string(),
        format!("({pages} pages of 64 KiB)"),
        "but memory_mb = 1 allows 1 MiB per memory".to_string(),
        "it was not started".to_string(),
        format!("set memory_mb to at least {needed_mb}"),
    ] {
        assert!(msg.contains(&part), "{part:?} missing from: {msg}");
    }
    assert!(!msg.contains("trap"), "{msg}");
    let checked = report.check_limits(&limits).unwrap_err().to_string();
    assert!(
        checked.starts_with("noop.wasm: its component needs")
            && checked.contains("it was not started"),
        "{checked}"
    );
    // With room for it, the same component loads.
    let mut spec = wasm_informer_runtime::PluginSpec::new("roomy");
    spec.limits.memory_mb = needed_mb;
    wasm_informer_runtime::LoadedPlugin::from_bytes(&engine, spec, &noop).unwrap();
    report
        .check_limits(&wasm_informer_runtime::PluginLimits {
            memory_mb: needed_mb,
            ..Default::default()
        })
        .unwrap();
}
