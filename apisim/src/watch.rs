//! Watch streams: initial events, live changes from the store's log with selector translation,
//! bookmarks, timeouts and the watch faults (drop, cut mid-line).
//!
//! Invariants:
//! - Events reach a watcher in resourceVersion order, each at most once, with no gap: the cursor
//!   only advances past changes that were examined.
//! - A watch from a compacted resourceVersion gets HTTP 200 and one ERROR event with code 410,
//!   never an HTTP 410.
//! - A bookmark's resourceVersion never exceeds the last change examined, so a client resuming
//!   from it misses nothing.

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use wasm_informer_selector::{FieldSelector, LabelSelector};

use crate::faults::{Faults, WatchGuard};
use crate::object::{ObjectRef, StoredObject};
use crate::resource::{ResourceId, ResourceType};
use crate::shard::ShardSelector;
use crate::status::ApiError;
use crate::store::{Change, ChangeType, ListRequest, ListVersion, Store};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic ADDED events for the current state, then changes (RV unset or `0`).
    CurrentState,
    /// Changes after this resourceVersion only.
    After(u64),
    /// No initial events; changes after the current resourceVersion
    /// (`sendInitialEvents=false` without a resourceVersion).
    Now,
}

/// A parsed watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// Resource type watched.
    pub resource: ResourceId,
    /// Namespace filter (None: all namespaces).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Shard selector (KEP-5866): initial events and changes of objects outside it are not sent.
    pub shard: Option<ShardSelector>,
    /// Start point.
    pub start: WatchStart,
    /// Send the `k8s.io/initial-events-end` bookmark after the initial events.
    pub initial_events_end: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// When the stream ends cleanly.
    pub timeout: Duration,
    /// Send each object as a one-row `Table` (the client asked for `as=Table`).
    pub table: bool,
}

/// Events per chunk written to the socket.
const BATCH: usize = 512;

fn event_line(buf: &mut BytesMut, ty: &str, object: &[u8]) {
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(ty.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(object);
    buf.put_slice(b"}\n");
}

/// The bookmark object for `rt` at `rv`.
pub fn bookmark_object(rt: &ResourceType, rv: u64, initial_events_end: bool) -> Vec<u8> {
    let annotations = if initial_events_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rv}\",\"creationTimestamp\":null{annotations}}}}}",
        rt.kind,
        rt.api_version()
    )
    .into_bytes()
}

enum Phase {
    Initial(std::vec::IntoIter<ObjectRef>, u64),
    Live,
    Cut,
    Done,
}

struct WatchState {
    store: Arc<Store>,
    faults: Faults,
    rt: Arc<ResourceType>,
    req: WatchRequest,
    /// The type whose changes are followed (the storage of a view such as events.k8s.io).
    stored: ResourceId,
    /// The conversion of stored objects when the watched type is a view.
    present: Option<fn(&serde_json::Value) -> serde_json::Value>,
    /// The field selector in the stored type's labels.
    stored_fields: FieldSelector,
    cursor: u64,
    phase: Phase,
    deadline: Instant,
    next_bookmark: Instant,
    interval: Duration,
    rv_rx: tokio::sync::watch::Receiver<u64>,
    drop_rx: tokio::sync::watch::Receiver<u64>,
    pending_error: Option<ApiError>,
    _guard: WatchGuard,
}

/// Prepared watch: validated and positioned, ready to stream.
pub struct Watch {
    state: WatchState,
}

