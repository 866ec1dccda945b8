//! A plugin's API call as a typed request: the one place where the strings a
//! guest hands the host (resource, namespace, name, body) become values
//! checked by the API server's own rules, and the one place a request's
//! method, path and query are rendered from those values.
//!
//! Job: [`Target::parse`] resolves the resource (the built-in table or the
//! server's discovery, through [`ClusterApi::resolve`]), checks the
//! namespace against the resource's scope and the RFC 1123 label rule, and
//! the name against the resource's name rule ([`kube_informer::names`]);
//! [`ApiRequest::line`] renders the request line that is sent, every segment
//! percent-encoded, and nothing in it that is not a typed value or a constant.
//!
//! Invariants:
//! - an [`ApiRequest`] names its object only through a [`Target`], and a
//!   [`Target`] exists only after every part was checked: its path names
//!   exactly one resource, one namespace (or none, for a cluster-scoped
//!   resource), one name (or none, for a create) and one subresource from
//!   the closed set a grant can name. A guest string that would change the
//!   path (a `/`, `?`, `#`, `%`, `.` or `..`, an empty name, a namespace on a
//!   cluster-scoped resource) is refused here with the rule it broke, and
//!   nothing is sent;
//! - the request line is a function of the typed request alone: the audit
//!   line is rendered from the line the host sent, so it says what the server
//!   received (dry run included, read back from the query).

use std::time::Duration;

use kube_informer::names::{quoted, NameError, Namespace, ObjectName, Subresource};
use kube_informer::resource::{encode_query_value, ResourceId, ResourceSpec};

use super::api::ClusterApi;

/// What a request does. The names are the manifest's verbs; each maps to one
/// RBAC verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// A live read that bypasses the cache (RBAC `get`).
    Get,
    /// POST (RBAC `create`).
    Create,
    /// PUT with the object's resourceVersion as precondition (RBAC `update`).
    Replace,
    /// PATCH in any of its forms, server-side apply included (RBAC `patch`).
    Patch,
    /// DELETE (RBAC `delete`).
    Delete,
}

impl Verb {
    /// Every verb, in manifest order.
    pub const ALL: [Verb; 5] = [
        Verb::Get,
        Verb::Create,
        Verb::Replace,
        Verb::Patch,
        Verb::Delete,
    ];

    /// The manifest's name for the verb.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Replace => "replace",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    /// The RBAC verb that allows it.
    pub fn rbac(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Replace => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    /// The HTTP method.
    pub fn method(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Create => "POST",
            Verb::Replace => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }

    /// Parses a manifest verb.
    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the verb changes the cluster (and so is sent as a dry run
    /// when dry run is on).
    pub fn writes(self) -> bool {
        self != Verb::Get
    }
}

/// The form of a PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
    /// Kubernetes strategic merge patch.
    StrategicMerge,
    /// Server-side apply.
    Apply,
}

impl PatchType {
    /// The request's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }

    /// Name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            PatchType::Merge => "merge",
            PatchType::Json => "json",
            PatchType::StrategicMerge => "strategic-merge",
            PatchType::Apply => "apply",
        }
    }
}

/// What happens to a deleted object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are kept, their owner reference removed.
    Orphan,
    /// The object goes at once; the garbage collector deletes dependents.
    Background,
    /// Dependents go first, then the object.
    Foreground,
}

impl Propagation {
    /// The `propagationPolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// Options of a DELETE. The preconditions go into the JSON body (never the
/// path or the query), where serialisation escapes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete only if the object still has this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// What happens to dependents (the server's default when `None`).
    pub propagation: Option<Propagation>,
}

/// Why a guest's arguments do not make a request: the argument at fault
/// (`resource`, `namespace`, `name`, `body`, ...) and the rule it broke. The
/// message quotes the argument with [`quoted`], so it is safe to log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Malformed {
    /// The argument at fault, as the `field` of an `invalid` cause.
    pub field: &'static str,
    /// What is wrong, naming the rule.
    pub message: String,
}

