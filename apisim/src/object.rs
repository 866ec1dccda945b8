//! Stored objects: immutable serialized JSON plus the metadata the simulator filters on.
//!
//! Invariant: `json` is the exact body served for this object version, and `rv`, `namespace`,
//! `name`, `labels` and `fields` were extracted from that same JSON; a `StoredObject` is never
//! mutated after construction (new versions are new values).

use bytes::Bytes;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use wasm_informer_selector::{FieldSelector, LabelSelector};

use crate::resource::ResourceType;

/// One version of one object, as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    /// `metadata.resourceVersion` of this version.
    pub rv: u64,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Selectable fields beyond metadata.name/namespace (e.g. `spec.nodeName` for pods).
    pub fields: Vec<(&'static str, String)>,
    /// uids named by `metadata.ownerReferences` (the garbage collector's edges).
    pub owners: Vec<String>,
    /// The serialized object.
    pub json: Bytes,
}

/// Shared handle to a stored object version.
pub type ObjectRef = Arc<StoredObject>;

/// Store key of an object: `namespace/name`, or `name` when cluster-scoped.
pub fn key_of(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Field paths a field selector may use for `rt` (beyond `metadata.name` and `metadata.namespace`).
pub fn extra_selectable_fields(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => &["spec.nodeName", "status.phase"],
        ("", "secrets") => &["type"],
        ("", "events") => &[
            "reason",
            "type",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reportingComponent",
            "source",
        ],
        ("", "namespaces") => &["status.phase"],
        ("events.k8s.io", "events") => &[
            "reason",
            "type",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reportingController",
        ],
        _ => &[],
    }
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    cur.as_str()
}

/// The value of a selectable field. A core Event's `source` is `source.component`, else
/// `reportingComponent` (the event strategy's `ToSelectableFields`).
fn selectable_value(rt: &ResourceType, v: &Value, path: &str) -> String {
    if path == "source" && rt.group.is_empty() && rt.plural == "events" {
        return lookup(v, "source.component")
            .filter(|s| !s.is_empty())
            .or_else(|| lookup(v, "reportingComponent"))
            .unwrap_or("")
            .to_string();
    }
    lookup(v, path).unwrap_or("").to_string()
}

impl StoredObject {
    /// Builds a stored object from a complete value (metadata already set by the store).
    pub fn from_value(rt: &ResourceType, v: &Value) -> StoredObject {
        let meta = &v["metadata"];
        let labels = meta
            .get("labels")
            .and_then(|l| l.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = extra_selectable_fields(rt)
            .iter()
            .map(|f| (*f, selectable_value(rt, v, f)))
            .collect();
        StoredObject {
            rv: meta["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
            namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
            name: meta["name"].as_str().unwrap_or("").to_string(),
            uid: meta["uid"].as_str().unwrap_or("").to_string(),
            labels,
            fields,
            owners: meta["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect(),
            json: Bytes::from(serde_json::to_vec(v).expect("a JSON value serializes")),
        }
    }

    /// Parses the stored JSON back into a value.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored JSON is valid")
    }

    /// Store key (`namespace/name` or `name`).
    pub fn key(&self) -> String {
        key_of(&self.namespace, &self.name)
    }

    /// Value of a selectable field.
    pub fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => self
                .fields
                .iter()
                .find(|(k, _)| *k == path)
                .map(|(_, v)| v.as_str()),
        }
    }

    /// Whether this object passes both selectors.
    pub fn matches(&self, labels: &LabelSelector, fields: &FieldSelector) -> bool {
        labels.matches(&self.labels) && fields.matches(|p| self.field(p))
    }

    /// Whether this object is in `shard` (by its uid or namespace, KEP-5866).
    pub fn in_shard(&self, shard: &crate::shard::ShardSelector) -> bool {
        shard.matches(&self.uid, &self.namespace)
    }

    /// A copy of this version with `metadata.resourceVersion` rewritten (used for DELETED events,
    /// which carry the deletion's resourceVersion).
    pub fn with_rv(&self, rt: &ResourceType, rv: u64) -> StoredObject {
        let mut v = self.value();
        v["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        StoredObject::from_value(rt, &v)
    }
}
