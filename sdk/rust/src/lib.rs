//! Write wasm-informer plugins in Rust: event handlers and controllers.
//!
//! A plugin is a WebAssembly component of the WIT package
//! `wasm-informer:plugin@0.2.1`, world `event-handler` (one [`Handler`] type
//! and [`export_plugin!`]) or `controller` (one [`Reconciler`] type and
//! [`export_controller!`]). Build it as a `cdylib` for `wasm32-wasip2`:
//! `cargo build --release --target wasm32-wasip2`; the output `.wasm` in
//! `target/wasm32-wasip2/release/` is already a component.
//!
//! A plugin reads objects through references: the host keeps the object, and
//! each accessor ([`Object::name`], [`Object::label`], [`Object::json`], ...)
//! copies into the plugin only what it returns. A plugin that reads nothing
//! pays almost nothing per event. An [`Object`] is valid for the call that
//! produced it (the event, or the reconcile): copy out (or
//! [`Object::decode`]) what you keep across calls; using a stale one traps
//! the instance.
//!
//! What a plugin may do is granted by its manifest: reads (`read = [...]`),
//! writes (`[[write]]` tables), Events (`events = true`). Anything else comes
//! back as [`ApiError::Forbidden`] or [`CacheError::Forbidden`].
//!
//! Invariant: nothing in this crate traps on bad input. Malformed JSON, a
//! forbidden call, a missing object or a server error all come back as an
//! [`Error`], which a handler returns and the host counts as a handler error.
//!
//! # Example: a label enforcer
//!
//! Gives every pod a `team` label taken from its namespace's annotation, by
//! server-side apply. Its manifest grants `read = ["v1/namespaces"]` and
//! `[[write]] resource = "v1/pods" verbs = ["patch"]`.
//!
//! ```ignore
//! use wasm_informer_sdk::{cache, export_plugin, info, kube, Config, Event, Handler, Result};
//!
//! struct Enforcer;
//!
//! impl Handler for Enforcer {
//!     fn init(_config: &Config) -> Result<Self> {
//!         Ok(Enforcer)
//!     }
//!
//!     fn on_add(&mut self, event: &Event) -> Result<()> {
//!         let pod = event.object();
//!         if pod.label("team").is_some() {
//!             return Ok(());
//!         }
//!         let ns = pod.namespace().unwrap_or_default();
//!         let Some(namespace) = cache::get_object("v1/namespaces", &ns)? else { return Ok(()) };
//!         let Some(team) = namespace.annotation("team") else { return Ok(()) };
//!         let patch = serde_json::json!({
//!             "apiVersion": "v1", "kind": "Pod",
//!             "metadata": { "name": pod.name(), "namespace": ns, "labels": { "team": team } },
//!         });
//!         kube::patch("v1/pods", Some(&ns), &pod.name(), &kube::Patch::Apply(patch), false)?;
//!         info!("labelled {} team={team}", event.key());
//!         Ok(())
//!     }
//!
//!     fn on_update(&mut self, event: &Event) -> Result<()> {
//!         self.on_add(event)
//!     }
//! }
//!
//! export_plugin!(Enforcer);
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::DeserializeOwned;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "event-handler",
        pub_export_macro: true,
        export_macro_name: "__export_event_handler",
        default_bindings_module: "wasm_informer_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

#[doc(hidden)]
pub mod controller_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "controller",
        pub_export_macro: true,
        export_macro_name: "__export_controller",
        default_bindings_module: "wasm_informer_sdk::controller_bindings",
        with: {
            "wasm-informer:plugin/types@0.2.1": crate::bindings::wasm_informer::plugin::types,
            "wasm-informer:plugin/cache@0.2.1": crate::bindings::wasm_informer::plugin::cache,
            "wasm-informer:plugin/log@0.2.1": crate::bindings::wasm_informer::plugin::log,
            "wasm-informer:plugin/kube@0.2.1": crate::bindings::wasm_informer::plugin::kube,
            "wasm-informer:plugin/events@0.2.1": crate::bindings::wasm_informer::plugin::events,
        },
    });
}

use bindings::wasm_informer::plugin::types as wit;

pub use wit::{
    ApiError, CacheError, Cause, EventKind, ObjectMeta, ObjectReference, OwnerReference,
};

mod controller;
pub mod events;
pub mod finalizer;
pub mod kube;
#[cfg(feature = "k8s-openapi")]
pub mod typed;

