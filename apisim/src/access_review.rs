//! `authorization.k8s.io/v1` SelfSubjectAccessReview and SelfSubjectRulesReview, which
//! `kubectl auth can-i` creates: the requesting user's own question answered by the same
//! authorizer every request goes through (kubernetes' `pkg/registry/authorization/
//! selfsubjectaccessreview` and `selfsubjectrulesreview`). Neither is stored.
//!
//! Invariant: a review's answer is exactly the decision the server would make for that request
//! by that user (impersonated user included) at that moment.

use serde_json::{json, Value};

use crate::authn::UserInfo;
use crate::rbac::{self, Attributes};
use crate::status::ApiError;
use crate::store::Store;

/// The group of the reviews.
pub const GROUP: &str = "authorization.k8s.io";

/// Discovery entries of `authorization.k8s.io/v1`.
pub fn discovery_resources() -> Vec<Value> {
    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]
        .iter()
        .map(|p| {
            json!({"name": p, "singularName": p.trim_end_matches('s'), "namespaced": false,
                   "kind": if *p == "selfsubjectaccessreviews" { "SelfSubjectAccessReview" } else { "SelfSubjectRulesReview" },
                   "verbs": ["create"]})
        })
        .collect()
}

fn invalid(kind: &str, field: &str, value: &str, msg: &str) -> ApiError {
    let mut e = ApiError::invalid(
        "",
        "",
        format!("{kind}.{GROUP} \"\" is invalid: {field}: Invalid value: {value}: {msg}"),
    );
    e.details = Some(json!({"group": GROUP, "kind": kind, "causes": [
        {"reason": "FieldValueInvalid", "message": format!("Invalid value: {value}: {msg}"), "field": field}]}));
    e
}

/// Answers a SelfSubjectAccessReview created by `user`: the review with `status.allowed`,
/// `status.reason` (the authorizer's reason) and, when role references failed to resolve,
/// `status.evaluationError`.
pub fn self_subject_access_review(
    store: &Store,
    rbac_on: bool,
    user: &UserInfo,
    mut review: Value,
) -> Result<Value, ApiError> {
    let kind = "SelfSubjectAccessReview";
    let spec = &review["spec"];
    let res = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let attrs = match (res, non) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                kind,
                "spec.nonResourceAttributes",
                "\"\"",
                "cannot be specified in combination with resourceAttributes",
            ))
        }
        (None, None) => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "\"null\"",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ))
        }
        (Some(r), None) => Attributes {
            user: user.clone(),
            verb: s(r, "verb"),
            resource_request: true,
            group: s(r, "group"),
            version: s(r, "version"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            path: String::new(),
        },
        (None, Some(n)) => Attributes {
            user: user.clone(),
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Attributes::default()
        },
    };
    let (allowed, reason) = match crate::authz::authorize(store, rbac_on, &attrs) {
        Ok(r) => (true, r),
        Err(r) => (false, r),
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    review["status"] = status;
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["apiVersion"] = json!(format!("{GROUP}/v1"));
    review["kind"] = json!(kind);
    Ok(review)
}

/// Answers a SelfSubjectRulesReview: every rule bound to `user` in `spec.namespace` (400 `no
/// namespace on request` without one). With RBAC off the rules are what the stored bindings
/// say, although every request is allowed.
pub fn self_subject_rules_review(
    store: &Store,
    user: &UserInfo,
    mut review: Value,
) -> Result<Value, ApiError> {
    let ns = review["spec"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if ns.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    let errors = rbac::visit_rules(store, user, &ns, |r| {
        let rule = &r.rule;
        if !rule.resources.is_empty() {
            let mut v = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups, "resources": rule.resources});
            if !rule.resource_names.is_empty() {
                v["resourceNames"] = json!(rule.resource_names);
            }
            resource_rules.push(v);
        }
        if !rule.non_resource_urls.is_empty() {
            non_resource_rules
                .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
        true
    });
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    if !errors.is_empty() {
        status["evaluationError"] = json!(if errors.len() == 1 {
            errors[0].clone()
        } else {
            format!("[{}]", errors.join(", "))
        });
    }
    review["status"] = status;
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["apiVersion"] = json!(format!("{GROUP}/v1"));
    review["kind"] = json!("SelfSubjectRulesReview");
    Ok(review)
}
