//! `wasm-informer test MANIFEST --objects FILE [--events FILE] [--expect
//! FILE]`: a plugin's unit test, with no cluster.
//!
//! Job: load the plugin as the host does (the same runtime, limits, grants
//! and `[config]`), give it a cache holding the objects file (what `kubectl
//! get -o yaml` prints), deliver that cache as the initial list and then each
//! change of the events file, and print, as one JSON document, every call's
//! log lines, the writes it attempted and the Events it recorded, and how the
//! call ended. Writes go to the embedded simulator, seeded with the same
//! objects, as dry runs: the plugin gets real answers and nothing is kept.
//! A controller plugin is reconciled instead: once per primary key that a
//! delivered object queues, read from `for`, `owns` and `[[watches]]` as
//! the host's work queue reads them (an owned object queues its controller
//! owner).
//!
//! The output (see [`Output`]) is stable: the same plugin, fixture and
//! version of this binary print the same bytes. With `--expect`, the output
//! must contain the expected document (see [`expect`]).
//!
//! Invariants: a write is never sent without `dryRun=All`; the exit status is
//! 1 when the plugin trapped (or could not start), a write was invalid (the
//! simulator validates as the API server does; unless `--allow-invalid`), a
//! change of the events file reached no call (unless `--allow-unmatched`),
//! every call failed (without `--expect`), or the output does not match
//! `--expect`; 2 for bad input (an unknown resource, a world the manifest
//! does not name); 0 otherwise. After a trap the next
//! change goes to a fresh instance (`init` again), as the host would do; the
//! host would also replay the cache into it, which the test leaves out so
//! that each step shows one call.

pub mod api;
pub mod cache;
pub mod capture;
pub mod expect;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use kube_informer::indexer::IndexSpec;
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::ObjectRef;
use kube_informer::workqueue::triggers::KeyMap;
use serde::Serialize;
use serde_json::Value;
use wasm_informer_runtime::capability::api::{ApiRequest, ClusterApi};
use wasm_informer_runtime::capability::events::{EventRecorder, EventsState, EVENTS_RESOURCE};
use wasm_informer_runtime::capability::kube::{Grants, KubeClient, KubeState, WriteIntents};
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    CallOutcome, EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginInstance,
    PluginLimits, PluginSpec, PluginStatus, PluginTrap, ReconcileOutcome, ReconcileRequest,
    StartError, World,
};
use wasm_informer_selector::LabelSelector;

use self::api::FixtureApi;
use self::cache::FixtureCache;
use self::capture::{Effect, Effects};
use super::Failure;
use crate::config::{ControllerSpec, HostSettings, PluginManifest};
use crate::fixture::{ChangeType, FixtureObject, Resolver};

/// Flags of `test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The plugin's manifest (its `wasm` must be built).
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// The cache to start from: Kubernetes objects in YAML or JSON, as
    /// `kubectl get -o yaml` prints them (a List, or documents).
    #[arg(long, value_name = "FILE", required_unless_present = "replay")]
    pub objects: Option<PathBuf>,
    /// Changes fed after the initial list, in order: watch events
    /// (`{type: ADDED|MODIFIED|DELETED, object}`) or bare objects.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Fails unless the output contains this JSON document.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// Compilation cache directory (default: the config directory's
    /// `cache_dir`, else the user's cache directory).
    #[arg(long, env = "WASM_INFORMER_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Exit 0 even when writes were invalid (the simulator refused them as
    /// a real API server would).
    #[arg(long)]
    pub allow_invalid: bool,
    /// Exit 0 even when a change of the events file reached no call (the
    /// plugin does not watch its resource, or its filters exclude it).
    #[arg(long)]
    pub allow_unmatched: bool,
    /// Exit 0 even when every call ended in the plugin's error (without
    /// `--expect`, that fails the test).
    #[arg(long)]
    pub allow_errors: bool,
    /// Run over a recording (`run --record`, `record`) instead of
    /// `--objects` and `--events`: its initial state is the cache and the
    /// simulator's objects, its events the changes. The output lists the
    /// plugin's intended writes, normalised as shadow versions compare them.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["objects", "events"])]
    pub replay: Option<PathBuf>,
    /// With `--replay`: replay this second manifest too and print, per
    /// object, where its intended writes differ from the first's (as
    /// `shadow diff` prints a shadow's); exits 1 when some write differs.
    #[arg(long, value_name = "MANIFEST", requires = "replay")]
    pub against: Option<PathBuf>,
    /// Run under the API grants of this manifest instead of the plugin's
    /// own (the second of `--against` when it is a shadow, which has none).
    #[arg(skip)]
    pub grants_of: Option<PathBuf>,
}

/// What the plugin was told.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventOut {
    /// `added`, `updated`, `deleted` or `synced`.
    pub kind: String,
    /// Resource id.
    pub resource: String,
    /// `namespace/name` or `name`.
    pub key: String,
    /// Part of the initial list.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub initial_list: bool,
}

/// What a controller was asked to reconcile.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReconcileOut {
    /// The primary resource.
    pub resource: String,
    /// The object's key.
    pub key: String,
}

/// One log line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogOut {
    /// `trace` … `error`.
    pub level: String,
    /// The line.
    pub message: String,
    /// `stdout` or `stderr` for the guest's own output; absent for the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
}

