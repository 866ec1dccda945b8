//! `wasm-informer rbac`: the least-privilege RBAC that the host's
//! ServiceAccount needs for the plugins of a config directory, derived from
//! their manifests, never written by hand.
//!
//! Job: collect what the host itself does (list and watch every resource an
//! informer serves: the plugins' `resources` and `read` lists and host.toml's
//! pre-warmed resources; in leader or sharded mode, its Leases) and what each
//! plugin is granted (`[[write]]` tables, `events = true`), and render it as
//! Kubernetes objects: one ClusterRole and ClusterRoleBinding for cluster-wide
//! rules, one Role and RoleBinding per namespace that only namespaced grants
//! name, and a Role for the Leases in their namespace.
//!
//! Invariant: the rules are exactly the union of those needs: every verb a
//! manifest grants, on exactly the resource (and subresource) and namespaces it
//! names, plus list and watch on informer resources and create and patch on
//! Events for plugins that record them; nothing else.

use std::collections::{BTreeMap, BTreeSet};

use kube_informer::resource::ResourceId;
use wasm_informer_runtime::capability::events::EVENTS_RESOURCE;

use crate::config::{ConfigDir, ConfigError, PluginManifest};

/// Names of the rendered objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacNames {
    /// Name of the ClusterRole, the Roles and their bindings.
    pub name: String,
    /// The ServiceAccount the host runs as.
    pub service_account: String,
    /// The ServiceAccount's namespace.
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

/// One RBAC rule target: API group and resource (with `/subresource`).
type Target = (String, String);

/// What the host needs: verbs per target, cluster-wide and per namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    /// Cluster-wide rules (a ClusterRole).
    pub cluster: BTreeMap<Target, BTreeSet<String>>,
    /// Rules that hold in one namespace only (a Role each).
    pub namespaced: BTreeMap<String, BTreeMap<Target, BTreeSet<String>>>,
    /// Leader or sharded mode: the namespace of the host's Leases.
    pub leases: Option<String>,
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
    (id.group, res)
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

    /// The permissions the host needs for `manifests` and the pre-warmed
    /// resources `prewarm`.
    pub fn derive(manifests: &[PluginManifest], prewarm: &[String]) -> Self {
        let mut p = Self::default();
        let mut watched: BTreeSet<String> = prewarm.iter().cloned().collect();
        for m in manifests {
            watched.extend(m.readable());
            for g in &m.kube.grants {
                let verbs: Vec<&str> = g.verbs.iter().map(|v| v.rbac()).collect();
                let t = target(&g.resource, g.subresource.as_deref());
                match &g.namespaces {
                    None => p.add(None, t, &verbs),
                    Some(list) => {
                        for ns in list {
                            p.add(Some(ns), t.clone(), &verbs);
                        }
                    }
                }
            }
            if m.kube.events {
                // A plugin that sees one namespace only records Events there.
                p.add(
                    m.namespace.as_deref(),
                    target(EVENTS_RESOURCE, None),
                    &["create", "patch"],
                );
            }
        }
        for r in watched {
            p.add(None, target(&r, None), &["list", "watch"]);
        }
        // A namespace's rules already granted cluster-wide are left out.
        let cluster = p.cluster.clone();
        for rules in p.namespaced.values_mut() {
            for (t, verbs) in rules.iter_mut() {
                if let Some(c) = cluster.get(t) {
                    verbs.retain(|v| !c.contains(v));
                }
            }
            rules.retain(|_, v| !v.is_empty());
        }
        p.namespaced.retain(|_, r| !r.is_empty());
        p
    }
}

