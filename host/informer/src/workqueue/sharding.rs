//! A work queue under an [`Ownership`] predicate: leader election and
//! sharding cover a controller's keys as they cover listeners.
//!
//! Job: decide, in one place, whether this host owns a key of a controller's
//! primary resource, and route every trigger of the controller by that key.
//! A key `namespace/name` is owned when the predicate owns the primary's
//! *key*: a stand-in object of the primary resource with that namespace and
//! name and nothing else ([`by_name`]), whether the object is cached, changed
//! or gone. A primary that has a controller owner of its own (a Deployment
//! owned by something above it) is therefore routed by its own key, never by
//! its owner's, and so is its delete, which has no cached object left to ask
//! about.
//!
//! [`OwnedKeys`] is that decision: the [`KeyFilter`] of the triggers that do
//! not carry a predicate (`watches`, whose objects name their primary by a
//! label or annotation) and of the workers, which check every key before they
//! reconcile it. [`OwnedKeys::route`] gives the listeners that do carry one
//! (`for`, and `owns` through the child's controller owner reference, see
//! [`Route`]) an [`Ownership`] of their own that owns an object exactly when
//! the primary key it maps to is owned; it follows the cluster's predicate,
//! so a change replays the objects of the keys gained and drops those of the
//! keys lost, for every trigger alike. As a [`Follower`] of the cluster's
//! predicate, [`OwnedKeys`] also drops the queued keys it lost (forgetting
//! their retries and timers) and makes the
//! [`Handover`](crate::ownership::Handover) wait until no worker is still
//! reconciling one, and until the routed listeners finished their batches of
//! lost keys. Keys it gains arrive as those listeners' replay, at low
//! priority.
//!
//! Invariants (I10 for controllers):
//! - Every trigger and the workers route a key by the same stand-in of the
//!   primary key, so a key is queued and reconciled on the one host that owns
//!   it, whichever host sees the child that triggers it.
//! - Once the predicate has changed, no worker starts a reconcile of a key it
//!   does not own (the workers check after taking the key, and a key taken
//!   before the change is in the processing set the handover waits on); once
//!   the handover has finished, none is running one.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::object::{Object, ObjectMeta};
use crate::ownership::{Follower, FollowerWait, Ownership, Owns};

use super::queue::WorkQueue;
use super::triggers::{controller_key, KeyFilter, KeyMap};

/// The stand-in of a primary key that ownership is decided on: its
/// namespace and name only (no labels, no owner references).
pub fn by_name(key: &str) -> Object {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
        None => (None, key.to_string()),
    };
    Object::new(
        ObjectMeta {
            namespace,
            name,
            ..ObjectMeta::default()
        },
        "{}".into(),
    )
}

/// How a listener's object names the primary key it is routed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The object is a primary: its own key (`for`).
    Primary,
    /// The primary named by the object's controller owner reference, when
    /// that owner is of the primary's group and kind (`owns`).
    ControllerOwner {
        /// The primary's API group.
        group: String,
        /// The primary's kind.
        kind: String,
        /// Whether the primary is namespaced.
        namespaced: bool,
    },
}

impl Route {
    /// The route of a trigger's [`KeyMap`]; `None` for `watches`, whose
    /// keys are filtered at the trigger instead.
    pub fn of(map: &KeyMap) -> Option<Route> {
        match map {
            KeyMap::Primary => Some(Route::Primary),
            KeyMap::ControllerOwner {
                group,
                kind,
                namespaced,
            } => Some(Route::ControllerOwner {
                group: group.clone(),
                kind: kind.clone(),
                namespaced: *namespaced,
            }),
            KeyMap::Label { .. } | KeyMap::Annotation { .. } => None,
        }
    }

    /// The primary key `object` is routed by (the key its trigger queues).
    pub fn key_of(&self, object: &Object) -> Option<String> {
        match self {
            Route::Primary => Some(object.key()),
            Route::ControllerOwner {
                group,
                kind,
                namespaced,
            } => controller_key(object, group, kind, *namespaced),
        }
    }
}

