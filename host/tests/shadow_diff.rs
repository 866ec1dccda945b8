//! A shadow version beside its live plugin, in process, against the
//! embedded simulator under churn: the live `label-enforcer` labels pods from
//! their namespace's `team` annotation; its shadow, the same component, reads
//! `team-next`, which agrees with `team` in every namespace but one.
//!
//! Oracles: the simulator's request log (which pods the live plugin wrote,
//! and every shadow write carrying `dryRun=All`) and its store (the pods'
//! labels), never the host's own account of what it sent.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use apisim::Subresource;
use serde_json::json;
use wasm_informer::config::{ConfigDir, HostSettings};
use wasm_informer::host::{Host, HostOptions};
use wasm_informer::metrics::Observe;
use wasm_informer::shadow::Outcome;
use wasm_informer::sim::{team_of, EmbeddedSim};

const LIVE: &str = "label-enforcer";
const SHADOW: &str = "label-enforcer-next";
/// The namespace whose `team-next` differs from its `team`.
const DIFFERENT: &str = "ns-1";

fn manifest(name: &str, annotation: &str, extra: &str) -> String {
    format!(
        r#"name = "{name}"
wasm = "../wasm/label-enforcer.wasm"
resources = ["v1/pods"]
read = ["v1/namespaces"]
memory_mb = 32
{extra}
[config]
label = "team"
annotation = "{annotation}"
"#
    )
}

/// A config directory in `dir` with `component` as `wasm/FILE`, host.toml's
/// `[sim]` table `sim`, and the embedded simulator it describes.
async fn setup(dir: &Path, component: &str, file: &str, sim: &str) -> (EmbeddedSim, ConfigDir) {
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::create_dir_all(dir.join("wasm")).unwrap();
    std::fs::copy(component, dir.join("wasm").join(file)).unwrap();
    let host_toml = dir.join("host.toml");
    std::fs::write(
        &host_toml,
        format!("metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"cache\"\n[sim]\n{sim}"),
    )
    .unwrap();
    let config = ConfigDir {
        dir: dir.to_path_buf(),
        host: HostSettings::load(&host_toml).unwrap(),
    };
    let sim = EmbeddedSim::start(
        &config.host.sim,
        "127.0.0.1:0".parse().unwrap(),
        &dir.join("kc"),
    )
    .await
    .unwrap();
    (sim, config)
}

/// `team-next` on the seeded namespaces: their `team`, but in [`DIFFERENT`].
fn annotate_team_next(store: &apisim::store::Store) {
    let nsr = store.rid("v1", "namespaces");
    for i in 0..2 {
        let ns = format!("ns-{i}");
        let next = if ns == DIFFERENT {
            "team-other".to_string()
        } else {
            team_of(i)
        };
        store
            .update_with(nsr, "", &ns, Subresource::Main, |mut v| {
                v["metadata"]["annotations"]["team-next"] = json!(next);
                Ok(v)
            })
            .unwrap();
    }
}

