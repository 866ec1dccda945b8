//! Shard keys, and the ownership predicate of a replica's share of the ring.
//!
//! Job: name the point of the ring an object sits on, and decide whether
//! this replica delivers it. What places an object is its resource's
//! [`ShardBy`] ([`Placement`]):
//! - `owner` (the default): the shard key `group/Kind/namespace/name` of its
//!   controller owner when it has one (`ownerReferences` entry with
//!   `controller: true`), else of itself, as in
//!   kubernetes-controller-sharding: a ReplicaSet and the Pods it controls
//!   hash to the same point and land on the same replica;
//! - `uid` and `namespace`: the FNV-1a 64 hash of `metadata.uid` or
//!   `metadata.namespace`, the point the API server's sharded list and watch
//!   (KEP-5866) puts the object on, so that the arcs this replica delivers
//!   are exactly the ranges its informers ask the server for.
//!
//! Invariants:
//! - The shard key of an object depends only on its own metadata and its
//!   resource's group and kind, so every replica computes the same one. A
//!   resource whose kind is not known yet is owned by no replica: guessing
//!   could put one key on two points of the ring in two replicas.
//! - [`ShardOwns`] owns exactly the objects whose point (as its resource's
//!   placement computes it) is in its arcs.
//! - A controller's keys are decided on a stand-in of the primary key
//!   (namespace and name only), so a controller may use only placements that
//!   such a stand-in carries: `owner` or `namespace` for its primary and
//!   owned resources, and a full cache (`owner`) for resources it watches by
//!   a label or annotation ([`Placement::check_controller`]).

use std::collections::HashMap;
use std::sync::Arc;

use kube_informer::object::Object;
use kube_informer::resource::ResourceSpec;
use kube_informer::Owns;
use parking_lot::RwLock;

use super::ring::{hash, ArcSet};
use crate::config::{ClusterSettings, ShardBy};

/// What places each resource's objects on the ring: `[cluster] shard_by`,
/// and `shard_by_resource` per resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    default: ShardBy,
    per_resource: HashMap<String, ShardBy>,
}

