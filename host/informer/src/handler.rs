//! The boundary between the informer and whatever consumes a listener's
//! notifications: the [`Handler`] trait, and the [`HandlerOptions`] a handler is
//! registered with (queue capacity, resync period, namespace, label selector).
//! In the wasm-informer host the handler is a plugin runner; in a native
//! program it is any type that implements the trait, or a closure through
//! [`from_fn`].
//!
//! Invariant: [`Handler::handle`] and [`Handler::handle_batch`] are only ever
//! awaited by the listener's own task, never by the dispatcher, so a slow
//! handler can only slow itself (I1). A batch is handled in order and stops at
//! the first [`Delivery::Restarted`]; the notifications after it are superseded
//! by the replay that follows (I6).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_informer_selector::LabelSelector;

use crate::notification::{Notification, NotificationRef};
use crate::ownership::Ownership;

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

impl From<()> for Delivery {
    fn from((): ()) -> Self {
        Delivery::Ok
    }
}

impl<E: std::fmt::Display> From<Result<(), E>> for Delivery {
    fn from(r: Result<(), E>) -> Self {
        match r {
            Ok(()) => Delivery::Ok,
            Err(e) => Delivery::HandlerError(e.to_string()),
        }
    }
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

/// A [`Handler`] that calls `f` once per notification, on the listener's own
/// task. `f` returns `()` (handled), a `Result<(), E>` (an error is counted as
/// a handler error, and the next notification follows) or a [`Delivery`].
///
/// ```
/// use kube_informer::handler::{from_fn, Handler};
/// use kube_informer::notification::{EventKind, Notification};
///
/// let mut seen = 0u64;
/// let handler = from_fn(move |n: &Notification| {
///     if n.kind != EventKind::Deleted {
///         seen += 1;
///     }
/// });
/// # fn is_handler(_: &impl Handler) {}
/// # is_handler(&handler);
/// ```
pub fn from_fn<F, R>(f: F) -> FnHandler<F>
where
    F: FnMut(&Notification) -> R + Send + 'static,
    R: Into<Delivery>,
{
    FnHandler(f)
}

/// The handler [`from_fn`] returns.
pub struct FnHandler<F>(F);

impl<F> std::fmt::Debug for FnHandler<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnHandler")
    }
}

impl<F, R> Handler for FnHandler<F>
where
    F: FnMut(&Notification) -> R + Send + 'static,
    R: Into<Delivery>,
{
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        (self.0)(&n).into()
    }
}

/// How a handler is registered: the options of its listener.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOptions {
    /// Name used in logs and stats (the plugin name).
    pub name: String,
    /// Most full notifications held in the queue (at least 1).
    pub queue_capacity: usize,
    /// Resync period for this listener only (`None`: never).
    pub resync: Option<Duration>,
    /// Only objects in this namespace.
    pub namespace: Option<String>,
    /// Only objects whose labels match this selector (full Kubernetes syntax).
    pub label_selector: Option<String>,
    /// Only objects this shared predicate owns; a change of the predicate
    /// hands keys over (see [`crate::ownership`]). `None`: every object.
    pub ownership: Option<Arc<Ownership>>,
}

impl Default for HandlerOptions {
    fn default() -> Self {
        Self {
            name: String::new(),
            queue_capacity: 1024,
            resync: None,
            namespace: None,
            label_selector: None,
            ownership: None,
        }
    }
}

/// Why a listener configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerOptionsError {
    /// `capacity` is 0.
    #[error("listener {0:?}: queue capacity must be at least 1")]
    ZeroCapacity(String),
    /// The label selector does not parse.
    #[error("listener {name:?}: invalid label_selector: {reason}")]
    Selector {
        /// Listener name.
        name: String,
        /// Parser message.
        reason: String,
    },
    /// `resync` is zero.
    #[error("listener {0:?}: resync period must be positive")]
    ZeroResync(String),
}

impl HandlerOptions {
    /// Default options under a name (used in logs and stats).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Holds at most `n` full notifications before coalescing by key (I4).
    pub fn queue_capacity(mut self, n: usize) -> Self {
        self.queue_capacity = n;
        self
    }

    /// Re-delivers the cached state as `Synced` every `period`, to this
    /// handler only.
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Only objects in `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `selector` (full Kubernetes syntax). An
    /// update that moves an object out of the selection arrives as a delete,
    /// one that moves it in as an add.
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects `ownership` owns, following its changes: keys it gains
    /// arrive as a replay, keys it loses stop arriving.
    pub fn ownership(mut self, ownership: Arc<Ownership>) -> Self {
        self.ownership = Some(ownership);
        self
    }

    /// Checks the configuration and parses the selector.
    pub fn validate(&self) -> Result<Option<LabelSelector>, HandlerOptionsError> {
        if self.queue_capacity == 0 {
            return Err(HandlerOptionsError::ZeroCapacity(self.name.clone()));
        }
        if self.resync.is_some_and(|d| d.is_zero()) {
            return Err(HandlerOptionsError::ZeroResync(self.name.clone()));
        }
        match self
            .label_selector
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => Ok(None),
            Some(text) => {
                LabelSelector::parse(text)
                    .map(Some)
                    .map_err(|e| HandlerOptionsError::Selector {
                        name: self.name.clone(),
                        reason: e.to_string(),
                    })
            }
        }
    }
}
