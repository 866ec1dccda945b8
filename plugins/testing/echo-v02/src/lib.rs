//! Test plugin for the 0.2.0 world, built against the frozen `wit/v0.2.0`
//! with wit-bindgen alone (no SDK): a plugin as it was written before 0.2.1,
//! which the host must keep loading and running unchanged (it imports the
//! 0.2.0 interfaces, which the host links to their 0.2.1 definitions).
//!
//! It logs one info line per event:
//! `KIND RESOURCE KEY rv=RESOURCE_VERSION initial=BOOL`. With `[config]
//! label = "KEY"` (and optionally `value`, default `v02`), on every event but
//! `deleted` whose object does not carry `KEY=VALUE`, it merge-patches that
//! label onto the object (a 0.2.0 `kube.patch`; the manifest must grant
//! `patch` on the resource) and logs `patched KEY LABEL=VALUE rv=NEW_RV`, the
//! resourceVersion the server answered with.
//!
//! Invariants: `init` refuses a config with an unknown key, or a `label` or
//! `value` that is not a non-empty string, naming the field; a refused patch
//! is the event's error (`patch KEY: CASE: DETAIL`), never a trap.

wit_bindgen::generate!({ path: "../../../wit/v0.2.0", world: "event-handler" });

use std::cell::RefCell;

use exports::wasm_informer::plugin::handler::Guest;
use serde_json::{json, Value};
use wasm_informer::plugin::kube::{self, PatchType};
use wasm_informer::plugin::log::{log, Level};
use wasm_informer::plugin::objects;
use wasm_informer::plugin::types::{ApiError, EventInfo, EventKind};

/// The label to patch on, from `[config]`.
struct Settings {
    label: String,
    value: String,
}

thread_local! {
    static SETTINGS: RefCell<Option<Settings>> = const { RefCell::new(None) };
}

struct Echo;

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Added => "added",
        EventKind::Updated => "updated",
        EventKind::Deleted => "deleted",
        EventKind::Synced => "synced",
    }
}

fn api_error(e: &ApiError) -> String {
    match e {
        ApiError::Forbidden(m) => format!("forbidden: {m}"),
        ApiError::NotFound(m) => format!("not-found: {m}"),
        ApiError::Conflict(m) => format!("conflict: {m}"),
        ApiError::AlreadyExists(m) => format!("already-exists: {m}"),
        ApiError::Invalid(d) => format!("invalid: {}", d.message),
        ApiError::RateLimited(m) => format!("rate-limited: {m}"),
        ApiError::Timeout(m) => format!("timeout: {m}"),
        ApiError::Unavailable(m) => format!("unavailable: {m}"),
    }
}

/// A string field of the config: `None` when absent.
fn string_field(
    config: &serde_json::Map<String, Value>,
    field: &str,
) -> Result<Option<String>, String> {
    match config.get(field) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(format!("config.{field} must be a non-empty string")),
    }
}

fn parse(config: &str) -> Result<Option<Settings>, String> {
    let v: Value = serde_json::from_str(config).map_err(|e| format!("config is not JSON: {e}"))?;
    let Value::Object(map) = v else {
        return Err("config must be a table".into());
    };
    if let Some(k) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "label" | "value"))
    {
        return Err(format!("config.{k} is not a setting (label, value)"));
    }
    let value = string_field(&map, "value")?.unwrap_or_else(|| "v02".into());
    Ok(string_field(&map, "label")?.map(|label| Settings { label, value }))
}

impl Guest for Echo {
    fn init(config: String) -> Result<(), String> {
        let settings = parse(&config)?;
        SETTINGS.with(|s| *s.borrow_mut() = settings);
        Ok(())
    }

    fn on_event(e: EventInfo) -> Result<(), String> {
        let o = e.object;
        let resource = objects::resource(o);
        let key = objects::key(o);
        log(
            Level::Info,
            &format!(
                "{} {resource} {key} rv={} initial={}",
                kind_name(e.kind),
                objects::resource_version(o),
                e.is_in_initial_list
            ),
        );
        if e.kind == EventKind::Deleted {
            return Ok(());
        }
        SETTINGS.with(|s| {
            let s = s.borrow();
            let Some(Settings { label, value }) = s.as_ref() else {
                return Ok(());
            };
            if objects::label(o, label).as_deref() == Some(value.as_str()) {
                return Ok(());
            }
            let namespace = objects::namespace(o);
            let body = json!({ "metadata": { "labels": { label.as_str(): value } } });
            let answer = kube::patch(
                &resource,
                namespace.as_deref(),
                &objects::name(o),
                PatchType::Merge,
                &body.to_string(),
                false,
            )
            .map_err(|err| format!("patch {key}: {}", api_error(&err)))?;
            log(
                Level::Info,
                &format!(
                    "patched {key} {label}={value} rv={}",
                    objects::resource_version(answer)
                ),
            );
            Ok(())
        })
    }
}

export!(Echo);