/// One write the plugin attempted (sent as a dry run, or refused).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WriteOut {
    /// `create`, `replace`, `patch` or `delete`.
    pub verb: String,
    /// For a patch: `merge`, `json`, `strategic-merge` or `apply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Resource id.
    pub resource: String,
    /// `status` for the status subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// Namespace of a namespaced object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name (absent for a create whose name the server picks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The request body: the object or the patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// `ok`, `forbidden` (not granted: nothing was sent), or the error the
    /// simulator answered (`conflict`, `invalid`, `not-found`, ...).
    pub outcome: String,
    /// The simulator's HTTP status (absent when nothing was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Why it failed: the server's `Status` message and causes, as kubectl
    /// prints them, or the host's reason for refusing it unsent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorOut>,
}

/// Why a write failed.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct ErrorOut {
    /// The message, for example `Pod "web" is invalid: spec.containers:
    /// Required value`.
    pub message: String,
    /// The causes (`details.causes` of the server's Status).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<CauseOut>,
}

/// One cause of an invalid write.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct CauseOut {
    /// The field at fault, for example `spec.containers`.
    pub field: String,
    /// `FieldValueRequired`, `FieldValueInvalid`, ...
    pub reason: String,
    /// The message.
    pub message: String,
}

impl ErrorOut {
    /// From the body of a failed answer (a `Status`), if it is one.
    fn from_status(body: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(body).ok()?;
        (v["kind"] == "Status").then(|| Self {
            message: v["message"].as_str().unwrap_or_default().to_string(),
            causes: v["details"]["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| CauseOut {
                    field: c["field"].as_str().unwrap_or_default().to_string(),
                    reason: c["reason"].as_str().unwrap_or_default().to_string(),
                    message: c["message"].as_str().unwrap_or_default().to_string(),
                })
                .collect(),
        })
    }
}

/// The object an Event is about.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct RegardingOut {
    /// Kind.
    pub kind: String,
    /// Namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// One Event the plugin recorded.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct EventRecordOut {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Reason.
    pub reason: String,
    /// Action.
    pub action: String,
    /// Note.
    pub note: String,
    /// What it is about.
    pub regarding: RegardingOut,
    /// For a repeat folded into the first Event's series: the count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// `ok`, or `forbidden` when the manifest does not say `events = true`.
    pub outcome: String,
}

/// How a trap was classified.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrapOut {
    /// `out_of_fuel`, `deadline`, `memory_limit`, `stack_overflow`, `panic`
    /// or `other`.
    pub kind: String,
    /// The last line of the runtime's error.
    pub message: String,
}

/// One call into the plugin and what it did.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Step {
    /// The event delivered (event handlers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<EventOut>,
    /// The key reconciled (controllers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<ReconcileOut>,
    /// Log lines, in order.
    pub logs: Vec<LogOut>,
    /// Writes attempted, in order.
    pub writes: Vec<WriteOut>,
    /// Events recorded, in order.
    pub events: Vec<EventRecordOut>,
    /// `ok`, `error`, `trap`; for a controller `done`, `requeue`, `retry`,
    /// `terminal` or `trap`.
    pub outcome: String,
    /// The handler's error message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The trap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trap: Option<TrapOut>,
    /// A controller's requeue delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after_ms: Option<u64>,
    /// After a trap: the fresh instance's start (`init` again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<Box<Step>>,
}

/// Totals over every step.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Summary {
    /// Calls made after `init`.
    pub steps: usize,
    /// Handler errors (and controller retries and terminal errors).
    pub errors: usize,
    /// Traps, `init`'s included.
    pub traps: usize,
    /// Writes attempted.
    pub writes: usize,
    /// Writes refused as invalid: by the simulator's validation (a real API
    /// server would refuse them too), or by the host before sending.
    pub invalid: usize,
    /// Events recorded.
    pub events: usize,
}

/// The whole output of `test`.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Output {
    /// The plugin's name.
    pub plugin: String,
    /// The world its component targets.
    pub world: String,
    /// Always true: every write was a dry run.
    pub dry_run: bool,
    /// Instantiation and `init`.
    pub init: Step,
    /// One per delivered event or reconciled key, in order.
    pub steps: Vec<Step>,
    /// Totals.
    pub summary: Summary,
    /// Fixture objects the simulator refused (writes to them get 404).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Changes of the events file that reached no call into the plugin.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmatched: Vec<String>,
    /// With `--replay`: every write the plugin intended, in order, in the
    /// normalised form shadow versions are compared in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intents: Vec<crate::shadow::Intent>,
}

/// What `test` ends with: the output, and the exit code it calls for.
#[derive(Debug)]
pub struct Finished {
    /// The JSON output.
    pub output: Output,
    /// Differences from `--expect`.
    pub differences: Vec<String>,
    /// 0 or 1.
    pub code: u8,
}

/// The host settings of the config directory a manifest lives in
/// (`DIR/plugins/NAME.toml` → `DIR/host.toml`), if it does.
pub fn host_settings_of(manifest: &Path) -> Result<Option<HostSettings>, Failure> {
    let host_toml = manifest
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "plugins"))
        .and_then(Path::parent)
        .map(|dir| dir.join("host.toml"))
        .filter(|f| f.is_file());
    match host_toml {
        Some(f) => HostSettings::load(&f).map(Some).map_err(Failure::input),
        None => Ok(None),
    }
}

