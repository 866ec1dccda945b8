//! Shared helpers of the work-queue tests: an in-process informer pipeline
//! per resource (DeltaFIFO, Indexer, processor, popped by hand), Deployment
//! and Service objects, and a reconciler that records every call.
//!
//! Invariant: nothing here talks to the network; time is tokio's, so tests
//! that pause the clock see exact instants.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use kube_informer::delta_fifo::DeltaFifo;
use kube_informer::indexer::Indexer;
use kube_informer::object::{Object, ObjectRef, Transform};
use kube_informer::processor::Processor;
use kube_informer::workqueue::{Outcome, Reconcile};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

/// DeltaFIFO + Indexer + processor of one resource, popped by hand.
pub struct Pipeline {
    pub fifo: DeltaFifo,
    pub processor: Arc<Processor>,
    pub indexer: Arc<Indexer>,
}

impl Pipeline {
    pub fn new(resource: &str) -> Self {
        let indexer = Arc::new(Indexer::new());
        Self {
            fifo: DeltaFifo::new(indexer.clone()),
            processor: Processor::new(resource, indexer.clone()),
            indexer,
        }
    }

    /// Pops and handles everything queued; marks synced after the first list.
    pub fn drain(&self) -> usize {
        let mut n = 0;
        while let Some(p) = self.fifo.try_pop() {
            self.processor.handle_deltas(&p);
            self.fifo.done(&p);
            n += 1;
        }
        if self.fifo.has_synced() && !self.processor.has_synced() {
            self.processor.mark_synced();
        }
        n
    }

    /// The first list: `objects`, then synced.
    pub fn list(&self, objects: Vec<ObjectRef>) {
        self.fifo.replace(objects);
        self.drain();
    }

    /// One live update.
    pub fn update(&self, o: ObjectRef) {
        self.fifo.update(o);
        self.drain();
    }
}

pub fn object(v: serde_json::Value) -> ObjectRef {
    Arc::new(Object::from_json(v.to_string().as_bytes(), &Transform::default()).unwrap())
}

/// A Deployment `ns/name` at resourceVersion `rv`.
pub fn deployment(ns: &str, name: &str, rv: u64) -> ObjectRef {
    object(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"),
                     "resourceVersion": rv.to_string()},
        "spec": {"replicas": rv % 5},
    }))
}

/// A Service `ns/name` whose controller is the Deployment `ns/owner`.
pub fn owned_service(ns: &str, name: &str, owner: &str, rv: u64) -> ObjectRef {
    object(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-svc-{ns}-{name}"),
                     "resourceVersion": rv.to_string(),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": owner,
                                          "uid": format!("uid-{ns}-{owner}"), "controller": true,
                                          "blockOwnerDeletion": true}]},
        "spec": {"ports": [{"port": 80 + rv % 3}]},
    }))
}

/// One recorded reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub worker: usize,
    pub key: String,
    pub start: Instant,
    pub end: Instant,
}

/// Every call of every [`Recorder`] sharing it, in start order, plus the
/// keys in progress (to catch two workers on one key).
#[derive(Debug, Default)]
pub struct Journal {
    pub calls: Mutex<Vec<Call>>,
    pub in_progress: Mutex<std::collections::HashMap<String, usize>>,
    pub overlaps: Mutex<Vec<(String, usize, usize)>>,
}

impl Journal {
    pub fn keys(&self) -> Vec<String> {
        self.calls.lock().iter().map(|c| c.key.clone()).collect()
    }

    pub fn count(&self, key: &str) -> usize {
        self.calls.lock().iter().filter(|c| c.key == key).count()
    }

    pub fn starts_of(&self, key: &str) -> Vec<Instant> {
        self.calls
            .lock()
            .iter()
            .filter(|c| c.key == key)
            .map(|c| c.start)
            .collect()
    }
}

type Behaviour = Arc<dyn Fn(&str, usize) -> Outcome + Send + Sync>;

/// A reconciler that records each call in a shared [`Journal`], optionally
/// waits on a gate or sleeps, and answers what `behaviour(key, nth call of
/// that key)` says.
pub struct Recorder {
    pub worker: usize,
    pub journal: Arc<Journal>,
    pub behaviour: Behaviour,
    /// Each call first takes a permit (a slow reconcile held by the test).
    pub gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Each call then sleeps this long (on tokio's clock).
    pub sleep: Duration,
}

impl Recorder {
    pub fn new(worker: usize, journal: Arc<Journal>) -> Self {
        Self {
            worker,
            journal,
            behaviour: Arc::new(|_, _| Outcome::Done),
            gate: None,
            sleep: Duration::ZERO,
        }
    }

    pub fn answering(mut self, f: impl Fn(&str, usize) -> Outcome + Send + Sync + 'static) -> Self {
        self.behaviour = Arc::new(f);
        self
    }

    pub fn gated(mut self, gate: Arc<tokio::sync::Semaphore>) -> Self {
        self.gate = Some(gate);
        self
    }

    pub fn sleeping(mut self, d: Duration) -> Self {
        self.sleep = d;
        self
    }
}

impl Reconcile<Arc<str>> for Recorder {
    async fn reconcile(&mut self, key: &Arc<str>) -> Outcome {
        let start = Instant::now();
        let key = key.to_string();
        {
            let mut p = self.journal.in_progress.lock();
            if let Some(other) = p.insert(key.clone(), self.worker) {
                self.journal
                    .overlaps
                    .lock()
                    .push((key.clone(), other, self.worker));
            }
        }
        let nth = self.journal.count(&key);
        self.journal.calls.lock().push(Call {
            worker: self.worker,
            key: key.clone(),
            start,
            end: start,
        });
        if let Some(g) = &self.gate {
            g.acquire().await.unwrap().forget();
        }
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        } else {
            tokio::task::yield_now().await;
        }
        let out = (self.behaviour)(&key, nth);
        self.journal.in_progress.lock().remove(&key);
        let end = Instant::now();
        if let Some(c) = self
            .journal
            .calls
            .lock()
            .iter_mut()
            .rev()
            .find(|c| c.key == key && c.worker == self.worker)
        {
            c.end = end;
        }
        out
    }
}

/// Waits (on tokio's clock, so a paused clock advances) until `f` holds.
pub async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..20_000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Lets every task run until the runtime is idle (a paused clock does not
/// move while tasks are runnable).
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}
