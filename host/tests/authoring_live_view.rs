//! The live view tells the truth, in a real terminal (tmux): a plugin fed a
//! steady 50 events a second reads 45–55 events/s on every refresh (rates
//! come from time, not from the batches in which a plugin's counters move),
//! even for a plugin busy 10 ms per event,
//! and a controller has a row of its own with its reconciles. The oracle is
//! the simulator's churn rate (50 pod operations a second, each one event)
//! and the host's own `/metrics`.

use crate::host_support;

use std::process::Command;
use std::time::{Duration, Instant};

use host_support::{http_get, sample, Fixture, HostProc, LONG};

const BIN: &str = env!("CARGO_BIN_EXE_wasm-informer");

fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .expect(
            "tmux is needed for this test: apt-get install tmux (scripts/setup.sh installs it)",
        );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The number in `column` (by header position) of the row starting with `name`.
fn cell(screen: &str, header: &str, name: &str, column: &str) -> Option<f64> {
    let head = screen
        .lines()
        .find(|l| l.contains(header) && l.contains(column))?;
    let at = head.find(column)?;
    let row = screen
        .lines()
        .find(|l| l.trim_start_matches(['│', ' ']).starts_with(name))?;
    let rest: String = row.chars().skip(head[..at].chars().count()).collect();
    rest.split_whitespace().next()?.parse().ok()
}

/// Events `plugin` has handled, of every kind, from the host's `/metrics`.
fn events_handled(metrics: &str, plugin: &str) -> f64 {
    let label = format!("plugin=\"{plugin}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("wasm_informer_plugin_events_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn rates_follow_time_and_controllers_have_rows() {
    // 50 pod operations a second and no Deployment churn: 50 events/s for a
    // plugin that watches pods.
    let f = Fixture::new("");
    f.write(
        "host.toml",
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n[sim]\npods = 200\nnamespaces = 2\n\
             churn_per_second = 50\ndeployments = 0\ndeployment_churn = 0\n",
            host_support::cache_dir().display()
        ),
    );
    f.copy_wasm(plugin_artifacts::NOOP, "steady");
    f.write(
        "plugins/steady.toml",
        "name = \"steady\"\nwasm = \"../wasm/steady.wasm\"\nresources = [\"v1/pods\"]\nqueue_capacity = 100000\n",
    );
    // A plugin busy for 10 ms of every event: its counters move in the
    // batches its runner delivers, and its rate must still read 50.
    f.copy_wasm(plugin_artifacts::SLOW, "busy");
    f.write(
        "plugins/busy.toml",
        "name = \"busy\"\nwasm = \"../wasm/busy.wasm\"\nresources = [\"v1/pods\"]\nqueue_capacity = 100000\n[config]\nms = 10\n",
    );
    f.copy_wasm(plugin_artifacts::NOOP_CONTROLLER, "ctl");
    f.write(
        "plugins/ctl.toml",
        "name = \"ctl\"\nwasm = \"../wasm/ctl.wasm\"\nfor = \"apps/v1/deployments\"\n",
    );
    let mut host = HostProc::run_sim(f.dir().to_str().unwrap(), &[]);
    let addr = host.metrics_addr();
    let deadline = Instant::now() + LONG;
    loop {
        let (_, m) = http_get(addr, "/metrics");
        let reconciled = sample(
            &m,
            "wasm_informer_plugin_reconciles_total{outcome=\"ok\",plugin=\"ctl\"}",
        )
        .or_else(|| {
            sample(
                &m,
                "wasm_informer_plugin_reconciles_total{plugin=\"ctl\",outcome=\"ok\"}",
            )
        })
        .unwrap_or(0.0);
        // `busy` first works off the replay of 200 pods, and the events
        // that came meanwhile, at 100 a second; the view measures it once it
        // is level with the churn: once it has handled as many events as
        // `steady`, which sees the same events and keeps up at once. (Its
        // queue depth does not say so: the replay is not queued.)
        let handled = |p: &str| events_handled(&m, p);
        if reconciled > 0.0
            && m.contains("wasm_informer_plugin_state{plugin=\"steady\",state=\"running\"} 1")
            && handled("steady") >= 200.0
            && handled("busy") + 5.0 >= handled("steady")
        {
            break;
        }
        assert!(Instant::now() < deadline, "plugins never ran:\n{m}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let socket = format!("wi-live-{}", std::process::id());
    let cmd = format!("{BIN} top --metrics {addr} --interval 1");
    tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "40",
            "sh",
            "-c",
            &cmd,
        ],
    );
    // The window needs a few refreshes to fill; then every refresh counts.
    std::thread::sleep(Duration::from_secs(7));
    let mut rates = Vec::new();
    let mut last = String::new();
    for _ in 0..10 {
        let s = tmux(&socket, &["capture-pane", "-p"]);
        for name in ["steady", "busy"] {
            match cell(&s, "PLUGIN", name, "EVENTS/S") {
                Some(r) => rates.push((name, r)),
                None => {
                    tmux(&socket, &["kill-server"]);
                    panic!("no rate for {name}:\n{s}");
                }
            }
        }
        last = s;
        std::thread::sleep(Duration::from_secs(1));
    }
    tmux(&socket, &["send-keys", "q"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux(&socket, &["kill-server"]);
    host.terminate();
    assert!(host.wait_exit(LONG).success());
    for (name, r) in &rates {
        assert!(
            (45.0..=55.0).contains(r),
            "a refresh read {r} events/s for {name}, fed 50: {rates:?}\n{last}"
        );
    }
    // The controller's own row, with its reconciles.
    assert!(
        last.contains("CONTROLLER") && last.contains("RECONCILES/S"),
        "{last}"
    );
    let ok = cell(&last, "CONTROLLER", "ctl", "OK").unwrap_or(0.0);
    assert!(ok > 0.0, "the controller row shows no reconciles:\n{last}");
    assert!(
        !last
            .lines()
            .any(|l| l.contains("PLUGIN") && l.contains("ctl")),
        "the controller is not a row of the event handlers:\n{last}"
    );
}
