//! The Reflector: the only component that talks to the API server. It lists and
//! watches one resource and feeds the DeltaFIFO.
//!
//! Job: paged list (limit 500, resourceVersion "0" first and "" after the
//! server's history became unusable), or a streaming list (`sendInitialEvents`)
//! where the server supports it; then a watch from the last resourceVersion
//! with bookmarks and a random timeout in [300, 600] s; back off (800 ms → 30 s,
//! x2, jitter, reset after 2 min) on every other error, honouring `Retry-After`
//! on 429.
//!
//! When it relists. A relist (a list from resourceVersion "", a quorum read,
//! whose Replaced diff turns vanished objects into deletes flagged
//! final-state-unknown and objects whose resourceVersion changed, even
//! downwards, into updates) happens exactly when the server says the
//! resourceVersion we hold is not usable, as client-go's reflector decides
//! (`isExpiredError`, `isTooLargeResourceVersionError`, then
//! `relistResourceVersion` returning "" while the last one is unavailable):
//! - **410 Expired** (reason `Expired` or `Gone`): an ERROR event with code
//!   410 in a watch stream, or HTTP 410 on a list or a continued list. Our
//!   history is older than the server keeps.
//! - **Too large resource version**: HTTP 504 whose Status has the cause
//!   `ResourceVersionTooLarge` (or, from servers before 1.18.6, reason
//!   `Timeout` with the message "Too large resource version"), on a list, on a
//!   watch request, or as an ERROR event in a watch stream. The server is
//!   behind the version we hold: it was restored from a backup, or a load
//!   balancer moved us to a lagging replica.
//! - **Any other sign that the server's history went backwards**: a watch
//!   event or bookmark whose resourceVersion is lower than one this watch has
//!   already passed. Kubernetes resourceVersions are opaque strings, but every
//!   server in practice (etcd revisions, and apisim) issues increasing
//!   integers; the comparison is made only when both parse as integers.
//!
//! Any other failure (a dropped or cut stream, 5xx, 429, a timeout) resumes the
//! watch from the last resourceVersion after the backoff, with no relist: the
//! server still has our history, so no delta is lost or invented. This is
//! narrower than "relist on 410 only" by exactly the two cases above, where a
//! resumed watch could never catch up (a too-large version is refused forever)
//! or would miss every change the lost history held.
//!
//! Invariants:
//! - objects are read as raw JSON and become [`Object`]s through the configured
//!   [`Transform`]; no `serde_json::Value` tree is built per object;
//! - a relist happens only for the reasons above, always from resourceVersion
//!   "", and is counted by its reason (`relists_410`, `relists_too_large`,
//!   `relists_rv_regressed`);
//! - a bookmark advances the resourceVersion and produces no delta;
//! - `last_sync_resource_version` is only ever a version the server sent.
//!
//! Sharded at the source ([`ReflectorConfig::shard`], see [`crate::shard`]):
//! every list and watch carries the `shardSelector` of the ranges asked for,
//! and every object received is checked against them before the DeltaFIFO, so
//! the cache holds only the shard whether or not the server applied the
//! selector. Such a Reflector lists by pages, because only a list's
//! `ListMeta.shardInfo` says whether the server sharded. A change of the
//! ranges stops the watch, evicts the lost ranges' objects, lists the gained
//! ranges alone at the resourceVersion reached (`resourceVersionMatch=Exact`,
//! a consistent snapshot at the point the watch resumes from), and resumes
//! the watch with the new selector: nothing is relisted that was already
//! cached. A gained-range list the server cannot answer (410, or any error)
//! falls back to a full list of the shard. With no range at all, nothing is
//! requested and the cache is an empty, synced shard.

#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Body as _;
use kube::client::Body;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::backoff::{Backoff, BackoffConfig};
use crate::decode;
use crate::delta_fifo::DeltaFifo;
use crate::object::{Object, ObjectRef, Transform};
use crate::resource::ResourceSpec;
use crate::shard::{selector, ArcSet, Filtering, SourceShard};

/// Streaming lists that end early, in a row, before falling back to paging.
const MAX_INCOMPLETE_STREAMING_LISTS: u32 = 3;

/// Annotation on the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Whether to try a streaming list (watch with `sendInitialEvents=true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingList {
    /// Try it; if the server refuses it (400, 403, 422, 501), ignores it (a
    /// bookmark without `k8s.io/initial-events-end` during the initial events),
    /// or ends it early three times in a row, fall back to a paged list for the
    /// rest of this Reflector's life.
    Auto,
    /// Always use a paged list.
    Off,
}

