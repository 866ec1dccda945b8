//! A record of every API request the simulator received, for tests that assert on what a client
//! sent (paging, resourceVersion, watch parameters).
//!
//! Invariant: requests are recorded in arrival order, before any fault or handler runs; admin
//! requests under `/_sim/` are not recorded.

use parking_lot::Mutex;
use std::sync::Arc;

use crate::query::Query;

/// One received request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Raw query string (without `?`), empty when absent.
    pub query: String,
    /// Content-Type header of the request, empty when absent.
    pub content_type: String,
}

impl RequestRecord {
    /// Decoded value of one query parameter.
    pub fn param(&self, key: &str) -> Option<String> {
        Query::parse(&self.query).get(key).map(str::to_string)
    }

    /// Whether this is a watch request.
    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch").as_deref(), Some("true") | Some("1"))
    }
}

/// Shared, append-only request log.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    entries: Arc<Mutex<Vec<RequestRecord>>>,
}

impl RequestLog {
    /// Appends a record.
    pub fn record(&self, r: RequestRecord) {
        self.entries.lock().push(r);
    }

    /// A copy of every record so far.
    pub fn entries(&self) -> Vec<RequestRecord> {
        self.entries.lock().clone()
    }

    /// Records whose path equals `path`.
    pub fn for_path(&self, path: &str) -> Vec<RequestRecord> {
        self.entries
            .lock()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Forgets every record.
    pub fn clear(&self) {
        self.entries.lock().clear();
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
