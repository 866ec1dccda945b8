//! The `/scale` subresource of deployments (autoscaling/v1 `Scale`), as `kubectl scale` uses it.
//!
//! Invariant: a Scale is a view of its deployment: reading it never writes, and writing it changes
//! only the deployment's `spec.replicas` (through the store, so the resourceVersion and watch
//! events are those of the deployment).

use serde_json::{json, Value};

use crate::patch::{self, PatchType};
use crate::resource::{ResourceId, ResourceType};
use crate::status::ApiError;
use crate::store::{Store, Subresource, WriteOptions};

/// Whether `rt` serves `/scale`.
pub fn has_scale(rt: &ResourceType) -> bool {
    rt.group == "apps" && rt.kind == "Deployment"
}

fn selector_string(v: &Value) -> String {
    v["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The Scale view of a deployment.
pub fn scale_of(obj: &Value) -> Value {
    let m = &obj["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"],
            "namespace": m["namespace"],
            "uid": m["uid"],
            "resourceVersion": m["resourceVersion"],
            "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {
            "replicas": obj["status"]["replicas"].as_i64().unwrap_or(0),
            "selector": selector_string(obj),
        },
    })
}

fn replicas_from(scale: &Value) -> Result<i64, ApiError> {
    scale["spec"]["replicas"]
        .as_i64()
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale.spec.replicas must be a non-negative integer, got {}",
                scale["spec"]["replicas"]
            ))
        })
}

/// GET `/scale`.
pub fn get(store: &Store, rid: ResourceId, ns: &str, name: &str) -> Result<Value, ApiError> {
    Ok(scale_of(&store.get(rid, ns, name)?.value()))
}

/// PATCH `/scale`: the patch applies to the Scale view; its `spec.replicas` is written back.
pub fn patch(
    store: &Store,
    rid: ResourceId,
    ns: &str,
    name: &str,
    pt: PatchType,
    p: &Value,
) -> Result<Value, ApiError> {
    patch_with(store, rid, ns, name, pt, p, &WriteOptions::default())
}

/// [`patch`] with write options (dry run, field manager).
pub fn patch_with(
    store: &Store,
    rid: ResourceId,
    ns: &str,
    name: &str,
    pt: PatchType,
    p: &Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let o = store.update_with_opts(rid, ns, name, Subresource::Main, opts, |mut dep| {
        let scaled = patch::apply(pt, scale_of(&dep), p)?;
        dep["spec"]["replicas"] = json!(replicas_from(&scaled)?);
        // The patch does not carry the deployment's resourceVersion: no precondition.
        dep["metadata"]["resourceVersion"] = Value::Null;
        Ok(dep)
    })?;
    Ok(scale_of(&o.value()))
}

/// PUT `/scale`: a stale `metadata.resourceVersion` in the Scale is a 409.
pub fn put(
    store: &Store,
    rid: ResourceId,
    ns: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    put_with(store, rid, ns, name, body, &WriteOptions::default())
}

/// [`put`] with write options (dry run, field manager).
pub fn put_with(
    store: &Store,
    rid: ResourceId,
    ns: &str,
    name: &str,
    body: &Value,
    opts: &WriteOptions,
) -> Result<Value, ApiError> {
    let replicas = replicas_from(body)?;
    let rv = body["metadata"]["resourceVersion"].clone();
    let o = store.update_with_opts(rid, ns, name, Subresource::Main, opts, |mut dep| {
        dep["spec"]["replicas"] = json!(replicas);
        dep["metadata"]["resourceVersion"] = rv;
        Ok(dep)
    })?;
    Ok(scale_of(&o.value()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patching_scale_changes_replicas_only() {
        let s = Store::new(100);
        let rid = s.rid("apps/v1", "deployments");
        s.create(
            rid,
            Some("default"),
            json!({"metadata":{"name":"d"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"d"}},
                "template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}),
        )
        .unwrap();
        let sc = patch(
            &s,
            rid,
            "default",
            "d",
            PatchType::Merge,
            &json!({"spec":{"replicas":4}}),
        )
        .unwrap();
        assert_eq!(sc["spec"]["replicas"], 4);
        assert_eq!(sc["status"]["selector"], "app=d");
        let dep = s.get(rid, "default", "d").unwrap().value();
        assert_eq!(dep["spec"]["replicas"], 4);
        assert_eq!(dep["metadata"]["generation"], 2);
        let mut stale = sc.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        assert_eq!(put(&s, rid, "default", "d", &stale).unwrap_err().code, 409);
        let e = patch(
            &s,
            rid,
            "default",
            "d",
            PatchType::Merge,
            &json!({"spec":{"replicas":-1}}),
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
    }
}
