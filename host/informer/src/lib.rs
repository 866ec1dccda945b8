//! Shared Kubernetes informers with client-go's semantics, whose handlers
//! cannot stall each other and never lose an object's final state.
//!
//! # The problem
//!
//! A controller keeps a local cache of the objects it cares about and reacts to
//! their changes. Doing that with one list-and-watch per consumer multiplies
//! the load on the API server and the memory in the process; sharing one watch
//! between consumers, as client-go's `SharedInformer` and kube-runtime's shared
//! reflectors do, brings the failure modes of the shared part:
//!
//! - client-go gives each handler an unbounded buffer that grows "until we OOM"
//!   behind a handler that is slow or stuck;
//! - kube-runtime's shared dispatcher waits for its slowest subscriber, so one
//!   slow handler back-pressures every other one;
//! - a handler added late misses the state that was already listed.
//!
//! This crate is one informer per resource, shared by any number of handlers:
//!
//! - a **Reflector** that lists (paged, or streaming where the server supports
//!   it) and watches with bookmarks, relists from resourceVersion "" when the
//!   server's history is gone (410 Expired) or went backwards (a too-large
//!   resourceVersion, or a watch event older than one already seen), and
//!   backs off on every other error;
//! - a **DeltaFIFO** that merges an object's changes while it waits, and diffs
//!   each relist against the cache so that vanished objects become deletes;
//! - an **Indexer**: the cache, with a namespace index, custom indexes on any
//!   field path or label, and full label-selector queries;
//! - one bounded **listener** per handler. The dispatcher hands each change to
//!   every listener in O(1) and never waits for one (I1). A handler that falls
//!   behind holds at most its queue capacity, then only the set of keys that
//!   changed (I4), and still ends with every object's final state (I5). A
//!   handler added at any time first gets the current cache as its initial
//!   state, then live changes, with no gap and no duplicate (I6). Each handler
//!   may have its own resync period, namespace and label selector, and an
//!   ownership predicate shared with other handlers ([`Ownership`]): keys the
//!   predicate gains arrive as a replay and keys it loses stop arriving, which
//!   is what leader election and sharding build on. A resync never delays a
//!   real change (syncs wait until none is pending).
//!
//! # Example
//!
//! A handler that counts pods per node, next to an index on the node name:
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use k8s_openapi::api::core::v1::Pod;
//! use kube_informer::{Delivery, EventKind, Handler, HandlerOptions, NotificationRef, SharedInformer};
//!
//! struct PodLogger;
//!
//! impl Handler for PodLogger {
//!     async fn handle(&mut self, n: NotificationRef) -> Delivery {
//!         // The cached JSON as a typed k8s-openapi object, parsed on demand.
//!         let Ok(pod) = n.object.parse::<Pod>() else {
//!             return Delivery::HandlerError(format!("{} is not a Pod", n.key));
//!         };
//!         let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
//!         match n.kind {
//!             EventKind::Added | EventKind::Updated => println!("{} on {node}", n.key),
//!             EventKind::Deleted => println!("{} gone", n.key),
//!             EventKind::Synced => {}
//!         }
//!         Delivery::Ok
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = kube::Client::try_default().await?;
//!     let pods = SharedInformer::for_type::<Pod>(client)
//!         .index("node", "spec.nodeName")
//!         .start()
//!         .await?;
//!     let registration = pods.add_handler(
//!         PodLogger,
//!         HandlerOptions::named("pod-logger")
//!             .queue_capacity(1024)
//!             .namespace("default")
//!             .resync(Duration::from_secs(600)),
//!     )?;
//!     while !registration.has_synced() {
//!         tokio::time::sleep(Duration::from_millis(50)).await;
//!     }
//!     // The cache answers at once, without an API call.
//!     let on_node = pods.indexer().by_index("node", "node-1")?;
//!     println!("{} pods on node-1", on_node.len());
//!     registration.remove();
//!     Ok(())
//! }
//! ```
//!
//! A complete program, with a command line and a summary of what its handler
//! saw, is `examples/native-informer` in the repository; closures work as
//! handlers too ([`handler::from_fn`]). Many resources and handlers, with
//! informers started for their first handler and stopped after their last,
//! are what [`InformerRegistry`] manages.
//!
//! # Memory usage
//!
//! What the cache holds per object is its JSON after the transform, as one
//! compact string, plus the metadata the informer needs parsed (namespace,
//! name, uid, resourceVersion, generation, timestamps, owner uids, and labels
//! and annotations in one buffer each). It never keeps a `serde_json::Value`
//! tree or a typed struct per object: typed access ([`Object::parse`],
//! [`Indexer::get_as`]) parses on each call, which is the price of a cache that
//! is a fraction of a typed one (about 3.9 KB per typical 3.7 KB pod with
//! `managedFields` stripped, against 14 KB for a kube-runtime store of typed
//! `Pod`s, in the project's benchmark B4).
//!
//! - `metadata.managedFields` is stripped by default; it is often half of an
//!   object. Keep it with [`InformerBuilder::keep_managed_fields`].
//! - Each object is stored once and shared by `Arc` between the cache, every
//!   listener and every notification. A notification is never copied per
//!   handler.
//! - A listener holds at most its `queue_capacity` notifications. Once full, it
//!   keeps one small entry per changed key until the handler catches up, so a
//!   stuck handler costs O(number of keys), never O(number of changes).
//! - During a relist the DeltaFIFO holds the listed objects until they are
//!   processed, so the peak is about twice the cache for a moment; a streaming
//!   list keeps that peak lower than paging through a large list.
//! - Custom indexes cost one entry per (value, key) pair.
//!
//! # Features
//!
//! - `client` (default): the Reflector, resource discovery, [`SharedInformer`]
//!   and [`InformerRegistry`], which talk to an API server through
//!   kube-client. Without it the crate is the in-process half only: the object
//!   model, DeltaFIFO, Indexer, processor, listeners and the [`Handler`]
//!   contract. The wasm-informer plugin runtime depends on that half and so
//!   never links an HTTP client.
//!
//! # Invariants
//!
//! Each module's documentation states the invariants it keeps. The numbers
//! (I1–I9) are the project's, listed in its `docs/ARCHITECTURE.md` with the
//! tests that guard them.

