//! Server-side printing: `meta.k8s.io/v1` `Table` responses for clients that ask for them in
//! `Accept` (kubectl's human-readable `get`), with the columns the apiserver prints for the
//! built-in kinds and Name/Age for the rest.
//!
//! Invariant: a Table is only produced when the client's Accept header asks for `as=Table`; every
//! row carries the object's metadata (`PartialObjectMetadata`), and the cells line up with the
//! column definitions.

use serde_json::{json, Value};

use crate::resource::ResourceType;

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn col(name: &str, ty: &str, format: &str, priority: u8) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

/// Column definitions for `rt`.
pub fn columns(rt: &ResourceType) -> Vec<Value> {
    let name = col("Name", "string", "name", 0);
    let age = col("Age", "string", "", 0);
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => vec![
            name,
            col("Ready", "string", "", 0),
            col("Status", "string", "", 0),
            col("Restarts", "string", "", 0),
            age,
            col("IP", "string", "", 1),
            col("Node", "string", "", 1),
        ],
        ("apps", "deployments") => vec![
            name,
            col("Ready", "string", "", 0),
            col("Up-to-date", "integer", "", 0),
            col("Available", "integer", "", 0),
            age,
        ],
        ("", "namespaces") => vec![name, col("Status", "string", "", 0), age],
        ("", "configmaps") => vec![name, col("Data", "integer", "", 0), age],
        ("", "secrets") => vec![
            name,
            col("Type", "string", "", 0),
            col("Data", "integer", "", 0),
            age,
        ],
        ("", "events") | ("events.k8s.io", "events") => vec![
            col("Last Seen", "string", "", 0),
            col("Type", "string", "", 0),
            col("Reason", "string", "", 0),
            col("Object", "string", "", 0),
            col("Subobject", "string", "", 1),
            col("Source", "string", "", 1),
            col("Message", "string", "", 0),
            col("First Seen", "string", "", 1),
            col("Count", "string", "", 1),
            col("Name", "string", "name", 1),
        ],
        _ => vec![name, age],
    }
}

fn since(v: &Value, now: i64) -> Option<String> {
    v.as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human_duration(now - t.timestamp()))
}

/// The cells of an Event (`printEvent` of the apiserver's printers, wide), from its core form.
fn event_cells(ev: &Value, now: i64) -> Vec<Value> {
    let unknown = || "<unknown>".to_string();
    let first = since(&ev["firstTimestamp"], now)
        .or_else(|| since(&ev["eventTime"], now))
        .unwrap_or_else(unknown);
    let mut last = since(&ev["lastTimestamp"], now).unwrap_or_else(|| first.clone());
    let mut count = ev["count"].as_i64().unwrap_or(0);
    if ev["series"].is_object() {
        last = since(&ev["series"]["lastObservedTime"], now).unwrap_or_else(unknown);
        count = ev["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let o = &ev["involvedObject"];
    let kind = o["kind"].as_str().unwrap_or("").to_lowercase();
    let target = match o["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let first_non_empty = |a: &Value, b: &Value| {
        a.as_str()
            .filter(|s| !s.is_empty())
            .or(b.as_str())
            .unwrap_or("")
            .to_string()
    };
    let component = first_non_empty(&ev["source"]["component"], &ev["reportingComponent"]);
    let instance = first_non_empty(&ev["source"]["host"], &ev["reportingInstance"]);
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let s = |k: &str| json!(ev[k].as_str().unwrap_or(""));
    vec![
        json!(last),
        s("type"),
        s("reason"),
        json!(target),
        json!(o["fieldPath"].as_str().unwrap_or("")),
        json!(source),
        json!(ev["message"].as_str().unwrap_or("").trim()),
        json!(first),
        json!(count),
        json!(ev["metadata"]["name"]),
    ]
}

/// Kubernetes' human-readable duration ("45s", "3m20s", "5h", "12d").
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=599 => format!("{}m{}s", s / 60, s % 60),
        600..=10_799 => format!("{}m", s / 60),
        10_800..=28_799 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        28_800..=172_799 => format!("{}h", s / 3600),
        172_800..=691_199 => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn age(obj: &Value, now: i64) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human_duration(now - t.timestamp()))
        .unwrap_or_else(|| "<unknown>".to_string())
}

fn count(v: &Value) -> usize {
    v.as_object().map(|m| m.len()).unwrap_or(0)
}

