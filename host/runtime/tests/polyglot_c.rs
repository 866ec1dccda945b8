//! The C example plugin `restart-alarm` (plugins/restart-alarm, on the C SDK,
//! built by scripts/build-plugins.sh with wit-bindgen c + clang-19) running in
//! wasmtime: it alarms exactly on containers at or above the restart
//! threshold, with the namespace's extent from a cache `list` query, once per
//! increase, records each alarm as a Warning Event when asked to, forgets
//! deleted pods, and turns a bad config or a cache error into an error result.

use crate::polyglot_support;

use polyglot_support::*;
use serde_json::json;

const PODS: &str = "v1/pods";

fn pod(ns: &str, name: &str, rv: &str, restarts: &[(&str, i64)], init: &[(&str, i64)]) -> Cached {
    let st = |l: &[(&str, i64)]| -> Vec<serde_json::Value> {
        l.iter()
            .map(|(n, r)| json!({"name": n, "restartCount": r, "ready": true, "image": "x"}))
            .collect()
    };
    cached(
        PODS,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"), "resourceVersion": rv,
                         "labels": {"app": name}},
            "spec": {"containers": [{"name": "c1", "image": "x"}]},
            "status": {"phase": "Running", "containerStatuses": st(restarts), "initContainerStatuses": st(init)}
        }),
    )
}

fn seed() -> Vec<Cached> {
    vec![
        pod("prod", "a", "1", &[("c1", 7), ("c2", 0)], &[]),
        pod("prod", "b", "2", &[("c1", 5)], &[]),
        pod("prod", "c", "3", &[("c1", 4)], &[]),
        pod("dev", "d", "4", &[("main", 9)], &[]),
        pod("dev", "e", "5", &[("main", 0)], &[("setup", 6)]),
    ]
}

fn start(cache: Vec<Cached>) -> Guest {
    let mut g = Example::load("restart-alarm").guest(cache, &[PODS]);
    g.init(r#"{"threshold": 5}"#).expect("init");
    assert_eq!(g.messages(), vec!["policy threshold=5"]);
    assert_eq!(g.store.data().logs[0].0, Level::Info);
    g.clear_logs();
    g
}

#[test]
fn restart_alarm_alarms_exactly_on_the_seeded_restarts() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.on_events(EventKind::Added, &objects, true);
    assert_eq!(
        g.messages(),
        vec![
            "alarm pod=prod/a container=c1 restarts=7 threshold=5 namespace-pods-alarming=2",
            "alarm pod=prod/b container=c1 restarts=5 threshold=5 namespace-pods-alarming=2",
            "alarm pod=dev/d container=main restarts=9 threshold=5 namespace-pods-alarming=2",
            "alarm pod=dev/e container=setup restarts=6 threshold=5 namespace-pods-alarming=2",
        ]
    );
    assert!(g.store.data().logs.iter().all(|(l, _)| *l == Level::Warn));
}

#[test]
fn restart_alarm_alarms_once_per_increase_and_forgets_deleted_pods() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.replay_then_quiet_resync(&objects);

    // a restarts once more; c crosses the threshold.
    let a = pod("prod", "a", "10", &[("c1", 8), ("c2", 0)], &[]);
    let c = pod("prod", "c", "11", &[("c1", 5)], &[]);
    g.set_cached(&a);
    g.set_cached(&c);
    g.on_event(&event(EventKind::Updated, &a, false).with_old(&objects[0]))
        .unwrap();
    g.on_event(&event(EventKind::Updated, &c, false).with_old(&objects[2]))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec![
            "alarm pod=prod/a container=c1 restarts=8 threshold=5 namespace-pods-alarming=3",
            "alarm pod=prod/c container=c1 restarts=5 threshold=5 namespace-pods-alarming=3",
        ]
    );
    g.clear_logs();

    // b is deleted and recreated with the same count: a new pod, a new alarm.
    g.on_event(&event(EventKind::Deleted, &objects[1], false))
        .unwrap();
    assert_eq!(g.messages(), Vec::<String>::new());
    g.on_event(&event(EventKind::Added, &objects[1], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["alarm pod=prod/b container=c1 restarts=5 threshold=5 namespace-pods-alarming=3"]
    );
}

