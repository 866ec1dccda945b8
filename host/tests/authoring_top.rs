//! `wasm-informer top` against a running host on the embedded simulator.
//! The oracle is the host's own `/metrics`, scraped here: `top --once`
//! prints one row per plugin with the state the metrics give, and the live
//! view, run in a real terminal (tmux), shows the plugin and informer rows
//! and no raw log lines, and `q` gives the terminal back.

use crate::host_support;

use std::process::Command;
use std::time::{Duration, Instant};

use host_support::{http_get, Fixture, HostProc, LONG};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn fixture() -> Fixture {
    let f = Fixture::new("");
    for name in ["alpha", "beta"] {
        f.copy_wasm(plugin_artifacts::NOOP, name);
        f.write(
            &format!("plugins/{name}.toml"),
            format!(
                "name = \"{name}\"\nwasm = \"../wasm/{name}.wasm\"\nresources = [\"v1/pods\"]\n"
            ),
        );
    }
    f
}

fn wait_running(addr: std::net::SocketAddr) {
    let deadline = Instant::now() + LONG;
    loop {
        let (_, body) = http_get(addr, "/metrics");
        let running = ["alpha", "beta"].iter().all(|n| {
            body.contains(&format!(
                "wasm_informer_plugin_state{{plugin=\"{n}\",state=\"running\"}} 1"
            ))
        });
        if running {
            return;
        }
        assert!(Instant::now() < deadline, "plugins never ran:\n{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn once_prints_one_row_per_plugin_and_informer_from_the_metrics() {
    let f = fixture();
    let mut host = HostProc::run_sim(f.dir().to_str().unwrap(), &[]);
    let addr = host.metrics_addr();
    wait_running(addr);
    let out = Command::new(BIN)
        .args(["top", "--once", "--interval", "0.5", "--metrics"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in ["alpha", "beta"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_else(|| panic!("no row for {n}:\n{text}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], "running", "{row}");
        assert!(cols[2].parse::<f64>().is_ok(), "a rate: {row}");
        assert_eq!(cols[9], "1", "one version: {row}");
    }
    let pods = text
        .lines()
        .find(|l| l.starts_with("v1/pods"))
        .unwrap_or_else(|| panic!("no informer row:\n{text}"));
    assert!(pods.contains("yes"), "synced: {pods}");
    host.terminate();
    assert!(host.wait_exit(LONG).success());

    // Nothing listening: a clear error, exit 1.
    let out = Command::new(BIN)
        .args(["top", "--once", "--metrics"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot reach http://{addr}/metrics")),
        "{err}"
    );
}

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .expect("tmux");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_live_view_owns_a_real_terminal_and_q_quits() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "this test needs tmux: apt-get install tmux (scripts/setup.sh installs it)"
    );
    let f = fixture();
    let mut host = HostProc::run_sim(f.dir().to_str().unwrap(), &[]);
    let addr = host.metrics_addr();
    wait_running(addr);
    let socket = format!("wi-top-{}", std::process::id());
    let done = f.path("top.exit");
    let cmd = format!(
        "{BIN} top --metrics {addr} --interval 0.5; echo $? > {}",
        done.display()
    );
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-x",
            "130",
            "-y",
            "30",
            "sh",
            "-c",
            &cmd,
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let screen = loop {
        let s = tmux(&socket, &["capture-pane", "-p"]);
        let rows_up = s.contains("alpha") && s.contains("beta") && s.contains("v1/pods");
        if rows_up
            && s.contains("running")
            && s.lines().any(|l| l.contains("alpha") && l.contains('.'))
        {
            break s;
        }
        if Instant::now() > deadline {
            tmux(&socket, &["kill-server"]);
            panic!("the view never showed the plugin rows:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        screen.contains("PLUGIN") && screen.contains("INFORMER"),
        "{screen}"
    );
    assert!(
        !screen.contains(" INFO ") && !screen.contains("plugin loaded"),
        "no raw log lines: {screen}"
    );
    tmux(&socket, &["send-keys", "q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done.exists() {
        if Instant::now() > deadline {
            let s = tmux(&socket, &["capture-pane", "-p"]);
            tmux(&socket, &["kill-server"]);
            panic!("q did not quit:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&socket, &["kill-server"]);
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    host.terminate();
    assert!(host.wait_exit(LONG).success());
}

#[test]
fn run_on_a_terminal_shows_the_live_view_and_q_writes_the_report() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "this test needs tmux: apt-get install tmux (scripts/setup.sh installs it)"
    );
    let f = fixture();
    let report = f.path("report.json");
    let stderr = f.path("stderr");
    let done = f.path("exit");
    let cmd = format!(
        "{BIN} run --config {} --sim --report {} 2> {}; echo $? > {}",
        f.dir().display(),
        report.display(),
        stderr.display(),
        done.display()
    );
    let socket = format!("wi-run-{}", std::process::id());
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-x",
            "130",
            "-y",
            "36",
            "sh",
            "-c",
            &cmd,
        ],
    );
    let deadline = Instant::now() + LONG;
    let screen = loop {
        let s = tmux(&socket, &["capture-pane", "-p"]);
        let rows = ["alpha", "beta"].iter().all(|n| {
            s.lines()
                .any(|l| l.starts_with(&format!("│{n} ")) && l.contains("running"))
        });
        if rows && s.contains("host.log") {
            break s;
        }
        if Instant::now() > deadline {
            tmux(&socket, &["kill-server"]);
            panic!("the live view never showed the plugin rows:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for l in screen.lines() {
        assert!(
            !l.starts_with("20") && !l.starts_with("wasm-informer:"),
            "a raw log line outside the view: {l}\n{screen}"
        );
    }
    tmux(&socket, &["send-keys", "q"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done.exists() {
        if Instant::now() > deadline {
            let s = tmux(&socket, &["capture-pane", "-p"]);
            tmux(&socket, &["kill-server"]);
            panic!("q did not stop the host:\n{s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux(&socket, &["kill-server"]);
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(err.contains("wasm-informer: the log is in"), "{err}");
    assert!(err.contains("quit from the live view"), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["plugins"]["alpha"]["state"], "stopped", "{r}");
}