/// Reflector settings. The defaults are the design's.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// `limit` of each list page.
    pub page_size: u32,
    /// Range of the random watch `timeoutSeconds`, inclusive.
    pub watch_timeout_secs: (u64, u64),
    /// Backoff for non-410 errors.
    pub backoff: BackoffConfig,
    /// Streaming list use.
    pub streaming_list: StreamingList,
    /// Applied to every object before it is cached.
    pub transform: Transform,
    /// A watch that sends nothing for `timeoutSeconds` plus this long is
    /// considered dead and restarted (with backoff). `None`: never.
    pub idle_grace: Option<Duration>,
    /// Longest `Retry-After` honoured; longer values are capped.
    pub max_retry_after: Duration,
    /// Seed for the jitter and the watch timeouts (`None`: from entropy).
    pub seed: Option<u64>,
    /// Shard at the source: list, watch and cache only the ranges this handle
    /// asks for. `None`: everything.
    pub shard: Option<Arc<SourceShard>>,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            watch_timeout_secs: (300, 600),
            backoff: BackoffConfig::default(),
            streaming_list: StreamingList::Auto,
            transform: Transform::default(),
            idle_grace: Some(Duration::from_secs(60)),
            max_retry_after: Duration::from_secs(300),
            seed: None,
            shard: None,
        }
    }
}

/// Why the Reflector waited before its next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WaitReason {
    /// Exponential backoff after an error.
    Backoff,
    /// A 429's `Retry-After`.
    RetryAfter,
}

/// Live counters of one Reflector.
#[derive(Debug, Default)]
pub struct ReflectorStats {
    /// Complete lists (paged or streaming) delivered to the FIFO.
    pub lists: AtomicU64,
    /// List pages fetched.
    pub list_pages: AtomicU64,
    /// Lists done by streaming.
    pub streaming_lists: AtomicU64,
    /// Times the streaming list was found unsupported.
    pub streaming_fallbacks: AtomicU64,
    /// Watch requests started.
    pub watches: AtomicU64,
    /// Watches restarted from the last resourceVersion (clean end or error).
    pub watch_restarts: AtomicU64,
    /// Relists caused by 410 Expired.
    pub relists_410: AtomicU64,
    /// Relists caused by a too-large resourceVersion (504
    /// `ResourceVersionTooLarge`): the server is behind the version we held.
    pub relists_too_large: AtomicU64,
    /// Relists caused by a watch event older than one already seen: the
    /// server's history went backwards.
    pub relists_rv_regressed: AtomicU64,
    /// Bookmarks received.
    pub bookmarks: AtomicU64,
    /// Watch events turned into deltas.
    pub events: AtomicU64,
    /// Errors (other than those that relist) that led to a backoff or
    /// Retry-After wait.
    pub errors: AtomicU64,
    /// Objects that could not be decoded and were skipped.
    pub decode_errors: AtomicU64,
    /// Response bytes received (list pages and watch streams).
    pub bytes_received: AtomicU64,
    last_sync_resource_version: Mutex<String>,
    last_error: Mutex<Option<String>>,
    waits: Mutex<VecDeque<(WaitReason, Duration)>>,
}

/// A copy of [`ReflectorStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReflectorStatsSnapshot {
    /// See [`ReflectorStats::lists`].
    pub lists: u64,
    /// See [`ReflectorStats::list_pages`].
    pub list_pages: u64,
    /// See [`ReflectorStats::streaming_lists`].
    pub streaming_lists: u64,
    /// See [`ReflectorStats::streaming_fallbacks`].
    pub streaming_fallbacks: u64,
    /// See [`ReflectorStats::watches`].
    pub watches: u64,
    /// See [`ReflectorStats::watch_restarts`].
    pub watch_restarts: u64,
    /// See [`ReflectorStats::relists_410`].
    pub relists_410: u64,
    /// See [`ReflectorStats::relists_too_large`].
    pub relists_too_large: u64,
    /// See [`ReflectorStats::relists_rv_regressed`].
    pub relists_rv_regressed: u64,
    /// See [`ReflectorStats::bookmarks`].
    pub bookmarks: u64,
    /// See [`ReflectorStats::events`].
    pub events: u64,
    /// See [`ReflectorStats::errors`].
    pub errors: u64,
    /// See [`ReflectorStats::decode_errors`].
    pub decode_errors: u64,
    /// See [`ReflectorStats::bytes_received`].
    pub bytes_received: u64,
    /// The last resourceVersion synced to.
    pub last_sync_resource_version: String,
    /// The most recent error, if any.
    pub last_error: Option<String>,
}

const MAX_WAITS_KEPT: usize = 64;

impl ReflectorStats {
    /// The last resourceVersion the Reflector synced to ("" before the first list).
    pub fn last_sync_resource_version(&self) -> String {
        self.last_sync_resource_version.lock().clone()
    }

    /// The most recent waits, oldest first (at most 64).
    pub fn recent_waits(&self) -> Vec<(WaitReason, Duration)> {
        self.waits.lock().iter().copied().collect()
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> ReflectorStatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReflectorStatsSnapshot {
            lists: r(&self.lists),
            list_pages: r(&self.list_pages),
            streaming_lists: r(&self.streaming_lists),
            streaming_fallbacks: r(&self.streaming_fallbacks),
            watches: r(&self.watches),
            watch_restarts: r(&self.watch_restarts),
            relists_410: r(&self.relists_410),
            relists_too_large: r(&self.relists_too_large),
            relists_rv_regressed: r(&self.relists_rv_regressed),
            bookmarks: r(&self.bookmarks),
            events: r(&self.events),
            errors: r(&self.errors),
            decode_errors: r(&self.decode_errors),
            bytes_received: r(&self.bytes_received),
            last_sync_resource_version: self.last_sync_resource_version(),
            last_error: self.last_error.lock().clone(),
        }
    }

