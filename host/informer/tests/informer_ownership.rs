//! Ownership predicates on listeners, without a network: the DeltaFIFO,
//! Indexer and processor driven by hand. The oracle is what each handler
//! records, compared with the cache and with the predicate in force.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube_informer::delta_fifo::DeltaFifo;
use kube_informer::handler::{Delivery, Handler};
use kube_informer::indexer::Indexer;
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::object::{Object, ObjectRef, Transform};
use kube_informer::ownership::{Everything, Nothing, Ownership};
use kube_informer::processor::Processor;
use kube_informer::HandlerOptions;
use tokio::sync::{mpsc, Semaphore};

struct Pipeline {
    fifo: DeltaFifo,
    processor: Arc<Processor>,
    indexer: Arc<Indexer>,
}

impl Pipeline {
    /// A synced pipeline holding pods p0..p{n-1} at resourceVersion 1.
    fn with_pods(n: usize) -> Self {
        let indexer = Arc::new(Indexer::new());
        let p = Self {
            fifo: DeltaFifo::new(indexer.clone()),
            processor: Processor::new("v1/pods", indexer.clone()),
            indexer,
        };
        p.fifo
            .replace((0..n).map(|i| pod(&format!("p{i}"), 1, None)).collect());
        p.drain();
        p
    }

    fn drain(&self) {
        while let Some(p) = self.fifo.try_pop() {
            self.processor.handle_deltas(&p);
            self.fifo.done(&p);
        }
        if self.fifo.has_synced() && !self.processor.has_synced() {
            self.processor.mark_synced();
        }
    }

    fn update(&self, name: &str, rv: u64) {
        self.fifo.update(pod(name, rv, None));
        self.drain();
    }
}

/// A pod, optionally controlled by ReplicaSet `owner`.
fn pod(name: &str, rv: u64, owner: Option<&str>) -> ObjectRef {
    let owners = owner
        .map(|o| {
            format!(
                r#","ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"{o}","uid":"u-{o}","controller":true}}]"#
            )
        })
        .unwrap_or_default();
    let raw = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","resourceVersion":"{rv}"{owners}}}}}"#
    );
    Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
}

fn index(o: &Object) -> usize {
    o.meta.name[1..].parse().unwrap()
}

fn rv(o: &Object) -> u64 {
    o.meta.resource_version.parse().unwrap()
}

/// Owns pods whose number is `r` modulo `m`.
fn modulo(m: usize, r: usize) -> impl Fn(&str, &Object) -> bool + Send + Sync + 'static {
    move |_res: &str, o: &Object| index(o) % m == r
}

/// Records every notification; each one waits for a permit first.
struct Gated {
    permits: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<NotificationRef>,
}

impl Handler for Gated {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.permits.acquire().await.unwrap().forget();
        let _ = self.tx.send(n);
        Delivery::Ok
    }
}

fn gated(
    permits: usize,
) -> (
    Gated,
    Arc<Semaphore>,
    mpsc::UnboundedReceiver<NotificationRef>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sem = Arc::new(Semaphore::new(permits));
    (
        Gated {
            permits: sem.clone(),
            tx,
        },
        sem,
        rx,
    )
}

fn opts(name: &str, ownership: &Arc<Ownership>) -> HandlerOptions {
    HandlerOptions::named(name).ownership(ownership.clone())
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<NotificationRef>) -> NotificationRef {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("nothing received within 30 s")
        .expect("channel closed")
}

/// Everything received until nothing arrives for 300 ms.
async fn quiet(rx: &mut mpsc::UnboundedReceiver<NotificationRef>) -> Vec<NotificationRef> {
    let mut out = Vec::new();
    while let Ok(Some(n)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
        out.push(n);
    }
    out
}

