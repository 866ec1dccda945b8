//! The multi-version object store: one global resourceVersion counter, per-key version history
//! (for consistent paged snapshots) and a bounded change log (for watches).
//!
//! Invariants:
//! - Every successful write bumps the global resourceVersion by exactly one and appends exactly one
//!   [`Change`] with that resourceVersion to the log, under the same lock.
//! - For every resourceVersion `X` with `compacted <= X <= rv`, the state at `X` can be reconstructed
//!   (lists at `X`) and every change after `X` is in the log (watches from `X`). Older requests get 410.

use parking_lot::RwLock;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use wasm_informer_selector::{FieldSelector, LabelSelector};

use crate::continue_token::ContinueToken;
use crate::crd;
use crate::deployment;
use crate::managed;
use crate::object::{extra_selectable_fields, key_of, ObjectRef, StoredObject};
use crate::resource::{Registry, ResourceId, ResourceType};
use crate::shard::ShardSelector;
use crate::status::ApiError;
use crate::timestamps;
use crate::validation;
use crate::views;

/// Type of a change, as sent in watch events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// Object created.
    Added,
    /// Object updated.
    Modified,
    /// Object removed.
    Deleted,
}

impl ChangeType {
    /// Watch event type string.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Change {
    /// resourceVersion of the write.
    pub rv: u64,
    /// Resource type written.
    pub resource: ResourceId,
    /// What happened.
    pub kind: ChangeType,
    /// The object after the write (for deletes: the last state, with the deletion's resourceVersion).
    pub object: ObjectRef,
    /// The object before the write (None for creates).
    pub prev: Option<ObjectRef>,
}

/// Which part of an object a write replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The main resource: status is preserved for types with a status subresource.
    Main,
    /// The `/status` subresource: only status is taken from the request.
    Status,
}

/// Options of one write (create, update, patch), as its query string carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and compute the result; persist nothing, bump no resourceVersion,
    /// send no watch event.
    pub dry_run: bool,
    /// The field manager recorded in `metadata.managedFields` as an `Update` (None: the
    /// write leaves `managedFields` as the request sent them).
    pub field_manager: Option<String>,
    /// The request's deadline: a write not committed by then is refused with 504 and changes
    /// nothing (checked under the store lock; see `deadline`).
    pub deadline: Option<std::time::Instant>,
}

impl WriteOptions {
    /// A dry run.
    pub fn dry_run() -> Self {
        WriteOptions {
            dry_run: true,
            ..WriteOptions::default()
        }
    }
}

/// What happens to an object's dependents (objects whose ownerReferences name it) when it is
/// deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes at once; dependents with no other live owner are deleted after it.
    #[default]
    Background,
    /// The owner gets `deletionTimestamp` and the `foregroundDeletion` finalizer, its dependents
    /// are deleted (those with `blockOwnerDeletion` first), then the owner goes.
    Foreground,
    /// Dependents lose their reference to the owner and stay.
    Orphan,
}

impl Propagation {
    /// Parses a `propagationPolicy` value; 422 naming the supported values otherwise.
    pub fn parse(v: &str) -> Result<Self, ApiError> {
        match v {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::invalid(
                "",
                "",
                format!("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""),
            )),
        }
    }
}

/// Options of one DELETE (the `DeleteOptions` body and query).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `preconditions.uid`: the object must have this uid (409 otherwise).
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: the object must be at this version (409 otherwise).
    pub precondition_rv: Option<String>,
    /// `propagationPolicy` (or the legacy `orphanDependents`).
    pub propagation: Propagation,
    /// The request's deadline: checked before the deletion's first change (504 after it).
    pub deadline: Option<std::time::Instant>,
}

/// The finalizer of an owner waiting for its dependents (foreground deletion).
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Which resourceVersion a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListVersion {
    /// The most recent state (`resourceVersion` unset, or `0` "any").
    Latest,
    /// At least this version (`resourceVersionMatch=NotOlderThan`).
    NotOlderThan(u64),
    /// Exactly this snapshot (`resourceVersionMatch=Exact`), or 410.
    Exact(u64),
}

/// A parsed list request.
#[derive(Debug, Clone)]
pub struct ListRequest {
    /// Namespace to list in; None lists across namespaces.
    pub namespace: Option<String>,
    /// Label selector (empty matches everything).
    pub labels: LabelSelector,
    /// Field selector (empty matches everything).
    pub fields: FieldSelector,
    /// Page size; None or 0 returns everything.
    pub limit: Option<usize>,
    /// Continue token of the previous page.
    pub continue_token: Option<String>,
    /// Version to read.
    pub version: ListVersion,
    /// Shard selector (KEP-5866); None lists every shard.
    pub shard: Option<ShardSelector>,
}

impl ListRequest {
    /// Lists everything, at the latest version, in `namespace` (None: all).
    pub fn all(namespace: Option<&str>) -> Self {
        ListRequest {
            namespace: namespace.map(str::to_string),
            labels: LabelSelector::everything(),
            fields: FieldSelector::default(),
            limit: None,
            continue_token: None,
            version: ListVersion::Latest,
            shard: None,
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Snapshot resourceVersion (`metadata.resourceVersion` of the list).
    pub rv: u64,
    /// Items in key order.
    pub items: Vec<ObjectRef>,
    /// Token for the next page; None on the last page.
    pub continue_token: Option<String>,
    /// Items left after this page (only without selectors, as the apiserver does).
    pub remaining: Option<usize>,
    /// The shard selector applied, in canonical form (`metadata.shardInfo.selector`).
    pub shard_info: Option<String>,
}

#[derive(Debug, Clone)]
struct Version {
    rv: u64,
    obj: Option<ObjectRef>,
}

#[derive(Debug, Default)]
struct Table {
    keys: BTreeMap<String, Vec<Version>>,
}

impl Table {
    fn latest(&self, key: &str) -> Option<&ObjectRef> {
        self.keys.get(key)?.last()?.obj.as_ref()
    }

    fn at(versions: &[Version], rv: u64) -> Option<&ObjectRef> {
        versions
            .iter()
            .rev()
            .find(|v| v.rv <= rv)
            .and_then(|v| v.obj.as_ref())
    }
}

#[derive(Debug, Default)]
struct Inner {
    rv: u64,
    compacted: u64,
    tables: Vec<Table>,
    log: VecDeque<Arc<Change>>,
    continue_epoch: u64,
    /// Live objects by uid.
    by_uid: HashMap<String, (ResourceId, String)>,
    /// Owner uid -> live objects whose ownerReferences name it.
    dependents: HashMap<String, BTreeSet<(ResourceId, String)>>,
}

impl Inner {
    fn table(&mut self, rid: ResourceId) -> &mut Table {
        if self.tables.len() <= rid.0 {
            self.tables.resize_with(rid.0 + 1, Table::default);
        }
        &mut self.tables[rid.0]
    }

    fn table_ref(&self, rid: ResourceId) -> Option<&Table> {
        self.tables.get(rid.0)
    }
}

/// What a watch follows (see [`Store::watch_target`]).
#[derive(Debug, Clone)]
pub struct WatchTarget {
    /// The type whose changes are followed.
    pub stored: ResourceId,
    /// The conversion of its objects to the watched type, when that is a view.
    pub present: Option<fn(&Value) -> Value>,
    /// The field selector in the stored type's labels.
    pub fields: FieldSelector,
}

/// The in-memory API storage. Cheap to share (`Arc<Store>`); all methods take `&self`.
#[derive(Debug)]
pub struct Store {
    registry: Registry,
    inner: RwLock<Inner>,
    notify: tokio::sync::watch::Sender<u64>,
    history_window: usize,
}

/// The current time as the apiserver writes timestamps (RFC 3339, seconds, UTC).
pub fn now_timestamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta_str<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("metadata")?.get(field)?.as_str()
}

/// What a change of `generation` is computed from: the object without `metadata`, and without
/// `status` when the kind has a status subresource (otherwise status is part of the spec, as for
/// custom resources without one).
fn spec_part(rt: &ResourceType, v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if rt.status_subresource {
            m.remove("status");
        }
    }
    v
}

