//! A record of every API request the simulator received, for tests that assert on what a client
//! sent (paging, resourceVersion, watch parameters).
//!
//! Invariant: requests are recorded in arrival order, before any fault or handler runs; admin
//! requests under `/_sim/` are not recorded. Each record carries its arrival time (wall clock), the
//! client's user agent, the body of writes, and, once answered, the response status, so that a
//! test can tell which client wrote what, when, and whether the write took effect.

use parking_lot::Mutex;
use std::sync::Arc;

use crate::query::Query;

/// Bodies of writes are kept up to this many bytes.
pub const MAX_BODY: usize = 16 * 1024;

/// One received request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestRecord {
    /// HTTP method, e.g. `GET`.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Raw query string (without `?`), empty when absent.
    pub query: String,
    /// Content-Type header of the request, empty when absent.
    pub content_type: String,
    /// User-Agent header of the request, empty when absent.
    pub user_agent: String,
    /// Arrival time, microseconds since the Unix epoch.
    pub at_micros: u64,
    /// Response status; 0 until the response (or a stream's head) is sent.
    pub status: u16,
    /// The request body of a write (not GET), up to [`MAX_BODY`] bytes, as text.
    pub body: String,
    /// Position in the log since the simulator started (not reset by `clear`).
    pub seq: u64,
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
    next_seq: Arc<std::sync::atomic::AtomicU64>,
}

impl RequestLog {
    /// Appends a record; returns its sequence number, for [`RequestLog::set_status`].
    pub fn record(&self, mut r: RequestRecord) -> u64 {
        let seq = self
            .next_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r.seq = seq;
        self.entries.lock().push(r);
        seq
    }

    /// Records the response status of request `seq`.
    pub fn set_status(&self, seq: u64, status: u16) {
        let mut entries = self.entries.lock();
        if let Some(r) = entries.iter_mut().rev().find(|r| r.seq == seq) {
            r.status = status;
        }
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
