//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch
//! (approximated) and server-side apply.
//!
//! Invariant: a patch either applies completely or fails with a 4xx naming the patch type and the
//! reason; the current object is never partially modified.
//!
//! Strategic merge is approximated without OpenAPI schemas: maps merge recursively and `null`
//! deletes, as in a merge patch; lists whose field name is in [`merge_key`] (containers, volumes,
//! env, ports, conditions, ownerReferences, ...) merge element-wise by that key, and `finalizers`
//! merges as a set; every other list is replaced. The directives `$patch: replace|delete|merge`,
//! `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (order honoured for keyed lists)
//! and `$retainKeys` are understood. Server-side apply (field ownership, conflicts, removal of
//! fields no longer applied) lives in [`crate::managed`]; [`apply`] with [`PatchType::Apply`] is
//! only the merge step, a JSON merge of the configuration.

use serde_json::{Map, Value};

use crate::status::ApiError;

/// The patch types the simulator accepts, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (JSON bodies only)
    Apply,
}

impl PatchType {
    /// Resolves a Content-Type header value.
    pub fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            _ => Err(ApiError::unsupported_media_type(ct)),
        }
    }
}

/// Parses a patch body as JSON, naming the patch type on failure.
pub fn parse_body(pt: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let hint = if pt == PatchType::Apply {
            " (the simulator accepts apply configurations in JSON, as kubectl sends them)"
        } else {
            ""
        };
        ApiError::bad_request(format!("error decoding {pt:?} patch body: {e}{hint}"))
    })
}

/// Applies a patch to `target`.
pub fn apply(pt: PatchType, target: Value, patch: &Value) -> Result<Value, ApiError> {
    match pt {
        PatchType::Merge | PatchType::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(format!(
                    "{pt:?} patch must be a JSON object"
                )));
            }
            let mut t = target;
            json_patch::merge(&mut t, patch);
            Ok(t)
        }
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is malformed: {e}")))?;
            let mut t = target;
            json_patch::patch(&mut t, &p).map_err(|e| {
                ApiError::invalid("", "", format!("the JSON patch could not be applied: {e}"))
            })?;
            Ok(t)
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            }
            Ok(strategic_merge(target, patch, ""))
        }
    }
}

/// Merge key of a list field in the built-in types, by field name.
pub fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "volumeMounts"
        | "imagePullSecrets"
        | "containerStatuses"
        | "initContainerStatuses" => "name",
        "readinessGates" => "conditionType",
        "ports" => "containerPort",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "tolerations" => "key",
        "hostAliases" => "ip",
        "volumeDevices" => "devicePath",
        "topologySpreadConstraints" => "topologyKey",
        _ => return None,
    })
}

/// The merge key of the list `field` holding `items`. `ports` names two types: container ports
/// are keyed by `containerPort`, a Service's by `port` (as their `patchMergeKey`s).
pub fn list_merge_key<'a>(
    field: &str,
    items: impl IntoIterator<Item = &'a Value>,
) -> Option<&'static str> {
    match merge_key(field) {
        Some("containerPort") => {
            let (mut container, mut service) = (false, false);
            for i in items {
                container |= i.get("containerPort").is_some();
                service |= i.get("port").is_some();
            }
            Some(if service && !container {
                "port"
            } else {
                "containerPort"
            })
        }
        k => k,
    }
}

fn strategic_merge(target: Value, patch: &Value, _field: &str) -> Value {
    let Some(pmap) = patch.as_object() else {
        return patch.clone();
    };
    if pmap.get("$patch").and_then(|v| v.as_str()) == Some("replace") {
        let mut m = pmap.clone();
        m.remove("$patch");
        return Value::Object(m);
    }
    let mut tmap = match target {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(keep) = pmap.get("$retainKeys").and_then(|v| v.as_array()) {
        let keep: Vec<&str> = keep.iter().filter_map(|k| k.as_str()).collect();
        tmap.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, pv) in pmap {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (tmap.get_mut(field), pv.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            tmap.remove(k);
            continue;
        }
        let cur = tmap.remove(k).unwrap_or(Value::Null);
        let order = pmap
            .get(&format!("$setElementOrder/{k}"))
            .and_then(|v| v.as_array());
        let merged = match (cur, pv) {
            (cur @ Value::Object(_), Value::Object(_)) => strategic_merge(cur, pv, k),
            (Value::Null, Value::Object(_)) => strategic_merge(Value::Object(Map::new()), pv, k),
            (Value::Array(cur), Value::Array(pa)) => merge_list(k, cur, pa, order),
            (Value::Null, Value::Array(pa)) => merge_list(k, Vec::new(), pa, order),
            (_, other) => other.clone(),
        };
        tmap.insert(k.clone(), merged);
    }
    Value::Object(tmap)
}

fn merge_list(field: &str, cur: Vec<Value>, patch: &[Value], order: Option<&Vec<Value>>) -> Value {
    if field == "finalizers" {
        let mut out = cur;
        for p in patch {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = list_merge_key(field, patch.iter().chain(cur.iter())) else {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    };
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(|v| v.as_str()) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .cloned()
                .collect(),
        );
    }
    let mut out = cur;
    for p in patch {
        let pk = p.get(key).cloned();
        let pos = pk
            .as_ref()
            .and_then(|pk| out.iter().position(|c| c.get(key) == Some(pk)));
        let delete = p.get("$patch").and_then(|v| v.as_str()) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                let c = std::mem::take(&mut out[i]);
                out[i] = strategic_merge(c, p, field);
            }
            (None, false) => out.push(strategic_merge(Value::Object(Map::new()), p, field)),
        }
    }
    if let Some(order) = order {
        let pos_of = |v: &Value| {
            order
                .iter()
                .position(|o| o.get(key).is_some() && o.get(key) == v.get(key))
                .unwrap_or(usize::MAX)
        };
        out.sort_by_key(pos_of);
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name() {
        let t = json!({"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}});
        let p = json!({"spec":{"containers":[{"name":"b","image":"z"}]}});
        let r = apply(PatchType::Strategic, t, &p).unwrap();
        assert_eq!(r["spec"]["containers"][0]["image"], "x");
        assert_eq!(r["spec"]["containers"][1]["image"], "z");
    }

    #[test]
    fn strategic_delete_directive_and_null() {
        let t = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"containers":[{"name":"a"},{"name":"b"}]}});
        let p = json!({"metadata":{"labels":{"a":null}},"spec":{"containers":[{"name":"a","$patch":"delete"}]}});
        let r = apply(PatchType::Strategic, t, &p).unwrap();
        assert_eq!(r["metadata"]["labels"], json!({"b":"2"}));
        assert_eq!(r["spec"]["containers"], json!([{"name":"b"}]));
    }

    #[test]
    fn strategic_replaces_unkeyed_lists() {
        let t = json!({"spec":{"args":["a","b"]}});
        let p = json!({"spec":{"args":["c"]}});
        assert_eq!(
            apply(PatchType::Strategic, t, &p).unwrap()["spec"]["args"],
            json!(["c"])
        );
    }

    #[test]
    fn json_patch_failure_is_reported() {
        let t = json!({"a":1});
        let p = json!([{"op":"test","path":"/a","value":2}]);
        let e = apply(PatchType::Json, t, &p).unwrap_err();
        assert_eq!(e.code, 422);
        let e = apply(PatchType::Json, json!({}), &json!({"op":"x"})).unwrap_err();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn unknown_content_type_is_415() {
        assert_eq!(
            PatchType::from_content_type("text/plain").unwrap_err().code,
            415
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
    }
}
