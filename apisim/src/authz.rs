//! Authorization and impersonation as the apiserver's filters chain them: the privileged-group
//! authorizer (`system:masters`) before RBAC (or AlwaysAllow when RBAC is off), the 403 of
//! `responsewriters.ForbiddenStatusError` (k8s.io/apiserver/pkg/endpoints/handlers/
//! responsewriters/errors.go), and the impersonation filter
//! (k8s.io/apiserver/pkg/endpoints/filters/impersonation.go).
//!
//! Invariant: a request refused here reaches no handler and changes nothing; an impersonating
//! request acts as the impersonated user only after the caller was allowed to `impersonate`
//! every identity it asked for.

use serde_json::json;

use crate::authn::{self, UserInfo};
use crate::go_fmt::quote;
use crate::rbac::{self, Attributes};
use crate::status::ApiError;
use crate::store::Store;

/// The union authorizer: `system:masters` is allowed everything (reason empty); then RBAC when
/// `rbac` is on, else everything is allowed. Ok(reason) or Err(reason).
pub fn authorize(store: &Store, rbac_on: bool, a: &Attributes) -> Result<String, String> {
    if !rbac_on || a.user.in_group(authn::MASTERS) {
        return Ok(String::new());
    }
    rbac::authorize(store, a)
}

/// `ForbiddenStatusError`: 403 Forbidden, `<resource> "<name>" is forbidden: User "u" cannot
/// <verb> resource "<resource>[/<sub>]" in API group "<g>" in the namespace "<ns>"` (or `at the
/// cluster scope`; `User "u" cannot get path "/x"` for non-resource requests), with `: <reason>`
/// when the authorizer gave one; details name, group and kind (the resource).
pub fn forbidden(a: &Attributes, reason: &str) -> ApiError {
    let what = if !a.resource_request {
        format!(
            "User {} cannot {} path {}",
            quote(&a.user.name),
            a.verb,
            quote(&a.path)
        )
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let scope = if a.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", quote(&a.namespace))
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            quote(&a.user.name),
            a.verb,
            quote(&resource),
            quote(&a.group)
        )
    };
    // The apiserver escapes what could read as HTML.
    let what = what
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let err = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    let qualified = match (a.resource.is_empty(), a.group.is_empty()) {
        (true, _) => String::new(),
        (false, true) => a.resource.clone(),
        (false, false) => format!("{}.{}", a.resource, a.group),
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {err}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {} is forbidden: {err}", quote(&a.name))
    };
    let mut details = serde_json::Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), json!(a.name));
    }
    if !a.group.is_empty() {
        details.insert("group".into(), json!(a.group));
    }
    if !a.resource.is_empty() {
        details.insert("kind".into(), json!(a.resource));
    }
    ApiError {
        code: 403,
        reason: "Forbidden".into(),
        message,
        details: Some(serde_json::Value::Object(details)),
        continue_token: None,
    }
}

/// The impersonation headers of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: String,
    /// Every `Impersonate-Group`.
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: String,
    /// `Impersonate-Extra-KEY` values, by (percent-decoded, lower-cased) key.
    pub extra: Vec<(String, String)>,
}

impl Impersonation {
    /// Reads the headers.
    pub fn from_headers(h: &http::HeaderMap) -> Self {
        let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        let mut imp = Impersonation {
            user: h.get("impersonate-user").map(text).unwrap_or_default(),
            groups: h.get_all("impersonate-group").iter().map(text).collect(),
            uid: h.get("impersonate-uid").map(text).unwrap_or_default(),
            extra: Vec::new(),
        };
        for (k, v) in h {
            if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
                let key = crate::request_info::decode_path(key).unwrap_or_else(|_| key.to_string());
                imp.extra.push((key, text(v)));
            }
        }
        imp
    }

    /// Whether the request asks to impersonate anything.
    pub fn is_empty(&self) -> bool {
        self.user.is_empty()
            && self.groups.is_empty()
            && self.uid.is_empty()
            && self.extra.is_empty()
    }
}

/// What the impersonation filter decided.
#[derive(Debug)]
pub enum Impersonated {
    /// The request acts as this user.
    As(UserInfo),
    /// Refused with this error (403, or 500 for groups, uid or extras without a user).
    Refused(ApiError),
}

