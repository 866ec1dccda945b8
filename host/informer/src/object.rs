//! Cached Kubernetes objects: the raw JSON plus the few parsed fields the host needs.
//!
//! Invariant: an [`Object`] is immutable once built and is shared by [`std::sync::Arc`]
//! between the Indexer, every listener queue and every event. No `serde_json::Value`
//! tree is kept per object; the JSON body is stored as compact text (after the
//! transform) and parsed metadata sits beside it.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::str_map::{JsonStr, StrMap};

/// A shared, immutable cached object.
pub type ObjectRef = Arc<Object>;

/// What the host does to an object before caching it.
#[derive(Debug, Clone)]
pub struct Transform {
    /// Drop `metadata.managedFields` (server-side apply bookkeeping, often half the
    /// object). On by default, as in client-go's recommended transform.
    pub strip_managed_fields: bool,
}

impl Default for Transform {
    fn default() -> Self {
        Self {
            strip_managed_fields: true,
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
#[derive(Debug, PartialEq)]
pub struct Object {
    /// The parsed part of `metadata`.
    pub meta: ObjectMeta,
    /// Compact JSON of the whole object after the transform.
    pub json: Box<str>,
}

/// Why bytes could not become an [`Object`].
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The bytes are not a JSON object.
    #[error("object is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// `metadata.name` is missing.
    #[error("object has no metadata.name")]
    MissingName,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRef {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MetaIn {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    labels: Option<StrMap>,
    #[serde(default)]
    annotations: Option<StrMap>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerRef>>,
}

impl Object {
    /// Parses one object from its JSON, applying `transform`.
    ///
    /// ```
    /// use kube_informer::object::{Object, Transform};
    /// let raw = br#"{"kind":"Pod","metadata":{"name":"a","namespace":"ns","managedFields":[{}]}}"#;
    /// let obj = Object::from_json(raw, &Transform::default()).unwrap();
    /// assert_eq!(obj.key(), "ns/a");
    /// assert!(!obj.json.contains("managedFields"));
    /// ```
    pub fn from_json(raw: &[u8], transform: &Transform) -> Result<Object, ObjectError> {
        // Top level and metadata as maps of raw values: nothing below them is parsed.
        let fields = serde_json::from_slice::<RawFields>(raw)?.0;
        let mut meta_raw: Option<&RawValue> = None;
        let mut out = String::with_capacity(raw.len());
        out.push('{');
        let mut first = true;
        for (k, v) in fields {
            if k == "metadata" {
                meta_raw = Some(v);
                continue;
            }
            push_field(&mut out, &mut first, &k, v.get());
        }
        let meta_in: MetaIn;
        if let Some(meta_raw) = meta_raw {
            let meta_fields: RawFields = serde_json::from_str(meta_raw.get())?;
            let mut meta_out = String::with_capacity(meta_raw.get().len());
            meta_out.push('{');
            let mut mfirst = true;
            for (k, v) in &meta_fields.0 {
                if transform.strip_managed_fields && k == "managedFields" {
                    continue;
                }
                push_field(&mut meta_out, &mut mfirst, k, v.get());
            }
            meta_out.push('}');
            meta_in = serde_json::from_str(meta_raw.get())?;
            push_field(&mut out, &mut first, "metadata", &meta_out);
        } else {
            meta_in = MetaIn::default();
        }
        out.push('}');
        let name = meta_in.name.ok_or(ObjectError::MissingName)?;
        let owners = meta_in.owner_references.unwrap_or_default();
        let controller =
            owners
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| ControllerRef {
                    api_version: o.api_version.clone(),
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                    uid: o.uid.clone(),
                });
        Ok(Object {
            meta: ObjectMeta {
                namespace: meta_in.namespace.filter(|n| !n.is_empty()),
                name,
                uid: meta_in.uid.unwrap_or_default(),
                resource_version: meta_in.resource_version.unwrap_or_default(),
                generation: meta_in.generation,
                labels: meta_in.labels.unwrap_or_default(),
                annotations: meta_in.annotations.unwrap_or_default(),
                creation_timestamp: meta_in.creation_timestamp,
                deletion_timestamp: meta_in.deletion_timestamp,
                owner_uids: owners.into_iter().map(|o| o.uid).collect(),
                controller,
            },
            json: out.into_boxed_str(),
        })
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
        serde_json::from_str(&self.json)
    }
}

/// Builds a cache key from its parts.
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// A JSON object read as an ordered list of raw fields, borrowed from the
/// input: nothing is copied until the object's own text is written.
struct RawFields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = RawFields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Self::Value, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(8));
                while let Some((k, val)) = a.next_entry::<JsonStr<'a>, &'a RawValue>()? {
                    v.push((k.0, val));
                }
                Ok(RawFields(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn push_field(out: &mut String, first: &mut bool, key: &str, raw: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    if key
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        // Keys come from a JSON object, so re-encoding them cannot fail.
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
    }
    out.push(':');
    out.push_str(raw);
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
        assert!(!o.json.contains("managedFields"));
        let v: serde_json::Value = serde_json::from_str(&o.json).unwrap();
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
            },
        )
        .unwrap();
        assert_eq!(o.key(), "c");
        assert!(o.json.contains("managedFields"));
    }

    #[test]
    fn rejects_objects_without_name() {
        assert!(matches!(
            Object::from_json(br#"{"metadata":{}}"#, &Transform::default()),
            Err(ObjectError::MissingName)
        ));
    }
}
