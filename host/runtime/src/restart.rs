//! One supervised instance slot: where a plugin's instance lives, what a new
//! one is built from, and the restart policy after a failure (backoff, then
//! quarantine after `max_failures` consecutive failures). The event runner
//! ([`crate::PluginRunner`]) owns one slot; a controller owns one per worker
//! ([`crate::ReconcileWorker`]).
//!
//! Invariants:
//! - After a failure the slot holds no instance until the backoff or
//!   quarantine has passed and a fresh instance started (`init` included), so
//!   nothing is ever delivered to a dead instance, and a failing plugin
//!   consumes no CPU while it waits.
//! - Guest code runs on the calling thread when it is not a tokio worker
//!   (the plugin's own thread), else on tokio's blocking pool, never on an
//!   async worker.

use std::sync::Arc;

use tokio::time::Instant;

use super::capability::cache::CacheState;
use super::capability::events::{EventRecorder, EventsState};
use super::capability::kube::{KubeClient, KubeState};
use super::capability::HostServices;
use super::engine::PluginEngine;
use super::host_state::Granted;
use super::instance::{PluginInstance, StartError};
use super::log_sink::LogSink;
use super::outcome::PluginTrap;
use super::outcome::TrapKind;
use super::plugin::LoadedPlugin;
use super::status::{PluginState, PluginStatus};
use super::stop::{Stop, Stopped};
use kube_informer::cache_view::CacheView;

/// What a new instance is built from. The API client and the Event recorder
/// are the plugin's, shared by its successive instances and by all its
/// workers (a restart does not refill the token bucket or forget an Event
/// series).
#[derive(Clone)]
pub(crate) struct Parts {
    pub(crate) engine: Arc<PluginEngine>,
    pub(crate) plugin: Arc<LoadedPlugin>,
    pub(crate) cache: Arc<dyn CacheView>,
    pub(crate) log: Arc<LogSink>,
    pub(crate) kube: Option<Arc<KubeClient>>,
    pub(crate) events: Option<Arc<EventRecorder>>,
    /// The version's stop signal: it ends a backoff or quarantine at once.
    pub(crate) stop: Arc<Stop>,
}

impl Parts {
    /// The parts of one plugin, reporting into `status`.
    pub(crate) fn new(
        engine: Arc<PluginEngine>,
        plugin: Arc<LoadedPlugin>,
        services: HostServices,
        status: &Arc<PluginStatus>,
    ) -> Self {
        let name: Arc<str> = plugin.spec.name.as_str().into();
        let log = Arc::new(LogSink::new(
            name.clone(),
            engine.config().log,
            status.clone(),
        ));
        let kube = services.api.clone().map(|api| {
            Arc::new(KubeClient::new(
                name.clone(),
                &services,
                api,
                status.clone(),
            ))
        });
        let events = kube
            .clone()
            .map(|k| Arc::new(EventRecorder::new(k, &name, services.identity.clone())));
        Self {
            engine,
            plugin,
            cache: services.cache,
            log,
            kube,
            events,
            stop: services.stop,
        }
    }

    /// The capabilities of one new instance.
    pub(crate) fn granted(&self) -> Granted {
        let name: Arc<str> = self.plugin.spec.name.as_str().into();
        Granted {
            cache: CacheState::new(name, self.cache.clone(), self.plugin.readable.clone()),
            log: self.log.clone(),
            kube: KubeState::new(self.kube.clone()),
            events: EventsState::new(self.events.clone()),
        }
    }

    /// The plugin's name.
    pub(crate) fn name(&self) -> &str {
        &self.plugin.spec.name
    }
}

/// One instance slot and its restart policy.
pub(crate) struct Supervised {
    pub(crate) parts: Parts,
    pub(crate) status: Arc<PluginStatus>,
    /// The live instance; `None` after a failure until a restart succeeded.
    pub(crate) instance: Option<PluginInstance>,
    /// The runtime whose timers the backoff and quarantine wait on.
    rt: tokio::runtime::Handle,
    /// Set after a failure: no live instance until this instant has passed
    /// and a restart succeeded.
    restart_at: Option<Instant>,
    consecutive_failures: u32,
}

impl Supervised {
    /// Starts the first instance (running `init`). Must be called within a
    /// tokio runtime, whose timers the waits use from then on.
    pub(crate) async fn start(parts: Parts, status: Arc<PluginStatus>) -> Result<Self, StartError> {
        let mut s = Self {
            parts,
            status,
            instance: None,
            rt: tokio::runtime::Handle::current(),
            restart_at: None,
            consecutive_failures: 0,
        };
        s.start_instance().await?;
        Ok(s)
    }

    /// Runs `f` on the instance slot where blocking is allowed: right here on
    /// the plugin's own thread (no tokio context), else on tokio's blocking
    /// pool, so that guest code never runs on an async worker.
    pub(crate) async fn blocking<R: Send + 'static>(
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

    /// Records a call that returned (ok or an error result): the failure
    /// streak ends.
    pub(crate) fn succeeded(&mut self) {
        self.consecutive_failures = 0;
        self.status.set_consecutive_failures(0);
    }

    /// Records a trap: drops the instance and schedules the restart.
    pub(crate) fn trapped(&mut self, t: &PluginTrap) {
        tracing::warn!(
            plugin = %self.parts.name(),
            kind = %t.kind,
            "plugin trapped: {}",
            t.message
        );
        self.status.record_trap(t.kind, &t.message);
        self.instance = None;
        self.fail();
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
                plugin = %self.parts.name(),
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
    /// starts; `Err(Stopped)` at once when the version's stop is raised
    /// meanwhile (no instance is built then).
    pub(crate) async fn ensure_instance(&mut self) -> Result<(), Stopped> {
        while let Some(at) = self.restart_at {
            // Created in the plugin's runtime, so it can be awaited from the
            // plugin's own thread too.
            let sleep = {
                let _in_rt = self.rt.enter();
                tokio::time::sleep_until(at)
            };
            let stop = self.parts.stop.clone();
            let what = match self.status.state() {
                PluginState::Quarantined => format!(
                    "the end of its quarantine ({} s after {} consecutive failures)",
                    self.parts.plugin.spec.limits.quarantine_seconds, self.consecutive_failures
                ),
                _ => "the end of its restart backoff".to_string(),
            };
            {
                let _w = stop.waiting_on(what);
                tokio::select! {
                    () = sleep => {}
                    () = stop.raised() => return Err(Stopped),
                }
            }
            self.status.set_state(PluginState::Starting);
            match self.start_instance().await {
                Ok(()) => {
                    self.restart_at = None;
                    self.status.record_restart();
                    self.status.set_state(PluginState::Running);
                    tracing::info!(plugin = %self.parts.name(), "plugin instance restarted");
                }
                Err(e) => {
                    match &e {
                        StartError::Trap(t) => self.status.record_trap(t.kind, &t.message),
                        StartError::Init(m) => self.status.record_failure_message(m),
                    }
                    tracing::warn!(plugin = %self.parts.name(), error = %e, "plugin restart failed");
                    self.fail();
                }
            }
        }
        match self.parts.stop.is_raised() {
            true if self.instance.is_none() => Err(Stopped),
            _ => Ok(()),
        }
    }
}
