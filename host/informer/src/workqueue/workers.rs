//! The workers of a controller: each takes a key from the [`WorkQueue`],
//! hands it to its own [`Reconcile`] implementation, and applies the result
//! as controller-runtime does.
//!
//! Job: [`Workers::spawn`] starts one loop per reconciler (a tokio task, or
//! the dedicated thread a reconciler asks for with
//! [`Reconcile::own_thread`]), optionally held behind a [`StartGate`] until
//! the caches are synced. The result of each reconcile:
//! - [`Outcome::Done`]: the key's failures are forgotten;
//! - [`Outcome::RequeueAfter`]: forgotten, and queued again after the delay;
//! - [`Outcome::Retry`] and [`Outcome::Trap`]: queued again through the rate
//!   limiter (a trap is a crash of the reconciler: a Wasm trap, a native
//!   panic, counted apart);
//! - [`Outcome::Terminal`]: forgotten and logged, not retried (the next change
//!   queues the key again).
//!
//! A retry or requeue keeps the priority the key was taken with.
//! [`Workers::stop`] lets every reconcile in progress finish and starts no
//! other. [`Workers::keep_queue`] hands the queue on to the next workers (a
//! controller's new version) instead of shutting it down.
//!
//! Invariants:
//! - A key is reconciled by at most one worker at a time (the queue's
//!   processing set), and `done` follows every reconcile, whatever its
//!   outcome, a panic included.
//! - The retry or requeue is added before `done`, so it cannot be lost, and a
//!   change that arrived during the reconcile is handed out after it.
//! - Once [`Workers::stop`] has returned `true`, no reconcile is running and
//!   none will start.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::queue::{AddOpts, Item, QueueKey, WorkQueue};

/// How one reconcile ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do until the next change.
    Done,
    /// Reconcile again after this long, change or not.
    RequeueAfter(Duration),
    /// Failed; retry with the rate limiter's backoff.
    Retry(String),
    /// Failed for good; do not retry.
    Terminal(String),
    /// The reconciler crashed (a Wasm trap, a native panic); retried like
    /// [`Outcome::Retry`], counted apart.
    Trap(String),
}

impl Outcome {
    /// The outcome's name in metrics and the report: `ok`, `requeue`,
    /// `retry`, `terminal` or `trap`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Done => "ok",
            Outcome::RequeueAfter(_) => "requeue",
            Outcome::Retry(_) => "retry",
            Outcome::Terminal(_) => "terminal",
            Outcome::Trap(_) => "trap",
        }
    }
}

/// Makes the world match the desired state of one key.
pub trait Reconcile<K>: Send + 'static {
    /// Reconciles `key`. Never called for one key by two workers at once.
    fn reconcile(&mut self, key: &K) -> impl Future<Output = Outcome> + Send;

    /// Waits until this reconciler can take a key (for example, until a
    /// crashed instance has been restarted after its backoff). The worker
    /// takes no key from the queue before it returns, so the other workers
    /// carry on meanwhile. The default returns at once.
    fn ready(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The name of a dedicated thread for this worker, or `None` (the
    /// default) for a tokio task. A reconciler whose calls block (a Wasm
    /// instance run synchronously) asks for one. On that thread there is no
    /// tokio runtime context (the worker enters the spawning runtime only
    /// while it waits on the queue); a reconciler that needs timers keeps a
    /// runtime handle of its own.
    fn own_thread(&self) -> Option<String> {
        None
    }
}

/// A [`Reconcile`] from a closure that takes the key and returns a future of
/// the [`Outcome`].
pub fn reconcile_fn<K, F, Fut>(f: F) -> FnReconcile<F>
where
    K: QueueKey,
    F: FnMut(K) -> Fut + Send + 'static,
    Fut: Future<Output = Outcome> + Send,
{
    FnReconcile(f)
}

/// The reconciler [`reconcile_fn`] returns.
pub struct FnReconcile<F>(F);

impl<F> std::fmt::Debug for FnReconcile<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnReconcile")
    }
}

impl<K, F, Fut> Reconcile<K> for FnReconcile<F>
where
    K: QueueKey,
    F: FnMut(K) -> Fut + Send + 'static,
    Fut: Future<Output = Outcome> + Send,
{
    fn reconcile(&mut self, key: &K) -> impl Future<Output = Outcome> + Send {
        (self.0)(key.clone())
    }
}