/// A listener's predicate: owns an object when `inner` owns the primary key
/// the object is routed by.
struct PrimaryKeyed {
    inner: Arc<dyn Owns>,
    primary: Arc<str>,
    route: Route,
}

impl Owns for PrimaryKeyed {
    fn owns(&self, _resource: &str, object: &Object) -> bool {
        self.route
            .key_of(object)
            .is_some_and(|k| self.inner.owns(&self.primary, &by_name(&k)))
    }
}

/// The keys of `primary` that an [`Ownership`] gives this host.
pub struct OwnedKeys {
    ownership: Arc<Ownership>,
    primary: Arc<str>,
    queue: Weak<WorkQueue<Arc<str>>>,
    /// The routed listeners' predicates, each following `ownership`.
    routes: Mutex<Vec<(Route, Weak<Ownership>)>>,
}

impl std::fmt::Debug for OwnedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedKeys")
            .field("primary", &self.primary)
            .finish()
    }
}

impl OwnedKeys {
    /// Follows `ownership` for `queue`, whose keys name objects of `primary`.
    /// Keep the returned handle as long as the queue runs.
    pub fn follow(
        ownership: Arc<Ownership>,
        primary: &str,
        queue: &Arc<WorkQueue<Arc<str>>>,
    ) -> Arc<Self> {
        let me = Arc::new(Self {
            ownership: ownership.clone(),
            primary: primary.into(),
            queue: Arc::downgrade(queue),
            routes: Mutex::new(Vec::new()),
        });
        let weak: Weak<dyn Follower> = Arc::downgrade(&(me.clone() as Arc<dyn Follower>));
        ownership.follow(weak);
        me
    }

    /// The predicate for a listener of this controller whose objects name
    /// their primary key by `route`: it owns an object exactly when this
    /// host owns that key, now and after every change of the cluster's
    /// predicate. Register the listener with it (and keep it while the
    /// listener runs).
    pub fn route(&self, route: Route) -> Arc<Ownership> {
        let mut routes = self.routes.lock();
        let derived = Ownership::new(PrimaryKeyed {
            inner: self.ownership.current(),
            primary: self.primary.clone(),
            route: route.clone(),
        });
        routes.retain(|(_, w)| w.strong_count() > 0);
        routes.push((route, Arc::downgrade(&derived)));
        derived
    }

    /// Whether this host owns `key` under predicate `p`.
    fn owned_by(&self, p: &dyn Owns, key: &str) -> bool {
        p.owns(&self.primary, &by_name(key))
    }
}

impl KeyFilter for OwnedKeys {
    fn admits(&self, _resource: &str, key: &str) -> bool {
        self.owned_by(&*self.ownership.current(), key)
    }
}

impl Follower for OwnedKeys {
    fn rebase(&self, _previous: &dyn Owns, next: &Arc<dyn Owns>) -> Option<FollowerWait> {
        // The routed listeners first: they drop what they hold for lost keys
        // and replay the gained ones.
        let mut listeners = Vec::new();
        {
            let mut routes = self.routes.lock();
            routes.retain(|(_, w)| w.strong_count() > 0);
            for (route, derived) in routes.iter() {
                let Some(derived) = derived.upgrade() else {
                    continue;
                };
                let h = derived.set(PrimaryKeyed {
                    inner: next.clone(),
                    primary: self.primary.clone(),
                    route: route.clone(),
                });
                if h.is_waiting() {
                    listeners.push(h);
                }
            }
        }
        let busy: Vec<Arc<str>> = match self.queue.upgrade() {
            Some(queue) => {
                queue.retain(|k| self.owned_by(&**next, k));
                queue
                    .processing_keys()
                    .into_iter()
                    .filter(|k| !self.owned_by(&**next, k))
                    .collect()
            }
            None => Vec::new(),
        };
        if busy.is_empty() && listeners.is_empty() {
            return None;
        }
        let queue = self.queue.clone();
        Some(FollowerWait::new(async move {
            for h in listeners {
                h.finished().await;
            }
            if let Some(q) = queue.upgrade() {
                q.wait_finished(busy).await;
            }
        }))
    }
}
