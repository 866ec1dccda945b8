//! The SDK templates (sdk/js/template, sdk/python/template), built by
//! scripts/build-plugins.sh as js-template and python-template, do what the
//! plugin guides say: log one line per event with a cache count, take a prefix
//! from `[config]`, and refuse a bad config with a clear error.

mod polyglot_support;

use polyglot_support::*;
use serde_json::json;

const PODS: &str = "v1/pods";

fn pods() -> Vec<Cached> {
    ["a", "b"]
        .iter()
        .map(|n| {
            cached(
                PODS,
                &json!({"metadata": {"namespace": "prod", "name": n, "resourceVersion": "1"}}),
            )
        })
        .chain([cached(
            PODS,
            &json!({"metadata": {"namespace": "dev", "name": "c", "resourceVersion": "2"}}),
        )])
        .collect()
}

fn check_template(name: &str, bad_prefix_error: &str) {
    let engine = engine(Some(&test_cache_dir()));
    let (component, _) = load(&engine, &plugin_path(name));
    let objects = pods();
    let mut g = Guest::new(&engine, &component, objects.clone(), &[PODS]);
    g.init(r#"{"prefix": "pod"}"#).expect("init");
    g.on_event(&event(EventKind::Added, &objects[0], true))
        .unwrap();
    g.on_event(&event(EventKind::Deleted, &objects[2], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec![
            "pod kind=added resource=v1/pods key=prod/a namespace-objects=2",
            "pod kind=deleted resource=v1/pods key=dev/c namespace-objects=1",
        ]
    );
    let mut g = Guest::new(&engine, &component, vec![], &[PODS]);
    assert_eq!(g.init(r#"{"prefix": 3}"#).unwrap_err(), bad_prefix_error);
}

#[test]
fn js_template_works_as_documented() {
    check_template("js-template", "config.prefix must be a string");
}

#[test]
fn python_template_works_as_documented() {
    check_template(
        "python-template",
        "ValueError: config.prefix must be a string",
    );
}
