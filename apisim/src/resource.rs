//! Resource types the simulator serves and the registry that maps URL segments to them.
//!
//! Invariant: a registered resource is identified by (group, version, plural) and never changes shape
//! once registered; `ResourceId` indexes into the registry and stays valid for the life of the store.

use parking_lot::RwLock;
use std::sync::Arc;

/// Index of a registered resource type inside a [`Registry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub usize);

/// Description of one served resource type (what discovery reports and routing needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// kubectl short names, e.g. `po`.
    pub short_names: Vec<String>,
    /// Whether a `/status` subresource is served (and status is ignored on the main resource).
    pub status_subresource: bool,
    /// Whether the apiserver keeps `metadata.generation` for this kind (1 on create, +1 on each
    /// spec change and when deletion starts). False for kinds whose strategy leaves it alone
    /// (configmaps, secrets, services, namespaces, leases, events, RBAC, ...).
    pub generation: bool,
    /// Whether a DELETE that removes the object answers with the object (the registry's
    /// `ReturnDeletedObject`); otherwise it answers a `Status` with `status: Success`.
    pub returns_deleted_object: bool,
    /// Whether the kind is a custom resource (served from a CRD): its fields have no types, so
    /// only its metadata is normalized on write.
    pub custom: bool,
}

impl ResourceType {
    /// Builds a resource type; `singular` defaults to the lower-cased kind.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ResourceType {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_lowercase(),
            namespaced,
            short_names: Vec::new(),
            status_subresource: false,
            generation: false,
            returns_deleted_object: false,
            custom: false,
        }
    }

    /// Marks the kind as keeping `metadata.generation`.
    pub fn with_generation(mut self) -> Self {
        self.generation = true;
        self
    }

    /// Marks the kind as answering a DELETE with the deleted object.
    pub fn returning_deleted_object(mut self) -> Self {
        self.returns_deleted_object = true;
        self
    }

    /// Adds kubectl short names.
    pub fn with_short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Marks the type as having a `/status` subresource.
    pub fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// `apiVersion` string as it appears in objects: `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Kind of the list object, e.g. `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Human-readable `group/version/plural` used in error messages and logs.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.api_version(), self.plural)
    }

    /// The resource name used in Status messages: `pods` or `deployments.apps`.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// The set of resource types served, open to runtime registration (used for CRDs).
#[derive(Debug, Default)]
pub struct Registry {
    types: RwLock<Vec<Arc<ResourceType>>>,
}

impl Registry {
    /// A registry holding the built-in types (see [`builtin_types`]).
    pub fn with_builtins() -> Self {
        let r = Registry::default();
        for t in builtin_types() {
            r.register(t);
        }
        r
    }

    /// Registers a type, or returns the id of the identical (group, version, plural) already there.
    pub fn register(&self, t: ResourceType) -> ResourceId {
        let mut types = self.types.write();
        if let Some(i) = types
            .iter()
            .position(|x| x.group == t.group && x.version == t.version && x.plural == t.plural)
        {
            return ResourceId(i);
        }
        types.push(Arc::new(t));
        ResourceId(types.len() - 1)
    }

    /// Looks a type up by group, version and plural.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceId> {
        self.types
            .read()
            .iter()
            .position(|x| x.group == group && x.version == version && x.plural == plural)
            .map(ResourceId)
    }

    /// Looks a type up by apiVersion and kind, as written in an object.
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<ResourceId> {
        self.types
            .read()
            .iter()
            .position(|x| x.api_version() == api_version && x.kind == kind)
            .map(ResourceId)
    }

    /// The type registered under `id`.
    pub fn get(&self, id: ResourceId) -> Arc<ResourceType> {
        self.types.read()[id.0].clone()
    }

    /// All registered types, in registration order.
    pub fn all(&self) -> Vec<(ResourceId, Arc<ResourceType>)> {
        self.types
            .read()
            .iter()
            .enumerate()
            .map(|(i, t)| (ResourceId(i), t.clone()))
            .collect()
    }

    /// Number of registered types.
    pub fn len(&self) -> usize {
        self.types.read().len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The built-in resource types. `generation` and `returns_deleted_object` follow the
/// apiserver's registry for each kind (Kubernetes 1.33: pods keep a generation since then).
pub fn builtin_types() -> Vec<ResourceType> {
    vec![
        ResourceType::new("", "v1", "Namespace", "namespaces", false)
            .with_short_names(&["ns"])
            .with_status()
            .returning_deleted_object(),
        ResourceType::new("", "v1", "Pod", "pods", true)
            .with_short_names(&["po"])
            .with_status()
            .with_generation()
            .returning_deleted_object(),
        ResourceType::new("", "v1", "ConfigMap", "configmaps", true).with_short_names(&["cm"]),
        ResourceType::new("", "v1", "Service", "services", true)
            .with_short_names(&["svc"])
            .with_status()
            .returning_deleted_object(),
        ResourceType::new("", "v1", "Event", "events", true).with_short_names(&["ev"]),
        ResourceType::new("", "v1", "Secret", "secrets", true),
        ResourceType::new("", "v1", "ServiceAccount", "serviceaccounts", true)
            .with_short_names(&["sa"])
            .returning_deleted_object(),
        ResourceType::new("apps", "v1", "Deployment", "deployments", true)
            .with_short_names(&["deploy"])
            .with_status()
            .with_generation(),
        ResourceType::new("coordination.k8s.io", "v1", "Lease", "leases", true),
        ResourceType::new("events.k8s.io", "v1", "Event", "events", true).with_short_names(&["ev"]),
        ResourceType::new(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
        ),
        ResourceType::new(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
        ),
        ResourceType::new("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
        ResourceType::new(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
        ),
        ResourceType::new(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        )
        .with_short_names(&["pdb"])
        .with_status()
        .with_generation(),
        ResourceType::new(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        )
        .with_short_names(&["crd", "crds"])
        .with_status()
        .with_generation()
        .returning_deleted_object(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_found_by_path_and_kind() {
        let r = Registry::with_builtins();
        let pods = r.find("", "v1", "pods").expect("pods registered");
        assert_eq!(r.get(pods).kind, "Pod");
        let dep = r.find_kind("apps/v1", "Deployment").expect("deployments");
        assert_eq!(r.get(dep).qualified_plural(), "deployments.apps");
        assert!(r.find("", "v1", "widgets").is_none());
    }

    #[test]
    fn registering_twice_returns_same_id() {
        let r = Registry::with_builtins();
        let n = r.len();
        let a = r.register(ResourceType::new("ex.io", "v1", "Widget", "widgets", true));
        let b = r.register(ResourceType::new("ex.io", "v1", "Widget", "widgets", true));
        assert_eq!(a, b);
        assert_eq!(r.len(), n + 1);
    }
}
