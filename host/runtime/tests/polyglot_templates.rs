//! The SDK templates (sdk/{js,python,c}/template and template-controller),
//! built by scripts/build-plugins.sh as js-template, python-template,
//! c-template and js-/python-/c-controller-template, do what the plugin
//! guides say:
//! - the event-handler templates log one line per pod with a cache count,
//!   give an unlabelled pod the `[config]` label by server-side apply with
//!   must-exist and record a Normal Event, leave a labelled one alone and a
//!   vanished one too, fail the event when the apply is refused, and refuse a
//!   bad config with a clear error;
//! - the controller templates (world `controller`) label an unlabelled object
//!   by a merge patch and record a Normal Event, leave a labelled one alone,
//!   requeue when configured, treat a vanished object as done, retry on
//!   `forbidden`, stop on `invalid`, and refuse a bad config.

use crate::polyglot_support;

use polyglot_support::*;
use serde_json::json;

const PODS: &str = "v1/pods";

fn pods() -> Vec<Cached> {
    let pod = |ns: &str, name: &str, labels: serde_json::Value| {
        cached(
            PODS,
            &json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                                 "resourceVersion": "1", "labels": labels}}),
        )
    };
    vec![
        pod("prod", "a", json!({"app": "x"})),
        pod("prod", "b", json!({"team": "shop"})),
        pod("dev", "c", json!({})),
    ]
}

fn check_template(name: &str, bad_label_error: &str) {
    let engine = engine(Some(&test_cache_dir()));
    let (component, _) = load(&engine, &plugin_path(name));
    assert_eq!(world_of(&engine, &component), World::EventHandler);
    let objects = pods();
    let mut g = Guest::new(&engine, &component, objects.clone(), &[PODS]);
    g.init(r#"{"value": "platform"}"#).expect("init");
    // Unlabelled: one server-side apply of just the label, one Event.
    g.on_event(&event(EventKind::Added, &objects[0], true))
        .unwrap();
    // Labelled: nothing written. Deleted: a log line only.
    g.on_event(&event(EventKind::Updated, &objects[1], false))
        .unwrap();
    g.on_event(&event(EventKind::Deleted, &objects[2], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec![
            "added prod/a (2 pods in prod)",
            "labelled prod/a team=platform",
            "updated prod/b (2 pods in prod)",
            "deleted dev/c",
        ],
        "{name}"
    );
    let calls = g.kube_call_summaries();
    assert_eq!(
        calls,
        vec![json!(["apply", PODS, "prod", "a", "apply",
                    {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "a", "namespace": "prod", "labels": {"team": "platform"}}},
                    false])],
        "{name}"
    );
    // From an event, which may be stale: an apply that never creates.
    assert!(
        g.kube_calls()[0].must_exist,
        "{name}: apply without must-exist"
    );
    let p = &g.published();
    assert_eq!(p.len(), 1, "{name}");
    assert_eq!(
        (
            p[0].type_.as_str(),
            p[0].reason.as_str(),
            p[0].action.as_str(),
            p[0].note.as_str()
        ),
        ("normal", "Labelled", "Label", "set team=platform"),
        "{name}"
    );
    assert_eq!(p[0].regarding, reference_of(&objects[0]), "{name}");
    // A pod gone since its event: nothing to label, no Event, no error.
    g.answer_kube(Err(ApiError::NotFound("pods \"a\" not found".into())));
    g.on_event(&event(EventKind::Added, &objects[0], false))
        .unwrap();
    assert!(
        g.messages().iter().any(|m| m == "gone prod/a"),
        "{name}: {:?}",
        g.messages()
    );
    assert_eq!(g.published().len(), 1, "{name}");
    // A refused patch is the handler's error, and records no Event.
    g.answer_kube(Err(ApiError::Forbidden("no [[write]] grant".into())));
    let e = g
        .on_event(&event(EventKind::Added, &objects[0], false))
        .unwrap_err();
    assert!(e.contains("forbidden"), "{name}: {e}");
    assert_eq!(g.published().len(), 1, "{name}");
    let mut g = Guest::new(&engine, &component, vec![], &[PODS]);
    assert_eq!(
        g.init(r#"{"label": 3}"#).unwrap_err(),
        bad_label_error,
        "{name}"
    );
}

#[test]
fn js_template_works_as_documented() {
    check_template("js-template", "config.label must be a string");
}

#[test]
fn python_template_works_as_documented() {
    check_template(
        "python-template",
        "ValueError: config.label must be a string",
    );
}

#[test]
fn c_template_works_as_documented() {
    check_template("c-template", "config.label must be a string");
}

fn labelled(name: &str) -> Cached {
    cached(
        PODS,
        &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": "prod", "name": name, "uid": format!("uid-{name}"),
                             "resourceVersion": "3", "labels": {"managed-by": "wasm-informer"}}}),
    )
}