#[test]
fn restart_alarm_survives_many_pods() {
    // Enough pods to grow the alarm table several times, then delete them all.
    let objects: Vec<Cached> = (0..500)
        .map(|i| {
            pod(
                "bulk",
                &format!("p{i}"),
                &format!("{i}"),
                &[("c", 5 + (i % 3) as i64)],
                &[],
            )
        })
        .collect();
    let mut g = start(vec![]);
    g.on_events(EventKind::Added, &objects, false);
    assert_eq!(g.messages().len(), 500);
    g.on_events(EventKind::Deleted, &objects, false);
    g.clear_logs();
    g.on_event(&event(EventKind::Added, &objects[7], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["alarm pod=bulk/p7 container=c restarts=6 threshold=5 namespace-pods-alarming=0"]
    );
}

#[test]
fn restart_alarm_rejects_a_bad_config_with_a_clear_error() {
    let example = Example::load("restart-alarm");
    for (config, want) in [
        (
            r#"{"threshold": 0}"#,
            "config.threshold must be a positive integer",
        ),
        (
            r#"{"threshold": "5"}"#,
            "config.threshold must be a positive integer",
        ),
        (
            r#"{"threshold": 2.5}"#,
            "config.threshold must be a positive integer",
        ),
        (
            r#"{"events": "yes"}"#,
            "config.events must be true or false",
        ),
        ("[1]", "config is not a JSON table"),
        ("{\"threshold\": ", "config is not a JSON table"),
    ] {
        let mut g = example.guest(vec![], &[PODS]);
        assert_eq!(g.init(config).unwrap_err(), want, "config {config}");
    }
}

#[test]
fn restart_alarm_cache_errors_are_handler_errors_not_traps() {
    let objects = seed();
    let mut g = Example::load("restart-alarm").guest(objects.clone(), &[]);
    g.init("{}").unwrap();
    let err = g
        .on_event(&event(EventKind::Added, &objects[0], false))
        .unwrap_err();
    assert_eq!(err, "cache list v1/pods: forbidden: v1/pods");
    g.store.data_mut().readable.push(PODS.to_string());
    g.clear_logs();
    g.on_event(&event(EventKind::Added, &objects[0], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["alarm pod=prod/a container=c1 restarts=7 threshold=5 namespace-pods-alarming=2"]
    );
}

#[test]
fn restart_alarm_records_each_alarm_as_a_warning_event_when_asked() {
    let objects = seed();
    let mut g = Example::load("restart-alarm").guest(objects.clone(), &[PODS]);
    g.init(r#"{"threshold": 5, "events": true}"#).expect("init");
    g.on_events(EventKind::Added, &objects, true);
    let got: Vec<(String, String, String, String, String)> = g
        .published()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.regarding.namespace.clone().unwrap(),
                    p.regarding.name
                ),
                p.type_.clone(),
                p.reason.clone(),
                p.action.clone(),
                p.note.clone(),
            )
        })
        .collect();
    let ev = |pod: &str, c: &str, n: i64| {
        (
            pod.to_string(),
            "warning".to_string(),
            "RestartThreshold".to_string(),
            "Alarm".to_string(),
            format!("container {c} restarted {n} times (threshold 5)"),
        )
    };
    assert_eq!(
        got,
        vec![
            ev("prod/a", "c1", 7),
            ev("prod/b", "c1", 5),
            ev("dev/d", "main", 9),
            ev("dev/e", "setup", 6),
        ]
    );
    assert_eq!(g.published()[0].regarding, reference_of(&objects[0]));

    // A refused Event is a handler error, and the alarm is raised again next time.
    let mut g = Example::load("restart-alarm").guest(objects.clone(), &[PODS]);
    g.init(r#"{"events": true}"#).unwrap();
    g.answer_event(Err(ApiError::Forbidden("no events = true".into())));
    let err = g
        .on_event(&event(EventKind::Added, &objects[0], false))
        .unwrap_err();
    assert!(err.contains("forbidden"), "{err}");
    g.on_event(&event(EventKind::Synced, &objects[0], false))
        .unwrap();
    assert_eq!(g.published().len(), 1);
}
