//! Conversion of host objects and notifications into WIT records, at the
//! boundary of a call into a plugin.
//!
//! Invariant: this is the only place where a cached object is copied for a
//! plugin; everything upstream shares it by `Arc`.

use super::bindings::wit;
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::Object;
use kube_informer::str_map::StrMap;

fn kv(map: &StrMap) -> Vec<wit::KeyValue> {
    map.iter()
        .map(|(k, v)| wit::KeyValue {
            key: k.to_string(),
            value: v.to_string(),
        })
        .collect()
}

/// The WIT view of one cached object.
pub fn object_view(o: &Object) -> wit::ObjectView {
    let m = &o.meta;
    wit::ObjectView {
        meta: wit::ObjectMeta {
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            generation: m.generation,
            labels: kv(&m.labels),
            annotations: kv(&m.annotations),
            creation_timestamp: m.creation_timestamp.clone(),
            deletion_timestamp: m.deletion_timestamp.clone(),
            owner_uids: m.owner_uids.clone(),
        },
        json: o.json.to_string(),
    }
}

/// The WIT event kind.
pub fn event_kind(k: EventKind) -> wit::EventKind {
    match k {
        EventKind::Added => wit::EventKind::Added,
        EventKind::Updated => wit::EventKind::Updated,
        EventKind::Deleted => wit::EventKind::Deleted,
        EventKind::Synced => wit::EventKind::Synced,
    }
}

/// The WIT event for one notification.
pub fn event(n: &Notification) -> wit::Event {
    wit::Event {
        kind: event_kind(n.kind),
        resource: n.resource.to_string(),
        key: n.key.to_string(),
        object: object_view(&n.object),
        old_object: n.old.as_deref().map(object_view),
        is_in_initial_list: n.in_initial_list,
        final_state_unknown: n.final_state_unknown,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use kube_informer::object::Transform;

    #[test]
    fn event_carries_every_field() {
        let o = Arc::new(
            Object::from_json(
                br#"{"metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"3","labels":{"a":"b"},"annotations":{"x":"y"},"ownerReferences":[{"uid":"o"}]}}"#,
                &Transform::default(),
            )
            .unwrap(),
        );
        let n = Notification {
            kind: EventKind::Updated,
            resource: "v1/pods".into(),
            key: "ns/p".into(),
            object: o.clone(),
            old: Some(o.clone()),
            in_initial_list: true,
            final_state_unknown: false,
        };
        let e = event(&n);
        assert_eq!(e.kind, wit::EventKind::Updated);
        assert_eq!(e.resource, "v1/pods");
        assert_eq!(e.key, "ns/p");
        assert_eq!(e.object.meta.namespace.as_deref(), Some("ns"));
        assert_eq!(e.object.meta.uid, "u");
        assert_eq!(e.object.meta.resource_version, "3");
        assert_eq!(e.object.meta.labels[0].key, "a");
        assert_eq!(e.object.meta.annotations[0].value, "y");
        assert_eq!(e.object.meta.owner_uids, vec!["o".to_string()]);
        assert_eq!(e.object.json, &*o.json);
        assert!(e.old_object.is_some());
        assert!(e.is_in_initial_list);
        assert!(!e.final_state_unknown);
    }
}

/// Borrowed mirrors of the WIT records: lowered straight from the cached
/// object into the guest's memory, with no intermediate host copy of any
/// string. They have exactly the WIT types of [`wit::Event`] and its parts
/// (checked once per instance by [`wasmtime::component::Func::typed`]).
pub mod borrowed {
    use wasmtime::component::{ComponentType, Lower};

    use super::wit;
    use kube_informer::notification::Notification;
    use kube_informer::object::Object;

    /// `key-value`.
    #[derive(ComponentType, Lower)]
    #[component(record)]
    pub struct KeyValue<'a> {
        key: &'a str,
        value: &'a str,
    }

    /// `object-meta`.
    #[derive(ComponentType, Lower)]
    #[component(record)]
    pub struct ObjectMeta<'a> {
        namespace: Option<&'a str>,
        name: &'a str,
        uid: &'a str,
        #[component(name = "resource-version")]
        resource_version: &'a str,
        generation: Option<i64>,
        labels: Vec<KeyValue<'a>>,
        annotations: Vec<KeyValue<'a>>,
        #[component(name = "creation-timestamp")]
        creation_timestamp: Option<&'a str>,
        #[component(name = "deletion-timestamp")]
        deletion_timestamp: Option<&'a str>,
        #[component(name = "owner-uids")]
        owner_uids: &'a [String],
    }

    /// `object-view`.
    #[derive(ComponentType, Lower)]
    #[component(record)]
    pub struct ObjectView<'a> {
        meta: ObjectMeta<'a>,
        json: &'a str,
    }

    /// `event`.
    #[derive(ComponentType, Lower)]
    #[component(record)]
    pub struct Event<'a> {
        kind: wit::EventKind,
        resource: &'a str,
        key: &'a str,
        object: ObjectView<'a>,
        #[component(name = "old-object")]
        old_object: Option<ObjectView<'a>>,
        #[component(name = "is-in-initial-list")]
        is_in_initial_list: bool,
        #[component(name = "final-state-unknown")]
        final_state_unknown: bool,
    }

    fn kv(map: &kube_informer::str_map::StrMap) -> Vec<KeyValue<'_>> {
        map.iter()
            .map(|(k, v)| KeyValue { key: k, value: v })
            .collect()
    }

    /// Borrows one cached object.
    pub fn object_view(o: &Object) -> ObjectView<'_> {
        let m = &o.meta;
        ObjectView {
            meta: ObjectMeta {
                namespace: m.namespace.as_deref(),
                name: &m.name,
                uid: &m.uid,
                resource_version: &m.resource_version,
                generation: m.generation,
                labels: kv(&m.labels),
                annotations: kv(&m.annotations),
                creation_timestamp: m.creation_timestamp.as_deref(),
                deletion_timestamp: m.deletion_timestamp.as_deref(),
                owner_uids: &m.owner_uids,
            },
            json: &o.json,
        }
    }

    /// Borrows one notification.
    pub fn event(n: &Notification) -> Event<'_> {
        Event {
            kind: super::event_kind(n.kind),
            resource: &n.resource,
            key: &n.key,
            object: object_view(&n.object),
            old_object: n.old.as_deref().map(object_view),
            is_in_initial_list: n.in_initial_list,
            final_state_unknown: n.final_state_unknown,
        }
    }
}
