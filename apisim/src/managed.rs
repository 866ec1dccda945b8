//! Field ownership: `metadata.managedFields` bookkeeping for writes that name a field manager,
//! and server-side apply with conflict detection, as a documented subset of the apiserver's
//! structured-merge-diff.
//!
//! Invariants:
//! - A write with a manager leaves `managedFields` with one entry per (manager, operation,
//!   subresource); every entry's `fieldsV1` is non-empty and names only fields the object has
//!   or had when the entry last changed; an entry's `time` changes only when its field set or
//!   the object changed.
//! - An apply with `force=false` that would change a leaf field whose current value another
//!   entry owns fails with 409 Conflict naming every such field and manager, and changes nothing;
//!   with `force=true` those fields move to the applier.
//!
//! The subset, without OpenAPI schemas:
//! - Lists whose field has a merge key in [`crate::patch::list_merge_key`] are keyed lists
//!   (`k:{"name":"x"}`), `finalizers` is a set (`v:"x"`), every other list is atomic (a leaf).
//! - Maps are structs (no `.` entry) except the string maps `labels`, `annotations`, `data`,
//!   `binaryData`, `stringData`, `matchLabels`, `nodeSelector`, `limits`, `requests`, which own
//!   themselves as well (`.`), as the apiserver records them.
//! - An Update (POST, PUT, non-apply PATCH) gives its manager the fields it changed and takes them
//!   from every other entry; an Apply owns exactly the fields of the applied configuration and
//!   removes fields it applied before and no longer applies, unless another entry owns them.
//! - As the apiserver's `lastAppliedManager`, an apply by the manager `kubectl` whose conflicts
//!   all lie in the object's `last-applied-configuration` annotation is forced (kubectl's upgrade
//!   from client-side to server-side apply); writes to `/scale` are recorded against the main
//!   resource, not the `scale` subresource.
//! - The applied configuration is merged like a strategic merge patch (keyed lists element-wise,
//!   maps recursively, atomic lists replaced). Defaulted fields, unions, `x-kubernetes-*` list
//!   types of custom resources and version conversion of field sets are not modelled.

use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

use crate::patch::{self, list_merge_key, PatchType};
use crate::resource::ResourceType;
use crate::status::ApiError;
use crate::store::Subresource;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Elem {
    /// A field of a map: `f:name`.
    Field(String),
    /// An item of a keyed list, by its key fields (canonical JSON object): `k:{"name":"x"}`.
    Key(String),
    /// An item of a set list, by value (JSON): `v:"x"`.
    Value(String),
    /// An item of a list by position: `i:0`.
    Index(usize),
}

/// A field path from the object root.
pub type Path = Vec<Elem>;

/// A set of owned paths. A path with descendants in the set is a node that is also owned
/// itself (the `.` entry of `fieldsV1`).
pub type FieldSet = BTreeSet<Path>;

const ASSOCIATIVE: [&str; 9] = [
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "matchLabels",
    "nodeSelector",
    "limits",
    "requests",
];

const IGNORED_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

fn key_json(item: &Value, key: &str) -> Option<String> {
    let k = item.get(key)?;
    let mut m = Map::new();
    m.insert(key.to_string(), k.clone());
    Some(Value::Object(m).to_string())
}

fn walk(prefix: &Path, map: &Map<String, Value>, set: &mut FieldSet) {
    for (k, v) in map {
        let mut p = prefix.clone();
        p.push(Elem::Field(k.clone()));
        match v {
            Value::Object(m) if m.is_empty() => {
                set.insert(p);
            }
            Value::Object(m) => {
                if ASSOCIATIVE.contains(&k.as_str()) {
                    set.insert(p.clone());
                }
                walk(&p, m, set);
            }
            Value::Array(items) if k == "finalizers" && items.iter().all(Value::is_string) => {
                set.insert(p.clone());
                for x in items {
                    let mut ip = p.clone();
                    ip.push(Elem::Value(x.to_string()));
                    set.insert(ip);
                }
            }
            Value::Array(items)
                if !items.is_empty()
                    && list_merge_key(k, items).is_some_and(|key| {
                        items.iter().all(|i| i.is_object() && i.get(key).is_some())
                    }) =>
            {
                let key = list_merge_key(k, items).expect("checked");
                set.insert(p.clone());
                for item in items {
                    let mut ip = p.clone();
                    ip.push(Elem::Key(key_json(item, key).expect("checked")));
                    set.insert(ip.clone());
                    if let Some(m) = item.as_object() {
                        walk(&ip, m, set);
                    }
                }
            }
            _ => {
                set.insert(p);
            }
        }
    }
}

