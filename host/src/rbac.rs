//! `wasm-informer rbac`: the least-privilege RBAC of a config directory,
//! derived from its manifests, never written by hand.
//!
//! Job: collect what the host itself does (list and watch every resource an
//! informer serves: the plugins' `resources` and `read` lists and host.toml's
//! pre-warmed resources; in leader or sharded mode, its Leases) and what each
//! plugin is granted (`[[write]]` tables, `events`), and render it as
//! Kubernetes objects. Two shapes, following host.toml's `[identity]`:
//!
//! - `impersonate = false`: the host acts for every plugin, so its one
//!   ServiceAccount holds the union: a ClusterRole for cluster-wide rules, a
//!   Role per namespace that only namespaced grants name, a Role for Leases;
//! - `impersonate = true`: every plugin has its own ServiceAccount
//!   (`wasm-informer-PLUGIN`) with exactly its own grants, and the host's
//!   account may list and watch its informers, hold its Leases, and
//!   `impersonate` exactly those ServiceAccounts, nothing else. The API
//!   server then enforces each plugin's grants itself.
//!
//! Invariant: every subject's rules are exactly what it needs: every verb a
//! manifest grants, on exactly the resource (and subresource) and namespaces
//! it names, create and patch on Events where its events grant allows them,
//! list and watch on informer resources for the host; nothing else.

use std::collections::{BTreeMap, BTreeSet};

use kube_informer::resource::ResourceId;
use wasm_informer_runtime::capability::events::EVENTS_RESOURCE;

use crate::config::{ConfigDir, ConfigError, IdentitySettings, PluginManifest};

/// Names of the rendered objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacNames {
    /// Name of the host's ClusterRole, Roles and their bindings.
    pub name: String,
    /// The ServiceAccount the host runs as.
    pub service_account: String,
    /// The namespace of the host's ServiceAccount and of the plugins' ones.
    pub namespace: String,
}

impl Default for RbacNames {
    fn default() -> Self {
        Self {
            name: "wasm-informer".into(),
            service_account: "wasm-informer".into(),
            namespace: "wasm-informer".into(),
        }
    }
}

/// One RBAC rule target: API group, resource (with `/subresource`), and the
/// object names it is limited to (empty: every object).
type Target = (String, String, BTreeSet<String>);

/// Verbs per target, cluster-wide and per namespace: what one subject needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    /// Cluster-wide rules (a ClusterRole).
    pub cluster: BTreeMap<Target, BTreeSet<String>>,
    /// Rules that hold in one namespace only (a Role each).
    pub namespaced: BTreeMap<String, BTreeMap<Target, BTreeSet<String>>>,
}

/// What the host does with its Leases: read and watch them, create, renew
/// and release its own, and (sharded mode) delete one a dead replica left.
pub const LEASE_VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

fn target(resource: &str, subresource: Option<&str>) -> Target {
    let id = ResourceId::parse(resource).expect("manifests hold valid resource ids");
    let res = match subresource {
        Some(s) => format!("{}/{s}", id.plural),
        None => id.plural,
    };
    (id.group, res, BTreeSet::new())
}

impl Permissions {
    fn add(&mut self, ns: Option<&str>, t: Target, verbs: &[&str]) {
        let rules = match ns {
            None => &mut self.cluster,
            Some(ns) => self.namespaced.entry(ns.to_string()).or_default(),
        };
        rules
            .entry(t)
            .or_default()
            .extend(verbs.iter().map(|v| v.to_string()));
    }

    /// What `m` itself may do on the API server: its `[[write]]` grants and
    /// its events grant.
    pub fn of_plugin(m: &PluginManifest) -> Self {
        let mut p = Self::default();
        p.add_plugin(m);
        p.dedup();
        p
    }

    fn add_plugin(&mut self, m: &PluginManifest) {
        for g in &m.kube.grants {
            let verbs: Vec<&str> = g.verbs.iter().map(|v| v.rbac()).collect();
            let t = target(&g.resource, g.subresource.map(|s| s.as_str()));
            match &g.namespaces {
                None => self.add(None, t, &verbs),
                Some(list) => {
                    for ns in list {
                        self.add(Some(ns.as_str()), t.clone(), &verbs);
                    }
                }
            }
        }
        if let Some(events) = &m.kube.events {
            let t = target(EVENTS_RESOURCE, None);
            match &events.namespaces {
                None => self.add(None, t, &["create", "patch"]),
                Some(list) => {
                    for ns in list {
                        self.add(Some(ns.as_str()), t.clone(), &["create", "patch"]);
                    }
                }
            }
        }
    }