/// The cells of one row.
pub fn cells(rt: &ResourceType, obj: &Value, now: i64) -> Vec<Value> {
    let name = json!(obj["metadata"]["name"]);
    let age = json!(age(obj, now));
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => {
            let statuses = obj["status"]["containerStatuses"].as_array();
            let total = obj["spec"]["containers"].as_array().map_or(0, |c| c.len());
            let ready = statuses.map_or(0, |s| {
                s.iter()
                    .filter(|c| c["ready"].as_bool() == Some(true))
                    .count()
            });
            let restarts: i64 = statuses.map_or(0, |s| {
                s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
            });
            let status = if obj["metadata"]["deletionTimestamp"].is_string() {
                "Terminating".to_string()
            } else {
                obj["status"]["phase"]
                    .as_str()
                    .unwrap_or("Unknown")
                    .to_string()
            };
            let or_none = |v: &Value| json!(v.as_str().unwrap_or("<none>"));
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                age,
                or_none(&obj["status"]["podIP"]),
                or_none(&obj["spec"]["nodeName"]),
            ]
        }
        ("apps", "deployments") => {
            let st = &obj["status"];
            let want = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            vec![
                name,
                json!(format!(
                    "{}/{want}",
                    st["readyReplicas"].as_i64().unwrap_or(0)
                )),
                json!(st["updatedReplicas"].as_i64().unwrap_or(0)),
                json!(st["availableReplicas"].as_i64().unwrap_or(0)),
                age,
            ]
        }
        ("", "namespaces") => {
            let phase = obj["status"]["phase"].as_str().unwrap_or("Active");
            vec![name, json!(phase), age]
        }
        ("", "configmaps") => vec![
            name,
            json!(count(&obj["data"]) + count(&obj["binaryData"])),
            age,
        ],
        ("", "secrets") => vec![
            name,
            json!(obj["type"].as_str().unwrap_or("Opaque")),
            json!(count(&obj["data"])),
            age,
        ],
        ("", "events") => event_cells(obj, now),
        ("events.k8s.io", "events") => event_cells(&crate::events::to_core(obj.clone()), now),
        _ => vec![name, age],
    }
}

/// A Table of `objects`, with list metadata (`resourceVersion`, `continue`, ...).
pub fn table(rt: &ResourceType, objects: &[Value], list_meta: Value) -> Value {
    let now = chrono::Utc::now().timestamp();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": cells(rt, o, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o["metadata"],
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(rt),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    #[test]
    fn accept_negotiation() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(""));
    }

    #[test]
    fn pod_row_lines_up_with_columns() {
        let r = Registry::with_builtins();
        let pods = r.get(r.find("", "v1", "pods").unwrap());
        let p = json!({"metadata":{"name":"p","creationTimestamp":"2026-01-01T00:00:00Z"},
            "spec":{"containers":[{},{}],"nodeName":"n1"},
            "status":{"phase":"Running","podIP":"10.0.0.1","containerStatuses":[{"ready":true,"restartCount":2},{"ready":false,"restartCount":1}]}});
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:03:20Z")
            .unwrap()
            .timestamp();
        let c = cells(&pods, &p, now);
        assert_eq!(c.len(), columns(&pods).len());
        assert_eq!(
            c,
            vec![
                json!("p"),
                json!("1/2"),
                json!("Running"),
                json!("3"),
                json!("3m20s"),
                json!("10.0.0.1"),
                json!("n1")
            ]
        );
        let t = table(&pods, &[p], json!({"resourceVersion":"5"}));
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "p");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn event_rows_are_the_apiservers_columns() {
        let r = Registry::with_builtins();
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:01:00Z")
            .unwrap()
            .timestamp();
        let ev = json!({"metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:30.000000Z",
            "regarding": {"kind": "Pod", "name": "web"}, "note": " started ", "reason": "Started",
            "type": "Normal", "reportingController": "ctl", "reportingInstance": "i-1"});
        let events = r.get(r.find("events.k8s.io", "v1", "events").unwrap());
        let c = cells(&events, &ev, now);
        assert_eq!(c.len(), columns(&events).len());
        assert_eq!(
            c,
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Started"),
                json!("pod/web"),
                json!(""),
                json!("ctl, i-1"),
                json!("started"),
                json!("30s"),
                json!(1),
                json!("e1")
            ]
        );
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86_400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86_400), "30d");
    }
}