fn unlabelled(name: &str) -> Cached {
    cached(
        PODS,
        &json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": "prod", "name": name, "uid": format!("uid-{name}"),
                             "resourceVersion": "2", "labels": {"app": "x"}}}),
    )
}

fn check_controller_template(name: &str, bad_label_error: &str) {
    let engine = engine(Some(&test_cache_dir()));
    let (component, _) = load(&engine, &plugin_path(name));
    assert_eq!(world_of(&engine, &component), World::Controller, "{name}");
    let cache = vec![unlabelled("a"), labelled("b")];
    let mut g = Guest::new(&engine, &component, cache.clone(), &[PODS]);
    g.init("{}").expect("init");

    // Unlabelled: one merge patch, one Normal Event, done.
    assert_eq!(
        g.reconcile(&request(PODS, "prod/a")),
        Ok(Action::Done),
        "{name}"
    );
    let calls = g.kube_call_summaries();
    assert_eq!(
        calls,
        vec![json!(["patch", PODS, "prod", "a", "merge",
                    {"metadata": {"labels": {"managed-by": "wasm-informer"}}}, false])],
        "{name}"
    );
    let p = &g.published()[0];
    assert_eq!(g.published().len(), 1, "{name}");
    assert_eq!(
        (
            p.type_.as_str(),
            p.reason.as_str(),
            p.action.as_str(),
            p.note.as_str()
        ),
        (
            "normal",
            "Labelled",
            "Label",
            "set managed-by=wasm-informer"
        ),
        "{name}"
    );
    assert_eq!(p.regarding, reference_of(&cache[0]), "{name}");
    assert_eq!(
        g.messages(),
        vec!["labelled prod/a managed-by=wasm-informer"],
        "{name}"
    );

    // Labelled: nothing to do. Gone: nothing to do.
    assert_eq!(
        g.reconcile(&request(PODS, "prod/b")),
        Ok(Action::Done),
        "{name}"
    );
    assert_eq!(
        g.reconcile(&request(PODS, "prod/gone")),
        Ok(Action::Done),
        "{name}"
    );
    assert_eq!(g.kube_calls().len(), 1, "{name}");
    assert_eq!(g.messages().last().unwrap(), "gone prod/gone", "{name}");

    // A refused patch is retried; an invalid one is not; a vanished object is done.
    g.answer_kube(Err(ApiError::Forbidden("no [[write]] grant".into())));
    match g.reconcile(&request(PODS, "prod/a")) {
        Err(ReconcileError::Retry(m)) => assert!(m.contains("forbidden"), "{name}: {m}"),
        other => panic!("{name}: {other:?}"),
    }
    g.answer_kube(Err(ApiError::Invalid(InvalidDetails {
        message: "label value too long".into(),
        causes: vec![],
    })));
    match g.reconcile(&request(PODS, "prod/a")) {
        Err(ReconcileError::Terminal(m)) => {
            assert!(m.contains("label value too long"), "{name}: {m}")
        }
        other => panic!("{name}: {other:?}"),
    }
    g.answer_kube(Err(ApiError::NotFound("pods \"a\" not found".into())));
    assert_eq!(
        g.reconcile(&request(PODS, "prod/a")),
        Ok(Action::Done),
        "{name}"
    );
    assert_eq!(
        g.published().len(),
        1,
        "{name}: no Event for a failed patch"
    );

    // Requeue when configured; a cache error is retried.
    let mut g = Guest::new(&engine, &component, cache.clone(), &[]);
    g.init(r#"{"requeue_ms": 1500, "label": "team", "value": "a"}"#)
        .expect("init");
    match g.reconcile(&request(PODS, "prod/b")) {
        Err(ReconcileError::Retry(m)) => assert!(m.contains("forbidden"), "{name}: {m}"),
        other => panic!("{name}: {other:?}"),
    }
    g.store.data_mut().readable.push(PODS.into());
    assert_eq!(
        g.reconcile(&request(PODS, "prod/b")),
        Ok(Action::RequeueAfter(1500)),
        "{name}"
    );
    assert_eq!(
        g.kube_calls()[0].body,
        Some(json!({"metadata": {"labels": {"team": "a"}}})),
        "{name}"
    );

    let mut g = Guest::new(&engine, &component, vec![], &[PODS]);
    assert_eq!(
        g.init(r#"{"label": 3}"#).unwrap_err(),
        bad_label_error,
        "{name}"
    );
}

#[test]
fn js_controller_template_works_as_documented() {
    check_controller_template(
        "js-controller-template",
        "config.label must be a non-empty string",
    );
}

#[test]
fn python_controller_template_works_as_documented() {
    check_controller_template(
        "python-controller-template",
        "ValueError: config.label must be a non-empty string",
    );
}

#[test]
fn c_controller_template_works_as_documented() {
    check_controller_template(
        "c-controller-template",
        "config.label must be a non-empty string",
    );
}