    /// List and watch on every resource an informer of the host serves.
    fn add_informers(&mut self, manifests: &[PluginManifest], prewarm: &[String]) {
        let mut watched: BTreeSet<String> = prewarm.iter().cloned().collect();
        for m in manifests {
            watched.extend(m.readable());
        }
        for r in watched {
            self.add(None, target(&r, None), &["list", "watch"]);
        }
    }

    /// The permissions the host needs when it acts for every plugin with its
    /// own identity: the union of the plugins' grants and list and watch for
    /// its informers (Leases: [`Subject::leases`]).
    pub fn derive(manifests: &[PluginManifest], prewarm: &[String]) -> Self {
        let mut p = Self::default();
        for m in manifests {
            p.add_plugin(m);
        }
        p.add_informers(manifests, prewarm);
        p.dedup();
        p
    }

    /// The permissions of the host when every plugin acts as its own
    /// ServiceAccount: list and watch for its informers, and `impersonate` on
    /// exactly the plugins' ServiceAccounts, in `namespace`.
    pub fn host_impersonating(
        manifests: &[PluginManifest],
        prewarm: &[String],
        namespace: &str,
    ) -> Self {
        let mut p = Self::default();
        p.add_informers(manifests, prewarm);
        let accounts: BTreeSet<String> = manifests
            .iter()
            .map(|m| IdentitySettings::account_name(&m.name))
            .collect();
        if !accounts.is_empty() {
            p.add(
                Some(namespace),
                (String::new(), "serviceaccounts".into(), accounts),
                &["impersonate"],
            );
        }
        p.dedup();
        p
    }

    /// Leaves out of each namespace's rules what the cluster-wide ones grant.
    fn dedup(&mut self) {
        let cluster = self.cluster.clone();
        for rules in self.namespaced.values_mut() {
            for (t, verbs) in rules.iter_mut() {
                if let Some(c) = cluster.get(t) {
                    verbs.retain(|v| !c.contains(v));
                }
            }
            rules.retain(|_, v| !v.is_empty());
        }
        self.namespaced.retain(|_, r| !r.is_empty());
    }
}

/// One identity and what it may do: the host, or one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// Name of its ClusterRole, Roles and bindings.
    pub role_name: String,
    /// Its ServiceAccount.
    pub service_account: String,
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Whether the ServiceAccount is rendered too (the host's own is part of
    /// the deployment manifests).
    pub render_account: bool,
    /// Its rules.
    pub permissions: Permissions,
    /// Leader or sharded mode: the namespace of the host's Leases.
    pub leases: Option<String>,
}

/// A YAML string (a JSON string is a valid YAML scalar).
fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn list(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let v: Vec<String> = items.into_iter().map(|s| q(s.as_ref())).collect();
    format!("[{}]", v.join(", "))
}

fn rules_yaml(out: &mut String, rules: &BTreeMap<Target, BTreeSet<String>>) {
    // Targets that share a group, the same names and the same verbs go in one rule.
    type Key = (String, BTreeSet<String>, Vec<String>);
    let mut grouped: BTreeMap<Key, Vec<String>> = BTreeMap::new();
    for ((group, resource, names), verbs) in rules {
        grouped
            .entry((
                group.clone(),
                names.clone(),
                verbs.iter().cloned().collect(),
            ))
            .or_default()
            .push(resource.clone());
    }
    out.push_str("rules:\n");
    for ((group, names, verbs), resources) in grouped {
        out.push_str(&format!("  - apiGroups: [{}]\n", q(&group)));
        out.push_str(&format!("    resources: {}\n", list(&resources)));
        if !names.is_empty() {
            out.push_str(&format!("    resourceNames: {}\n", list(&names)));
        }
        out.push_str(&format!("    verbs: {}\n", list(&verbs)));
    }
}

fn subject_yaml(out: &mut String, s: &Subject) {
    out.push_str(&format!(
        "subjects:\n  - kind: ServiceAccount\n    name: {}\n    namespace: {}\n",
        q(&s.service_account),
        q(&s.namespace)
    ));
}

