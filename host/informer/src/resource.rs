//! Resource ids (`v1/pods`, `apps/v1/deployments`, CRDs) and the API paths that
//! serve them.
//!
//! Job: turn the id a manifest names into group, version, plural and scope, using
//! a table of well-known built-in resources or, for anything else, API discovery.
//!
//! Invariant: a [`ResourceSpec`] always names a resource the server (or the
//! built-in table) vouched for; its [`ResourceSpec::id`] round-trips through
//! [`ResourceId::parse`].

#![warn(missing_docs)]

use std::fmt;

use crate::names::{NameRule, Namespace, ObjectName, Subresource};

#[cfg(feature = "client")]
use http::Request;

/// A parsed resource id: `VERSION/PLURAL` for the core group, `GROUP/VERSION/PLURAL`
/// otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceId {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, for example `v1`.
    pub version: String,
    /// Plural resource name, for example `pods`.
    pub plural: String,
}

/// A namespace that does not fit a resource's scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A namespaced resource was addressed without a namespace.
    #[error("{0} is namespaced: a namespace is required")]
    NeedsNamespace(String),
    /// A cluster-scoped resource was addressed in a namespace.
    #[error("{resource} is cluster-scoped: pass no namespace (got {namespace:?})")]
    ClusterScoped {
        /// The resource id.
        resource: String,
        /// The namespace given.
        namespace: String,
    },
}

/// Why a resource id could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// The id is not `VERSION/PLURAL` or `GROUP/VERSION/PLURAL`.
    #[error("invalid resource id {id:?}: {reason}")]
    Invalid {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Discovery does not list the resource.
    #[error(
        "unknown resource {id:?}: the API server does not serve {plural:?} in {group_version:?}{suggestion}"
    )]
    Unknown {
        /// The id as given.
        id: String,
        /// The group/version asked.
        group_version: String,
        /// The plural asked.
        plural: String,
        /// `; did you mean "..."?` when a served resource is close, else empty.
        suggestion: String,
    },
    /// Discovery itself failed.
    #[cfg(feature = "client")]
    #[error("discovery for resource {id:?} failed: {source}")]
    Discovery {
        /// The id as given.
        id: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ResourceId {
    /// Parses `v1/pods` or `apps/v1/deployments`.
    ///
    /// ```
    /// use kube_informer::resource::ResourceId;
    /// let r = ResourceId::parse("apps/v1/deployments").unwrap();
    /// assert_eq!((r.group.as_str(), r.version.as_str(), r.plural.as_str()), ("apps", "v1", "deployments"));
    /// assert!(ResourceId::parse("pods").is_err());
    /// ```
    pub fn parse(id: &str) -> Result<Self, ResourceError> {
        let invalid = |reason| ResourceError::Invalid {
            id: id.to_string(),
            reason,
        };
        let parts: Vec<&str> = id.split('/').collect();
        let (group, version, plural) = match parts.as_slice() {
            [v, p] => ("", *v, *p),
            [g, v, p] => (*g, *v, *p),
            _ => return Err(invalid("expected VERSION/PLURAL or GROUP/VERSION/PLURAL")),
        };
        if version.is_empty() || plural.is_empty() || (parts.len() == 3 && group.is_empty()) {
            return Err(invalid("empty group, version or plural"));
        }
        let ok = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        };
        if !ok(group) || !ok(version) || !ok(plural) {
            return Err(invalid(
                "only lower-case letters, digits, '-' and '.' are allowed",
            ));
        }
        Ok(Self {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
        })
    }

    /// The resource id of the k8s-openapi type `K`: `v1/pods` for `Pod`,
    /// `apps/v1/deployments` for `Deployment`.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube_informer::resource::ResourceId;
    /// assert_eq!(ResourceId::of::<Deployment>().to_string(), "apps/v1/deployments");
    /// ```
    #[cfg(feature = "client")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Self {
            group: K::GROUP.to_string(),
            version: K::VERSION.to_string(),
            plural: K::URL_PATH_SEGMENT.to_string(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.group_version(), self.plural)
    }
}

/// A resource the informer can list and watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceSpec {
    /// Group, version and plural.
    pub id: ResourceId,
    /// Kind, for example `Pod` (empty when unknown).
    pub kind: String,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
}

