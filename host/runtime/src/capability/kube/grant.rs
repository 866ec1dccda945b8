//! One `[[write]]` grant: the verbs a plugin may use on one resource (or its
//! status subresource), in all namespaces or only in some.
//!
//! Invariant: a grant allows a request only when resource, subresource, verb
//! and namespace all match; a namespaced grant never allows a request without
//! a namespace (a cluster-scoped object, or every namespace at once).

use std::collections::BTreeSet;

use kube_informer::resource::ResourceId;

use crate::capability::api::{ApiRequest, Verb};

/// One `[[write]]` table of a manifest: which verbs a plugin may use on one
/// resource (or its subresource), optionally only in some namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteGrant {
    /// Resource id, for example `v1/pods`.
    pub resource: String,
    /// `status`, for the status subresource; `None` for the resource itself.
    pub subresource: Option<String>,
    /// Allowed verbs.
    pub verbs: BTreeSet<Verb>,
    /// Allowed namespaces; `None` for every namespace (and cluster-scoped
    /// objects).
    pub namespaces: Option<BTreeSet<String>>,
}

/// Why a grant was refused, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct GrantError {
    /// The manifest key at fault (`resource`, `subresource`, `verbs`,
    /// `namespaces`, ...).
    pub field: &'static str,
    /// Why.
    pub reason: String,
}

fn grant_error(field: &'static str, reason: impl Into<String>) -> GrantError {
    GrantError {
        field,
        reason: reason.into(),
    }
}

/// The subresources a grant may name.
pub const SUBRESOURCES: &[&str] = &["status"];

impl WriteGrant {
    /// Validates one grant.
    pub fn new(
        resource: &str,
        subresource: Option<&str>,
        verbs: &[String],
        namespaces: Option<&[String]>,
    ) -> Result<Self, GrantError> {
        ResourceId::parse(resource).map_err(|e| grant_error("resource", e.to_string()))?;
        if let Some(s) = subresource {
            if !SUBRESOURCES.contains(&s) {
                return Err(grant_error(
                    "subresource",
                    format!("unknown subresource {s:?}: the only one is \"status\""),
                ));
            }
        }
        if verbs.is_empty() {
            return Err(grant_error(
                "verbs",
                "must list at least one of get, create, replace, patch, delete",
            ));
        }
        let mut set = BTreeSet::new();
        for v in verbs {
            let verb = Verb::parse(v).ok_or_else(|| {
                grant_error(
                    "verbs",
                    format!("unknown verb {v:?}: expected get, create, replace, patch or delete"),
                )
            })?;
            if subresource.is_some() && !matches!(verb, Verb::Get | Verb::Replace | Verb::Patch) {
                return Err(grant_error(
                    "verbs",
                    format!(
                        "verb {v:?} does not apply to a subresource: use get, replace or patch"
                    ),
                ));
            }
            set.insert(verb);
        }
        let namespaces = match namespaces {
            None => None,
            Some([]) => {
                return Err(grant_error(
                    "namespaces",
                    "must list at least one namespace; leave it out for every namespace",
                ))
            }
            Some(list) => Some(list.iter().cloned().collect()),
        };
        Ok(Self {
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
            verbs: set,
            namespaces,
        })
    }

    /// Whether this grant allows `request`.
    pub fn allows(&self, request: &ApiRequest) -> bool {
        self.resource == request.resource
            && self.subresource == request.subresource
            && self.verbs.contains(&request.verb)
            && match (&self.namespaces, &request.namespace) {
                (None, _) => true,
                (Some(allowed), Some(ns)) => allowed.contains(ns),
                (Some(_), None) => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: Verb, resource: &str, ns: Option<&str>) -> ApiRequest {
        let mut r = ApiRequest::new(verb, resource);
        r.namespace = ns.map(str::to_string);
        r.name = Some("x".into());
        r
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_grant_allows_exactly_its_resource_verbs_and_namespaces() {
        let g = WriteGrant::new(
            "v1/pods",
            None,
            &strs(&["patch", "delete"]),
            Some(&strs(&["team-a"])),
        )
        .unwrap();
        assert!(g.allows(&req(Verb::Patch, "v1/pods", Some("team-a"))));
        assert!(g.allows(&req(Verb::Delete, "v1/pods", Some("team-a"))));
        assert!(
            !g.allows(&req(Verb::Create, "v1/pods", Some("team-a"))),
            "verb"
        );
        assert!(
            !g.allows(&req(Verb::Patch, "v1/pods", Some("team-b"))),
            "namespace"
        );
        assert!(
            !g.allows(&req(Verb::Patch, "v1/services", Some("team-a"))),
            "resource"
        );
        let mut status = req(Verb::Patch, "v1/pods", Some("team-a"));
        status.subresource = Some("status".into());
        assert!(
            !g.allows(&status),
            "the status subresource needs its own grant"
        );
        let all = WriteGrant::new("v1/pods", Some("status"), &strs(&["patch"]), None).unwrap();
        assert!(all.allows(&status));
    }

    #[test]
    fn bad_grants_name_the_field() {
        let e = WriteGrant::new("pods", None, &strs(&["patch"]), None).unwrap_err();
        assert_eq!(e.field, "resource");
        let e = WriteGrant::new("v1/pods", None, &strs(&["update"]), None).unwrap_err();
        assert_eq!(e.field, "verbs");
        assert!(e.reason.contains("\"update\""), "{e}");
        let e = WriteGrant::new("v1/pods", None, &[], None).unwrap_err();
        assert_eq!(e.field, "verbs");
        let e = WriteGrant::new("v1/pods", Some("scale"), &strs(&["patch"]), None).unwrap_err();
        assert_eq!(e.field, "subresource");
        let e = WriteGrant::new("v1/pods", Some("status"), &strs(&["delete"]), None).unwrap_err();
        assert_eq!(e.field, "verbs");
        let e = WriteGrant::new("v1/pods", None, &strs(&["get"]), Some(&[])).unwrap_err();
        assert_eq!(e.field, "namespaces");
    }
}
