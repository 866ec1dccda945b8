//! The Indexer: the informer's thread-safe cache of one resource, with a built-in
//! namespace index and custom indexes defined by a field path.
//!
//! Job: hold the current state of every object as a shared, immutable
//! [`ObjectRef`], answer get (O(1)), list, by-index and label-selector queries,
//! and hand out consistent snapshots for replays.
//!
//! Invariant: for every stored object, every index maps exactly the values
//! computed from that object (once, from its raw JSON, at insert) to its key, and
//! to no other key; all of this changes under one write lock, so readers never see
//! an object without its index entries or the reverse.

#![warn(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::value::RawValue;
use wasm_informer_selector::LabelSelector as Selector;

use crate::cache_view::CacheError;
use crate::object::ObjectRef;
use crate::pack::PackStats;

/// Name of the built-in index on `metadata.namespace`.
pub const NAMESPACE_INDEX: &str = "namespace";

/// A custom index: a name and the field path whose values it indexes.
///
/// Paths are dotted: `spec.nodeName`, `metadata.labels.app` (everything after
/// `metadata.labels.` is the label key, dots included),
/// `metadata.annotations.KEY`, `metadata.ownerReferences.uid` (arrays are walked
/// element by element). String, number and boolean leaves are indexed as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// Index name used in by-index queries.
    pub name: String,
    /// Dotted field path.
    pub path: String,
}

impl IndexSpec {
    /// A spec from a name and a path.
    pub fn new(name: impl Into<String>, path: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            path: path.into(),
        }
    }
}