/// The impersonation filter: each requested identity (the service account or user, each group,
/// each extra, the uid) must be allowed to `requestor` as verb `impersonate` on `serviceaccounts`
/// NAME in namespace NS, `users` NAME, `groups` NAME, `userextras/KEY` VALUE, `uids` UID
/// (the last two in group `authentication.k8s.io`). The new user gets the service account's
/// groups when it is one and no group was given, and `system:authenticated` (or
/// `system:unauthenticated` for `system:anonymous`) unless already there.
pub fn impersonate(
    store: &Store,
    rbac_on: bool,
    requestor: &UserInfo,
    imp: &Impersonation,
    request_uri: &str,
) -> Impersonated {
    if imp.user.is_empty() {
        // buildImpersonationRequests: groups, extras or a uid without a user is an error,
        // rendered as responsewriters.InternalError renders it.
        let mut refs: Vec<String> = imp
            .groups
            .iter()
            .map(|g| format!("{{Group  {g}    }}"))
            .collect();
        refs.extend(
            imp.extra
                .iter()
                .map(|(k, v)| format!("{{UserExtra  {v}  authentication.k8s.io/v1  {k}}}")),
        );
        if !imp.uid.is_empty() {
            refs.push(format!("{{UID  {}  authentication.k8s.io/v1  }}", imp.uid));
        }
        let mut e = ApiError::internal(format!(
            "Internal Server Error: {}: requested [{}] without impersonating a user",
            quote(request_uri),
            refs.join(" ")
        ));
        e.details = None;
        return Impersonated::Refused(e);
    }
    let mut asks: Vec<Attributes> = Vec::new();
    let ask = |resource: &str, group: &str, ns: &str, name: &str, sub: &str| Attributes {
        user: requestor.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        group: group.into(),
        version: if group.is_empty() { "" } else { "v1" }.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: String::new(),
    };
    let mut groups: Vec<String> = Vec::new();
    let sa = authn::split_service_account(&imp.user);
    match sa {
        Some((ns, name)) => {
            asks.push(ask("serviceaccounts", "", ns, name, ""));
            if imp.groups.is_empty() {
                groups = authn::service_account_groups(ns);
            }
        }
        None => asks.push(ask("users", "", "", &imp.user, "")),
    }
    for g in &imp.groups {
        asks.push(ask("groups", "", "", g, ""));
        groups.push(g.clone());
    }
    for (k, v) in &imp.extra {
        asks.push(ask("userextras", "authentication.k8s.io", "", v, k));
    }
    if !imp.uid.is_empty() {
        asks.push(ask("uids", "authentication.k8s.io", "", &imp.uid, ""));
    }
    for a in &asks {
        if let Err(reason) = authorize(store, rbac_on, a) {
            return Impersonated::Refused(forbidden(a, &reason));
        }
    }
    let name = imp.user.clone();
    if name != authn::ANONYMOUS {
        if !groups
            .iter()
            .any(|g| g == authn::AUTHENTICATED || g == authn::UNAUTHENTICATED)
        {
            groups.push(authn::AUTHENTICATED.into());
        }
    } else if !groups.iter().any(|g| g == authn::UNAUTHENTICATED) {
        groups.push(authn::UNAUTHENTICATED.into());
    }
    Impersonated::As(UserInfo {
        name,
        uid: imp.uid.clone(),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: &str) -> UserInfo {
        UserInfo {
            name: n.into(),
            ..UserInfo::default()
        }
    }

    #[test]
    fn forbidden_messages_match_forbidden_status_error() {
        let mut a = Attributes {
            user: user("system:serviceaccount:wasm-informer:wasm-informer-p"),
            verb: "patch".into(),
            resource_request: true,
            resource: "pods".into(),
            namespace: "team-a".into(),
            name: "web".into(),
            ..Attributes::default()
        };
        let e = forbidden(&a, "");
        assert_eq!(
            e.message,
            r#"pods "web" is forbidden: User "system:serviceaccount:wasm-informer:wasm-informer-p" cannot patch resource "pods" in API group "" in the namespace "team-a""#
        );
        assert_eq!(
            e.to_status()["details"],
            json!({"name": "web", "kind": "pods"})
        );
        a.subresource = "status".into();
        assert!(forbidden(&a, "")
            .message
            .contains(r#"cannot patch resource "pods/status""#));
        a.name.clear();
        a.namespace.clear();
        a.subresource.clear();
        a.verb = "list".into();
        a.group = "apps".into();
        a.resource = "deployments".into();
        assert_eq!(
            forbidden(&a, "RBAC: x").message,
            r#"deployments.apps is forbidden: User "system:serviceaccount:wasm-informer:wasm-informer-p" cannot list resource "deployments" in API group "apps" at the cluster scope: RBAC: x"#
        );
        let nr = Attributes {
            user: user("system:anonymous"),
            verb: "get".into(),
            path: "/api".into(),
            ..Attributes::default()
        };
        let e = forbidden(&nr, "");
        assert_eq!(
            e.message,
            r#"forbidden: User "system:anonymous" cannot get path "/api""#
        );
        assert_eq!(e.to_status()["details"], json!({}));
    }
}