/// A Role named `name` in `ns` with `rules`, and its RoleBinding to `s`.
fn role(
    out: &mut String,
    name: &str,
    ns: &str,
    rules: &BTreeMap<Target, BTreeSet<String>>,
    s: &Subject,
) {
    out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n");
    out.push_str(&format!(
        "metadata:\n  name: {}\n  namespace: {}\n",
        q(name),
        q(ns)
    ));
    rules_yaml(out, rules);
    out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n");
    out.push_str(&format!(
        "metadata:\n  name: {}\n  namespace: {}\n",
        q(name),
        q(ns)
    ));
    out.push_str(&format!(
        "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {}\n",
        q(name)
    ));
    subject_yaml(out, s);
}

/// Renders one subject: its ServiceAccount (if asked), a ClusterRole and
/// ClusterRoleBinding when it has cluster-wide rules, and a Role and
/// RoleBinding per namespace.
fn render_subject(out: &mut String, s: &Subject) {
    if s.render_account {
        out.push_str("---\napiVersion: v1\nkind: ServiceAccount\n");
        out.push_str(&format!(
            "metadata:\n  name: {}\n  namespace: {}\n",
            q(&s.service_account),
            q(&s.namespace)
        ));
    }
    let p = &s.permissions;
    if !p.cluster.is_empty() {
        out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n");
        out.push_str(&format!("metadata:\n  name: {}\n", q(&s.role_name)));
        rules_yaml(out, &p.cluster);
        out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n");
        out.push_str(&format!("metadata:\n  name: {}\n", q(&s.role_name)));
        out.push_str(&format!(
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {}\n",
            q(&s.role_name)
        ));
        subject_yaml(out, s);
    }
    if let Some(ns) = &s.leases {
        let rules = BTreeMap::from([(
            (
                "coordination.k8s.io".to_string(),
                "leases".to_string(),
                BTreeSet::new(),
            ),
            LEASE_VERBS.iter().map(|v| v.to_string()).collect(),
        )]);
        role(out, &format!("{}-leases", s.role_name), ns, &rules, s);
    }
    for (ns, rules) in &p.namespaced {
        role(out, &s.role_name, ns, rules, s);
    }
}

/// Renders the subjects as a multi-document YAML stream that `kubectl apply
/// -f` takes as it is.
pub fn render(subjects: &[Subject], source: &str) -> String {
    let mut out = format!(
        "# RBAC for wasm-informer, derived from {source} by `wasm-informer rbac`.\n\
         # Regenerate it when a manifest's resources, read list or grants change.\n"
    );
    for s in subjects {
        render_subject(&mut out, s);
    }
    out
}

/// The subjects of a config directory: the host, and with `[identity]
/// impersonate = true` one per plugin.
pub fn subjects(
    config: &ConfigDir,
    manifests: &[PluginManifest],
    names: &RbacNames,
) -> Vec<Subject> {
    let host = &config.host;
    let leases = (host.cluster.mode != crate::config::ClusterMode::None).then(|| {
        host.cluster
            .namespace
            .clone()
            .unwrap_or_else(|| names.namespace.clone())
    });
    let host_subject = |permissions| Subject {
        role_name: names.name.clone(),
        service_account: names.service_account.clone(),
        namespace: names.namespace.clone(),
        render_account: false,
        permissions,
        leases: leases.clone(),
    };
    if !host.identity.impersonate {
        return vec![host_subject(Permissions::derive(manifests, &host.prewarm))];
    }
    let mut out = vec![host_subject(Permissions::host_impersonating(
        manifests,
        &host.prewarm,
        &names.namespace,
    ))];
    for m in manifests {
        let account = IdentitySettings::account_name(&m.name);
        out.push(Subject {
            role_name: account.clone(),
            service_account: account,
            namespace: names.namespace.clone(),
            render_account: true,
            permissions: Permissions::of_plugin(m),
            leases: None,
        });
    }
    out
}

