//! Test plugin for the `kube` and `events` capabilities: on every event it
//! makes the calls its `[config] ops` lists, in order, and returns the outcome
//! of each as JSON in its `err` result, so a test can compare what the plugin
//! was told with what the server holds.
//!
//! An op: `{"call": "get|create|replace|patch|delete|get-status|
//! replace-status|patch-status|event|dry-run|finalizer", "resource", "namespace",
//! "name", "body", "patch": "merge|json|strategic-merge|apply", "force",
//! "delete": {"uid", "resource_version", "propagation"}, "event": {"type",
//! "reason", "action", "note", "regarding": {"api_version", "kind",
//! "namespace", "name", "uid"}}, "repeat": N}`. An Event is about the event's
//! object unless `regarding` names another. Every string is passed to the host
//! exactly as given, so a case can try what a hostile plugin would; `repeat`
//! makes the same call N times and reports the outcome of each; `unread` leaves
//! the answer unread (nothing copied into the plugin's memory). `finalizer`
//! (with `key`, `finalizer` and optionally `cleanup_requeue_ms`) runs the
//! SDK's finalizer helper for that object: `Apply` requeues after 1000 ms,
//! `Cleanup` is done, or requeues after `cleanup_requeue_ms`, or fails when
//! `cleanup_fails`; its outcome is
//! `{"ok": true, "step": "none|apply|cleanup", "action": "done|requeue MS"}`
//! (the op schema of plugins/testing/js-probe).
//!
//! `[config] init_ops` lists ops made once in `init` (outcomes not returned).
//!
//! Invariant: `on-event` always returns `err([<outcome>, ...])`, one outcome
//! per op: `{"ok": true, "object": <json or null>}` or
//! `{"ok": false, "error": "<api-error case>", "message": "..."}`.

use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

use wasm_informer_sdk::events::{self, EventType};
use wasm_informer_sdk::finalizer::{finalizer, Step};
use wasm_informer_sdk::kube::{self, DeleteParams, Patch, Propagation};
use wasm_informer_sdk::{
    export_plugin, Action, ApiError, Config, Event, Handler, Object, ObjectReference,
    ReconcileError, Request, Result,
};

