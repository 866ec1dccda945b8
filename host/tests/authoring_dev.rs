//! `wasm-informer dev`: a test edits a plugin's source while `dev` runs and
//! sees the new version's events (its changed log line, from the host's
//! stderr), a build error leaves the running version serving, and the
//! closing line gives the save-to-first-event times.

mod host_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use host_support::{repo_root, HostProc, LONG};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn dev_rebuilds_a_rust_plugin_on_save_and_the_new_version_takes_events() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["new", "--lang", "rust", "dev-loop"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dir = tmp.path().join("dev-loop");
    let shared = repo_root().join("target/authoring-templates/rust-target");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, dir.join("target")).unwrap();
    let cache = repo_root().join("target/wasm-cache");
    let mut dev = HostProc::spawn_in(
        &dir,
        &[
            "dev",
            "plugin.toml",
            "--status",
            "never",
            "--duration",
            "300",
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
        &["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTFLAGS"],
        &[],
    );
    dev.wait_line(&["dev: dev-loop version 1 running"], LONG);
    dev.wait_line(&["plugin=dev-loop", "pods in"], LONG);

    let src = dir.join("src/lib.rs");
    edit(&src, "pods in {ns})", "pods seen in {ns})");
    dev.wait_line(
        &["dev: dev-loop version 2: first event", "after the save"],
        LONG,
    );
    dev.wait_line(&["plugin=dev-loop", "pods seen in"], LONG);

    // A build error: shown, and version 2 keeps running.
    edit(&src, "fn kind_name", "fn kind_name(");
    dev.wait_line(&["dev: build failed", "version 2 keeps running"], LONG);
    dev.wait_line(
        &["plugin=dev-loop", "pods seen in"],
        Duration::from_secs(60),
    );

    dev.terminate();
    let status = dev.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}");
    let log = dev.log().join("\n");
    assert!(log.contains("dev: save to first event: "), "{log}");
}
