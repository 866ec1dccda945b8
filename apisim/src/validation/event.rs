//! Events, as `pkg/apis/core/validation/events.go` checks them (`ValidateEventCreate`,
//! `ValidateEventUpdate`, `legacyValidateEvent`, `validateV1EventSeries`) on the stored core
//! form, whichever API the request came through: the legacy rules always, the strict ones
//! (metadata, `eventTime`, `type`, no deprecated fields, immutable fields) for events.k8s.io/v1.
//!
//! Invariant: field paths are those of the internal (core) Event, as the apiserver reports them
//! for both APIs: `message` for events.k8s.io's `note`, `involvedObject` for `regarding`,
//! `reportingController` for core's `reportingComponent`, `source` for `deprecatedSource`.

use serde_json::Value;

use super::field::{self, Bad, ErrorList};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names;

/// `ReportingInstanceLengthLimit`, `ActionLengthLimit`, `ReasonLengthLimit`.
const SHORT_LIMIT: usize = 128;
/// `NoteLengthLimit`.
pub const NOTE_LENGTH_LIMIT: usize = 1024;

fn st<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn is_zero_time(v: &Value) -> bool {
    v.as_str().is_none_or(str::is_empty)
}

fn limit(errs: &mut ErrorList, v: &str, path: &str, max: usize) {
    if v.len() > max {
        errs.push(field::invalid(
            path,
            Bad::str(""),
            format!("can have at most {max} characters"),
        ));
    }
}

/// `legacyValidateEvent`: the rules every Event meets.
fn legacy_validate_event(ev: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let ns = st(&ev["metadata"], "namespace");
    let involved_ns = st(&ev["involvedObject"], "namespace");
    let mismatch = |errs: &mut ErrorList| {
        errs.push(field::invalid(
            "involvedObject.namespace",
            Bad::str(involved_ns),
            "does not match event.namespace",
        ))
    };
    if is_zero_time(&ev["eventTime"]) {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                mismatch(&mut errs);
            }
        } else if ns != involved_ns {
            mismatch(&mut errs);
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            mismatch(&mut errs);
        }
        let controller = st(ev, "reportingComponent");
        if controller.is_empty() {
            errs.push(field::required("reportingController", ""));
        }
        for m in names::is_qualified_name(controller) {
            errs.push(field::invalid(
                "reportingController",
                Bad::str(controller),
                m,
            ));
        }
        for (k, path) in [
            ("reportingInstance", "reportingInstance"),
            ("action", "action"),
            ("reason", "reason"),
        ] {
            let v = st(ev, k);
            if v.is_empty() {
                errs.push(field::required(path, ""));
            }
            limit(&mut errs, v, path, SHORT_LIMIT);
        }
        limit(&mut errs, st(ev, "message"), "message", NOTE_LENGTH_LIMIT);
    }
    for m in names::is_dns1123_subdomain(ns) {
        errs.push(field::invalid("namespace", Bad::str(ns), m));
    }
    errs
}

/// `validateV1EventSeries`.
fn validate_series(ev: &Value) -> ErrorList {
    let mut errs = ErrorList::new();
    let series = &ev["series"];
    if series.is_object() {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            errs.push(field::invalid(
                "series.count",
                Bad::str(""),
                "should be at least 2",
            ));
        }
        if is_zero_time(&series["lastObservedTime"]) {
            errs.push(field::required("series.lastObservedTime", ""));
        }
    }
    errs
}

/// `ValidateEventCreate(event, requestVersion)`; `strict` for events.k8s.io/v1.
pub fn validate_event_create(ev: &Value, strict: bool) -> ErrorList {
    let mut errs = legacy_validate_event(ev);
    if !strict {
        return errs;
    }
    errs.extend(validate_object_meta(
        ev,
        true,
        &names::name_is_dns_subdomain,
    ));
    errs.extend(validate_series(ev));
    if is_zero_time(&ev["eventTime"]) {
        errs.push(field::required("eventTime", ""));
    }
    let ty = st(ev, "type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(field::invalid(
            "type",
            Bad::str(""),
            format!("has invalid value: {ty}"),
        ));
    }
    for k in ["firstTimestamp", "lastTimestamp"] {
        if !is_zero_time(&ev[k]) {
            errs.push(field::invalid(k, Bad::str(""), "needs to be unset"));
        }
    }
    if ev["count"].as_i64().unwrap_or(0) != 0 {
        errs.push(field::invalid("count", Bad::str(""), "needs to be unset"));
    }
    if !st(&ev["source"], "component").is_empty() || !st(&ev["source"], "host").is_empty() {
        errs.push(field::invalid("source", Bad::str(""), "needs to be unset"));
    }
    errs
}

