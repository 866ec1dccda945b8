//! Fault injection: the Rust API behind the `/_sim/faults/...` admin endpoints.
//!
//! Invariant: each fault acts exactly as many times as requested and then disarms itself; faults
//! never affect `/_sim/` admin requests, so a test can always observe and reset the simulator.

use parking_lot::Mutex;
use std::collections::VecDeque;
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
}

impl FailMode {
    /// The Status error this failure answers with.
    pub fn error(self) -> ApiError {
        match self {
            FailMode::Internal => ApiError::internal("injected fault: internal error"),
            FailMode::TooManyRequests { retry_after_secs } => {
                ApiError::too_many_requests(retry_after_secs)
            }
        }
    }
}

#[derive(Debug)]
struct State {
    store: Arc<Store>,
    drop_generation: tokio::sync::watch::Sender<u64>,
    fail_next: Mutex<VecDeque<FailMode>>,
    cut_next_watch_events: AtomicUsize,
    expire_next_continue: AtomicUsize,
    delay: Mutex<Option<Duration>>,
    open_watches: AtomicUsize,
    failed: AtomicUsize,
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
        Faults {
            state: Arc::new(State {
                store,
                drop_generation,
                fail_next: Mutex::new(VecDeque::new()),
                cut_next_watch_events: AtomicUsize::new(0),
                expire_next_continue: AtomicUsize::new(0),
                delay: Mutex::new(None),
                open_watches: AtomicUsize::new(0),
                failed: AtomicUsize::new(0),
            }),
        }
    }

    /// Closes every open watch stream (clients see the stream end and must re-watch).
    pub fn drop_watches(&self) {
        self.state.drop_generation.send_modify(|g| *g += 1);
    }

    /// Compacts history: every resourceVersion older than the current one now gets 410
    /// (watches get an ERROR event, lists at an exact version and continue tokens get HTTP 410).
    pub fn compact(&self) {
        self.state.store.compact();
    }

    /// Fails the next `n` API requests with `mode`.
    pub fn fail_next(&self, n: usize, mode: FailMode) {
        let mut q = self.state.fail_next.lock();
        q.extend(std::iter::repeat_n(mode, n));
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

    /// Disarms every pending fault and removes the delay.
    pub fn reset(&self) {
        self.state.fail_next.lock().clear();
        self.state.cut_next_watch_events.store(0, Ordering::SeqCst);
        self.state.expire_next_continue.store(0, Ordering::SeqCst);
        *self.state.delay.lock() = None;
    }

    /// Number of watch streams currently open.
    pub fn open_watches(&self) -> usize {
        self.state.open_watches.load(Ordering::SeqCst)
    }

    /// Number of requests failed by injected faults so far.
    pub fn failed_requests(&self) -> usize {
        self.state.failed.load(Ordering::SeqCst)
    }

    /// Takes the next pending request failure, if any.
    pub fn take_failure(&self) -> Option<FailMode> {
        let f = self.state.fail_next.lock().pop_front();
        if f.is_some() {
            self.state.failed.fetch_add(1, Ordering::SeqCst);
        }
        f
    }

    /// The configured response delay.
    pub fn delay(&self) -> Option<Duration> {
        *self.state.delay.lock()
    }

    /// Consumes one pending "cut the next watch event", returning whether it was armed.
    pub fn take_cut(&self) -> bool {
        self.state
            .cut_next_watch_events
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Receiver that changes whenever watches are dropped.
    pub fn drop_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.state.drop_generation.subscribe()
    }

    /// Registers an open watch; the guard unregisters it when dropped.
    pub fn watch_guard(&self) -> WatchGuard {
        self.state.open_watches.fetch_add(1, Ordering::SeqCst);
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
    }

    #[test]
    fn cut_is_taken_once() {
        let f = Faults::new(Arc::new(Store::new(100)));
        assert!(!f.take_cut());
        f.cut_next_watch_event();
        assert!(f.take_cut());
        assert!(!f.take_cut());
    }
}