/// Why an index definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// The name is empty or already taken by a different definition.
    #[error("index {name:?}: {reason}")]
    BadName {
        /// The index name.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The path is empty or has an empty segment.
    #[error("index {name:?}: invalid field path {path:?}: {reason}")]
    BadPath {
        /// The index name.
        name: String,
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

#[derive(Debug, Clone)]
enum FieldPath {
    Namespace,
    Label(String),
    Annotation(String),
    OwnerUid,
    Json(Vec<String>),
}

impl FieldPath {
    fn parse(spec: &IndexSpec) -> Result<Self, IndexError> {
        let bad = |reason| IndexError::BadPath {
            name: spec.name.clone(),
            path: spec.path.clone(),
            reason,
        };
        let p = spec.path.trim();
        if p.is_empty() {
            return Err(bad("empty path"));
        }
        if let Some(k) = p.strip_prefix("metadata.labels.") {
            return if k.is_empty() {
                Err(bad("empty label key"))
            } else {
                Ok(Self::Label(k.into()))
            };
        }
        if let Some(k) = p.strip_prefix("metadata.annotations.") {
            return if k.is_empty() {
                Err(bad("empty annotation key"))
            } else {
                Ok(Self::Annotation(k.into()))
            };
        }
        match p {
            "metadata.namespace" => return Ok(Self::Namespace),
            "metadata.ownerReferences.uid" => return Ok(Self::OwnerUid),
            _ => {}
        }
        let segs: Vec<String> = p.split('.').map(str::to_string).collect();
        if segs.iter().any(String::is_empty) {
            return Err(bad("empty path segment"));
        }
        Ok(Self::Json(segs))
    }

    fn values(&self, obj: &crate::object::Object) -> Vec<String> {
        match self {
            Self::Namespace => obj.meta.namespace.iter().cloned().collect(),
            Self::Label(k) => obj
                .meta
                .labels
                .get(k)
                .map(str::to_string)
                .into_iter()
                .collect(),
            Self::Annotation(k) => obj
                .meta
                .annotations
                .get(k)
                .map(str::to_string)
                .into_iter()
                .collect(),
            Self::OwnerUid => obj
                .meta
                .owner_uids
                .iter()
                .filter(|u| !u.is_empty())
                .cloned()
                .collect(),
            Self::Json(segs) => {
                let mut out = Vec::new();
                json_values(&obj.json(), segs, &mut out);
                out.sort();
                out.dedup();
                out
            }
        }
    }
}

/// Collects the leaf values at `path` in `raw`, walking arrays element-wise.
/// Only the objects along the path are parsed, as maps of raw values.
fn json_values(raw: &str, path: &[String], out: &mut Vec<String>) {
    let t = raw.trim_start();
    match t.as_bytes().first() {
        Some(b'{') => {
            let Some((head, rest)) = path.split_first() else {
                return;
            };
            let Ok(map) = serde_json::from_str::<HashMap<String, &RawValue>>(t) else {
                return;
            };
            if let Some(v) = map.get(head) {
                json_values(v.get(), rest, out);
            }
        }
        Some(b'[') => {
            let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(t) else {
                return;
            };
            for v in items {
                json_values(v.get(), path, out);
            }
        }
        Some(_) if path.is_empty() => match serde_json::from_str::<serde_json::Value>(t) {
            Ok(serde_json::Value::String(s)) => out.push(s),
            Ok(serde_json::Value::Number(n)) => out.push(n.to_string()),
            Ok(serde_json::Value::Bool(b)) => out.push(b.to_string()),
            _ => {}
        },
        _ => {}
    }
}

struct Entry {
    obj: ObjectRef,
    /// Values per custom index, in the order of `Store::custom`.
    values: Vec<Vec<String>>,
}

struct CustomIndex {
    spec: IndexSpec,
    path: FieldPath,
    map: HashMap<String, HashSet<Arc<str>>>,
}

#[derive(Default)]
struct Store {
    items: HashMap<Arc<str>, Entry>,
    by_namespace: HashMap<String, HashSet<Arc<str>>>,
    custom: Vec<CustomIndex>,
    /// What the compactor has to pack (see [`crate::pack`]).
    unpacked: Unpacked,
    /// Totals over the stored bodies.
    pack: PackStats,
}

/// Keys whose stored object is text, for the compactor: kept only once one
/// runs, and bounded: past the bound the list is dropped and the next take
/// returns every key.
#[derive(Default)]
struct Unpacked {
    tracked: bool,
    keys: Vec<Arc<str>>,
    overflowed: bool,
}

impl Store {
    /// Counts `obj` into (`add`) or out of the body totals.
    fn count(&mut self, obj: &ObjectRef, add: bool) {
        let sign = |n: usize| if add { n as i64 } else { -(n as i64) };
        let p = &mut self.pack;
        p.packed_objects = p
            .packed_objects
            .saturating_add_signed(sign(usize::from(obj.is_packed())));
        p.body_bytes = p.body_bytes.saturating_add_signed(sign(obj.stored_len()));
        p.text_bytes = p.text_bytes.saturating_add_signed(sign(obj.json_len()));
    }

    /// Notes a newly stored object for the compactor.
    fn note_unpacked(&mut self, key: &Arc<str>, obj: &ObjectRef) {
        let u = &mut self.unpacked;
        if !u.tracked || obj.is_packed() || u.overflowed {
            return;
        }
        if u.keys.len() > self.items.len() + 1024 {
            u.keys = Vec::new();
            u.overflowed = true;
        } else {
            u.keys.push(key.clone());
        }
    }

    fn unindex(&mut self, key: &Arc<str>, e: &Entry) {
        if let Some(ns) = &e.obj.meta.namespace {
            remove_from(&mut self.by_namespace, ns, key);
        }
        for (idx, vals) in self.custom.iter_mut().zip(&e.values) {
            for v in vals {
                remove_from(&mut idx.map, v, key);
            }
        }
    }

    fn index(&mut self, key: &Arc<str>, e: &Entry) {
        if let Some(ns) = &e.obj.meta.namespace {
            self.by_namespace
                .entry(ns.clone())
                .or_default()
                .insert(key.clone());
        }
        for (idx, vals) in self.custom.iter_mut().zip(&e.values) {
            for v in vals {
                idx.map.entry(v.clone()).or_default().insert(key.clone());
            }
        }
    }

    fn values_for(&self, obj: &crate::object::Object) -> Vec<Vec<String>> {
        self.custom.iter().map(|c| c.path.values(obj)).collect()
    }
}

fn remove_from(map: &mut HashMap<String, HashSet<Arc<str>>>, value: &str, key: &Arc<str>) {
    if let Some(set) = map.get_mut(value) {
        set.remove(key);
        if set.is_empty() {
            map.remove(value);
        }
    }
}

/// Thread-safe store of one resource's objects.
pub struct Indexer {
    inner: RwLock<Store>,
}

impl Default for Indexer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Indexer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexer").field("len", &self.len()).finish()
    }
}

impl Indexer {
    /// An empty indexer with only the namespace index.
    pub fn new() -> Self {
        Self {
            inner: RwLock::new(Store::default()),
        }
    }