impl Malformed {
    /// A malformed `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

impl From<NameError> for Malformed {
    fn from(e: NameError) -> Self {
        let field = match e.what {
            "namespace" => "namespace",
            "subresource" => "subresource",
            _ => "name",
        };
        Self::new(field, e.to_string())
    }
}

/// What a request addresses, every part checked: the resource as the server
/// serves it, the namespace (exactly when the resource is namespaced), the
/// name (none for a create) and the subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    resource: ResourceSpec,
    namespace: Option<Namespace>,
    name: Option<ObjectName>,
    subresource: Option<Subresource>,
}

impl Target {
    /// Parses a guest's arguments: the resource id (resolved by `api`), the
    /// namespace, the name (`None` for a create) and the subresource.
    pub fn parse(
        api: &dyn ClusterApi,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        subresource: Option<Subresource>,
    ) -> Result<Self, Malformed> {
        let id = ResourceId::parse(resource).map_err(|_| {
            Malformed::new(
                "resource",
                format!(
                    "invalid resource {}: expected VERSION/PLURAL or GROUP/VERSION/PLURAL in \
                     lower case, for example v1/pods or apps/v1/deployments",
                    quoted(resource)
                ),
            )
        })?;
        let spec = api
            .resolve(&id)
            .map_err(|why| Malformed::new("resource", why))?;
        Self::of(spec, namespace, name, subresource)
    }

    /// Parses the namespace and the name of a request on the resolved
    /// resource `spec`.
    pub fn of(
        spec: ResourceSpec,
        namespace: Option<&str>,
        name: Option<&str>,
        subresource: Option<Subresource>,
    ) -> Result<Self, Malformed> {
        let namespace = namespace.map(Namespace::parse).transpose()?;
        spec.check_scope(namespace.as_ref())
            .map_err(|e| Malformed::new("namespace", e.to_string()))?;
        let name = name
            .map(|n| ObjectName::parse(n, spec.name_rule()))
            .transpose()?;
        if subresource.is_some() && name.is_none() {
            return Err(Malformed::new(
                "subresource",
                "a subresource belongs to one object: a name is required",
            ));
        }
        Ok(Self {
            resource: spec,
            namespace,
            name,
            subresource,
        })
    }

    /// The resource as the server serves it.
    pub fn resource(&self) -> &ResourceSpec {
        &self.resource
    }

    /// The resource id, for example `v1/pods`.
    pub fn resource_id(&self) -> String {
        self.resource.id_string()
    }

    /// The namespace (exactly when the resource is namespaced).
    pub fn namespace(&self) -> Option<&Namespace> {
        self.namespace.as_ref()
    }

    /// The object's name (none for a create).
    pub fn name(&self) -> Option<&ObjectName> {
        self.name.as_ref()
    }

    /// The subresource.
    pub fn subresource(&self) -> Option<Subresource> {
        self.subresource
    }

    /// The object's key, `namespace/name` or `name` (empty name for a
    /// create whose name the body gives).
    pub fn key(&self) -> String {
        let name = self.name.as_ref().map(|n| n.as_str()).unwrap_or("");
        match &self.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        }
    }

    /// The request path.
    pub fn path(&self) -> String {
        self.resource
            .path(
                self.namespace.as_ref(),
                self.name.as_ref(),
                self.subresource,
            )
            .expect("a target's namespace fits its resource's scope")
    }
}

/// One request to the API server, every part typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// What it does.
    pub verb: Verb,
    /// What it addresses.
    pub target: Target,
    /// Request body: the object (create, replace), or the patch.
    pub body: Option<String>,
    /// The form of a patch.
    pub patch: Option<PatchType>,
    /// A server-side apply that must not create the object.
    pub must_exist: bool,
    /// Sent with `dryRun=All`: validated and answered, nothing persisted.
    pub dry_run: bool,
    /// `fieldManager` of a write (set by the host, never by the guest).
    pub field_manager: Option<String>,
    /// `force` of a server-side apply.
    pub force: bool,
    /// Options of a delete.
    pub delete: DeleteOptions,
    /// The user the request acts as (`Impersonate-User`), set by the host.
    pub impersonate: Option<String>,
    /// The largest answer the host reads back for this request.
    pub max_answer_bytes: usize,
}

/// The default of [`ApiRequest::max_answer_bytes`].
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 4 << 20;