/// Which part of an object a field set covers.
fn scoped(rt: &ResourceType, sub: Subresource, obj: &Value) -> Map<String, Value> {
    let mut m = obj.as_object().cloned().unwrap_or_default();
    m.remove("apiVersion");
    m.remove("kind");
    match sub {
        Subresource::Status => {
            m.retain(|k, _| k == "status");
        }
        Subresource::Main => {
            if rt.status_subresource {
                m.remove("status");
            }
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                meta.retain(|k, _| !IGNORED_METADATA.contains(&k.as_str()));
                if meta.is_empty() {
                    m.remove("metadata");
                }
            }
        }
    }
    m
}

/// The paths an object (or an applied configuration) sets, for the main resource or `/status`.
pub fn fieldset_of(rt: &ResourceType, sub: Subresource, obj: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    walk(&Vec::new(), &scoped(rt, sub, obj), &mut set);
    set
}

fn elem_str(e: &Elem) -> String {
    match e {
        Elem::Field(f) => format!("f:{f}"),
        Elem::Key(k) => format!("k:{k}"),
        Elem::Value(v) => format!("v:{v}"),
        Elem::Index(i) => format!("i:{i}"),
    }
}

fn parse_elem(s: &str) -> Option<Elem> {
    let (kind, rest) = s.split_at_checked(2)?;
    Some(match kind {
        "f:" => Elem::Field(rest.to_string()),
        "k:" => Elem::Key(
            serde_json::from_str::<Value>(rest)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| rest.to_string()),
        ),
        "v:" => Elem::Value(
            serde_json::from_str::<Value>(rest)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| rest.to_string()),
        ),
        "i:" => Elem::Index(rest.parse().ok()?),
        _ => return None,
    })
}

/// The `fieldsV1` document of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = json!({});
    for p in set {
        let mut node = &mut root;
        for e in p {
            node = node
                .as_object_mut()
                .expect("nodes are objects")
                .entry(elem_str(e))
                .or_insert_with(|| json!({}));
        }
    }
    for p in set {
        let mut node = &mut root;
        for e in p {
            node = &mut node[elem_str(e).as_str()];
        }
        if node.as_object().is_some_and(|m| !m.is_empty()) {
            node["."] = json!({});
        }
    }
    root
}

fn from_fields(node: &Value, prefix: &Path, set: &mut FieldSet) {
    let Some(m) = node.as_object() else {
        return;
    };
    for (k, child) in m {
        if k == "." {
            set.insert(prefix.clone());
            continue;
        }
        let Some(e) = parse_elem(k) else {
            continue;
        };
        let mut p = prefix.clone();
        p.push(e);
        if child.as_object().is_none_or(|c| c.is_empty()) {
            set.insert(p);
        } else {
            from_fields(child, &p, set);
        }
    }
}

/// Parses a `fieldsV1` document (unknown entries are skipped).
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    from_fields(v, &Vec::new(), &mut set);
    set
}

/// The value at `path` in `obj`, if present.
pub fn value_at<'a>(obj: &'a Value, path: &[Elem]) -> Option<&'a Value> {
    let mut cur = obj;
    for e in path {
        cur = match e {
            Elem::Field(f) => cur.get(f)?,
            Elem::Key(k) => {
                let key: Map<String, Value> = serde_json::from_str(k).ok()?;
                cur.as_array()?
                    .iter()
                    .find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))?
            }
            Elem::Value(v) => {
                let want: Value = serde_json::from_str(v).ok()?;
                cur.as_array()?.iter().find(|x| **x == want)?
            }
            Elem::Index(i) => cur.as_array()?.get(*i)?,
        };
    }
    Some(cur)
}

