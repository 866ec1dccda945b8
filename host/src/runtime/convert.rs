//! Conversion of host objects and notifications into WIT records, at the
//! boundary of a call into a plugin.
//!
//! Invariant: this is the only place where a cached object is copied for a
//! plugin; everything upstream shares it by `Arc`.

use super::bindings::wit;
use crate::notification::{EventKind, Notification};
use crate::object::Object;

fn kv(map: &std::collections::BTreeMap<String, String>) -> Vec<wit::KeyValue> {
    map.iter()
        .map(|(k, v)| wit::KeyValue {
            key: k.clone(),
            value: v.clone(),
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
    use crate::object::Transform;

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