/// Reconciles by outcome: plain atomics, readable at any time.
#[derive(Debug, Default)]
pub struct ReconcileStats {
    counts: [AtomicU64; 5],
}

/// A copy of [`ReconcileStats`], as in the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileCounts {
    /// [`Outcome::Done`].
    pub ok: u64,
    /// [`Outcome::RequeueAfter`].
    pub requeue: u64,
    /// [`Outcome::Retry`].
    pub retry: u64,
    /// [`Outcome::Terminal`].
    pub terminal: u64,
    /// [`Outcome::Trap`].
    pub trap: u64,
}

impl ReconcileCounts {
    /// Every reconcile.
    pub fn total(&self) -> u64 {
        self.ok + self.requeue + self.retry + self.terminal + self.trap
    }

    /// Adds `other` (to sum two versions of a plugin).
    pub fn add(&mut self, other: &ReconcileCounts) {
        self.ok += other.ok;
        self.requeue += other.requeue;
        self.retry += other.retry;
        self.terminal += other.terminal;
        self.trap += other.trap;
    }
}

impl ReconcileStats {
    fn index(o: &Outcome) -> usize {
        match o {
            Outcome::Done => 0,
            Outcome::RequeueAfter(_) => 1,
            Outcome::Retry(_) => 2,
            Outcome::Terminal(_) => 3,
            Outcome::Trap(_) => 4,
        }
    }

    /// Counts one reconcile.
    pub fn record(&self, o: &Outcome) {
        self.counts[Self::index(o)].fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> ReconcileCounts {
        let r = |i: usize| self.counts[i].load(Ordering::Relaxed);
        ReconcileCounts {
            ok: r(0),
            requeue: r(1),
            retry: r(2),
            terminal: r(3),
            trap: r(4),
        }
    }
}

/// Holds workers back until opened (for example until every cache the
/// controller reads has synced, as controller-runtime's `WaitForCacheSync`).
#[derive(Debug, Default)]
pub struct StartGate {
    open: AtomicBool,
    notify: Notify,
}

impl StartGate {
    /// A closed gate.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// An open gate.
    pub fn opened() -> Arc<Self> {
        let g = Self::new();
        g.open();
        g
    }

    /// Lets the workers start.
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Waits until the gate is open.
    pub async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.is_open() {
                return;
            }
            n.await;
        }
    }
}

/// Decides, just before a reconcile, whether this host still owns a key.
pub type Admit<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// How workers run.
pub struct WorkerOptions<K> {
    /// Tags their log lines (the plugin's name).
    pub name: String,
    /// They take no key before it opens.
    pub gate: Arc<StartGate>,
    /// Checked for every key taken, before it is reconciled: a key it refuses
    /// is dropped (done and forgotten), not reconciled. This is where a
    /// leader-elected or sharded host stops reconciling keys it lost.
    pub admit: Option<Admit<K>>,
}

impl<K> std::fmt::Debug for WorkerOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("name", &self.name)
            .field("admit", &self.admit.is_some())
            .finish()
    }
}

/// What the workers of one controller share.
struct Shared<K> {
    name: String,
    admit: Option<Admit<K>>,
    stopped: AtomicBool,
    stop: Notify,
    busy: AtomicUsize,
    idle: Notify,
    stats: Arc<ReconcileStats>,
    /// The queue outlives these workers (see [`Workers::keep_queue`]).
    keep_queue: AtomicBool,
}

impl<K> Default for Shared<K> {
    fn default() -> Self {
        Self {
            name: String::new(),
            admit: None,
            stopped: AtomicBool::new(false),
            stop: Notify::new(),
            busy: AtomicUsize::new(0),
            idle: Notify::new(),
            stats: Arc::default(),
            keep_queue: AtomicBool::new(false),
        }
    }
}

impl<K> Shared<K> {
    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    async fn stopped(&self) {
        loop {
            let n = self.stop.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            n.await;
        }
    }

    /// Marks one worker busy, unless the workers are stopping.
    fn enter(&self) -> bool {
        self.busy.fetch_add(1, Ordering::SeqCst);
        if self.is_stopped() {
            self.leave();
            return false;
        }
        true
    }

