//! The work queue under an ownership predicate (leader election, sharding):
//! I10 for controllers. A key this host loses is dropped from the queue and
//! never reconciled again here, the handover waits for a reconcile of a lost
//! key that is in progress, keys it gains are reconciled, and `watches`
//! triggers queue only the primary keys this host owns. Oracles: the
//! reconciler's journal and the predicate the test installed.

use crate::workqueue_support;

use std::sync::Arc;
use std::time::Duration;

use kube_informer::ownership::{Everything, Nothing};
use kube_informer::workqueue::triggers::{Enqueue, KeyMap};
use kube_informer::workqueue::{
    Outcome, OwnedKeys, Priority, RateLimiterConfig, StartGate, WorkQueue, WorkerOptions, Workers,
};
use kube_informer::{HandlerOptions, Object, Ownership};
use tokio::sync::Semaphore;
use workqueue_support::*;

const PRIMARY: &str = "apps/v1/deployments";

#[tokio::test(start_paused = true)]
async fn i10_a_lost_key_is_dropped_and_the_handover_waits_for_its_reconcile() {
    let p = Pipeline::new(PRIMARY);
    p.list(
        (0..6)
            .map(|i| deployment("ns", &format!("d{i}"), 1))
            .collect(),
    );
    let ownership = Ownership::new(Everything);
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let owned = OwnedKeys::follow(ownership.clone(), PRIMARY, &q);
    let reg = p
        .processor
        .add_handler(
            Enqueue::new(q.clone(), PRIMARY, KeyMap::Primary),
            HandlerOptions::named("sharded").ownership(ownership.clone()),
        )
        .unwrap();
    wait_until("synced", || reg.has_synced()).await;
    // d0 blocks in its reconcile until the test says; d1 asks to come back
    // in an hour; the others are done.
    let journal = Arc::new(Journal::default());
    let hold = Arc::new(Semaphore::new(0));
    let held = Recorder::new(0, journal.clone()).answering(|key, _| match key {
        "ns/d1" => Outcome::RequeueAfter(Duration::from_secs(3600)),
        _ => Outcome::Done,
    });
    let slow = GateOn {
        key: "ns/d0",
        hold: hold.clone(),
        inner: held,
    };
    let admit_keys = owned.clone();
    // d1 first, then d0, then the initial-list keys.
    q.add_with_priority(Arc::from("ns/d1"), Priority(10));
    q.add_with_priority(Arc::from("ns/d0"), Priority(5));
    let gate = StartGate::new();
    let workers = Workers::spawn_with(
        q.clone(),
        vec![slow],
        WorkerOptions {
            name: "sharded".into(),
            gate: gate.clone(),
            admit: Some(Arc::new(move |k: &Arc<str>| {
                kube_informer::workqueue::KeyFilter::admits(&*admit_keys, PRIMARY, k)
            })),
        },
    );
    gate.open();
    wait_until("d0 in progress", || journal.count("ns/d0") == 1).await;
    assert_eq!(journal.keys(), vec!["ns/d1", "ns/d0"]);
    assert_eq!(
        q.queued(),
        5,
        "d1 waits for its timer, four initial keys are ready"
    );
    let before = journal.calls.lock().len();

    // Lose everything.
    let handover = ownership.set(Nothing);
    assert!(handover.is_waiting(), "d0 is being reconciled");
    assert_eq!(q.queued(), 0, "queued and waiting keys are dropped at once");
    let finished = tokio::spawn(handover.finished());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !finished.is_finished(),
        "the handover waits for d0's reconcile"
    );
    hold.add_permits(1_000);
    finished.await.unwrap();
    assert_eq!(q.processing(), 0);

    // Nothing more is reconciled here, whatever changes.
    for i in 0..6 {
        p.update(deployment("ns", &format!("d{i}"), 2));
    }
    tokio::time::sleep(Duration::from_secs(7200)).await;
    assert_eq!(journal.calls.lock().len(), before, "{:?}", journal.keys());

    // Gaining them back replays them all into the queue.
    let counts: Vec<usize> = (0..6).map(|i| journal.count(&format!("ns/d{i}"))).collect();
    assert_eq!(
        counts,
        vec![1, 1, 0, 0, 0, 0],
        "d2..d5 were lost before their turn"
    );
    let back = ownership.set(Everything);
    back.finished().await;
    wait_until("every key reconciled once more", || {
        (0..6).all(|i| journal.count(&format!("ns/d{i}")) == counts[i] + 1)
    })
    .await;
    assert!(journal.overlaps.lock().is_empty());
    drop(workers);
}

#[tokio::test(start_paused = true)]
async fn watches_queue_only_the_primary_keys_this_host_owns() {
    let deploys = Pipeline::new(PRIMARY);
    let configmaps = Pipeline::new("v1/configmaps");
    deploys.list(
        (0..4)
            .map(|i| deployment("ns", &format!("d{i}"), 1))
            .collect(),
    );
    configmaps.list(vec![]);
    // This host owns d0 and d2 (by name; the predicate sees the primary).
    let ownership = Ownership::new(|_r: &str, o: &Object| {
        o.meta.name.ends_with('0') || o.meta.name.ends_with('2')
    });
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let owned = OwnedKeys::follow(ownership.clone(), PRIMARY, &q);
    let reg = configmaps
        .processor
        .add_handler(
            Enqueue::new(
                q.clone(),
                PRIMARY,
                KeyMap::Label {
                    key: "app.example.com/owner".into(),
                    namespaced: true,
                },
            )
            .with_filter(owned.clone()),
            HandlerOptions::named("watches"),
        )
        .unwrap();
    wait_until("synced", || reg.has_synced()).await;
    for i in 0..4 {
        configmaps.update(object(
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cfg-{i}"), "namespace": "ns", "resourceVersion": "5",
                         "labels": {"app.example.com/owner": format!("d{i}")}}}),
        ));
    }
    wait_until("delivered", || reg.stats().snapshot().added == 4).await;
    let mut keys: Vec<String> =
        std::iter::from_fn(|| q.try_get().map(|i| i.key.to_string())).collect();
    keys.sort();
    assert_eq!(keys, vec!["ns/d0", "ns/d2"]);
}

/// Holds the reconcile of one key until the test adds permits.
struct GateOn {
    key: &'static str,
    hold: Arc<Semaphore>,
    inner: Recorder,
}

impl kube_informer::workqueue::Reconcile<Arc<str>> for GateOn {
    async fn reconcile(&mut self, key: &Arc<str>) -> Outcome {
        if &**key == self.key {
            self.inner.gate = Some(self.hold.clone());
        } else {
            self.inner.gate = None;
        }
        kube_informer::workqueue::Reconcile::reconcile(&mut self.inner, key).await
    }
}