/// A YAML string (a JSON string is a valid YAML scalar).
fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn rules_yaml(out: &mut String, rules: &BTreeMap<Target, BTreeSet<String>>) {
    // Targets that share a group and the same verbs go in one rule.
    let mut grouped: BTreeMap<(String, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in rules {
        grouped
            .entry((group.clone(), verbs.iter().cloned().collect()))
            .or_default()
            .push(resource.clone());
    }
    out.push_str("rules:\n");
    for ((group, verbs), resources) in grouped {
        out.push_str(&format!("  - apiGroups: [{}]\n", q(&group)));
        let r: Vec<String> = resources.iter().map(|r| q(r)).collect();
        out.push_str(&format!("    resources: [{}]\n", r.join(", ")));
        let v: Vec<String> = verbs.iter().map(|v| q(v)).collect();
        out.push_str(&format!("    verbs: [{}]\n", v.join(", ")));
    }
}

fn subject(out: &mut String, names: &RbacNames) {
    out.push_str(&format!(
        "subjects:\n  - kind: ServiceAccount\n    name: {}\n    namespace: {}\n",
        q(&names.service_account),
        q(&names.namespace)
    ));
}

/// Renders `p` as a multi-document YAML stream that `kubectl apply -f`
/// takes as it is.
pub fn render(p: &Permissions, names: &RbacNames, source: &str) -> String {
    let mut out = format!(
        "# RBAC for the wasm-informer host, derived from {source} by `wasm-informer rbac`.\n\
         # Regenerate it when a manifest's resources, read list or grants change.\n"
    );
    out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n");
    out.push_str(&format!("metadata:\n  name: {}\n", q(&names.name)));
    rules_yaml(&mut out, &p.cluster);
    out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n");
    out.push_str(&format!("metadata:\n  name: {}\n", q(&names.name)));
    out.push_str(&format!(
        "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {}\n",
        q(&names.name)
    ));
    subject(&mut out, names);
    if let Some(ns) = &p.leases {
        let lease_role = format!("{}-leases", names.name);
        let rules = BTreeMap::from([(
            ("coordination.k8s.io".to_string(), "leases".to_string()),
            LEASE_VERBS.iter().map(|v| v.to_string()).collect(),
        )]);
        role(&mut out, &lease_role, ns, &rules, names);
    }
    for (ns, rules) in &p.namespaced {
        role(&mut out, &names.name, ns, rules, names);
    }
    out
}

/// A Role named `name` in `ns` with `rules`, and its RoleBinding.
fn role(
    out: &mut String,
    name: &str,
    ns: &str,
    rules: &BTreeMap<Target, BTreeSet<String>>,
    names: &RbacNames,
) {
    {
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
        subject(out, names);
    }
}

/// The RBAC of a config directory, rendered. Fails on the first manifest that
/// does not parse: RBAC for a directory the host would reject is not useful.
pub fn for_config_dir(config: &ConfigDir, names: &RbacNames) -> Result<String, ConfigError> {
    let mut manifests = Vec::new();
    for file in crate::config::manifest_files(&config.dir)? {
        manifests.push(PluginManifest::load(&file, &config.host.defaults)?);
    }
    let mut p = Permissions::derive(&manifests, &config.host.prewarm);
    if config.host.cluster.mode != crate::config::ClusterMode::None {
        p.leases = Some(
            config
                .host
                .cluster
                .namespace
                .clone()
                .unwrap_or_else(|| names.namespace.clone()),
        );
    }
    Ok(render(&p, names, &config.dir.display().to_string()))
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

    #[test]
    fn rules_are_the_union_of_the_manifests() {
        let a = manifest(
            r#"name = "a"
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
"#,
        );
        let b = manifest(
            r#"name = "b"
wasm = "p.wasm"
resources = ["apps/v1/deployments"]
namespace = "team-c"
events = true
[[write]]
resource = "v1/services"
verbs = ["create", "replace", "get"]
"#,
        );
        let p = Permissions::derive(&[a, b], &["v1/configmaps".to_string()]);
        let c = &p.cluster;
        assert_eq!(c[&("".into(), "pods".into())], verbs(&["list", "watch"]));
        assert_eq!(
            c[&("".into(), "namespaces".into())],
            verbs(&["list", "watch"])
        );
        assert_eq!(
            c[&("".into(), "configmaps".into())],
            verbs(&["list", "watch"])
        );
        assert_eq!(
            c[&("apps".into(), "deployments".into())],
            verbs(&["list", "watch"])
        );
        assert_eq!(
            c[&("apps".into(), "deployments/status".into())],
            verbs(&["update"])
        );
        assert_eq!(
            c[&("".into(), "services".into())],
            verbs(&["create", "get", "update"])
        );
        // `a` sees every namespace, so its Events go anywhere.
        assert_eq!(
            c[&("events.k8s.io".into(), "events".into())],
            verbs(&["create", "patch"])
        );
        assert_eq!(c.len(), 7);
        for ns in ["team-a", "team-b"] {
            assert_eq!(
                p.namespaced[ns],
                BTreeMap::from([(("".into(), "pods".into()), verbs(&["delete", "patch"]))])
            );
        }
        // `b`'s Events in team-c are covered by the cluster-wide rule.
        assert!(!p.namespaced.contains_key("team-c"));
        let yaml = render(&p, &RbacNames::default(), "config");
        assert!(yaml.contains("kind: ClusterRole\n"), "{yaml}");
        assert_eq!(yaml.matches("\nkind: Role\n").count(), 2, "{yaml}");
        assert_eq!(yaml.matches("\nkind: RoleBinding\n").count(), 2, "{yaml}");
    }
}