fn remove_at(obj: &mut Value, path: &[Elem]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for e in parent {
        cur = match e {
            Elem::Field(f) => match cur.get_mut(f) {
                Some(c) => c,
                None => return,
            },
            Elem::Key(_) | Elem::Value(_) | Elem::Index(_) => {
                let Some(pos) = position(cur, e) else {
                    return;
                };
                &mut cur.as_array_mut().expect("position implies array")[pos]
            }
        };
    }
    match last {
        Elem::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        e => {
            if let Some(pos) = position(cur, e) {
                cur.as_array_mut().expect("array").remove(pos);
            }
        }
    }
}

fn position(list: &Value, e: &Elem) -> Option<usize> {
    let items = list.as_array()?;
    match e {
        Elem::Key(k) => {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            items
                .iter()
                .position(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
        }
        Elem::Value(v) => {
            let want: Value = serde_json::from_str(v).ok()?;
            items.iter().position(|x| *x == want)
        }
        Elem::Index(i) => (*i < items.len()).then_some(*i),
        Elem::Field(_) => None,
    }
}

/// A path as the apiserver prints it in conflicts: `.spec.containers[name="main"].image`.
pub fn path_string(path: &[Elem]) -> String {
    let mut s = String::new();
    for e in path {
        match e {
            Elem::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Elem::Key(k) => {
                let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            Elem::Value(v) => s.push_str(&format!("[={v}]")),
            Elem::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn is_leaf(set: &FieldSet, p: &Path) -> bool {
    set.range(p.clone()..)
        .nth(1)
        .is_none_or(|next| !next.starts_with(p))
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion of the write.
    pub api_version: String,
    /// Time of the last change of this entry.
    pub time: Option<String>,
    /// `status` for writes to `/status`, empty otherwise.
    pub subresource: String,
    /// The owned fields.
    pub fields: FieldSet,
}

impl Entry {
    fn same_manager(&self, manager: &str, operation: &str, sub: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == sub
    }

    /// The manager as conflicts name it (the apiserver's `printManager`).
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_value(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        });
        if let Some(t) = &self.time {
            v["time"] = json!(t);
        }
        v["fieldsType"] = json!("FieldsV1");
        v["fieldsV1"] = to_fields_v1(&self.fields);
        if !self.subresource.is_empty() {
            v["subresource"] = json!(self.subresource);
        }
        v
    }

    fn from_value(v: &Value) -> Option<Entry> {
        Some(Entry {
            manager: v.get("manager")?.as_str()?.to_string(),
            operation: v["operation"].as_str().unwrap_or("Update").to_string(),
            api_version: v["apiVersion"].as_str().unwrap_or("").to_string(),
            time: v["time"].as_str().map(str::to_string),
            subresource: v["subresource"].as_str().unwrap_or("").to_string(),
            fields: from_fields_v1(&v["fieldsV1"]),
        })
    }
}

/// The entries of an object's `metadata.managedFields`.
pub fn entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Entry::from_value)
        .collect()
}

fn set_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_value)
        .collect();
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    let meta = obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object");
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

fn sub_name(sub: Subresource) -> &'static str {
    match sub {
        Subresource::Main => "",
        Subresource::Status => "status",
    }
}