impl Watch {
    /// Validates the request and takes the initial snapshot atomically with the cursor, so that
    /// initial events and live changes neither overlap nor leave a gap.
    pub fn open(
        store: Arc<Store>,
        faults: Faults,
        req: WatchRequest,
        bookmark_interval: Duration,
    ) -> Result<Watch, ApiError> {
        let rt = store.registry().get(req.resource);
        // Subscribe before reading the snapshot so no notification is missed.
        let rv_rx = store.subscribe();
        let drop_rx = faults.drop_signal();
        // Counted as open only now that a later drop is certain to be seen.
        let guard = faults.watch_guard();
        let target = store.watch_target(req.resource, &req.fields)?;
        let (phase, cursor, pending_error) = match req.start {
            WatchStart::CurrentState => {
                let mut lr = ListRequest::all(req.namespace.as_deref());
                lr.labels = req.labels.clone();
                lr.fields = req.fields.clone();
                lr.shard = req.shard.clone();
                lr.version = ListVersion::Latest;
                let page = store.list(req.resource, &lr)?;
                (
                    Phase::Initial(page.items.into_iter(), page.rv),
                    page.rv,
                    None,
                )
            }
            WatchStart::Now => (Phase::Live, store.current_rv(), None),
            WatchStart::After(rv) => {
                let compacted = store.compacted_rv();
                if rv < compacted {
                    (Phase::Done, rv, Some(ApiError::too_old_rv(rv, compacted)))
                } else {
                    (Phase::Live, rv, None)
                }
            }
        };
        let now = Instant::now();
        Ok(Watch {
            state: WatchState {
                store,
                faults,
                rt,
                deadline: now + req.timeout,
                next_bookmark: now + bookmark_interval,
                interval: bookmark_interval,
                req,
                stored: target.stored,
                present: target.present,
                stored_fields: target.fields,
                cursor,
                phase,
                rv_rx,
                drop_rx,
                pending_error,
                _guard: guard,
            },
        })
    }

    /// A watch that sends one ERROR event carrying `error` and ends (how the apiserver reports
    /// errors found after the watch was accepted, such as a too large resourceVersion).
    pub fn failed(
        store: Arc<Store>,
        faults: Faults,
        resource: ResourceId,
        error: ApiError,
    ) -> Watch {
        let rt = store.registry().get(resource);
        let rv_rx = store.subscribe();
        let drop_rx = faults.drop_signal();
        let guard = faults.watch_guard();
        let now = Instant::now();
        Watch {
            state: WatchState {
                store,
                faults,
                rt,
                deadline: now,
                next_bookmark: now,
                interval: Duration::from_secs(3600),
                req: WatchRequest {
                    resource,
                    namespace: None,
                    labels: LabelSelector::everything(),
                    fields: FieldSelector::default(),
                    shard: None,
                    start: WatchStart::Now,
                    initial_events_end: false,
                    bookmarks: false,
                    timeout: Duration::ZERO,
                    table: false,
                },
                stored: resource,
                present: None,
                stored_fields: FieldSelector::default(),
                cursor: 0,
                phase: Phase::Done,
                rv_rx,
                drop_rx,
                pending_error: Some(error),
                _guard: guard,
            },
        }
    }

    /// The stream of body chunks (each a whole number of event lines, except when cut by a fault).
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
        futures::stream::unfold(self.state, |mut st| async move {
            let item = st.next_chunk().await?;
            Some((item, st))
        })
    }
}

fn cut_err() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "watch cut by injected fault",
    )
}

impl WatchState {
    /// Appends one event line, or, when a cut fault is armed, half of it and reports the cut.
    fn push_event(&mut self, buf: &mut BytesMut, ty: &str, object: &[u8]) -> bool {
        if self.faults.take_cut() {
            let mut line = BytesMut::new();
            event_line(&mut line, ty, object);
            let half = line.len() / 2;
            buf.put_slice(&line[..half]);
            self.phase = Phase::Cut;
            return true;
        }
        event_line(buf, ty, object);
        false
    }

    /// The event object as the client asked for it: the object, or a one-row Table.
    fn render(&self, json: Bytes) -> Bytes {
        if !self.req.table {
            return json;
        }
        let v: serde_json::Value = serde_json::from_slice(&json).expect("stored JSON is valid");
        let rv = v["metadata"]["resourceVersion"].clone();
        let t = crate::table::table(&self.rt, &[v], serde_json::json!({"resourceVersion": rv}));
        Bytes::from(serde_json::to_vec(&t).expect("JSON serializes"))
    }