/// The RBAC of a config directory, rendered. Fails on the first manifest that
/// does not parse: RBAC for a directory the host would reject is not useful.
pub fn for_config_dir(config: &ConfigDir, names: &RbacNames) -> Result<String, ConfigError> {
    let mut manifests = Vec::new();
    for file in crate::config::manifest_files(&config.dir)? {
        manifests.push(PluginManifest::load(&file, &config.host.defaults)?);
    }
    let subjects = subjects(config, &manifests, names);
    Ok(render(&subjects, &config.dir.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> PluginManifest {
        let dir = std::env::temp_dir().join(format!("rbac-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.wasm"), b"").unwrap();
        let path = dir.join("p.toml");
        PluginManifest::parse(&path, text, &Default::default()).unwrap()
    }

    fn verbs(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn t(group: &str, resource: &str) -> Target {
        (group.into(), resource.into(), BTreeSet::new())
    }

    const A: &str = r#"name = "a"
wasm = "p.wasm"
resources = ["v1/pods"]
read = ["v1/namespaces"]
events = true
[[write]]
resource = "v1/pods"
verbs = ["patch", "delete"]
namespaces = ["team-a", "team-b"]
[[write]]
resource = "apps/v1/deployments"
subresource = "status"
verbs = ["replace"]
"#;

    const B: &str = r#"name = "b_2"
wasm = "p.wasm"
resources = ["apps/v1/deployments"]
namespace = "team-c"
events = true
[[write]]
resource = "v1/services"
verbs = ["create", "replace", "get"]
"#;

    #[test]
    fn rules_are_the_union_of_the_manifests() {
        let p = Permissions::derive(&[manifest(A), manifest(B)], &["v1/configmaps".to_string()]);
        let c = &p.cluster;
        assert_eq!(c[&t("", "pods")], verbs(&["list", "watch"]));
        assert_eq!(c[&t("", "namespaces")], verbs(&["list", "watch"]));
        assert_eq!(c[&t("", "configmaps")], verbs(&["list", "watch"]));
        assert_eq!(c[&t("apps", "deployments")], verbs(&["list", "watch"]));
        assert_eq!(c[&t("apps", "deployments/status")], verbs(&["update"]));
        assert_eq!(c[&t("", "services")], verbs(&["create", "get", "update"]));
        // `a` sees every namespace, so its Events go anywhere.
        assert_eq!(
            c[&t("events.k8s.io", "events")],
            verbs(&["create", "patch"])
        );
        assert_eq!(c.len(), 7);
        for ns in ["team-a", "team-b"] {
            assert_eq!(
                p.namespaced[ns],
                BTreeMap::from([(t("", "pods"), verbs(&["delete", "patch"]))])
            );
        }
        // `b`'s Events in team-c are covered by the cluster-wide rule.
        assert!(!p.namespaced.contains_key("team-c"));
    }

    #[test]
    fn each_plugin_gets_exactly_its_own_grants_and_the_host_only_impersonates_them() {
        let (a, b) = (manifest(A), manifest(B));
        let pa = Permissions::of_plugin(&a);
        assert_eq!(pa.cluster.len(), 2, "{pa:?}");
        assert_eq!(
            pa.cluster[&t("apps", "deployments/status")],
            verbs(&["update"])
        );
        assert_eq!(
            pa.cluster[&t("events.k8s.io", "events")],
            verbs(&["create", "patch"])
        );
        assert!(
            !pa.cluster.contains_key(&t("", "pods")),
            "no list/watch: the host reads"
        );
        assert_eq!(
            pa.namespaced["team-a"][&t("", "pods")],
            verbs(&["delete", "patch"])
        );
        let pb = Permissions::of_plugin(&b);
        // `b` sees team-c only, so its Events go there only.
        assert_eq!(
            pb.namespaced["team-c"],
            BTreeMap::from([(t("events.k8s.io", "events"), verbs(&["create", "patch"]))])
        );
        let host = Permissions::host_impersonating(&[a, b], &[], "wasm-informer");
        assert!(
            host.cluster
                .values()
                .all(|v| *v == verbs(&["list", "watch"])),
            "{host:?}"
        );
        let accounts: BTreeSet<String> = [
            "wasm-informer-a".to_string(),
            "wasm-informer-b-2".to_string(),
        ]
        .into();
        assert_eq!(
            host.namespaced["wasm-informer"],
            BTreeMap::from([(
                (String::new(), "serviceaccounts".into(), accounts),
                verbs(&["impersonate"])
            )])
        );
    }
}