fn finalizers_empty(v: &Value) -> bool {
    v["metadata"]
        .get("finalizers")
        .and_then(|f| f.as_array())
        .map(|a| a.is_empty())
        .unwrap_or(true)
}

impl Store {
    /// A store with the built-in types, the default namespaces, and a change log bounded to
    /// `history_window` entries (older changes are compacted away).
    pub fn new(history_window: usize) -> Self {
        let (notify, _) = tokio::sync::watch::channel(0);
        let s = Store {
            registry: Registry::with_builtins(),
            inner: RwLock::new(Inner::default()),
            notify,
            history_window: history_window.max(1),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            s.create_namespace(ns)
                .expect("fresh store accepts namespaces");
        }
        s
    }

    /// The resource registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Resolves a resource by group, version and plural; 404 naming it when unknown.
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Result<ResourceId, ApiError> {
        self.registry.find(group, version, plural).ok_or_else(|| {
            let gv = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            ApiError::no_route(&format!("{gv}/{plural}"))
        })
    }

    /// Resolves a built-in or registered resource by `apiVersion` + plural, panicking when absent.
    /// Convenience for tests and the workload generator.
    pub fn rid(&self, api_version: &str, plural: &str) -> ResourceId {
        let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
        self.registry
            .find(g, v, plural)
            .unwrap_or_else(|| panic!("resource {api_version}/{plural} is not registered"))
    }

    /// Current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    /// Oldest resourceVersion still served (lists at or after it, watches from it).
    pub fn compacted_rv(&self) -> u64 {
        self.inner.read().compacted
    }

    /// Number of changes in the watch log.
    pub fn log_len(&self) -> usize {
        self.inner.read().log.len()
    }

    /// Receiver that observes every new global resourceVersion.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// Creates a namespace (helper for tests and workloads).
    pub fn create_namespace(&self, name: &str) -> Result<ObjectRef, ApiError> {
        let rid = self.rid("v1", "namespaces");
        self.create(
            rid,
            None,
            json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":name}}),
        )
    }

    fn commit(
        &self,
        inner: &mut Inner,
        rid: ResourceId,
        kind: ChangeType,
        object: ObjectRef,
        prev: Option<ObjectRef>,
    ) {
        let rv = object.rv;
        debug_assert_eq!(rv, inner.rv);
        let key = object.key();
        if let Some(p) = &prev {
            for o in &p.owners {
                if let Some(set) = inner.dependents.get_mut(o) {
                    set.remove(&(rid, key.clone()));
                    if set.is_empty() {
                        inner.dependents.remove(o);
                    }
                }
            }
            inner.by_uid.remove(&p.uid);
        }
        if kind != ChangeType::Deleted {
            if !object.uid.is_empty() {
                inner.by_uid.insert(object.uid.clone(), (rid, key.clone()));
            }
            // Only references to live owners are edges: uids are assigned by the server, so an
            // owner exists before any object can name it (references to uids that never existed,
            // such as the workload's made-up ReplicaSets, cost nothing).
            for o in &object.owners {
                if inner.by_uid.contains_key(o) {
                    inner
                        .dependents
                        .entry(o.clone())
                        .or_default()
                        .insert((rid, key.clone()));
                }
            }
        }
        let stored = match kind {
            ChangeType::Deleted => None,
            _ => Some(object.clone()),
        };
        inner
            .table(rid)
            .keys
            .entry(key)
            .or_default()
            .push(Version { rv, obj: stored });
        inner.log.push_back(Arc::new(Change {
            rv,
            resource: rid,
            kind,
            object,
            prev,
        }));
        while inner.log.len() > self.history_window {
            let old = inner.log.pop_front().expect("log is non-empty");
            inner.compacted = old.rv;
            let key = old.object.key();
            let table = inner.table(old.resource);
            if let Some(versions) = table.keys.get_mut(&key) {
                versions.retain(|v| v.rv >= old.rv);
                if versions.first().is_some_and(|v| v.obj.is_none()) {
                    versions.remove(0);
                }
                if versions.is_empty() {
                    table.keys.remove(&key);
                }
            }
        }
    }

    fn notify(&self, rv: u64) {
        self.notify.send_replace(rv);
    }

    fn namespace_exists(inner: &Inner, ns_rid: ResourceId, ns: &str) -> bool {
        inner.table_ref(ns_rid).and_then(|t| t.latest(ns)).is_some()
    }