#[derive(Deserialize, Default)]
#[serde(default)]
struct Delete {
    uid: Option<String>,
    resource_version: Option<String>,
    propagation: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Ev {
    #[serde(rename = "type")]
    type_: String,
    reason: String,
    action: String,
    note: String,
    regarding: Option<Regarding>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
struct Regarding {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
    uid: Option<String>,
}

#[derive(Deserialize)]
struct Op {
    call: String,
    #[serde(default)]
    resource: String,
    namespace: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    body: Value,
    #[serde(default)]
    patch: String,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    delete: Delete,
    #[serde(default)]
    event: Ev,
    #[serde(default)]
    repeat: Option<u32>,
    /// Report `{"ok": true}` without reading the answer's JSON (the answer
    /// stays in the host; nothing is copied into this plugin's memory).
    #[serde(default)]
    unread: bool,
    /// The cache key, for `finalizer`.
    #[serde(default)]
    key: String,
    /// The finalizer's name, for `finalizer`.
    #[serde(default)]
    finalizer: String,
    /// What `Cleanup` answers under `finalizer`: a requeue after this many ms
    /// when given, else done.
    #[serde(default)]
    cleanup_requeue_ms: Option<u64>,
    /// `Cleanup` fails (a retry) under `finalizer`.
    #[serde(default)]
    cleanup_fails: bool,
}

#[derive(Deserialize)]
struct Settings {
    ops: Vec<Op>,
    /// Ops made once in `init`, before any event; their outcomes are not
    /// returned (the server's log shows what was sent).
    #[serde(default)]
    init_ops: Vec<Op>,
}

struct Probe {
    ops: Vec<Op>,
}

fn error_case(e: &ApiError) -> (&'static str, String) {
    match e {
        ApiError::Forbidden(m) => ("forbidden", m.clone()),
        ApiError::NotFound(m) => ("not-found", m.clone()),
        ApiError::Conflict(m) => ("conflict", m.clone()),
        ApiError::AlreadyExists(m) => ("already-exists", m.clone()),
        ApiError::Invalid(d) => ("invalid", d.message.clone()),
        ApiError::RateLimited(m) => ("rate-limited", m.clone()),
        ApiError::Timeout(m) => ("timeout", m.clone()),
        ApiError::Unavailable(m) => ("unavailable", m.clone()),
    }
}

fn outcome(r: Result<Option<Object>>, unread: bool) -> Value {
    match r {
        Ok(_) if unread => json!({ "ok": true }),
        Ok(o) => json!({
            "ok": true,
            "object": o.map(|o| serde_json::from_str::<Value>(&o.json()).unwrap_or(Value::Null)),
        }),
        Err(e) => match e.api() {
            Some(api) => {
                let (case, message) = error_case(api);
                json!({ "ok": false, "error": case, "message": message })
            }
            None => json!({ "ok": false, "error": "sdk", "message": e.message() }),
        },
    }
}

impl Probe {
    fn run(&self, op: &Op, event: Option<&Event>) -> Value {
        let ns = op.namespace.as_deref();
        let patch = || match op.patch.as_str() {
            "json" => Patch::Json(op.body.clone()),
            "strategic-merge" => Patch::Strategic(op.body.clone()),
            "apply" => Patch::Apply(op.body.clone()),
            _ => Patch::Merge(op.body.clone()),
        };
        let r = match op.call.as_str() {
            "get" => kube::get(&op.resource, ns, &op.name).map(Some),
            "create" => kube::create(&op.resource, ns, &op.body).map(Some),
            "replace" => kube::replace(&op.resource, ns, &op.name, &op.body).map(Some),
            "patch" => kube::patch(&op.resource, ns, &op.name, &patch(), op.force).map(Some),
            "delete" => {
                let p = DeleteParams {
                    uid: op.delete.uid.clone(),
                    resource_version: op.delete.resource_version.clone(),
                    propagation: match op.delete.propagation.as_deref() {
                        Some("orphan") => Some(Propagation::Orphan),
                        Some("foreground") => Some(Propagation::Foreground),
                        Some("background") => Some(Propagation::Background),
                        _ => None,
                    },
                };
                kube::delete(&op.resource, ns, &op.name, &p)
            }
            "get-status" => kube::get_status(&op.resource, ns, &op.name).map(Some),
            "replace-status" => {
                kube::replace_status(&op.resource, ns, &op.name, &op.body).map(Some)
            }
            "patch-status" => {
                kube::patch_status(&op.resource, ns, &op.name, &patch(), op.force).map(Some)
            }
            "event" => {
                let t = if op.event.type_ == "warning" {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                let regarding = match &op.event.regarding {
                    Some(r) => ObjectReference {
                        api_version: r.api_version.clone(),
                        kind: r.kind.clone(),
                        namespace: r.namespace.clone(),
                        name: r.name.clone(),
                        uid: r.uid.clone(),
                    },
                    None => match event {
                        Some(e) => e.object().reference(),
                        None => {
                            return json!({ "ok": false, "error": "sdk", "message": "an event op in init needs `regarding`" })
                        }
                    },
                };
                events::publish(
                    &regarding,
                    t,
                    &op.event.reason,
                    &op.event.action,
                    &op.event.note,
                )
                .map(|()| None)
            }
            "dry-run" => return json!({ "ok": true, "dry_run": kube::dry_run() }),
            "finalizer" => return run_finalizer(op),
            other => {
                return json!({ "ok": false, "error": "sdk", "message": format!("unknown call {other}") })
            }
        };
        outcome(r, op.unread)
    }
}

/// Runs the SDK's finalizer helper for the op's object.
fn run_finalizer(op: &Op) -> Value {
    let request = Request {
        resource: op.resource.clone(),
        namespace: op.namespace.clone(),
        name: op.name.clone(),
        key: op.key.clone(),
    };
    let mut step = "none";
    let r = finalizer(&request, &op.finalizer, |s| match s {
        Step::Apply(_) => {
            step = "apply";
            Ok(Action::requeue(Duration::from_millis(1000)))
        }
        Step::Cleanup(_) => {
            step = "cleanup";
            if op.cleanup_fails {
                return Err(ReconcileError::retry("cleanup failed"));
            }
            Ok(match op.cleanup_requeue_ms {
                Some(ms) => Action::requeue(Duration::from_millis(ms)),
                None => Action::done(),
            })
        }
    });
    match r {
        Ok(a) => {
            let action = match a.requeue_after() {
                None => "done".to_string(),
                Some(d) => format!("requeue {}", d.as_millis()),
            };
            json!({ "ok": true, "step": step, "action": action })
        }
        Err(ReconcileError::Retry(m) | ReconcileError::Terminal(m)) => {
            json!({ "ok": false, "error": "reconcile", "step": step, "message": m })
        }
    }
}

impl Handler for Probe {
    fn init(config: &Config) -> Result<Self> {
        let s: Settings = config.parse()?;
        let probe = Probe { ops: s.ops };
        for op in &s.init_ops {
            let _ = probe.run(op, None);
        }
        Ok(probe)
    }

    fn on_add(&mut self, e: &Event) -> Result<()> {
        let mut out: Vec<Value> = Vec::new();
        for op in &self.ops {
            match op.repeat {
                Some(n) => out.push(Value::Array(
                    (0..n).map(|_| self.run(op, Some(e))).collect(),
                )),
                None => out.push(self.run(op, Some(e))),
            }
        }
        Err(Value::Array(out).to_string().into())
    }

    fn on_update(&mut self, e: &Event) -> Result<()> {
        self.on_add(e)
    }

    fn on_delete(&mut self, e: &Event) -> Result<()> {
        self.on_add(e)
    }

    fn on_sync(&mut self, e: &Event) -> Result<()> {
        self.on_add(e)
    }
}

export_plugin!(Probe);
