//! Fault injection: the Rust API behind the `/_sim/faults/...` admin endpoints.
//!
//! Invariant: each fault acts exactly as many times as requested and then disarms itself, and
//! every time a fault acts it is counted in [`FaultStats`] before the client can observe its
//! effect; faults never affect `/_sim/` admin requests, so a test can always observe and reset the
//! simulator.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::status::ApiError;
use crate::store::Store;

/// How an injected request failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// HTTP 500 InternalError.
    Internal,
    /// HTTP 429 TooManyRequests with `Retry-After: secs`.
    TooManyRequests {
        /// Value of the Retry-After header, in seconds.
        retry_after_secs: u64,
    },
    /// Any other HTTP status, with the reason the apiserver uses for it (400 BadRequest,
    /// 401 Unauthorized, 403 Forbidden, 404 NotFound, 409 Conflict, 422 Invalid,
    /// 503 ServiceUnavailable, 504 Timeout; others: InternalError).
    Code(u16),
}

impl FailMode {
    /// The HTTP status code this failure answers with.
    pub fn code(self) -> u16 {
        match self {
            FailMode::Internal => 500,
            FailMode::TooManyRequests { .. } => 429,
            FailMode::Code(c) => c,
        }
    }

    /// The Status error this failure answers with.
    pub fn error(self) -> ApiError {
        match self {
            FailMode::Internal => ApiError::internal("injected fault: internal error"),
            FailMode::TooManyRequests { retry_after_secs } => {
                ApiError::too_many_requests(retry_after_secs)
            }
            FailMode::Code(code) => ApiError::injected(code),
        }
    }
}

/// Which requests a targeted failure applies to: every set condition must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// HTTP method (case-insensitive), e.g. `PATCH`; None matches any.
    pub method: Option<String>,
    /// A substring the URL path must contain, e.g. `/pods`; None matches any.
    pub path_contains: Option<String>,
}

impl RequestMatch {
    /// Matches every request.
    pub fn any() -> Self {
        RequestMatch::default()
    }

    /// Matches requests with this method.
    pub fn method(method: &str) -> Self {
        RequestMatch {
            method: Some(method.to_string()),
            path_contains: None,
        }
    }

    /// Also requires the path to contain `fragment`.
    pub fn path(mut self, fragment: &str) -> Self {
        self.path_contains = Some(fragment.to_string());
        self
    }

    /// Whether a request matches.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| path.contains(p))
    }
}

/// How often each fault fired, so that a test can wait on it instead of sleeping.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultStats {
    /// Calls of [`Faults::drop_watches`].
    pub drop_calls: u64,
    /// Watch connections closed by [`Faults::drop_watches`].
    pub watches_dropped: u64,
    /// Watch events cut mid-line by [`Faults::cut_next_watch_event`].
    pub cuts_fired: u64,
    /// API responses held back by [`Faults::set_delay`].
    pub delayed_responses: u64,
    /// Injected failures served, by HTTP status code.
    pub failures: BTreeMap<u16, u64>,
    /// Continued lists answered 410 Expired (expired tokens, `expire_next_continue`, or
    /// tokens older than a compaction).
    pub continue_expiries: u64,
    /// Calls of [`Faults::compact`].
    pub compactions: u64,
    /// Watch streams open now (counted once subscribed to the drop signal).
    pub open_watches: usize,
}

impl FaultStats {
    /// Injected failures served with `code`.
    pub fn failures_with(&self, code: u16) -> u64 {
        self.failures.get(&code).copied().unwrap_or(0)
    }

    /// Injected failures served, all codes.
    pub fn failures_total(&self) -> u64 {
        self.failures.values().sum()
    }
}

/// A wait that ran out of time; the message says what was awaited and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what}")]
pub struct WaitTimeout {
    /// What was awaited, and the last state seen.
    pub what: String,
    /// How long the wait lasted.
    pub timeout: Duration,
}

#[derive(Debug)]
struct FailRule {
    remaining: usize,
    mode: FailMode,
    matcher: RequestMatch,
}