    fn set_rv(&self, rv: &str) {
        let mut g = self.last_sync_resource_version.lock();
        if *g != rv {
            *g = rv.to_string();
        }
    }

    fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// How a request or stream failed.
#[derive(Debug)]
enum Failure {
    /// 410 Expired: relist.
    Gone(String),
    /// 504 Too large resource version: relist.
    TooLarge(String),
    /// A resourceVersion older than one already seen: relist.
    Regressed(String),
    /// 429 with a usable Retry-After.
    RetryAfter(Duration, String),
    /// The server refused the streaming-list parameters.
    StreamingUnsupported(String),
    /// The shard's ranges changed during a full list: list the new ones
    /// instead, at once.
    Resharded,
    /// Another HTTP error status: back off and retry.
    Status(u16, String),
    /// Anything else: back off and retry.
    Other(String),
}

/// How a watch stream ended.
#[derive(Debug)]
enum StreamEnd {
    /// The server closed it cleanly (timeout or dropped watch): re-watch now.
    Closed,
    /// A failure.
    Failed(Failure),
    /// The shard's target ranges changed.
    Reshard,
}

/// A decoded list page: its metadata, and each item's text undecoded.
struct ListPage<'a> {
    metadata: ListMeta,
    items: Vec<&'a str>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    cont: Option<String>,
    /// KEP-5866: present exactly when the server applied a `shardSelector`.
    #[serde(rename = "shardInfo", default)]
    shard_info: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
struct BookmarkMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
struct StatusObject {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    details: Option<StatusDetails>,
}

#[derive(Deserialize, Default)]
struct StatusDetails {
    #[serde(default)]
    causes: Vec<StatusCause>,
}

#[derive(Deserialize, Default)]
struct StatusCause {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The message of a too-large resourceVersion, as servers before 1.17 and
/// 1.17.0-1.18.5 (which set no cause) write it.
const TOO_LARGE_MESSAGE: &str = "Too large resource version";

impl StatusObject {
    /// 410 Expired (or Gone, as servers before 1.18 also say).
    fn is_expired(&self, http: Option<u16>) -> bool {
        self.code.or(http) == Some(410)
            || matches!(self.reason.as_deref(), Some("Expired" | "Gone"))
    }

    /// A too-large resourceVersion, as client-go's
    /// `isTooLargeResourceVersionError` tells it: the
    /// `ResourceVersionTooLarge` cause; or, from older servers, a Timeout
    /// whose cause or message says "Too large resource version".
    fn is_too_large(&self, http: Option<u16>) -> bool {
        let causes = self
            .details
            .as_ref()
            .map(|d| d.causes.as_slice())
            .unwrap_or(&[]);
        if causes
            .iter()
            .any(|c| c.reason.as_deref() == Some("ResourceVersionTooLarge"))
        {
            return true;
        }
        let timeout = self.code.or(http) == Some(504) || self.reason.as_deref() == Some("Timeout");
        timeout
            && (causes
                .iter()
                .any(|c| c.message.as_deref() == Some(TOO_LARGE_MESSAGE))
                || self
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(TOO_LARGE_MESSAGE)))
    }

    fn describe(&self) -> String {
        format!(
            "{} {}: {}",
            self.code.unwrap_or(0),
            self.reason.as_deref().unwrap_or(""),
            self.message.as_deref().unwrap_or("")
        )
    }
}

/// Progress of a streaming list inside its watch stream.
struct Initial {
    items: HashMap<String, ObjectRef>,
}

/// Lists and watches one resource into a [`DeltaFifo`].
pub struct Reflector {
    client: kube::Client,
    spec: ResourceSpec,
    config: ReflectorConfig,
    fifo: Arc<DeltaFifo>,
    stats: Arc<ReflectorStats>,
    backoff: Backoff,
    rng: StdRng,
    /// The shard handle, and the ranges the cache and the requests cover.
    shard: Option<Shard>,
}

/// A sharded Reflector's view of its [`SourceShard`].
struct Shard {
    handle: Arc<SourceShard>,
    target: tokio::sync::watch::Receiver<ArcSet>,
    /// The ranges requested and cached.
    current: ArcSet,
    /// A first (empty) list has been handed to the FIFO.
    announced: bool,
}

impl Shard {
    /// Whether `obj` is in `arcs`; counts it when not.
    fn admits(&self, arcs: &ArcSet, obj: &Object) -> bool {
        let ok = arcs.contains(self.handle.field().point(obj));
        if !ok {
            // Only a server that ignored the selector sends such an object.
            self.handle.count_filtered();
            self.handle.set_filtering(Filtering::Client);
        }
        ok
    }
}

impl Reflector {
    /// A Reflector for `spec` writing into `fifo`.
    ///
    /// The client should be built with `default_retry = false` (see
    /// [`client_from_kubeconfig_yaml`]): retries and backoff are the
    /// Reflector's job, and kube's retry layer would hide 429s from it.
    pub fn new(
        client: kube::Client,
        spec: ResourceSpec,
        fifo: Arc<DeltaFifo>,
        config: ReflectorConfig,
    ) -> Self {
        let (backoff, rng) = match config.seed {
            Some(s) => (
                Backoff::with_seed(config.backoff.clone(), s),
                StdRng::seed_from_u64(s.wrapping_add(1)),
            ),
            None => (Backoff::new(config.backoff.clone()), StdRng::from_os_rng()),
        };
        let shard = config.shard.clone().map(|handle| Shard {
            target: handle.subscribe_target(),
            handle,
            current: ArcSet::empty(),
            announced: false,
        });
        Self {
            client,
            spec,
            config,
            fifo,
            stats: Arc::new(ReflectorStats::default()),
            backoff,
            rng,
            shard,
        }
    }