/// Built-in resources that need no discovery: (group, version, plural, kind, namespaced).
const BUILTIN: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "pods", "Pod", true),
    ("", "v1", "services", "Service", true),
    ("", "v1", "endpoints", "Endpoints", true),
    ("", "v1", "configmaps", "ConfigMap", true),
    ("", "v1", "secrets", "Secret", true),
    ("", "v1", "serviceaccounts", "ServiceAccount", true),
    ("", "v1", "events", "Event", true),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
    ),
    ("", "v1", "nodes", "Node", false),
    ("", "v1", "namespaces", "Namespace", false),
    ("", "v1", "persistentvolumes", "PersistentVolume", false),
    ("apps", "v1", "deployments", "Deployment", true),
    ("apps", "v1", "replicasets", "ReplicaSet", true),
    ("apps", "v1", "statefulsets", "StatefulSet", true),
    ("apps", "v1", "daemonsets", "DaemonSet", true),
    ("batch", "v1", "jobs", "Job", true),
    ("batch", "v1", "cronjobs", "CronJob", true),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", true),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ),
    ("coordination.k8s.io", "v1", "leases", "Lease", true),
    ("events.k8s.io", "v1", "events", "Event", true),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
    ),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
];

impl ResourceSpec {
    /// Looks `id` up in the built-in table (no I/O).
    pub fn builtin(id: &str) -> Result<Option<Self>, ResourceError> {
        let rid = ResourceId::parse(id)?;
        Ok(BUILTIN
            .iter()
            .find(|(g, v, p, _, _)| *g == rid.group && *v == rid.version && *p == rid.plural)
            .map(|(_, _, _, kind, namespaced)| ResourceSpec {
                id: rid.clone(),
                kind: kind.to_string(),
                namespaced: *namespaced,
            }))
    }

