//! The `events` capability: a plugin records Kubernetes Events about objects,
//! written as events.k8s.io/v1 with `reportingController` `wasm-informer/PLUGIN`.
//!
//! Job: turn a plugin's record (type, reason, action, note, the object it is
//! about) into an Event, and fold repeats into the first Event's `series`
//! instead of creating new objects, as kube-runtime's `events::Recorder`
//! does: repeats are the same (type, reason, action, regarding object) within
//! [`SERIES_TTL`] of the last occurrence, and they patch the Event with
//! `series.count` and `series.lastObservedTime` only (the note of an Event is
//! immutable, so it stays the first occurrence's, as client-go keeps it).
//!
//! Invariants: only a plugin whose manifest grants `events` reaches the API
//! server through here, and only in the namespaces its grant allows (the
//! ones it reads or writes in, or the list `events = { namespaces = [...] }`)
//! about objects of resources it watches, reads or writes; the record is
//! checked as the API server validates an Event (a note of at most
//! [`MAX_NOTE_BYTES`], reason and action of at most [`MAX_REASON_BYTES`]),
//! and every part of the object reference is parsed by the API server's name
//! rules, before anything is sent; every request goes through the plugin's
//! [`KubeClient`] (its quota, timeout, dry run and audit line), and only to
//! the `events` resource of events.k8s.io/v1.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use kube_informer::names::{quoted, NameRule, Namespace, ObjectName};
use kube_informer::resource::ResourceId;

use super::api::{ApiRequest, Malformed, PatchType, Verb};
use super::kube::{ApiBudget, EventsGrant, KubeClient, KubeError, Refusal};

/// The resource Events are written to.
pub const EVENTS_RESOURCE: &str = "events.k8s.io/v1/events";
/// How long after its last occurrence a repeat still joins an Event's
/// series (kube-runtime's `CACHE_TTL`).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// The longest `note` the API server accepts (events.k8s.io validation,
/// `NoteLengthLimit`).
pub const MAX_NOTE_BYTES: usize = 1024;
/// The longest `reason` and `action` the API server accepts.
pub const MAX_REASON_BYTES: usize = 128;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something a human may need to look at.
    Warning,
}

impl EventType {
    /// The Event's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an Event is about (an `ObjectReference`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ObjectReference {
    /// `apiVersion`, for example `v1` or `apps/v1`.
    pub api_version: String,
    /// `kind`, for example `Pod`.
    pub kind: String,
    /// Namespace; the Event is written there (`default` when none).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Uid, when known.
    pub uid: Option<String>,
}

/// One Event as a plugin records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// What the Event is about.
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub event_type: EventType,
    /// Why, in UpperCamelCase (`reason`).
    pub reason: String,
    /// What was done or failed (`action`).
    pub action: String,
    /// A human-readable description (`note`), at most 1 kB on the server.
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: ObjectReference,
    event_type: EventType,
    reason: String,
    action: String,
}

#[derive(Debug, Clone)]
struct Series {
    name: String,
    count: u64,
    last: Instant,
}

/// Records one plugin's Events. Shared by every instance of the plugin, so a
/// restart keeps the series it has started.
pub struct EventRecorder {
    client: Arc<KubeClient>,
    controller: String,
    instance: String,
    series: Mutex<HashMap<SeriesKey, Series>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .finish()
    }
}

