//! Object metadata, as apimachinery's `api/validation/objectmeta.go` checks it on create
//! (`ValidateObjectMetaAccessor`: name or generateName, namespace, generation, labels,
//! annotations, owner references, finalizers) and on update (`ValidateObjectMetaAccessorUpdate`:
//! no new finalizers while deleting, immutable name, namespace, uid, creationTimestamp,
//! deletionTimestamp, deletionGracePeriodSeconds).
//!
//! Invariant: the errors and their order are those of the Go functions for the same metadata;
//! `metadata.managedFields` is not checked (the field manager owns it here).

use serde_json::Value;

use super::field::{self, Bad, ErrorList};
use super::labels::{validate_annotations, validate_labels};
use super::names::{self, NameFn};

/// `FieldImmutableErrorMsg`.
pub const FIELD_IMMUTABLE: &str = "field is immutable";

fn s<'a>(meta: &'a Value, k: &str) -> &'a str {
    meta[k].as_str().unwrap_or("")
}

/// `ValidateObjectMetaAccessor(meta, requiresNamespace, nameFn, "metadata")`.
pub fn validate_object_meta(
    obj: &Value,
    requires_namespace: bool,
    name_fn: NameFn<'_>,
) -> ErrorList {
    let meta = &obj["metadata"];
    let mut errs = ErrorList::new();
    let generate_name = s(meta, "generateName");
    if !generate_name.is_empty() {
        for m in name_fn(generate_name, true) {
            errs.push(field::invalid(
                "metadata.generateName",
                Bad::str(generate_name),
                m,
            ));
        }
    }
    let name = s(meta, "name");
    if name.is_empty() {
        errs.push(field::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in name_fn(name, false) {
            errs.push(field::invalid("metadata.name", Bad::str(name), m));
        }
    }
    let ns = s(meta, "namespace");
    if requires_namespace {
        if ns.is_empty() {
            errs.push(field::required("metadata.namespace", ""));
        } else {
            for m in names::name_is_dns_label(ns, false) {
                errs.push(field::invalid("metadata.namespace", Bad::str(ns), m));
            }
        }
    } else if !ns.is_empty() {
        errs.push(field::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta["generation"].as_i64().filter(|g| *g < 0) {
        errs.push(field::invalid(
            "metadata.generation",
            Bad::num(g),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_labels(
        meta["labels"].as_object(),
        "metadata.labels",
    ));
    errs.extend(validate_annotations(
        meta["annotations"].as_object(),
        "metadata.annotations",
    ));
    errs.extend(validate_owner_references(&meta["ownerReferences"]));
    errs.extend(validate_finalizers(&meta["finalizers"]));
    errs
}

/// Go's `%#v` of a `*bool` field: `(*bool)(nil)` or a pointer (whose address the apiserver
/// prints and no simulator can reproduce).
fn go_bool_ptr(v: &Value) -> &'static str {
    if v.is_boolean() {
        "(*bool)(0xc000000000)"
    } else {
        "(*bool)(nil)"
    }
}

fn go_owner_reference(r: &Value) -> String {
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        field::go_quote(s(r, "apiVersion")),
        field::go_quote(s(r, "kind")),
        field::go_quote(s(r, "name")),
        field::go_quote(s(r, "uid")),
        go_bool_ptr(&r["controller"]),
        go_bool_ptr(&r["blockOwnerDeletion"]),
    )
}

/// `schema.FromAPIVersionAndKind(apiVersion, kind)`: (group, version), both empty when the
/// apiVersion does not parse.
fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [""] => ("", ""),
        [v] => ("", v),
        [g, v] => (g, v),
        _ => ("", ""),
    }
}

/// `ValidateOwnerReferences`: apiVersion, kind, name and uid are set, no Event is an owner, at
/// most one reference is the controller.
pub fn validate_owner_references(refs: &Value) -> ErrorList {
    const PATH: &str = "metadata.ownerReferences";
    let mut errs = ErrorList::new();
    let Some(items) = refs.as_array() else {
        return errs;
    };
    let mut first_controller = String::new();
    for r in items {
        let (group, version) = group_version(s(r, "apiVersion"));
        if version.is_empty() {
            errs.push(field::invalid(
                &field::child(PATH, "apiVersion"),
                Bad::str(s(r, "apiVersion")),
                "version must not be empty",
            ));
        }
        for k in ["kind", "name", "uid"] {
            if s(r, k).is_empty() {
                errs.push(field::invalid(
                    &field::child(PATH, k),
                    Bad::str(""),
                    format!("{k} must not be empty"),
                ));
            }
        }
        if group.is_empty() && version == "v1" && s(r, "kind") == "Event" {
            errs.push(field::invalid(
                PATH,
                Bad::Raw(go_owner_reference(r)),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r["controller"] == true {
            let this = format!("{}/{}", s(r, "kind"), s(r, "name"));
            if first_controller.is_empty() {
                first_controller = this;
            } else {
                let all: Vec<String> = items.iter().map(go_owner_reference).collect();
                errs.push(field::invalid(
                    PATH,
                    Bad::Raw(format!("[]v1.OwnerReference{{{}}}", all.join(", "))),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first_controller} and {this}"),
                ));
            }
        }
    }
    errs
}

/// `ValidateFinalizers`: qualified names, and not both `orphan` and `foregroundDeletion`.
pub fn validate_finalizers(finalizers: &Value) -> ErrorList {
    const PATH: &str = "metadata.finalizers";
    let mut errs = ErrorList::new();
    let Some(items) = finalizers.as_array() else {
        return errs;
    };
    for f in items {
        let f = f.as_str().unwrap_or("");
        for m in names::is_qualified_name(f) {
            errs.push(field::invalid(PATH, Bad::str(f), m));
        }
    }
    let has = |n: &str| items.iter().any(|f| f == n);
    if has("orphan") && has("foregroundDeletion") {
        errs.push(field::invalid(
            PATH,
            Bad::Raw(field::go_string_slice(Some(items))),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// `metav1.Time.String()` of an RFC 3339 timestamp (Go's `time.Time` format), as the immutable
/// field error prints it.
fn go_time(v: &Value) -> String {
    match v
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    {
        Some(t) => t
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S +0000 UTC")
            .to_string(),
        None => "0001-01-01 00:00:00 +0000 UTC".to_string(),
    }
}

/// `ValidateImmutableField(new, old, path)` for a string field.
pub fn immutable_str(new: &Value, old: &Value, path: &str) -> ErrorList {
    if new.as_str().unwrap_or("") == old.as_str().unwrap_or("") {
        return vec![];
    }
    vec![field::invalid(
        path,
        Bad::str(new.as_str().unwrap_or("")),
        FIELD_IMMUTABLE,
    )]
}

/// `ValidateObjectMetaAccessorUpdate(new, old, "metadata")`.
pub fn validate_object_meta_update(new: &Value, old: &Value) -> ErrorList {
    let (nm, om) = (&new["metadata"], &old["metadata"]);
    let mut errs = ErrorList::new();
    if om["deletionTimestamp"].is_string() {
        let old_f: Vec<&str> = om["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut extra: Vec<&str> = nm["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|f| !old_f.contains(f))
            .collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let list: Vec<String> = extra.iter().map(|f| field::go_quote(f)).collect();
            errs.push(field::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            ));
        }
    }
    if s(nm, "resourceVersion").is_empty() {
        errs.push(field::invalid(
            "metadata.resourceVersion",
            Bad::str(""),
            "must be specified for an update",
        ));
    }
    let gen = |m: &Value| m["generation"].as_i64().unwrap_or(0);
    if gen(nm) < gen(om) {
        errs.push(field::invalid(
            "metadata.generation",
            Bad::num(gen(nm)),
            "must not be decremented",
        ));
    }
    for f in ["name", "namespace", "uid"] {
        errs.extend(immutable_str(&nm[f], &om[f], &field::child("metadata", f)));
    }
    for f in ["creationTimestamp", "deletionTimestamp"] {
        if nm[f] != om[f] {
            errs.push(field::invalid(
                &field::child("metadata", f),
                Bad::Raw(if f == "deletionTimestamp" && nm[f].is_null() {
                    "null".to_string()
                } else {
                    go_time(&nm[f])
                }),
                FIELD_IMMUTABLE,
            ));
        }
    }
    if nm["deletionGracePeriodSeconds"] != om["deletionGracePeriodSeconds"] {
        errs.push(field::invalid(
            "metadata.deletionGracePeriodSeconds",
            Bad::json(&nm["deletionGracePeriodSeconds"]),
            FIELD_IMMUTABLE,
        ));
    }
    errs.extend(validate_labels(nm["labels"].as_object(), "metadata.labels"));
    errs.extend(validate_annotations(
        nm["annotations"].as_object(),
        "metadata.annotations",
    ));
    errs.extend(validate_owner_references(&nm["ownerReferences"]));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn name_rules_and_generate_name() {
        let o = json!({"metadata": {"name": "Bad_Name", "namespace": "default"}});
        let errs = validate_object_meta(&o, true, &names::name_is_dns_subdomain);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.name");
        let o = json!({"metadata": {"generateName": "web-", "name": "web-abcde", "namespace": "default"}});
        assert!(validate_object_meta(&o, true, &names::name_is_dns_subdomain).is_empty());
        let o = json!({"metadata": {"namespace": "default"}});
        assert_eq!(
            validate_object_meta(&o, true, &names::name_is_dns_subdomain)[0].message(),
            "metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn uid_is_immutable() {
        let old = json!({"metadata": {"name": "a", "uid": "u1", "resourceVersion": "1"}});
        let new = json!({"metadata": {"name": "a", "uid": "u2", "resourceVersion": "1"}});
        let errs = validate_object_meta_update(&new, &old);
        assert_eq!(
            errs[0].message(),
            "metadata.uid: Invalid value: \"u2\": field is immutable"
        );
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let old = json!({"metadata": {"name": "a", "resourceVersion": "1", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a/x"]}});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["a/x", "b/y"]);
        assert_eq!(
            validate_object_meta_update(&new, &old)[0].message(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b/y\"}"
        );
    }
}