    /// Adds a custom index and indexes every stored object by it. Adding the same
    /// definition twice is a no-op; reusing a name for another path is an error.
    pub fn add_index(&self, spec: IndexSpec) -> Result<(), IndexError> {
        if spec.name.is_empty() || spec.name == NAMESPACE_INDEX {
            return Err(IndexError::BadName {
                name: spec.name,
                reason: "empty or reserved name",
            });
        }
        let path = FieldPath::parse(&spec)?;
        let mut s = self.inner.write();
        if let Some(existing) = s.custom.iter().find(|c| c.spec.name == spec.name) {
            return if existing.spec.path == spec.path {
                Ok(())
            } else {
                Err(IndexError::BadName {
                    name: spec.name,
                    reason: "already defined with a different path",
                })
            };
        }
        let mut map: HashMap<String, HashSet<Arc<str>>> = HashMap::new();
        let store = &mut *s;
        for (k, e) in store.items.iter_mut() {
            let vals = path.values(&e.obj);
            for v in &vals {
                map.entry(v.clone()).or_default().insert(k.clone());
            }
            e.values.push(vals);
        }
        store.custom.push(CustomIndex { spec, path, map });
        Ok(())
    }

    /// Names of the custom indexes (the namespace index is always present too).
    pub fn index_names(&self) -> Vec<String> {
        self.inner
            .read()
            .custom
            .iter()
            .map(|c| c.spec.name.clone())
            .collect()
    }

    /// Inserts or replaces the object under `key`; returns the previous one.
    pub fn upsert(&self, key: &Arc<str>, obj: ObjectRef) -> Option<ObjectRef> {
        let mut s = self.inner.write();
        let values = s.values_for(&obj);
        let entry = Entry { obj, values };
        let old = s.items.remove(key);
        if let Some(old) = &old {
            s.unindex(key, old);
        }
        s.index(key, &entry);
        if let Some(old) = &old {
            s.count(&old.obj, false);
        }
        s.count(&entry.obj, true);
        s.note_unpacked(key, &entry.obj);
        s.items.insert(key.clone(), entry);
        old.map(|e| e.obj)
    }

    /// Starts listing newly stored text objects for [`Indexer::take_unpacked`]
    /// (a [`crate::pack::Compactor`] calls it); every object stored so far is
    /// listed too.
    pub fn track_unpacked(&self) {
        let mut s = self.inner.write();
        s.unpacked.tracked = true;
        s.unpacked.overflowed = true;
    }

    /// The keys stored as text since the last call (possibly repeated, or
    /// since gone), or every key when the list outgrew its bound.
    pub fn take_unpacked(&self) -> Vec<Arc<str>> {
        let mut s = self.inner.write();
        if std::mem::take(&mut s.unpacked.overflowed) {
            s.unpacked.keys = Vec::new();
            return s.items.keys().cloned().collect();
        }
        std::mem::take(&mut s.unpacked.keys)
    }

    /// Replaces the object under `key` by `new` only if the cache still holds
    /// `old` itself (the same `Arc`); `new` must carry the same metadata and
    /// JSON (a packed copy), so no index changes. Returns whether it did.
    pub fn replace_same(&self, key: &str, old: &ObjectRef, new: ObjectRef) -> bool {
        debug_assert!(old.meta == new.meta);
        let mut s = self.inner.write();
        let Some(e) = s.items.get_mut(key) else {
            return false;
        };
        if !Arc::ptr_eq(&e.obj, old) {
            return false;
        }
        let prev = std::mem::replace(&mut e.obj, new.clone());
        s.count(&prev, false);
        s.count(&new, true);
        true
    }

    /// How many stored bodies are packed, and the bytes they hold against
    /// their text.
    pub fn pack_stats(&self) -> PackStats {
        self.inner.read().pack.clone()
    }

    /// Removes `key`; returns the object it held.
    pub fn remove(&self, key: &str) -> Option<ObjectRef> {
        let mut s = self.inner.write();
        let (k, e) = s.items.remove_entry(key)?;
        s.unindex(&k, &e);
        s.count(&e.obj, false);
        Some(e.obj)
    }

    /// The object under `key` (O(1)).
    pub fn get(&self, key: &str) -> Option<ObjectRef> {
        self.inner.read().items.get(key).map(|e| e.obj.clone())
    }

