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
    let writes_of = |name: &str| -> Vec<_> {
        let manager = format!("wasm-informer/{name}");
        log.iter()
            .filter(|r| r.method == "PATCH" && r.param("fieldManager").as_deref() == Some(&manager))
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
    let mut wrong = Vec::new();
    for (ns, name) in &live_written {
        let want = if ns == DIFFERENT {
            Outcome::Differs
        } else {
            Outcome::Same
        };
        let got = verdict_of(ns, name);
        if got != Some(want) {
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
    std::fs::write(&live_manifest, manifest(LIVE, "team", LIVE_GRANTS)).unwrap();
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
    let args = wasm_informer::commands::test::TestArgs {
        manifest: live_manifest.clone(),
        objects: None,
        events: None,
        expect: None,
        cache_dir: Some(dir.join("cache")),
        allow_invalid: true,
        allow_unmatched: true,
        allow_errors: true,
        replay: Some(file.clone()),
        against: Some(shadow_manifest.clone()),
        grants_of: None,
    };
    let work = tempfile::tempdir().unwrap();
    let (replayed, _) = tokio::task::spawn_blocking(move || {
        wasm_informer::commands::test::against(&args, &shadow_manifest, work.path())
    })
    .await
    .unwrap()
    .unwrap();
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
