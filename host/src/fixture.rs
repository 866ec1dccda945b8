//! Kubernetes objects and changes read from files, for `wasm-informer test`:
//! what `kubectl get -o yaml` or `-o json` prints (one object, a `List`, or
//! several documents), and the changes `kubectl get -w --output-watch-events`
//! prints (`{type, object}` watch events).
//!
//! Job: parse a file into documents (YAML with `---` separators, or a stream
//! of JSON values), flatten lists, and tell each object's resource id
//! (`v1/pods`, `apps/v1/deployments`, or a custom resource's) from its
//! `apiVersion` and `kind`, using the simulator's table of kinds, the
//! CustomResourceDefinitions among the objects, and Kubernetes' plural rule
//! for any other kind.
//!
//! Invariant: every object returned has a `metadata.name` and a resource id;
//! anything else is an error naming the file, the document and the reason.

use std::path::Path;

use apisim::resource::{Registry, ResourceType};
use serde_json::Value;

/// One object of a fixture, with the resource it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct FixtureObject {
    /// Resource id, for example `v1/pods`.
    pub resource: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The whole object.
    pub value: Value,
}

impl FixtureObject {
    /// `metadata.namespace` of a namespaced object.
    pub fn namespace(&self) -> Option<&str> {
        if !self.namespaced {
            return None;
        }
        self.value["metadata"]["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// The cache key: `namespace/name` or `name`.
    pub fn key(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}/{}", self.name()),
            None => self.name().to_string(),
        }
    }
}

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// `ADDED`: a new object.
    Added,
    /// `MODIFIED`: a new state of a known object.
    Modified,
    /// `DELETED`: the object is gone.
    Deleted,
    /// A bare object: added when new, modified otherwise.
    Upsert,
}

/// One change of a fixture's event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What it does.
    pub change: ChangeType,
    /// The object it is about.
    pub object: FixtureObject,
    /// The document's position in the file (1-based), for messages.
    pub document: usize,
}

/// Parses a file into JSON documents: a stream of JSON values when it starts
/// with `{` or `[`, YAML documents otherwise. A JSON array counts as one
/// document per element.
pub fn documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_documents(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`documents`] of a text.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    let mut docs = Vec::new();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        for (i, v) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            let v = v.map_err(|e| format!("JSON value {}: {e}", i + 1))?;
            match v {
                Value::Array(items) => docs.extend(items),
                v => docs.push(v),
            }
        }
    } else {
        let parsed: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| format!("YAML: {e}"))?;
        docs.extend(parsed.into_iter().filter(|v| !v.is_null()));
    }
    Ok(docs)
}

/// `items` of a `List` (`kind: List` or any `...List` with `items`), else the
/// value itself.
fn flatten(v: Value, out: &mut Vec<Value>) {
    let is_list = v["kind"].as_str().is_some_and(|k| k.ends_with("List")) && v["items"].is_array();
    if is_list {
        if let Value::Object(mut m) = v {
            if let Some(Value::Array(items)) = m.remove("items") {
                for i in items {
                    flatten(i, out);
                }
            }
        }
    } else {
        out.push(v);
    }
}

/// Kubernetes' plural of a kind, as kubectl and the API server guess it for a
/// kind they do not know.
pub fn plural_of(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k.ends_with('s') || k.ends_with("ch") || k.ends_with("sh") || k.ends_with('x') {
        format!("{k}es")
    } else if let Some(stem) = k.strip_suffix('y') {
        if stem.ends_with(['a', 'e', 'i', 'o', 'u']) {
            format!("{k}s")
        } else {
            format!("{stem}ies")
        }
    } else {
        format!("{k}s")
    }
}

/// The resource id of a type: `VERSION/PLURAL` for the core group,
/// `GROUP/VERSION/PLURAL` otherwise.
pub fn resource_id(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("{}/{}", rt.version, rt.plural)
    } else {
        format!("{}/{}/{}", rt.group, rt.version, rt.plural)
    }
}

/// Tells resources from `apiVersion` and `kind`.
pub struct Resolver<'a> {
    registry: &'a Registry,
}

impl<'a> Resolver<'a> {
    /// Resolves against `registry` (the simulator's), which learns the kinds
    /// of the CustomResourceDefinitions and guessed kinds it is given.
    pub fn new(registry: &'a Registry) -> Self {
        Self { registry }
    }

    /// Registers the custom resources that `objects` define.
    pub fn learn_definitions(&self, objects: &[Value]) {
        for o in objects {
            if o["kind"] == "CustomResourceDefinition"
                && o["apiVersion"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("apiextensions.k8s.io/"))
            {
                apisim::crd::register(self.registry, o);
            }
        }
    }

