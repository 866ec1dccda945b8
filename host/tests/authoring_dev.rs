//! `wasm-informer dev`: a test edits a Rust and a JavaScript plugin's source
//! while `dev` runs and sees the new version's events (its changed log line, from the host's
//! stderr), a build error leaves the running version serving, and the
//! closing line gives the save-to-first-event times.

use crate::host_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use host_support::{repo_root, HostProc, LONG};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// `new --lang LANG NAME` in `tmp`; a Rust project's build output goes to a
/// directory shared by the runs of these tests, so a second run compiles
/// only the plugin.
fn new_project(tmp: &Path, lang: &str, name: &str) -> PathBuf {
    let out = Command::new(BIN)
        .args(["new", "--lang", lang, name])
        .current_dir(tmp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dir = tmp.join(name);
    if lang == "rust" {
        let shared = repo_root().join("target/authoring-templates/rust-target");
        std::fs::create_dir_all(&shared).unwrap();
        std::os::unix::fs::symlink(&shared, dir.join("target")).unwrap();
    }
    dir
}

/// `dev plugin.toml` in `dir`, plain log lines, the tests' compilation cache.
fn start_dev(dir: &Path, duration_secs: u32) -> HostProc {
    let cache = repo_root().join("target/wasm-cache");
    HostProc::spawn_in(
        dir,
        &[
            "dev",
            "plugin.toml",
            "--status",
            "never",
            "--duration",
            &duration_secs.to_string(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
        &["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTFLAGS"],
        &[],
    )
}

#[test]
fn dev_rebuilds_a_rust_plugin_on_save_and_the_new_version_takes_events() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_project(tmp.path(), "rust", "dev-loop");
    let mut dev = start_dev(&dir, 300);
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

/// The same loop for JavaScript: `npm run build` on save (componentize-js
/// embeds the engine again), and the host recompiles the 12 MB component,
/// most of it from the incremental compilation cache.
#[test]
fn dev_rebuilds_a_js_plugin_on_save_and_the_new_version_takes_events() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_project(tmp.path(), "js", "dev-js");
    let mut dev = start_dev(&dir, 600);
    // The first build runs `npm ci` and compiles the component cold.
    dev.wait_line(&["dev: dev-js version 1 running"], LONG * 2);
    dev.wait_line(&["plugin=dev-js", "pods in"], LONG);

    edit(
        &dir.join("plugin.js"),
        "pods in ${ns}",
        "pods seen in ${ns}",
    );
    dev.wait_line(
        &["dev: dev-js version 2: first event", "after the save"],
        LONG,
    );
    dev.wait_line(&["plugin=dev-js", "pods seen in"], LONG);

    dev.terminate();
    let status = dev.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}");
    let log = dev.log().join("\n");
    assert!(log.contains("dev: save to first event: "), "{log}");
}

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .expect("tmux");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// In a real terminal (tmux), `dev` shows the live view: the plugin's row
/// and a log pane, and no raw log lines; the log goes to a file meanwhile,
/// and `q` stops `dev` cleanly.
#[test]
fn dev_in_a_terminal_shows_the_live_view_and_q_quits() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "this test needs tmux: apt-get install tmux (scripts/setup.sh installs it)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_project(tmp.path(), "rust", "dev-view");
    let cache = repo_root().join("target/wasm-cache");
    let done = tmp.path().join("exit");
    let stderr = tmp.path().join("stderr");
    let cmd = format!(
        "cd {} && env -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET -u RUSTFLAGS {BIN} dev plugin.toml --duration 300 --cache-dir {} 2> {}; echo $? > {}",
        dir.display(),
        cache.display(),
        stderr.display(),
        done.display()
    );
    let socket = format!("wi-dev-{}", std::process::id());
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-x",
            "140",
            "-y",
            "40",
            "sh",
            "-c",
            &cmd,
        ],
    );
    let deadline = std::time::Instant::now() + LONG;
    let screen = loop {
        let s = tmux(&socket, &["capture-pane", "-p"]);
        let row = s
            .lines()
            .any(|l| l.starts_with("│dev-view") && l.contains("running"));
        if row && s.contains("plugin=dev-view") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            tmux(&socket, &["kill-server"]);
            panic!(
                "the live view never showed the plugin row and its log:\n{s}\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        screen.contains("PLUGIN") && screen.contains("v1/pods"),
        "{screen}"
    );
    assert!(
        screen.contains(".wasm-informer/dev.log"),
        "the log file is named: {screen}"
    );
    for l in screen.lines() {
        assert!(
            !l.starts_with("dev:") && !l.starts_with("20"),
            "a raw log line outside the view: {l}\n{screen}"
        );
    }
    tmux(&socket, &["send-keys", "q"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !done.exists() {
        if std::time::Instant::now() > deadline {
            let s = tmux(&socket, &["capture-pane", "-p"]);
            tmux(&socket, &["kill-server"]);
            panic!("q did not stop dev:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&socket, &["kill-server"]);
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    let log = std::fs::read_to_string(dir.join(".wasm-informer/dev.log")).unwrap();
    assert!(log.contains("plugin=dev-view"), "{log}");
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(err.contains("dev: the log is in"), "{err}");
}