#![warn(missing_docs)]

// What flows through the pipeline.
pub mod names;
pub mod resource;
pub mod suggest;
pub mod str_map;
pub mod object;
pub mod pack;
pub mod decode;
pub mod notification;

// The informer, in data-flow order.
#[cfg(feature = "client")]
pub mod backoff;
#[cfg(feature = "client")]
pub mod reflector;
pub mod delta_fifo;
pub mod indexer;
pub mod processor;
pub mod listener;
pub mod ownership;
pub mod shard;
pub mod latency;
pub mod handler;
pub mod registration;

// Wiring: one informer per resource, and a registry of them.
#[cfg(feature = "client")]
pub mod informer;
#[cfg(feature = "client")]
pub mod registry;

// The cache as consumers query it.
pub mod cache_view;

// Controllers: a work queue of keys fed by listeners, and its workers.
pub mod workqueue;

pub use cache_view::{CacheError, CacheView};
pub use handler::{from_fn, Delivery, Handled, Handler, HandlerOptions, HandlerOptionsError};
pub use indexer::{IndexSpec, Indexer};
#[cfg(feature = "client")]
pub use informer::{InformerBuilder, InformerConfig, InformerError, SharedInformer};
pub use notification::{EventKind, Notification, NotificationRef};
pub use object::{Object, ObjectRef, Transform};
pub use ownership::{Follower, FollowerWait, Handover, Ownership, Owns};
pub use registration::Registration;
#[cfg(feature = "client")]
pub use registry::{InformerLease, InformerRegistry};
pub use resource::ResourceId;
