//! From informer notifications to work-queue keys: what makes a controller
//! reconcile an object.
//!
//! Job: [`Enqueue`] is a [`Handler`] registered on one informer (one
//! listener). For each notification it computes the keys of the primary
//! resource to reconcile, with [`KeyMap`]:
//! - [`KeyMap::Primary`] (`for`): the object's own key;
//! - [`KeyMap::ControllerOwner`] (`owns`): the key of the object's controller
//!   owner reference, when that owner is of the primary kind;
//! - [`KeyMap::Label`] / [`KeyMap::Annotation`] (`watches`): the key named
//!   by a label or annotation of the object (the owner's name in the object's
//!   namespace, or `namespace/name` in an annotation).
//!
//! Both the new and the previous state of an update are mapped, so a child
//! whose owner changed queues both owners. A key is queued at
//! [`Priority::LOW`] when nothing changed on the server (the object comes
//! from an initial list or replay, a resync, or a relist that found it at
//! the same resourceVersion), else at [`Priority::LIVE`].
//!
//! The seam for sharding: every key passes through the [`KeyFilter`] (if
//! any) with the primary resource before it is queued, so a replica queues
//! only the keys it owns. This is the whole input of the work queue.
//!
//! Invariant: handling a notification is a few map operations under the
//! queue's lock; it never waits (the listener in front of it stays empty,
//! I1 holds), and whatever the rate of changes the queue holds one entry per
//! key.

use std::sync::Arc;

use super::priority::Priority;
use super::queue::WorkQueue;
use crate::handler::{Delivery, Handler};
use crate::notification::{EventKind, Notification, NotificationRef};
use crate::object::Object;

/// Decides whether this process reconciles a key (a shard's or a leader's
/// share of the keys). Called for every key about to be queued; keep it
/// cheap and never block.
pub trait KeyFilter: Send + Sync + 'static {
    /// Whether `key` of the primary resource `resource` is queued here.
    fn admits(&self, resource: &str, key: &str) -> bool;
}

impl<F> KeyFilter for F
where
    F: Fn(&str, &str) -> bool + Send + Sync + 'static,
{
    fn admits(&self, resource: &str, key: &str) -> bool {
        self(resource, key)
    }
}

/// How an object maps to keys of the primary resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMap {
    /// The object is of the primary resource: its own key.
    Primary,
    /// The key of the object's controller owner reference, if that owner is
    /// of API group `group` and kind `kind` (the primary's).
    ControllerOwner {
        /// The primary's API group (`""` for the core group).
        group: String,
        /// The primary's kind, for example `Deployment`.
        kind: String,
        /// Whether the primary is namespaced (the owner is then in the
        /// object's namespace).
        namespaced: bool,
    },
    /// The key named by the value of this label: the primary of that name in
    /// the object's namespace.
    Label {
        /// The label key.
        key: String,
        /// Whether the primary is namespaced.
        namespaced: bool,
    },
    /// The key named by the value of this annotation: a name (in the object's
    /// namespace) or `namespace/name`.
    Annotation {
        /// The annotation key.
        key: String,
        /// Whether the primary is namespaced.
        namespaced: bool,
    },
}

fn key_in(namespace: Option<&str>, name: &str, namespaced: bool) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    match (namespaced, namespace) {
        (true, Some(ns)) => Some(format!("{ns}/{name}")),
        // A namespaced primary cannot own a cluster-scoped object.
        (true, None) => None,
        (false, _) => Some(name.to_string()),
    }
}

/// The key of `object`'s controller owner (its `ownerReferences` entry with
/// `controller: true`) when that owner is of API group `group` and kind
/// `kind`. The one reading of an owner reference that both the `owns`
/// trigger and the sharding of a controller's keys use.
pub fn controller_key(
    object: &Object,
    group: &str,
    kind: &str,
    namespaced: bool,
) -> Option<String> {
    let owner = object.meta.controller.as_ref()?;
    if owner.group() != group || owner.kind != kind {
        return None;
    }
    key_in(object.meta.namespace.as_deref(), &owner.name, namespaced)
}

impl KeyMap {
    /// The primary keys `object` maps to (at most one).
    pub fn key_of(&self, object: &Object) -> Option<String> {
        let ns = object.meta.namespace.as_deref();
        match self {
            KeyMap::Primary => Some(object.key()),
            KeyMap::ControllerOwner {
                group,
                kind,
                namespaced,
            } => controller_key(object, group, kind, *namespaced),
            KeyMap::Label { key, namespaced } => {
                key_in(ns, object.meta.labels.get(key)?, *namespaced)
            }
            KeyMap::Annotation { key, namespaced } => {
                let v = object.meta.annotations.get(key)?;
                match v.split_once('/') {
                    Some((n, name)) if *namespaced && !n.is_empty() && !name.is_empty() => {
                        Some(v.to_string())
                    }
                    Some(_) => None,
                    None => key_in(ns, v, *namespaced),
                }
            }
        }
    }
}

