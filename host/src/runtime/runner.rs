//! Runs one plugin: owns its instance on a dedicated OS thread, implements
//! [`Handler`] for the plugin's listener, and applies the restart policy
//! (backoff after a failure, quarantine after `max_failures` consecutive ones).
//!
//! Why a dedicated thread: Wasm runs synchronously there, so a plugin that
//! spins until its deadline or sleeps through the WASI clocks occupies only its
//! own thread, never a tokio worker used by the dispatcher or the reflectors;
//! and the synchronous call path is the fastest wasmtime offers (no fiber
//! switch per call). Waiting (backoff, quarantine) happens in
//! [`PluginRunner::handle`] as a tokio timer, so it costs no CPU and no thread.
//! The price is one channel send and one oneshot wake-up per call, about 8 us
//! of scheduling on the shared 2-core test machine, so the runner takes
//! notifications in batches ([`MAX_BATCH`]): whatever the listener already
//! has queued goes over in one hand-off and comes back as one reply with a
//! completion time per event. An idle plugin still gets each event at once
//! (a batch of one); a busy one pays the hand-off once per batch. The
//! alternative, wasmtime's
//! async API with epoch yielding on the tokio workers, would still run guest
//! code on the workers between yields (a busy plugin would share the threads
//! the reflectors use) and costs a fiber switch per call (1.2 us against
//! 0.7 us per call in the toolchain measurements). Its one advantage, which
//! this design gives up: a guest blocked in a WASI sleep past its deadline is
//! stopped only when the sleep returns (the call then counts as a deadline
//! trap), not at the deadline itself.
//!
//! Invariant: after a trap the instance is dropped, the rest of the batch is
//! not delivered and the trapped event ends as [`Delivery::Restarted`]; the
//! next call first waits out the backoff or
//! quarantine, then builds a fresh instance, so no event is ever delivered to a
//! dead instance and a failing plugin never consumes CPU while it waits.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant as StdInstant;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::engine::PluginEngine;
use super::instance::{PluginInstance, StartError};
use super::log_sink::LogSink;
use super::outcome::{CallOutcome, PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use super::status::{PluginState, PluginStatus};
use crate::cache_view::CacheView;
use crate::handler::{Delivery, Handled, Handler};
use crate::notification::NotificationRef;

/// Most notifications handed to the plugin thread in one message. Large
/// enough that a backlog costs a fraction of a microsecond of hand-off per
/// event; small enough that a batch of slow events (32 x the deadline at
/// worst) never holds the listener's stats or a drain for long.
pub const MAX_BATCH: usize = 32;

/// The outcome of one event and when the guest returned.
type Outcomes = Vec<(CallOutcome, StdInstant)>;

enum Command {
    Start(oneshot::Sender<Result<(), StartError>>),
    Events(Vec<NotificationRef>, oneshot::Sender<Outcomes>),
}

/// Runs one plugin and reports its [`PluginStatus`].
pub struct PluginRunner {
    plugin: Arc<LoadedPlugin>,
    status: Arc<PluginStatus>,
    tx: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    /// Set after a failure: no live instance until this instant has passed and
    /// a restart succeeded.
    restart_at: Option<Instant>,
    consecutive_failures: u32,
}

impl std::fmt::Debug for PluginRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRunner")
            .field("plugin", &self.plugin.spec.name)
            .field("state", &self.status.state())
            .finish()
    }
}

fn worker(
    engine: Arc<PluginEngine>,
    plugin: Arc<LoadedPlugin>,
    cache: Arc<dyn CacheView>,
    log: Arc<LogSink>,
    rx: mpsc::Receiver<Command>,
) {
    let mut instance: Option<PluginInstance> = None;
    for cmd in rx {
        match cmd {
            Command::Start(reply) => {
                instance = None;
                let r = PluginInstance::start(&engine, &plugin, cache.clone(), log.clone());
                let r = r.map(|i| instance = Some(i));
                let _ = reply.send(r);
            }
            Command::Events(batch, reply) => {
                let mut out = Vec::with_capacity(batch.len());
                for n in &batch {
                    let outcome = match instance.as_mut() {
                        Some(i) => i.handle(n),
                        None => CallOutcome::Trap(PluginTrap {
                            kind: TrapKind::Other,
                            message: "no live instance".into(),
                        }),
                    };
                    let trapped = matches!(outcome, CallOutcome::Trap(_));
                    out.push((outcome, StdInstant::now()));
                    if trapped {
                        instance = None;
                        break;
                    }
                }
                // The notifications are released here, on the plugin thread,
                // before the reply wakes the listener.
                drop(batch);
                let _ = reply.send(out);
            }
        }
    }
}