    /// The counters, shared.
    pub fn stats(&self) -> Arc<ReflectorStats> {
        self.stats.clone()
    }

    /// Runs list-and-watch until the task is dropped.
    pub async fn run(mut self) {
        let mut list_rv = "0".to_string();
        let mut need_list = true;
        let mut rv = String::new();
        let mut streaming =
            self.config.streaming_list == StreamingList::Auto && self.shard.is_none();
        let mut incomplete = 0u32;
        loop {
            if let Some(sh) = self.shard.as_mut() {
                if sh.target.has_changed().unwrap_or(false) || sh.current != *sh.target.borrow() {
                    self.reshard(&mut need_list, &mut list_rv, &rv).await;
                    continue;
                }
                if sh.current.is_empty() {
                    // Nothing to ask for: an empty, synced shard until the
                    // host gives this replica a range.
                    if !sh.announced {
                        sh.announced = true;
                        self.fifo.replace(Vec::new());
                    }
                    if sh.target.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
            }
            if need_list && streaming {
                let mut initial = Some(Initial {
                    items: HashMap::new(),
                });
                let end = self.streaming_list(&list_rv, &mut rv, &mut initial).await;
                if initial.is_none() {
                    need_list = false;
                    incomplete = 0;
                }
                match end {
                    StreamEnd::Closed if initial.is_some() => {
                        // Ended before the initial events did: a dropped
                        // stream, or a server that ignores sendInitialEvents.
                        // Retry; give up on streaming after a few in a row.
                        incomplete += 1;
                        if incomplete >= MAX_INCOMPLETE_STREAMING_LISTS {
                            self.fallback(
                                "streams keep ending before the initial-events-end bookmark",
                            );
                            streaming = false;
                        } else {
                            let f = Failure::Other(format!(
                                "streaming list of {} ended before the initial-events-end bookmark",
                                self.spec.id
                            ));
                            self.after_failure(f, &mut need_list, &mut list_rv).await;
                        }
                    }
                    StreamEnd::Failed(Failure::StreamingUnsupported(why)) => {
                        self.fallback(&why);
                        streaming = false;
                    }
                    end => self.after_stream(end, &mut need_list, &mut list_rv).await,
                }
                continue;
            }
            if need_list {
                match self.paged_list(&list_rv).await {
                    Ok(new_rv) => {
                        rv = new_rv;
                        need_list = false;
                        self.covered_now().await;
                    }
                    // Handled at the top of the loop, with no backoff.
                    Err(Failure::Resharded) => continue,
                    Err(f) => {
                        self.after_failure(f, &mut need_list, &mut list_rv).await;
                        continue;
                    }
                }
            }
            let end = self.watch(&mut rv).await;
            self.after_stream(end, &mut need_list, &mut list_rv).await;
        }
    }

    fn fallback(&self, why: &str) {
        tracing::info!(resource = %self.spec.id, reason = why, "streaming list unsupported; using paged lists");
        ReflectorStats::inc(&self.stats.streaming_fallbacks);
    }

    async fn after_stream(&mut self, end: StreamEnd, need_list: &mut bool, list_rv: &mut String) {
        match end {
            StreamEnd::Closed => {
                if !*need_list {
                    ReflectorStats::inc(&self.stats.watch_restarts);
                }
            }
            // Handled at the top of the loop.
            StreamEnd::Reshard => {}
            StreamEnd::Failed(f) => self.after_failure(f, need_list, list_rv).await,
        }
    }

    /// Once the FIFO has applied what was queued, reports the shard's
    /// current ranges as covered by the cache.
    async fn covered_now(&mut self) {
        if let Some(sh) = &mut self.shard {
            sh.announced = true;
            self.fifo.barrier().await;
            sh.handle.set_covered(sh.current.clone());
        }
    }

    /// Follows a new target: evicts the lost ranges, lists the gained ones
    /// at `rv` (or leaves them to the next full list), and lets the loop
    /// resume the watch with the new selector.
    async fn reshard(&mut self, need_list: &mut bool, list_rv: &mut String, rv: &str) {
        let Some(sh) = self.shard.as_mut() else {
            return;
        };
        let next = sh.target.borrow_and_update().clone();
        let lost = sh.current.subtract(&next);
        let gained = next.subtract(&sh.current);
        sh.handle.set_covered(sh.handle.covered().intersect(&next));
        if !lost.is_empty() {
            let field = sh.handle.field();
            let n = self.fifo.evict(|o| lost.contains(field.point(o)));
            sh.handle.count_evicted(n);
            tracing::info!(resource = %self.spec.id, evicted = n, share = next.fraction(), "shard ranges lost: their objects leave the cache");
        }
        sh.current = next;
        if sh.handle.filtering() == Filtering::Unknown && sh.announced {
            self.probe_filtering().await;
        }
        let Some(sh) = self.shard.as_mut() else {
            return;
        };
        if gained.is_empty() {
            return;
        }
        if *need_list || rv.is_empty() || !sh.announced {
            // The next list is of the whole new shard.
            *need_list = true;
            return;
        }
        match self.range_list(&gained, rv).await {
            Ok(n) => {
                tracing::info!(resource = %self.spec.id, listed = n, share = gained.fraction(), "shard ranges gained: listed at resourceVersion {rv}");
                self.covered_now().await;
            }
            Err(f) => {
                tracing::info!(resource = %self.spec.id, error = ?f, "listing gained shard ranges failed: listing the whole shard");
                let relist = matches!(f, Failure::Gone(_) | Failure::TooLarge(_));
                if !relist {
                    self.after_failure(f, need_list, list_rv).await;
                }
                *need_list = true;
                *list_rv = String::new();
            }
        }
    }

    /// Learns whether the server applies the selector, when no list has
    /// told yet (the first list covered the whole space, which needs none):
    /// one list of at most one object, whose `shardInfo` says. A failure
    /// leaves it unknown until the next list.
    async fn probe_filtering(&mut self) {
        let Some(sel) = self.shard_selector() else {
            return;
        };
        let Ok(body) = self
            .list_page(&[("limit", "1"), ("shardSelector", &sel)])
            .await
        else {
            return;
        };
        let _ = self.parse_page(&body, true);
    }

    /// One list page's body, counted.
    async fn list_page(&self, q: &[(&str, &str)]) -> Result<Vec<u8>, Failure> {
        let resp = self.send(q).await?;
        let body = read_all(resp.into_body(), usize::MAX)
            .await
            .map_err(|e| Failure::Other(format!("reading list of {}: {e}", self.spec.id)))?;
        ReflectorStats::inc(&self.stats.list_pages);
        self.stats
            .bytes_received
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(body)
    }

    /// Decodes a list page; when it was asked with a `shardSelector`, notes
    /// whether the server applied it.
    fn parse_page<'b>(&self, body: &'b [u8], selected: bool) -> Result<ListPage<'b>, Failure> {
        let fail = |e: String| Failure::Other(format!("decoding list of {}: {e}", self.spec.id));
        let raw = decode::list_page(body).map_err(fail)?;
        let metadata = match raw.metadata {
            Some(m) => sonic_rs::from_str(m).map_err(|e| fail(e.to_string()))?,
            None => ListMeta::default(),
        };
        let page = ListPage {
            metadata,
            items: raw.items,
        };
        if selected {
            self.note_shard_info(&page.metadata);
        }
        Ok(page)
    }