    /// Stamps server-owned metadata onto an object for `rt`, validating kind and namespace.
    fn prepare_new(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut obj: Value,
    ) -> Result<(Value, String, String), ApiError> {
        let qp = rt.qualified_plural();
        if !obj.is_object() {
            return Err(ApiError::bad_request(format!(
                "the body of the request for {qp} must be a JSON object"
            )));
        }
        let api_version = rt.api_version();
        match obj.get("apiVersion").and_then(|v| v.as_str()) {
            None | Some("") => obj["apiVersion"] = json!(api_version),
            Some(a) if a == api_version => {}
            Some(a) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({a}) does not match the expected API version ({api_version})"
                )))
            }
        }
        match obj.get("kind").and_then(|v| v.as_str()) {
            None | Some("") => obj["kind"] = json!(rt.kind),
            Some(k) if k == rt.kind => {}
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    rt.kind
                )))
            }
        }
        if !obj.get("metadata").is_some_and(|m| m.is_object()) {
            obj["metadata"] = json!({});
        }
        let mut name = meta_str(&obj, "name").unwrap_or("").to_string();
        if name.is_empty() {
            if let Some(prefix) = meta_str(&obj, "generateName").filter(|s| !s.is_empty()) {
                // `names.SimpleNameGenerator`: the prefix cut to 58 bytes, 5 random characters.
                let mut cut = prefix.len().min(MAX_GENERATED_NAME_PREFIX);
                while !prefix.is_char_boundary(cut) {
                    cut -= 1;
                }
                name = format!("{}{}", &prefix[..cut], random_suffix());
                obj["metadata"]["name"] = json!(name);
            } else {
                return Err(ApiError::invalid(
                    &qp,
                    "",
                    format!("{} \"\" is invalid: metadata.name: Required value: name or generateName is required", rt.kind),
                ));
            }
        }
        let ns = if rt.namespaced {
            let body_ns = meta_str(&obj, "namespace").unwrap_or("");
            let ns = match (namespace, body_ns) {
                (Some(url), "") => url.to_string(),
                (Some(url), b) if url == b => url.to_string(),
                (Some(_), _) => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ))
                }
                (None, "") => {
                    return Err(ApiError::bad_request(format!(
                        "{qp} \"{name}\": a namespace is required for a namespaced resource"
                    )))
                }
                (None, b) => b.to_string(),
            };
            obj["metadata"]["namespace"] = json!(ns);
            ns
        } else {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("namespace");
            }
            String::new()
        };
        Ok((obj, ns, name))
    }

    /// Creates an object. `namespace` is the namespace from the URL (None for cluster-scoped or
    /// when the body names it). 404 when the namespace does not exist, 409 when the name is taken.
    pub fn create(
        &self,
        rid: ResourceId,
        namespace: Option<&str>,
        obj: Value,
    ) -> Result<ObjectRef, ApiError> {
        self.create_with(rid, namespace, obj, &WriteOptions::default())
    }

    /// [`Store::create`] with options: a dry run validates and answers the would-be object (with
    /// uid and creationTimestamp, without resourceVersion) and stores nothing; a field manager
    /// is recorded as the owner of every field.
    pub fn create_with(
        &self,
        rid: ResourceId,
        namespace: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<ObjectRef, ApiError> {
        let served = self.registry.get(rid);
        let (srid, view) = self.storage_of(rid);
        let rt = self.registry.get(srid);
        let (obj, ns, name) = self.prepare_new(&served, namespace, obj)?;
        let mut obj = match view {
            Some(v) => (v.to_storage)(obj),
            None => obj,
        };
        let ns_rid = self.rid("v1", "namespaces");
        let created = {
            let mut inner = self.inner.write();
            if rt.namespaced && !Self::namespace_exists(&inner, ns_rid, &ns) {
                return Err(ApiError::not_found("namespaces", &ns));
            }
            let key = key_of(&ns, &name);
            let rv = inner.rv + 1;
            let meta = obj["metadata"]
                .as_object_mut()
                .expect("metadata is an object");
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
            meta.insert("creationTimestamp".into(), json!(now_timestamp()));
            if rt.generation {
                meta.insert("generation".into(), json!(1));
            }
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            default_status(&rt, &mut obj);
            normalize(&rt, &mut obj);
            let schema = self.schema_of(&inner, &rt);
            let ctx = validation::Context {
                served: &served,
                stored: &rt,
                schema: schema.as_ref(),
            };
            validation::validate_create(&ctx, &obj)?;
            if inner.table(srid).latest(&key).is_some() {
                return Err(ApiError::already_exists(&served.qualified_plural(), &name));
            }
            if deployment::is_deployment(&rt) {
                deployment::complete_rollout(&mut obj, &now_timestamp());
            }
            if let Some(m) = &opts.field_manager {
                managed::record_update(&rt, Subresource::Main, None, &mut obj, m, &now_timestamp());
            }
            if opts.dry_run {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                let would = Arc::new(StoredObject::from_value(&rt, &obj));
                return Ok(self.present(rid, view, would));
            }
            crate::deadline::check(opts.deadline)?;
            let so = Arc::new(StoredObject::from_value(&rt, &obj));
            inner.rv = rv;
            self.commit(&mut inner, srid, ChangeType::Added, so.clone(), None);
            so
        };
        self.notify(created.rv);
        if rt.kind == "CustomResourceDefinition" {
            crd::register(&self.registry, &created.value());
        }
        Ok(self.present(rid, view, created))
    }

    /// The storage type of `rid`: itself, or the type a view ([`views::View`]) is stored as.
    fn storage_of(&self, rid: ResourceId) -> (ResourceId, Option<&'static views::View>) {
        match views::of(&self.registry.get(rid)) {
            Some(v) => {
                let (g, ver, p) = v.storage;
                let srid = self
                    .registry
                    .find(g, ver, p)
                    .expect("the storage of a view is a built-in type");
                (srid, Some(v))
            }
            None => (rid, None),
        }
    }

    /// A stored object as `rid` serves it (converted when `rid` is a view).
    fn present(&self, rid: ResourceId, view: Option<&views::View>, o: ObjectRef) -> ObjectRef {
        match view {
            None => o,
            Some(v) => Arc::new(StoredObject::from_value(
                &self.registry.get(rid),
                &(v.present)(&o.value()),
            )),
        }
    }

    /// What a watch of `rid` follows: the storage type's changes, converted when `rid` is a
    /// view, filtered by the field selector in the storage type's labels.
    pub fn watch_target(
        &self,
        rid: ResourceId,
        fields: &FieldSelector,
    ) -> Result<WatchTarget, ApiError> {
        let rt = self.registry.get(rid);
        validate_fields(&rt, fields)?;
        Ok(match self.storage_of(rid) {
            (stored, Some(v)) => WatchTarget {
                stored,
                present: Some(v.present),
                fields: v.translate_fields(fields)?,
            },
            (stored, None) => WatchTarget {
                stored,
                present: None,
                fields: fields.clone(),
            },
        })
    }

    /// The `openAPIV3Schema` of a custom resource's version, from its stored CRD.
    fn schema_of(&self, inner: &Inner, rt: &ResourceType) -> Option<Value> {
        if !rt.custom {
            return None;
        }
        let crd_rid =
            self.registry
                .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
        let crd = inner
            .table_ref(crd_rid)?
            .latest(&format!("{}.{}", rt.plural, rt.group))?
            .value();
        validation::custom::schema_of(&crd, &rt.version).cloned()
    }

    /// The garbage collector's view of an object created through the API: one whose owner
    /// references all name kinds this server serves, none of them a live object (by uid), is
    /// deleted at once (Background), as the real collector deletes a dependent it finds with its
    /// owners gone (a writer that had not yet seen the owner's deletion created it). An owner of
    /// a kind the server does not serve (the workload's ReplicaSets) is never judged absent. The
    /// HTTP server calls it after each create; seeding through this Rust API does not, so
    /// fixtures keep the owner references they were written with.
    pub fn collect_if_orphaned(&self, rid: ResourceId, obj: &StoredObject) {
        if obj.owners.is_empty() {
            return;
        }
        let value = obj.value();
        let refs = value["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let owners_gone = !refs.is_empty()
            && refs.iter().all(|r| {
                let known = self
                    .registry
                    .find_kind(
                        r["apiVersion"].as_str().unwrap_or(""),
                        r["kind"].as_str().unwrap_or(""),
                    )
                    .is_some();
                known && !self.is_live(r["uid"].as_str().unwrap_or(""))
            });
        if owners_gone {
            let _ = self.delete_with(rid, &obj.namespace, &obj.name, &DeleteOptions::default());
        }
    }

    /// Reads the latest version of one object.
    pub fn get(&self, rid: ResourceId, namespace: &str, name: &str) -> Result<ObjectRef, ApiError> {
        let (srid, view) = self.storage_of(rid);
        let found = self
            .inner
            .read()
            .table_ref(srid)
            .and_then(|t| t.latest(&key_of(namespace, name)))
            .cloned();
        found
            .map(|o| self.present(rid, view, o))
            .ok_or_else(|| ApiError::not_found(&self.registry.get(rid).qualified_plural(), name))
    }

    /// Replaces an object (PUT). A non-empty `metadata.resourceVersion` that is not current is a
    /// 409 Conflict. An update that removes the last finalizer of a deleting object deletes it.
    pub fn update(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        sub: Subresource,
        obj: Value,
    ) -> Result<ObjectRef, ApiError> {
        self.modify(
            rid,
            namespace,
            name,
            sub,
            |_| Ok(obj),
            true,
            &WriteOptions::default(),
        )
    }

    /// [`Store::update`] with options (dry run, field manager).
    pub fn update_opts(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        sub: Subresource,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<ObjectRef, ApiError> {
        self.modify(rid, namespace, name, sub, |_| Ok(obj), true, opts)
    }

    /// [`Store::update_with`] with options (dry run, field manager).
    pub fn update_with_opts(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        f: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<ObjectRef, ApiError> {
        self.modify(rid, namespace, name, sub, f, false, opts)
    }

    /// Read-modify-write under the store lock: `f` receives the current object and returns the new
    /// one (used by PATCH). The returned object's resourceVersion, when set, must match (409).
    pub fn update_with(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        sub: Subresource,
        f: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<ObjectRef, ApiError> {
        self.modify(
            rid,
            namespace,
            name,
            sub,
            f,
            false,
            &WriteOptions::default(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn modify(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        sub: Subresource,
        f: impl FnOnce(Value) -> Result<Value, ApiError>,
        is_put: bool,
        opts: &WriteOptions,
    ) -> Result<ObjectRef, ApiError> {
        let served = self.registry.get(rid);
        let (srid, view) = self.storage_of(rid);
        let rt = self.registry.get(srid);
        let qp = served.qualified_plural();
        let key = key_of(namespace, name);
        let result = {
            let mut inner = self.inner.write();
            let old = inner
                .table(srid)
                .latest(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&qp, name))?;
            let old_v = old.value();
            let mut new_v = match view {
                Some(v) => f((v.present)(&old_v))?,
                None => f(old_v.clone())?,
            };
            if !new_v.is_object() {
                return Err(ApiError::bad_request(format!(
                    "the body of the request for {qp} \"{name}\" must be a JSON object"
                )));
            }
            if !new_v.get("metadata").is_some_and(|m| m.is_object()) {
                new_v["metadata"] = json!({});
            }
            for (field, expected) in [
                ("apiVersion", served.api_version()),
                ("kind", served.kind.clone()),
            ] {
                match new_v.get(field).and_then(|v| v.as_str()) {
                    None | Some("") => new_v[field] = json!(expected),
                    Some(x) if x == expected => {}
                    Some(x) => {
                        return Err(ApiError::bad_request(format!(
                            "{field} {x:?} in the body does not match {expected:?} for {qp}"
                        )))
                    }
                }
            }
            // The handlers' checks (`EnsureObjectNamespaceMatchesRequestNamespace` on a PUT,
            // then `checkName`, which is also all a patch gets): 400 before any validation.
            if let Some(ns) = meta_str(&new_v, "namespace") {
                if !ns.is_empty() && ns != namespace {
                    return Err(ApiError::bad_request(if is_put {
                        "the namespace of the provided object does not match the namespace sent on the request".to_string()
                    } else {
                        format!("the namespace of the object ({ns}) does not match the namespace on the request ({namespace})")
                    }));
                }
            }
            match meta_str(&new_v, "name") {
                Some(n) if n == name => {}
                None | Some("") if !is_put => {}
                other => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        other.unwrap_or("")
                    )))
                }
            }
            // A PUT naming another uid fails its uid precondition (the registry's
            // `UpdatedObjectInfo.Preconditions`); a patch that changes it is invalid.
            match meta_str(&new_v, "uid") {
                Some(uid) if is_put && !uid.is_empty() && uid != old.uid => {
                    return Err(ApiError::precondition_failed(
                        &qp,
                        name,
                        &Self::etcd_key(&rt, namespace, name),
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            old.uid
                        ),
                    ));
                }
                _ => {}
            }
            match meta_str(&new_v, "resourceVersion") {
                Some(rv) if !rv.is_empty() && rv != old.rv.to_string() => {
                    return Err(ApiError::conflict(&qp, name));
                }
                _ => {}
            }
            let new_v = match view {
                Some(v) => (v.to_storage)(new_v),
                None => new_v,
            };
            // Server-owned fields and subresource rules.
            let mut merged = match sub {
                Subresource::Status => {
                    let mut v = old_v.clone();
                    match new_v.get("status") {
                        Some(s) => v["status"] = s.clone(),
                        None => {
                            if let Some(m) = v.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                    v
                }
                Subresource::Main => {
                    let mut v = new_v;
                    if rt.status_subresource {
                        match old_v.get("status") {
                            Some(s) => v["status"] = s.clone(),
                            None => {
                                if let Some(m) = v.as_object_mut() {
                                    m.remove("status");
                                }
                            }
                        }
                    }
                    let meta = v["metadata"]
                        .as_object_mut()
                        .expect("metadata is an object");
                    let old_meta = old_v["metadata"].as_object().expect("stored metadata");
                    // As BeforeUpdate: generation and the timestamps are the stored ones, and a
                    // missing uid is the stored one (a different one fails validation).
                    for f in [
                        "creationTimestamp",
                        "deletionTimestamp",
                        "deletionGracePeriodSeconds",
                        "generation",
                    ] {
                        match old_meta.get(f) {
                            Some(x) => meta.insert(f.into(), x.clone()),
                            None => meta.remove(f),
                        };
                    }
                    if meta
                        .get("uid")
                        .and_then(|u| u.as_str())
                        .is_none_or(str::is_empty)
                    {
                        match old_meta.get("uid") {
                            Some(x) => meta.insert("uid".into(), x.clone()),
                            None => meta.remove("uid"),
                        };
                    }
                    meta.insert("name".into(), json!(name));
                    if rt.namespaced {
                        meta.insert("namespace".into(), json!(namespace));
                    }
                    // Absent or empty managedFields keep the stored ones (clients that do not
                    // know the field never strip it).
                    if meta
                        .get("managedFields")
                        .is_none_or(|m| m.is_null() || m.as_array().is_some_and(|a| a.is_empty()))
                    {
                        match old_meta.get("managedFields") {
                            Some(x) => meta.insert("managedFields".into(), x.clone()),
                            None => meta.remove("managedFields"),
                        };
                    }
                    v
                }
            };
            merged["metadata"]["resourceVersion"] = json!(old.rv.to_string());
            normalize(&rt, &mut merged);
            let schema = self.schema_of(&inner, &rt);
            let ctx = validation::Context {
                served: &served,
                stored: &rt,
                schema: schema.as_ref(),
            };
            validation::validate_update(&ctx, &merged, &old_v, sub == Subresource::Status)?;
            if let Some(m) = &opts.field_manager {
                managed::record_update(&rt, sub, Some(&old_v), &mut merged, m, &now_timestamp());
            }
            if merged == old_v {
                // No-op: the apiserver neither bumps the resourceVersion nor emits an event.
                return Ok(self.present(rid, view, old));
            }
            if sub == Subresource::Main
                && rt.generation
                && spec_part(&rt, &merged) != spec_part(&rt, &old_v)
            {
                let g = old_v["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                merged["metadata"]["generation"] = json!(g);
                if deployment::is_deployment(&rt) {
                    deployment::complete_rollout(&mut merged, &now_timestamp());
                }
            }
            if opts.dry_run {
                let would = Arc::new(StoredObject::from_value(&rt, &merged));
                return Ok(self.present(rid, view, would));
            }
            crate::deadline::check(opts.deadline)?;
            let rv = inner.rv + 1;
            inner.rv = rv;
            merged["metadata"]["resourceVersion"] = json!(rv.to_string());
            let deleting = merged["metadata"]
                .get("deletionTimestamp")
                .is_some_and(|d| !d.is_null());
            let so = Arc::new(StoredObject::from_value(&rt, &merged));
            let removed = deleting && finalizers_empty(&merged);
            if removed {
                self.commit(&mut inner, srid, ChangeType::Deleted, so.clone(), Some(old));
            } else {
                self.commit(
                    &mut inner,
                    srid,
                    ChangeType::Modified,
                    so.clone(),
                    Some(old),
                );
            }
            (so, removed)
        };
        let (result, removed) = result;
        self.notify(result.rv);
        if rt.kind == "CustomResourceDefinition" {
            crd::register(&self.registry, &result.value());
        }
        if removed {
            self.collect_garbage(&result);
        }
        Ok(self.present(rid, view, result))
    }

    /// Deletes an object. With finalizers, sets `deletionTimestamp` and keeps it (MODIFIED);
    /// otherwise removes it (DELETED). Returns the object as the apiserver does. Deleting a
    /// namespace also deletes every object in it. `precondition_rv`, when set, must match (409).
    /// Dependents are collected in the background (see [`Store::delete_with`]).
    pub fn delete(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        precondition_rv: Option<&str>,
    ) -> Result<ObjectRef, ApiError> {
        self.delete_with(
            rid,
            namespace,
            name,
            &DeleteOptions {
                precondition_rv: precondition_rv
                    .filter(|p| !p.is_empty())
                    .map(str::to_string),
                ..DeleteOptions::default()
            },
        )
    }

    /// Deletes an object with [`DeleteOptions`]: preconditions on uid and resourceVersion (409
    /// with the registry's message), dry run (nothing changes), and the propagation policy, which
    /// the built-in garbage collector carries out before this returns: Background deletes
    /// dependents left without a live owner once the owner is gone (and removes the reference
    /// from dependents that keep another live owner), Orphan removes the reference from every
    /// dependent, Foreground holds the owner with the `foregroundDeletion` finalizer until its
    /// `blockOwnerDeletion` dependents are gone. Returns the object as the DELETE answered it.
    pub fn delete_with(
        &self,
        rid: ResourceId,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<ObjectRef, ApiError> {
        if let (srid, Some(view)) = self.storage_of(rid) {
            return self
                .delete_with(srid, namespace, name, opts)
                .map(|o| self.present(rid, Some(view), o))
                .map_err(|e| served_error(e, &self.registry.get(srid), &self.registry.get(rid)));
        }
        let rt = self.registry.get(rid);
        let qp = rt.qualified_plural();
        let key = key_of(namespace, name);
        let current = self.get(rid, namespace, name)?;
        self.check_preconditions(&rt, &current, opts)?;
        // Before the deletion's first change (cascades included); once started it completes.
        crate::deadline::check(opts.deadline)?;
        let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
        if is_namespace && !opts.dry_run {
            self.delete_namespace_contents(name);
        }
        if !opts.dry_run {
            match opts.propagation {
                Propagation::Orphan => self.orphan_dependents(&current.uid),
                Propagation::Foreground => return self.delete_foreground(rid, &current),
                Propagation::Background => {}
            }
        }
        let (out, removed) = {
            let mut inner = self.inner.write();
            let old = inner
                .table(rid)
                .latest(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&qp, name))?;
            self.check_preconditions(&rt, &old, opts)?;
            let mut v = old.value();
            let already_deleting = v["metadata"]
                .get("deletionTimestamp")
                .is_some_and(|d| !d.is_null());
            if already_deleting && !finalizers_empty(&v) {
                return Ok(old);
            }
            let rv = inner.rv + 1;
            if !opts.dry_run {
                inner.rv = rv;
                v["metadata"]["resourceVersion"] = json!(rv.to_string());
            }
            if finalizers_empty(&v) {
                let so = Arc::new(StoredObject::from_value(&rt, &v));
                if opts.dry_run {
                    return Ok(so);
                }
                self.commit(&mut inner, rid, ChangeType::Deleted, so.clone(), Some(old));
                (so, true)
            } else {
                Self::mark_deleting(&mut v);
                let so = Arc::new(StoredObject::from_value(&rt, &v));
                if opts.dry_run {
                    return Ok(so);
                }
                self.commit(&mut inner, rid, ChangeType::Modified, so.clone(), Some(old));
                (so, false)
            }
        };
        self.notify(out.rv);
        if removed {
            self.collect_garbage(&out);
        }
        Ok(out)
    }

    fn etcd_key(rt: &ResourceType, namespace: &str, name: &str) -> String {
        let prefix = match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "services") => "services/specs".to_string(),
            ("", _)
            | ("apps", _)
            | ("coordination.k8s.io", _)
            | ("events.k8s.io", _)
            | ("rbac.authorization.k8s.io", _)
            | ("policy", _) => rt.plural.clone(),
            (g, p) => format!("{g}/{p}"),
        };
        if namespace.is_empty() {
            format!("/registry/{prefix}/{name}")
        } else {
            format!("/registry/{prefix}/{namespace}/{name}")
        }
    }

    fn check_preconditions(
        &self,
        rt: &ResourceType,
        o: &StoredObject,
        opts: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let fail = |what: String| {
            Err(ApiError::precondition_failed(
                &rt.qualified_plural(),
                &o.name,
                &Self::etcd_key(rt, &o.namespace, &o.name),
                &what,
            ))
        };
        if let Some(uid) = opts.precondition_uid.as_deref() {
            if uid != o.uid {
                return fail(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    o.uid
                ));
            }
        }
        if let Some(rv) = opts.precondition_rv.as_deref() {
            if rv != o.rv.to_string() {
                return fail(format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    o.rv
                ));
            }
        }
        Ok(())
    }

    /// Sets `deletionTimestamp` (once) and bumps a kept generation, as BeforeDelete does.
    fn mark_deleting(v: &mut Value) {
        if v["metadata"]
            .get("deletionTimestamp")
            .is_none_or(|d| d.is_null())
        {
            v["metadata"]["deletionTimestamp"] = json!(now_timestamp());
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if let Some(g) = v["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
                v["metadata"]["generation"] = json!(g + 1);
            }
        }
    }

    fn by_key(&self, rid: ResourceId, key: &str) -> Option<ObjectRef> {
        self.inner.read().table_ref(rid)?.latest(key).cloned()
    }

    fn dependents_of(&self, uid: &str) -> Vec<(ResourceId, String)> {
        self.inner
            .read()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn is_live(&self, uid: &str) -> bool {
        self.inner.read().by_uid.contains_key(uid)
    }

    /// Whether `dependent` references `owner_uid` with `blockOwnerDeletion: true`.
    fn blocks(dependent: &StoredObject, owner_uid: &str) -> bool {
        dependent.value()["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["uid"] == owner_uid && r["blockOwnerDeletion"] == true)
    }

    /// Removes the ownerReference to `owner_uid` from one dependent.
    fn drop_owner_ref(&self, rid: ResourceId, dep: &StoredObject, owner_uid: &str) {
        let _ = self.update_with(
            rid,
            &dep.namespace,
            &dep.name,
            Subresource::Main,
            |mut v| {
                if let Some(refs) = v["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"] != owner_uid);
                    if refs.is_empty() {
                        v["metadata"]
                            .as_object_mut()
                            .expect("metadata")
                            .remove("ownerReferences");
                    }
                }
                v["metadata"]["resourceVersion"] = Value::Null;
                Ok(v)
            },
        );
    }

    fn orphan_dependents(&self, owner_uid: &str) {
        for (rid, key) in self.dependents_of(owner_uid) {
            if let Some(d) = self.by_key(rid, &key) {
                self.drop_owner_ref(rid, &d, owner_uid);
            }
        }
    }

    fn delete_foreground(
        &self,
        rid: ResourceId,
        owner: &StoredObject,
    ) -> Result<ObjectRef, ApiError> {
        let marked = self.mark_foreground(rid, owner)?;
        let mut deps: Vec<(bool, ResourceId, String)> = self
            .dependents_of(&owner.uid)
            .into_iter()
            .filter_map(|(r, k)| {
                self.by_key(r, &k)
                    .map(|d| (!Self::blocks(&d, &owner.uid), r, k))
            })
            .collect();
        deps.sort();
        for (_, r, k) in deps {
            if let Some(d) = self.by_key(r, &k) {
                let _ = self.delete_with(
                    r,
                    &d.namespace,
                    &d.name,
                    &DeleteOptions {
                        propagation: Propagation::Foreground,
                        ..DeleteOptions::default()
                    },
                );
            }
        }
        self.finish_foreground(rid, &owner.uid);
        Ok(marked)
    }

    /// Starts a foreground deletion in one write: the `foregroundDeletion` finalizer and
    /// `deletionTimestamp` (which updates cannot set).
    fn mark_foreground(&self, rid: ResourceId, o: &StoredObject) -> Result<ObjectRef, ApiError> {
        let rt = self.registry.get(rid);
        let key = o.key();
        let out = {
            let mut inner = self.inner.write();
            let old = inner
                .table(rid)
                .latest(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&rt.qualified_plural(), &o.name))?;
            let mut v = old.value();
            let mut fins = v["metadata"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
                fins.push(json!(FOREGROUND_FINALIZER));
            }
            v["metadata"]["finalizers"] = Value::Array(fins);
            Self::mark_deleting(&mut v);
            let rv = inner.rv + 1;
            inner.rv = rv;
            v["metadata"]["resourceVersion"] = json!(rv.to_string());
            let so = Arc::new(StoredObject::from_value(&rt, &v));
            self.commit(&mut inner, rid, ChangeType::Modified, so.clone(), Some(old));
            so
        };
        self.notify(out.rv);
        Ok(out)
    }

    /// Removes the `foregroundDeletion` finalizer of a deleting owner once none of its
    /// `blockOwnerDeletion` dependents remain.
    fn finish_foreground(&self, rid: ResourceId, owner_uid: &str) {
        let Some((_, key)) = self.inner.read().by_uid.get(owner_uid).cloned() else {
            return;
        };
        let Some(owner) = self.by_key(rid, &key) else {
            return;
        };
        let v = owner.value();
        let waiting = v["metadata"]["deletionTimestamp"].is_string()
            && v["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == FOREGROUND_FINALIZER));
        if !waiting {
            return;
        }
        let blocked = self.dependents_of(owner_uid).into_iter().any(|(r, k)| {
            self.by_key(r, &k)
                .is_some_and(|d| Self::blocks(&d, owner_uid))
        });
        if blocked {
            return;
        }
        let _ = self.update_with(
            rid,
            &owner.namespace,
            &owner.name,
            Subresource::Main,
            |mut v| {
                if let Some(f) = v["metadata"]["finalizers"].as_array_mut() {
                    f.retain(|x| x != FOREGROUND_FINALIZER);
                }
                v["metadata"]["resourceVersion"] = Value::Null;
                Ok(v)
            },
        );
    }

    /// The garbage collector's reaction to an object that is gone: its dependents without another
    /// live owner are deleted (Background), the others lose the dangling reference; owners waiting
    /// in foreground deletion for it may now go.
    fn collect_garbage(&self, gone: &StoredObject) {
        for (rid, key) in self.dependents_of(&gone.uid) {
            let Some(d) = self.by_key(rid, &key) else {
                continue;
            };
            let other_owner = d.owners.iter().any(|u| *u != gone.uid && self.is_live(u));
            if other_owner {
                self.drop_owner_ref(rid, &d, &gone.uid);
            } else {
                let _ = self.delete_with(rid, &d.namespace, &d.name, &DeleteOptions::default());
            }
        }
        for owner in &gone.owners {
            let found = self.inner.read().by_uid.get(owner).cloned();
            if let Some((rid, _)) = found {
                self.finish_foreground(rid, owner);
            }
        }
    }

    fn delete_namespace_contents(&self, ns: &str) {
        for (rid, rt) in self.registry.all() {
            if !rt.namespaced || views::of(&rt).is_some() {
                continue;
            }
            let items = match self.list(rid, &ListRequest::all(Some(ns))) {
                Ok(p) => p.items,
                Err(_) => continue,
            };
            for o in items {
                // Finalizers on contents are honoured: such objects stay until they are cleared.
                let _ = self.delete(rid, ns, &o.name, None);
            }
        }
    }

    /// Lists one page. See [`ListRequest`] for the resourceVersion and paging semantics; expired or
    /// compacted continue tokens are 410 with the apiserver's body.
    pub fn list(&self, rid: ResourceId, req: &ListRequest) -> Result<ListPage, ApiError> {
        let rt = self.registry.get(rid);
        validate_fields(&rt, &req.fields)?;
        if let (srid, Some(view)) = self.storage_of(rid) {
            let mut stored_req = req.clone();
            stored_req.fields = view.translate_fields(&req.fields)?;
            let mut page = self.list(srid, &stored_req)?;
            page.items = page
                .items
                .into_iter()
                .map(|o| self.present(rid, Some(view), o))
                .collect();
            return Ok(page);
        }
        let inner = self.inner.read();
        let (snapshot, start_after) = match &req.continue_token {
            Some(tok) if !tok.is_empty() => {
                let t = ContinueToken::decode(tok)?;
                if t.epoch != inner.continue_epoch || t.rv < inner.compacted {
                    return Err(ApiError::expired_continue(
                        &ContinueToken::new(inner.rv, &t.start, inner.continue_epoch).encode(),
                    ));
                }
                (t.rv, Some(t.start))
            }
            _ => {
                let rv = match req.version {
                    ListVersion::Latest => inner.rv,
                    ListVersion::NotOlderThan(x) => {
                        if x > inner.rv {
                            return Err(ApiError::too_large_rv(x, inner.rv));
                        }
                        inner.rv
                    }
                    ListVersion::Exact(x) => {
                        if x > inner.rv {
                            return Err(ApiError::too_large_rv(x, inner.rv));
                        }
                        if x < inner.compacted {
                            let mut e = ApiError::too_old_rv(x, inner.compacted);
                            e.message =
                                "The resourceVersion for the provided list is too old.".into();
                            return Err(e);
                        }
                        x
                    }
                };
                (rv, None)
            }
        };
        let Some(table) = inner.table_ref(rid) else {
            return Ok(ListPage {
                rv: snapshot,
                items: vec![],
                continue_token: None,
                remaining: None,
                shard_info: req.shard.as_ref().map(ToString::to_string),
            });
        };
        let prefix = match (&req.namespace, rt.namespaced) {
            (Some(ns), true) => Some(format!("{ns}/")),
            _ => None,
        };
        let lower = match (&start_after, &prefix) {
            (Some(s), _) => Bound::Excluded(s.clone()),
            (None, Some(p)) => Bound::Included(p.clone()),
            (None, None) => Bound::Unbounded,
        };
        let limit = req.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key = None;
        let mut iter = table
            .keys
            .range::<String, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())));
        let mut more = false;
        for (k, versions) in iter.by_ref() {
            let Some(obj) = Table::at(versions, snapshot) else {
                continue;
            };
            if !obj.matches(&req.labels, &req.fields) {
                continue;
            }
            if req.shard.as_ref().is_some_and(|s| !obj.in_shard(s)) {
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(obj.clone());
            last_key = Some(k.clone());
        }
        let mut remaining = None;
        let continue_token = if more {
            let token = ContinueToken::new(
                snapshot,
                last_key.as_deref().unwrap_or(""),
                inner.continue_epoch,
            );
            if req.labels.is_empty() && req.fields.is_empty() && req.shard.is_none() {
                // `more` means one matching item was seen past the page; count it and the rest.
                let rest = iter
                    .filter(|(_, vs)| Table::at(vs, snapshot).is_some())
                    .count();
                remaining = Some(rest + 1);
            }
            Some(token.encode())
        } else {
            None
        };
        Ok(ListPage {
            rv: snapshot,
            items,
            continue_token,
            remaining,
            shard_info: req.shard.as_ref().map(ToString::to_string),
        })
    }

    /// Changes with resourceVersion greater than `after`, at most `max` of them. Err carries the
    /// oldest served resourceVersion when `after` has been compacted away.
    pub fn changes_since(&self, after: u64, max: usize) -> Result<Vec<Arc<Change>>, u64> {
        let inner = self.inner.read();
        if after < inner.compacted {
            return Err(inner.compacted);
        }
        let start = inner.log.partition_point(|c| c.rv <= after);
        Ok(inner.log.range(start..).take(max).cloned().collect())
    }

    /// Compacts all history: every resourceVersion older than the current one becomes 410, and
    /// old versions and tombstones are dropped.
    pub fn compact(&self) {
        let mut inner = self.inner.write();
        inner.compacted = inner.rv;
        inner.log.clear();
        for t in inner.tables.iter_mut() {
            t.keys.retain(|_, vs| {
                let last = vs.pop();
                vs.clear();
                match last {
                    Some(v) if v.obj.is_some() => {
                        vs.push(v);
                        true
                    }
                    _ => false,
                }
            });
        }
    }

    /// Invalidates every continue token issued so far (they get 410 Expired).
    pub fn expire_continue_tokens(&self) {
        self.inner.write().continue_epoch += 1;
    }

    /// Snapshot of every live object of one type (all namespaces), latest version.
    pub fn list_all(&self, rid: ResourceId) -> Vec<ObjectRef> {
        self.list(rid, &ListRequest::all(None))
            .map(|p| p.items)
            .unwrap_or_default()
    }
}