    #[cfg(feature = "client")]
    /// Resolves `id`: the built-in table first, then API discovery
    /// (`/api/VERSION` or `/apis/GROUP/VERSION`), which is how CRDs are found.
    pub async fn resolve(client: &kube::Client, id: &str) -> Result<Self, ResourceError> {
        if let Some(spec) = Self::builtin(id)? {
            return Ok(spec);
        }
        let rid = ResourceId::parse(id)?;
        let gv = rid.group_version();
        let list = if rid.group.is_empty() {
            client.list_core_api_resources(&rid.version).await
        } else {
            client.list_api_group_resources(&gv).await
        };
        let list = match list {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let builtin: Vec<String> = BUILTIN
                    .iter()
                    .map(|(g, v, p, _, _)| match *g {
                        "" => format!("{v}/{p}"),
                        g => format!("{g}/{v}/{p}"),
                    })
                    .collect();
                return Err(ResourceError::Unknown {
                    id: id.to_string(),
                    group_version: gv,
                    plural: rid.plural,
                    suggestion: crate::suggest::did_you_mean(
                        id,
                        builtin.iter().map(String::as_str),
                    ),
                });
            }
            Err(source) => {
                return Err(ResourceError::Discovery {
                    id: id.to_string(),
                    source,
                })
            }
        };
        list.resources
            .iter()
            .find(|r| r.name == rid.plural)
            .map(|r| ResourceSpec {
                id: rid.clone(),
                kind: r.kind.clone(),
                namespaced: r.namespaced,
            })
            .ok_or_else(|| {
                let served: Vec<String> = list
                    .resources
                    .iter()
                    .filter(|r| !r.name.contains('/'))
                    .map(|r| format!("{gv}/{}", r.name))
                    .collect();
                ResourceError::Unknown {
                    id: id.to_string(),
                    group_version: gv.clone(),
                    plural: rid.plural.clone(),
                    suggestion: crate::suggest::did_you_mean(id, served.iter().map(String::as_str)),
                }
            })
    }

    /// The resource id string, for example `apps/v1/deployments`.
    pub fn id_string(&self) -> String {
        self.id.to_string()
    }

    /// The collection path across all namespaces, for example `/api/v1/pods`.
    pub fn collection_path(&self) -> String {
        if self.id.group.is_empty() {
            format!("/api/{}/{}", self.id.version, self.id.plural)
        } else {
            format!(
                "/apis/{}/{}/{}",
                self.id.group, self.id.version, self.id.plural
            )
        }
    }

    /// How the API server validates this resource's object names. Built-in
    /// kinds have their own rule; a resource found by discovery gets the
    /// least every kind asks for (a path segment), and the server applies
    /// the rest.
    pub fn name_rule(&self) -> NameRule {
        match (self.id.group.as_str(), self.id.plural.as_str()) {
            ("", "namespaces") => NameRule::Label,
            ("", "services") => NameRule::Dns1035Label,
            ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
            _ if self.builtin_kind() => NameRule::Subdomain,
            _ => NameRule::PathSegment,
        }
    }

    fn builtin_kind(&self) -> bool {
        BUILTIN.iter().any(|(g, v, p, _, _)| {
            *g == self.id.group && *v == self.id.version && *p == self.id.plural
        })
    }

    /// Checks that `namespace` fits the resource's scope: a namespaced
    /// resource needs one, a cluster-scoped one takes none.
    pub fn check_scope(&self, namespace: Option<&Namespace>) -> Result<(), ScopeError> {
        match (self.namespaced, namespace) {
            (true, None) => Err(ScopeError::NeedsNamespace(self.id_string())),
            (false, Some(ns)) => Err(ScopeError::ClusterScoped {
                resource: self.id_string(),
                namespace: ns.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// The path of a request built from typed parts only: the collection in
    /// `namespace` (a create), or one object and optionally its subresource,
    /// for example `/api/v1/namespaces/ns/pods/web/status`. The namespace
    /// must fit the resource's scope ([`ResourceSpec::check_scope`]).
    ///
    /// ```
    /// use kube_informer::names::{Namespace, ObjectName, Subresource};
    /// use kube_informer::resource::ResourceSpec;
    /// let pods = ResourceSpec::builtin("v1/pods").unwrap().unwrap();
    /// let ns = Namespace::parse("team-a").unwrap();
    /// let web = ObjectName::parse("web", pods.name_rule()).unwrap();
    /// assert_eq!(
    ///     pods.path(Some(&ns), Some(&web), Some(Subresource::Status)).unwrap(),
    ///     "/api/v1/namespaces/team-a/pods/web/status"
    /// );
    /// assert!(pods.path(None, Some(&web), None).is_err());
    /// ```
    pub fn path(
        &self,
        namespace: Option<&Namespace>,
        name: Option<&ObjectName>,
        subresource: Option<Subresource>,
    ) -> Result<String, ScopeError> {
        self.check_scope(namespace)?;
        let mut p = if self.id.group.is_empty() {
            format!("/api/{}", self.id.version)
        } else {
            format!("/apis/{}/{}", self.id.group, self.id.version)
        };
        if let Some(ns) = namespace {
            p.push_str("/namespaces/");
            p.push_str(&encode_query_value(ns.as_str()));
        }
        p.push('/');
        p.push_str(&self.id.plural);
        if let Some(name) = name {
            p.push('/');
            p.push_str(&encode_query_value(name.as_str()));
            if let Some(s) = subresource {
                p.push('/');
                p.push_str(s.as_str());
            }
        }
        Ok(p)
    }

    #[cfg(feature = "client")]
    /// A GET request for the collection with the given query pairs (already
    /// percent-safe values are escaped again here).
    pub fn get_request(&self, query: &[(&str, &str)]) -> Request<Vec<u8>> {
        let mut uri = self.collection_path();
        for (i, (k, v)) in query.iter().enumerate() {
            uri.push(if i == 0 { '?' } else { '&' });
            uri.push_str(k);
            uri.push('=');
            uri.push_str(&encode_query_value(v));
        }
        Request::get(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .unwrap_or_else(|_| Request::new(Vec::new()))
    }
}

/// Percent-encodes a query value or a path segment (RFC 3986 unreserved
/// characters pass through).
pub fn encode_query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_and_group_ids() {
        let p = ResourceId::parse("v1/pods").unwrap();
        assert_eq!(p.group, "");
        assert_eq!(p.to_string(), "v1/pods");
        let d = ResourceId::parse("apps/v1/deployments").unwrap();
        assert_eq!(d.group_version(), "apps/v1");
        assert_eq!(d.to_string(), "apps/v1/deployments");
    }

    #[test]
    fn rejects_bad_ids_with_reason() {
        for bad in ["pods", "", "a/b/c/d", "/v1/pods", "v1/Pods", "v1/"] {
            let e = ResourceId::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn builtin_paths() {
        let pods = ResourceSpec::builtin("v1/pods").unwrap().unwrap();
        assert!(pods.namespaced);
        assert_eq!(pods.collection_path(), "/api/v1/pods");
        let ks = Namespace::parse("kube-system").unwrap();
        assert_eq!(
            pods.path(Some(&ks), None, None).unwrap(),
            "/api/v1/namespaces/kube-system/pods"
        );
        let dep = ResourceSpec::builtin("apps/v1/deployments")
            .unwrap()
            .unwrap();
        assert_eq!(dep.collection_path(), "/apis/apps/v1/deployments");
        let nodes = ResourceSpec::builtin("v1/nodes").unwrap().unwrap();
        assert!(!nodes.namespaced);
        let ns = Namespace::parse("x").unwrap();
        let n1 = ObjectName::parse("n1", nodes.name_rule()).unwrap();
        assert_eq!(
            nodes.path(None, Some(&n1), None).unwrap(),
            "/api/v1/nodes/n1"
        );
        assert!(matches!(
            nodes.path(Some(&ns), Some(&n1), None),
            Err(ScopeError::ClusterScoped { .. })
        ));
        assert!(ResourceSpec::builtin("example.com/v1/widgets")
            .unwrap()
            .is_none());
    }

    #[cfg(feature = "client")]
    #[test]
    fn query_values_are_encoded() {
        let pods = ResourceSpec::builtin("v1/pods").unwrap().unwrap();
        let req = pods.get_request(&[("limit", "500"), ("continue", "a b/=")]);
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/pods?limit=500&continue=a%20b%2F%3D"
        );
    }
}
