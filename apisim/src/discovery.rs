//! Discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/GROUP[/VERSION]`, and the
//! minimal `/openapi/v3` that lets kubectl validate on the server side.
//!
//! Invariant: discovery is computed from the registry on every request, so a kind registered at
//! runtime (including through a CRD) is listed immediately.

use serde_json::{json, Value};
use std::collections::BTreeMap;

use crate::resource::{Registry, ResourceType};

/// Kubernetes version the simulator reports.
pub const GIT_VERSION: &str = "v1.33.0";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Served by `access_review`, not stored.
    g.insert(crate::access_review::GROUP.into(), vec!["v1".into()]);
    for (_, t) in registry.all() {
        if t.group.is_empty() {
            continue;
        }
        let vs = g.entry(t.group.clone()).or_default();
        if !vs.contains(&t.version) {
            vs.push(t.version.clone());
        }
    }
    g
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = groups(registry)
        .iter()
        .map(|(n, vs)| group_doc(n, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`, or None when no type is in that group.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let g = groups(registry);
    let vs = g.get(name)?;
    let mut d = group_doc(name, vs);
    d["kind"] = json!("APIGroup");
    d["apiVersion"] = json!("v1");
    Some(d)
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entry(t: &ResourceType) -> Value {
    let mut e = json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": VERBS,
    });
    if !t.short_names.is_empty() {
        e["shortNames"] = json!(t.short_names);
    }
    e
}

/// `/api/v1` or `/apis/GROUP/VERSION`, or None when nothing is served there.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|(_, t)| t.group == group && t.version == version)
        .collect();
    let mut resources = Vec::new();
    if group == crate::access_review::GROUP && version == "v1" {
        resources.extend(crate::access_review::discovery_resources());
    } else if types.is_empty() {
        return None;
    }
    for (_, t) in &types {
        resources.push(resource_entry(t));
        if crate::scale::has_scale(t) {
            resources.push(json!({
                "name": format!("{}/scale", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group-version. `sharding` is the `ShardedListAndWatch`
/// gate, which changes the documents (and so their hashes).
pub fn openapi_root(registry: &Registry, sharding: bool) -> Value {
    let mut paths = serde_json::Map::new();
    for (_, t) in registry.all() {
        let p = gv_path(&t.group, &t.version);
        paths.entry(p.clone()).or_insert_with(|| {
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash_of(registry, &t.group, &t.version, sharding))})
        });
    }
    json!({"paths": paths})
}

fn hash_of(registry: &Registry, group: &str, version: &str, sharding: bool) -> String {
    // Changes whenever the set of kinds in the group-version changes, as the real hash does.
    let mut h: u64 = 0xcbf29ce484222325;
    if sharding {
        h = (h ^ u64::from(b'S')).wrapping_mul(0x100000001b3);
    }
    for (_, t) in registry.all() {
        if t.group == group && t.version == version {
            for b in t.plural.bytes().chain(t.kind.bytes()) {
                h = (h ^ b as u64).wrapping_mul(0x100000001b3);
            }
        }
    }
    format!("{h:016X}")
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/G/V`: a `patch` operation per kind carrying
/// `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, which is what kubectl
/// checks to decide that the server validates fields. No schemas are published. With
/// `sharding` (the `ShardedListAndWatch` gate) each collection also has its `list` operation
/// with the list parameters and `shardSelector`, which is how a client can tell, before it
/// lists, that the server shards (KEP-5866); without it no list operation is published.
pub fn openapi_group_version(registry: &Registry, gv: &str, sharding: bool) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut found = false;
    for (_, t) in registry.all() {
        if gv_path(&t.group, &t.version) != gv {
            continue;
        }
        found = true;
        let base = format!("/{gv}");
        let item = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
        ]);
        let op = |action: &str, id: &str| {
            json!({
                "operationId": format!("{id}{}", t.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(
            item,
            json!({"patch": op("patch", "patch"), "put": op("put", "replace")}),
        );
        let coll = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{base}/{}", t.plural)
        };
        let mut ops = json!({"post": op("post", "create")});
        if sharding {
            ops["get"] = list_operation(&t.kind, &gvk);
        }
        paths.insert(coll, ops);
    }
    if !found {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}

/// The `list` operation of a collection, with the list parameters and `shardSelector`.
fn list_operation(kind: &str, gvk: &Value) -> Value {
    let q = |name: &str, ty: &str| json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}});
    json!({
        "operationId": format!("list{kind}"),
        "parameters": [
            q("allowWatchBookmarks", "boolean"),
            q("continue", "string"),
            q("fieldSelector", "string"),
            q("labelSelector", "string"),
            q("limit", "integer"),
            q("resourceVersion", "string"),
            q("resourceVersionMatch", "string"),
            q("sendInitialEvents", "boolean"),
            {
                "name": "shardSelector",
                "in": "query",
                "description": "shardSelector restricts the list of returned objects by a CEL-based shard selection expression: shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'), several ORed with ||. This is an alpha field and requires enabling the ShardedListAndWatch feature gate.",
                "schema": {"type": "string", "uniqueItems": true}
            },
            q("timeoutSeconds", "integer"),
            q("watch", "boolean")
        ],
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": "list",
        "x-kubernetes-group-version-kind": gvk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_kinds_show_up() {
        let r = Registry::with_builtins();
        assert!(resource_list(&r, "ex.io", "v1").is_none());
        r.register(ResourceType::new("ex.io", "v1", "Widget", "widgets", true));
        let l = resource_list(&r, "ex.io", "v1").unwrap();
        assert_eq!(l["resources"][0]["kind"], "Widget");
        let g = group_list(&r);
        assert!(g["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "ex.io"));
        assert!(openapi_root(&r, false)["paths"]["apis/ex.io/v1"].is_object());
    }

    #[test]
    fn openapi_has_field_validation() {
        let r = Registry::with_builtins();
        let d = openapi_group_version(&r, "api/v1", false).unwrap();
        let p = &d["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert!(p["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "fieldValidation"));
    }

    #[test]
    fn openapi_advertises_shard_selector_only_with_the_gate() {
        let r = Registry::with_builtins();
        let coll = "/api/v1/namespaces/{namespace}/pods";
        let off = openapi_group_version(&r, "api/v1", false).unwrap();
        assert!(off["paths"][coll].get("get").is_none());
        let on = openapi_group_version(&r, "api/v1", true).unwrap();
        let list = &on["paths"][coll]["get"];
        assert_eq!(list["x-kubernetes-action"], "list");
        assert!(list["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "shardSelector"));
        assert_ne!(openapi_root(&r, false), openapi_root(&r, true));
    }
}
