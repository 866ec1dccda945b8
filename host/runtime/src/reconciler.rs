//! Runs a controller plugin: one [`ReconcileWorker`] per worker, each with
//! its own instance (its own Store, fuel, deadline and memory cap), taking
//! keys from the plugin's work queue
//! ([`kube_informer::workqueue::WorkQueue`]) through
//! [`kube_informer::workqueue::Workers`].
//!
//! Job: turn a key into the `controller` world's `reconcile(request)` call
//! on this worker's instance, synchronously on the worker's own thread, and
//! its answer into an [`Outcome`] for the queue: `ok(done)` and
//! `ok(requeue-after)` as such, `err(retry)` and `err(terminal)` as such, a
//! trap as [`Outcome::Trap`] (retried through the rate limiter). After a trap
//! the worker's instance is dropped; the worker takes no key until a fresh
//! instance has started after the restart backoff (or quarantine), while the
//! other workers carry on.
//!
//! Invariants:
//! - A trap in one worker restarts that worker's instance only.
//! - Every worker of a plugin shares its API client (one write rate limit),
//!   Event recorder, log and status; nothing else.

use std::sync::Arc;

use kube_informer::workqueue::{Outcome, Reconcile};

use super::capability::HostServices;
use super::engine::PluginEngine;
use super::instance::{ReconcileOutcome, ReconcileRequest, StartError};
use super::outcome::{PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use super::restart::{Parts, Supervised};
use super::status::{PluginState, PluginStatus};
use super::world::World;

/// One worker of a controller plugin.
pub struct ReconcileWorker {
    slot: Supervised,
    primary: Arc<str>,
    index: usize,
}

impl std::fmt::Debug for ReconcileWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileWorker")
            .field("plugin", &self.slot.parts.name())
            .field("worker", &self.index)
            .finish()
    }
}

/// Why a controller's workers could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkersError {
    /// The component is not of the `controller` world.
    #[error(
        "the component is an event handler ({0}), not a controller: it exports no `reconciler`"
    )]
    NotAController(String),
    /// An instance could not start.
    #[error("worker {worker}: {error}")]
    Start {
        /// Which worker.
        worker: usize,
        /// Why.
        error: StartError,
    },
}

/// The request for `key` of `primary`: `namespace/name`, or `name`.
pub fn request_for(primary: &str, key: &str) -> ReconcileRequest {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, name)) => (Some(ns.to_string()), name.to_string()),
        None => (None, key.to_string()),
    };
    ReconcileRequest {
        resource: primary.to_string(),
        namespace,
        name,
        key: key.to_string(),
    }
}

impl ReconcileWorker {
    /// Starts `workers` instances of the controller `plugin` (each runs
    /// `init`), reconciling keys of `primary`. Either every worker starts or
    /// none is left running. Must be called within a tokio runtime.
    pub async fn start_all(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        services: impl Into<HostServices>,
        primary: &str,
        workers: usize,
        status: Option<Arc<PluginStatus>>,
    ) -> Result<Vec<Self>, WorkersError> {
        if plugin.world() != World::ControllerV02 {
            return Err(WorkersError::NotAController(plugin.world().name()));
        }
        let status = status.unwrap_or_else(|| Arc::new(PluginStatus::new(&plugin.spec.name)));
        status.set_state(PluginState::Starting);
        let parts = Parts::new(engine, plugin, services.into(), &status);
        let primary: Arc<str> = primary.into();
        let mut out = Vec::with_capacity(workers.max(1));
        for index in 0..workers.max(1) {
            match Supervised::start(parts.clone(), status.clone()).await {
                Ok(slot) => out.push(Self {
                    slot,
                    primary: primary.clone(),
                    index,
                }),
                Err(error) => {
                    status.set_state(PluginState::Stopped);
                    status.record_failure_message(&error.to_string());
                    return Err(WorkersError::Start {
                        worker: index,
                        error,
                    });
                }
            }
        }
        status.set_state(PluginState::Running);
        Ok(out)
    }

    /// The plugin's live status (shared by its workers).
    pub fn status(&self) -> &Arc<PluginStatus> {
        &self.slot.status
    }

    /// Which worker this is (0-based).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Reconciles `key` on this worker's instance and applies the restart
    /// policy; the outcome is what the work queue acts on.
    pub async fn reconcile_key(&mut self, key: &str) -> Outcome {
        let request = request_for(&self.primary, key);
        let r = self
            .slot
            .blocking(move |slot, _| match slot.as_mut() {
                Some(i) => i.reconcile(&request),
                None => ReconcileOutcome::Trap(PluginTrap {
                    kind: TrapKind::Other,
                    message: "no live instance".into(),
                }),
            })
            .await
            .unwrap_or_else(ReconcileOutcome::Trap);
        let status = self.slot.status.clone();
        match r {
            ReconcileOutcome::Done => {
                self.slot.succeeded();
                Outcome::Done
            }
            ReconcileOutcome::RequeueAfter(d) => {
                self.slot.succeeded();
                Outcome::RequeueAfter(d)
            }
            ReconcileOutcome::Retry(m) => {
                self.slot.succeeded();
                status.record_error(&m);
                Outcome::Retry(m)
            }
            ReconcileOutcome::Terminal(m) => {
                self.slot.succeeded();
                status.record_error(&m);
                tracing::warn!(plugin = %self.slot.parts.name(), key, "terminal reconcile error, not retried: {m}");
                Outcome::Terminal(m)
            }
            ReconcileOutcome::Trap(t) => {
                let msg = format!("trap ({}): {}", t.kind, t.message);
                self.slot.trapped(&t);
                Outcome::Trap(msg)
            }
        }
    }
}

impl Reconcile<Arc<str>> for ReconcileWorker {
    async fn reconcile(&mut self, key: &Arc<str>) -> Outcome {
        self.reconcile_key(key).await
    }

    async fn ready(&mut self) {
        if self.slot.ensure_instance().await.is_err() {
            // Stopped in its backoff or quarantine: never ready again (the
            // work queue's own stop ends the worker).
            std::future::pending::<()>().await;
        }
    }

    fn own_thread(&self) -> Option<String> {
        Some(format!("plugin-{}-{}", self.slot.parts.name(), self.index))
    }
}

impl Drop for ReconcileWorker {
    fn drop(&mut self) {
        self.slot.status.set_state(PluginState::Stopped);
    }
}
