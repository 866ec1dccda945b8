//! Stopping one plugin version promptly: the signal that ends its waits, and
//! what it was waiting on.
//!
//! Job: one [`Stop`] is shared by every runner, worker and instance of one
//! plugin version (it travels in [`crate::HostServices`]). The host raises it
//! when the version stops (shutdown, hot reload, removal). Every wait of the
//! version that is not guest code then ends at once: an API request in
//! flight, a wait for a write token, a `Retry-After` pause, a backoff or a
//! quarantine. Guest code itself is never cut off here: it runs to the end of
//! its event (bounded by its deadline), and every API call it makes from then
//! on is answered `unavailable` without being sent. While a wait lasts, it is
//! registered with what it waits for, so the host's WARN can say it.
//!
//! Invariant: once [`Stop::raise`] has returned, no wait of this version
//! begins or goes on: [`Stop::sleep`] returns `Err(Stopped)` at once,
//! [`Stop::raised`] is ready, and [`Stop::is_raised`] is true. A request
//! cancelled while in flight may still have reached the server (the WARN says
//! it was in flight); none is sent after the raise.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A wait cut short by [`Stop::raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// One wait in progress: what it waits for, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// What the version waits for, in words ("an API call: PATCH /api/v1/…").
    pub what: String,
    /// When the wait began.
    pub since: Instant,
}

/// The stop signal of one plugin version.
#[derive(Debug, Default)]
pub struct Stop {
    raised: AtomicBool,
    next_id: AtomicU64,
    /// The waits in progress, by id (a version has a thread per runner and
    /// per worker, so several may wait at once).
    waits: Mutex<Vec<(u64, Waiting)>>,
    /// Wakes thread sleeps on a raise.
    wake: Condvar,
    /// Wakes async waits on a raise.
    notify: tokio::sync::Notify,
}

/// Registers a wait for as long as it lives (see [`Stop::waiting_on`]).
#[must_use = "the wait is registered only while the guard lives"]
pub struct WaitGuard<'a> {
    stop: &'a Stop,
    id: u64,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.stop.waits.lock().retain(|(id, _)| *id != self.id);
    }
}

impl Stop {
    /// A signal not raised yet.
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self::default())
    }

    /// Raises the signal and returns the waits in progress at that moment,
    /// oldest first. Idempotent.
    pub fn raise(&self) -> Vec<Waiting> {
        let waits = {
            let w = self.waits.lock();
            self.raised.store(true, Ordering::SeqCst);
            self.wake.notify_all();
            w.iter().map(|(_, w)| w.clone()).collect::<Vec<_>>()
        };
        self.notify.notify_waiters();
        let mut waits = waits;
        waits.sort_by_key(|w| w.since);
        waits
    }

    /// Whether the signal was raised.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// Registers a wait on `what` until the guard drops.
    pub fn waiting_on(&self, what: impl Into<String>) -> WaitGuard<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.waits.lock().push((
            id,
            Waiting {
                what: what.into(),
                since: Instant::now(),
            },
        ));
        WaitGuard { stop: self, id }
    }

    /// The waits in progress, oldest first.
    pub fn waits(&self) -> Vec<Waiting> {
        let mut w: Vec<Waiting> = self.waits.lock().iter().map(|(_, w)| w.clone()).collect();
        w.sort_by_key(|w| w.since);
        w
    }

    /// Sleeps on this thread for `d`, or until the signal is raised.
    pub fn sleep(&self, d: Duration) -> Result<(), Stopped> {
        let until = Instant::now() + d;
        let mut w = self.waits.lock();
        loop {
            if self.is_raised() {
                return Err(Stopped);
            }
            if self.wake.wait_until(&mut w, until).timed_out() {
                return if self.is_raised() {
                    Err(Stopped)
                } else {
                    Ok(())
                };
            }
        }
    }

    /// Ready once the signal is raised (at once if it already was).
    pub async fn raised(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_raise_ends_a_thread_sleep_at_once_and_every_later_one() {
        let stop = Stop::new();
        let s = stop.clone();
        let sleeper = std::thread::spawn(move || {
            let started = Instant::now();
            let r = s.sleep(Duration::from_secs(60));
            (r, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        stop.raise();
        let (r, took) = sleeper.join().unwrap();
        assert_eq!(r, Err(Stopped));
        assert!(took < Duration::from_secs(30), "slept {took:?}");
        assert_eq!(stop.sleep(Duration::from_secs(60)), Err(Stopped));
        assert_eq!(Stop::new().sleep(Duration::from_millis(1)), Ok(()));
    }

    #[tokio::test]
    async fn a_raise_wakes_async_waits_before_and_after() {
        let stop = Stop::new();
        let s = stop.clone();
        let waiter = tokio::spawn(async move { s.raised().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        stop.raise();
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("woken")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(30), stop.raised())
            .await
            .expect("ready at once once raised");
    }

    #[test]
    fn the_raise_names_the_waits_in_progress_and_guards_unregister() {
        let stop: Arc<Stop> = Stop::new();
        let a = stop.waiting_on("an API call: PATCH /api/v1/namespaces/a/pods/p");
        {
            let _b = stop.waiting_on("a write token");
            assert_eq!(stop.waits().len(), 2);
        }
        let waits = stop.raise();
        assert_eq!(waits.len(), 1);
        assert_eq!(
            waits[0].what,
            "an API call: PATCH /api/v1/namespaces/a/pods/p"
        );
        drop(a);
        assert!(stop.waits().is_empty());
    }
}