impl Placement {
    /// From the `[cluster]` table.
    pub fn of_settings(settings: &ClusterSettings) -> Self {
        Self {
            default: settings.shard_by,
            per_resource: settings
                .shard_by_resource
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    /// The placement of `resource` (a canonical id such as `v1/pods`).
    /// Called by the dispatcher for every notification: with no
    /// per-resource setting it looks nothing up.
    pub fn of(&self, resource: &str) -> ShardBy {
        if self.per_resource.is_empty() {
            return self.default;
        }
        self.per_resource
            .get(resource)
            .copied()
            .unwrap_or(self.default)
    }

    /// Whether some resource is sharded at the source.
    pub fn shards_at_source(&self) -> bool {
        self.default != ShardBy::Owner || self.per_resource.values().any(|b| *b != ShardBy::Owner)
    }

    /// Refuses a controller whose keys this placement cannot route: its
    /// key carries no uid, and a resource it watches by label or annotation
    /// may name a primary anywhere.
    pub fn check_controller(
        &self,
        primary: &str,
        owns: &[String],
        watches: &[String],
    ) -> Result<(), String> {
        let canon = |r: &str| {
            kube_informer::ResourceId::parse(r)
                .map(|id| id.to_string())
                .unwrap_or_else(|_| r.to_string())
        };
        let p = self.of(&canon(primary));
        if p == ShardBy::Uid {
            return Err(format!(
                "[cluster] shards {primary} by uid, but a controller's key (namespace/name) carries no uid: set shard_by_resource.\"{primary}\" = \"namespace\" or \"owner\""
            ));
        }
        for o in owns {
            let by = self.of(&canon(o));
            let ok = by == ShardBy::Owner || (by == ShardBy::Namespace && p == ShardBy::Namespace);
            if !ok {
                return Err(format!(
                    "[cluster] shards {o} by {}, but the controller of {primary} owns it and is placed by {}: children follow their owner, so set shard_by_resource.\"{o}\" = \"{}\"",
                    by.as_str(),
                    p.as_str(),
                    if p == ShardBy::Namespace { "namespace" } else { "owner" }
                ));
            }
        }
        for w in watches {
            let by = self.of(&canon(w));
            if by != ShardBy::Owner {
                return Err(format!(
                    "[cluster] shards {w} by {}, but the controller of {primary} watches it by a label or annotation that may name a primary on any replica: set shard_by_resource.\"{w}\" = \"owner\" (cached in full)",
                    by.as_str()
                ));
            }
        }
        Ok(())
    }
}

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

/// Owns the objects whose point hashes into `arcs`.
pub struct ShardOwns {
    arcs: ArcSet,
    kinds: Arc<Kinds>,
    placement: Arc<Placement>,
}

impl ShardOwns {
    /// The predicate of `arcs`, every resource placed by its owner.
    pub fn new(arcs: ArcSet, kinds: Arc<Kinds>) -> Self {
        Self::placed(arcs, kinds, Arc::new(Placement::default()))
    }

    /// The predicate of `arcs` under `placement`.
    pub fn placed(arcs: ArcSet, kinds: Arc<Kinds>, placement: Arc<Placement>) -> Self {
        Self {
            arcs,
            kinds,
            placement,
        }
    }
}

impl Owns for ShardOwns {
    fn owns(&self, resource: &str, object: &Object) -> bool {
        if self.arcs.is_empty() {
            return false;
        }
        let point = match self.placement.of(resource).source_field() {
            Some(field) => field.point(object),
            None => {
                let Some((group, kind)) = self.kinds.of(resource) else {
                    return false;
                };
                hash(shard_key(&group, &kind, object).as_bytes())
            }
        };
        self.arcs.contains(point)
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

    fn placement(default: ShardBy, per: &[(&str, ShardBy)]) -> Placement {
        let mut settings = ClusterSettings {
            shard_by: default,
            ..ClusterSettings::default()
        };
        for (r, b) in per {
            settings.shard_by_resource.insert(r.to_string(), *b);
        }
        Placement::of_settings(&settings)
    }

    #[test]
    fn uid_and_namespace_place_an_object_at_the_servers_hash_of_the_field() {
        use kube_informer::shard::fnv1a_64;
        let kinds = Kinds::new();
        kinds.insert("v1/pods", "", "Pod");
        let p = Arc::new(placement(
            ShardBy::Uid,
            &[("apps/v1/replicasets", ShardBy::Namespace)],
        ));
        let pod = obj(r#"{"metadata":{"name":"a","namespace":"shop","uid":"u-1"}}"#);
        let h = fnv1a_64(b"u-1");
        let just = |a: u64| ArcSet::from_ranges(vec![(a, a)]);
        let owns =
            |arcs: ArcSet, r: &str| ShardOwns::placed(arcs, kinds.clone(), p.clone()).owns(r, &pod);
        assert!(owns(just(h), "v1/pods"));
        assert!(!owns(ArcSet::full().subtract(&just(h)), "v1/pods"));
        let ns = fnv1a_64(b"shop");
        assert!(owns(just(ns), "apps/v1/replicasets"));
        assert!(!owns(just(h), "apps/v1/replicasets"));
    }

    #[test]
    fn a_controller_may_only_use_placements_its_keys_carry() {
        let uid = placement(ShardBy::Uid, &[]);
        let e = uid
            .check_controller("apps/v1/deployments", &[], &[])
            .unwrap_err();
        assert!(
            e.contains("carries no uid") && e.contains("shard_by_resource"),
            "{e}"
        );
        let ns = placement(ShardBy::Namespace, &[("v1/configmaps", ShardBy::Owner)]);
        ns.check_controller(
            "apps/v1/deployments",
            &["v1/services".into()],
            &["v1/configmaps".into()],
        )
        .unwrap();
        let e = ns
            .check_controller("apps/v1/deployments", &[], &["v1/secrets".into()])
            .unwrap_err();
        assert!(e.contains("v1/secrets") && e.contains("\"owner\""), "{e}");
        let mixed = placement(ShardBy::Owner, &[("v1/services", ShardBy::Uid)]);
        let e = mixed
            .check_controller("apps/v1/deployments", &["v1/services".into()], &[])
            .unwrap_err();
        assert!(e.contains("children follow their owner"), "{e}");
        placement(ShardBy::Owner, &[])
            .check_controller(
                "apps/v1/deployments",
                &["v1/services".into()],
                &["v1/secrets".into()],
            )
            .unwrap();
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

    /// One replica of a ring, with a controller `for` Deployments `owns`
    /// ConfigMaps under its share: the `for` and `owns` listeners'
    /// predicates and the workers' key check.
    struct Replica {
        cluster: Arc<kube_informer::Ownership>,
        keys: Arc<kube_informer::workqueue::OwnedKeys>,
        for_: Arc<kube_informer::Ownership>,
        owns: Arc<kube_informer::Ownership>,
        _queue: Arc<kube_informer::workqueue::WorkQueue<Arc<str>>>,
    }

    fn replica(arcs: ArcSet, kinds: &Arc<Kinds>) -> Replica {
        use kube_informer::workqueue::{OwnedKeys, RateLimiterConfig, Route, WorkQueue};
        let cluster = kube_informer::Ownership::new(ShardOwns::new(arcs, kinds.clone()));
        let queue = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
        let keys = OwnedKeys::follow(cluster.clone(), "apps/v1/deployments", &queue);
        let for_ = keys.route(Route::Primary);
        let owns = keys.route(Route::ControllerOwner {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespaced: true,
        });
        Replica {
            cluster,
            keys,
            for_,
            owns,
            _queue: queue,
        }
    }

    /// Which replicas route Deployment `i` (controlled by a Rollout of its
    /// own) by each trigger: its own add, its ConfigMap's change, its key
    /// at the worker, its delete (the key of an object no longer cached).
    fn routes(reps: &[Replica], i: usize) -> [Vec<usize>; 3] {
        use kube_informer::workqueue::KeyFilter;
        let d = obj(&format!(
            r#"{{"metadata":{{"name":"d-{i}","namespace":"shop","ownerReferences":[
                {{"apiVersion":"rollouts.example.com/v1","kind":"Rollout","name":"r-{i}","uid":"r{i}","controller":true}}]}}}}"#
        ));
        let cm = obj(&format!(
            r#"{{"metadata":{{"name":"cfg-{i}","namespace":"shop","ownerReferences":[
                {{"apiVersion":"apps/v1","kind":"Deployment","name":"d-{i}","uid":"d{i}","controller":true}}]}}}}"#
        ));
        let key = format!("shop/d-{i}");
        let who = |f: &dyn Fn(&Replica) -> bool| {
            (0..reps.len()).filter(|&r| f(&reps[r])).collect::<Vec<_>>()
        };
        [
            who(&|r| r.for_.owns("apps/v1/deployments", &d)),
            who(&|r| r.owns.owns("v1/configmaps", &cm)),
            who(&|r| r.keys.admits("apps/v1/deployments", &key)),
        ]
    }

    #[test]
    fn a_controllers_triggers_and_workers_route_a_key_by_the_primarys_own_key() {
        let kinds = Kinds::new();
        let ring = Ring::new(["a", "b", "c"], 100);
        let reps: Vec<Replica> = ring
            .members()
            .iter()
            .map(|m| replica(ring.arcs_of(m), &kinds))
            .collect();
        let mut owner_elsewhere = 0;
        for i in 0..60 {
            let [by_add, by_child, by_key] = routes(&reps, i);
            assert_eq!(by_add.len(), 1, "d-{i}: its add reaches {by_add:?}");
            assert_eq!(by_child, by_add, "d-{i}: its ConfigMap's change");
            assert_eq!(by_key, by_add, "d-{i}: its key (also once deleted)");
            // The case that broke: the Deployment's own controller hashes
            // elsewhere than the Deployment.
            let rollout = format!("rollouts.example.com/Rollout/shop/r-{i}");
            if !ring
                .arcs_of(&ring.members()[by_add[0]])
                .contains(hash(rollout.as_bytes()))
            {
                owner_elsewhere += 1;
            }
        }
        assert!(owner_elsewhere > 10, "too few keys exercise the case");

        // A ring change reaches every routed predicate.
        let two = Ring::new(["a", "b"], 100);
        for (r, m) in reps.iter().zip(ring.members()) {
            let h = r.cluster.set(ShardOwns::new(two.arcs_of(m), kinds.clone()));
            assert!(!h.is_waiting());
        }
        for i in 0..60 {
            let [by_add, by_child, by_key] = routes(&reps, i);
            assert_eq!(by_add.len(), 1, "d-{i} after the change: {by_add:?}");
            assert!(
                by_add[0] < 2,
                "d-{i} is still routed to the member that left"
            );
            assert_eq!(by_child, by_add);
            assert_eq!(by_key, by_add);
        }
    }
}