#[derive(Debug)]
struct State {
    store: Arc<Store>,
    drop_generation: tokio::sync::watch::Sender<u64>,
    fail_next: Mutex<Vec<FailRule>>,
    cut_next_watch_events: AtomicUsize,
    expire_next_continue: AtomicUsize,
    delay: Mutex<Option<Duration>>,
    open_watches: AtomicUsize,
    stats: Mutex<FaultStats>,
    /// Bumped on every change of `stats` or `open_watches`, to wake waiters.
    changed: tokio::sync::watch::Sender<u64>,
}

/// Handle to the simulator's fault switches. Cloning shares the same switches.
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<State>,
}

impl Faults {
    /// Fault switches acting on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let (drop_generation, _) = tokio::sync::watch::channel(0);
        let (changed, _) = tokio::sync::watch::channel(0);
        Faults {
            state: Arc::new(State {
                store,
                drop_generation,
                fail_next: Mutex::new(Vec::new()),
                cut_next_watch_events: AtomicUsize::new(0),
                expire_next_continue: AtomicUsize::new(0),
                delay: Mutex::new(None),
                open_watches: AtomicUsize::new(0),
                stats: Mutex::new(FaultStats::default()),
                changed,
            }),
        }
    }

    fn count(&self, f: impl FnOnce(&mut FaultStats)) {
        f(&mut self.state.stats.lock());
        self.state.changed.send_modify(|g| *g += 1);
    }

    /// Closes every open watch stream (clients see the stream end and must re-watch). Returns
    /// the number of watches open at that moment; each of them is counted in
    /// [`FaultStats::watches_dropped`] when its connection closes.
    pub fn drop_watches(&self) -> usize {
        let n = self.open_watches();
        self.state.drop_generation.send_modify(|g| *g += 1);
        self.count(|s| s.drop_calls += 1);
        n
    }

    /// Compacts history: every resourceVersion older than the current one now gets 410
    /// (watches get an ERROR event, lists at an exact version and continue tokens get HTTP 410).
    pub fn compact(&self) {
        self.state.store.compact();
        self.count(|s| s.compactions += 1);
    }

    /// Fails the next `n` API requests with `mode`.
    pub fn fail_next(&self, n: usize, mode: FailMode) {
        self.fail_matching(n, mode, RequestMatch::any());
    }

    /// Fails the next `n` API requests that match `matcher` with `mode`; other requests pass.
    /// For example `fail_matching(3, FailMode::Code(409), RequestMatch::method("PATCH").path("/pods/"))`
    /// fails a plugin's pod patches and leaves the informer's list and watch alone.
    pub fn fail_matching(&self, n: usize, mode: FailMode, matcher: RequestMatch) {
        if n == 0 {
            return;
        }
        self.state.fail_next.lock().push(FailRule {
            remaining: n,
            mode,
            matcher,
        });
    }

    /// Fails the next `n` API requests with HTTP 500.
    pub fn fail_next_500(&self, n: usize) {
        self.fail_next(n, FailMode::Internal);
    }

    /// Fails the next `n` API requests with HTTP 429 and `Retry-After`.
    pub fn fail_next_429(&self, n: usize, retry_after_secs: u64) {
        self.fail_next(n, FailMode::TooManyRequests { retry_after_secs });
    }

    /// Cuts the next watch event (on any stream) in the middle of its line and aborts that
    /// connection.
    pub fn cut_next_watch_event(&self) {
        self.state
            .cut_next_watch_events
            .fetch_add(1, Ordering::SeqCst);
    }

    /// Delays every API response by `delay` (None turns the delay off).
    pub fn set_delay(&self, delay: Option<Duration>) {
        *self.state.delay.lock() = delay;
    }

    /// Invalidates every continue token issued so far (they get HTTP 410 Expired).
    pub fn expire_continue_tokens(&self) {
        self.state.store.expire_continue_tokens();
    }

    /// Answers the next `n` list requests that carry a continue token with HTTP 410 Expired, as
    /// if their token had expired between pages (deterministic variant of
    /// [`Faults::expire_continue_tokens`]).
    pub fn expire_next_continue(&self, n: usize) {
        self.state
            .expire_next_continue
            .fetch_add(n, Ordering::SeqCst);
    }

    /// Consumes one pending "expire the next continue token", returning whether it was armed.
    pub fn take_continue_expiry(&self) -> bool {
        self.state
            .expire_next_continue
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Counts a continued list answered 410 Expired.
    pub fn note_continue_expiry(&self) {
        self.count(|s| s.continue_expiries += 1);
    }

    /// Counts a response held back by the delay.
    pub fn note_delayed(&self) {
        self.count(|s| s.delayed_responses += 1);
    }

    /// Counts a watch connection closed by a drop.
    pub fn note_watch_dropped(&self) {
        self.count(|s| s.watches_dropped += 1);
    }

    /// Disarms every pending fault and removes the delay (the counters are kept).
    pub fn reset(&self) {
        self.state.fail_next.lock().clear();
        self.state.cut_next_watch_events.store(0, Ordering::SeqCst);
        self.state.expire_next_continue.store(0, Ordering::SeqCst);
        *self.state.delay.lock() = None;
    }

    /// Number of watch streams currently open (subscribed to the drop signal).
    pub fn open_watches(&self) -> usize {
        self.state.open_watches.load(Ordering::SeqCst)
    }

    /// Number of requests failed by injected faults so far.
    pub fn failed_requests(&self) -> usize {
        self.state.stats.lock().failures_total() as usize
    }

    /// How often each fault fired so far.
    pub fn stats(&self) -> FaultStats {
        let mut s = self.state.stats.lock().clone();
        s.open_watches = self.open_watches();
        s
    }

    /// Waits until `pred` holds for [`Faults::stats`]; returns the stats that satisfied it.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&FaultStats) -> bool,
    ) -> Result<FaultStats, WaitTimeout> {
        let mut rx = self.state.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let s = self.stats();
            if pred(&s) {
                return Ok(s);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    let s = self.stats();
                    if pred(&s) {
                        return Ok(s);
                    }
                    return Err(WaitTimeout {
                        what: format!("{what} (fault stats now: {s:?})"),
                        timeout,
                    });
                }
            }
        }
    }

    /// Waits until at least `n` watch streams are open and subscribed to the drop signal, so
    /// that a [`Faults::drop_watches`] right after it reaches all of them.
    pub async fn wait_open_watches(&self, n: usize, timeout: Duration) -> Result<(), WaitTimeout> {
        self.wait_for(&format!("{n} open watches"), timeout, |s| {
            s.open_watches >= n
        })
        .await
        .map(|_| ())
    }

    /// Takes the next pending failure for a request that is not described (only failures armed
    /// for any request apply).
    pub fn take_failure(&self) -> Option<FailMode> {
        self.take(|m| *m == RequestMatch::any())
    }

    /// Takes the next pending failure that applies to `method` on `path`, counting it.
    pub fn take_failure_for(&self, method: &str, path: &str) -> Option<FailMode> {
        self.take(|m| m.matches(method, path))
    }

    fn take(&self, applies: impl Fn(&RequestMatch) -> bool) -> Option<FailMode> {
        let mode = {
            let mut rules = self.state.fail_next.lock();
            let i = rules.iter().position(|r| applies(&r.matcher))?;
            let mode = rules[i].mode;
            rules[i].remaining -= 1;
            if rules[i].remaining == 0 {
                rules.remove(i);
            }
            mode
        };
        self.count(|s| *s.failures.entry(mode.code()).or_default() += 1);
        Some(mode)
    }

    /// Pending targeted and untargeted failures, in arming order: (remaining, mode, matcher).
    pub fn pending_failures(&self) -> Vec<(usize, FailMode, RequestMatch)> {
        self.state
            .fail_next
            .lock()
            .iter()
            .map(|r| (r.remaining, r.mode, r.matcher.clone()))
            .collect()
    }

    /// The configured response delay.
    pub fn delay(&self) -> Option<Duration> {
        *self.state.delay.lock()
    }

    /// Consumes one pending "cut the next watch event", returning whether it was armed.
    pub fn take_cut(&self) -> bool {
        let fired = self
            .state
            .cut_next_watch_events
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fired {
            self.count(|s| s.cuts_fired += 1);
        }
        fired
    }

    /// Receiver that changes whenever watches are dropped.
    pub fn drop_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.state.drop_generation.subscribe()
    }

    /// Registers an open watch; the guard unregisters it when dropped. Take it only after
    /// subscribing to [`Faults::drop_signal`], so a counted watch always sees a later drop.
    pub fn watch_guard(&self) -> WatchGuard {
        self.state.open_watches.fetch_add(1, Ordering::SeqCst);
        self.state.changed.send_modify(|g| *g += 1);
        WatchGuard {
            faults: self.clone(),
        }
    }
}