#[tokio::test]
async fn ownership_delivers_only_owned_keys_in_the_replay_and_live() {
    let p = Pipeline::with_pods(20);
    let own = Ownership::new(modulo(2, 0));
    let (h, _sem, mut rx) = gated(1 << 20);
    let _r = p.processor.add_handler(h, opts("even", &own)).unwrap();
    for i in 0..20 {
        p.update(&format!("p{i}"), 2);
    }
    let got = quiet(&mut rx).await;
    assert_eq!(got.len(), 20, "10 replayed adds and 10 live updates");
    assert!(
        got.iter().all(|n| index(&n.object).is_multiple_of(2)),
        "an odd pod was delivered"
    );
    assert_eq!(got.iter().filter(|n| n.in_initial_list).count(), 10);
}

#[tokio::test]
async fn gained_keys_arrive_as_a_replay_then_live_with_no_gap_and_no_duplicate() {
    let p = Pipeline::with_pods(12);
    let own = Ownership::new(Nothing);
    let (h, _sem, mut rx) = gated(1 << 20);
    let _r = p.processor.add_handler(h, opts("standby", &own)).unwrap();
    p.update("p3", 2);
    assert!(
        quiet(&mut rx).await.is_empty(),
        "a listener owning nothing got an event"
    );

    let handover = own.set(Everything);
    assert_eq!(handover.gained, 12);
    assert!(!handover.is_waiting(), "nothing was in the handler's hands");
    handover.finished().await;
    p.update("p3", 3);
    p.update("p7", 3);
    let got = quiet(&mut rx).await;
    let replay: Vec<_> = got.iter().take_while(|n| n.in_initial_list).collect();
    assert_eq!(replay.len(), 12, "every cached key replayed first");
    assert!(replay.iter().all(|n| n.kind == EventKind::Added));
    let p3 = replay.iter().find(|n| &*n.key == "ns/p3").unwrap();
    assert_eq!(rv(&p3.object), 2, "the replay holds the cached state");
    let live: Vec<_> = got[12..]
        .iter()
        .map(|n| (n.key.to_string(), rv(&n.object)))
        .collect();
    assert_eq!(live, vec![("ns/p3".into(), 3), ("ns/p7".into(), 3)]);
}

#[tokio::test]
async fn released_keys_queued_before_the_change_are_never_handled() {
    let p = Pipeline::with_pods(10);
    let own = Ownership::new(Everything);
    let (h, sem, mut rx) = gated(0);
    let _r = p.processor.add_handler(h, opts("all", &own)).unwrap();
    // The replay and ten updates wait behind a handler with no permit.
    for i in 0..10 {
        p.update(&format!("p{i}"), 2);
    }
    let handover = own.set(modulo(2, 1));
    assert_eq!(handover.released, 5);
    sem.add_permits(1 << 20);
    handover.finished().await;
    p.update("p4", 3);
    p.update("p5", 3);
    let got = quiet(&mut rx).await;
    // The first notification may have been in the handler's hands already.
    let after_first = &got[1..];
    assert!(
        after_first.iter().all(|n| index(&n.object) % 2 == 1),
        "a released key was handled after the change: {:?}",
        after_first
            .iter()
            .map(|n| n.key.to_string())
            .collect::<Vec<_>>()
    );
    let last: BTreeMap<String, u64> = got
        .iter()
        .filter(|n| index(&n.object) % 2 == 1)
        .map(|n| (n.key.to_string(), rv(&n.object)))
        .collect();
    let want: BTreeMap<String, u64> = p
        .indexer
        .snapshot()
        .iter()
        .filter(|o| index(o) % 2 == 1)
        .map(|o| (o.key(), rv(o)))
        .collect();
    assert_eq!(last, want, "every kept key ends at its cached state (I5)");
}

/// Records each notification as soon as it has it, then waits for a permit.
struct Announcing {
    permits: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<NotificationRef>,
}

impl Handler for Announcing {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let _ = self.tx.send(n);
        self.permits.acquire().await.unwrap().forget();
        Delivery::Ok
    }
}