    fn leave(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
        self.idle.notify_waiters();
    }
}

enum Running {
    Task(tokio::task::JoinHandle<()>),
    Thread,
}

/// The running workers of one controller. Dropping it stops them (after the
/// reconciles in progress).
pub struct Workers<K: QueueKey> {
    queue: Arc<WorkQueue<K>>,
    shared: Arc<Shared<K>>,
    running: Vec<Running>,
}

impl<K: QueueKey> std::fmt::Debug for Workers<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("name", &self.shared.name)
            .field("workers", &self.running.len())
            .finish()
    }
}

impl<K: QueueKey> Workers<K> {
    /// Starts one worker per reconciler, at once. Must be called within a
    /// tokio runtime.
    pub fn spawn<R: Reconcile<K>>(queue: Arc<WorkQueue<K>>, reconcilers: Vec<R>) -> Self {
        Self::spawn_gated(queue, reconcilers, "controller", StartGate::opened())
    }

    /// Starts one worker per reconciler, each taking keys once `gate` opens;
    /// `name` tags their log lines. Must be called within a tokio runtime.
    pub fn spawn_gated<R: Reconcile<K>>(
        queue: Arc<WorkQueue<K>>,
        reconcilers: Vec<R>,
        name: &str,
        gate: Arc<StartGate>,
    ) -> Self {
        Self::spawn_with(
            queue,
            reconcilers,
            WorkerOptions {
                name: name.to_string(),
                gate,
                admit: None,
            },
        )
    }

    /// Starts one worker per reconciler with `options`. Must be called within
    /// a tokio runtime.
    pub fn spawn_with<R: Reconcile<K>>(
        queue: Arc<WorkQueue<K>>,
        reconcilers: Vec<R>,
        options: WorkerOptions<K>,
    ) -> Self {
        let WorkerOptions { name, gate, admit } = options;
        let shared = Arc::new(Shared {
            name,
            admit,
            ..Shared::default()
        });
        let rt = tokio::runtime::Handle::current();
        let mut running = Vec::with_capacity(reconcilers.len());
        for (i, r) in reconcilers.into_iter().enumerate() {
            let work = run_worker(
                queue.clone(),
                r,
                gate.clone(),
                shared.clone(),
                i,
                rt.clone(),
            );
            running.push(spawn(work, rt.clone()));
        }
        Self {
            queue,
            shared,
            running,
        }
    }

    /// Reconciles counted by outcome.
    pub fn stats(&self) -> &Arc<ReconcileStats> {
        &self.shared.stats
    }

    /// The queue the workers drain.
    pub fn queue(&self) -> &Arc<WorkQueue<K>> {
        &self.queue
    }

    /// Number of workers.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether there is no worker.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Reconciles running now.
    pub fn busy(&self) -> usize {
        self.shared.busy.load(Ordering::SeqCst)
    }

    /// Stops the workers and shuts the queue down: reconciles in progress
    /// finish, none starts. Waits at most `grace` for them and returns
    /// whether every worker is idle.
    pub async fn stop(&self, grace: Duration) -> bool {
        self.signal_stop();
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.busy() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.busy() == 0;
            }
        }
    }

    /// Hands the queue on: stopping or dropping these workers no longer
    /// shuts it down, so the workers of a controller's next version take it
    /// over as it is (pending keys, requeue-after timers, failure counts),
    /// and a reconcile that finishes after the stop still files its retry or
    /// requeue into it. The next workers must not start before
    /// [`Workers::stop`] has returned `true`: a key is then never reconciled
    /// by both.
    pub fn keep_queue(&self) {
        self.shared.keep_queue.store(true, Ordering::SeqCst);
    }

    fn signal_stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.stop.notify_waiters();
        if !self.shared.keep_queue.load(Ordering::SeqCst) {
            self.queue.shut_down();
        }
    }
}

impl<K: QueueKey> Drop for Workers<K> {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.stop.notify_waiters();
        if !self.shared.keep_queue.load(Ordering::SeqCst) {
            self.queue.shut_down();
        }
        for r in self.running.drain(..) {
            if let Running::Task(t) = r {
                t.abort();
            }
        }
    }
}

/// A worker as a future, with where to run it.
struct WorkerFuture<F> {
    future: F,
    thread: Option<String>,
}

