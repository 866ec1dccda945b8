//! The kinds whose validation is mostly their metadata: Namespaces and ServiceAccounts
//! (`pkg/apis/core/validation/validation.go` `ValidateNamespace`, `validateFinalizerName`,
//! `ValidateServiceAccount`), Leases (`pkg/apis/coordination/validation` `ValidateLeaseSpec`),
//! RBAC (`pkg/apis/rbac/validation/validation.go` `ValidateRole`, `ValidateClusterRole`,
//! `validatePolicyRule`, `ValidateRoleBinding`, `ValidateClusterRoleBinding`,
//! `validateRoleBindingSubject`, the immutable roleRef), PodDisruptionBudgets (metadata and
//! selector) and CustomResourceDefinitions (`apiextensions/validation` `ValidateCustomResourceDefinition`
//! for the fields apisim reads: name, group, scope, versions, names, schemas).
//!
//! Invariant: each function is the strategy's `Validate` (or `ValidateUpdate` for the `_update`
//! ones) for its kind, giving the apiserver's errors in its order.

use serde_json::Value;

use super::field::{self, Bad, ErrorList};
use super::labels::validate_label_selector;
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::{self, NameFn};

fn st<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// `ValidateNamespace`: a DNS-1123 label, and `spec.finalizers` qualified names that are
/// standard (`kubernetes`) when they have no prefix.
pub fn validate_namespace(ns: &Value) -> ErrorList {
    let mut errs = validate_object_meta(ns, false, &names::name_is_dns_label);
    for f in arr(&ns["spec"]["finalizers"]) {
        let f = f.as_str().unwrap_or("");
        for m in names::is_qualified_name(f) {
            errs.push(field::invalid("spec.finalizers", Bad::str(f), m));
        }
        if !f.contains('/') && f != "kubernetes" {
            errs.push(field::invalid(
                "spec.finalizers",
                Bad::str(f),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// The namespace strategy's `ValidateUpdate`.
pub fn validate_namespace_update(new: &Value, old: &Value) -> ErrorList {
    let mut errs = validate_namespace(new);
    errs.extend(validate_object_meta_update(new, old));
    errs
}

/// Metadata only, with `name_fn` (ServiceAccounts, and the kinds without spec rules here).
pub fn validate_meta_only(obj: &Value, namespaced: bool, name_fn: NameFn<'_>) -> ErrorList {
    validate_object_meta(obj, namespaced, name_fn)
}

/// `ValidateLease`.
pub fn validate_lease(lease: &Value) -> ErrorList {
    let mut errs = validate_object_meta(lease, true, &names::name_is_dns_subdomain);
    let spec = &lease["spec"];
    if let Some(d) = spec["leaseDurationSeconds"].as_i64().filter(|d| *d <= 0) {
        errs.push(field::invalid(
            "spec.leaseDurationSeconds",
            Bad::num(d),
            "must be greater than 0",
        ));
    }
    if let Some(t) = spec["leaseTransitions"].as_i64().filter(|t| *t < 0) {
        errs.push(field::invalid(
            "spec.leaseTransitions",
            Bad::num(t),
            "must be greater than or equal to 0",
        ));
    }
    errs
}

/// `validatePolicyRule`.
fn validate_policy_rules(role: &Value, namespaced: bool, errs: &mut ErrorList) {
    for (i, rule) in arr(&role["rules"]).iter().enumerate() {
        let p = field::index("rules", i);
        if arr(&rule["verbs"]).is_empty() {
            errs.push(field::required(
                &field::child(&p, "verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = arr(&rule["nonResourceURLs"]);
        if !urls.is_empty() {
            let shown = Bad::Raw(field::go_string_slice(Some(urls)));
            if namespaced {
                errs.push(field::invalid(
                    &field::child(&p, "nonResourceURLs"),
                    shown.clone(),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !arr(&rule["apiGroups"]).is_empty()
                || !arr(&rule["resources"]).is_empty()
                || !arr(&rule["resourceNames"]).is_empty()
            {
                errs.push(field::invalid(
                    &field::child(&p, "nonResourceURLs"),
                    shown,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if arr(&rule["apiGroups"]).is_empty() {
            errs.push(field::required(
                &field::child(&p, "apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if arr(&rule["resources"]).is_empty() {
            errs.push(field::required(
                &field::child(&p, "resources"),
                "resource rules must supply at least one resource",
            ));
        }
        if !arr(&rule["resourceNames"]).is_empty() && arr(&rule["resources"]).len() > 1 {
            errs.push(field::required(
                &field::child(&p, "resourceNames"),
                "resource names cannot apply to multiple resources",
            ));
        }
    }
}

/// `ValidateRole` / `ValidateClusterRole` (ClusterRoles have no namespace).
pub fn validate_role(role: &Value, namespaced: bool) -> ErrorList {
    let mut errs = validate_object_meta(role, namespaced, &names::path_segment_name);
    validate_policy_rules(role, namespaced, &mut errs);
    errs
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding`.
pub fn validate_role_binding(rb: &Value, namespaced: bool) -> ErrorList {
    let mut errs = validate_object_meta(rb, namespaced, &names::path_segment_name);
    let role_ref = &rb["roleRef"];
    let group = st(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        errs.push(field::not_supported(
            "roleRef.apiGroup",
            Bad::str(group),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = st(role_ref, "kind");
    if !kinds.contains(&kind) {
        errs.push(field::not_supported("roleRef.kind", Bad::str(kind), kinds));
    }
    let name = st(role_ref, "name");
    if name.is_empty() {
        errs.push(field::required("roleRef.name", ""));
    } else {
        for m in names::path_segment_name(name, false) {
            errs.push(field::invalid("roleRef.name", Bad::str(name), m));
        }
    }
    for (i, s) in arr(&rb["subjects"]).iter().enumerate() {
        let p = field::index("subjects", i);
        let name = st(s, "name");
        if name.is_empty() {
            errs.push(field::required(&field::child(&p, "name"), ""));
        }
        // User and Group subjects default their apiGroup to rbac.authorization.k8s.io.
        let api_group = s["apiGroup"].as_str();
        match st(s, "kind") {
            "ServiceAccount" => {
                if !name.is_empty() {
                    for m in names::name_is_dns_subdomain(name, false) {
                        errs.push(field::invalid(&field::child(&p, "name"), Bad::str(name), m));
                    }
                }
                if let Some(g) = api_group.filter(|g| !g.is_empty()) {
                    errs.push(field::not_supported(
                        &field::child(&p, "apiGroup"),
                        Bad::str(g),
                        &[""],
                    ));
                }
                if !namespaced && st(s, "namespace").is_empty() {
                    errs.push(field::required(&field::child(&p, "namespace"), ""));
                }
            }
            k @ ("User" | "Group") => {
                if name.is_empty() {
                    let what = if k == "User" { "user" } else { "group" };
                    errs.push(field::invalid(
                        &field::child(&p, "name"),
                        Bad::str(""),
                        format!("{what} name cannot be empty"),
                    ));
                }
                if let Some(g) = api_group.filter(|g| *g != RBAC_GROUP) {
                    errs.push(field::not_supported(
                        &field::child(&p, "apiGroup"),
                        Bad::str(g),
                        &[RBAC_GROUP],
                    ));
                }
            }
            other => errs.push(field::not_supported(
                &field::child(&p, "kind"),
                Bad::str(other),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    errs
}

/// `ValidateRoleBindingUpdate` / `ValidateClusterRoleBindingUpdate`: the roleRef cannot change.
pub fn validate_role_binding_update(new: &Value, old: &Value, namespaced: bool) -> ErrorList {
    let mut errs = validate_role_binding(new, namespaced);
    errs.extend(validate_object_meta_update(new, old));
    let (n, o) = (&new["roleRef"], &old["roleRef"]);
    if ["apiGroup", "kind", "name"]
        .iter()
        .any(|k| st(n, k) != st(o, k))
    {
        errs.push(field::invalid(
            "roleRef",
            Bad::Raw(format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                field::go_quote(st(n, "apiGroup")),
                field::go_quote(st(n, "kind")),
                field::go_quote(st(n, "name"))
            )),
            "cannot change roleRef",
        ));
    }
    errs
}

/// `ValidatePodDisruptionBudget` for its metadata and selector.
pub fn validate_pdb(pdb: &Value) -> ErrorList {
    let mut errs = validate_object_meta(pdb, true, &names::name_is_dns_subdomain);
    if pdb["spec"]["selector"].is_object() {
        errs.extend(validate_label_selector(
            &pdb["spec"]["selector"],
            "spec.selector",
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinition` for the fields apisim uses: the name (`plural.group`),
/// group, scope, version names and schemas, and the names.
pub fn validate_crd(crd: &Value) -> ErrorList {
    let spec = &crd["spec"];
    let names_v = &spec["names"];
    let (group, plural) = (st(spec, "group"), st(names_v, "plural"));
    let required = format!("{plural}.{group}");
    let name_fn = |name: &str, prefix: bool| -> Vec<String> {
        let mut r = names::name_is_dns_subdomain(name, prefix);
        if name != required {
            r.push("must be spec.names.plural+\".\"+spec.group".to_string());
        }
        r
    };
    let mut errs = validate_object_meta(crd, false, &name_fn);
    if group.is_empty() {
        errs.push(field::required("spec.group", ""));
    } else {
        let msgs = names::is_dns1123_subdomain(group);
        if !msgs.is_empty() {
            errs.push(field::invalid(
                "spec.group",
                Bad::str(group),
                msgs.join(","),
            ));
        } else if !group.contains('.') {
            errs.push(field::invalid(
                "spec.group",
                Bad::str(group),
                "should be a domain with at least one dot",
            ));
        }
    }
    let scope = st(spec, "scope");
    if scope.is_empty() {
        errs.push(field::required("spec.scope", ""));
    } else if scope != "Cluster" && scope != "Namespaced" {
        errs.push(field::not_supported(
            "spec.scope",
            Bad::str(scope),
            &["Cluster", "Namespaced"],
        ));
    }
    for (i, v) in arr(&spec["versions"]).iter().enumerate() {
        let p = field::index("spec.versions", i);
        if !v["schema"]["openAPIV3Schema"].is_object() {
            errs.push(field::required(
                &field::child(&field::child(&p, "schema"), "openAPIV3Schema"),
                "schemas are required",
            ));
        }
        let vn = st(v, "name");
        let msgs = names::is_dns1035_label(vn);
        if !msgs.is_empty() {
            errs.push(field::invalid(
                &field::child(&p, "name"),
                Bad::str(vn),
                msgs.join(","),
            ));
        }
    }
    if plural.is_empty() {
        errs.push(field::required("spec.names.plural", ""));
    }
    if st(names_v, "kind").is_empty() {
        errs.push(field::required("spec.names.kind", ""));
    }
    for k in ["plural", "singular"] {
        let v = st(names_v, k);
        let msgs = names::is_dns1035_label(v);
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(field::invalid(
                &field::child("spec.names", k),
                Bad::str(v),
                msgs.join(","),
            ));
        }
    }
    for k in ["kind", "listKind"] {
        let v = st(names_v, k);
        let msgs = names::is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(field::invalid(
                &field::child("spec.names", k),
                Bad::str(v),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    for (i, s) in arr(&names_v["shortNames"]).iter().enumerate() {
        let v = s.as_str().unwrap_or("");
        let msgs = names::is_dns1035_label(v);
        if !msgs.is_empty() {
            errs.push(field::invalid(
                &field::index("spec.names.shortNames", i),
                Bad::str(v),
                msgs.join(","),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaces_are_dns_labels() {
        let ns = json!({"metadata": {"name": "a.b"}});
        assert_eq!(
            validate_namespace(&ns)[0].message(),
            "metadata.name: Invalid value: \"a.b\": must not contain dots"
        );
    }

    #[test]
    fn rbac_rules_and_refs() {
        let role = json!({"metadata": {"name": "r", "namespace": "default"}, "rules": [{"apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(
            validate_role(&role, true)[0].message(),
            "rules[0].verbs: Required value: verbs must contain at least one value"
        );
        let rb = json!({"metadata": {"name": "b", "namespace": "default"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice"}]});
        assert!(validate_role_binding(&rb, true).is_empty());
    }

    #[test]
    fn crd_name_must_be_plural_dot_group() {
        let crd = json!({"metadata": {"name": "w.ex.io"}, "spec": {"group": "ex.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        assert_eq!(
            validate_crd(&crd)[0].message(),
            "metadata.name: Invalid value: \"w.ex.io\": must be spec.names.plural+\".\"+spec.group"
        );
    }
}
