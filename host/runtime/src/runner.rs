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

use tokio::time::Instant;

use super::capability::cache::CacheState;
use super::capability::events::{EventRecorder, EventsState};
use super::capability::kube::{KubeClient, KubeState};
use super::capability::HostServices;
use super::engine::PluginEngine;
use super::host_state::Granted;
use super::instance::{PluginInstance, StartError};
use super::log_sink::LogSink;
use super::outcome::{CallOutcome, PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use super::status::{PluginState, PluginStatus};
use kube_informer::cache_view::CacheView;
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::{EventKind, NotificationRef};

/// Most notifications handed to the plugin in one batch. Large enough that a
/// backlog costs a fraction of a microsecond of hand-off per event; small
/// enough that a batch of slow events (32 x the deadline at worst) never holds
/// the listener's stats or a drain for long.
pub const MAX_BATCH: usize = 32;

/// The outcome of one event and when the guest returned.
type Outcomes = Vec<(CallOutcome, StdInstant)>;

/// What a new instance is built from. The API client and the Event recorder
/// are the plugin's, shared by its successive instances (a restart does not
/// refill the token bucket or forget an Event series).
#[derive(Clone)]
struct Parts {
    engine: Arc<PluginEngine>,
    plugin: Arc<LoadedPlugin>,
    cache: Arc<dyn CacheView>,
    log: Arc<LogSink>,
    kube: Option<Arc<KubeClient>>,
    events: Option<Arc<EventRecorder>>,
}

impl Parts {
    /// The capabilities of one new instance.
    fn granted(&self) -> Granted {
        let name: Arc<str> = self.plugin.spec.name.as_str().into();
        Granted {
            cache: CacheState::new(name, self.cache.clone(), self.plugin.readable.clone()),
            log: self.log.clone(),
            kube: KubeState::new(self.kube.clone()),
            events: EventsState::new(self.events.clone()),
        }
    }
}

/// Runs one plugin and reports its [`PluginStatus`].
pub struct PluginRunner {
    parts: Parts,
    status: Arc<PluginStatus>,
    /// The live instance; `None` after a trap until a restart succeeded.
    instance: Option<PluginInstance>,
    /// The runtime whose timers the backoff and quarantine wait on.
    rt: tokio::runtime::Handle,
    /// Set after a failure: no live instance until this instant has passed and
    /// a restart succeeded.
    restart_at: Option<Instant>,
    consecutive_failures: u32,
}

impl std::fmt::Debug for PluginRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRunner")
            .field("plugin", &self.parts.plugin.spec.name)
            .field("state", &self.status.state())
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
        let services = services.into();
        let status = status.unwrap_or_else(|| Arc::new(PluginStatus::new(&plugin.spec.name)));
        status.set_state(PluginState::Starting);
        let name: Arc<str> = plugin.spec.name.as_str().into();
        let log = Arc::new(LogSink::new(
            name.clone(),
            engine.config().log,
            status.clone(),
        ));
        let kube = services.api.clone().map(|api| {
            Arc::new(KubeClient::new(
                name.clone(),
                services.grants.clone(),
                services.dry_run,
                api,
                status.clone(),
            ))
        });
        let events = kube
            .clone()
            .map(|k| Arc::new(EventRecorder::new(k, &name, services.identity.clone())));
        let mut runner = Self {
            parts: Parts {
                engine,
                plugin,
                cache: services.cache,
                log,
                kube,
                events,
            },
            status,
            instance: None,
            rt: tokio::runtime::Handle::current(),
            restart_at: None,
            consecutive_failures: 0,
        };
        match runner.start_instance().await {
            Ok(()) => {
                runner.status.set_state(PluginState::Running);
                Ok(runner)
            }
            Err(e) => {
                runner.status.set_state(PluginState::Stopped);
                runner.status.record_failure_message(&e.to_string());
                Err(e)
            }
        }
    }

    /// The plugin's live status.
    pub fn status(&self) -> &Arc<PluginStatus> {
        &self.status
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        &self.parts.plugin
    }

    /// Runs `f` on the instance slot where blocking is allowed: right here on
    /// the runner's own thread (no tokio context), else on tokio's blocking
    /// pool, so that guest code never runs on an async worker.
    async fn blocking<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Option<PluginInstance>, &Parts) -> R + Send + 'static,
    ) -> Result<R, PluginTrap> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Ok(f(&mut self.instance, &self.parts));
        }
        let mut slot = self.instance.take();
        let parts = self.parts.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let r = f(&mut slot, &parts);
            (slot, r)
        })
        .await;
        match joined {
            Ok((slot, r)) => {
                self.instance = slot;
                Ok(r)
            }
            Err(e) => Err(PluginTrap {
                kind: TrapKind::Other,
                message: format!("plugin call failed on the blocking pool: {e}"),
            }),
        }
    }

    async fn start_instance(&mut self) -> Result<(), StartError> {
        self.blocking(|slot, p| {
            *slot = None;
            let i = PluginInstance::start(&p.engine, &p.plugin, p.granted())?;
            *slot = Some(i);
            Ok(())
        })
        .await
        .unwrap_or_else(|t| Err(StartError::Trap(t)))
    }

    async fn call(&mut self, batch: Vec<NotificationRef>) -> Outcomes {
        let status = self.status.clone();
        self.blocking(move |slot, _| deliver(slot, &batch, &status))
            .await
            .unwrap_or_else(|t| vec![(CallOutcome::Trap(t), StdInstant::now())])
    }

    /// Applies one event's outcome to the status and the restart policy.
    fn settle(&mut self, kind: EventKind, outcome: CallOutcome) -> Delivery {
        match outcome {
            CallOutcome::Ok => {
                self.consecutive_failures = 0;
                self.status.set_consecutive_failures(0);
                self.status.record_delivered(kind);
                Delivery::Ok
            }
            CallOutcome::HandlerError(msg) => {
                self.consecutive_failures = 0;
                self.status.set_consecutive_failures(0);
                self.status.record_delivered(kind);
                self.status.record_error(&msg);
                Delivery::HandlerError(msg)
            }
            CallOutcome::Trap(t) => {
                tracing::warn!(
                    plugin = %self.parts.plugin.spec.name,
                    kind = %t.kind,
                    "plugin trapped: {}",
                    t.message
                );
                self.status.record_trap(t.kind, &t.message);
                self.fail();
                Delivery::Restarted
            }
        }
    }

    /// Counts a failure and schedules the restart: after a backoff, or after
    /// the quarantine period once `max_failures` consecutive failures happened.
    fn fail(&mut self) {
        let limits = &self.parts.plugin.spec.limits;
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.status
            .set_consecutive_failures(self.consecutive_failures);
        let now = Instant::now();
        if self.consecutive_failures >= limits.max_failures {
            self.status.set_state(PluginState::Quarantined);
            self.status.record_quarantine();
            tracing::warn!(
                plugin = %self.parts.plugin.spec.name,
                failures = self.consecutive_failures,
                quarantine_s = limits.quarantine_seconds,
                "plugin quarantined after consecutive failures"
            );
            self.restart_at = Some(now + limits.quarantine());
        } else {
            self.status.set_state(PluginState::BackingOff);
            self.restart_at = Some(now + limits.backoff(self.consecutive_failures));
        }
    }

    /// Waits out the backoff or quarantine and builds a new instance, until one
    /// starts.
    async fn ensure_instance(&mut self) {
        while let Some(at) = self.restart_at {
            // Created in the runner's runtime, so it can be awaited from the
            // runner's own thread too.
            let sleep = {
                let _in_rt = self.rt.enter();
                tokio::time::sleep_until(at)
            };
            sleep.await;
            self.status.set_state(PluginState::Starting);
            match self.start_instance().await {
                Ok(()) => {
                    self.restart_at = None;
                    self.status.record_restart();
                    self.status.set_state(PluginState::Running);
                    tracing::info!(plugin = %self.parts.plugin.spec.name, "plugin instance restarted");
                }
                Err(e) => {
                    match &e {
                        StartError::Trap(t) => self.status.record_trap(t.kind, &t.message),
                        StartError::Init(m) => self.status.record_failure_message(m),
                    }
                    tracing::warn!(plugin = %self.parts.plugin.spec.name, error = %e, "plugin restart failed");
                    self.fail();
                }
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
        Some(format!("plugin-{}", self.parts.plugin.spec.name))
    }

    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        self.ensure_instance().await;
        let kinds: Vec<EventKind> = batch.iter().map(|n| n.kind).collect();
        let outcomes = self.call(batch).await;
        let mut out = Vec::with_capacity(outcomes.len());
        for (kind, (outcome, at)) in kinds.into_iter().zip(outcomes) {
            let delivery = self.settle(kind, outcome);
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
        self.status.set_state(PluginState::Stopped);
    }
}