fn spawn<F>(w: WorkerFuture<F>, rt: tokio::runtime::Handle) -> Running
where
    F: Future<Output = ()> + Send + 'static,
{
    let Some(name) = w.thread else {
        return Running::Task(rt.spawn(w.future));
    };
    // The future moves to the thread through this slot, so that it is still
    // here to fall back on if the thread cannot be started.
    let slot = Arc::new(parking_lot::Mutex::new(Some(w.future)));
    let theirs = slot.clone();
    let started = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let Some(future) = theirs.lock().take() else {
                return;
            };
            futures::executor::block_on(future);
        });
    match started {
        Ok(_) => Running::Thread,
        Err(e) => {
            tracing::warn!(worker = %name, error = %e, "cannot start the worker's thread; running it as a task");
            let future = slot.lock().take().expect("the thread never started");
            Running::Task(rt.spawn(future))
        }
    }
}

fn run_worker<K, R>(
    queue: Arc<WorkQueue<K>>,
    mut r: R,
    gate: Arc<StartGate>,
    shared: Arc<Shared<K>>,
    index: usize,
    rt: tokio::runtime::Handle,
) -> WorkerFuture<impl Future<Output = ()> + Send + 'static>
where
    K: QueueKey,
    R: Reconcile<K>,
{
    let thread = r.own_thread();
    let future = async move {
        tokio::select! {
            _ = gate.wait() => {}
            _ = shared.stopped() => return,
        }
        loop {
            tokio::select! {
                _ = r.ready() => {}
                _ = shared.stopped() => return,
            }
            let item = tokio::select! {
                i = Entered::new(&rt, queue.get()) => i,
                _ = shared.stopped() => None,
            };
            let Some(item) = item else { return };
            if !shared.enter() {
                queue.done(&item.key);
                return;
            }
            if shared.admit.as_ref().is_some_and(|a| !a(&item.key)) {
                tracing::debug!(controller = %shared.name, key = ?item.key, "key no longer owned here; dropped");
                queue.forget(&item.key);
                queue.done(&item.key);
                shared.leave();
                continue;
            }
            let outcome = std::panic::AssertUnwindSafe(r.reconcile(&item.key))
                .catch_unwind()
                .await
                .unwrap_or_else(|p| Outcome::Trap(panic_message(&p)));
            shared.stats.record(&outcome);
            settle(&queue, &item, &outcome, &shared.name, index);
            queue.done(&item.key);
            shared.leave();
        }
    };
    WorkerFuture { future, thread }
}

/// A future polled with a runtime entered: the queue's timers need one, and
/// a worker on its own thread has none otherwise.
struct Entered<'a, F> {
    rt: &'a tokio::runtime::Handle,
    inner: std::pin::Pin<Box<F>>,
}

impl<'a, F: Future> Entered<'a, F> {
    fn new(rt: &'a tokio::runtime::Handle, inner: F) -> Self {
        Self {
            rt,
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _in_rt = self.rt.enter();
        self.inner.as_mut().poll(cx)
    }
}

/// controller-runtime's result handling, before `done`.
fn settle<K: QueueKey>(
    queue: &WorkQueue<K>,
    item: &Item<K>,
    outcome: &Outcome,
    name: &str,
    worker: usize,
) {
    let key = &item.key;
    match outcome {
        Outcome::Done => queue.forget(key),
        Outcome::RequeueAfter(d) => {
            queue.forget(key);
            queue.add_with_opts(
                key.clone(),
                AddOpts {
                    priority: item.priority,
                    after: Some(*d),
                    rate_limited: false,
                },
            );
        }
        Outcome::Retry(msg) | Outcome::Trap(msg) => {
            tracing::debug!(controller = %name, worker, key = ?key, outcome = outcome.as_str(), "reconcile failed, will retry: {msg}");
            queue.add_with_opts(
                key.clone(),
                AddOpts {
                    priority: item.priority,
                    after: None,
                    rate_limited: true,
                },
            );
        }
        Outcome::Terminal(msg) => {
            tracing::warn!(controller = %name, worker, key = ?key, "reconcile failed for good (terminal, not retried): {msg}");
            queue.forget(key);
        }
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("reconcile panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("reconcile panicked: {s}")
    } else {
        "reconcile panicked".to_string()
    }
}