    /// Whether the server applied the selector a list carried: it says so
    /// by echoing it in `shardInfo`.
    fn note_shard_info(&self, meta: &ListMeta) {
        if let Some(sh) = &self.shard {
            sh.handle.set_filtering(if meta.shard_info.is_some() {
                Filtering::Server
            } else {
                Filtering::Client
            });
        }
    }

    /// Lists the objects of `gained` as of `rv` (an exact snapshot) and
    /// queues them as adds. Returns how many were queued.
    async fn range_list(&mut self, gained: &ArcSet, rv: &str) -> Result<usize, Failure> {
        let Some(sh) = self.shard.as_ref() else {
            return Ok(0);
        };
        let sel = selector(sh.handle.field(), gained);
        let limit = self.config.page_size.to_string();
        let mut cont = String::new();
        let mut n = 0;
        loop {
            let mut q: Vec<(&str, &str)> = vec![("limit", &limit)];
            if let Some(sel) = &sel {
                q.push(("shardSelector", sel));
            }
            if cont.is_empty() {
                q.push(("resourceVersion", rv));
                q.push(("resourceVersionMatch", "Exact"));
            } else {
                q.push(("continue", &cont));
            }
            let body = self.list_page(&q).await?;
            let page = self.parse_page(&body, sel.is_some())?;
            let sh = self.shard.as_ref().expect("sharded");
            for item in page.items {
                match Object::from_checked_json(item, &self.config.transform) {
                    Ok(o) if sh.admits(gained, &o) => {
                        n += 1;
                        self.fifo.add(Arc::new(o));
                    }
                    Ok(_) => {}
                    Err(e) => self.decode_error(&e.to_string()),
                }
            }
            let next = page.metadata.cont.unwrap_or_default();
            if next.is_empty() {
                break;
            }
            cont = next;
        }
        if let Some(sh) = &self.shard {
            sh.handle.count_range_list(n);
        }
        Ok(n)
    }

    /// The `shardSelector` of the ranges requested, when sharded and not
    /// the whole space.
    fn shard_selector(&self) -> Option<String> {
        let sh = self.shard.as_ref()?;
        selector(sh.handle.field(), &sh.current)
    }