/// The live plugin's grants and rate.
const LIVE_GRANTS: &str =
    "write_qps = 500\nwrite_burst = 1000\n\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_differs_exactly_where_it_labels_differently_and_writes_only_in_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut sim, config) = setup(
        dir,
        plugin_artifacts::LABEL_ENFORCER,
        "label-enforcer.wasm",
        "pods = 90\nnamespaces = 3\nchurn_per_second = 15\ndeployments = 0\n",
    )
    .await;
    let running = sim.running().unwrap();
    annotate_team_next(running.store());
    std::fs::write(
        dir.join(format!("plugins/{LIVE}.toml")),
        manifest(LIVE, "team", LIVE_GRANTS),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("plugins/{SHADOW}.toml")),
        manifest(SHADOW, "team-next", &format!("shadow_of = \"{LIVE}\"\n")),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let events = host.reconcile().await;
    assert!(
        events.iter().all(|e| e.error.is_none()) && events.len() == 2,
        "{events:?}"
    );
    // Churn for a while, then let the last pairs meet or expire.
    tokio::time::sleep(Duration::from_secs(15)).await;
    sim.stop_churn().await;
    tokio::time::sleep(wasm_informer::shadow::DEFAULT_WINDOW + Duration::from_secs(3)).await;

    let log = sim.running().unwrap().request_log().entries();
    // A patch of plugin `name`, by its field manager.
    let is_write_of = |r: &apisim::request_log::RequestRecord, name: &str| {
        r.method == "PATCH"
            && r.param("fieldManager").as_deref() == Some(&format!("wasm-informer/{name}"))
    };
    let writes_of = |name: &str| -> Vec<_> {
        log.iter()
            .filter(|r| is_write_of(r, name))
            .cloned()
            .collect()
    };
    let shadow_writes = writes_of(SHADOW);
    assert!(!shadow_writes.is_empty(), "the shadow wrote nothing");
    for w in &shadow_writes {
        assert_eq!(
            w.param("dryRun").as_deref(),
            Some("All"),
            "a shadow write went without dryRun=All: {} {}?{}",
            w.method,
            w.path,
            w.query
        );
    }
    // The pods the live plugin wrote, by namespace, as the server saw them.
    let pod_of = |path: &str| {
        let parts: Vec<&str> = path.split('/').collect();
        // /api/v1/namespaces/NS/pods/NAME
        (parts[4].to_string(), parts[6].to_string())
    };
    let live_written: BTreeSet<(String, String)> =
        writes_of(LIVE).iter().map(|w| pod_of(&w.path)).collect();
    assert!(
        live_written.iter().any(|(ns, _)| ns == DIFFERENT)
            && live_written.iter().any(|(ns, _)| ns != DIFFERENT),
        "the live plugin labelled pods in both kinds of namespace: {live_written:?}"
    );

    let reports = host.shadow_reports(true);
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!((r.shadow.as_str(), r.live.as_str()), (SHADOW, LIVE));
    let verdict_of = |ns: &str, name: &str| {
        r.keys
            .get(&format!("v1/pods {ns}/{name}"))
            .map(|v| v.verdict)
    };
    // The shadow loads after its live plugin and replays the cache as it
    // is then: a pod whose live label the server applied before the
    // shadow's first write may already carry the label the shadow wants,
    // and the shadow rightly intends nothing for it (`only_live`; see
    // docs/CHANGING-SAFELY.md). The server's log tells those pods apart.
    let first_shadow = log
        .iter()
        .position(|r| is_write_of(r, SHADOW))
        .expect("the shadow wrote");
    let labelled_before_the_shadow: BTreeSet<(String, String)> = log[..first_shadow]
        .iter()
        .filter(|r| is_write_of(r, LIVE))
        .map(|w| pod_of(&w.path))
        .collect();
    let shadow_written: BTreeSet<(String, String)> =
        shadow_writes.iter().map(|w| pod_of(&w.path)).collect();
    let mut wrong = Vec::new();
    for (ns, name) in &live_written {
        let want = if ns == DIFFERENT {
            Outcome::Differs
        } else {
            Outcome::Same
        };
        let got = verdict_of(ns, name);
        let key = (ns.clone(), name.clone());
        let found_labelled = ns != DIFFERENT
            && got == Some(Outcome::OnlyLive)
            && labelled_before_the_shadow.contains(&key)
            && !shadow_written.contains(&key);
        if got != Some(want) && !found_labelled {
            wrong.push(format!("{ns}/{name}: {got:?}, want {want:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} objects have the wrong verdict: {:?}",
        wrong.len(),
        live_written.len(),
        &wrong[..wrong.len().min(10)]
    );
    // Nothing outside the differing namespace differs.
    let stray: Vec<&String> = r
        .keys
        .iter()
        .filter(|(k, v)| v.verdict == Outcome::Differs && !k.contains(&format!(" {DIFFERENT}/")))
        .map(|(k, _)| k)
        .collect();
    assert!(stray.is_empty(), "differs outside {DIFFERENT}: {stray:?}");

    // The server holds only the live version's labels.
    let client = sim.client().await.unwrap();
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::all(client)
        .list(&Default::default())
        .await
        .unwrap();
    let mut labelled = 0;
    for p in pods.items {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let team = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .cloned();
        assert_ne!(
            team.as_deref(),
            Some("team-other"),
            "a shadow write persisted: {:?}",
            p.metadata.name
        );
        if ns == DIFFERENT && team.is_some() {
            assert_eq!(team, Some(team_of(1)));
            labelled += 1;
        }
    }
    assert!(labelled > 0, "no pod of {DIFFERENT} carries the live label");
    eprintln!(
        "shadow: {} same, {} differs, {} only live, {} only shadow over {} objects; {} shadow writes, all dry runs",
        r.counts.same,
        r.counts.differs,
        r.counts.only_live,
        r.counts.only_shadow,
        r.objects,
        shadow_writes.len()
    );
    host.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_without_its_live_plugin_or_with_another_subscription_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, config) = setup(
        dir,
        plugin_artifacts::LABEL_ENFORCER,
        "label-enforcer.wasm",
        "pods = 10\nnamespaces = 2\nchurn_per_second = 0\ndeployments = 0\n",
    )
    .await;
    std::fs::write(
        dir.join(format!("plugins/{SHADOW}.toml")),
        manifest(SHADOW, "team-next", &format!("shadow_of = \"{LIVE}\"\n")),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let events = host.reconcile().await;
    let e = events
        .iter()
        .find(|e| e.action == "rejected")
        .expect("rejected");
    let why = e.error.clone().unwrap_or_default();
    assert!(
        why.contains("key `shadow_of`: no plugin `label-enforcer` is running"),
        "{why}"
    );

    // The live plugin, and a shadow that watches something else.
    std::fs::write(
        dir.join(format!("plugins/{LIVE}.toml")),
        manifest(LIVE, "team", LIVE_GRANTS),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("plugins/{SHADOW}.toml")),
        manifest(
            SHADOW,
            "team-next",
            &format!("shadow_of = \"{LIVE}\"\nnamespace = \"ns-0\"\n"),
        ),
    )
    .unwrap();
    let events = host.reconcile().await;
    let why = events
        .iter()
        .find(|e| e.action == "rejected")
        .and_then(|e| e.error.clone())
        .unwrap_or_default();
    assert!(
        why.contains("its subscription differs: namespace Some(\"ns-0\") against None"),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| e.action == "added" && e.plugin.as_deref() == Some(LIVE)));
    host.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_recording_gives_the_verdicts_the_shadow_gave_on_the_same_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, config) = setup(
        dir,
        plugin_artifacts::LABEL_ENFORCER,
        "label-enforcer.wasm",
        "pods = 60\nnamespaces = 3\nchurn_per_second = 0\ndeployments = 0\n",
    )
    .await;
    let store = sim.running().unwrap().store().clone();
    annotate_team_next(&store);
    let live_manifest = dir.join(format!("plugins/{LIVE}.toml"));
    let shadow_manifest = dir.join(format!("plugins/{SHADOW}.toml"));
    // The live version runs with `dry_run = true`, so that neither version's
    // writes change what the other reads: the shadow loads after its live
    // plugin, and a live label that lands before the shadow's replay would
    // make the shadow intend nothing for that pod, a timing the replay
    // cannot reproduce (see docs/CHANGING-SAFELY.md).
    std::fs::write(
        &live_manifest,
        manifest(LIVE, "team", &format!("dry_run = true\n{LIVE_GRANTS}")),
    )
    .unwrap();
    std::fs::write(
        &shadow_manifest,
        manifest(SHADOW, "team-next", &format!("shadow_of = \"{LIVE}\"\n")),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    // The recording starts before the plugins load, so that it holds their
    // whole stream: the initial state they got and every event after it.
    let file = dir.join("stream.rec");
    let resources = vec!["v1/pods".to_string(), "v1/namespaces".to_string()];
    let recorder = wasm_informer::record::Recorder::start(host.registry(), &resources, &file)
        .await
        .unwrap();
    host.reconcile().await;
    // Churn only once both versions have had their replay, so that the
    // recording's initial state is the one each of them started from.
    let replayed = |h: &Host| {
        let r = h.report();
        [LIVE, SHADOW]
            .iter()
            .all(|p| r.plugins.get(*p).is_some_and(|p| p.replayed >= 60))
    };
    let started = std::time::Instant::now();
    while !replayed(&host) {
        assert!(started.elapsed() < Duration::from_secs(120), "no replay");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let podr = store.rid("v1", "pods");
    for i in 0..40 {
        let ns = format!("ns-{}", i % 3);
        let name = format!("churn-{i}");
        store
            .create(
                podr,
                Some(&ns),
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
            )
            .unwrap();
        if i % 4 == 3 {
            let gone = format!("churn-{}", i - 3);
            let ns = format!("ns-{}", (i - 3) % 3);
            store.delete(podr, &ns, &gone, None).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(wasm_informer::shadow::DEFAULT_WINDOW + Duration::from_secs(3)).await;
    let live = host.shadow_reports(true).remove(0);
    let summary = recorder.finish().await.unwrap();
    assert_eq!(summary.coalesced, 0, "{summary:?}");
    assert!(summary.events > 0, "{summary:?}");
    host.shutdown().await;
    sim.shutdown().await;

    // Offline: both manifests over the recording.
    let replayed = replay_against(dir, &live_manifest, &shadow_manifest, &file).await;
    let verdicts =
        |r: &wasm_informer::shadow::ShadowReport| -> std::collections::BTreeMap<String, Outcome> {
            r.keys.iter().map(|(k, v)| (k.clone(), v.verdict)).collect()
        };
    let (l, o) = (verdicts(&live), verdicts(&replayed));
    let only_live: Vec<_> = l.keys().filter(|k| !o.contains_key(*k)).collect();
    let only_replay: Vec<_> = o.keys().filter(|k| !l.contains_key(*k)).collect();
    let unlike: Vec<_> = l
        .iter()
        .filter(|(k, v)| o.get(*k).is_some_and(|w| w != *v))
        .map(|(k, v)| format!("{k}: live {v:?}, replay {:?}", o[k]))
        .collect();
    eprintln!(
        "recording: {} objects, {} events, {} bytes; live diff {:?} over {} objects, replayed diff {:?} over {} objects",
        summary.initial,
        summary.events,
        summary.bytes,
        live.counts,
        live.objects,
        replayed.counts,
        replayed.objects
    );
    assert!(
        only_live.is_empty() && only_replay.is_empty() && unlike.is_empty(),
        "the replayed diff is not the live one: only live {only_live:?}, only replayed {only_replay:?}, unlike {unlike:?}"
    );
    assert!(l.values().any(|v| *v == Outcome::Differs) && l.values().any(|v| *v == Outcome::Same));
}

/// A controller and its shadow, the same component: the shadow reconciles
/// the live controller's keys on its own queue and workers, every write it
/// sends is a dry run, and two identical versions never differ. (A shadow
/// that reads the cluster after the live version acted may intend nothing
/// where the live one wrote, which counts as `only_live`, never `differs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controllers_shadow_reconciles_in_dry_run_and_an_identical_one_never_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, config) = setup(
        dir,
        plugin_artifacts::SERVICE_EXPOSER,
        "service-exposer.wasm",
        "pods = 10\nnamespaces = 3\nchurn_per_second = 0\ndeployments = 40\nexpose_fraction = 0.5\ndeployment_churn = 0\n",
    )
    .await;
    let controller = |name: &str, extra: &str| {
        format!(
            "name = \"{name}\"\nwasm = \"../wasm/service-exposer.wasm\"\nfor = \"apps/v1/deployments\"\nowns = [\"v1/services\"]\nworkers = 2\nmemory_mb = 32\n{extra}"
        )
    };
    std::fs::write(
        dir.join("plugins/exposer.toml"),
        controller(
            "exposer",
            "write_qps = 500\nwrite_burst = 1000\n[[write]]\nresource = \"v1/services\"\nverbs = [\"create\", \"patch\", \"delete\"]\n",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("plugins/exposer-next.toml"),
        controller("exposer-next", "shadow_of = \"exposer\"\n"),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let events = host.reconcile().await;
    assert!(
        events.iter().all(|e| e.error.is_none()) && events.len() == 2,
        "{events:?}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    tokio::time::sleep(wasm_informer::shadow::DEFAULT_WINDOW + Duration::from_secs(2)).await;

    let log = sim.running().unwrap().request_log().entries();
    let by = |name: &str| -> Vec<_> {
        let manager = format!("wasm-informer/{name}");
        log.iter()
            .filter(|r| r.method != "GET" && r.param("fieldManager").as_deref() == Some(&manager))
            .cloned()
            .collect()
    };
    // Services are applied (a server-side apply creates them: 201).
    let live_creates: BTreeSet<String> = by("exposer")
        .iter()
        .filter(|r| r.method == "PATCH" && r.status == 201)
        .map(|r| r.path.clone())
        .collect();
    assert!(
        live_creates.len() >= 10,
        "the live controller created {live_creates:?}; its writes: {:?}",
        by("exposer")
            .iter()
            .map(|r| (r.method.clone(), r.status))
            .take(10)
            .collect::<Vec<_>>()
    );
    let shadow_writes = by("exposer-next");
    assert!(!shadow_writes.is_empty(), "the shadow sent nothing");
    for w in &shadow_writes {
        assert_eq!(
            w.param("dryRun").as_deref(),
            Some("All"),
            "a shadow write went without dryRun=All: {} {}",
            w.method,
            w.path
        );
    }
    let r = host.shadow_reports(true).remove(0);
    assert_eq!(
        r.counts.differs,
        0,
        "identical versions differ: {:?}",
        r.keys
            .iter()
            .filter(|(_, v)| v.verdict == Outcome::Differs)
            .take(3)
            .collect::<Vec<_>>()
    );
    assert!(r.counts.same > 0, "{:?}", r.counts);
    // The server holds one Service per exposed Deployment: the live
    // version's, none of the shadow's.
    let services =
        kube::Api::<k8s_openapi::api::core::v1::Service>::all(sim.client().await.unwrap())
            .list(&Default::default())
            .await
            .unwrap();
    let managers: BTreeSet<String> = services
        .items
        .iter()
        .flat_map(|s| s.metadata.managed_fields.clone().unwrap_or_default())
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        !managers.contains("wasm-informer/exposer-next"),
        "a shadow write persisted: {managers:?}"
    );
    eprintln!(
        "controller shadow: {:?} over {} objects; {} live creates, {} shadow writes, all dry runs",
        r.counts,
        r.objects,
        live_creates.len(),
        shadow_writes.len()
    );
    host.shutdown().await;
    sim.shutdown().await;
}

/// A built plugin of `scripts/build-plugins.sh` (JavaScript and Python ones).
fn built(name: &str) -> String {
    crate::host_support::plugin_wasm(name).display().to_string()
}

/// Both manifests replayed over the recording `file`, offline, compared as
/// `test --replay FILE --against SHADOW` compares them.
async fn replay_against(
    dir: &Path,
    live: &Path,
    shadow: &Path,
    file: &Path,
) -> wasm_informer::shadow::ShadowReport {
    let args = wasm_informer::commands::test::TestArgs {
        manifest: live.to_path_buf(),
        objects: None,
        events: None,
        expect: None,
        cache_dir: Some(dir.join("cache")),
        allow_invalid: true,
        allow_unmatched: true,
        allow_errors: true,
        replay: Some(file.to_path_buf()),
        against: Some(shadow.to_path_buf()),
        grants_of: None,
    };
    let shadow = shadow.to_path_buf();
    let work = tempfile::tempdir().unwrap();
    tokio::task::spawn_blocking(move || {
        wasm_informer::commands::test::against(&args, &shadow, work.path())
    })
    .await
    .unwrap()
    .unwrap()
    .0
}

/// A Deployment with one container port, labelled `expose` and
/// `expose-next` as given.
fn exposed_deployment(ns: &str, name: &str, expose: bool, next: bool) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"app": name, "expose": expose.to_string(), "expose-next": next.to_string()}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                    "ports": [{"containerPort": 8080, "name": "http"}]}]}}}})
}