/// An error of the storage type of a view as the view's type reports it (`events.events.k8s.io
/// "x" not found` rather than `events "x" not found`).
fn served_error(mut e: ApiError, storage: &ResourceType, served: &ResourceType) -> ApiError {
    let (from, to) = (storage.qualified_plural(), served.qualified_plural());
    e.message = e
        .message
        .replacen(&format!("{from} \""), &format!("{to} \""), 1);
    if let Some(d) = e.details.as_mut().and_then(Value::as_object_mut) {
        if d.get("kind").and_then(Value::as_str) == Some(storage.plural.as_str()) {
            d.insert("kind".into(), json!(served.plural));
            if !served.group.is_empty() {
                d.insert("group".into(), json!(served.group));
            }
        }
    }
    e
}

/// Rejects field selectors on fields `rt` does not support (400 naming the field).
pub fn validate_fields(rt: &ResourceType, fields: &FieldSelector) -> Result<(), ApiError> {
    for r in &fields.requirements {
        let ok = r.field == "metadata.name"
            || r.field == "metadata.namespace"
            || extra_selectable_fields(rt).contains(&r.field.as_str());
        if !ok {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            )));
        }
    }
    Ok(())
}

/// Write-time conversions the apiserver performs on every create and update: timestamps take
/// their canonical form, a Secret's `stringData` is merged into `data` (base64) and dropped, a
/// Deployment gets its defaults.
fn normalize(rt: &ResourceType, obj: &mut Value) {
    if rt.custom {
        timestamps::normalize_metadata(obj);
    } else {
        timestamps::normalize(obj);
    }
    if deployment::is_deployment(rt) {
        deployment::set_defaults(obj);
        return;
    }
    if rt.group.is_empty() && rt.plural == "secrets" {
        use base64::Engine;
        let Some(m) = obj.as_object_mut() else {
            return;
        };
        if let Some(Value::Object(sd)) = m.remove("stringData") {
            let data = m.entry("data").or_insert_with(|| json!({}));
            if !data.is_object() {
                *data = json!({});
            }
            for (k, v) in sd {
                let text = v.as_str().unwrap_or_default();
                data[k.as_str()] = json!(base64::engine::general_purpose::STANDARD.encode(text));
            }
        }
    }
}