    /// Whether `obj` belongs in the cache (always, unless sharded).
    fn admits(&self, obj: &Object) -> bool {
        self.shard
            .as_ref()
            .is_none_or(|sh| sh.admits(&sh.current, obj))
    }

    async fn after_failure(&mut self, f: Failure, need_list: &mut bool, list_rv: &mut String) {
        let now = Instant::now();
        let was_watching = !*need_list;
        let relist = match &f {
            Failure::Gone(msg) => Some((&self.stats.relists_410, "410 Expired", msg)),
            Failure::TooLarge(msg) => Some((
                &self.stats.relists_too_large,
                "the server is behind our resourceVersion",
                msg,
            )),
            Failure::Regressed(msg) => Some((
                &self.stats.relists_rv_regressed,
                "the server's history went backwards",
                msg,
            )),
            _ => None,
        };
        if let Some((counter, why, msg)) = relist {
            tracing::info!(resource = %self.spec.id, %msg, "{why}: relisting from resourceVersion \"\"");
            ReflectorStats::inc(counter);
            *need_list = true;
            *list_rv = String::new();
            return;
        }
        let (reason, wait, msg) = match f {
            Failure::RetryAfter(d, msg) => {
                self.backoff.next_delay(now);
                (
                    WaitReason::RetryAfter,
                    d.min(self.config.max_retry_after),
                    msg,
                )
            }
            Failure::StreamingUnsupported(msg) | Failure::Status(_, msg) | Failure::Other(msg) => {
                (WaitReason::Backoff, self.backoff.next_delay(now), msg)
            }
            Failure::Resharded => (
                WaitReason::Backoff,
                Duration::ZERO,
                "shard ranges changed".into(),
            ),
            Failure::Gone(_) | Failure::TooLarge(_) | Failure::Regressed(_) => {
                unreachable!("handled above")
            }
        };
        tracing::warn!(resource = %self.spec.id, error = %msg, wait_ms = wait.as_millis() as u64, "list/watch failed; retrying");
        ReflectorStats::inc(&self.stats.errors);
        if was_watching {
            ReflectorStats::inc(&self.stats.watch_restarts);
        }
        *self.stats.last_error.lock() = Some(msg);
        {
            let mut w = self.stats.waits.lock();
            if w.len() == MAX_WAITS_KEPT {
                w.pop_front();
            }
            w.push_back((reason, wait));
        }
        tokio::time::sleep(wait).await;
    }

    /// Sends a GET and sorts the response: 2xx is returned, everything else
    /// becomes a [`Failure`].
    async fn send(&self, query: &[(&str, &str)]) -> Result<http::Response<Body>, Failure> {
        let req = self.spec.get_request(query).map(Body::from);
        let what = format!("GET {}", req.uri());
        let resp = self
            .client
            .send(req)
            .await
            .map_err(|e| Failure::Other(format!("{what}: {e}")))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let retry_after = resp
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = read_all(resp.into_body(), 64 * 1024)
            .await
            .unwrap_or_default();
        let st: StatusObject = serde_json::from_slice(&body).unwrap_or_default();
        let code = status.as_u16();
        let msg = format!("{what}: HTTP {code}: {}", st.describe());
        if code == 410 {
            return Err(Failure::Gone(msg));
        }
        if st.is_too_large(Some(code)) {
            return Err(Failure::TooLarge(msg));
        }
        Err(match code {
            429 => match retry_after {
                Some(s) => Failure::RetryAfter(Duration::from_secs(s), msg),
                None => Failure::Status(429, msg),
            },
            code => Failure::Status(code, msg),
        })
    }

    /// One complete paged list; on success the FIFO has been replaced and the
    /// list's resourceVersion is returned.
    async fn paged_list(&mut self, list_rv: &str) -> Result<String, Failure> {
        let limit = self.config.page_size.to_string();
        let sel = self.shard_selector();
        let mut cont = String::new();
        let mut objects: Vec<ObjectRef> = Vec::new();
        let rv = loop {
            let mut q: Vec<(&str, &str)> = vec![("limit", &limit)];
            if let Some(sel) = &sel {
                q.push(("shardSelector", sel));
            }
            if cont.is_empty() {
                if !list_rv.is_empty() {
                    q.push(("resourceVersion", list_rv));
                }
            } else {
                q.push(("continue", &cont));
            }
            let body = self.list_page(&q).await?;
            let page = self.parse_page(&body, sel.is_some())?;
            for item in page.items {
                match Object::from_checked_json(item, &self.config.transform) {
                    Ok(o) if self.admits(&o) => objects.push(Arc::new(o)),
                    Ok(_) => {}
                    Err(e) => self.decode_error(&e.to_string()),
                }
            }
            let next = page.metadata.cont.unwrap_or_default();
            if next.is_empty() {
                break page.metadata.resource_version.unwrap_or_default();
            }
            // Replicas starting together each own everything until they
            // see each other: stop a whole-resource list as soon as the
            // ranges shrink, rather than listing what will be evicted.
            if self
                .shard
                .as_ref()
                .is_some_and(|sh| sh.target.has_changed().unwrap_or(false))
            {
                return Err(Failure::Resharded);
            }
            cont = next;
        };
        if rv.is_empty() {
            return Err(Failure::Other(format!(
                "list of {} returned no resourceVersion",
                self.spec.id
            )));
        }
        // Counters first: a reader that sees the informer synced sees them too.
        self.stats.set_rv(&rv);
        ReflectorStats::inc(&self.stats.lists);
        self.fifo.replace(objects);
        Ok(rv)
    }