    /// The object under `key`, deserialized as `K` (a k8s-openapi type, or
    /// any serde type). `None` when the key is not cached.
    pub fn get_as<K: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Option<Result<K, serde_json::Error>> {
        self.get(key).map(|o| o.parse())
    }

    /// Objects in `namespace` (or all), matching `selector` if given,
    /// deserialized as `K`. Fails on the first object that does not fit `K`.
    pub fn list_as<K: serde::de::DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        selector: Option<&Selector>,
    ) -> Result<Vec<K>, serde_json::Error> {
        self.list(namespace, selector)
            .iter()
            .map(|o| o.parse())
            .collect()
    }

    /// Whether `key` is stored.
    pub fn contains(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All keys.
    pub fn keys(&self) -> Vec<Arc<str>> {
        self.inner.read().items.keys().cloned().collect()
    }

    /// All objects: a consistent snapshot taken under one read lock.
    pub fn snapshot(&self) -> Vec<ObjectRef> {
        self.inner
            .read()
            .items
            .values()
            .map(|e| e.obj.clone())
            .collect()
    }

    /// All (key, object) pairs, consistent as [`Indexer::snapshot`].
    pub fn snapshot_entries(&self) -> Vec<(Arc<str>, ObjectRef)> {
        self.inner
            .read()
            .items
            .iter()
            .map(|(k, e)| (k.clone(), e.obj.clone()))
            .collect()
    }

    /// Objects in `namespace` (or all), matching `selector` if given.
    pub fn list(&self, namespace: Option<&str>, selector: Option<&Selector>) -> Vec<ObjectRef> {
        let s = self.inner.read();
        let matches = |o: &ObjectRef| selector.is_none_or(|sel| sel.matches(&o.meta.labels));
        match namespace {
            Some(ns) => s
                .by_namespace
                .get(ns)
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| s.items.get(k))
                        .map(|e| &e.obj)
                        .filter(|o| matches(o))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            None => s
                .items
                .values()
                .map(|e| &e.obj)
                .filter(|o| matches(o))
                .cloned()
                .collect(),
        }
    }

    /// Like [`Indexer::list`], parsing the selector text (full Kubernetes syntax).
    pub fn list_selector_str(
        &self,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        let sel = match selector.map(str::trim).filter(|s| !s.is_empty()) {
            Some(text) => Some(
                Selector::parse(text)
                    .map_err(|e| CacheError::InvalidSelector(format!("{text:?}: {e}")))?,
            ),
            None => None,
        };
        Ok(self.list(namespace, sel.as_ref()))
    }

    /// Objects whose value for index `name` equals `value`.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<ObjectRef>, CacheError> {
        let s = self.inner.read();
        let keys = if name == NAMESPACE_INDEX {
            s.by_namespace.get(value)
        } else {
            s.custom
                .iter()
                .find(|c| c.spec.name == name)
                .ok_or_else(|| CacheError::UnknownIndex(name.to_string()))?
                .map
                .get(value)
        };
        Ok(keys
            .map(|ks| {
                ks.iter()
                    .filter_map(|k| s.items.get(k))
                    .map(|e| e.obj.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Total number of (value, key) entries across all indexes, for tests and
    /// metrics that check the index stays in step with the store.
    pub fn index_entry_count(&self) -> usize {
        let s = self.inner.read();
        s.by_namespace.values().map(HashSet::len).sum::<usize>()
            + s.custom
                .iter()
                .map(|c| c.map.values().map(HashSet::len).sum::<usize>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Object, Transform};

    fn pod(ns: &str, name: &str, node: &str, app: &str, owner: &str) -> ObjectRef {
        let raw = format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"{app}","app.kubernetes.io/name":"{app}"}},"ownerReferences":[{{"uid":"{owner}"}}]}},"spec":{{"nodeName":"{node}","containers":[{{"name":"c1","image":"img-{app}"}},{{"name":"c2","image":"side"}}]}}}}"#
        );
        Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
    }

    fn names(v: Vec<ObjectRef>) -> Vec<String> {
        let mut n: Vec<String> = v.iter().map(|o| o.key()).collect();
        n.sort();
        n
    }

    fn put(ix: &Indexer, o: ObjectRef) {
        ix.upsert(&Arc::from(o.key()), o);
    }

    #[test]
    fn get_list_namespace_and_custom_indexes() {
        let ix = Indexer::new();
        ix.add_index(IndexSpec::new("node", "spec.nodeName"))
            .unwrap();
        ix.add_index(IndexSpec::new(
            "app",
            "metadata.labels.app.kubernetes.io/name",
        ))
        .unwrap();
        ix.add_index(IndexSpec::new("owner", "metadata.ownerReferences.uid"))
            .unwrap();
        ix.add_index(IndexSpec::new("image", "spec.containers.image"))
            .unwrap();
        put(&ix, pod("a", "p1", "n1", "web", "rs1"));
        put(&ix, pod("a", "p2", "n2", "web", "rs1"));
        put(&ix, pod("b", "p3", "n1", "db", "rs2"));
        assert_eq!(ix.get("a/p1").unwrap().meta.name, "p1");
        assert_eq!(names(ix.list(Some("a"), None)), vec!["a/p1", "a/p2"]);
        assert_eq!(
            names(ix.by_index("node", "n1").unwrap()),
            vec!["a/p1", "b/p3"]
        );
        assert_eq!(names(ix.by_index("app", "db").unwrap()), vec!["b/p3"]);
        assert_eq!(
            names(ix.by_index("owner", "rs1").unwrap()),
            vec!["a/p1", "a/p2"]
        );
        assert_eq!(
            names(ix.by_index("image", "side").unwrap()),
            vec!["a/p1", "a/p2", "b/p3"]
        );
        assert_eq!(
            names(ix.by_index(NAMESPACE_INDEX, "b").unwrap()),
            vec!["b/p3"]
        );
        assert_eq!(
            ix.by_index("nope", "x"),
            Err(CacheError::UnknownIndex("nope".into()))
        );
    }

    #[test]
    fn update_moves_index_entries_and_remove_clears_them() {
        let ix = Indexer::new();
        ix.add_index(IndexSpec::new("node", "spec.nodeName"))
            .unwrap();
        put(&ix, pod("a", "p1", "n1", "web", "o"));
        let before = ix.index_entry_count();
        let old = ix.upsert(&Arc::from("a/p1"), pod("a", "p1", "n2", "web", "o"));
        assert!(old.unwrap().json().contains("\"n1\""));
        assert!(ix.by_index("node", "n1").unwrap().is_empty());
        assert_eq!(names(ix.by_index("node", "n2").unwrap()), vec!["a/p1"]);
        assert_eq!(ix.index_entry_count(), before);
        assert!(ix.remove("a/p1").is_some());
        assert_eq!(ix.index_entry_count(), 0);
        assert!(ix.is_empty());
    }

    #[test]
    fn index_added_late_covers_existing_objects() {
        let ix = Indexer::new();
        put(&ix, pod("a", "p1", "n1", "web", "o"));
        ix.add_index(IndexSpec::new("node", "spec.nodeName"))
            .unwrap();
        assert_eq!(names(ix.by_index("node", "n1").unwrap()), vec!["a/p1"]);
        assert!(ix
            .add_index(IndexSpec::new("node", "spec.nodeName"))
            .is_ok());
        assert!(matches!(
            ix.add_index(IndexSpec::new("node", "spec.other")),
            Err(IndexError::BadName { .. })
        ));
        assert!(matches!(
            ix.add_index(IndexSpec::new("x", "spec..a")),
            Err(IndexError::BadPath { .. })
        ));
    }

    #[test]
    fn list_by_label_selector() {
        let ix = Indexer::new();
        put(&ix, pod("a", "p1", "n1", "web", "o"));
        put(&ix, pod("a", "p2", "n1", "db", "o"));
        put(&ix, pod("b", "p3", "n1", "web", "o"));
        assert_eq!(
            names(ix.list_selector_str(None, Some("app=web")).unwrap()),
            vec!["a/p1", "b/p3"]
        );
        assert_eq!(
            names(
                ix.list_selector_str(Some("a"), Some("app in (web,db)"))
                    .unwrap()
            ),
            vec!["a/p1", "a/p2"]
        );
        assert_eq!(
            names(ix.list_selector_str(None, Some("app notin (web)")).unwrap()),
            vec!["a/p2"]
        );
        assert_eq!(
            names(ix.list_selector_str(None, Some("!tier")).unwrap()).len(),
            3
        );
        assert!(matches!(
            ix.list_selector_str(None, Some("app in (")),
            Err(CacheError::InvalidSelector(_))
        ));
    }
}