/// Fills in the status a fresh object of a built-in type has on a real cluster.
fn default_status(rt: &ResourceType, obj: &mut Value) {
    if rt.kind == "CustomResourceDefinition" && obj.get("status").is_none() {
        let names = obj["spec"]["names"].clone();
        let stored: Vec<Value> = obj["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .map(|v| v["name"].clone())
            .collect();
        let now = now_timestamp();
        obj["status"] = json!({
            "acceptedNames": names,
            "storedVersions": stored,
            "conditions": [
                {"type":"NamesAccepted","status":"True","reason":"NoConflicts","message":"no conflicts found","lastTransitionTime":now},
                {"type":"Established","status":"True","reason":"InitialNamesAccepted","message":"the initial names have been accepted","lastTransitionTime":now}
            ]
        });
        return;
    }
    if !rt.group.is_empty() {
        return;
    }
    match rt.plural.as_str() {
        "namespaces" => {
            if obj.get("status").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
            if !obj["spec"].is_object() {
                obj["spec"] = json!({});
            }
            if obj["spec"].get("finalizers").is_none() {
                obj["spec"]["finalizers"] = json!(["kubernetes"]);
            }
            let name = obj["metadata"]["name"].clone();
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
        "secrets" if obj["type"].as_str().is_none_or(|t| t.is_empty()) => {
            obj["type"] = json!("Opaque");
        }
        "pods" if obj.get("status").is_none() => {
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
        _ => {}
    }
}

/// `names.MaxGeneratedNameLength`: 63 characters less the 5 random ones.
const MAX_GENERATED_NAME_PREFIX: usize = 58;

fn random_suffix() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, ns: &str) -> Value {
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":ns},"data":{"k":"v"}})
    }

    #[test]
    fn every_write_bumps_rv_once() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        let r0 = s.current_rv();
        let a = s.create(cms, Some("default"), cm("a", "default")).unwrap();
        assert_eq!(a.rv, r0 + 1);
        let mut v = a.value();
        v["data"]["k"] = json!("w");
        let b = s.update(cms, "default", "a", Subresource::Main, v).unwrap();
        assert_eq!(b.rv, r0 + 2);
        let d = s.delete(cms, "default", "a", None).unwrap();
        assert_eq!(d.rv, r0 + 3);
        assert_eq!(s.changes_since(r0, 10).unwrap().len(), 3);
    }

    #[test]
    fn create_in_missing_namespace_is_not_found() {
        let s = Store::new(1000);
        let e = s
            .create(s.rid("v1", "configmaps"), Some("nope"), cm("a", "nope"))
            .unwrap_err();
        assert_eq!(e.code, 404);
        assert_eq!(e.message, "namespaces \"nope\" not found");
    }

    #[test]
    fn stale_update_conflicts() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        let a = s.create(cms, Some("default"), cm("a", "default")).unwrap();
        let mut v = a.value();
        v["data"]["k"] = json!("1");
        s.update(cms, "default", "a", Subresource::Main, v.clone())
            .unwrap();
        v["data"]["k"] = json!("2");
        let e = s
            .update(cms, "default", "a", Subresource::Main, v)
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(e.reason, "Conflict");
    }

    #[test]
    fn paged_list_reads_one_snapshot() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        for i in 0..10 {
            s.create(cms, Some("default"), cm(&format!("c{i}"), "default"))
                .unwrap();
        }
        let mut req = ListRequest::all(Some("default"));
        req.limit = Some(4);
        let p1 = s.list(cms, &req).unwrap();
        assert_eq!(p1.items.len(), 4);
        assert_eq!(p1.remaining, Some(6));
        // Changes after the first page must not show up in later pages.
        s.delete(cms, "default", "c9", None).unwrap();
        s.create(cms, Some("default"), cm("c99", "default"))
            .unwrap();
        let mut names: Vec<String> = p1.items.iter().map(|o| o.name.clone()).collect();
        let mut tok = p1.continue_token;
        while let Some(t) = tok {
            req.continue_token = Some(t);
            let p = s.list(cms, &req).unwrap();
            assert_eq!(p.rv, p1.rv);
            names.extend(p.items.iter().map(|o| o.name.clone()));
            tok = p.continue_token;
        }
        let expected: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn compaction_expires_tokens_and_watches() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        for i in 0..5 {
            s.create(cms, Some("default"), cm(&format!("c{i}"), "default"))
                .unwrap();
        }
        let mut req = ListRequest::all(None);
        req.limit = Some(2);
        let p1 = s.list(cms, &req).unwrap();
        let before = s.current_rv();
        s.create(cms, Some("default"), cm("late", "default"))
            .unwrap();
        s.compact();
        req.continue_token = p1.continue_token;
        let e = s.list(cms, &req).unwrap_err();
        assert_eq!(e.code, 410);
        assert!(e.continue_token.is_some());
        assert_eq!(s.changes_since(before, 10).unwrap_err(), s.current_rv());
        assert_eq!(s.list_all(cms).len(), 6);
    }

    #[test]
    fn history_window_compacts_old_versions() {
        let s = Store::new(3);
        let cms = s.rid("v1", "configmaps");
        let start = s.current_rv();
        for i in 0..5 {
            s.create(cms, Some("default"), cm(&format!("c{i}"), "default"))
                .unwrap();
        }
        assert_eq!(s.log_len(), 3);
        assert!(s.changes_since(start, 10).is_err());
        assert_eq!(s.changes_since(s.current_rv() - 3, 10).unwrap().len(), 3);
        let mut req = ListRequest::all(None);
        req.version = ListVersion::Exact(start + 1);
        assert_eq!(s.list(cms, &req).unwrap_err().code, 410);
    }

    #[test]
    fn finalizers_delay_deletion() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        let mut v = cm("f", "default");
        v["metadata"]["finalizers"] = json!(["example.com/block"]);
        s.create(cms, Some("default"), v).unwrap();
        let d = s.delete(cms, "default", "f", None).unwrap();
        assert!(d.value()["metadata"]["deletionTimestamp"].is_string());
        assert!(s.get(cms, "default", "f").is_ok());
        s.update_with(cms, "default", "f", Subresource::Main, |mut v| {
            v["metadata"]["finalizers"] = json!([]);
            Ok(v)
        })
        .unwrap();
        assert_eq!(s.get(cms, "default", "f").unwrap_err().code, 404);
        let last = s.changes_since(s.current_rv() - 1, 10).unwrap();
        assert_eq!(last[0].kind, ChangeType::Deleted);
    }

    #[test]
    fn status_subresource_rules() {
        let s = Store::new(1000);
        let pods = s.rid("v1", "pods");
        let p = s
            .create(
                pods,
                Some("default"),
                json!({"metadata":{"name":"p"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"x:1"}]}}),
            )
            .unwrap();
        assert_eq!(p.value()["metadata"]["generation"], 1);
        let mut v = p.value();
        v["status"] = json!({"phase":"Running"});
        v["spec"]["containers"][0]["image"] = json!("x:2");
        let u = s
            .update(pods, "default", "p", Subresource::Main, v.clone())
            .unwrap();
        assert_eq!(
            u.value()["status"]["phase"],
            "Pending",
            "main resource ignores status"
        );
        assert_eq!(u.value()["metadata"]["generation"], 2);
        assert_eq!(u.field("spec.nodeName"), Some("n1"));
        v["metadata"]["resourceVersion"] = json!(u.rv.to_string());
        let st = s
            .update(pods, "default", "p", Subresource::Status, v)
            .unwrap();
        assert_eq!(st.value()["status"]["phase"], "Running");
        assert_eq!(st.value()["metadata"]["generation"], 2);
    }

    #[test]
    fn secret_string_data_becomes_data() {
        let s = Store::new(100);
        let rid = s.rid("v1", "secrets");
        let o = s
            .create(
                rid,
                Some("default"),
                json!({"metadata":{"name":"s"},"data":{"a":"YQ=="},"stringData":{"b":"hunter2"}}),
            )
            .unwrap()
            .value();
        assert_eq!(o["data"], json!({"a":"YQ==","b":"aHVudGVyMg=="}));
        assert!(o.get("stringData").is_none());
        assert_eq!(o["type"], "Opaque");
    }

    #[test]
    fn noop_update_keeps_rv() {
        let s = Store::new(1000);
        let cms = s.rid("v1", "configmaps");
        let a = s.create(cms, Some("default"), cm("a", "default")).unwrap();
        let b = s
            .update(cms, "default", "a", Subresource::Main, a.value())
            .unwrap();
        assert_eq!(a.rv, b.rv);
    }

    #[test]
    fn unsupported_field_selector_is_rejected() {
        let s = Store::new(1000);
        let mut req = ListRequest::all(None);
        req.fields = FieldSelector::parse("spec.foo=x").unwrap();
        let e = s.list(s.rid("v1", "configmaps"), &req).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("spec.foo"));
    }
}
