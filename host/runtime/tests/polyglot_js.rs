//! The JavaScript example plugin `deployment-auditor` (plugins/deployment-auditor,
//! built by scripts/build-plugins.sh with componentize-js) running in wasmtime:
//! it reports exactly the policy violations of its `[config]`, as log lines
//! and as Warning Events about each Deployment, reports a fix (a Normal
//! Event), stays quiet on resyncs, skips events the cache has already
//! superseded, and turns a bad config into an `init` error.

use crate::polyglot_support;

use polyglot_support::*;
use serde_json::json;

const CONFIG: &str = r#"{
    "required_labels": ["team", "app"],
    "required_annotations": ["owner"],
    "allowed_label_values": {"tier": ["frontend", "backend"]},
    "exempt_namespaces": ["kube-system"]
}"#;

const DEPLOYMENTS: &str = "apps/v1/deployments";

fn deployment(
    ns: &str,
    name: &str,
    rv: &str,
    labels: serde_json::Value,
    annotations: serde_json::Value,
) -> Cached {
    cached(
        DEPLOYMENTS,
        &json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": rv, "labels": labels, "annotations": annotations},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}}
        }),
    )
}

fn seed() -> Vec<Cached> {
    vec![
        deployment(
            "shop",
            "web",
            "10",
            json!({"team": "a", "app": "web", "tier": "frontend"}),
            json!({"owner": "x"}),
        ),
        deployment(
            "shop",
            "cart",
            "11",
            json!({"app": "cart"}),
            json!({"owner": "x"}),
        ),
        deployment(
            "shop",
            "db",
            "12",
            json!({"team": "a", "app": "db", "tier": "cache"}),
            json!({}),
        ),
        deployment("kube-system", "coredns", "13", json!({}), json!({})),
    ]
}

fn start(cache: Vec<Cached>) -> Guest {
    let mut g = Example::load("deployment-auditor").guest(cache, &[DEPLOYMENTS]);
    g.init(CONFIG).expect("init");
    g.clear_logs();
    g
}

#[test]
fn auditor_reports_exactly_the_seeded_violations() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.on_events(EventKind::Added, &objects, true);
    assert_eq!(
        g.messages(),
        vec![
            "violation deployment=shop/cart missing-label=team",
            "violation deployment=shop/db missing-annotation=owner",
            "violation deployment=shop/db label=tier value=cache allowed=frontend|backend",
        ]
    );
    // Every event queried the cache (the staleness check).
    assert!(g.store.data().cache_calls >= 3);
    assert_eq!(
        events(&g),
        vec![
            (
                "shop/cart".into(),
                "warning".into(),
                "MissingLabel".into(),
                "label team is required".into()
            ),
            (
                "shop/db".into(),
                "warning".into(),
                "MissingAnnotation".into(),
                "annotation owner is required".into()
            ),
            (
                "shop/db".into(),
                "warning".into(),
                "DisallowedLabelValue".into(),
                "label tier=cache is not one of frontend, backend".into()
            ),
        ]
    );
    assert!(g.published().iter().all(|p| p.action == "Audit"));
    assert_eq!(g.published()[0].regarding, reference_of(&objects[1]));
}

/// (regarding key, type, reason, note) of every Event published.
fn events(g: &Guest) -> Vec<(String, String, String, String)> {
    g.published()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.regarding.namespace.clone().unwrap_or_default(),
                    p.regarding.name
                ),
                p.type_.clone(),
                p.reason.clone(),
                p.note.clone(),
            )
        })
        .collect()
}

