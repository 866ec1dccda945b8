//! Shard keys, and the ownership predicate of a replica's share of the ring.
//!
//! Job: name the point of the ring an object sits on, and decide whether
//! this replica delivers it. An object's shard key is
//! `group/Kind/namespace/name` of its controller owner when it has one
//! (`ownerReferences` entry with `controller: true`), else of itself, as in
//! kubernetes-controller-sharding: a ReplicaSet and the Pods it controls hash
//! to the same point and land on the same replica.
//!
//! Invariants:
//! - The shard key of an object depends only on its own metadata and its
//!   resource's group and kind, so every replica computes the same one. A
//!   resource whose kind is not known yet is owned by no replica: guessing
//!   could put one key on two points of the ring in two replicas.
//! - [`ShardOwns`] owns exactly the objects whose key hashes into its arcs.

use std::collections::HashMap;
use std::sync::Arc;

use kube_informer::object::Object;
use kube_informer::resource::ResourceSpec;
use kube_informer::Owns;
use parking_lot::RwLock;

use super::ring::{hash, ArcSet};

/// The shard key of `object`, of a resource of `group` and `kind`.
pub fn shard_key(group: &str, kind: &str, object: &Object) -> String {
    let ns = object.meta.namespace.as_deref().unwrap_or("");
    match &object.meta.controller {
        // An owner reference names an owner in the object's namespace (or a
        // cluster-scoped one, which then hashes with this namespace).
        Some(c) => format!("{}/{}/{ns}/{}", c.group(), c.kind, c.name),
        None => format!("{group}/{kind}/{ns}/{}", object.meta.name),
    }
}

/// The group and kind of each resource a listener serves: the built-in table,
/// and what the host learnt from discovery before subscribing a plugin.
///
/// Looked up by the dispatcher (through [`ShardOwns`]) while it holds the
/// informer's locks, so a lookup takes only this table's own lock, never the
/// registry's.
#[derive(Debug, Default)]
pub struct Kinds {
    known: RwLock<HashMap<String, (String, String)>>,
}

impl Kinds {
    /// An empty table (built-in resources are always known).
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records a resource's group and kind.
    pub fn insert(&self, resource: &str, group: &str, kind: &str) {
        self.known
            .write()
            .insert(resource.to_string(), (group.to_string(), kind.to_string()));
    }

    /// `resource`'s group and kind: recorded, else from the built-in table;
    /// `None` while unknown.
    pub fn of(&self, resource: &str) -> Option<(String, String)> {
        if let Some(gk) = self.known.read().get(resource) {
            return Some(gk.clone());
        }
        let spec = ResourceSpec::builtin(resource).ok().flatten();
        let spec = spec.filter(|s| !s.kind.is_empty())?;
        let gk = (spec.id.group.clone(), spec.kind.clone());
        self.known.write().insert(resource.to_string(), gk.clone());
        Some(gk)
    }
}

/// Owns the objects whose shard key hashes into `arcs`.
pub struct ShardOwns {
    arcs: ArcSet,
    kinds: Arc<Kinds>,
}

impl ShardOwns {
    /// The predicate of `arcs`.
    pub fn new(arcs: ArcSet, kinds: Arc<Kinds>) -> Self {
        Self { arcs, kinds }
    }
}

impl Owns for ShardOwns {
    fn owns(&self, resource: &str, object: &Object) -> bool {
        if self.arcs.is_empty() {
            return false;
        }
        let Some((group, kind)) = self.kinds.of(resource) else {
            return false;
        };
        self.arcs
            .contains(hash(shard_key(&group, &kind, object).as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::ring::Ring;
    use super::*;
    use kube_informer::object::Transform;

    fn obj(json: &str) -> Object {
        Object::from_json(json.as_bytes(), &Transform::default()).unwrap()
    }

    #[test]
    fn children_hash_with_their_controller() {
        let rs = obj(r#"{"metadata":{"name":"web-7d9","namespace":"shop"}}"#);
        let pod = obj(
            r#"{"metadata":{"name":"web-7d9-x2","namespace":"shop","ownerReferences":[
                {"apiVersion":"v1","kind":"Node","name":"n1","uid":"1"},
                {"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9","uid":"2","controller":true}]}}"#,
        );
        let orphan = obj(r#"{"metadata":{"name":"solo","namespace":"shop"}}"#);
        assert_eq!(
            shard_key("apps", "ReplicaSet", &rs),
            "apps/ReplicaSet/shop/web-7d9"
        );
        assert_eq!(shard_key("", "Pod", &pod), "apps/ReplicaSet/shop/web-7d9");
        assert_eq!(shard_key("", "Pod", &orphan), "/Pod/shop/solo");
        let ring = Ring::new(["a", "b", "c"], 100);
        let kinds = Kinds::new();
        kinds.insert("v1/pods", "", "Pod");
        kinds.insert("apps/v1/replicasets", "apps", "ReplicaSet");
        for m in ring.members() {
            let p = ShardOwns::new(ring.arcs_of(m), kinds.clone());
            assert_eq!(
                p.owns("v1/pods", &pod),
                p.owns("apps/v1/replicasets", &rs),
                "a pod and its ReplicaSet land on different replicas"
            );
        }
    }

    #[test]
    fn kinds_come_from_the_builtin_table_and_unknown_ones_are_owned_by_nobody() {
        let kinds = Kinds::new();
        assert_eq!(
            kinds.of("apps/v1/deployments"),
            Some(("apps".into(), "Deployment".into()))
        );
        assert_eq!(kinds.of("example.com/v1/widgets"), None);
        let all = ShardOwns::new(ArcSet::full(), kinds.clone());
        let w = obj(r#"{"metadata":{"name":"w","namespace":"ns"}}"#);
        assert!(!all.owns("example.com/v1/widgets", &w));
        kinds.insert("example.com/v1/widgets", "example.com", "Widget");
        assert!(all.owns("example.com/v1/widgets", &w));
    }
}
