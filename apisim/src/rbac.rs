//! RBAC authorization over the stored Role, ClusterRole, RoleBinding and ClusterRoleBinding
//! objects, as kubernetes' `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RuleAllows`),
//! `pkg/apis/rbac/v1/evaluation_helpers.go` (verb, group, resource, name and non-resource URL
//! matching) and `pkg/registry/rbac/validation/rule.go` (`VisitRulesFor`, `appliesTo`, the
//! binding describers) evaluate them; plus the bootstrap roles a cluster starts with.
//!
//! Invariant: a request is allowed exactly when some rule of a role bound to its user allows
//! it: every ClusterRoleBinding's role everywhere, a RoleBinding's role (a Role of the
//! binding's namespace, or a ClusterRole) only in the binding's namespace. Aggregation
//! (`aggregationRule`) is not evaluated.

use serde_json::{json, Value};

use crate::authn::UserInfo;
use crate::store::Store;

/// What is being asked: the apiserver's `authorizer.Attributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// The user asking.
    pub user: UserInfo,
    /// Kubernetes verb (`get`, `list`, ..., `impersonate`).
    pub verb: String,
    /// Whether this is a resource request (else `path` is a non-resource URL).
    pub resource_request: bool,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace (empty: cluster scope).
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// URL path (non-resource requests).
    pub path: String,
}

/// One `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyRule {
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources`.
    pub resources: Vec<String>,
    /// `resourceNames`.
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`.
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    /// Reads one element of a role's `rules`.
    pub fn from_value(v: &Value) -> Self {
        PolicyRule {
            verbs: strings(&v["verbs"]),
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
        }
    }

    /// `RuleAllows`.
    pub fn allows(&self, a: &Attributes) -> bool {
        let verb = self.verbs.iter().any(|v| v == "*" || *v == a.verb);
        if !a.resource_request {
            return verb
                && self.non_resource_urls.iter().any(|u| {
                    u == "*"
                        || *u == a.path
                        || (u.ends_with('*') && a.path.starts_with(u.trim_end_matches('*')))
                });
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        verb && self.api_groups.iter().any(|g| g == "*" || *g == a.group)
            && self.resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || (!a.subresource.is_empty()
                        && r.len() == a.subresource.len() + 2
                        && r.starts_with("*/")
                        && r.ends_with(a.subresource.as_str()))
            })
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// A rule with the binding it came from (`RBAC: allowed by ...`).
#[derive(Debug, Clone)]
pub struct SourcedRule {
    /// The rule.
    pub rule: PolicyRule,
    /// `ClusterRoleBinding "b" of ClusterRole "r" to User "u"` and the like.
    pub source: String,
}

/// `appliesToUser`: whether `subject` names `user` (a ServiceAccount subject without namespace
/// takes the binding's).
fn applies(user: &UserInfo, subject: &Value, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str().unwrap_or("") {
        "User" => user.name == name,
        "Group" => user.in_group(name),
        "ServiceAccount" => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let q = crate::go_fmt::quote;
    let kind = subject["kind"].as_str().unwrap_or("");
    let name = subject["name"].as_str().unwrap_or("");
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        return format!("{kind} {}", q(&format!("{name}/{ns}")));
    }
    format!("{kind} {}", q(name))
}

/// The rules of the role `role_ref` names, or the lister's NotFound text.
fn role_rules(
    store: &Store,
    role_ref: &Value,
    binding_ns: &str,
) -> Result<Vec<PolicyRule>, String> {
    let name = role_ref["name"].as_str().unwrap_or("");
    let (plural, ns, resource) = match role_ref["kind"].as_str().unwrap_or("") {
        "Role" => ("roles", binding_ns, "role"),
        "ClusterRole" => ("clusterroles", "", "clusterrole"),
        other => {
            return Err(format!(
                "unsupported role reference kind: {}",
                crate::go_fmt::quote(other)
            ))
        }
    };
    let rid = store.rid("rbac.authorization.k8s.io/v1", plural);
    match store.get(rid, ns, name) {
        Ok(o) => Ok(o.value()["rules"]
            .as_array()
            .map(|r| r.iter().map(PolicyRule::from_value).collect())
            .unwrap_or_default()),
        Err(_) => Err(format!(
            "{resource}.rbac.authorization.k8s.io {} not found",
            crate::go_fmt::quote(name)
        )),
    }
}

