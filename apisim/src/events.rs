//! events.k8s.io/v1 Events as a view of core v1 Events: the field mapping of
//! `pkg/apis/events/v1/conversion.go` (`Convert_v1_Event_To_core_Event` and back) and its field
//! label conversion, so that one stored Event is served through both APIs.
//!
//! | events.k8s.io/v1 | core v1 |
//! |---|---|
//! | `regarding` | `involvedObject` |
//! | `note` | `message` |
//! | `reportingController` | `reportingComponent` |
//! | `deprecatedSource` | `source` |
//! | `deprecatedFirstTimestamp`, `deprecatedLastTimestamp`, `deprecatedCount` | `firstTimestamp`, `lastTimestamp`, `count` |
//! | `eventTime`, `series`, `reportingInstance`, `action`, `reason`, `related`, `type`, `metadata` | the same |
//!
//! Invariant: `to_core(from_core(e)) == e` for every core Event made only of these fields, so a
//! no-op write through events.k8s.io is a no-op on the stored Event; fields events.k8s.io/v1
//! does not have are dropped on the way in, as its decoder drops them.

use serde_json::{Map, Value};

/// (events.k8s.io/v1 name, core v1 name) of every field.
const FIELDS: [(&str, &str); 16] = [
    ("kind", "kind"),
    ("metadata", "metadata"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("note", "message"),
    ("type", "type"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Keeps the fields of the mapping, renamed from one API's names to the other's.
fn rename(v: &Value, api_version: &str, to_core: bool) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::from(api_version));
    for (events, core) in FIELDS {
        let (from, to) = if to_core {
            (events, core)
        } else {
            (core, events)
        };
        if let Some(x) = v.get(from) {
            out.insert(to.to_string(), x.clone());
        }
    }
    Value::Object(out)
}

/// An events.k8s.io/v1 Event in its stored (core v1) form.
pub fn to_core(v: Value) -> Value {
    rename(&v, "v1", true)
}

/// A stored (core v1) Event as events.k8s.io/v1 serves it.
pub fn from_core(v: &Value) -> Value {
    rename(v, "events.k8s.io/v1", false)
}

/// The core field label an events.k8s.io/v1 field selector label stands for (the
/// `AddFieldLabelConversionFunc` of events/v1); None when the label is not selectable.
pub fn core_field_label(label: &str) -> Option<&'static str> {
    Some(match label {
        "metadata.name" => "metadata.name",
        "metadata.namespace" => "metadata.namespace",
        "reason" => "reason",
        "type" => "type",
        "regarding.kind" => "involvedObject.kind",
        "regarding.namespace" => "involvedObject.namespace",
        "regarding.name" => "involvedObject.name",
        "regarding.uid" => "involvedObject.uid",
        "regarding.apiVersion" => "involvedObject.apiVersion",
        "regarding.resourceVersion" => "involvedObject.resourceVersion",
        "regarding.fieldPath" => "involvedObject.fieldPath",
        "reportingController" => "reportingComponent",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_mapping_round_trips() {
        let e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "ctl",
            "reportingInstance": "i", "action": "A", "reason": "R", "note": "n", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p"}, "deprecatedCount": 2,
            "deprecatedSource": {"component": "c"}, "message": "dropped"});
        let core = to_core(e.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "n");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["source"]["component"], "c");
        assert_eq!(core["count"], 2);
        let back = from_core(&core);
        assert_eq!(back["note"], "n");
        assert!(back.get("message").is_none());
        assert_eq!(to_core(back), core);
        assert_eq!(
            core_field_label("regarding.name"),
            Some("involvedObject.name")
        );
        assert_eq!(core_field_label("note"), None);
    }
}