#[test]
fn auditor_records_no_events_when_told_not_to_and_retries_a_refused_one() {
    let objects = seed();
    let example = Example::load("deployment-auditor");
    let mut g = example.guest(objects.clone(), &[DEPLOYMENTS]);
    let quiet = CONFIG.replace(
        "\"exempt_namespaces\"",
        "\"events\": false, \"exempt_namespaces\"",
    );
    g.init(&quiet).expect("init");
    g.on_events(EventKind::Added, &objects, true);
    assert_eq!(g.messages().len(), 4, "{:?}", g.messages());
    assert!(g.published().is_empty());

    let mut g = start(objects.clone());
    g.answer_event(Err(ApiError::RateLimited("write_qps".into())));
    let err = g
        .on_event(&event(EventKind::Added, &objects[1], false))
        .unwrap_err();
    assert!(err.contains("rate-limited"), "{err}");
    // Not remembered as reported: the next event about it reports it again.
    g.clear_logs();
    g.on_event(&event(EventKind::Synced, &objects[1], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["violation deployment=shop/cart missing-label=team"]
    );
    assert_eq!(g.published().len(), 1);
}

#[test]
fn auditor_reports_fixes_and_stays_quiet_on_resync() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.replay_then_quiet_resync(&objects);

    // cart gets its team label: reported as compliant.
    let fixed = deployment(
        "shop",
        "cart",
        "20",
        json!({"app": "cart", "team": "b"}),
        json!({"owner": "x"}),
    );
    g.set_cached(&fixed);
    let published = g.published().len();
    g.on_event(&event(EventKind::Updated, &fixed, false).with_old(&objects[1]))
        .unwrap();
    assert_eq!(g.messages(), vec!["compliant deployment=shop/cart"]);
    assert_eq!(
        events(&g)[published..],
        [(
            "shop/cart".into(),
            "normal".into(),
            "Compliant".into(),
            "the deployment meets the policy".into()
        )]
    );
    g.clear_logs();

    // db deleted, then recreated with the same violations: reported afresh.
    g.on_event(&event(EventKind::Deleted, &objects[2], false))
        .unwrap();
    assert_eq!(g.messages(), Vec::<String>::new());
    g.on_event(&event(EventKind::Added, &objects[2], false))
        .unwrap();
    assert_eq!(g.messages().len(), 2, "{:?}", g.messages());
}

#[test]
fn auditor_skips_events_the_cache_has_superseded() {
    let objects = seed();
    let mut g = start(objects.clone());
    // The cache already holds web at rv 30 without its team label.
    let newer = deployment(
        "shop",
        "web",
        "30",
        json!({"app": "web", "tier": "frontend"}),
        json!({"owner": "x"}),
    );
    g.set_cached(&newer);
    // An event for an older web that also lacked `team`: stale, skipped.
    let older = deployment("shop", "web", "25", json!({"app": "web"}), json!({}));
    g.on_event(&event(EventKind::Updated, &older, false))
        .unwrap();
    assert_eq!(g.messages(), Vec::<String>::new());
    g.on_event(&event(EventKind::Updated, &newer, false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["violation deployment=shop/web missing-label=team"]
    );
}

#[test]
fn auditor_rejects_a_bad_config_with_a_clear_error() {
    let example = Example::load("deployment-auditor");
    let mut g = example.guest(vec![], &[DEPLOYMENTS]);
    let err = g.init(r#"{"required_labels": "team"}"#).unwrap_err();
    assert_eq!(err, "config.required_labels must be an array of strings");
    let mut g = example.guest(vec![], &[DEPLOYMENTS]);
    let err = g.init("not json").unwrap_err();
    assert!(err.starts_with("config is not valid JSON"), "{err}");
    let mut g = example.guest(vec![], &[DEPLOYMENTS]);
    let err = g.init(r#"{"events": "yes"}"#).unwrap_err();
    assert_eq!(err, "config.events must be true or false");
}

#[test]
fn auditor_without_read_permission_gets_a_handler_error_not_a_trap() {
    let objects = seed();
    let mut g = Example::load("deployment-auditor").guest(objects.clone(), &[]);
    g.init(CONFIG).unwrap();
    let err = g
        .on_event(&event(EventKind::Added, &objects[1], false))
        .unwrap_err();
    assert!(err.contains("forbidden"), "{err}");
    assert!(err.contains(DEPLOYMENTS), "{err}");
    // The instance is still usable afterwards.
    g.store.data_mut().readable.push(DEPLOYMENTS.to_string());
    g.on_event(&event(EventKind::Added, &objects[1], false))
        .unwrap();
    assert_eq!(
        g.messages().last().unwrap(),
        "violation deployment=shop/cart missing-label=team"
    );
}