impl ApiRequest {
    /// A request for `verb` on `target` with every option unset. A create
    /// addresses its resource's collection (the body names the object);
    /// every other verb addresses one object, never the collection (a DELETE
    /// without a name would delete every object of the namespace).
    pub fn new(verb: Verb, target: Target) -> Result<Self, Malformed> {
        match (verb, target.name.is_some()) {
            (Verb::Create, true) => {
                return Err(Malformed::new(
                    "name",
                    "a create names its object in the body, not in the path",
                ))
            }
            (Verb::Create, false) | (_, true) => {}
            (_, false) => {
                return Err(Malformed::new(
                    "name",
                    format!(
                        "{} names one object: a name is required (an empty one would address \
                         the whole collection)",
                        verb.as_str()
                    ),
                ))
            }
        }
        Ok(Self {
            verb,
            target,
            body: None,
            patch: None,
            must_exist: false,
            dry_run: false,
            field_manager: None,
            force: false,
            delete: DeleteOptions::default(),
            impersonate: None,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        })
    }

    /// The object's key, `namespace/name` or `name`; for a create, the
    /// name its body gives (`generateName` followed by `*` when the server
    /// picks it), so that a line about it names the object.
    pub fn key(&self) -> String {
        if self.verb != Verb::Create {
            return self.target.key();
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Meta {
            name: Option<String>,
            #[serde(rename = "generateName")]
            generate_name: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Body {
            metadata: Meta,
        }
        let meta = self
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str::<Body>(b).ok())
            .unwrap_or_default()
            .metadata;
        let name = match (meta.name, meta.generate_name) {
            (Some(n), _) if !n.is_empty() => n,
            (_, Some(g)) => format!("{g}*"),
            _ => String::new(),
        };
        // Only a name the server could store (or the bare namespace).
        let name = if kube_informer::names::path_segment(&name).is_empty() {
            quoted(&name).trim_matches('"').to_string()
        } else {
            String::new()
        };
        match self.target.namespace() {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        }
    }

    /// The resource id, for example `v1/pods`.
    pub fn resource(&self) -> String {
        self.target.resource_id()
    }

    /// The request's `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match (self.verb, self.patch) {
            (Verb::Patch, Some(p)) => p.content_type(),
            _ => "application/json",
        }
    }

    /// The request line sent for this request, with the server-side
    /// `timeout` of a write when one is given.
    pub fn line(&self, server_timeout: Option<Duration>) -> RequestLine {
        let mut query: Vec<(&'static str, String)> = Vec::new();
        if self.dry_run && self.verb.writes() {
            query.push(("dryRun", "All".into()));
        }
        if let Some(fm) = &self.field_manager {
            if matches!(self.verb, Verb::Create | Verb::Replace | Verb::Patch) {
                query.push(("fieldManager", fm.clone()));
            }
        }
        if self.force && self.patch == Some(PatchType::Apply) {
            query.push(("force", "true".into()));
        }
        if let Some(t) = server_timeout.filter(|_| self.verb.writes()) {
            query.push(("timeout", format!("{}ms", t.as_millis().max(1))));
        }
        RequestLine {
            method: self.verb.method(),
            path: self.target.path(),
            query,
        }
    }
}

/// The method, path and query of a request as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: &'static str,
    /// The path, every segment percent-encoded.
    pub path: String,
    /// The query parameters, in order, not yet encoded.
    pub query: Vec<(&'static str, String)>,
}

