//! Runs one plugin: owns its instance, implements [`Handler`] for the plugin's
//! listener, and applies the restart policy (backoff after a failure,
//! quarantine after `max_failures` consecutive ones).
//!
//! Where the Wasm runs: the runner asks for a dedicated thread for its
//! listener's loop ([`Handler::own_thread`]), and calls into the guest
//! synchronously on that thread. So a plugin that spins until its deadline or
//! sleeps through the WASI clocks occupies only its own thread, never a tokio
//! worker used by the dispatcher or the reflectors; the synchronous call path
//! is the fastest wasmtime offers (no fiber switch per call); and handing an
//! event to the plugin costs one thread wake-up (the dispatcher waking the
//! plugin's thread), none when the plugin is busy, because the listener gives
//! it everything already queued in one batch ([`MAX_BATCH`]). When the runner
//! is driven from an async task instead (tests, embedders calling
//! [`Handler::handle`] themselves), each call goes to tokio's blocking pool,
//! so the calling runtime is never blocked either. Waiting (backoff,
//! quarantine) is a tokio timer on the runtime the runner was started on: it
//! costs no CPU.
//!
//! The alternative, wasmtime's async API with epoch yielding on the tokio
//! workers, would still run guest code on the workers between yields (a busy
//! plugin would share the threads the reflectors use) and costs a fiber switch
//! per call (1.2 us against 0.7 us per call in the toolchain measurements). Its
//! one advantage, which this design gives up: a guest blocked in a WASI sleep
//! past its deadline is stopped only when the sleep returns (the call then
//! counts as a deadline trap), not at the deadline itself.
//!
//! Invariant: after a trap the instance is dropped, the rest of the batch is
//! not delivered and the trapped event ends as [`Delivery::Restarted`]; the
//! next call first waits out the backoff or quarantine, then builds a fresh
//! instance, so no event is ever delivered to a dead instance and a failing
//! plugin never consumes CPU while it waits.

use std::sync::Arc;
use std::time::Instant as StdInstant;

use super::capability::HostServices;
use super::engine::PluginEngine;
use super::instance::{PluginInstance, StartError};
use super::outcome::{CallOutcome, PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use super::restart::{Parts, Supervised};
use super::status::{PluginState, PluginStatus};
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::NotificationRef;

/// Most notifications handed to the plugin in one batch. Large enough that a
/// backlog costs a fraction of a microsecond of hand-off per event; small
/// enough that a batch of slow events (32 x the deadline at worst) never holds
/// the listener's stats or a drain for long.
pub const MAX_BATCH: usize = 32;

/// The outcome of one event and when the guest returned.
type Outcomes = Vec<(CallOutcome, StdInstant)>;

/// Runs one plugin and reports its [`PluginStatus`].
pub struct PluginRunner {
    slot: Supervised,
}

impl std::fmt::Debug for PluginRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRunner")
            .field("plugin", &self.slot.parts.name())
            .field("state", &self.slot.status.state())
            .finish()
    }
}

/// Delivers a batch to a live instance, stopping at the first trap (which
/// drops the instance).
fn deliver(
    instance: &mut Option<PluginInstance>,
    batch: &[NotificationRef],
    status: &PluginStatus,
) -> Outcomes {
    let mut out = Vec::with_capacity(batch.len());
    for n in batch {
        let outcome = match instance.as_mut() {
            Some(i) => i.handle(n),
            None => CallOutcome::Trap(PluginTrap {
                kind: TrapKind::Other,
                message: "no live instance".into(),
            }),
        };
        let trapped = matches!(outcome, CallOutcome::Trap(_));
        // Counted as each event returns, not once per batch, so that a rate
        // read from these counters follows time, however long a batch takes.
        match &outcome {
            CallOutcome::Ok => status.record_delivered(n.kind),
            CallOutcome::HandlerError(msg) => {
                status.record_delivered(n.kind);
                status.record_error(msg);
            }
            CallOutcome::Trap(_) => {}
        }
        if !trapped {
            status.record_returned();
        }
        out.push((outcome, StdInstant::now()));
        if trapped {
            *instance = None;
            break;
        }
    }
    out
}

impl PluginRunner {
    /// Starts the plugin's first instance (running `init`). Fails, leaving
    /// nothing running, when it cannot start. Must be called within a tokio
    /// runtime, whose timers the runner's waits use from then on.
    pub async fn start(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        services: impl Into<HostServices>,
    ) -> Result<Self, StartError> {
        Self::start_with_status(engine, plugin, services, None).await
    }

    /// Like [`PluginRunner::start`], reporting into an existing status (so a
    /// reloaded plugin keeps its counters).
    pub async fn start_with_status(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        services: impl Into<HostServices>,
        status: Option<Arc<PluginStatus>>,
    ) -> Result<Self, StartError> {
        let status = status.unwrap_or_else(|| Arc::new(PluginStatus::new(&plugin.spec.name)));
        status.set_state(PluginState::Starting);
        let parts = Parts::new(engine, plugin, services.into(), &status);
        match Supervised::start(parts, status.clone()).await {
            Ok(slot) => {
                status.set_state(PluginState::Running);
                Ok(Self { slot })
            }
            Err(e) => {
                status.set_state(PluginState::Stopped);
                status.record_failure_message(&e.to_string());
                Err(e)
            }
        }
    }

    /// The plugin's live status.
    pub fn status(&self) -> &Arc<PluginStatus> {
        &self.slot.status
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        &self.slot.parts.plugin
    }

    async fn call(&mut self, batch: Vec<NotificationRef>) -> Outcomes {
        let status = self.slot.status.clone();
        self.slot
            .blocking(move |slot, _| deliver(slot, &batch, &status))
            .await
            .unwrap_or_else(|t| vec![(CallOutcome::Trap(t), StdInstant::now())])
    }

    /// Applies one event's outcome to the status and the restart policy.
    fn settle(&mut self, outcome: CallOutcome) -> Delivery {
        match outcome {
            // Counted in `deliver`, as each event returned.
            CallOutcome::Ok => {
                self.slot.succeeded();
                Delivery::Ok
            }
            CallOutcome::HandlerError(msg) => {
                self.slot.succeeded();
                Delivery::HandlerError(msg)
            }
            CallOutcome::Trap(t) => {
                self.slot.trapped(&t);
                Delivery::Restarted
            }
        }
    }
}

impl Handler for PluginRunner {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.handle_batch(vec![n])
            .await
            .pop()
            .map(|h| h.delivery)
            .unwrap_or(Delivery::Restarted)
    }

    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    fn own_thread(&self) -> Option<String> {
        Some(format!("plugin-{}", self.slot.parts.name()))
    }

    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        if self.slot.ensure_instance().await.is_err() {
            // Stopped in its backoff or quarantine: the version is going
            // away and delivers nothing more.
            return vec![Handled {
                delivery: Delivery::Restarted,
                at: StdInstant::now(),
            }];
        }
        let outcomes = self.call(batch).await;
        let mut out = Vec::with_capacity(outcomes.len());
        for (outcome, at) in outcomes {
            let delivery = self.settle(outcome);
            let restarted = delivery == Delivery::Restarted;
            out.push(Handled { delivery, at });
            if restarted {
                break;
            }
        }
        out
    }
}

impl Drop for PluginRunner {
    fn drop(&mut self) {
        self.slot.status.set_state(PluginState::Stopped);
    }
}
