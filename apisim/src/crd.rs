//! CustomResourceDefinitions: validation of the fields the simulator needs, and registration of the
//! served versions as new resource types.
//!
//! Invariant: after a CRD is stored, every version it marks `served` is routable and listed in
//! discovery; a CRD missing group, names.plural, names.kind, scope or versions is rejected (422)
//! before anything is stored.

use serde_json::Value;

use crate::resource::{Registry, ResourceType};
use crate::status::ApiError;

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().filter(|x| !x.is_empty())
}

/// Checks that a CRD body names what registration needs; the error names the missing field.
pub fn validate(crd: &Value) -> Result<(), ApiError> {
    let name = s(crd, &["metadata", "name"]).unwrap_or("");
    let need = |path: &[&str]| -> Result<(), ApiError> {
        if s(crd, path).is_none() {
            return Err(ApiError::invalid(
                "customresourcedefinitions.apiextensions.k8s.io",
                name,
                format!(
                    "CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {}: Required value",
                    path.join(".")
                ),
            ));
        }
        Ok(())
    };
    need(&["spec", "group"])?;
    need(&["spec", "names", "plural"])?;
    need(&["spec", "names", "kind"])?;
    need(&["spec", "scope"])?;
    let versions = crd["spec"]["versions"].as_array();
    if versions.is_none_or(|v| v.is_empty() || v.iter().any(|x| s(x, &["name"]).is_none())) {
        return Err(ApiError::invalid(
            "customresourcedefinitions.apiextensions.k8s.io",
            name,
            format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: spec.versions: Invalid value: each version needs a name"),
        ));
    }
    let expected = format!(
        "{}.{}",
        s(crd, &["spec", "names", "plural"]).unwrap_or(""),
        s(crd, &["spec", "group"]).unwrap_or("")
    );
    if name != expected {
        return Err(ApiError::invalid(
            "customresourcedefinitions.apiextensions.k8s.io",
            name,
            format!("CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group ({expected})"),
        ));
    }
    Ok(())
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