/// `metav1.Time` / `MicroTime` `String()` (Go's `time.Time` layout, fraction trimmed).
fn go_time(v: &Value) -> String {
    let Some(t) = v
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return "0001-01-01 00:00:00 +0000 UTC".to_string();
    };
    let t = t.with_timezone(&chrono::Utc);
    let frac = t.format("%.9f").to_string();
    let frac = frac.trim_end_matches('0').trim_end_matches('.');
    format!("{}{frac} +0000 UTC", t.format("%Y-%m-%d %H:%M:%S"))
}

/// `%#v` of a `core.ObjectReference`.
fn go_object_reference(r: &Value) -> String {
    let q = |k: &str| field::go_quote(st(r, k));
    format!(
        "core.ObjectReference{{Kind:{}, Namespace:{}, Name:{}, UID:{}, APIVersion:{}, ResourceVersion:{}, FieldPath:{}}}",
        q("kind"),
        q("namespace"),
        q("name"),
        q("uid"),
        q("apiVersion"),
        q("resourceVersion"),
        q("fieldPath")
    )
}

/// `ValidateEventUpdate(new, old, requestVersion)`; `strict` for events.k8s.io/v1.
pub fn validate_event_update(new: &Value, old: &Value, strict: bool) -> ErrorList {
    let mut errs = legacy_validate_event(new);
    if !strict {
        return errs;
    }
    errs.extend(validate_object_meta_update(new, old));
    if new["series"] != old["series"] {
        errs.extend(validate_series(new));
    }
    let mut immutable = |k: &str, path: &str, show: &dyn Fn(&Value) -> Bad| {
        let norm = |v: &Value| if v.is_null() { Value::Null } else { v.clone() };
        if norm(&new[k]) != norm(&old[k]) {
            errs.push(field::invalid(
                path,
                show(&new[k]),
                super::meta::FIELD_IMMUTABLE,
            ));
        }
    };
    let text = |v: &Value| Bad::str(v.as_str().unwrap_or(""));
    let time = |v: &Value| Bad::Raw(go_time(v));
    let reference = |v: &Value| Bad::Raw(go_object_reference(v));
    immutable("involvedObject", "involvedObject", &reference);
    immutable("reason", "reason", &text);
    immutable("message", "message", &text);
    immutable("source", "source", &|v| {
        Bad::Raw(format!(
            "core.EventSource{{Component:{}, Host:{}}}",
            field::go_quote(st(v, "component")),
            field::go_quote(st(v, "host"))
        ))
    });
    immutable("firstTimestamp", "firstTimestamp", &time);
    immutable("lastTimestamp", "lastTimestamp", &time);
    immutable("count", "count", &|v| Bad::num(v.as_i64().unwrap_or(0)));
    immutable("reason", "reason", &text);
    immutable("type", "type", &text);
    immutable("eventTime", "eventTime", &time);
    immutable("action", "action", &text);
    immutable("related", "related", &|v| {
        if v.is_object() {
            Bad::Raw(go_object_reference(v))
        } else {
            Bad::Raw("null".into())
        }
    });
    immutable("reportingComponent", "reportingController", &text);
    immutable("reportingInstance", "reportingInstance", &text);
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn new_event() -> Value {
        json!({"metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "example.com/ctl",
            "reportingInstance": "i", "action": "Act", "reason": "Why", "type": "Normal",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}})
    }

    #[test]
    fn the_note_is_at_most_1024_bytes() {
        let mut e = new_event();
        e["message"] = json!("x".repeat(NOTE_LENGTH_LIMIT));
        assert!(validate_event_create(&e, true).is_empty());
        e["message"] = json!("x".repeat(NOTE_LENGTH_LIMIT + 1));
        assert_eq!(
            validate_event_create(&e, true)[0].message(),
            "message: Invalid value: \"\": can have at most 1024 characters"
        );
    }

    #[test]
    fn strict_rules_only_for_the_new_api() {
        let e = json!({"metadata": {"name": "e", "namespace": "default"}, "reason": "R",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}});
        assert!(validate_event_create(&e, false).is_empty());
        let msgs: Vec<String> = validate_event_create(&e, true)
            .iter()
            .map(|e| e.message())
            .collect();
        assert_eq!(
            msgs,
            vec![
                "eventTime: Required value",
                "type: Invalid value: \"\": has invalid value: "
            ]
        );
    }

    #[test]
    fn reporting_fields_are_required_with_an_event_time() {
        let mut e = new_event();
        e.as_object_mut().unwrap().remove("reportingComponent");
        let msgs: Vec<String> = validate_event_create(&e, true)
            .iter()
            .map(|e| e.message())
            .collect();
        assert_eq!(msgs[0], "reportingController: Required value");
        assert!(msgs[1]
            .starts_with("reportingController: Invalid value: \"\": name part must be non-empty"));
    }
}
