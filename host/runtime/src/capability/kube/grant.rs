//! One `[[write]]` grant: the verbs a plugin may use on one resource (or its
//! status subresource), in all namespaces or only in some.
//!
//! Invariants: a grant allows a request only when resource, subresource,
//! verb and namespace all match, compared as typed values; a grant limited
//! to namespaces never allows a request without one, and cannot be made for
//! a cluster-scoped resource (a config error, [`WriteGrant::check_scope`]);
//! a server-side apply needs `create` as well as `patch`, unless it must not
//! create ([`crate::capability::api::ApiRequest::must_exist`]).

use std::collections::BTreeSet;

use kube_informer::names::{Namespace, Subresource};
use kube_informer::resource::{ResourceId, ResourceSpec};

use crate::capability::api::{ApiRequest, PatchType, Verb};

/// One `[[write]]` table of a manifest: which verbs a plugin may use on one
/// resource (or its subresource), optionally only in some namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteGrant {
    /// Resource id, for example `v1/pods`.
    pub resource: String,
    /// The status subresource; `None` for the resource itself.
    pub subresource: Option<Subresource>,
    /// Allowed verbs.
    pub verbs: BTreeSet<Verb>,
    /// Allowed namespaces; `None` for every namespace (and cluster-scoped
    /// objects).
    pub namespaces: Option<BTreeSet<Namespace>>,
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

impl WriteGrant {
    /// Validates one grant.
    pub fn new(
        resource: &str,
        subresource: Option<&str>,
        verbs: &[String],
        namespaces: Option<&[String]>,
    ) -> Result<Self, GrantError> {
        ResourceId::parse(resource).map_err(|e| grant_error("resource", e.to_string()))?;
        let subresource = subresource
            .map(|s| {
                Subresource::parse(s).map_err(|_| {
                    grant_error(
                        "subresource",
                        format!("unknown subresource {s:?}: the only one is \"status\""),
                    )
                })
            })
            .transpose()?;
        if verbs.is_empty() {
            return Err(grant_error(
                "verbs",
                "must list at least one of get, create, replace, patch, delete",
            ));
        }
        let mut set = BTreeSet::new();
        for v in verbs {
            let verb = Verb::parse(v).ok_or_else(|| {
                // RBAC's `update` is `replace` here (the WIT's name for a PUT).
                let hint = match v.as_str() {
                    "update" => "; the RBAC verb update is \"replace\" here".to_string(),
                    _ => kube_informer::suggest::did_you_mean(
                        v,
                        Verb::ALL.iter().map(|v| v.as_str()),
                    ),
                };
                grant_error(
                    "verbs",
                    format!(
                        "unknown verb {v:?}{hint}: expected get, create, replace, patch or delete"
                    ),
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
            Some(list) => Some(
                list.iter()
                    .map(|n| {
                        Namespace::parse(n).map_err(|e| grant_error("namespaces", e.to_string()))
                    })
                    .collect::<Result<BTreeSet<_>, _>>()?,
            ),
        };
        let grant = Self {
            resource: resource.to_string(),
            subresource,
            verbs: set,
            namespaces,
        };
        if let Ok(Some(spec)) = ResourceSpec::builtin(resource) {
            grant.check_scope(&spec)?;
        }
        Ok(grant)
    }

    /// Checks the grant against its resource as the server serves it: a
    /// grant limited to namespaces on a cluster-scoped resource would be
    /// cluster-wide in effect, so it is refused. Built-in resources are
    /// checked by [`WriteGrant::new`]; the host calls this for the others
    /// once discovery has told their scope.
    pub fn check_scope(&self, spec: &ResourceSpec) -> Result<(), GrantError> {
        if self.namespaces.is_some() && !spec.namespaced {
            return Err(grant_error(
                "namespaces",
                format!(
                    "{} is cluster-scoped: a grant on it cannot be limited to namespaces; \
                     remove `namespaces` to grant it cluster-wide",
                    self.resource
                ),
            ));
        }
        Ok(())
    }

    /// Whether this grant covers `verb` on `request`'s resource, subresource
    /// and namespace.
    fn covers(&self, verb: Verb, request: &ApiRequest) -> bool {
        let t = &request.target;
        self.resource == t.resource_id()
            && self.subresource == t.subresource()
            && self.verbs.contains(&verb)
            && match (&self.namespaces, t.namespace()) {
                (None, _) => true,
                (Some(allowed), Some(ns)) => allowed.contains(ns),
                (Some(_), None) => false,
            }
    }

    /// Whether this grant allows `request`. A server-side apply may create
    /// the object, so it needs `create` too, unless it must exist.
    pub fn allows(&self, request: &ApiRequest) -> bool {
        let creating_apply = request.verb == Verb::Patch
            && request.patch == Some(PatchType::Apply)
            && !request.must_exist
            && request.target.subresource().is_none();
        self.covers(request.verb, request)
            && (!creating_apply || self.covers(Verb::Create, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::api::Target;

    fn req(verb: Verb, resource: &str, ns: Option<&str>) -> ApiRequest {
        req_sub(verb, resource, ns, None)
    }

    fn req_sub(
        verb: Verb,
        resource: &str,
        ns: Option<&str>,
        sub: Option<Subresource>,
    ) -> ApiRequest {
        let spec = ResourceSpec::builtin(resource).unwrap().unwrap();
        let name = (verb != Verb::Create).then_some("x");
        ApiRequest::new(verb, Target::of(spec, ns, name, sub).unwrap()).unwrap()
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
        let status = req_sub(
            Verb::Patch,
            "v1/pods",
            Some("team-a"),
            Some(Subresource::Status),
        );
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
        let e = WriteGrant::new("v1/pods", None, &strs(&["get"]), Some(&strs(&["Bad_NS"])))
            .unwrap_err();
        assert_eq!(e.field, "namespaces");
    }

    #[test]
    fn a_namespace_limited_grant_on_a_cluster_scoped_resource_is_refused() {
        let e = WriteGrant::new(
            "v1/namespaces",
            None,
            &strs(&["patch"]),
            Some(&strs(&["wa"])),
        )
        .unwrap_err();
        assert_eq!(e.field, "namespaces");
        assert!(e.reason.contains("cluster-scoped"), "{e}");
        assert!(WriteGrant::new("v1/namespaces", None, &strs(&["patch"]), None).is_ok());
        // A resource the table does not know is checked once its scope is.
        let g = WriteGrant::new(
            "example.com/v1/widgets",
            None,
            &strs(&["patch"]),
            Some(&strs(&["wa"])),
        )
        .unwrap();
        let cluster = ResourceSpec {
            id: ResourceId::parse("example.com/v1/widgets").unwrap(),
            kind: "Widget".into(),
            namespaced: false,
        };
        assert_eq!(g.check_scope(&cluster).unwrap_err().field, "namespaces");
    }

    #[test]
    fn apply_needs_create_unless_the_object_must_exist() {
        let patch_only = WriteGrant::new("v1/configmaps", None, &strs(&["patch"]), None).unwrap();
        let both =
            WriteGrant::new("v1/configmaps", None, &strs(&["patch", "create"]), None).unwrap();
        let mut apply = req(Verb::Patch, "v1/configmaps", Some("a"));
        apply.patch = Some(PatchType::Apply);
        assert!(!patch_only.allows(&apply), "an apply may create");
        assert!(both.allows(&apply));
        apply.must_exist = true;
        assert!(patch_only.allows(&apply));
        let mut merge = req(Verb::Patch, "v1/configmaps", Some("a"));
        merge.patch = Some(PatchType::Merge);
        assert!(patch_only.allows(&merge), "a merge patch never creates");
    }
}
