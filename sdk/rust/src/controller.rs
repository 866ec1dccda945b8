//! Controllers: a [`Reconciler`] is called with the key of an object that
//! needs reconciling, from a per-plugin work queue with client-go's
//! semantics (a key is queued at most once, never reconciled twice at once,
//! retried with rate-limited backoff, requeued after a delay on request).
//!
//! The reconciler reads the object's current state from the cache (it may be
//! gone: then clean up) and makes the world match it. It is level-triggered:
//! it is not told what changed, only which object to look at.

use std::time::Duration;

use crate::controller_bindings::exports::wasm_informer::plugin::reconciler as raw;
use crate::{cache, Config, Error, Object, Result};

/// The object to reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The primary resource, for example `apps/v1/deployments`.
    pub resource: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The cache key: `namespace/name`, or `name`.
    pub key: String,
}

impl Request {
    #[doc(hidden)]
    pub fn from_wit(r: raw::Request) -> Self {
        Self {
            resource: r.resource,
            namespace: r.namespace,
            name: r.name,
            key: r.key,
        }
    }

    /// The object's current state in the cache, or `None` when it is gone.
    pub fn object(&self) -> Result<Option<Object>> {
        cache::get_object(&self.resource, &self.key).map_err(Error::from)
    }
}

/// What to do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action(Option<Duration>);

impl Action {
    /// Nothing until the next change of the object or of what it owns.
    pub fn done() -> Self {
        Action(None)
    }

    /// Reconcile again after `d`, change or not (for example while waiting
    /// for something outside the cluster).
    pub fn requeue(d: Duration) -> Self {
        Action(Some(d))
    }

    /// The requeue delay, if any.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.0
    }

    #[doc(hidden)]
    pub fn to_wit(self) -> raw::Action {
        match self.0 {
            None => raw::Action::Done,
            Some(d) => raw::Action::RequeueAfter(crate::millis(d)),
        }
    }
}

/// Why a reconcile failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconcileError {
    /// Try again later, with the work queue's rate-limited backoff. This is
    /// what `?` on any SDK error gives.
    Retry(String),
    /// Do not retry: counted and logged; the next change queues the key again.
    Terminal(String),
}

impl ReconcileError {
    /// A retryable error.
    pub fn retry(message: impl Into<String>) -> Self {
        ReconcileError::Retry(message.into())
    }

    /// An error not worth retrying (a spec that can never be satisfied).
    pub fn terminal(message: impl Into<String>) -> Self {
        ReconcileError::Terminal(message.into())
    }

    #[doc(hidden)]
    pub fn to_wit(self) -> raw::ReconcileError {
        match self {
            ReconcileError::Retry(m) => raw::ReconcileError::Retry(m),
            ReconcileError::Terminal(m) => raw::ReconcileError::Terminal(m),
        }
    }
}

impl<E: Into<Error>> From<E> for ReconcileError {
    fn from(e: E) -> Self {
        ReconcileError::Retry(e.into().message().to_string())
    }
}

/// A controller. `reconcile` is never called for one key twice at once.
pub trait Reconciler: Sized + 'static {
    /// Builds the controller's state from the manifest's `[config]`. An error
    /// stops the plugin from loading.
    fn init(config: &Config) -> Result<Self>;

    /// Makes the world match the desired state of `request`'s object.
    fn reconcile(&mut self, request: &Request) -> std::result::Result<Action, ReconcileError>;
}

/// Exports a [`Reconciler`] type as the plugin's `reconciler` interface
/// (world `controller`).
///
/// ```ignore
/// struct Noop;
/// impl wasm_informer_sdk::Reconciler for Noop {
///     fn init(_: &wasm_informer_sdk::Config) -> wasm_informer_sdk::Result<Self> { Ok(Noop) }
///     fn reconcile(&mut self, _: &wasm_informer_sdk::Request)
///         -> Result<wasm_informer_sdk::Action, wasm_informer_sdk::ReconcileError> {
///         Ok(wasm_informer_sdk::Action::done())
///     }
/// }
/// wasm_informer_sdk::export_controller!(Noop);
/// ```
#[macro_export]
macro_rules! export_controller {
    ($reconciler:ty) => {
        const _: () = {
            struct __WasmInformerController;

            ::std::thread_local! {
                static __STATE: ::std::cell::RefCell<::std::option::Option<$reconciler>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            use $crate::controller_bindings::exports::wasm_informer::plugin::reconciler as __raw;

            impl __raw::Guest for __WasmInformerController {
                fn init(config: ::std::string::String) -> ::std::result::Result<(), ::std::string::String> {
                    let cfg = $crate::Config::from_json(config);
                    let r = <$reconciler as $crate::Reconciler>::init(&cfg)
                        .map_err(|e| e.message().to_string())?;
                    __STATE.with(|s| *s.borrow_mut() = ::std::option::Option::Some(r));
                    ::std::result::Result::Ok(())
                }

                fn reconcile(
                    request: __raw::Request,
                ) -> ::std::result::Result<__raw::Action, __raw::ReconcileError> {
                    let req = $crate::Request::from_wit(request);
                    __STATE.with(|s| match s.borrow_mut().as_mut() {
                        ::std::option::Option::Some(r) => {
                            <$reconciler as $crate::Reconciler>::reconcile(r, &req)
                                .map(|a| a.to_wit())
                                .map_err(|e| e.to_wit())
                        }
                        ::std::option::Option::None => ::std::result::Result::Err(
                            __raw::ReconcileError::Terminal("reconcile called before init".to_string()),
                        ),
                    })
                }
            }

            $crate::controller_bindings::__export_controller!(__WasmInformerController with_types_in $crate::controller_bindings);
        };
    };
}
