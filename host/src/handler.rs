//! The boundary between the informer (which knows nothing of Wasm) and whatever
//! consumes a listener's notifications: in production, a plugin runner.
//!
//! Invariant: [`Handler::handle`] is only ever awaited by the listener's own task,
//! never by the dispatcher, so a slow handler can only slow itself (I1).

use std::future::Future;

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

/// Consumes a listener's notifications, one at a time, in order.
pub trait Handler: Send + 'static {
    /// Handles one notification. May take as long as it likes; only this listener
    /// waits.
    fn handle(&mut self, n: NotificationRef) -> impl Future<Output = Delivery> + Send;
}
