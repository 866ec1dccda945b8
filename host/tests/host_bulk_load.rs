//! Bulk loads, in process: 200 manifests of one cached component dropped into
//! `plugins/` at once all start within 2 s plus their replays (independent
//! adds are applied concurrently), and each of them got the whole cache as its
//! replay.
//!
//! Each plugin takes 50 ms to start (its `init` waits, as a plugin that loads
//! state does), so one after another they would need 10 s. The replay cost is
//! measured in the same test (one plugin added alone), so that part of the
//! bound is a ratio against this machine, not an absolute time.

use std::time::{Duration, Instant};

use wasm_informer::config::{ConfigDir, HostSettings};
use wasm_informer::host::{Host, HostOptions};
use wasm_informer::metrics::Observe;
use wasm_informer::sim::EmbeddedSim;

const PODS: usize = 300;
const PLUGINS: usize = 200;

/// Milliseconds each plugin's `init` takes.
const INIT_MS: u64 = 50;

/// How often a wait for one plugin's replay looks.
const FINE: Duration = Duration::from_millis(1);

fn manifest(name: &str) -> String {
    format!(
        "name = \"{name}\"\nwasm = \"../wasm/slow.wasm\"\nresources = [\"v1/pods\"]\n[config]\nms = 0\ninit_ms = {INIT_MS}\n"
    )
}

/// Waits until every plugin in `names` is running and has been handed at
/// least `objects` adds (its replay); returns how long that took from `since`,
/// looking every `poll`.
async fn all_replayed(
    host: &Host,
    names: &[String],
    objects: u64,
    since: Instant,
    poll: Duration,
) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let r = host.report();
        let done = names.iter().all(|n| {
            r.plugins
                .get(n)
                .is_some_and(|p| p.state == "running" && p.delivered.added >= objects)
        });
        if done {
            return since.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "plugins never all replayed: {:?}",
            names
                .iter()
                .filter(|n| r
                    .plugins
                    .get(*n)
                    .is_none_or(|p| p.delivered.added < objects))
                .take(5)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(poll).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_hot_added_plugins_start_within_two_seconds_plus_their_replays() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("plugins")).unwrap();
    std::fs::create_dir(tmp.path().join("wasm")).unwrap();
    std::fs::copy(plugin_artifacts::SLOW, tmp.path().join("wasm/slow.wasm")).unwrap();
    let host_toml = tmp.path().join("host.toml");
    std::fs::write(
        &host_toml,
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"cache\"\n[sim]\npods = {PODS}\nnamespaces = 3\nchurn_per_second = 0\n"
        ),
    )
    .unwrap();
    let config = ConfigDir {
        dir: tmp.path().to_path_buf(),
        host: HostSettings::load(&host_toml).unwrap(),
    };
    let sim = EmbeddedSim::start(
        &config.host.sim,
        "127.0.0.1:0".parse().unwrap(),
        &tmp.path().join("kc"),
    )
    .await
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();

    // One plugin alone: compiles the component into the cache, starts the
    // informer, and measures one replay.
    std::fs::write(tmp.path().join("plugins/first.toml"), manifest("first")).unwrap();
    let t = Instant::now();
    host.reconcile().await;
    all_replayed(&host, &["first".to_string()], PODS as u64, t, FINE).await;
    std::fs::write(tmp.path().join("plugins/second.toml"), manifest("second")).unwrap();
    let t = Instant::now();
    host.reconcile().await;
    let start_one = t.elapsed();
    let t = Instant::now();
    // Looked at every millisecond, so that the polling does not set the bound
    // (it is multiplied by the number of plugins below).
    let replay_one = all_replayed(&host, &["second".to_string()], PODS as u64, t, FINE).await;

    // 200 at once.
    let names: Vec<String> = (0..PLUGINS).map(|i| format!("p{i:03}")).collect();
    for n in &names {
        std::fs::write(tmp.path().join(format!("plugins/{n}.toml")), manifest(n)).unwrap();
    }
    let t = Instant::now();
    let events = host.reconcile().await;
    let applied = t.elapsed();
    assert_eq!(
        events.iter().filter(|e| e.action == "added").count(),
        PLUGINS,
        "{events:?}"
    );
    // Not too often: a report of 200 plugins is work, and it would take CPU
    // from the loads being measured. The 50 ms this adds is within the 2 s.
    let all = all_replayed(&host, &names, PODS as u64, t, Duration::from_millis(50)).await;
    // Replays run on each plugin's own thread: all of them cost at most the
    // replay of one, times the plugins, over the cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let bound = Duration::from_secs(2) + replay_one * PLUGINS as u32 / cores;
    eprintln!(
        "bulk load: one plugin (cached component) started in {start_one:?} and replayed {PODS} pods in {replay_one:?}; \
         {PLUGINS} plugins: reconcile returned after {applied:?}, all replayed after {all:?} (bound {bound:?}, {cores} cores)"
    );
    assert!(
        start_one >= Duration::from_millis(INIT_MS),
        "one start includes its init: {start_one:?}"
    );
    assert!(
        all <= bound,
        "{PLUGINS} plugins took {all:?}, bound {bound:?}"
    );
    // One after another, the inits alone would take this long: the bound
    // must be able to tell.
    let serial = Duration::from_millis(INIT_MS) * PLUGINS as u32;
    assert!(
        bound < serial,
        "the bound {bound:?} cannot tell concurrent loads from serial ones ({serial:?})"
    );
    host.shutdown().await;
    sim.shutdown().await;
}