/// Whether every named controller has reconciled at least `min` keys and
/// has nothing queued, waiting or in a worker.
fn controllers_quiet(host: &Host, names: &[&str], min: u64) -> bool {
    let r = host.report();
    names.iter().all(|n| {
        r.plugins
            .get(*n)
            .and_then(|p| p.controller.as_ref())
            .is_some_and(|c| {
                c.reconciles.ok >= min
                    && c.queue.depth == 0
                    && c.queue.waiting == 0
                    && c.queue.processing == 0
            })
    })
}

/// The verdict of every object, for comparing two reports.
fn verdicts(
    r: &wasm_informer::shadow::ShadowReport,
) -> std::collections::BTreeMap<String, Outcome> {
    r.keys.iter().map(|(k, v)| (k.clone(), v.verdict)).collect()
}

/// Two versions of a controller, in two languages: the live Rust
/// `service-exposer` (exposing on label `expose`) and, as its shadow, the
/// Python `py-service-exposer` reading `expose-next`, which disagrees with
/// `expose` in one namespace. A recording of the stream both saw, under
/// Deployment churn, replayed offline into the same two versions, gives
/// exactly the verdicts the shadow mode gave, key by key; and those are
/// what the two programs do: where both expose a Deployment their Services
/// differ only in the `managed-by` label each sets to its own name, and in
/// the namespace where the labels disagree only one of them writes.
///
/// The live version runs with `dry_run = true` here, so that neither
/// version's writes change what the other reads (a live write that lands
/// before the shadow's reconcile would make the shadow intend nothing, a
/// timing the replay cannot reproduce; see docs/CHANGING-SAFELY.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controllers_recording_replayed_into_two_versions_gives_the_shadow_modes_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, config) = setup(
        dir,
        plugin_artifacts::SERVICE_EXPOSER,
        "service-exposer.wasm",
        "pods = 0\nnamespaces = 3\nchurn_per_second = 0\ndeployments = 0\ndeployment_churn = 0\n",
    )
    .await;
    std::fs::copy(
        built("py-service-exposer"),
        dir.join("wasm/py-service-exposer.wasm"),
    )
    .unwrap();
    let store = sim.running().unwrap().store().clone();
    let depr = store.rid("apps/v1", "deployments");
    // `expose-next` agrees with `expose` but in DIFFERENT, where it is flipped.
    let labels = |ns: &str, i: usize| {
        let expose = i.is_multiple_of(2);
        (expose, if ns == DIFFERENT { !expose } else { expose })
    };
    let controller = |name: &str, wasm: &str, extra: &str| {
        format!(
            "name = \"{name}\"\nwasm = \"../wasm/{wasm}\"\nfor = \"apps/v1/deployments\"\nowns = [\"v1/services\"]\nworkers = 1\nmemory_mb = 128\ntimeout_ms = 5000\n{extra}"
        )
    };
    let live_manifest = dir.join("plugins/exposer.toml");
    let shadow_manifest = dir.join("plugins/exposer-next.toml");
    std::fs::write(
        &live_manifest,
        controller(
            "exposer",
            "service-exposer.wasm",
            "dry_run = true\nwrite_qps = 500\nwrite_burst = 1000\n[[write]]\nresource = \"v1/services\"\nverbs = [\"create\", \"patch\", \"delete\"]\n",
        ),
    )
    .unwrap();
    std::fs::write(
        &shadow_manifest,
        controller(
            "exposer-next",
            "py-service-exposer.wasm",
            "shadow_of = \"exposer\"\n[config]\nlabel = \"expose-next\"\n",
        ),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let file = dir.join("stream.rec");
    let resources = vec!["apps/v1/deployments".to_string(), "v1/services".to_string()];
    let recorder = wasm_informer::record::Recorder::start(host.registry(), &resources, &file)
        .await
        .unwrap();
    let events = host.reconcile().await;
    assert!(
        events.iter().all(|e| e.error.is_none()) && events.len() == 2,
        "{events:?}"
    );
    // The Deployments come once both versions run: the Python component
    // compiles for longer than the pairing window, and a write whose partner
    // comes later than that counts as unpaired.
    for i in 0..24 {
        let ns = format!("ns-{}", i % 3);
        let (e, n) = labels(&ns, i);
        let d = exposed_deployment(&ns, &format!("d-{i}"), e, n);
        store.create(depr, Some(&ns), d).unwrap();
    }
    let both = ["exposer", "exposer-next"];
    let started = std::time::Instant::now();
    while !controllers_quiet(&host, &both, 24) {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the controllers did not reconcile the initial Deployments: {:?}",
            both.iter()
                .map(|n| host
                    .report()
                    .plugins
                    .get(*n)
                    .and_then(|p| p.controller.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Churn, each change apart enough to be reconciled on its own: new
    // Deployments, relabelled ones, a changed port, deletions.
    for i in 24..36 {
        let ns = format!("ns-{}", i % 3);
        let (e, n) = labels(&ns, i);
        store
            .create(
                depr,
                Some(&ns),
                exposed_deployment(&ns, &format!("d-{i}"), e, n),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    for i in (0..12).step_by(3) {
        let ns = format!("ns-{}", i % 3);
        store
            .update_with(depr, &ns, &format!("d-{i}"), Subresource::Main, |mut v| {
                let flip = |s: &serde_json::Value| json!((s != "true").to_string());
                v["metadata"]["labels"]["expose"] = flip(&v["metadata"]["labels"]["expose"]);
                v["metadata"]["labels"]["expose-next"] =
                    flip(&v["metadata"]["labels"]["expose-next"]);
                Ok(v)
            })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    for i in (1..12).step_by(3) {
        let ns = format!("ns-{}", i % 3);
        store
            .update_with(depr, &ns, &format!("d-{i}"), Subresource::Main, |mut v| {
                v["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] =
                    json!(9090);
                Ok(v)
            })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    for i in (2..12).step_by(3) {
        let ns = format!("ns-{}", i % 3);
        store.delete(depr, &ns, &format!("d-{i}"), None).unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let started = std::time::Instant::now();
    while !controllers_quiet(&host, &both, 36) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the churn was not reconciled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(wasm_informer::shadow::DEFAULT_WINDOW + Duration::from_secs(2)).await;
    let live = host.shadow_reports(true).remove(0);
    let summary = recorder.finish().await.unwrap();
    assert_eq!(summary.coalesced, 0, "{summary:?}");
    // Nothing the live version sent persisted: it ran in dry run.
    let log = sim.running().unwrap().request_log().entries();
    let writes: Vec<_> = log.iter().filter(|r| r.method != "GET").collect();
    assert!(
        !writes.is_empty()
            && writes
                .iter()
                .all(|w| w.param("dryRun").as_deref() == Some("All")),
        "a write went without dryRun=All: {:?}",
        writes
            .iter()
            .find(|w| w.param("dryRun").as_deref() != Some("All"))
            .map(|w| (&w.method, &w.path))
    );
    let python_sent = writes
        .iter()
        .filter(|w| w.param("fieldManager").as_deref() == Some("wasm-informer/exposer-next"))
        .count();
    assert!(python_sent > 0, "the Python shadow sent nothing");
    host.shutdown().await;
    sim.shutdown().await;

    let replayed = replay_against(dir, &live_manifest, &shadow_manifest, &file).await;
    let (l, o) = (verdicts(&live), verdicts(&replayed));
    eprintln!(
        "controller recording: {} objects, {} events, {} bytes; shadow mode {:?} over {} objects, replay {:?} over {} objects",
        summary.initial, summary.events, summary.bytes, live.counts, live.objects, replayed.counts, replayed.objects
    );
    let unlike: Vec<String> = l
        .keys()
        .chain(o.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| l.get(*k) != o.get(*k))
        .map(|k| format!("{k}: shadow mode {:?}, replay {:?}", l.get(k), o.get(k)))
        .collect();
    assert!(
        unlike.is_empty(),
        "the replayed diff is not the shadow mode's: {unlike:?}"
    );
    // Outside DIFFERENT both versions expose the same Deployments, with
    // Services that differ only in their `managed-by` label (each names its
    // own program); in DIFFERENT only one of them exposes each.
    let managed_by = |i: &Option<wasm_informer::shadow::Intent>| {
        let mut i = i.clone().expect("both sides wrote");
        let by = i.body["metadata"]["labels"]["app.kubernetes.io/managed-by"].take();
        (i, by)
    };
    for (k, v) in &l {
        let view = &live.keys[k];
        let shown = || wasm_informer::shadow::render_key(k, view);
        if k.contains(&format!(" {DIFFERENT}/")) {
            assert!(
                matches!(v, Outcome::OnlyLive | Outcome::OnlyShadow),
                "{k}: {v:?}, but only one version exposes it:\n{}",
                shown()
            );
            continue;
        }
        assert_eq!(*v, Outcome::Differs, "{k}:\n{}", shown());
        let ((lb, lm), (sb, sm)) = (managed_by(&view.live), managed_by(&view.shadow));
        assert_eq!(lb, sb, "{k}: more than the label differs:\n{}", shown());
        assert_eq!(
            (lm.as_str(), sm.as_str()),
            (Some("service-exposer"), Some("py-service-exposer"))
        );
    }
    assert!(l.values().any(|v| *v == Outcome::Differs));
    assert!(l
        .values()
        .any(|v| matches!(v, Outcome::OnlyLive | Outcome::OnlyShadow)));
}

/// A JavaScript live plugin and a Python shadow (the SDK probes, which run
/// the ops of their `[config]` on every event): where they patch a pod
/// alike the pair is `same`, where their bodies differ it is `differs`;
/// the Python shadow's writes are all dry runs, and the server holds only
/// the JavaScript version's labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_shadow_of_a_javascript_plugin_is_compared_and_writes_only_in_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, config) = setup(
        dir,
        &built("js-probe"),
        "js-probe.wasm",
        "pods = 0\nnamespaces = 1\nchurn_per_second = 0\ndeployments = 0\n",
    )
    .await;
    std::fs::copy(built("py-probe"), dir.join("wasm/py-probe.wasm")).unwrap();
    let store = sim.running().unwrap().store().clone();
    let podr = store.rid("v1", "pods");
    let cmr = store.rid("v1", "configmaps");
    for name in ["alike", "unlike"] {
        store
            .create(
                podr,
                Some("ns-0"),
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "ns-0"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
            )
            .unwrap();
    }
    const TRIGGERS: u64 = 4;
    let probe = |name: &str, wasm: &str, version: &str, extra: &str| {
        let ops = json!([
            {"call": "patch", "resource": "v1/pods", "namespace": "ns-0", "name": "alike",
             "patch": "merge", "body": {"metadata": {"labels": {"probe": "one"}}}},
            {"call": "patch", "resource": "v1/pods", "namespace": "ns-0", "name": "unlike",
             "patch": "merge", "body": {"metadata": {"labels": {"probe": version}}}},
        ]);
        format!(
            "name = \"{name}\"\nwasm = \"../wasm/{wasm}\"\nresources = [\"v1/configmaps\"]\nmemory_mb = 128\ntimeout_ms = 5000\nfuel_per_event = 1000000000\n{extra}\n[config]\nops = {ops}\n",
            ops = toml_value(&ops)
        )
    };
    std::fs::write(
        dir.join("plugins/probe.toml"),
        probe(
            "probe",
            "js-probe.wasm",
            "live",
            "write_qps = 500\nwrite_burst = 1000\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("plugins/probe-next.toml"),
        probe(
            "probe-next",
            "py-probe.wasm",
            "next",
            "shadow_of = \"probe\"\n",
        ),
    )
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let events = host.reconcile().await;
    assert!(
        events.iter().all(|e| e.error.is_none()) && events.len() == 2,
        "{events:?}"
    );
    // The triggers come once both versions run (see the controller test).
    for i in 0..TRIGGERS {
        store
            .create(
                cmr,
                Some("ns-0"),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("trigger-{i}"), "namespace": "ns-0"}}),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let patches_by = |manager: &str| -> Vec<apisim::RequestRecord> {
        let manager = format!("wasm-informer/{manager}");
        sim.running()
            .unwrap()
            .request_log()
            .entries()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.param("fieldManager").as_deref() == Some(&manager))
            .collect()
    };
    let started = std::time::Instant::now();
    while patches_by("probe").len() < 2 * TRIGGERS as usize
        || patches_by("probe-next").len() < 2 * TRIGGERS as usize
    {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the probes did not patch on every trigger: {} and {}",
            patches_by("probe").len(),
            patches_by("probe-next").len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in patches_by("probe-next") {
        assert_eq!(
            w.param("dryRun").as_deref(),
            Some("All"),
            "a Python shadow write went without dryRun=All: {}",
            w.path
        );
    }
    let r = host.shadow_reports(true).remove(0);
    let verdict = |name: &str| {
        r.keys
            .get(&format!("v1/pods ns-0/{name}"))
            .map(|v| v.verdict)
    };
    assert_eq!(verdict("alike"), Some(Outcome::Same), "{r:?}");
    assert_eq!(verdict("unlike"), Some(Outcome::Differs), "{r:?}");
    assert_eq!(
        (r.counts.same, r.counts.differs),
        (TRIGGERS, TRIGGERS),
        "one pair per trigger and pod: {:?}",
        r.counts
    );
    let client = sim.client().await.unwrap();
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "ns-0");
    for (name, want) in [("alike", "one"), ("unlike", "live")] {
        let p = pods.get(name).await.unwrap();
        let got = p.metadata.labels.unwrap_or_default().get("probe").cloned();
        assert_eq!(got.as_deref(), Some(want), "pod {name}");
    }
    host.shutdown().await;
    sim.shutdown().await;
}

/// `v` as a TOML value (JSON arrays and objects as TOML's inline ones).
fn toml_value(v: &serde_json::Value) -> String {
    let t: toml::Value = serde_json::from_value(v.clone()).unwrap();
    t.to_string()
}
