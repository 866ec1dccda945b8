//! CustomResourceDefinitions: registration of the served versions as new resource types (their
//! validation is `validation::other_kinds::validate_crd`, their schemas are applied by
//! `validation::custom`).
//!
//! Invariant: after a CRD is stored, every version it marks `served` is routable and listed in
//! discovery; a CRD missing group, names.plural, names.kind or scope never gets here (422).

use serde_json::Value;

use crate::resource::{Registry, ResourceType};

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().filter(|x| !x.is_empty())
}

/// Registers every served version of a (validated) CRD.
pub fn register(registry: &Registry, crd: &Value) {
    let spec = &crd["spec"];
    let group = s(spec, &["group"]).unwrap_or_default();
    let kind = s(spec, &["names", "kind"]).unwrap_or_default();
    let plural = s(spec, &["names", "plural"]).unwrap_or_default();
    let namespaced = s(spec, &["scope"]) != Some("Cluster");
    for v in spec["versions"].as_array().into_iter().flatten() {
        if v.get("served").and_then(|x| x.as_bool()) == Some(false) {
            continue;
        }
        let Some(version) = s(v, &["name"]) else {
            continue;
        };
        // Custom resources keep a generation and are returned by DELETE, as the apiserver does.
        let mut t = ResourceType::new(group, version, kind, plural, namespaced)
            .with_generation()
            .returning_deleted_object();
        t.custom = true;
        if let Some(sing) = s(spec, &["names", "singular"]) {
            t.singular = sing.to_string();
        }
        if let Some(short) = spec["names"]["shortNames"].as_array() {
            t.short_names = short
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect();
        }
        if v["subresources"].get("status").is_some() {
            t.status_subresource = true;
        }
        registry.register(t);
    }
}