    /// Translates one change through this watcher's filters (the apiserver's rules: moving out of
    /// the selector is DELETED with the previous content, moving in is ADDED).
    fn translate(&self, c: &Change) -> Option<(&'static str, Bytes)> {
        if c.resource != self.stored {
            return None;
        }
        if let Some(ns) = &self.req.namespace {
            if self.rt.namespaced && &c.object.namespace != ns {
                return None;
            }
        }
        // uid and namespace never change within an object's life, so a change is in the shard
        // exactly when its object is: no change moves an object into or out of a shard.
        if let Some(shard) = &self.req.shard {
            if !c.object.in_shard(shard) {
                return None;
            }
        }
        let (labels, fields) = (&self.req.labels, &self.stored_fields);
        if labels.is_empty() && fields.is_empty() {
            return Some((c.kind.as_str(), self.served_json(&c.object)));
        }
        let cur = c.kind != ChangeType::Deleted && c.object.matches(labels, fields);
        let old = c.prev.as_ref().is_some_and(|p| p.matches(labels, fields));
        match (cur, old) {
            (true, false) => Some(("ADDED", self.served_json(&c.object))),
            (true, true) => Some(("MODIFIED", self.served_json(&c.object))),
            (false, true) => {
                if c.kind == ChangeType::Deleted {
                    Some(("DELETED", self.served_json(&c.object)))
                } else {
                    let prev: &StoredObject = c.prev.as_ref().expect("old passes implies prev");
                    let stored_rt = self.store.registry().get(self.stored);
                    Some(("DELETED", self.served_json(&prev.with_rv(&stored_rt, c.rv))))
                }
            }
            (false, false) => None,
        }
    }

    /// A stored object's JSON as the watched type serves it.
    fn served_json(&self, o: &StoredObject) -> Bytes {
        match self.present {
            None => o.json.clone(),
            Some(present) => {
                Bytes::from(serde_json::to_vec(&present(&o.value())).expect("JSON serializes"))
            }
        }
    }