    fn decode_error(&self, e: &str) {
        ReflectorStats::inc(&self.stats.decode_errors);
        tracing::warn!(resource = %self.spec.id, error = e, "skipping undecodable object");
    }

    fn watch_timeout(&mut self) -> u64 {
        let (lo, hi) = self.config.watch_timeout_secs;
        self.rng.random_range(lo.min(hi)..=hi.max(lo))
    }

    /// A streaming list: a watch with `sendInitialEvents=true` whose initial
    /// events end at a bookmark; then the same stream continues as a watch.
    /// `initial` becomes `None` once the list has been delivered.
    async fn streaming_list(
        &mut self,
        list_rv: &str,
        rv: &mut String,
        initial: &mut Option<Initial>,
    ) -> StreamEnd {
        let timeout = self.watch_timeout();
        let ts = timeout.to_string();
        let mut q: Vec<(&str, &str)> = vec![
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", &ts),
        ];
        if !list_rv.is_empty() {
            q.push(("resourceVersion", list_rv));
        }
        ReflectorStats::inc(&self.stats.watches);
        let resp = match self.send(&q).await {
            Ok(r) => r,
            Err(Failure::Status(400 | 403 | 422 | 501, msg)) => {
                return StreamEnd::Failed(Failure::StreamingUnsupported(msg))
            }
            Err(f) => return StreamEnd::Failed(f),
        };
        self.consume(resp.into_body(), timeout, rv, initial).await
    }

    /// A watch from `rv`.
    async fn watch(&mut self, rv: &mut String) -> StreamEnd {
        let timeout = self.watch_timeout();
        let ts = timeout.to_string();
        let sel = self.shard_selector();
        let mut q: Vec<(&str, &str)> = vec![
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", &ts),
            ("resourceVersion", rv.as_str()),
        ];
        if let Some(sel) = &sel {
            q.push(("shardSelector", sel));
        }
        ReflectorStats::inc(&self.stats.watches);
        let resp = match self.send(&q).await {
            Ok(r) => r,
            Err(f) => return StreamEnd::Failed(f),
        };
        self.consume(resp.into_body(), timeout, rv, &mut None).await
    }