/// Now as an RFC 3339 MicroTime, `2026-12-01T08:00:00.123456Z`.
fn micro_time(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

impl EventRecorder {
    /// A recorder for the plugin behind `client`, reporting as controller
    /// `wasm-informer/PLUGIN` and instance `instance` (the host's identity).
    pub fn new(client: Arc<KubeClient>, plugin: &str, instance: impl Into<String>) -> Self {
        Self {
            client,
            controller: format!("wasm-informer/{plugin}"),
            instance: instance.into(),
            series: Mutex::new(HashMap::new()),
        }
    }

    /// The Event's `reportingController`.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// Checks `ev` as the API server validates an Event, and against the
    /// plugin's events grant: the namespace the Event goes to (its object's,
    /// or `default` for a cluster-scoped object) and the resource of the
    /// object it is about.
    fn check(&self, ev: &EventRecord, grant: &EventsGrant) -> Result<Namespace, Refusal> {
        let invalid = |field: &'static str, message: String| {
            Refusal::Malformed(Malformed::new(field, message))
        };
        for (field, value) in [("reason", &ev.reason), ("action", &ev.action)] {
            if value.is_empty() {
                return Err(invalid(
                    field,
                    format!("an Event needs a {field}: Required value"),
                ));
            }
            if value.len() > MAX_REASON_BYTES {
                return Err(invalid(
                    field,
                    format!(
                        "{field} is {} bytes: may have at most {MAX_REASON_BYTES} characters",
                        value.len()
                    ),
                ));
            }
        }
        if ev.note.len() > MAX_NOTE_BYTES {
            return Err(invalid(
                "note",
                format!(
                    "note is {} bytes: may have at most {MAX_NOTE_BYTES} characters",
                    ev.note.len()
                ),
            ));
        }
        let r = &ev.regarding;
        let enforce = self.client.enforces_grants();
        let resource = grant.regarding.iter().find(|id| {
            ResourceId::parse(id).is_ok_and(|rid| {
                rid.group_version() == r.api_version
                    && self
                        .client
                        .resolve(&rid)
                        .is_ok_and(|spec| spec.kind == r.kind)
            })
        });
        let ns = match resource {
            Some(resource) => {
                // The object reference must name one object of that resource.
                let target = self
                    .client
                    .target(resource, r.namespace.as_deref(), Some(&r.name), None)
                    .map_err(|m| Refusal::Malformed(Malformed::new("regarding", m.message)))?;
                target.namespace().cloned()
            }
            None if enforce => {
                return Err(Refusal::Forbidden(format!(
                    "{} may not record Events about {} {}: Events may only be about objects of \
                     the resources the plugin watches, reads or writes",
                    self.controller,
                    quoted(&r.api_version),
                    quoted(&r.kind)
                )))
            }
            // Unchecked: only the name rules every object has.
            None => {
                ObjectName::parse(&r.name, NameRule::PathSegment)
                    .map_err(|e| Refusal::Malformed(Malformed::new("regarding", e.to_string())))?;
                r.namespace
                    .as_deref()
                    .map(Namespace::parse)
                    .transpose()
                    .map_err(|e| Refusal::Malformed(Malformed::new("regarding", e.to_string())))?
            }
        };
        let ns = ns.unwrap_or_else(|| Namespace::parse("default").expect("a valid namespace"));
        if let Some(allowed) = grant.namespaces.as_ref().filter(|_| enforce) {
            if !allowed.contains(&ns) {
                return Err(Refusal::Forbidden(format!(
                    "{} may not record Events in namespace {ns}: its Events go only to the \
                     namespaces it reads or writes in, or to those `events = {{ namespaces = \
                     [...] }}` lists",
                    self.controller
                )));
            }
        }
        Ok(ns)
    }

    /// Records `ev`: a new Event, or a patch of the series it repeats.
    pub fn record(&self, ev: &EventRecord, budget: &ApiBudget) -> Result<(), KubeError> {
        let settings = self.client.settings();
        let Some(grant) = settings.events.as_ref() else {
            let why = Refusal::Forbidden(format!(
                "{} may not record Events: its manifest does not grant `events`",
                self.controller
            ));
            return Err(self.client.refused(None, why, budget));
        };
        let namespace = match self.check(ev, grant) {
            Ok(ns) => ns,
            Err(why) => return Err(self.client.refused(None, why, budget)),
        };
        let now = Instant::now();
        let key = SeriesKey {
            regarding: ev.regarding.clone(),
            event_type: ev.event_type,
            reason: ev.reason.clone(),
            action: ev.action.clone(),
        };
        let repeat = {
            let mut series = self.series.lock();
            series.retain(|_, s| now.duration_since(s.last) < SERIES_TTL);
            series.get(&key).cloned()
        };
        let stamp = micro_time(SystemTime::now());
        let events = |name: Option<&str>| {
            self.client
                .target(EVENTS_RESOURCE, Some(namespace.as_str()), name, None)
        };
        let (request, entry) = match repeat {
            Some(s) => {
                let count = s.count + 1;
                // Only the series: an Event's note, like its reason and
                // object, is immutable (events.k8s.io `ValidateEventUpdate`),
                // so a repeat keeps the first occurrence's note, as
                // client-go's recorder does.
                let patch = serde_json::json!({
                    "series": { "count": count, "lastObservedTime": stamp },
                });
                let r = events(Some(s.name.as_str()))
                    .and_then(|t| ApiRequest::new(Verb::Patch, t))
                    .map(|mut r| {
                        r.patch = Some(PatchType::Merge);
                        r.body = Some(patch.to_string());
                        r
                    });
                (
                    r,
                    Series {
                        count,
                        last: now,
                        ..s
                    },
                )
            }
            None => {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos();
                let name = event_name(&ev.regarding.name, nanos);
                let mut regarding = serde_json::json!({
                    "apiVersion": ev.regarding.api_version,
                    "kind": ev.regarding.kind,
                    "name": ev.regarding.name,
                });
                if let Some(ns) = &ev.regarding.namespace {
                    regarding["namespace"] = ns.clone().into();
                }
                if let Some(uid) = &ev.regarding.uid {
                    regarding["uid"] = uid.clone().into();
                }
                let body = serde_json::json!({
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": { "name": name, "namespace": namespace.as_str() },
                    "eventTime": stamp,
                    "reportingController": self.controller,
                    "reportingInstance": self.instance,
                    "type": ev.event_type.as_str(),
                    "reason": ev.reason,
                    "action": ev.action,
                    "note": ev.note,
                    "regarding": regarding,
                });
                let r = events(None)
                    .and_then(|t| ApiRequest::new(Verb::Create, t))
                    .map(|mut r| {
                        r.body = Some(body.to_string());
                        r
                    });
                (
                    r,
                    Series {
                        name,
                        count: 1,
                        last: now,
                    },
                )
            }
        };
        self.client.call_checked(request, budget, |_, _| Ok(()))?;
        self.series.lock().insert(key, entry);
        Ok(())
    }
}