#[tokio::test]
async fn handover_waits_for_the_batch_that_holds_a_released_key() {
    let p = Pipeline::with_pods(4);
    let own = Ownership::new(Everything);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sem = Arc::new(Semaphore::new(0));
    let h = Announcing {
        permits: sem.clone(),
        tx,
    };
    let _r = p.processor.add_handler(h, opts("slow", &own)).unwrap();
    // The handler holds its first notification (a replayed add) until a permit.
    let held = index(&recv(&mut rx).await.object);
    let others: Vec<usize> = (0..4).filter(|i| *i != held).collect();

    // Releasing a key that is not in the handler's hands needs no wait.
    let not_held = others[0];
    let not_in_hand = own.set(move |_: &str, o: &Object| index(o) != not_held);
    assert!(!not_in_hand.is_waiting());
    not_in_hand.finished().await;

    // Keep one other key only: the held one is released.
    let kept = others[1];
    let handover = own.set(move |_: &str, o: &Object| index(o) == kept);
    assert!(
        handover.is_waiting(),
        "the held key is in the handler's hands"
    );
    let wait = tokio::spawn(handover.finished());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !wait.is_finished(),
        "finished before the batch holding the released key ended"
    );
    sem.add_permits(1);
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("handover never finished")
        .unwrap();
    sem.add_permits(1 << 20);
    let rest: Vec<usize> = quiet(&mut rx)
        .await
        .iter()
        .map(|n| index(&n.object))
        .collect();
    assert_eq!(rest, vec![kept], "only the kept key is still queued");
}

#[tokio::test]
async fn a_listener_added_after_a_change_starts_with_the_predicate_in_force() {
    let p = Pipeline::with_pods(9);
    let own = Ownership::new(Nothing);
    let first = own.set(modulo(3, 0));
    first.finished().await;
    let (h, _sem, mut rx) = gated(1 << 20);
    let _r = p.processor.add_handler(h, opts("late", &own)).unwrap();
    let got = quiet(&mut rx).await;
    let keys: Vec<usize> = got.iter().map(|n| index(&n.object)).collect();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|i| i % 3 == 0), "{keys:?}");
    assert_eq!(own.listeners(), 1);
}

#[tokio::test]
async fn an_update_that_moves_an_object_into_ownership_arrives_as_an_add() {
    let p = Pipeline::with_pods(0);
    let own = Ownership::new(|_: &str, o: &Object| {
        o.meta.controller.as_ref().is_some_and(|c| c.name == "mine")
    });
    let (h, _sem, mut rx) = gated(1 << 20);
    let _r = p.processor.add_handler(h, opts("owner", &own)).unwrap();
    p.fifo.add(pod("p1", 1, Some("theirs")));
    p.drain();
    p.fifo.update(pod("p1", 2, Some("mine")));
    p.drain();
    p.fifo.update(pod("p1", 3, Some("theirs")));
    p.drain();
    let got = quiet(&mut rx).await;
    let seen: Vec<(EventKind, u64)> = got.iter().map(|n| (n.kind, rv(&n.object))).collect();
    assert_eq!(
        seen,
        vec![(EventKind::Added, 2)],
        "adopted as an add, released silently"
    );
    let c = p
        .indexer
        .get("ns/p1")
        .unwrap()
        .meta
        .controller
        .clone()
        .unwrap();
    assert_eq!((c.group(), c.kind.as_str()), ("apps", "ReplicaSet"));
}

#[tokio::test]
async fn pending_keys_of_an_overflowed_listener_follow_the_new_predicate() {
    let p = Pipeline::with_pods(6);
    let own = Ownership::new(Everything);
    let (h, sem, mut rx) = gated(0);
    let _r = p
        .processor
        .add_handler(h, opts("small", &own).queue_capacity(1))
        .unwrap();
    // Let the replay drain, then overflow with updates of every key.
    sem.add_permits(6);
    let replay = quiet(&mut rx).await;
    assert_eq!(replay.len(), 6);
    for round in 2..5 {
        for i in 0..6 {
            p.update(&format!("p{i}"), round);
        }
    }
    let handover = own.set(modulo(2, 0));
    sem.add_permits(1 << 20);
    handover.finished().await;
    let got = quiet(&mut rx).await;
    // The one queued notification (taken before the change) may be odd.
    let odd_after_first = got
        .iter()
        .skip(1)
        .filter(|n| index(&n.object) % 2 == 1)
        .count();
    assert_eq!(odd_after_first, 0, "a released pending key was resolved");
    let last: BTreeMap<String, u64> = got
        .iter()
        .filter(|n| index(&n.object).is_multiple_of(2))
        .map(|n| (n.key.to_string(), rv(&n.object)))
        .collect();
    assert_eq!(last.len(), 3);
    assert!(
        last.values().all(|&v| v == 4),
        "owned keys end at their final state: {last:?}"
    );
}

