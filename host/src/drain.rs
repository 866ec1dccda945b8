//! Graceful drain of one listener's handler: stop taking new events, let the
//! current one finish, then report idle.
//!
//! Job: [`DrainGate`] wraps a [`Handler`]; [`Drain::close_and_wait`] closes the
//! gate and waits until no event (or batch of events) is in flight, so that shutdown and hot-reload
//! switch-over never cut a plugin off in the middle of an event.
//!
//! Invariant: once `close_and_wait` has returned `true`, the wrapped handler is
//! not running an event and will never start another one. (The busy flag is set
//! before the closed flag is checked, and the closer sets closed before checking
//! busy, both sequentially consistent, so at least one side sees the other.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::NotificationRef;

/// The shared side of a gate: owned by whoever stops the listener.
#[derive(Debug, Default)]
pub struct Drain {
    closed: AtomicBool,
    busy: AtomicBool,
    idle: Notify,
}

impl Drain {
    /// A new, open gate.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether an event is being handled right now.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// Closes the gate and waits (at most `grace`) for the event in flight to
    /// finish. Returns whether the handler is idle.
    pub async fn close_and_wait(&self, grace: Duration) -> bool {
        self.closed.store(true, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.idle.notified();
            if !self.busy.load(Ordering::SeqCst) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return !self.busy.load(Ordering::SeqCst);
            }
        }
    }
}

/// A handler behind a [`Drain`] gate.
pub struct DrainGate<H> {
    inner: H,
    drain: Arc<Drain>,
}

impl<H> DrainGate<H> {
    /// Wraps `inner`.
    pub fn new(inner: H, drain: Arc<Drain>) -> Self {
        Self { inner, drain }
    }
}

impl Drain {
    /// Marks the handler busy, or, if the gate is closed, never returns: the
    /// listener is about to be removed and must not take another event.
    async fn enter(&self) {
        self.busy.store(true, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.leave();
            std::future::pending::<()>().await;
        }
    }

    fn leave(&self) {
        self.busy.store(false, Ordering::SeqCst);
        self.idle.notify_waiters();
    }
}

impl<H: Handler> Handler for DrainGate<H> {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.drain.enter().await;
        let d = self.inner.handle(n).await;
        self.drain.leave();
        d
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }

    fn own_thread(&self) -> Option<String> {
        self.inner.own_thread()
    }

    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        self.drain.enter().await;
        let h = self.inner.handle_batch(batch).await;
        self.drain.leave();
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_informer::notification::{EventKind, Notification};
    use kube_informer::object::{Object, Transform};

    struct Slow(
        Arc<tokio::sync::Semaphore>,
        Arc<std::sync::atomic::AtomicU64>,
    );
    impl Handler for Slow {
        async fn handle(&mut self, _n: NotificationRef) -> Delivery {
            let _p = self.0.acquire().await.unwrap();
            self.1.fetch_add(1, Ordering::SeqCst);
            Delivery::Ok
        }
    }

    fn note() -> NotificationRef {
        let o = Arc::new(
            Object::from_json(br#"{"metadata":{"name":"a"}}"#, &Transform::default()).unwrap(),
        );
        Arc::new(Notification {
            kind: EventKind::Added,
            resource: "v1/pods".into(),
            key: "a".into(),
            object: o,
            old: None,
            in_initial_list: false,
            final_state_unknown: false,
        })
    }

    #[tokio::test]
    async fn waits_for_the_event_in_flight_then_refuses_new_ones() {
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let drain = Drain::new();
        let mut h = DrainGate::new(Slow(permits.clone(), done.clone()), drain.clone());
        let task = tokio::spawn(async move {
            h.handle(note()).await;
            h.handle(note()).await;
        });
        while !drain.is_busy() {
            tokio::task::yield_now().await;
        }
        let d2 = drain.clone();
        let closer = tokio::spawn(async move { d2.close_and_wait(Duration::from_secs(60)).await });
        tokio::task::yield_now().await;
        assert!(!closer.is_finished(), "must wait for the event in flight");
        permits.add_permits(10);
        assert!(closer.await.unwrap(), "idle after the event finished");
        assert_eq!(
            done.load(Ordering::SeqCst),
            1,
            "the second event must not start"
        );
        assert!(!task.is_finished());
        task.abort();
    }
}
