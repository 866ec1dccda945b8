//! Embeds the files `wasm-informer new` writes into a plugin project: the
//! project templates (`templates/`), the WIT package (`wit/world.wit`), the
//! sources of the SDKs (`sdk/rust/src`, `sdk/js/src` and its build script,
//! `sdk/python/wasm_informer`, `sdk/c`) and the SDKs' template plugins, which
//! are the sources of the JavaScript, Python and C projects.
//!
//! Invariant: the binary carries exactly the bytes of those files at build
//! time, listed under their paths relative to the repository root in sorted
//! order, so a project made by `new` builds against the same SDK and WIT as
//! the host that made it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Directories (and single files) embedded, relative to the repository root.
const ROOTS: &[&str] = &[
    "templates",
    "wit/world.wit",
    "sdk/rust/src",
    "sdk/js/src",
    "sdk/js/build.mjs",
    "sdk/python/wasm_informer",
    "sdk/c/wasm_informer.c",
    "sdk/c/wasm_informer.h",
    "sdk/c/wi_json.c",
    "sdk/c/wi_json.h",
    // The plugin sources of the JavaScript, Python and C projects.
    "sdk/js/template/plugin.js",
    "sdk/js/template-controller/plugin.js",
    "sdk/python/template/app.py",
    "sdk/python/template-controller/app.py",
    "sdk/c/template/plugin.c",
    "sdk/c/template-controller/plugin.c",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        // Build output and caches never belong to a project.
        if name == "node_modules" || name == "__pycache__" || name == "target" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.parent().expect("host/ has a parent").to_path_buf();
    let mut files = Vec::new();
    for r in ROOTS {
        let p = root.join(r);
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_file() {
            files.push(p);
        } else {
            walk(&p, &mut files);
        }
    }
    let mut files: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&root).expect("under the root");
            (rel.to_string_lossy().replace('\\', "/"), f)
        })
        .collect();
    // Sorted as strings, so that lookups can binary-search.
    files.sort();
    let mut code =
        String::from("/// Embedded files: (path relative to the repository root, bytes).\n");
    code.push_str("pub static FILES: &[(&str, &[u8])] = &[\n");
    for (rel, f) in &files {
        let _ = writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?})),",
            f.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("embedded.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
