//! Cached Kubernetes objects: the raw JSON plus the few parsed fields the host needs.
//!
//! Invariant: an [`Object`] is immutable once built and is shared by [`std::sync::Arc`]
//! between the Indexer, every listener queue and every event. No `serde_json::Value`
//! tree is kept per object; the JSON body is stored as the text that arrived, with
//! only what the transform removes cut out (see [`crate::decode`]), and parsed
//! metadata sits beside it.

use std::borrow::Cow;
use std::sync::Arc;

use crate::pack::Body;
use crate::str_map::StrMap;

/// A shared, immutable cached object.
pub type ObjectRef = Arc<Object>;

/// What the host does to an object before caching it.
#[derive(Debug, Clone)]
pub struct Transform {
    /// Drop `metadata.managedFields` (server-side apply bookkeeping, often half the
    /// object). On by default, as in client-go's recommended transform.
    pub strip_managed_fields: bool,
    /// Pack the cached JSON in the background, with a zstd dictionary trained
    /// on the resource's own objects (see [`crate::pack`]). On by default: it
    /// cuts the cache several times, costs idle CPU only, and about 3 µs per
    /// read of a packed object's JSON.
    pub pack: bool,
}

impl Default for Transform {
    fn default() -> Self {
        Self {
            strip_managed_fields: true,
            pack: true,
        }
    }
}

/// The parsed part of `metadata`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectMeta {
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.generation`, when the object has one.
    pub generation: Option<i64>,
    /// `metadata.labels`.
    pub labels: StrMap,
    /// `metadata.annotations`.
    pub annotations: StrMap,
    /// `metadata.creationTimestamp`, as the server wrote it (RFC 3339).
    pub creation_timestamp: Option<String>,
    /// `metadata.deletionTimestamp`: set while finalizers hold a deleted object.
    pub deletion_timestamp: Option<String>,
    /// The `uid` of each of `metadata.ownerReferences`.
    pub owner_uids: Vec<String>,
    /// The owner reference marked `controller: true`, if any.
    pub controller: Option<ControllerRef>,
}

/// The controlling owner of an object (its `ownerReferences` entry with
/// `controller: true`): what a controller that manages the owner watches the
/// object for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerRef {
    /// `apiVersion` of the owner, for example `apps/v1`.
    pub api_version: String,
    /// `kind` of the owner, for example `ReplicaSet`.
    pub kind: String,
    /// `name` of the owner (in the object's namespace, or cluster-scoped).
    pub name: String,
    /// `uid` of the owner.
    pub uid: String,
}

impl ControllerRef {
    /// The API group of the owner (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _version)| group)
    }
}

/// One cached object.
#[derive(Debug)]
pub struct Object {
    /// The parsed part of `metadata`.
    pub meta: ObjectMeta,
    /// The JSON of the whole object after the transform, as text or packed
    /// against its resource's dictionary (see [`crate::pack`]).
    body: Body,
}

impl PartialEq for Object {
    /// Objects are equal when their metadata and their JSON text are, however
    /// each body is stored.
    fn eq(&self, other: &Self) -> bool {
        self.meta == other.meta && self.json() == other.json()
    }
}

/// Why bytes could not become an [`Object`].
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The bytes are not a JSON object, or a metadata field has the wrong type.
    #[error("object is not valid JSON: {0}")]
    Json(String),
    /// `metadata.name` is missing.
    #[error("object has no metadata.name")]
    MissingName,
}

impl Object {
    /// Parses one object from its JSON, applying `transform`, in one pass
    /// that decodes only the metadata (see [`crate::decode`]).
    ///
    /// ```
    /// use kube_informer::object::{Object, Transform};
    /// let raw = br#"{"kind":"Pod","metadata":{"name":"a","namespace":"ns","managedFields":[{}]}}"#;
    /// let obj = Object::from_json(raw, &Transform::default()).unwrap();
    /// assert_eq!(obj.key(), "ns/a");
    /// assert!(!obj.json().contains("managedFields"));
    /// ```
    pub fn from_json(raw: &[u8], transform: &Transform) -> Result<Object, ObjectError> {
        let text = std::str::from_utf8(raw).map_err(|e| ObjectError::Json(e.to_string()))?;
        Self::from_json_str(text, transform)
    }

    /// [`Object::from_json`] for text already known to be UTF-8.
    pub fn from_json_str(text: &str, transform: &Transform) -> Result<Object, ObjectError> {
        crate::decode::object(text, transform, crate::decode::Checked::No)
    }

    /// An object that a validating pass over its watch line or list page
    /// already read as JSON.
    pub(crate) fn from_checked_json(
        text: &str,
        transform: &Transform,
    ) -> Result<Object, ObjectError> {
        crate::decode::object(text, transform, crate::decode::Checked::Yes)
    }

    /// An object from metadata already parsed and the JSON it came from.
    pub fn new(meta: ObjectMeta, json: Box<str>) -> Object {
        Object {
            meta,
            body: Body::Text(json),
        }
    }

    /// The object's JSON after the transform, exactly as it would be without
    /// packing: borrowed when the body is text, unpacked (one copy) when it
    /// is packed.
    ///
    /// ```
    /// use kube_informer::object::{Object, Transform};
    /// let raw = br#"{"metadata":{"name":"a"},"spec":{"x":1}}"#;
    /// let obj = Object::from_json(raw, &Transform::default()).unwrap();
    /// assert_eq!(obj.json(), r#"{"metadata":{"name":"a"},"spec":{"x":1}}"#);
    /// ```
    pub fn json(&self) -> Cow<'_, str> {
        self.body.text()
    }

    /// The length of [`Object::json`] in bytes, without unpacking it.
    pub fn json_len(&self) -> usize {
        self.body.text_len()
    }

    /// Bytes the body keeps on the heap: the text's length, or the packed
    /// length when it is packed.
    pub fn stored_len(&self) -> usize {
        self.body.stored_len()
    }

    /// Whether the body is packed against a dictionary.
    pub fn is_packed(&self) -> bool {
        matches!(self.body, Body::Packed(_))
    }

    /// An object with a body already made (a packed copy, see [`crate::pack`]).
    pub(crate) fn with_body(meta: ObjectMeta, body: Body) -> Object {
        Object { meta, body }
    }

    /// The cache key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        object_key(self.meta.namespace.as_deref(), &self.meta.name)
    }

    /// Deserializes the cached JSON into a typed value, for example a
    /// k8s-openapi `Pod`. This parses on every call: the cache keeps only the
    /// compact JSON and the parsed metadata (see the crate's "Memory usage").
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kube_informer::object::{Object, Transform};
    /// let raw = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns"},"spec":{"nodeName":"n1","containers":[]}}"#;
    /// let pod: Pod = Object::from_json(raw, &Transform::default()).unwrap().parse().unwrap();
    /// assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("n1"));
    /// ```
    pub fn parse<K: serde::de::DeserializeOwned>(&self) -> Result<K, serde_json::Error> {
        serde_json::from_str(&self.json())
    }
}