impl RequestLine {
    /// The encoded query string, without `?` (empty when there is none).
    pub fn query_string(&self) -> String {
        self.query
            .iter()
            .map(|(k, v)| format!("{k}={}", encode_query_value(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// The path and query, as the request's URI.
    pub fn uri(&self) -> String {
        let q = self.query_string();
        if q.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{q}", self.path)
        }
    }

    /// Whether the line asks for a dry run (read from the query).
    pub fn dry_run(&self) -> bool {
        self.query.iter().any(|(k, v)| *k == "dryRun" && v == "All")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::api::{Exchange, Tenure};
    use std::time::Instant;

    /// Resolves the built-in table only, sends nothing.
    struct Builtin;

    impl ClusterApi for Builtin {
        fn call(
            &self,
            _: &ApiRequest,
            _: Instant,
            _: Option<Tenure>,
            _: &crate::stop::Stop,
        ) -> Exchange {
            unreachable!("nothing is sent in these tests")
        }
    }

    fn target(
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<Subresource>,
    ) -> Result<Target, Malformed> {
        Target::parse(&Builtin, resource, ns, name, sub)
    }

    #[test]
    fn paths_are_built_from_checked_parts() {
        let t = target(
            "v1/pods",
            Some("team-a"),
            Some("web"),
            Some(Subresource::Status),
        )
        .unwrap();
        assert_eq!(t.path(), "/api/v1/namespaces/team-a/pods/web/status");
        let t = target("apps/v1/deployments", Some("a"), None, None).unwrap();
        assert_eq!(t.path(), "/apis/apps/v1/namespaces/a/deployments");
        let t = target("v1/namespaces", None, Some("wb"), None).unwrap();
        assert_eq!(t.path(), "/api/v1/namespaces/wb");
    }

    #[test]
    fn what_would_change_the_path_is_refused_with_its_rule() {
        for (resource, ns, name, field, rule) in [
            (
                "v1/pods",
                Some("team-b/pods/web#"),
                Some("x"),
                "namespace",
                "RFC 1123 label",
            ),
            (
                "v1/pods",
                Some("a?b"),
                Some("x"),
                "namespace",
                "RFC 1123 label",
            ),
            ("v1/pods", Some("a"), Some(""), "name", "may not be empty"),
            ("v1/pods", Some("a"), Some(".."), "name", "may not be '..'"),
            ("v1/pods", Some("a"), Some("web%2Fstatus"), "name", "'%'"),
            ("v1/pods", Some("a"), Some("web/status"), "name", "'/'"),
            (
                "v1/pods",
                Some("a"),
                Some("wéb"),
                "name",
                "RFC 1123 subdomain",
            ),
            ("v1/pods", None, Some("web"), "namespace", "is namespaced"),
            (
                "v1/namespaces",
                Some("wa"),
                Some("wb"),
                "namespace",
                "cluster-scoped",
            ),
            ("pods", Some("a"), Some("x"), "resource", "VERSION/PLURAL"),
            (
                "v1/pods/status",
                Some("a"),
                Some("x"),
                "resource",
                "does not serve it",
            ),
        ] {
            let e = target(resource, ns, name, None).unwrap_err();
            assert_eq!(e.field, field, "{resource} {ns:?} {name:?}: {e}");
            assert!(e.message.contains(rule), "{resource} {ns:?} {name:?}: {e}");
            assert!(!e.message.contains('\n'));
        }
    }

    #[test]
    fn the_line_carries_only_typed_values_and_constants() {
        let t = target("v1/configmaps", Some("a"), Some("cfg"), None).unwrap();
        let mut r = ApiRequest::new(Verb::Patch, t).unwrap();
        r.patch = Some(PatchType::Apply);
        r.force = true;
        r.dry_run = true;
        r.field_manager = Some("wasm-informer/p".into());
        let line = r.line(Some(Duration::from_millis(1500)));
        assert_eq!(line.method, "PATCH");
        assert_eq!(
            line.uri(),
            "/api/v1/namespaces/a/configmaps/cfg?dryRun=All&fieldManager=wasm-informer%2Fp&force=true&timeout=1500ms"
        );
        assert!(line.dry_run());
        let get = ApiRequest::new(
            Verb::Get,
            target("v1/configmaps", Some("a"), Some("cfg"), None).unwrap(),
        )
        .unwrap();
        let collection = target("v1/pods", Some("a"), None, None).unwrap();
        assert_eq!(
            ApiRequest::new(Verb::Delete, collection.clone())
                .unwrap_err()
                .field,
            "name"
        );
        assert!(ApiRequest::new(Verb::Create, collection).is_ok());
        let one = target("v1/pods", Some("a"), Some("web"), None).unwrap();
        assert!(ApiRequest::new(Verb::Create, one).is_err());
        assert_eq!(
            get.line(Some(Duration::from_secs(1))).uri(),
            "/api/v1/namespaces/a/configmaps/cfg"
        );
    }
}
