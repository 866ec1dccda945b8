//! Write wasm-informer event handlers in Rust.
//!
//! A plugin is a WebAssembly component for the world
//! `wasm-informer:plugin/event-handler@0.1.0`. This crate wraps the generated
//! bindings so a plugin is one type implementing [`Handler`] plus one
//! [`export_plugin!`] line. Build it as a `cdylib` for `wasm32-wasip2`:
//! `cargo build --release --target wasm32-wasip2`; the output `.wasm` is already
//! a component.
//!
//! Invariant: nothing in this crate traps on bad input. Malformed JSON, a
//! forbidden cache read or a missing object all come back as an [`Error`], which a
//! handler returns and the host counts as a handler error.
//!
//! # Example
//!
//! A complete plugin that counts Ready pods per namespace (with `k8s-openapi` as a
//! dependency of the plugin crate):
//!
//! ```ignore
//! use std::collections::BTreeMap;
//! use k8s_openapi::api::core::v1::Pod;
//! use wasm_informer_sdk::{cache, export_plugin, info, Config, Event, Handler, Result};
//!
//! struct ReadyCounter {
//!     ready: BTreeMap<String, u64>,
//! }
//!
//! fn is_ready(pod: &Pod) -> bool {
//!     pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
//!         cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
//!     })
//! }
//!
//! impl Handler for ReadyCounter {
//!     fn init(_config: &Config) -> Result<Self> {
//!         Ok(ReadyCounter { ready: BTreeMap::new() })
//!     }
//!
//!     fn on_add(&mut self, event: &Event) -> Result<()> {
//!         let ns = event.meta().namespace.clone().unwrap_or_default();
//!         // Level-triggered: recount the namespace from the host's cache.
//!         let pods: Vec<Pod> = cache::list("v1/pods", Some(&ns), None)?;
//!         let n = pods.iter().filter(|p| is_ready(p)).count() as u64;
//!         self.ready.insert(ns.clone(), n);
//!         info!("namespace {ns}: {n} ready pods");
//!         Ok(())
//!     }
//!
//!     fn on_update(&mut self, event: &Event) -> Result<()> {
//!         self.on_add(event)
//!     }
//! }
//!
//! export_plugin!(ReadyCounter);
//! ```
//!
//! The handler may also decode the event's object itself:
//! `let pod: Pod = event.object()?;`.

use std::fmt;

use serde::de::DeserializeOwned;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "event-handler",
        pub_export_macro: true,
        export_macro_name: "__export_event_handler",
        default_bindings_module: "wasm_informer_sdk::bindings",
    });
}

use bindings::wasm_informer::plugin::types as wit;

pub use wit::{EventKind, KeyValue, ObjectMeta};

/// The error type of every fallible SDK call and of handler methods. Its message
/// is what the host records as the plugin's handler error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with the given message.
    pub fn msg(message: impl Into<String>) -> Self {
        Error(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Error(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error(s.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error(format!("invalid JSON: {e}"))
    }
}

impl From<CacheError> for Error {
    fn from(e: CacheError) -> Self {
        Error(cache_error_message(&e))
    }
}

/// Result with the SDK's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Why a cache query failed (the WIT `cache-error`).
pub use wit::CacheError;

/// A human-readable message for a cache error.
pub fn cache_error_message(e: &CacheError) -> String {
    match e {
        CacheError::Forbidden(m) => format!("forbidden: {m}"),
        CacheError::UnknownResource(m) => format!("unknown resource: {m}"),
        CacheError::InvalidSelector(m) => format!("invalid label selector: {m}"),
        CacheError::UnknownIndex(m) => format!("unknown index: {m}"),
    }
}

/// The manifest's `[config]` table, handed to [`Handler::init`].
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
        serde_json::from_str(&self.json).map_err(|e| Error(format!("invalid [config]: {e}")))
    }

    /// One key of the table, decoded into `T`; `None` when absent.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let v: serde_json::Value = serde_json::from_str(&self.json)?;
        match v.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(x) => serde_json::from_value(x.clone())
                .map(Some)
                .map_err(|e| Error(format!("invalid [config] key `{key}`: {e}"))),
        }
    }
}

/// A cached Kubernetes object: parsed metadata plus the JSON body.
#[derive(Debug, Clone)]
pub struct Object {
    inner: wit::ObjectView,
}

impl Object {
    /// The metadata the host already parsed.
    pub fn meta(&self) -> &ObjectMeta {
        &self.inner.meta
    }

    /// The whole object as compact JSON.
    pub fn json(&self) -> &str {
        &self.inner.json
    }

    /// Decodes the object into a typed value, for example `k8s_openapi::api::core::v1::Pod`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.inner.json).map_err(|e| {
            Error(format!(
                "object {} does not decode as {}: {e}",
                self.inner.meta.name,
                std::any::type_name::<T>()
            ))
        })
    }

    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<&str> {
        find(&self.inner.meta.labels, key)
    }

    /// The value of one annotation.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        find(&self.inner.meta.annotations, key)
    }
}

fn find<'a>(kvs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    kvs.iter()
        .find(|kv| kv.key == key)
        .map(|kv| kv.value.as_str())
}

