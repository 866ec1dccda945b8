//! What the `check` tests of the runtime and of the host binary share: the bad
//! components, and how to read a compilation cache directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The bad cases, as (file name, bytes).
pub fn bad_cases(dir: &Path) -> Vec<(&'static str, PathBuf)> {
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

/// The compiled entries of a cache directory, sorted. wasmtime's cache worker
/// also writes usage statistics (`*.stats`, `*.wip-*`) in the background; only
/// the compiled entries count.
pub fn compiled_entries(cache_dir: &Path) -> Vec<PathBuf> {
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
pub fn wait_for_entries(cache_dir: &Path) -> Vec<PathBuf> {
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

pub fn walk(dir: &Path) -> Vec<PathBuf> {
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