/// Counters of one trigger.
#[derive(Debug, Default)]
pub struct TriggerStats {
    /// Keys handed to the queue (before its dedup).
    pub enqueued: std::sync::atomic::AtomicU64,
    /// Keys the [`KeyFilter`] kept out.
    pub filtered: std::sync::atomic::AtomicU64,
}

/// The listener's handler that queues the keys of a [`KeyMap`].
pub struct Enqueue {
    queue: Arc<WorkQueue<Arc<str>>>,
    primary: Arc<str>,
    map: KeyMap,
    filter: Option<Arc<dyn KeyFilter>>,
    stats: Arc<TriggerStats>,
}

impl std::fmt::Debug for Enqueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueue")
            .field("primary", &self.primary)
            .field("map", &self.map)
            .finish()
    }
}

impl Enqueue {
    /// Queues into `queue` the keys of `primary` that `map` gives.
    pub fn new(queue: Arc<WorkQueue<Arc<str>>>, primary: &str, map: KeyMap) -> Self {
        Self {
            queue,
            primary: primary.into(),
            map,
            filter: None,
            stats: Arc::default(),
        }
    }

    /// Queues only the keys `filter` admits.
    pub fn with_filter(mut self, filter: Arc<dyn KeyFilter>) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The trigger's counters.
    pub fn stats(&self) -> Arc<TriggerStats> {
        self.stats.clone()
    }

    /// The priority of a notification's keys: low when nothing changed on
    /// the server.
    pub fn priority_of(n: &Notification) -> Priority {
        let unchanged = n.in_initial_list
            || n.kind == EventKind::Synced
            || (n.kind == EventKind::Updated
                && n.old.as_ref().is_some_and(|o| {
                    !o.meta.resource_version.is_empty()
                        && o.meta.resource_version == n.object.meta.resource_version
                }));
        if unchanged {
            Priority::LOW
        } else {
            Priority::LIVE
        }
    }

    fn enqueue(&self, key: String, priority: Priority) {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(f) = &self.filter {
            if !f.admits(&self.primary, &key) {
                self.stats.filtered.fetch_add(1, Relaxed);
                return;
            }
        }
        self.stats.enqueued.fetch_add(1, Relaxed);
        self.queue.add_with_priority(Arc::from(key), priority);
    }

    /// Queues the keys of one notification.
    pub fn handle_notification(&self, n: &Notification) {
        let priority = Self::priority_of(n);
        let new = self.map.key_of(&n.object);
        let old = n.old.as_ref().and_then(|o| self.map.key_of(o));
        if let Some(k) = &new {
            self.enqueue(k.clone(), priority);
        }
        if let Some(k) = old.filter(|o| Some(o) != new.as_ref()) {
            self.enqueue(k, priority);
        }
    }
}

impl Handler for Enqueue {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.handle_notification(&n);
        Delivery::Ok
    }

    fn max_batch(&self) -> usize {
        256
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Transform;

    fn obj(json: serde_json::Value) -> Object {
        Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap()
    }

    #[test]
    fn controller_owner_of_the_primary_kind_only() {
        let m = KeyMap::ControllerOwner {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespaced: true,
        };
        let svc = obj(
            serde_json::json!({"metadata": {"name": "web", "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-d", "uid": "2", "controller": true}]}}),
        );
        assert_eq!(m.key_of(&svc).as_deref(), Some("ns/web-d"));
        let not_controller = obj(
            serde_json::json!({"metadata": {"name": "web", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "2"}]}}),
        );
        assert_eq!(m.key_of(&not_controller), None);
        let other_kind = obj(
            serde_json::json!({"metadata": {"name": "p", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "3", "controller": true}]}}),
        );
        assert_eq!(m.key_of(&other_kind), None);
    }

    #[test]
    fn labels_and_annotations_name_the_owner() {
        let cm = obj(
            serde_json::json!({"metadata": {"name": "cfg", "namespace": "ns",
            "labels": {"app.example.com/owner": "web"},
            "annotations": {"a/owner": "other/api", "b/owner": "api"}}}),
        );
        let label = KeyMap::Label {
            key: "app.example.com/owner".into(),
            namespaced: true,
        };
        assert_eq!(label.key_of(&cm).as_deref(), Some("ns/web"));
        let ann = |k: &str| KeyMap::Annotation {
            key: k.into(),
            namespaced: true,
        };
        assert_eq!(ann("a/owner").key_of(&cm).as_deref(), Some("other/api"));
        assert_eq!(ann("b/owner").key_of(&cm).as_deref(), Some("ns/api"));
        assert_eq!(ann("missing").key_of(&cm), None);
        let cluster = KeyMap::Label {
            key: "app.example.com/owner".into(),
            namespaced: false,
        };
        assert_eq!(cluster.key_of(&cm).as_deref(), Some("web"));
    }
}
