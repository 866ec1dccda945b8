//! The boundary between the informer (which knows nothing of Wasm) and whatever
//! consumes a listener's notifications: in production, a plugin runner.
//!
//! Invariant: [`Handler::handle`] and [`Handler::handle_batch`] are only ever
//! awaited by the listener's own task, never by the dispatcher, so a slow
//! handler can only slow itself (I1). A batch is handled in order and stops at
//! the first [`Delivery::Restarted`]; the notifications after it are superseded
//! by the replay that follows (I6).

use std::future::Future;
use std::time::Instant;

use crate::notification::NotificationRef;

/// The result of handing one notification to a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Handled.
    Ok,
    /// The handler returned an error result; it carries on with the next event.
    HandlerError(String),
    /// The handler's instance died and was replaced (or is quarantined and will be
    /// replaced). The listener must replay the current cache into it (I6) before any
    /// further live event.
    Restarted,
}

/// One notification of a batch, handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// How it ended.
    pub delivery: Delivery,
    /// When the handler finished with it (latency is measured to here, not to
    /// the end of the batch).
    pub at: Instant,
}

/// Consumes a listener's notifications, in order.
pub trait Handler: Send + 'static {
    /// Handles one notification. May take as long as it likes; only this listener
    /// waits.
    fn handle(&mut self, n: NotificationRef) -> impl Future<Output = Delivery> + Send;

    /// The most notifications the listener hands over in one
    /// [`Handler::handle_batch`] call. A handler with a cost per call (a plugin
    /// runner: a wake-up of its thread and a trip through its restart policy)
    /// raises it so that a backlog costs one call per batch instead of one per
    /// event; a batch is only what is already queued, so an idle listener never
    /// waits to fill one.
    fn max_batch(&self) -> usize {
        1
    }

    /// The name of a dedicated thread for this handler's listener loop, or
    /// `None` (the default) for a task on the async runtime. A handler whose
    /// calls block (a plugin runner, which runs Wasm synchronously) asks for
    /// one: the listener's wake-up then goes straight to the thread that runs
    /// the handler, and a guest that spins or sleeps holds only that thread.
    /// On that thread there is no tokio runtime context; a handler that needs
    /// timers keeps a runtime handle of its own.
    fn own_thread(&self) -> Option<String> {
        None
    }

    /// Handles `batch` (at most [`Handler::max_batch`] notifications) in order
    /// and returns one [`Handled`] per notification it handled. It stops after
    /// the first [`Delivery::Restarted`]: the rest of the batch is superseded by
    /// the replay. The default calls [`Handler::handle`] for each.
    fn handle_batch(
        &mut self,
        batch: Vec<NotificationRef>,
    ) -> impl Future<Output = Vec<Handled>> + Send {
        async move {
            let mut out = Vec::with_capacity(batch.len());
            for n in batch {
                let delivery = self.handle(n).await;
                let restarted = delivery == Delivery::Restarted;
                out.push(Handled {
                    delivery,
                    at: Instant::now(),
                });
                if restarted {
                    break;
                }
            }
            out
        }
    }
}