    async fn next_chunk(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        if let Some(e) = self.pending_error.take() {
            let mut buf = BytesMut::new();
            event_line(&mut buf, "ERROR", &e.body());
            self.phase = Phase::Done;
            return Some(Ok(buf.freeze()));
        }
        loop {
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Cut => {
                    self.phase = Phase::Done;
                    return Some(Err(cut_err()));
                }
                Phase::Initial(items, snapshot_rv) => {
                    let snapshot_rv = *snapshot_rv;
                    let mut buf = BytesMut::new();
                    let batch: Vec<ObjectRef> = items.by_ref().take(BATCH).collect();
                    let exhausted = items.len() == 0;
                    for o in &batch {
                        let json = self.render(o.json.clone());
                        if self.push_event(&mut buf, "ADDED", &json) {
                            return Some(Ok(buf.freeze()));
                        }
                    }
                    if exhausted {
                        if self.req.initial_events_end {
                            let b = bookmark_object(&self.rt, snapshot_rv, true);
                            event_line(&mut buf, "BOOKMARK", &b);
                        }
                        self.phase = Phase::Live;
                    }
                    if !buf.is_empty() {
                        return Some(Ok(buf.freeze()));
                    }
                }
                Phase::Live => {
                    if self.drop_rx.has_changed().unwrap_or(false) {
                        self.phase = Phase::Done;
                        self.faults.note_watch_dropped();
                        return Some(Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "watch dropped by injected fault",
                        )));
                    }
                    match self.store.changes_since(self.cursor, BATCH) {
                        Err(oldest) => {
                            let e = ApiError::too_old_rv(self.cursor, oldest);
                            let mut buf = BytesMut::new();
                            event_line(&mut buf, "ERROR", &e.body());
                            self.phase = Phase::Done;
                            return Some(Ok(buf.freeze()));
                        }
                        Ok(changes) if !changes.is_empty() => {
                            let mut buf = BytesMut::new();
                            for c in &changes {
                                self.cursor = c.rv;
                                if let Some((ty, json)) = self.translate(c) {
                                    let json = self.render(json);
                                    if self.push_event(&mut buf, ty, &json) {
                                        return Some(Ok(buf.freeze()));
                                    }
                                }
                            }
                            if !buf.is_empty() {
                                return Some(Ok(buf.freeze()));
                            }
                            continue;
                        }
                        Ok(_) => {}
                    }
                    // Caught up: wait for a change, a bookmark tick, the timeout or a drop.
                    let now = Instant::now();
                    if now >= self.deadline {
                        self.phase = Phase::Done;
                        return None;
                    }
                    if self.req.bookmarks && now >= self.next_bookmark {
                        self.next_bookmark = now + self.interval;
                        let mut buf = BytesMut::new();
                        event_line(
                            &mut buf,
                            "BOOKMARK",
                            &bookmark_object(&self.rt, self.cursor, false),
                        );
                        return Some(Ok(buf.freeze()));
                    }
                    let wake = if self.req.bookmarks {
                        self.deadline.min(self.next_bookmark)
                    } else {
                        self.deadline
                    };
                    tokio::select! {
                        r = self.rv_rx.changed() => {
                            if r.is_err() {
                                self.phase = Phase::Done;
                                return None;
                            }
                        }
                        _ = self.drop_rx.changed() => {
                            self.phase = Phase::Done;
                            self.faults.note_watch_dropped();
                            return Some(Err(std::io::Error::new(
                                std::io::ErrorKind::ConnectionReset,
                                "watch dropped by injected fault",
                            )));
                        }
                        _ = tokio::time::sleep_until(wake) => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Registry;

    #[test]
    fn error_and_bookmark_lines_match_the_apiserver() {
        let mut buf = BytesMut::new();
        event_line(&mut buf, "ERROR", &ApiError::too_old_rv(117, 119).body());
        assert_eq!(
            std::str::from_utf8(&buf).unwrap(),
            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 117 (119)\",\"reason\":\"Expired\",\"code\":410}}\n"
        );
        let r = Registry::with_builtins();
        let pods = r.get(r.find("", "v1", "pods").unwrap());
        let b: serde_json::Value =
            serde_json::from_slice(&bookmark_object(&pods, 12746, true)).unwrap();
        assert_eq!(b["kind"], "Pod");
        assert_eq!(b["apiVersion"], "v1");
        assert_eq!(b["metadata"]["resourceVersion"], "12746");
        assert_eq!(
            b["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let plain: serde_json::Value =
            serde_json::from_slice(&bookmark_object(&pods, 5, false)).unwrap();
        assert!(plain["metadata"].get("annotations").is_none());
    }

    #[tokio::test]
    async fn cut_fault_truncates_mid_line_then_errors() {
        use futures::StreamExt;
        let store = Arc::new(Store::new(100));
        let faults = Faults::new(store.clone());
        let cms = store.rid("v1", "configmaps");
        let req = WatchRequest {
            resource: cms,
            namespace: None,
            labels: LabelSelector::everything(),
            fields: FieldSelector::default(),
            shard: None,
            start: WatchStart::After(store.current_rv()),
            initial_events_end: false,
            bookmarks: false,
            timeout: Duration::from_secs(60),
            table: false,
        };
        let w = Watch::open(store.clone(), faults.clone(), req, Duration::from_secs(60)).unwrap();
        assert_eq!(faults.open_watches(), 1);
        faults.cut_next_watch_event();
        store
            .create(
                cms,
                Some("default"),
                serde_json::json!({"metadata":{"name":"x"}}),
            )
            .unwrap();
        let mut s = Box::pin(w.into_stream());
        let first = s.next().await.unwrap().unwrap();
        assert!(!first.is_empty() && !first.ends_with(b"\n"), "half a line");
        assert!(serde_json::from_slice::<serde_json::Value>(&first).is_err());
        assert!(
            s.next().await.unwrap().is_err(),
            "then the connection is aborted"
        );
        assert!(s.next().await.is_none());
        drop(s);
        assert_eq!(faults.open_watches(), 0);
    }
}
