//! Level-triggered controllers on top of the informer: a work queue of keys
//! with client-go's workqueue semantics and controller-runtime's priorities,
//! the workers that drain it into a reconciler, and the adapter that turns
//! informer notifications into keys.
//!
//! The flow for one controller:
//!
//! ```text
//! informer listeners ──notifications──▶ triggers::Enqueue ──keys──▶ WorkQueue ──get──▶ workers ──▶ Reconcile
//!   (the primary resource, what it owns,     (key of the object, of its         ▲                 │
//!    what it watches)                         controller, or of a label)        └─ retry/requeue ─┘
//! ```
//!
//! - [`queue`]: [`WorkQueue`], the dirty set, the processing set, timers and
//!   rate-limited retries; O(keys) memory, no capacity, never overflows.
//! - [`priority`]: keys of initial lists and resyncs ([`Priority::LOW`]) wait
//!   behind live changes ([`Priority::LIVE`]).
//! - [`delaying`]: requeue-after and retry timers.
//! - [`rate_limiter`]: client-go's per-key exponential and overall bucket
//!   limiters; [`RateLimiterConfig::default`] is
//!   `DefaultTypedControllerRateLimiter`.
//! - [`metrics`]: client-go's workqueue metrics.
//! - [`workers`]: N workers calling a [`Reconcile`] implementation, and the
//!   result handling of controller-runtime (done → forget, requeue-after →
//!   forget + add after, retry → add rate-limited, terminal → forget).
//! - [`triggers`]: the [`Handler`](crate::Handler) that maps notifications to
//!   keys (`for`, `owns`, `watches`), with a [`KeyFilter`] hook where a
//!   sharded deployment decides which keys this replica processes.
//! - [`sharding`]: [`OwnedKeys`], the queue under an
//!   [`Ownership`](crate::Ownership) predicate (leader election, sharding):
//!   every trigger and the workers route by the primary's own key; the
//!   filter of triggers and workers, the predicate of the `for` and `owns`
//!   listeners, and a follower of the predicate's changes that drops lost
//!   keys and holds the handover until no worker reconciles one.
//!
//! # Example
//!
//! A native controller over Deployments, with two workers:
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use kube_informer::workqueue::{
//!     reconcile_fn, triggers::{Enqueue, KeyMap}, Outcome, RateLimiterConfig, WorkQueue, Workers,
//! };
//! use kube_informer::{HandlerOptions, InformerRegistry};
//!
//! # async fn demo(registry: Arc<InformerRegistry>) -> Result<(), Box<dyn std::error::Error>> {
//! let queue = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
//! let primary = "apps/v1/deployments";
//! let _for = registry
//!     .add_handler(primary, Enqueue::new(queue.clone(), primary, KeyMap::Primary), HandlerOptions::named("ctl"))
//!     .await?;
//! let cache = registry.clone();
//! let workers = Workers::spawn(queue.clone(), (0..2).map(|_| {
//!     let cache = cache.clone();
//!     reconcile_fn(move |key: Arc<str>| {
//!         let exists = kube_informer::CacheView::get(&*cache, primary, &key).ok().flatten().is_some();
//!         async move {
//!             if exists { Outcome::RequeueAfter(Duration::from_secs(300)) } else { Outcome::Done }
//!         }
//!     })
//! }).collect());
//! // ... later:
//! workers.stop(Duration::from_secs(10)).await;
//! # Ok(()) }
//! ```

pub mod delaying;
pub mod metrics;
pub mod priority;
pub mod queue;
pub mod rate_limiter;
pub mod sharding;
pub mod triggers;
pub mod workers;

pub use metrics::{HistogramSnapshot, QueueMetricsSnapshot};
pub use priority::Priority;
pub use queue::{AddOpts, Item, QueueKey, WorkQueue};
pub use rate_limiter::{RateLimiter, RateLimiterConfig};
pub use sharding::{OwnedKeys, Route};
pub use triggers::KeyFilter;
pub use workers::{
    reconcile_fn, Admit, Outcome, Reconcile, ReconcileCounts, ReconcileStats, StartGate,
    WorkerOptions, Workers,
};
