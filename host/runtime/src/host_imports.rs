//! The host side of the world's imports: `cache` (read-only queries through
//! [`CacheView`], gated by the manifest's `read` list) and `log`.
//!
//! Invariant: no import ever traps the guest. A read of a resource outside the
//! `read` list returns `forbidden`; every other failure is a `cache-error`.

use super::bindings::{cache_iface, log_iface, wit};
use super::convert::object_view;
use super::host_state::HostState;
use super::log_sink::LogLevel;
use kube_informer::cache_view::{CacheError, CacheView};

fn to_wit(e: CacheError) -> wit::CacheError {
    match e {
        CacheError::Forbidden(m) => wit::CacheError::Forbidden(m),
        CacheError::UnknownResource(m) => wit::CacheError::UnknownResource(m),
        CacheError::InvalidSelector(m) => wit::CacheError::InvalidSelector(m),
        CacheError::UnknownIndex(m) => wit::CacheError::UnknownIndex(m),
    }
}

impl HostState {
    fn gate(&self, resource: &str) -> Result<&dyn CacheView, wit::CacheError> {
        if self.may_read(resource) {
            Ok(&*self.cache)
        } else {
            Err(wit::CacheError::Forbidden(format!(
                "plugin {} may not read {resource}: it is not in the manifest's `read` list",
                self.plugin
            )))
        }
    }
}

impl wit::Host for HostState {}

impl cache_iface::Host for HostState {
    fn get(
        &mut self,
        resource: String,
        key: String,
    ) -> Result<Option<wit::ObjectView>, wit::CacheError> {
        let c = self.gate(&resource)?;
        c.get(&resource, &key)
            .map(|o| o.as_deref().map(object_view))
            .map_err(to_wit)
    }

    fn list(
        &mut self,
        resource: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<wit::ObjectView>, wit::CacheError> {
        let c = self.gate(&resource)?;
        c.list(&resource, namespace.as_deref(), label_selector.as_deref())
            .map(|v| v.iter().map(|o| object_view(o)).collect())
            .map_err(to_wit)
    }

    fn by_index(
        &mut self,
        resource: String,
        index_name: String,
        value: String,
    ) -> Result<Vec<wit::ObjectView>, wit::CacheError> {
        let c = self.gate(&resource)?;
        c.by_index(&resource, &index_name, &value)
            .map(|v| v.iter().map(|o| object_view(o)).collect())
            .map_err(to_wit)
    }

    fn has_synced(&mut self, resource: String) -> Result<bool, wit::CacheError> {
        let c = self.gate(&resource)?;
        c.has_synced(&resource).map_err(to_wit)
    }
}

impl log_iface::Host for HostState {
    fn log(&mut self, level: log_iface::Level, message: String) {
        let level = match level {
            log_iface::Level::Trace => LogLevel::Trace,
            log_iface::Level::Debug => LogLevel::Debug,
            log_iface::Level::Info => LogLevel::Info,
            log_iface::Level::Warn => LogLevel::Warn,
            log_iface::Level::Error => LogLevel::Error,
        };
        self.log.emit(level, "log", &message);
    }
}