pub use controller::{Action, ReconcileError, Reconciler, Request};

/// The error type of every fallible SDK call and of handler methods. Its
/// message is what the host records as the plugin's handler error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    api: Option<ApiError>,
}

impl Error {
    /// An error with the given message.
    pub fn msg(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            api: None,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The API error this came from, if any (to tell `not-found` or
    /// `conflict` apart).
    pub fn api(&self) -> Option<&ApiError> {
        self.api.as_ref()
    }

    /// Whether this is an API `not-found`.
    pub fn is_not_found(&self) -> bool {
        matches!(self.api, Some(ApiError::NotFound(_)))
    }

    /// Whether this is an API `conflict`.
    pub fn is_conflict(&self) -> bool {
        matches!(self.api, Some(ApiError::Conflict(_)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error::msg(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error::msg(s)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::msg(format!("invalid JSON: {e}"))
    }
}

impl From<CacheError> for Error {
    fn from(e: CacheError) -> Self {
        Error::msg(cache_error_message(&e))
    }
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error {
            message: api_error_message(&e),
            api: Some(e),
        }
    }
}

/// Result with the SDK's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// A human-readable message for a cache error.
pub fn cache_error_message(e: &CacheError) -> String {
    match e {
        CacheError::Forbidden(m) => format!("forbidden: {m}"),
        CacheError::UnknownResource(m) => format!("unknown resource: {m}"),
        CacheError::InvalidSelector(m) => format!("invalid label selector: {m}"),
        CacheError::UnknownIndex(m) => format!("unknown index: {m}"),
        CacheError::TooManyObjects(n) => {
            format!("too many objects: one call may reference at most {n}; narrow the query")
        }
    }
}

/// A human-readable message for an API error.
pub fn api_error_message(e: &ApiError) -> String {
    match e {
        ApiError::Forbidden(m) => format!("forbidden: {m}"),
        ApiError::NotFound(m) => format!("not found: {m}"),
        ApiError::Conflict(m) => format!("conflict: {m}"),
        ApiError::AlreadyExists(m) => format!("already exists: {m}"),
        ApiError::Invalid(d) => {
            let causes: Vec<String> = d
                .causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect();
            if causes.is_empty() {
                format!("invalid: {}", d.message)
            } else {
                format!("invalid: {} ({})", d.message, causes.join("; "))
            }
        }
        ApiError::RateLimited(m) => format!("rate limited: {m}"),
        ApiError::Timeout(m) => format!("timeout: {m}"),
        ApiError::Unavailable(m) => format!("unavailable: {m}"),
    }
}

/// The manifest's `[config]` table, handed to `init`.
#[derive(Debug, Clone)]
pub struct Config {
    json: String,
}

impl Config {
    /// Wraps the JSON text the host passes to `init`.
    pub fn from_json(json: String) -> Self {
        Config { json }
    }

    /// The raw JSON text (`{}` when the manifest has no `[config]`).
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Decodes the whole table into `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.json).map_err(|e| Error::msg(format!("invalid [config]: {e}")))
    }

    /// One key of the table, decoded into `T`; `None` when absent.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let v: serde_json::Value = serde_json::from_str(&self.json)?;
        match v.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(x) => serde_json::from_value(x.clone())
                .map(Some)
                .map_err(|e| Error::msg(format!("invalid [config] key `{key}`: {e}"))),
        }
    }
}

use bindings::wasm_informer::plugin::objects as obj;

/// A Kubernetes object held by the host, by reference. Each accessor is one
/// call into the host that copies only what it returns. It is valid for the
/// call into the plugin that produced it (the event, or the reconcile): a
/// plugin copies out, or decodes, what it keeps; using one after that call
/// traps the instance.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Object(wit::ObjectRef);

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object").field("ref", &self.0).finish()
    }
}

impl Object {
    /// Wraps a reference the host handed out in this call.
    #[doc(hidden)]
    pub fn from_ref(r: wit::ObjectRef) -> Self {
        Object(r)
    }

    /// The raw reference.
    pub fn raw(&self) -> wit::ObjectRef {
        self.0
    }

    /// The resource id, for example `v1/pods`.
    pub fn resource(&self) -> String {
        obj::resource(self.0)
    }

    /// The cache key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        obj::key(self.0)
    }

    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<String> {
        obj::namespace(self.0)
    }

    /// `metadata.name`.
    pub fn name(&self) -> String {
        obj::name(self.0)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> String {
        obj::uid(self.0)
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> String {
        obj::resource_version(self.0)
    }

    /// `metadata.generation`, when the object has one.
    pub fn generation(&self) -> Option<i64> {
        obj::generation(self.0)
    }

    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<String> {
        obj::label(self.0, key)
    }

    /// Every label, sorted by key.
    pub fn labels(&self) -> Vec<(String, String)> {
        obj::labels(self.0)
    }

    /// The value of one annotation.
    pub fn annotation(&self, key: &str) -> Option<String> {
        obj::annotation(self.0, key)
    }

    /// Every annotation, sorted by key.
    pub fn annotations(&self) -> Vec<(String, String)> {
        obj::annotations(self.0)
    }

    /// Everything parsed of `metadata`, in one call.
    pub fn meta(&self) -> ObjectMeta {
        obj::meta(self.0)
    }

    /// This object as the `regarding` of an Event.
    pub fn reference(&self) -> ObjectReference {
        obj::reference(self.0)
    }

    /// The whole object as compact JSON.
    pub fn json(&self) -> String {
        obj::json(self.0)
    }

    /// Decodes the object into a typed value, for example
    /// `k8s_openapi::api::core::v1::Pod` or `serde_json::Value`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.json()).map_err(|e| {
            Error::msg(format!(
                "object {} does not decode as {}: {e}",
                self.key(),
                std::any::type_name::<T>()
            ))
        })
    }
}

/// One notification for one object.
#[derive(Debug, Clone)]
pub struct Event {
    info: wit::EventInfo,
}

impl Event {
    /// Wraps the call's argument (used by [`export_plugin!`]).
    #[doc(hidden)]
    pub fn from_wit(info: wit::EventInfo) -> Self {
        Event { info }
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.info.kind
    }

    /// The new state (for a delete, the last known state).
    pub fn object(&self) -> Object {
        Object(self.info.object)
    }

    /// The previous state of an update, when the host had it (free unless
    /// read).
    pub fn old(&self) -> Option<Object> {
        self.info.old_object.map(Object)
    }

    /// The resource id, for example `v1/pods`.
    pub fn resource(&self) -> String {
        self.object().resource()
    }

    /// The cache key: `namespace/name` or `name`.
    pub fn key(&self) -> String {
        self.object().key()
    }

    /// Decodes the new (or last known) state, for example `event.decode::<Pod>()`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        self.object().decode()
    }

    /// Decodes the previous state of an update, when the host had it.
    pub fn decode_old<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.old().map(|o| o.decode()).transpose()
    }

    /// True during the replay of the cache into a new or restarted plugin.
    pub fn is_in_initial_list(&self) -> bool {
        self.info.is_in_initial_list
    }

    /// True on a delete the host synthesised because the real one was missed.
    pub fn final_state_unknown(&self) -> bool {
        self.info.final_state_unknown
    }
}

/// An event handler. Implement `init` and whichever of the event methods you
/// need; the others do nothing.
pub trait Handler: Sized + 'static {
    /// Builds the plugin's state from the manifest's `[config]`. An error stops
    /// the plugin from loading.
    fn init(config: &Config) -> Result<Self>;

    /// An object appeared (also used for the initial replay of the cache).
    fn on_add(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    /// An object changed.
    fn on_update(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    /// An object is gone.
    fn on_delete(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }

    /// A periodic resync re-delivered an unchanged object.
    fn on_sync(&mut self, _event: &Event) -> Result<()> {
        Ok(())
    }
}

/// Dispatches one event to the matching [`Handler`] method.
#[doc(hidden)]
pub fn dispatch<H: Handler>(h: &mut H, event: &Event) -> std::result::Result<(), String> {
    let r = match event.kind() {
        EventKind::Added => h.on_add(event),
        EventKind::Updated => h.on_update(event),
        EventKind::Deleted => h.on_delete(event),
        EventKind::Synced => h.on_sync(event),
    };
    r.map_err(|e| e.message)
}

/// Exports a [`Handler`] type as the plugin's `handler` interface.
///
/// ```ignore
/// struct Noop;
/// impl wasm_informer_sdk::Handler for Noop {
///     fn init(_: &wasm_informer_sdk::Config) -> wasm_informer_sdk::Result<Self> { Ok(Noop) }
/// }
/// wasm_informer_sdk::export_plugin!(Noop);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($handler:ty) => {
        const _: () = {
            struct __WasmInformerPlugin;

            ::std::thread_local! {
                static __STATE: ::std::cell::RefCell<::std::option::Option<$handler>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            impl $crate::bindings::exports::wasm_informer::plugin::handler::Guest
                for __WasmInformerPlugin
            {
                fn init(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    let cfg = $crate::Config::from_json(config);
                    let h = <$handler as $crate::Handler>::init(&cfg)
                        .map_err(|e| e.message().to_string())?;
                    __STATE.with(|s| *s.borrow_mut() = ::std::option::Option::Some(h));
                    ::std::result::Result::Ok(())
                }

                fn on_event(
                    info: $crate::bindings::wasm_informer::plugin::types::EventInfo,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let ev = $crate::Event::from_wit(info);
                    __STATE.with(|s| match s.borrow_mut().as_mut() {
                        ::std::option::Option::Some(h) => $crate::dispatch(h, &ev),
                        ::std::option::Option::None => ::std::result::Result::Err(
                            "on-event called before init".to_string(),
                        ),
                    })
                }
            }

            $crate::bindings::__export_event_handler!(__WasmInformerPlugin with_types_in $crate::bindings);
        };
    };
}

/// Read-only queries against the host's cache. Each call needs the resource in
/// the manifest's `read` list; otherwise it fails with [`CacheError::Forbidden`].
pub mod cache {
    use super::{bindings::wasm_informer::plugin::cache as raw, CacheError, Object, Result};
    use serde::de::DeserializeOwned;

    fn objects(v: Vec<super::wit::ObjectRef>) -> Vec<Object> {
        v.into_iter().map(Object::from_ref).collect()
    }

    /// One object by key, decoded into `T`.
    pub fn get<T: DeserializeOwned>(resource: &str, key: &str) -> Result<Option<T>> {
        get_object(resource, key)?.map(|o| o.decode()).transpose()
    }

    /// One object by key, by reference (valid for this call).
    pub fn get_object(
        resource: &str,
        key: &str,
    ) -> std::result::Result<Option<Object>, CacheError> {
        raw::get(resource, key).map(|o| o.map(Object::from_ref))
    }

    /// Objects of a resource, optionally in one namespace and matching a label
    /// selector, decoded into `T`.
    pub fn list<T: DeserializeOwned>(
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<T>> {
        list_objects(resource, namespace, label_selector)?
            .iter()
            .map(Object::decode)
            .collect()
    }

    /// Objects of a resource, by reference (valid for this call).
    pub fn list_objects(
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> std::result::Result<Vec<Object>, CacheError> {
        raw::list(resource, namespace, label_selector).map(objects)
    }

    /// Objects whose value for the named index equals `value`, decoded into `T`.
    pub fn by_index<T: DeserializeOwned>(
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<T>> {
        by_index_objects(resource, index, value)?
            .iter()
            .map(Object::decode)
            .collect()
    }

    /// Objects of an index, by reference (valid for this call).
    pub fn by_index_objects(
        resource: &str,
        index: &str,
        value: &str,
    ) -> std::result::Result<Vec<Object>, CacheError> {
        raw::by_index(resource, index, value).map(objects)
    }

    /// Whether the resource's informer has finished its first list.
    pub fn has_synced(resource: &str) -> std::result::Result<bool, CacheError> {
        raw::has_synced(resource)
    }
}

/// Leveled logging into the host's log (tagged with the plugin's name). The
/// macros [`trace!`], [`debug!`], [`info!`], [`warn!`] and [`error!`] format
/// like `format!`.
pub mod log {
    pub use super::bindings::wasm_informer::plugin::log::Level;

    /// Writes one message at `level`.
    pub fn log(level: Level, message: &str) {
        super::bindings::wasm_informer::plugin::log::log(level, message)
    }
}

/// Logs at trace level.
#[macro_export]
macro_rules! trace { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Trace, &::std::format!($($t)*)) }; }
/// Logs at debug level.
#[macro_export]
macro_rules! debug { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($t)*)) }; }
/// Logs at info level.
#[macro_export]
macro_rules! info { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($t)*)) }; }
/// Logs at warn level.
#[macro_export]
macro_rules! warn { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($t)*)) }; }
/// Logs at error level.
#[macro_export]
macro_rules! error { ($($t:tt)*) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($t)*)) }; }

/// A duration as the WIT's milliseconds.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