impl PluginRunner {
    /// Starts the plugin's thread and its first instance (running `init`).
    /// Fails, leaving nothing running, when the first instance cannot start.
    pub async fn start(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        cache: Arc<dyn CacheView>,
    ) -> Result<Self, StartError> {
        Self::start_with_status(engine, plugin, cache, None).await
    }

    /// Like [`PluginRunner::start`], reporting into an existing status (so a
    /// reloaded plugin keeps its counters).
    pub async fn start_with_status(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        cache: Arc<dyn CacheView>,
        status: Option<Arc<PluginStatus>>,
    ) -> Result<Self, StartError> {
        let status = status.unwrap_or_else(|| Arc::new(PluginStatus::new(&plugin.spec.name)));
        status.set_state(PluginState::Starting);
        let log = Arc::new(LogSink::new(
            plugin.spec.name.as_str().into(),
            engine.config().log,
            status.clone(),
        ));
        let (tx, rx) = mpsc::channel();
        let thread = {
            let plugin = plugin.clone();
            std::thread::Builder::new()
                .name(format!("plugin-{}", plugin.spec.name))
                .spawn(move || worker(engine, plugin, cache, log, rx))
                .map_err(|e| {
                    StartError::Trap(PluginTrap {
                        kind: TrapKind::Other,
                        message: format!("cannot spawn plugin thread: {e}"),
                    })
                })?
        };
        let mut runner = Self {
            plugin,
            status,
            tx: Some(tx),
            thread: Some(thread),
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
        &self.plugin
    }

    async fn start_instance(&mut self) -> Result<(), StartError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Start(reply));
        rx.await.unwrap_or_else(|_| Err(thread_gone()))
    }

    async fn call(&mut self, batch: Vec<NotificationRef>) -> Outcomes {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Events(batch, reply));
        rx.await
            .unwrap_or_else(|_| vec![(CallOutcome::Trap(thread_gone_trap()), StdInstant::now())])
    }

    /// Applies one event's outcome to the status and the restart policy.
    fn settle(&mut self, kind: crate::notification::EventKind, outcome: CallOutcome) -> Delivery {
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
                    plugin = %self.plugin.spec.name,
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

    fn send(&self, cmd: Command) {
        if let Some(tx) = &self.tx {
            // A send only fails when the thread is gone; the reply channel
            // then reports it.
            let _ = tx.send(cmd);
        }
    }

    /// Counts a failure and schedules the restart: after a backoff, or after
    /// the quarantine period once `max_failures` consecutive failures happened.
    fn fail(&mut self) {
        let limits = &self.plugin.spec.limits;
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.status
            .set_consecutive_failures(self.consecutive_failures);
        let now = Instant::now();
        if self.consecutive_failures >= limits.max_failures {
            self.status.set_state(PluginState::Quarantined);
            self.status.record_quarantine();
            tracing::warn!(
                plugin = %self.plugin.spec.name,
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
            tokio::time::sleep_until(at).await;
            self.status.set_state(PluginState::Starting);
            match self.start_instance().await {
                Ok(()) => {
                    self.restart_at = None;
                    self.status.record_restart();
                    self.status.set_state(PluginState::Running);
                    tracing::info!(plugin = %self.plugin.spec.name, "plugin instance restarted");
                }
                Err(e) => {
                    match &e {
                        StartError::Trap(t) => self.status.record_trap(t.kind, &t.message),
                        StartError::Init(m) => self.status.record_failure_message(m),
                    }
                    tracing::warn!(plugin = %self.plugin.spec.name, error = %e, "plugin restart failed");
                    self.fail();
                }
            }
        }
    }
}

fn thread_gone_trap() -> PluginTrap {
    PluginTrap {
        kind: TrapKind::Other,
        message: "plugin thread is gone".into(),
    }
}

fn thread_gone() -> StartError {
    StartError::Trap(thread_gone_trap())
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

    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        self.ensure_instance().await;
        let kinds: Vec<_> = batch.iter().map(|n| n.kind).collect();
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
        // Closing the channel ends the thread after its current call (bounded
        // by the call's deadline); it is not joined here so that dropping a
        // runner never blocks an async task.
        self.tx = None;
        self.thread.take();
        self.status.set_state(PluginState::Stopped);
    }
}