impl Pipeline {
    /// Makes every listener with a resync period due one, and dispatches the
    /// Sync deltas of the whole cache.
    fn resync(&self) {
        let later = tokio::time::Instant::now() + Duration::from_secs(3600);
        // The first call arms the period, the second finds it due.
        self.processor.should_resync(tokio::time::Instant::now());
        assert!(self.processor.should_resync(later), "no listener is due");
        self.fifo.resync();
        self.drain();
    }
}

/// An [`Announcing`] handler with a resync period on `p`, under `own`, whose
/// replay of the `pods` cached pods has been handled: every permit is used.
async fn resyncing(
    p: &Pipeline,
    own: &Arc<Ownership>,
    name: &str,
    pods: usize,
) -> (
    Arc<Semaphore>,
    mpsc::UnboundedReceiver<NotificationRef>,
    kube_informer::Registration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sem = Arc::new(Semaphore::new(pods));
    let h = Announcing {
        permits: sem.clone(),
        tx,
    };
    let r = p
        .processor
        .add_handler(h, opts(name, own).resync(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(quiet(&mut rx).await.len(), pods, "the replay");
    (sem, rx, r)
}

#[tokio::test]
async fn syncs_due_for_a_released_key_are_never_delivered() {
    let p = Pipeline::with_pods(10);
    let own = Ownership::new(Everything);
    let (sem, mut rx, _r) = resyncing(&p, &own, "resyncing", 10).await;
    // One live change is in the handler's hands (no permit left) while the
    // resync makes every key due a sync behind it.
    p.update("p1", 2);
    assert_eq!(&*recv(&mut rx).await.key, "ns/p1");
    p.resync();
    // Keep the odd keys only: the syncs due for even keys must go.
    let handover = own.set(modulo(2, 1));
    sem.add_permits(1 << 20);
    handover.finished().await;
    let got = quiet(&mut rx).await;
    let synced: Vec<usize> = got
        .iter()
        .filter(|n| n.kind == EventKind::Synced)
        .map(|n| index(&n.object))
        .collect();
    assert!(
        synced.iter().all(|i| i % 2 == 1),
        "a released key was delivered by the resync: {synced:?}"
    );
    assert_eq!(synced.len(), 5, "every owned key got its sync: {synced:?}");
}

#[tokio::test]
async fn handover_waits_for_a_sync_batch_that_holds_a_released_key() {
    let p = Pipeline::with_pods(4);
    let own = Ownership::new(Everything);
    let (sem, mut rx, _r) = resyncing(&p, &own, "resyncing", 4).await;
    // The handler holds a sync (no permit left).
    p.resync();
    let held = recv(&mut rx).await;
    assert_eq!(held.kind, EventKind::Synced);
    let held = index(&held.object);
    let handover = own.set(move |_: &str, o: &Object| index(o) != held);
    assert!(
        handover.is_waiting(),
        "the sync in the handler's hands holds a released key"
    );
    let wait = tokio::spawn(handover.finished());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !wait.is_finished(),
        "finished while the handler still held a sync of a released key"
    );
    sem.add_permits(1 << 20);
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("handover never finished")
        .unwrap();
    let rest: Vec<usize> = quiet(&mut rx)
        .await
        .iter()
        .map(|n| index(&n.object))
        .collect();
    assert!(
        !rest.contains(&held),
        "the released key came again: {rest:?}"
    );
}

#[tokio::test]
async fn a_standby_drops_its_sync_backlog() {
    let p = Pipeline::with_pods(8);
    let own = Ownership::new(Everything);
    let (sem, mut rx, _r) = resyncing(&p, &own, "leader", 8).await;
    p.resync();
    let _held = recv(&mut rx).await;
    // Leadership lost: the standby owns nothing and must not go on through
    // its backlog of syncs.
    let handover = own.set(Nothing);
    sem.add_permits(1 << 20);
    handover.finished().await;
    let after = quiet(&mut rx).await;
    assert!(
        after.is_empty(),
        "a standby handled {} syncs of its backlog",
        after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_goes_on_while_a_handover_calls_the_predicates_on_the_cache() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let p = Pipeline::with_pods(50);
    let own = Ownership::new(modulo(2, 0));
    let (h, _sem, mut rx) = gated(1 << 20);
    let _r = p.processor.add_handler(h, opts("walker", &own)).unwrap();
    assert_eq!(quiet(&mut rx).await.len(), 25, "the even pods' replay");

    // The new predicate owns everything, but its first call on p0 blocks
    // until the test lets it go: the hand-over is in its pass over the cache.
    let entered = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let blocked_once = Arc::new(AtomicBool::new(false));
    let next = {
        let (entered, release, blocked_once) =
            (entered.clone(), release.clone(), blocked_once.clone());
        move |_: &str, o: &Object| {
            if o.meta.name == "p0" && !blocked_once.swap(true, Ordering::SeqCst) {
                entered.store(true, Ordering::SeqCst);
                let until = std::time::Instant::now() + Duration::from_secs(30);
                while !release.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            true
        }
    };
    let dispatched = std::thread::scope(|scope| {
        let setter = scope.spawn(|| own.set(next));
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while !entered.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < until, "the pass never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        // While the pass is blocked: an update of a key owned before and
        // after, an update of a gained key, and the delete of a gained key.
        let (tx, done) = std::sync::mpsc::channel();
        let p = &p;
        scope.spawn(move || {
            p.update("p4", 2);
            p.update("p3", 2);
            p.fifo.delete(pod("p5", 1, None));
            p.drain();
            let _ = tx.send(());
        });
        let dispatched = done.recv_timeout(Duration::from_secs(10)).is_ok();
        release.store(true, Ordering::SeqCst);
        (dispatched, setter.join().unwrap())
    });
    let (dispatched, handover) = dispatched;
    assert!(
        dispatched,
        "dispatch waited for the hand-over's pass over the cache"
    );
    assert_eq!(
        handover.gained, 23,
        "25 odd pods, of which p3 and p5 had events"
    );
    let got = quiet(&mut rx).await;
    let mut by_key: BTreeMap<String, Vec<(EventKind, u64, bool)>> = BTreeMap::new();
    for n in &got {
        by_key.entry(n.key.to_string()).or_default().push((
            n.kind,
            rv(&n.object),
            n.in_initial_list,
        ));
    }
    assert_eq!(
        by_key.get("ns/p4"),
        Some(&vec![(EventKind::Updated, 2, false)]),
        "an owned key's live event"
    );
    assert_eq!(
        by_key.get("ns/p3"),
        Some(&vec![(EventKind::Added, 2, true)]),
        "a gained key updated during the pass: one add of its current state"
    );
    assert_eq!(
        by_key.get("ns/p5"),
        None,
        "a gained key deleted during the pass is never heard of"
    );
    for i in (1..50).step_by(2).filter(|i| *i != 3 && *i != 5) {
        assert_eq!(
            by_key.get(&format!("ns/p{i}")),
            Some(&vec![(EventKind::Added, 1, true)]),
            "gained p{i}: one replayed add"
        );
    }
    assert_eq!(
        by_key.len(),
        1 + 25 - 1,
        "no other key: {:?}",
        by_key.keys()
    );
}