/// Records an Update by `manager` that turned `old` (None for a create) into `new`: the manager
/// gets the fields it changed, every other entry loses them. Leaves `new` alone when nothing
/// changed.
pub fn record_update(
    rt: &ResourceType,
    sub: Subresource,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
) {
    let new_set = fieldset_of(rt, sub, new);
    let old_set = old.map(|o| fieldset_of(rt, sub, o)).unwrap_or_default();
    let changed: FieldSet = new_set
        .union(&old_set)
        .filter(|p| {
            let (a, b) = (old_set.contains(*p), new_set.contains(*p));
            a != b || (is_leaf(&new_set, p) && old.and_then(|o| value_at(o, p)) != value_at(new, p))
        })
        .cloned()
        .collect();
    if changed.is_empty() {
        return;
    }
    let mut list = entries(new);
    let subname = sub_name(sub);
    for e in list.iter_mut() {
        if !e.same_manager(manager, "Update", subname) {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    let gained: FieldSet = changed.intersection(&new_set).cloned().collect();
    match list
        .iter_mut()
        .find(|e| e.same_manager(manager, "Update", subname))
    {
        Some(e) => {
            e.fields.extend(gained);
            e.fields.retain(|p| new_set.contains(p));
            e.time = Some(now.to_string());
            e.api_version = rt.api_version();
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: rt.api_version(),
            time: Some(now.to_string()),
            subresource: subname.to_string(),
            fields: gained,
        }),
    }
    set_entries(new, &list);
}

/// The 409 of an apply whose fields are owned by other managers, as the apiserver words it.
pub fn conflict_error(conflicts: &[(Path, String)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(p, m)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": path_string(p)})
        })
        .collect();
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].1,
            path_string(&conflicts[0].0)
        )
    } else {
        let mut by_manager: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for (p, m) in conflicts {
            by_manager
                .entry(m.as_str())
                .or_default()
                .push(path_string(p));
        }
        let mut lines = Vec::new();
        for (m, paths) in by_manager {
            lines.push(format!("conflicts with {m}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(message, causes)
}

/// The fields of the `kubectl.kubernetes.io/last-applied-configuration` annotation, if any.
fn last_applied_fields(rt: &ResourceType, sub: Subresource, live: &Value) -> Option<FieldSet> {
    let text = live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()?;
    let cfg: Value = serde_json::from_str(text).ok()?;
    Some(fieldset_of(rt, sub, &cfg))
}

/// Server-side apply of `applied` by `manager` onto `live` (None: the object is created). Returns
/// the new object, with its `managedFields`, or the 409 Conflict.
pub fn apply(
    rt: &ResourceType,
    sub: Subresource,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    mut force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "an apply configuration must be a JSON object",
        ));
    }
    let subname = sub_name(sub);
    let applied_set = fieldset_of(rt, sub, applied);
    // What is merged: the part of the configuration this endpoint writes.
    let mut config = applied.clone();
    if let Some(m) = config["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    match sub {
        Subresource::Main if rt.status_subresource => {
            if let Some(m) = config.as_object_mut() {
                m.remove("status");
            }
        }
        Subresource::Status => {
            let status = config.get("status").cloned().unwrap_or(Value::Null);
            config = json!({"status": status});
        }
        Subresource::Main => {}
    }
    let Some(live) = live else {
        let mut obj = config;
        set_entries(
            &mut obj,
            &[Entry {
                manager: manager.to_string(),
                operation: "Apply".into(),
                api_version: rt.api_version(),
                time: Some(now.to_string()),
                subresource: subname.to_string(),
                fields: applied_set,
            }],
        );
        return Ok(obj);
    };
    let mut list = entries(live);
    // Conflicts: leaves this apply changes whose value another entry owns.
    let mut conflicts: Vec<(Path, usize)> = Vec::new();
    for p in applied_set.iter().filter(|p| is_leaf(&applied_set, p)) {
        let (cur, want) = (value_at(live, p), value_at(applied, p));
        if cur.is_none() || cur == want {
            continue;
        }
        for (i, e) in list.iter().enumerate() {
            if !e.same_manager(manager, "Apply", subname) && e.fields.contains(p) {
                conflicts.push((p.clone(), i));
            }
        }
    }
    // As the apiserver's lastAppliedManager: kubectl's own server-side apply takes over, without
    // conflict, fields of the client-side apply's last-applied configuration (the upgrade from
    // client-side to server-side apply). Other conflicts still count.
    if !force && manager == "kubectl" && !conflicts.is_empty() {
        if let Some(allowed) = last_applied_fields(rt, sub, live) {
            if conflicts.iter().all(|(p, _)| allowed.contains(p)) {
                force = true;
            } else {
                conflicts.retain(|(p, _)| !allowed.contains(p));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            let named: Vec<(Path, String)> = conflicts
                .iter()
                .map(|(p, i)| (p.clone(), list[*i].printed()))
                .collect();
            return Err(conflict_error(&named));
        }
        for (p, i) in &conflicts {
            list[*i].fields.remove(p);
        }
    }
    // Fields this manager applied before and no longer applies go, unless someone else owns
    // them (or something below them).
    let previous = list
        .iter()
        .find(|e| e.same_manager(manager, "Apply", subname))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut obj = live.clone();
    // Parents first: a removed list item takes its fields with it (removing the fields first
    // would remove its key and leave the rest of the item behind). A key field of an item that
    // stays is kept.
    let dropped: Vec<&Path> = previous.difference(&applied_set).collect();
    let mut removed: Vec<&Path> = Vec::new();
    for p in dropped {
        if removed.iter().any(|r| p.starts_with(r)) {
            continue;
        }
        let owned_elsewhere = list.iter().any(|e| {
            !e.same_manager(manager, "Apply", subname) && e.fields.iter().any(|q| q.starts_with(p))
        });
        let key_of_parent = match p.as_slice() {
            [.., Elem::Key(k), Elem::Field(f)] => {
                serde_json::from_str::<Map<String, Value>>(k).is_ok_and(|k| k.contains_key(f))
            }
            _ => false,
        };
        if !owned_elsewhere && !key_of_parent {
            remove_at(&mut obj, p);
            removed.push(p);
        }
    }
    let obj_before_merge = obj.clone();
    let mut obj = patch::apply(PatchType::Strategic, obj, &config)?;
    if obj.get("metadata").is_some_and(|m| m.is_object()) {
        obj["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
    }
    let values_changed = {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove("managedFields");
            }
            v
        };
        strip(&obj) != strip(live) || strip(&obj_before_merge) != strip(live)
    };
    match list
        .iter_mut()
        .find(|e| e.same_manager(manager, "Apply", subname))
    {
        Some(e) => {
            if e.fields != applied_set || values_changed {
                e.time = Some(now.to_string());
            }
            e.fields = applied_set;
            e.api_version = rt.api_version();
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: rt.api_version(),
            time: Some(now.to_string()),
            subresource: subname.to_string(),
            fields: applied_set,
        }),
    }
    set_entries(&mut obj, &list);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    fn deployments() -> std::sync::Arc<ResourceType> {
        let r = Registry::with_builtins();
        r.get(r.find("apps", "v1", "deployments").unwrap())
    }

    #[test]
    fn fields_v1_round_trips_in_the_apiserver_shape() {
        let rt = deployments();
        let obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d"}, "finalizers": ["a/b"]},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "main", "image": "x", "args": ["a"]}]}}},
            "status": {"replicas": 2}
        });
        let set = fieldset_of(&rt, Subresource::Main, &obj);
        let doc = to_fields_v1(&set);
        assert_eq!(
            doc,
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:finalizers": {".": {}, "v:\"a/b\"": {}}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {".": {}, "k:{\"name\":\"main\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}}}}}
            })
        );
        assert_eq!(from_fields_v1(&doc), set);
        let p = vec![
            Elem::Field("spec".into()),
            Elem::Field("template".into()),
            Elem::Field("spec".into()),
            Elem::Field("containers".into()),
            Elem::Key("{\"name\":\"main\"}".into()),
            Elem::Field("image".into()),
        ];
        assert_eq!(value_at(&obj, &p), Some(&json!("x")));
        assert_eq!(
            path_string(&p),
            ".spec.template.spec.containers[name=\"main\"].image"
        );
    }

    /// A Service's ports are keyed by `port` (not `containerPort`, the other `ports`), so
    /// re-applying fewer ports removes the ones no longer applied instead of appending.
    #[test]
    fn reapplying_fewer_service_ports_removes_the_others() {
        let r = Registry::with_builtins();
        let rt = r.get(r.find("", "v1", "services").unwrap());
        let cfg = |ports: &[u64]| {
            let ports: Vec<Value> = ports
                .iter()
                .map(|p| json!({"name": format!("p{p}"), "port": p, "targetPort": p, "protocol": "TCP"}))
                .collect();
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"selector": {"app": "a"}, "ports": ports}})
        };
        let a = apply(
            &rt,
            Subresource::Main,
            None,
            &cfg(&[80, 90]),
            "m",
            true,
            "t1",
        )
        .unwrap();
        let b = apply(
            &rt,
            Subresource::Main,
            Some(&a),
            &cfg(&[90, 100]),
            "m",
            true,
            "t2",
        )
        .unwrap();
        let ports: Vec<u64> = b["spec"]["ports"]
            .as_array()
            .unwrap_or_else(|| panic!("{b}"))
            .iter()
            .filter_map(|p| p["port"].as_u64())
            .collect();
        assert_eq!(ports, vec![90, 100], "{b}");
        assert_eq!(b["spec"]["ports"].as_array().unwrap().len(), 2, "{b}");
    }

    #[test]
    fn apply_conflicts_with_another_owner_and_force_takes_over() {
        let rt = deployments();
        let base = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2, "paused": false}});
        let a = apply(&rt, Subresource::Main, None, &base, "a", false, "t1").unwrap();
        let mut b_cfg = base.clone();
        b_cfg["spec"] = json!({"replicas": 3});
        let e = apply(&rt, Subresource::Main, Some(&a), &b_cfg, "b", false, "t2").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
        );
        let causes = &e.details.as_ref().unwrap()["causes"];
        assert_eq!(causes[0]["field"], ".spec.replicas");
        assert_eq!(causes[0]["reason"], "FieldManagerConflict");
        // Same value: shared, no conflict.
        b_cfg["spec"] = json!({"replicas": 2});
        let shared = apply(&rt, Subresource::Main, Some(&a), &b_cfg, "b", false, "t2").unwrap();
        assert_eq!(entries(&shared).len(), 2);
        // Forced: b takes replicas over, a keeps paused.
        b_cfg["spec"] = json!({"replicas": 5});
        let forced = apply(&rt, Subresource::Main, Some(&a), &b_cfg, "b", true, "t3").unwrap();
        assert_eq!(forced["spec"]["replicas"], 5);
        let es = entries(&forced);
        let replicas = vec![Elem::Field("spec".into()), Elem::Field("replicas".into())];
        assert!(!es[0].fields.contains(&replicas) && es[1].fields.contains(&replicas));
        // a drops paused from its configuration: the field goes.
        let a2 = apply(
            &rt,
            Subresource::Main,
            Some(&forced),
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
            "a",
            false,
            "t4",
        )
        .unwrap();
        assert!(a2["spec"].get("paused").is_none(), "{a2}");
        assert_eq!(a2["spec"]["replicas"], 5);
    }

    #[test]
    fn kubectl_takes_over_fields_of_its_client_side_apply() {
        let rt = deployments();
        let last = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}});
        let mut live = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last.to_string()}},
            "spec": {"replicas": 2, "paused": false}
        });
        record_update(
            &rt,
            Subresource::Main,
            None,
            &mut live,
            "kubectl-client-side-apply",
            "t1",
        );
        let mut cfg = last.clone();
        cfg["spec"]["replicas"] = json!(4);
        let other = apply(
            &rt,
            Subresource::Main,
            Some(&live),
            &cfg,
            "someone",
            false,
            "t2",
        );
        assert_eq!(
            other.unwrap_err().code,
            409,
            "only kubectl's own apply is forgiven"
        );
        let taken = apply(
            &rt,
            Subresource::Main,
            Some(&live),
            &cfg,
            "kubectl",
            false,
            "t2",
        )
        .unwrap();
        assert_eq!(taken["spec"]["replicas"], 4);
        // A field outside the last-applied configuration still conflicts.
        cfg["spec"]["paused"] = json!(true);
        let e = apply(
            &rt,
            Subresource::Main,
            Some(&live),
            &cfg,
            "kubectl",
            false,
            "t3",
        )
        .unwrap_err();
        assert_eq!(e.message, "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.paused");
    }

    #[test]
    fn updates_take_the_fields_they_change() {
        let rt = deployments();
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "paused": true}});
        record_update(&rt, Subresource::Main, None, &mut obj, "creator", "t1");
        let before = obj.clone();
        obj["spec"]["replicas"] = json!(4);
        record_update(
            &rt,
            Subresource::Main,
            Some(&before),
            &mut obj,
            "scaler",
            "t2",
        );
        let es = entries(&obj);
        assert_eq!(es.len(), 2);
        assert_eq!(es[1].manager, "scaler");
        assert_eq!(
            to_fields_v1(&es[1].fields),
            json!({"f:spec": {"f:replicas": {}}})
        );
        assert_eq!(
            to_fields_v1(&es[0].fields),
            json!({"f:spec": {"f:paused": {}}})
        );
        // Nothing changed: nothing recorded, times kept.
        let same = obj.clone();
        record_update(&rt, Subresource::Main, Some(&same), &mut obj, "other", "t3");
        assert_eq!(obj, same);
    }
}