/// `VisitRulesFor`: every rule that applies to `user` in `namespace` (ClusterRoleBindings in
/// name order, then the namespace's RoleBindings in name order), and the errors met resolving
/// role references. `visit` returns false to stop.
pub fn visit_rules(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    mut visit: impl FnMut(&SourcedRule) -> bool,
) -> Vec<String> {
    let q = crate::go_fmt::quote;
    let mut errors = Vec::new();
    let crbs = store.rid("rbac.authorization.k8s.io/v1", "clusterrolebindings");
    let rbs = store.rid("rbac.authorization.k8s.io/v1", "rolebindings");
    let mut bindings: Vec<(Value, String)> = store
        .list_all(crbs)
        .iter()
        .map(|o| (o.value(), String::new()))
        .collect();
    if !namespace.is_empty() {
        bindings.extend(
            store
                .list_all(rbs)
                .iter()
                .filter(|o| o.namespace == namespace)
                .map(|o| (o.value(), namespace.to_string())),
        );
    }
    for (b, ns) in bindings {
        let subjects = b["subjects"].as_array().cloned().unwrap_or_default();
        let Some(subject) = subjects.iter().find(|s| applies(user, s, &ns)) else {
            continue;
        };
        let rules = match role_rules(store, &b["roleRef"], &ns) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let name = b["metadata"]["name"].as_str().unwrap_or("");
        let role = format!(
            "{} {}",
            b["roleRef"]["kind"].as_str().unwrap_or(""),
            q(b["roleRef"]["name"].as_str().unwrap_or(""))
        );
        let source = if ns.is_empty() {
            format!(
                "ClusterRoleBinding {} of {role} to {}",
                q(name),
                describe_subject(subject, "")
            )
        } else {
            format!(
                "RoleBinding {} of {role} to {}",
                q(&format!("{name}/{ns}")),
                describe_subject(subject, &ns)
            )
        };
        for rule in rules {
            if !visit(&SourcedRule {
                rule,
                source: source.clone(),
            }) {
                return errors;
            }
        }
    }
    errors
}

/// The RBAC authorizer's decision: Ok(reason) when allowed (`RBAC: allowed by ...`), Err(reason)
/// otherwise (empty, or `RBAC: <errors resolving role references>`).
pub fn authorize(store: &Store, a: &Attributes) -> Result<String, String> {
    let mut allowed = None;
    let errors = visit_rules(store, &a.user, &a.namespace, |r| {
        if r.rule.allows(a) {
            allowed = Some(format!("RBAC: allowed by {}", r.source));
            return false;
        }
        true
    });
    if let Some(reason) = allowed {
        return Ok(reason);
    }
    if errors.is_empty() {
        return Err(String::new());
    }
    // utilerrors.NewAggregate: one error as is, several (deduplicated) in brackets.
    let mut seen: Vec<&String> = Vec::new();
    for e in &errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    let joined: Vec<&str> = seen.iter().map(|s| s.as_str()).collect();
    Err(if joined.len() == 1 {
        format!("RBAC: {}", joined[0])
    } else {
        format!("RBAC: [{}]", joined.join(", "))
    })
}

/// The bootstrap ClusterRoles and ClusterRoleBindings every cluster starts with that matter
/// here (kubernetes' bootstrap policy, `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`):
/// `cluster-admin` (bound to `system:masters`), `system:discovery` and `system:basic-user`
/// (bound to `system:authenticated`), `system:public-info-viewer` (bound to
/// `system:authenticated` and `system:unauthenticated`).
pub fn bootstrap_objects() -> Vec<(&'static str, Value)> {
    let meta = |name: &str| {
        json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
               "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let role = |name: &str, rules: Value| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name), "rules": rules});
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": subjects})
    };
    vec![
        (
            "clusterroles",
            role(
                "cluster-admin",
                json!([
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:discovery",
                json!([
            {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:basic-user",
                json!([
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            ),
        ),
        (
            "clusterroles",
            role(
                "system:public-info-viewer",
                json!([
            {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterrolebindings",
            binding("cluster-admin", &[crate::authn::MASTERS]),
        ),
        (
            "clusterrolebindings",
            binding("system:discovery", &[crate::authn::AUTHENTICATED]),
        ),
        (
            "clusterrolebindings",
            binding("system:basic-user", &[crate::authn::AUTHENTICATED]),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:public-info-viewer",
                &[crate::authn::AUTHENTICATED, crate::authn::UNAUTHENTICATED],
            ),
        ),
    ]
}

/// Stores [`bootstrap_objects`].
pub fn seed_bootstrap(store: &Store) {
    for (plural, obj) in bootstrap_objects() {
        let rid = store.rid("rbac.authorization.k8s.io/v1", plural);
        store
            .create(rid, None, obj)
            .expect("bootstrap RBAC objects are valid and new");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn rules_match_as_evaluation_helpers() {
        let r = PolicyRule::from_value(
            &json!({"apiGroups": [""], "resources": ["pods", "*/scale"], "verbs": ["get", "patch"], "resourceNames": ["web"]}),
        );
        assert!(r.allows(&attrs("patch", "", "pods", "", "web")));
        assert!(!r.allows(&attrs("patch", "", "pods", "", "db")));
        assert!(!r.allows(&attrs("patch", "", "pods", "status", "web")));
        assert!(r.allows(&attrs("get", "", "deployments", "scale", "web")));
        assert!(!r.allows(&attrs("delete", "", "pods", "", "web")));
        assert!(!r.allows(&attrs("get", "apps", "pods", "", "web")));
        let all = PolicyRule::from_value(
            &json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
        );
        assert!(all.allows(&attrs(
            "deletecollection",
            "apps",
            "deployments",
            "status",
            ""
        )));
        let urls = PolicyRule::from_value(
            &json!({"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}),
        );
        let nr = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(urls.allows(&nr("/apis/apps/v1")));
        assert!(urls.allows(&nr("/version")));
        assert!(!urls.allows(&nr("/versions")));
        assert!(!urls.allows(&nr("/api")));
    }
}