/// Builds a cache key from its parts.
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_metadata_and_strips_managed_fields() {
        let raw = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"7","generation":2,"labels":{"app":"web"},"ownerReferences":[{"uid":"o1"}],"managedFields":[{"manager":"x"}]},"spec":{"nodeName":"n1"}}"#;
        let o = Object::from_json(raw, &Transform::default()).unwrap();
        assert_eq!(o.key(), "ns/p");
        assert_eq!(o.meta.uid, "u1");
        assert_eq!(o.meta.resource_version, "7");
        assert_eq!(o.meta.generation, Some(2));
        assert_eq!(o.meta.labels.get("app"), Some("web"));
        assert_eq!(o.meta.owner_uids, vec!["o1".to_string()]);
        assert!(!o.json().contains("managedFields"));
        let v: serde_json::Value = serde_json::from_str(&o.json()).unwrap();
        assert_eq!(v["spec"]["nodeName"], "n1");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
    }

    #[test]
    fn keeps_managed_fields_when_asked() {
        let raw = br#"{"metadata":{"name":"c","managedFields":[{"manager":"x"}]}}"#;
        let o = Object::from_json(
            raw,
            &Transform {
                strip_managed_fields: false,
                ..Transform::default()
            },
        )
        .unwrap();
        assert_eq!(o.key(), "c");
        assert!(o.json().contains("managedFields"));
    }

    #[test]
    fn rejects_objects_without_name() {
        assert!(matches!(
            Object::from_json(br#"{"metadata":{}}"#, &Transform::default()),
            Err(ObjectError::MissingName)
        ));
    }
}