/// The runtime's description of a manifest's plugin, as the host builds it.
pub fn spec_of(manifest: &PluginManifest) -> PluginSpec {
    PluginSpec {
        name: manifest.name.clone(),
        config_json: manifest.config_json.clone(),
        read: manifest.readable(),
        limits: PluginLimits {
            fuel_per_event: manifest.limits.fuel_per_event,
            timeout_ms: manifest.limits.timeout_ms,
            memory_mb: manifest.limits.memory_mb,
            ..PluginLimits::default()
        },
        kube: manifest.kube.clone(),
    }
}

/// The last non-empty line of a runtime error (the trap's cause; the lines
/// above it are a backtrace).
fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

fn trap_out(t: &PluginTrap) -> TrapOut {
    TrapOut {
        kind: t.kind.as_str().to_string(),
        message: last_line(&t.message),
    }
}

/// The filter a listener applies: the manifest's namespace and selector.
struct Filter {
    namespace: Option<String>,
    selector: Option<LabelSelector>,
}

impl Filter {
    fn wants(&self, o: &ObjectRef) -> bool {
        if let Some(ns) = &self.namespace {
            if o.meta.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(&o.meta.labels))
    }

    /// The event a listener delivers for a change, if any: an update that
    /// leaves the view is a delete, one that enters it an add.
    fn view(&self, kind: EventKind, new: &ObjectRef, old: Option<&ObjectRef>) -> Option<EventKind> {
        let new_in = self.wants(new);
        match kind {
            EventKind::Updated => {
                let old_in = old.map(|o| self.wants(o)).unwrap_or(new_in);
                match (old_in, new_in) {
                    (true, true) => Some(EventKind::Updated),
                    (false, true) => Some(EventKind::Added),
                    (true, false) => Some(EventKind::Deleted),
                    (false, false) => None,
                }
            }
            k => new_in.then_some(k),
        }
    }
}

/// A controller's triggers, read as the host's work queue reads them: which
/// primary keys a delivered object queues.
struct Triggers {
    /// The primary resource (`for`).
    primary: String,
    /// Each trigger's resource and key map (see [`ControllerSpec::key_maps`]).
    maps: Vec<(String, KeyMap)>,
    /// The primary's listener: the manifest's namespace and label selector.
    primary_filter: Filter,
    /// Every other trigger's: the namespace only, as the host's.
    other_filter: Filter,
}

impl Triggers {
    fn of(
        spec: &ControllerSpec,
        registry: &apisim::resource::Registry,
        filter: &Filter,
    ) -> Result<Self, Failure> {
        let primary = spec.primary.value.clone();
        let id = kube_informer::resource::ResourceId::parse(&primary)
            .map_err(|e| Failure::input(e.to_string()))?;
        let t = registry
            .find(&id.group, &id.version, &id.plural)
            .map(|r| registry.get(r))
            .ok_or_else(|| Failure::input(format!("for: unknown resource {primary:?}")))?;
        Ok(Self {
            maps: spec.key_maps(&t.group, &t.kind, t.namespaced),
            primary,
            primary_filter: Filter {
                namespace: filter.namespace.clone(),
                selector: filter.selector.clone(),
            },
            other_filter: Filter {
                namespace: filter.namespace.clone(),
                selector: None,
            },
        })
    }