    /// Reads watch lines until the stream ends.
    async fn consume(
        &mut self,
        mut body: Body,
        timeout_secs: u64,
        rv: &mut String,
        initial: &mut Option<Initial>,
    ) -> StreamEnd {
        let idle = self
            .config
            .idle_grace
            .map(|g| Duration::from_secs(timeout_secs) + g);
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
            // A change of the shard's ranges ends the stream at once.
            let reshard = async {
                match self.shard.as_mut() {
                    Some(sh) => {
                        let _ = sh.target.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let frame = async {
                tokio::select! {
                    biased;
                    _ = reshard => None,
                    f = frame => Some(f),
                }
            };
            let frame = match idle {
                Some(d) => match tokio::time::timeout(d, frame).await {
                    Ok(f) => f,
                    Err(_) => {
                        return StreamEnd::Failed(Failure::Other(format!(
                            "watch of {} silent for {} s",
                            self.spec.id,
                            d.as_secs()
                        )))
                    }
                },
                None => frame.await,
            };
            let Some(frame) = frame else {
                return StreamEnd::Reshard;
            };
            let data: Bytes = match frame {
                None => {
                    return if buf.iter().all(u8::is_ascii_whitespace) {
                        StreamEnd::Closed
                    } else {
                        StreamEnd::Failed(Failure::Other(format!(
                            "watch of {} ended inside an event ({} bytes)",
                            self.spec.id,
                            buf.len()
                        )))
                    };
                }
                Some(Err(e)) => {
                    return StreamEnd::Failed(Failure::Other(format!(
                        "watch of {} broke: {e}",
                        self.spec.id
                    )))
                }
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            self.stats
                .bytes_received
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            // Only the new bytes are searched for line ends: a line that
            // spans many frames is not rescanned from its start.
            let searched = buf.len();
            buf.extend_from_slice(&data);
            let mut start = 0;
            let mut from = searched;
            while let Some(pos) = memchr::memchr(b'\n', &buf[from..]) {
                let line = &buf[start..from + pos];
                start = from + pos + 1;
                from = start;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if let Err(end) = self.event(line, rv, initial) {
                    return end;
                }
            }
            buf.drain(..start);
        }
    }

    /// Ends the stream with [`Failure::Regressed`] when a watch event carries
    /// a resourceVersion lower than `current`, the one this watch has already
    /// passed (both must parse as integers; see the module documentation).
    fn check_not_regressed(&self, current: &str, new: &str, what: &str) -> Result<(), StreamEnd> {
        match (current.parse::<u64>(), new.parse::<u64>()) {
            (Ok(c), Ok(n)) if n < c => Err(StreamEnd::Failed(Failure::Regressed(format!(
                "watch of {}: {what} at resourceVersion {n}, older than {c} already seen",
                self.spec.id
            )))),
            _ => Ok(()),
        }
    }

    /// Applies one watch line. `Err` ends the stream.
    fn event(
        &mut self,
        line: &[u8],
        rv: &mut String,
        initial: &mut Option<Initial>,
    ) -> Result<(), StreamEnd> {
        let ev = decode::watch_line(line).map_err(|e| {
            StreamEnd::Failed(Failure::Other(format!(
                "undecodable watch event for {}: {e}",
                self.spec.id
            )))
        })?;
        match &*ev.kind {
            "ADDED" | "MODIFIED" | "DELETED" => {
                let obj = match Object::from_checked_json(ev.object, &self.config.transform) {
                    Ok(o) => Arc::new(o),
                    Err(e) => {
                        self.decode_error(&e.to_string());
                        return Ok(());
                    }
                };
                let new_rv = obj.meta.resource_version.clone();
                if initial.is_none() {
                    self.check_not_regressed(rv, &new_rv, &ev.kind)?;
                }
                if !self.admits(&obj) {
                    // Not this replica's shard (a server that ignores the
                    // selector): the version still advances.
                    if !new_rv.is_empty() {
                        *rv = new_rv;
                    }
                    return Ok(());
                }
                ReflectorStats::inc(&self.stats.events);
                if let Some(init) = initial.as_mut() {
                    if ev.kind == "DELETED" {
                        init.items.remove(&obj.key());
                    } else {
                        init.items.insert(obj.key(), obj);
                    }
                } else {
                    match &*ev.kind {
                        "ADDED" => self.fifo.add(obj),
                        "MODIFIED" => self.fifo.update(obj),
                        _ => self.fifo.delete(obj),
                    }
                }
                if !new_rv.is_empty() {
                    *rv = new_rv;
                    if initial.is_none() {
                        self.stats.set_rv(rv);
                    }
                }
                Ok(())
            }
            "BOOKMARK" => {
                let b: BookmarkObject = serde_json::from_str(ev.object).unwrap_or_default();
                ReflectorStats::inc(&self.stats.bookmarks);
                if initial.is_none() {
                    if let Some(new_rv) = b.metadata.resource_version.as_deref() {
                        self.check_not_regressed(rv, new_rv, "BOOKMARK")?;
                    }
                }
                if let Some(new_rv) = b.metadata.resource_version.filter(|r| !r.is_empty()) {
                    *rv = new_rv;
                }
                let end = b
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(INITIAL_EVENTS_END))
                    .is_some_and(|v| v == "true");
                if !end && initial.is_some() {
                    // A server that supports streaming lists sends the
                    // initial-events-end bookmark before any other bookmark.
                    return Err(StreamEnd::Failed(Failure::StreamingUnsupported(format!(
                        "watch of {} sent a bookmark without {INITIAL_EVENTS_END} during the initial events",
                        self.spec.id
                    ))));
                }
                if end {
                    if let Some(init) = initial.take() {
                        ReflectorStats::inc(&self.stats.lists);
                        ReflectorStats::inc(&self.stats.streaming_lists);
                        self.stats.set_rv(rv);
                        self.fifo.replace(init.items.into_values().collect());
                    }
                }
                if initial.is_none() {
                    self.stats.set_rv(rv);
                }
                Ok(())
            }
            "ERROR" => {
                let st: StatusObject = serde_json::from_str(ev.object).unwrap_or_default();
                let msg = format!("watch of {}: ERROR event {}", self.spec.id, st.describe());
                Err(StreamEnd::Failed(if st.is_expired(None) {
                    Failure::Gone(msg)
                } else if st.is_too_large(None) {
                    Failure::TooLarge(msg)
                } else {
                    Failure::Other(msg)
                }))
            }
            other => Err(StreamEnd::Failed(Failure::Other(format!(
                "unknown watch event type {other:?} for {}",
                self.spec.id
            )))),
        }
    }
}

/// Reads a whole response body, up to `max` bytes.
pub async fn read_all(mut body: Body, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(d) = frame.into_data() {
            if out.len() + d.len() > max {
                return Err(format!("body larger than {max} bytes"));
            }
            out.extend_from_slice(&d);
        }
    }
    Ok(out)
}

/// Builds a client from kubeconfig YAML, with kube's own retry layer off (the
/// Reflector handles retries, backoff and Retry-After itself).
pub async fn client_from_kubeconfig_yaml(yaml: &str) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)
        .map_err(|e| format!("invalid kubeconfig: {e}"))?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("unusable kubeconfig: {e}"))?;
    cfg.default_retry = false;
    kube::Client::try_from(cfg).map_err(|e| format!("cannot build client: {e}"))
}

/// Builds a client from the environment (kubeconfig or in-cluster), with kube's
/// retry layer off.
pub async fn client_infer() -> Result<kube::Client, String> {
    let mut cfg = kube::Config::infer()
        .await
        .map_err(|e| format!("no usable kube config: {e}"))?;
    cfg.default_retry = false;
    kube::Client::try_from(cfg).map_err(|e| format!("cannot build client: {e}"))
}