/// Counts one open watch stream while alive.
#[derive(Debug)]
pub struct WatchGuard {
    faults: Faults,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.faults
            .state
            .open_watches
            .fetch_sub(1, Ordering::SeqCst);
        self.faults.state.changed.send_modify(|g| *g += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_disarm_after_n() {
        let f = Faults::new(Arc::new(Store::new(100)));
        f.fail_next_429(2, 3);
        assert_eq!(
            f.take_failure(),
            Some(FailMode::TooManyRequests {
                retry_after_secs: 3
            })
        );
        assert!(f.take_failure().is_some());
        assert_eq!(f.take_failure(), None);
        assert_eq!(f.failed_requests(), 2);
        assert_eq!(f.stats().failures_with(429), 2);
    }

    #[test]
    fn targeted_failures_only_hit_matching_requests() {
        let f = Faults::new(Arc::new(Store::new(100)));
        f.fail_matching(
            2,
            FailMode::Code(409),
            RequestMatch::method("patch").path("/pods/"),
        );
        assert_eq!(f.take_failure_for("GET", "/api/v1/namespaces/a/pods"), None);
        assert_eq!(
            f.take_failure_for("PATCH", "/api/v1/namespaces/a/configmaps/x"),
            None
        );
        assert_eq!(f.take_failure(), None, "untargeted requests are not hit");
        assert_eq!(
            f.take_failure_for("PATCH", "/api/v1/namespaces/a/pods/p"),
            Some(FailMode::Code(409))
        );
        assert!(f
            .take_failure_for("PATCH", "/api/v1/namespaces/b/pods/q")
            .is_some());
        assert_eq!(
            f.take_failure_for("PATCH", "/api/v1/namespaces/b/pods/q"),
            None
        );
        assert_eq!(f.stats().failures_with(409), 2);
        assert_eq!(FailMode::Code(409).error().reason, "Conflict");
    }

    #[test]
    fn cut_is_taken_once() {
        let f = Faults::new(Arc::new(Store::new(100)));
        assert!(!f.take_cut());
        f.cut_next_watch_event();
        assert!(f.take_cut());
        assert!(!f.take_cut());
        assert_eq!(f.stats().cuts_fired, 1);
    }

    #[tokio::test]
    async fn waits_see_counters_move() {
        let f = Faults::new(Arc::new(Store::new(100)));
        let e = f
            .wait_open_watches(1, Duration::from_millis(20))
            .await
            .unwrap_err();
        assert!(e.what.contains("1 open watches"), "{e}");
        let f2 = f.clone();
        let t = tokio::spawn(async move { f2.wait_open_watches(2, Duration::from_secs(10)).await });
        let g1 = f.watch_guard();
        let g2 = f.watch_guard();
        t.await.unwrap().unwrap();
        assert_eq!(f.drop_watches(), 2);
        drop((g1, g2));
        assert_eq!(f.stats().open_watches, 0);
        assert_eq!(f.stats().drop_calls, 1);
    }
}