    /// The primary keys a change of `resource` queues, each once: the
    /// object's (and, for an update, its old version's) through every
    /// trigger on that resource whose listener delivers the change.
    fn keys(
        &self,
        resource: &str,
        kind: EventKind,
        obj: &ObjectRef,
        old: Option<&ObjectRef>,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (r, map) in self.maps.iter().filter(|(r, _)| r == resource) {
            let filter = if *r == self.primary {
                &self.primary_filter
            } else {
                &self.other_filter
            };
            if filter.view(kind, obj, old).is_none() {
                continue;
            }
            let old = old.filter(|_| kind == EventKind::Updated);
            let found = map
                .key_of(obj)
                .into_iter()
                .chain(old.and_then(|o| map.key_of(o)));
            for k in found {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }
}

/// A live instance and what it is built from.
struct Subject {
    engine: Arc<PluginEngine>,
    plugin: Arc<LoadedPlugin>,
    cache: Arc<FixtureCache>,
    log: Arc<LogSink>,
    kube: Arc<KubeClient>,
    events: Arc<EventRecorder>,
    effects: Effects,
    instance: Option<PluginInstance>,
    /// Events by name, so a series patch can say which Event it repeats.
    recorded: HashMap<String, EventRecordOut>,
}

impl Subject {
    fn start(&mut self) -> Step {
        let cache: Arc<dyn kube_informer::CacheView> = self.cache.clone();
        let mut granted = Granted::cache_only(&self.plugin, cache, self.log.clone());
        granted.kube = KubeState::new(Some(self.kube.clone()));
        granted.events = EventsState::new(Some(self.events.clone()));
        let started = PluginInstance::start(&self.engine, &self.plugin, granted);
        let mut step = Step::default();
        match started {
            Ok(i) => {
                self.instance = Some(i);
                step.outcome = "ok".into();
            }
            Err(StartError::Init(msg)) => {
                step.outcome = "error".into();
                step.error = Some(msg);
            }
            Err(StartError::Trap(t)) => {
                step.outcome = "trap".into();
                step.trap = Some(trap_out(&t));
            }
        }
        self.fill(&mut step);
        step
    }

    /// Moves the effects recorded since the last call into `step`.
    fn fill(&mut self, step: &mut Step) {
        let mut pending: Option<(ApiRequest, u16, Option<String>)> = None;
        for e in self.effects.take() {
            match e {
                Effect::Log {
                    level,
                    stream,
                    message,
                } => step.logs.push(LogOut {
                    level,
                    message,
                    stream: (stream != "log").then_some(stream),
                }),
                Effect::Request {
                    request,
                    code,
                    refusal,
                } => pending = Some((*request, code, refusal)),
                Effect::Audit(f) => {
                    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
                    let (verb, resource, key) = (get("verb"), get("resource"), get("key"));
                    let req = pending.take().filter(|(r, _, _)| {
                        r.verb.as_str() == verb && r.resource() == resource && r.key() == key
                    });
                    let outcome = get("outcome");
                    let code = get("code").parse::<u16>().ok().filter(|c| *c != 0);
                    // The server's Status, or the host's reason for not sending.
                    let error = match &req {
                        Some((_, _, Some(body))) => ErrorOut::from_status(body),
                        _ => f.get("reason").map(|r| ErrorOut {
                            message: r.trim_matches('"').to_string(),
                            causes: Vec::new(),
                        }),
                    };
                    if resource == EVENTS_RESOURCE {
                        step.events
                            .push(self.event_record(req.map(|r| r.0), outcome));
                    } else {
                        let mut w = write_out(&f, req.map(|r| r.0), outcome, code);
                        w.error = error.filter(|_| w.outcome != "ok");
                        step.writes.push(w);
                    }
                }
            }
        }
    }

    fn event_record(&mut self, req: Option<ApiRequest>, outcome: String) -> EventRecordOut {
        let Some(req) = req else {
            return EventRecordOut {
                outcome,
                ..Default::default()
            };
        };
        let body: Value = req
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or_default();
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        if let Some(name) = req.target.name().map(|n| n.as_str()) {
            // A repeat: the series patch of an Event recorded earlier.
            let mut e = self.recorded.get(name).cloned().unwrap_or_default();
            e.count = body["series"]["count"].as_u64();
            if let Some(n) = body["note"].as_str() {
                e.note = n.to_string();
            }
            e.outcome = outcome;
            return e;
        }
        let r = &body["regarding"];
        let e = EventRecordOut {
            event_type: s(&body["type"]),
            reason: s(&body["reason"]),
            action: s(&body["action"]),
            note: s(&body["note"]),
            regarding: RegardingOut {
                kind: s(&r["kind"]),
                namespace: r["namespace"].as_str().map(str::to_string),
                name: s(&r["name"]),
            },
            count: None,
            outcome,
        };
        if let Some(name) = body["metadata"]["name"].as_str() {
            self.recorded.insert(name.to_string(), e.clone());
        }
        e
    }

    /// Delivers one event; a trap replaces the instance for the next call.
    fn handle(&mut self, n: &Notification) -> Vec<Step> {
        let mut step = Step {
            event: Some(EventOut {
                kind: n.kind.as_str().to_string(),
                resource: n.resource.to_string(),
                key: n.key.to_string(),
                initial_list: n.in_initial_list,
            }),
            ..Default::default()
        };
        let outcome = match self.instance.as_mut() {
            Some(i) => i.handle(n),
            None => return Vec::new(),
        };
        let trapped = match outcome {
            CallOutcome::Ok => {
                step.outcome = "ok".into();
                false
            }
            CallOutcome::HandlerError(m) => {
                step.outcome = "error".into();
                step.error = Some(m);
                false
            }
            CallOutcome::Trap(t) => {
                step.outcome = "trap".into();
                step.trap = Some(trap_out(&t));
                true
            }
        };
        self.fill(&mut step);
        self.after(step, trapped)
    }

    /// Reconciles one key of `primary`; a trap replaces the instance for
    /// the next call.
    fn reconcile(&mut self, primary: &str, key: &str) -> Vec<Step> {
        let (namespace, name) = match key.split_once('/') {
            Some((ns, name)) => (Some(ns.to_string()), name.to_string()),
            None => (None, key.to_string()),
        };
        let req = ReconcileRequest {
            resource: primary.to_string(),
            namespace,
            name,
            key: key.to_string(),
        };
        let mut step = Step {
            reconcile: Some(ReconcileOut {
                resource: primary.to_string(),
                key: key.to_string(),
            }),
            ..Default::default()
        };
        let outcome = match self.instance.as_mut() {
            Some(i) => i.reconcile(&req),
            None => return Vec::new(),
        };
        let mut trapped = false;
        match outcome {
            ReconcileOutcome::Done => step.outcome = "done".into(),
            ReconcileOutcome::RequeueAfter(d) => {
                step.outcome = "requeue".into();
                step.requeue_after_ms = Some(d.as_millis() as u64);
            }
            ReconcileOutcome::Retry(m) => {
                step.outcome = "retry".into();
                step.error = Some(m);
            }
            ReconcileOutcome::Terminal(m) => {
                step.outcome = "terminal".into();
                step.error = Some(m);
            }
            ReconcileOutcome::Trap(t) => {
                step.outcome = "trap".into();
                step.trap = Some(trap_out(&t));
                trapped = true;
            }
        }
        self.fill(&mut step);
        self.after(step, trapped)
    }

    fn after(&mut self, mut step: Step, trapped: bool) -> Vec<Step> {
        if trapped {
            self.instance = None;
            // The host starts a new instance after a trap; so does the test.
            step.restart = Some(Box::new(self.start()));
        }
        vec![step]
    }
}

fn write_out(
    audit: &BTreeMap<String, String>,
    req: Option<ApiRequest>,
    outcome: String,
    code: Option<u16>,
) -> WriteOut {
    let get = |k: &str| audit.get(k).cloned().filter(|v| !v.is_empty());
    match req {
        Some(r) => WriteOut {
            verb: r.verb.as_str().to_string(),
            patch: r.patch.map(|p| p.as_str().to_string()),
            resource: r.resource(),
            subresource: r.target.subresource().map(|s| s.to_string()),
            namespace: r.target.namespace().map(|n| n.to_string()),
            name: r.target.name().map(|n| n.to_string()),
            body: r
                .body
                .as_deref()
                .map(|b| serde_json::from_str(b).unwrap_or_else(|_| Value::String(b.into()))),
            outcome,
            code,
            error: None,
        },
        None => {
            let key = get("key").unwrap_or_default();
            let (namespace, name) = match key.split_once('/') {
                Some((ns, n)) => (Some(ns.to_string()), Some(n.to_string())),
                None => (None, Some(key).filter(|k| !k.is_empty())),
            };
            WriteOut {
                verb: get("verb").unwrap_or_default(),
                patch: get("patch"),
                resource: get("resource").unwrap_or_default(),
                subresource: get("subresource"),
                namespace,
                name,
                body: None,
                outcome,
                code,
                error: None,
            }
        }
    }
}

/// Fills in what a change leaves out from the cached state of its object:
/// the whole object for a delete that names only its key, and the uid and
/// creation time for a new state that omits them.
fn complete(change: ChangeType, mut o: FixtureObject, cached: Option<&ObjectRef>) -> FixtureObject {
    let Some(cached) = cached else {
        return o;
    };
    let only_identity = o.value.as_object().is_some_and(|m| {
        m.keys()
            .all(|k| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
    }) && o.value["metadata"]
        .as_object()
        .is_some_and(|m| m.keys().all(|k| matches!(k.as_str(), "name" | "namespace")));
    if change == ChangeType::Deleted && only_identity {
        if let Ok(v) = serde_json::from_str(&cached.json()) {
            o.value = v;
        }
        return o;
    }
    if let Some(m) = o.value["metadata"].as_object_mut() {
        if !m.contains_key("uid") && !cached.meta.uid.is_empty() {
            m.insert("uid".into(), cached.meta.uid.clone().into());
        }
        if let (false, Some(t)) = (
            m.contains_key("creationTimestamp"),
            &cached.meta.creation_timestamp,
        ) {
            m.insert("creationTimestamp".into(), t.clone().into());
        }
    }
    o
}

/// Gives objects without a resourceVersion one, counting up from the largest
/// numeric resourceVersion of the fixture.
struct Versions(u64);

impl Versions {
    fn stamp(&mut self, o: &mut FixtureObject) {
        let m = &mut o.value["metadata"];
        match m["resourceVersion"].as_str() {
            Some(rv) if !rv.is_empty() => {
                if let Ok(n) = rv.parse::<u64>() {
                    self.0 = self.0.max(n);
                }
            }
            _ => {
                self.0 += 1;
                m["resourceVersion"] = Value::String(self.0.to_string());
            }
        }
    }
}

fn max_rv(objects: &[FixtureObject]) -> u64 {
    objects
        .iter()
        .filter_map(|o| {
            o.value["metadata"]["resourceVersion"]
                .as_str()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// Runs a test.
pub fn execute(args: &TestArgs) -> Result<Finished, Failure> {
    let settings = host_settings_of(&args.manifest)?;
    let defaults = settings
        .as_ref()
        .map(|s| s.defaults.clone())
        .unwrap_or_default();
    let manifest = PluginManifest::load(&args.manifest, &defaults).map_err(Failure::input)?;
    let expected = match &args.expect {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Failure::input(format!("{}: {e}", p.display())))?;
            Some(
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| Failure::input(format!("{}: not JSON: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let cache_dir = super::cache_dir(
        args.cache_dir.clone(),
        settings.as_ref().and_then(|s| s.cache_dir.clone()),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("cannot start the async runtime: {e}")))?;
    let effects = Effects::default();
    let api = Arc::new(
        rt.block_on(FixtureApi::start(effects.clone()))
            .map_err(Failure::runtime)?,
    );

    // The fixture, resolved against the simulator's kinds.
    let resolver = Resolver::new(api.registry());
    let objects_file = args
        .objects
        .clone()
        .ok_or_else(|| Failure::input("--objects FILE (or --replay FILE) is needed"))?;
    let mut objects = resolver.objects(&objects_file).map_err(Failure::input)?;
    let changes = match &args.events {
        Some(p) => resolver.changes(p).map_err(Failure::input)?,
        None => Vec::new(),
    };
    let mut versions = Versions(max_rv(&objects));
    for o in &mut objects {
        versions.stamp(o);
    }

    // The simulator holds what the cache holds: namespaces first, then
    // definitions, then everything else.
    let mut warnings = Vec::new();
    let rank = |o: &FixtureObject| match o.resource.as_str() {
        "v1/namespaces" => 0,
        r if r.starts_with("apiextensions.k8s.io/") => 1,
        _ => 2,
    };
    let mut seeding: Vec<&FixtureObject> = objects.iter().collect();
    seeding.sort_by_key(|o| rank(o));
    for o in seeding {
        if let Err(e) = api.seed(o) {
            warnings.push(format!("the simulator refused {e}"));
        }
    }
    let indexes: BTreeMap<String, Vec<IndexSpec>> = settings
        .as_ref()
        .map(|s| {
            s.indexers
                .iter()
                .map(|(r, ix)| {
                    (
                        r.clone(),
                        ix.iter()
                            .map(|i| IndexSpec::new(&i.name, &i.path))
                            .collect(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let transform = settings
        .as_ref()
        .map(|s| s.transform.to_transform())
        .unwrap_or_default();
    let cache = Arc::new(FixtureCache::new(indexes, transform));
    for r in manifest.resource_ids().iter().chain(&manifest.readable()) {
        // As `run` refuses a resource the server does not serve: here the
        // server is the simulator (its kinds and the fixture's CRDs).
        served(api.registry(), &manifest, r)?;
        cache.resource(r).map_err(Failure::input)?;
    }
    let mut initial: Vec<(String, ObjectRef)> = Vec::new();
    for o in &objects {
        let obj = cache
            .object(&o.value)
            .map_err(|e| Failure::input(format!("{}: {}: {e}", objects_file.display(), o.key())))?;
        cache
            .upsert(&o.resource, obj.clone())
            .map_err(Failure::input)?;
        initial.push((o.resource.clone(), obj));
    }

    let engine = PluginEngine::new(EngineConfig {
        cache_dir,
        ..EngineConfig::default()
    })
    .map_err(Failure::runtime)?;
    let plugin = LoadedPlugin::from_file(&engine, spec_of(&manifest), &manifest.wasm)
        .map_err(|e| Failure::input(format!("{}: {e}", manifest.wasm.display())))?;
    let world = plugin.world();
    // The verdict `run` gives on the manifest and its component.
    manifest.check_world(world).map_err(Failure::input)?;
    let filter = Filter {
        namespace: manifest.namespace.clone(),
        selector: manifest
            .label_selector
            .as_deref()
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|e| Failure::input(format!("label_selector: {e}")))?,
    };
    let subscribed = manifest.resource_ids();
    let triggers = match (&manifest.controller, world) {
        (Some(spec), World::ControllerV02) => Some(Triggers::of(spec, api.registry(), &filter)?),
        _ => None,
    };
    let name: Arc<str> = manifest.name.as_str().into();
    let status = Arc::new(PluginStatus::new(&manifest.name));
    let cluster: Arc<dyn ClusterApi> = api.clone();
    let intents = Arc::new(IntentLog::default());
    let kube_settings = match &args.grants_of {
        Some(p) => {
            PluginManifest::load(p, &defaults)
                .map_err(Failure::input)?
                .kube
        }
        None => manifest.kube.clone(),
    };
    let services = HostServices {
        dry_run: true,
        intents: args
            .replay
            .is_some()
            .then(|| intents.clone() as Arc<dyn WriteIntents>),
        ..HostServices::with_api(cache.clone(), cluster.clone(), Grants::new(kube_settings))
    };
    let kube = Arc::new(KubeClient::new(
        name.clone(),
        &services,
        cluster,
        status.clone(),
    ));
    let events = Arc::new(EventRecorder::new(
        kube.clone(),
        &name,
        "wasm-informer-test",
    ));
    let mut subject = Subject {
        log: Arc::new(LogSink::new(name.clone(), engine.config().log, status)),
        engine,
        plugin,
        cache: cache.clone(),
        kube,
        events,
        effects: effects.clone(),
        instance: None,
        recorded: HashMap::new(),
    };
    let mut output = Output {
        plugin: manifest.name.clone(),
        world: world.name(),
        dry_run: true,
        ..Default::default()
    };

    // The plugin runs on this thread, outside the runtime (its API calls
    // block on the runtime), with its log and audit lines captured.
    let api_for_changes = api.clone();
    let ran = std::thread::scope(|s| {
        s.spawn(|| {
            tracing::subscriber::with_default(effects.subscriber(), || {
                output.init = subject.start();
                if subject.instance.is_none() {
                    return;
                }
                let deliver = |subject: &mut Subject,
                               resource: &str,
                               kind: EventKind,
                               obj: &ObjectRef,
                               old: Option<&ObjectRef>,
                               initial: bool|
                 -> Vec<Step> {
                    if !subscribed.iter().any(|r| r == resource) {
                        return Vec::new();
                    }
                    if let Some(triggers) = &triggers {
                        return triggers
                            .keys(resource, kind, obj, old)
                            .iter()
                            .flat_map(|k| subject.reconcile(&triggers.primary, k))
                            .collect();
                    }
                    let Some(kind) = filter.view(kind, obj, old) else {
                        return Vec::new();
                    };
                    let n = Notification {
                        kind,
                        resource: resource.into(),
                        key: obj.key().into(),
                        object: obj.clone(),
                        old: (kind == EventKind::Updated).then(|| old.cloned()).flatten(),
                        in_initial_list: initial,
                        final_state_unknown: false,
                    };
                    subject.handle(&n)
                };
                for (resource, obj) in &initial {
                    let steps = deliver(&mut subject, resource, EventKind::Added, obj, None, true);
                    output.steps.extend(steps);
                }
                for c in &changes {
                    let key = c.object.key();
                    let cached = cache.current(&c.object.resource, &key);
                    let mut o = complete(c.change, c.object.clone(), cached.as_ref());
                    let kind = match (c.change, &cached) {
                        (ChangeType::Deleted, _) => EventKind::Deleted,
                        (_, Some(_)) => EventKind::Updated,
                        (_, None) => EventKind::Added,
                    };
                    if kind != EventKind::Deleted {
                        versions.stamp(&mut o);
                    }
                    let obj = match cache.object(&o.value) {
                        Ok(obj) => obj,
                        Err(e) => {
                            output.warnings.push(format!("change {}: {e}", c.document));
                            continue;
                        }
                    };
                    // Cache first (I2), and the simulator in step.
                    let synced = match kind {
                        EventKind::Deleted => {
                            let _ = cache.remove(&o.resource, &key);
                            api_for_changes.delete(&o)
                        }
                        EventKind::Updated => {
                            let _ = cache.upsert(&o.resource, obj.clone());
                            api_for_changes.modify(&o)
                        }
                        _ => {
                            let _ = cache.upsert(&o.resource, obj.clone());
                            api_for_changes.seed(&o)
                        }
                    };
                    if let Err(e) = synced {
                        output
                            .warnings
                            .push(format!("change {}: the simulator refused {e}", c.document));
                    }
                    let steps = deliver(
                        &mut subject,
                        &o.resource,
                        kind,
                        &obj,
                        cached.as_ref(),
                        false,
                    );
                    if steps.is_empty() {
                        // No call: the plugin does not watch it, or its
                        // namespace or selector excludes it (before and after).
                        output.unmatched.push(format!(
                            "change {} ({} {}) reached no call: the plugin does not watch {} \
                             or its namespace or label selector excludes the object",
                            c.document, o.resource, key, o.resource
                        ));
                    }
                    output.steps.extend(steps);
                    if subject.instance.is_none() {
                        break;
                    }
                }
            });
        })
        .join()
    });
    if ran.is_err() {
        return Err(Failure::runtime("the test's plugin thread panicked"));
    }
    drop(subject);
    if let Ok(api) = Arc::try_unwrap(api) {
        rt.block_on(api.shutdown());
    }
    output.warnings.splice(0..0, warnings);

    let mut summary = Summary {
        steps: output.steps.len(),
        ..Default::default()
    };
    for s in std::iter::once(&output.init).chain(&output.steps) {
        summary.writes += s.writes.len();
        summary.invalid += s.writes.iter().filter(|w| w.outcome == "invalid").count();
        summary.events += s.events.len();
        match s.outcome.as_str() {
            "trap" => summary.traps += 1,
            "error" | "retry" | "terminal" => summary.errors += 1,
            _ => {}
        }
    }
    output.summary = summary;
    let differences = match &expected {
        Some(e) => expect::differences(
            e,
            &serde_json::to_value(&output).expect("output serialises"),
        ),
        None => Vec::new(),
    };
    let failed_start = output.init.outcome != "ok";
    let invalid = output.summary.invalid > 0 && !args.allow_invalid;
    let unmatched = !output.unmatched.is_empty() && !args.allow_unmatched;
    // Without an expected output, a run where every call failed is a failure.
    let all_failed = expected.is_none()
        && !args.allow_errors
        && output.summary.steps > 0
        && output.summary.errors + output.summary.traps >= output.summary.steps;
    let code = if output.summary.traps > 0
        || failed_start
        || invalid
        || unmatched
        || all_failed
        || !differences.is_empty()
    {
        1
    } else {
        0
    };
    output.intents = std::mem::take(&mut *intents.0.lock());
    Ok(Finished {
        output,
        differences,
        code,
    })
}

/// The writes a replayed plugin intended, in order.
#[derive(Default)]
struct IntentLog(parking_lot::Mutex<Vec<crate::shadow::Intent>>);

impl WriteIntents for IntentLog {
    fn intended(&self, request: &ApiRequest) {
        if let Some(i) = crate::shadow::Intent::of(request) {
            self.0.lock().push(i);
        }
    }
}

/// `--replay`: the recording as the objects and events files of a test, in
/// `dir`; then the test itself.
fn execute_replay(args: &TestArgs, dir: &Path) -> Result<Finished, Failure> {
    let file = args.replay.as_ref().expect("only with --replay");
    let recording = crate::record::Recording::read(file).map_err(Failure::input)?;
    let (objects, events) = recording.fixture(dir).map_err(Failure::runtime)?;
    let replayed = TestArgs {
        objects: Some(objects),
        events: Some(events),
        manifest: args.manifest.clone(),
        expect: args.expect.clone(),
        cache_dir: args.cache_dir.clone(),
        allow_invalid: args.allow_invalid,
        allow_unmatched: true,
        allow_errors: args.allow_errors,
        replay: args.replay.clone(),
        against: None,
        grants_of: args.grants_of.clone(),
    };
    execute(&replayed)
}

/// `--replay` with `--against`: both manifests over the same recording, and
/// their intended writes compared per object, in order, as a shadow's are.
pub fn against(
    args: &TestArgs,
    other: &Path,
    dir: &Path,
) -> Result<(crate::shadow::ShadowReport, u8), Failure> {
    let first = execute_replay(args, dir)?;
    // A shadow's manifest has no grants of its own: it runs under the first's.
    let shadow = PluginManifest::load(other, &Default::default())
        .map(|m| m.shadow_of.is_some())
        .unwrap_or(false);
    let second_args = TestArgs {
        manifest: other.to_path_buf(),
        expect: None,
        grants_of: shadow.then(|| args.manifest.clone()),
        ..clone_args(args)
    };
    let second = execute_replay(&second_args, dir)?;
    let window = std::time::Duration::from_secs(1);
    let book = crate::shadow::ShadowBook::new(&first.output.plugin, window);
    book.attach(&second.output.plugin);
    let t0 = std::time::Instant::now();
    for i in first.output.intents {
        book.record(crate::shadow::Side::Live, i, t0);
    }
    for i in second.output.intents {
        book.record(crate::shadow::Side::Shadow, i, t0);
    }
    let report = book
        .report(true, t0 + 2 * window)
        .expect("a shadow is attached");
    let code = u8::from(report.counts.differs > 0)
        .max(first.code)
        .max(second.code);
    Ok((report, code))
}

fn clone_args(a: &TestArgs) -> TestArgs {
    TestArgs {
        manifest: a.manifest.clone(),
        objects: a.objects.clone(),
        events: a.events.clone(),
        expect: a.expect.clone(),
        cache_dir: a.cache_dir.clone(),
        allow_invalid: a.allow_invalid,
        allow_unmatched: a.allow_unmatched,
        allow_errors: a.allow_errors,
        replay: a.replay.clone(),
        against: a.against.clone(),
        grants_of: a.grants_of.clone(),
    }
}

/// Whether the simulator serves `resource` (a built-in kind, or a CRD of the
/// fixture): the error names the manifest, the key and the closest kind.
fn served(
    registry: &apisim::resource::Registry,
    manifest: &PluginManifest,
    resource: &str,
) -> Result<(), Failure> {
    let id = kube_informer::resource::ResourceId::parse(resource)
        .map_err(|e| Failure::input(e.to_string()))?;
    if registry.find(&id.group, &id.version, &id.plural).is_some() {
        return Ok(());
    }
    let known: Vec<String> = registry
        .all()
        .iter()
        .map(|(_, t)| match t.group.as_str() {
            "" => format!("{}/{}", t.version, t.plural),
            g => format!("{g}/{}/{}", t.version, t.plural),
        })
        .collect();
    Err(Failure::input(format!(
        "{}: unknown resource {resource:?}: the API server does not serve {:?} in {:?}{}",
        manifest.file.display(),
        id.plural,
        id.group_version(),
        kube_informer::suggest::did_you_mean(resource, known.iter().map(String::as_str))
    )))
}

/// One line per invalid write, as kubectl prints the server's refusal:
/// `step N: VERB RESOURCE KEY: The Kind "name" is invalid: field: message`.
pub fn invalid_writes(output: &Output) -> Vec<String> {
    let mut out = Vec::new();
    for (i, s) in std::iter::once(&output.init)
        .chain(&output.steps)
        .enumerate()
    {
        let step = if i == 0 {
            "init".to_string()
        } else {
            format!("step {i}")
        };
        for w in s.writes.iter().filter(|w| w.outcome == "invalid") {
            let key = match (&w.namespace, &w.name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.clone(),
                (Some(ns), None) => format!("{ns}/"),
                (None, None) => String::new(),
            };
            let why = w.error.as_ref().map_or("invalid".to_string(), |e| {
                if e.causes.is_empty() {
                    e.message.clone()
                } else {
                    // kubectl: `The Pod "x" is invalid: FIELD: MESSAGE`, per cause.
                    let head = e.message.split(" is invalid:").next().unwrap_or(&e.message);
                    e.causes
                        .iter()
                        .map(|c| format!("The {head} is invalid: {}: {}", c.field, c.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            });
            out.push(format!(
                "test: {step}: {} {} {key}: {why}",
                w.verb, w.resource
            ));
        }
    }
    out
}

/// Runs `test`: prints the output on stdout and any difference from
/// `--expect` on stderr. Returns the exit code.
pub fn run(args: TestArgs) -> Result<u8, Failure> {
    let tmp = tempfile::tempdir()
        .map_err(|e| Failure::runtime(format!("cannot make a temporary directory: {e}")))?;
    if let Some(other) = &args.against {
        let (report, code) = against(&args, other, tmp.path())?;
        print!("{}", super::shadow::render(&report, false));
        return Ok(code);
    }
    let f = if args.replay.is_some() {
        execute_replay(&args, tmp.path())?
    } else {
        execute(&args)?
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&f.output).expect("output serialises")
    );
    for w in &f.output.warnings {
        eprintln!("warning: {w}");
    }
    if !f.differences.is_empty() {
        eprintln!(
            "test: the output does not match {}:",
            args.expect
                .as_deref()
                .map(Path::display)
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
        for d in &f.differences {
            eprintln!("  {d}");
        }
    }
    if f.output.summary.traps > 0 {
        eprintln!(
            "test: the plugin trapped {} time(s)",
            f.output.summary.traps
        );
    }
    for line in invalid_writes(&f.output) {
        eprintln!("{line}");
    }
    // A recording holds every resource its config watched: changes of the
    // others reach no call, as they should.
    for u in f.output.unmatched.iter().filter(|_| args.replay.is_none()) {
        eprintln!(
            "test: {u}{}",
            if args.allow_unmatched {
                ""
            } else {
                " (--allow-unmatched to pass anyway)"
            }
        );
    }
    let s = &f.output.summary;
    if s.errors > 0 {
        eprintln!(
            "test: {} of {} call(s) ended in the plugin's error{}",
            s.errors,
            s.steps,
            if s.errors >= s.steps && args.expect.is_none() && !args.allow_errors {
                ": every call failed (--allow-errors to pass anyway)"
            } else {
                ""
            }
        );
    }
    if f.output.summary.invalid > 0 && !args.allow_invalid {
        eprintln!(
            "test: {} write(s) were invalid: a real API server refuses them too \
             (--allow-invalid to pass anyway)",
            f.output.summary.invalid
        );
    }
    Ok(f.code)
}
