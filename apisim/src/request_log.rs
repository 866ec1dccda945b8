//! A record of every API request the simulator received, for tests that assert on what a client
//! sent (paging, resourceVersion, watch parameters).
//!
//! Invariant: requests are recorded in arrival order, before any fault or handler runs; admin
//! requests under `/_sim/` are not recorded. Each record carries its arrival time (wall clock), the
//! client's user agent, the body of writes, the authenticated and impersonated users, the target
//! as the router parsed it, and, once answered, the response status and the resourceVersion of
//! the write the server applied, so that a test can tell which identity wrote what, when, in
//! which order (writes are totally ordered by that resourceVersion), and whether it took effect.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use crate::faults::WaitTimeout;
use crate::query::Query;
pub use crate::request_info::RequestTarget;

/// Whether `path` is a legacy watch path (`/api/v1/watch/...` or `/apis/G/V/watch/...`).
pub fn is_legacy_watch_path(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(
        segs.as_slice(),
        ["api", _, "watch", ..] | ["apis", _, _, "watch", ..]
    )
}

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
    /// The authenticated user: the user of a known bearer token, `system:anonymous` when
    /// authentication is on and no token was sent, empty when authentication is off and no
    /// known token was sent.
    pub user: String,
    /// The `Impersonate-User` header as sent; empty when absent.
    pub impersonated_user: String,
    /// What the request addressed, as the router parsed it (the raw path is in `path`).
    pub target: RequestTarget,
    /// For a write the server applied (not a dry run, not a no-op), the resourceVersion it
    /// assigned: the written object's `metadata.resourceVersion`, or for a DELETE the
    /// resourceVersion of the deletion (of the DELETED watch event), also when the answer is a
    /// `Status`; for a DELETE of a collection the highest of its deletions. None for reads,
    /// refusals, dry runs and writes that changed nothing.
    pub written_rv: Option<u64>,
}

impl RequestRecord {
    /// Decoded value of one query parameter.
    pub fn param(&self, key: &str) -> Option<String> {
        Query::parse(&self.query).get(key).map(str::to_string)
    }

    /// Whether this is a watch request: `watch` set to a true boolean (decoded as the apiserver
    /// does), or a legacy `/watch/` path.
    pub fn is_watch(&self) -> bool {
        Query::parse(&self.query).flag("watch") || is_legacy_watch_path(&self.path)
    }
}

/// Shared, append-only request log.
#[derive(Debug, Clone)]
pub struct RequestLog {
    inner: Arc<LogInner>,
}

#[derive(Debug)]
struct LogInner {
    entries: Mutex<Vec<RequestRecord>>,
    next_seq: std::sync::atomic::AtomicU64,
    /// Number of records, updated after each append (wakes waiters).
    len: tokio::sync::watch::Sender<usize>,
}

impl Default for RequestLog {
    fn default() -> Self {
        RequestLog {
            inner: Arc::new(LogInner {
                entries: Mutex::new(Vec::new()),
                next_seq: std::sync::atomic::AtomicU64::new(0),
                len: tokio::sync::watch::channel(0).0,
            }),
        }
    }
}

impl RequestLog {
    /// Appends a record; returns its sequence number, for [`RequestLog::set_status`].
    pub fn record(&self, mut r: RequestRecord) -> u64 {
        let (n, seq) = {
            let mut e = self.inner.entries.lock();
            let seq = self
                .inner
                .next_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            r.seq = seq;
            e.push(r);
            (e.len(), seq)
        };
        self.inner.len.send_replace(n);
        seq
    }

    /// Records the response status of request `seq`.
    pub fn set_status(&self, seq: u64, status: u16) {
        self.set_outcome(seq, status, None);
    }

    /// Records the response status of request `seq` and the resourceVersion of the write it
    /// applied, if any.
    pub fn set_outcome(&self, seq: u64, status: u16, written_rv: Option<u64>) {
        let mut entries = self.inner.entries.lock();
        if let Some(r) = entries.iter_mut().rev().find(|r| r.seq == seq) {
            r.status = status;
            r.written_rv = written_rv;
        }
    }

    /// A copy of every record so far.
    pub fn entries(&self) -> Vec<RequestRecord> {
        self.inner.entries.lock().clone()
    }

    /// Records whose path equals `path`.
    pub fn for_path(&self, path: &str) -> Vec<RequestRecord> {
        self.matching(|r| r.path == path)
    }

    /// Records for which `pred` holds.
    pub fn matching(&self, pred: impl Fn(&RequestRecord) -> bool) -> Vec<RequestRecord> {
        self.inner
            .entries
            .lock()
            .iter()
            .filter(|r| pred(r))
            .cloned()
            .collect()
    }

    /// Waits until a record for which `pred` holds has been logged (including one logged
    /// before the call) and returns the first such record.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&RequestRecord) -> bool,
    ) -> Result<RequestRecord, WaitTimeout> {
        self.wait_count(1, timeout, pred)
            .await
            .map(|mut v| v.swap_remove(0))
    }

    /// Waits until at least `n` records for which `pred` holds have been logged; returns them.
    pub async fn wait_count(
        &self,
        n: usize,
        timeout: Duration,
        pred: impl Fn(&RequestRecord) -> bool,
    ) -> Result<Vec<RequestRecord>, WaitTimeout> {
        let mut rx = self.inner.len.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self.matching(&pred);
            if found.len() >= n.max(1) {
                return Ok(found);
            }
            if !matches!(
                tokio::time::timeout_at(deadline, rx.changed()).await,
                Ok(Ok(()))
            ) {
                let found = self.matching(&pred);
                if found.len() >= n.max(1) {
                    return Ok(found);
                }
                return Err(WaitTimeout {
                    what: format!(
                        "{n} matching requests in the request log (found {} of {} records)",
                        found.len(),
                        self.len()
                    ),
                    timeout,
                });
            }
        }
    }

    /// Forgets every record.
    pub fn clear(&self) {
        self.inner.entries.lock().clear();
        self.inner.len.send_replace(0);
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.inner.entries.lock().len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(method: &str, path: &str, query: &str) -> RequestRecord {
        RequestRecord {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            ..RequestRecord::default()
        }
    }

    #[tokio::test]
    async fn wait_for_sees_past_and_future_records() {
        let log = RequestLog::default();
        log.record(rec("GET", "/api/v1/pods", "limit=500"));
        let r = log
            .wait_for(Duration::from_millis(10), |r| r.path == "/api/v1/pods")
            .await
            .unwrap();
        assert_eq!(r.param("limit").as_deref(), Some("500"));
        let l2 = log.clone();
        let t =
            tokio::spawn(
                async move { l2.wait_for(Duration::from_secs(10), |r| r.is_watch()).await },
            );
        tokio::task::yield_now().await;
        log.record(rec("GET", "/api/v1/watch/pods", ""));
        assert_eq!(t.await.unwrap().unwrap().path, "/api/v1/watch/pods");
        let e = log
            .wait_count(3, Duration::from_millis(10), |r| r.method == "GET")
            .await
            .unwrap_err();
        assert!(e.what.contains("found 2"), "{e}");
    }
}