/// One notification for one object.
#[derive(Debug, Clone)]
pub struct Event {
    inner: wit::Event,
}

impl Event {
    /// Wraps the generated record (used by [`export_plugin!`]).
    #[doc(hidden)]
    pub fn from_wit(inner: wit::Event) -> Self {
        Event { inner }
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.inner.kind
    }

    /// The resource id, for example `v1/pods`.
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// The cache key: `namespace/name` or `name`.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Metadata of the new (or, for a delete, last known) state.
    pub fn meta(&self) -> &ObjectMeta {
        &self.inner.object.meta
    }

    /// The new (or last known) state's JSON.
    pub fn json(&self) -> &str {
        &self.inner.object.json
    }

    /// Decodes the new (or last known) state, for example `event.object::<Pod>()`.
    pub fn object<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.inner.object.json).map_err(|e| {
            Error(format!(
                "event object {} does not decode as {}: {e}",
                self.inner.key,
                std::any::type_name::<T>()
            ))
        })
    }

    /// Decodes the previous state of an update, when the host had it.
    pub fn old_object<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        match &self.inner.old_object {
            None => Ok(None),
            Some(o) => serde_json::from_str(&o.json).map(Some).map_err(|e| {
                Error(format!(
                    "old object {} does not decode as {}: {e}",
                    self.inner.key,
                    std::any::type_name::<T>()
                ))
            }),
        }
    }

    /// The previous state's metadata, when known.
    pub fn old_meta(&self) -> Option<&ObjectMeta> {
        self.inner.old_object.as_ref().map(|o| &o.meta)
    }

    /// True during the replay of the cache into a new or restarted plugin.
    pub fn is_in_initial_list(&self) -> bool {
        self.inner.is_in_initial_list
    }

    /// True on a delete the host synthesised because the real one was missed.
    pub fn final_state_unknown(&self) -> bool {
        self.inner.final_state_unknown
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
    r.map_err(|e| e.0)
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
                    event: $crate::bindings::wasm_informer::plugin::types::Event,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    let ev = $crate::Event::from_wit(event);
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

    /// One object by key, decoded into `T`.
    pub fn get<T: DeserializeOwned>(resource: &str, key: &str) -> Result<Option<T>> {
        match get_object(resource, key)? {
            None => Ok(None),
            Some(o) => o.decode().map(Some),
        }
    }

    /// One object by key, undecoded.
    pub fn get_object(
        resource: &str,
        key: &str,
    ) -> std::result::Result<Option<Object>, CacheError> {
        raw::get(resource, key).map(|o| o.map(|inner| Object { inner }))
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

    /// Objects of a resource, undecoded.
    pub fn list_objects(
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> std::result::Result<Vec<Object>, CacheError> {
        raw::list(resource, namespace, label_selector)
            .map(|v| v.into_iter().map(|inner| Object { inner }).collect())
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

    /// Objects of an index, undecoded.
    pub fn by_index_objects(
        resource: &str,
        index: &str,
        value: &str,
    ) -> std::result::Result<Vec<Object>, CacheError> {
        raw::by_index(resource, index, value)
            .map(|v| v.into_iter().map(|inner| Object { inner }).collect())
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

/// Cache queries typed by a k8s-openapi resource type: the resource id (for
/// example `v1/pods` or `apps/v1/deployments`) comes from the type. Needs the
/// `k8s-openapi` feature.
///
/// ```ignore
/// use k8s_openapi::api::core::v1::Pod;
/// let pods: Vec<Pod> = wasm_informer_sdk::typed::list(Some("default"), Some("app=web"))?;
/// ```
#[cfg(feature = "k8s-openapi")]
pub mod typed {
    use k8s_openapi::Resource;
    use serde::de::DeserializeOwned;

    use super::Result;

    /// The host's resource id of `K`: `API_VERSION/URL_PATH_SEGMENT`.
    pub fn resource_id<K: Resource>() -> String {
        format!("{}/{}", K::API_VERSION, K::URL_PATH_SEGMENT)
    }

    /// One object by key (`namespace/name` or `name`).
    pub fn get<K: Resource + DeserializeOwned>(key: &str) -> Result<Option<K>> {
        super::cache::get(&resource_id::<K>(), key)
    }

    /// Objects, optionally in one namespace and matching a label selector.
    pub fn list<K: Resource + DeserializeOwned>(
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<K>> {
        super::cache::list(&resource_id::<K>(), namespace, label_selector)
    }

    /// Objects whose value for the named index equals `value`.
    pub fn by_index<K: Resource + DeserializeOwned>(index: &str, value: &str) -> Result<Vec<K>> {
        super::cache::by_index(&resource_id::<K>(), index, value)
    }

    /// Whether `K`'s informer has finished its first list.
    pub fn has_synced<K: Resource>() -> Result<bool> {
        super::cache::has_synced(&resource_id::<K>()).map_err(Into::into)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn resource_ids_match_the_host() {
            assert_eq!(resource_id::<k8s_openapi::api::core::v1::Pod>(), "v1/pods");
            assert_eq!(
                resource_id::<k8s_openapi::api::apps::v1::Deployment>(),
                "apps/v1/deployments"
            );
        }
    }
}