/// The name of a new Event about `regarding`: `NAME.HEX-NANOS`, as
/// client-go's recorder names them, the object's name cut so the whole stays
/// a valid name.
fn event_name(regarding: &str, nanos: u128) -> String {
    let suffix = format!(".{nanos:x}");
    let keep = 253usize.saturating_sub(suffix.len());
    let mut base: String = regarding.chars().take(keep).collect();
    while base.len() > keep {
        base.pop();
    }
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_is_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_576_000_123_456);
        assert_eq!(micro_time(t), "2025-12-01T08:00:00.123456Z");
        assert_eq!(micro_time(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(micro_time(leap), "2000-02-29T00:00:00.000000Z");
    }
}

// The WIT bindings (0.2 `events`).

use wasmtime::component::HasData;

use super::clock::CallClock;
use super::kube::to_wit;
use crate::world::v0_2;

/// The events capability of one instance: the plugin's recorder, shared by
/// its instances, or `None` when the host gives plugins no API server.
#[derive(Clone, Debug, Default)]
pub struct EventsState {
    recorder: Option<Arc<EventRecorder>>,
}

impl EventsState {
    /// Records through `recorder`.
    pub fn new(recorder: Option<Arc<EventRecorder>>) -> Self {
        Self { recorder }
    }
}

/// The events capability as the bindings see it.
pub struct EventsView<'a> {
    /// The capability.
    pub state: &'a EventsState,
    /// The clock of the call in progress.
    pub clock: &'a mut CallClock,
}

/// `HasData` of [`EventsView`].
pub struct Events02;

impl HasData for Events02 {
    type Data<'a> = EventsView<'a>;
}

impl v0_2::events::Host for EventsView<'_> {
    fn publish(&mut self, event: v0_2::events::Event) -> Result<(), v0_2::types::ApiError> {
        let Some(recorder) = &self.state.recorder else {
            return Err(v0_2::types::ApiError::Unavailable(
                "this host gives plugins no API server".into(),
            ));
        };
        let r = event.regarding;
        let record = EventRecord {
            regarding: ObjectReference {
                api_version: r.api_version,
                kind: r.kind,
                namespace: r.namespace,
                name: r.name,
                uid: r.uid,
            },
            event_type: match event.type_ {
                v0_2::events::EventType::Normal => EventType::Normal,
                v0_2::events::EventType::Warning => EventType::Warning,
            },
            reason: event.reason,
            action: event.action,
            note: event.note,
        };
        let started = Instant::now();
        let result = recorder.record(&record, self.clock.budget());
        self.clock.blocked_for(started.elapsed());
        result.map_err(to_wit)
    }
}

/// Links the events capability (0.2).
pub fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::host_state::HostState>,
) -> wasmtime::Result<()> {
    v0_2::events::add_to_linker::<_, Events02>(linker, crate::host_state::HostState::events)
}