    /// The object with its resource.
    pub fn object(&self, v: Value) -> Result<FixtureObject, String> {
        let api_version = v["apiVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or("no apiVersion")?
            .to_string();
        let kind = v["kind"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or("no kind")?
            .to_string();
        if v["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            return Err(format!("{kind} without metadata.name"));
        }
        let rt = match self.registry.find_kind(&api_version, &kind) {
            Some(id) => self.registry.get(id),
            None => {
                // A kind nobody defined here: Kubernetes' plural, scoped as
                // the object says.
                let (group, version) = match api_version.split_once('/') {
                    Some((g, v)) => (g.to_string(), v.to_string()),
                    None => (String::new(), api_version.clone()),
                };
                let namespaced = v["metadata"]["namespace"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty());
                let mut t =
                    ResourceType::new(&group, &version, &kind, &plural_of(&kind), namespaced);
                t.custom = true;
                let id = self.registry.register(t);
                self.registry.get(id)
            }
        };
        if rt.namespaced
            && v["metadata"]["namespace"]
                .as_str()
                .is_none_or(str::is_empty)
        {
            return Err(format!(
                "{kind} {} without metadata.namespace",
                v["metadata"]["name"].as_str().unwrap_or_default()
            ));
        }
        Ok(FixtureObject {
            resource: resource_id(&rt),
            namespaced: rt.namespaced,
            value: v,
        })
    }

    /// Every object of an objects file, in file order.
    pub fn objects(&self, path: &Path) -> Result<Vec<FixtureObject>, String> {
        let mut flat = Vec::new();
        for d in documents(path)? {
            flatten(d, &mut flat);
        }
        self.learn_definitions(&flat);
        flat.into_iter()
            .enumerate()
            .map(|(i, v)| {
                self.object(v)
                    .map_err(|e| format!("{}: object {}: {e}", path.display(), i + 1))
            })
            .collect()
    }

    /// Every change of an events file, in file order.
    pub fn changes(&self, path: &Path) -> Result<Vec<Change>, String> {
        let mut flat = Vec::new();
        for d in documents(path)? {
            flatten(d, &mut flat);
        }
        let mut out = Vec::new();
        for (i, d) in flat.into_iter().enumerate() {
            let at = |e: String| format!("{}: change {}: {e}", path.display(), i + 1);
            let is_watch_event = d.get("type").is_some_and(Value::is_string)
                && d.get("object").is_some_and(Value::is_object)
                && d.get("apiVersion").is_none();
            let (change, object) = if is_watch_event {
                let t = d["type"].as_str().unwrap_or_default().to_ascii_uppercase();
                let change = match t.as_str() {
                    "ADDED" => ChangeType::Added,
                    "MODIFIED" => ChangeType::Modified,
                    "DELETED" => ChangeType::Deleted,
                    other => {
                        return Err(at(format!(
                            "type {other:?}: expected ADDED, MODIFIED or DELETED"
                        )))
                    }
                };
                let Value::Object(mut m) = d else {
                    unreachable!("checked to be an object")
                };
                (change, m.remove("object").unwrap_or_default())
            } else {
                (ChangeType::Upsert, d)
            };
            out.push(Change {
                change,
                object: self.object(object).map_err(at)?,
                document: i + 1,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_list_yaml_and_json_streams_give_the_same_objects() {
        let yaml = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, namespace: ns}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\n";
        let json = r#"{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns"}}]}
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"}}"#;
        for text in [yaml, json] {
            let mut flat = Vec::new();
            for d in parse_documents(text).unwrap() {
                flatten(d, &mut flat);
            }
            let reg = Registry::with_builtins();
            let r = Resolver::new(&reg);
            let objs: Vec<FixtureObject> = flat.into_iter().map(|v| r.object(v).unwrap()).collect();
            let got: Vec<(String, String)> =
                objs.iter().map(|o| (o.resource.clone(), o.key())).collect();
            assert_eq!(
                got,
                vec![
                    ("v1/pods".to_string(), "ns/a".to_string()),
                    ("apps/v1/deployments".to_string(), "ns/d".to_string())
                ]
            );
        }
    }

    #[test]
    fn unknown_kinds_take_kubernetes_plural() {
        assert_eq!(plural_of("CronTab"), "crontabs");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Gateway"), "gateways");
        assert_eq!(plural_of("Ingress"), "ingresses");
        let reg = Registry::with_builtins();
        let r = Resolver::new(&reg);
        let o = r
            .object(serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c", "namespace": "n"}}))
            .unwrap();
        assert_eq!(o.resource, "stable.example.com/v1/crontabs");
        assert!(o.namespaced);
    }

    #[test]
    fn an_object_without_name_or_namespace_is_an_error() {
        let reg = Registry::with_builtins();
        let r = Resolver::new(&reg);
        assert!(r
            .object(
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}})
            )
            .unwrap_err()
            .contains("namespace"));
        assert!(r
            .object(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}))
            .unwrap_err()
            .contains("name"));
    }
}
