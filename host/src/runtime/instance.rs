//! One live instance of a plugin: a `Store` with its own WASI context, memory
//! cap, fuel and epoch deadline, and the component instance in it.
//!
//! Invariant: every call into the guest (instantiation, `init`, `on-event`) runs
//! with a fresh fuel budget and deadline and ends in a [`CallOutcome`]; after a
//! trap the instance must be dropped (wasmtime refuses to re-enter it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;

use super::bindings::EventHandler;
use super::convert;
use super::engine::PluginEngine;
use super::host_state::HostState;
use super::limits::INIT_BUDGET_FACTOR;
use super::log_sink::LogSink;
use super::outcome::{classify, CallOutcome, PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use crate::cache_view::CacheView;
use crate::notification::Notification;

/// Why an instance could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// Instantiation or `init` trapped.
    #[error("{0}")]
    Trap(PluginTrap),
    /// `init` returned an error.
    #[error("init failed: {0}")]
    Init(String),
}

/// A live plugin instance.
pub struct PluginInstance {
    store: Store<HostState>,
    bindings: EventHandler,
    fuel: u64,
    deadline_ticks: u64,
    timeout: Duration,
    slack: Duration,
}

impl PluginInstance {
    /// Instantiates the plugin and runs its `init` with the manifest's config,
    /// under [`INIT_BUDGET_FACTOR`] times the per-event budget.
    pub fn start(
        engine: &PluginEngine,
        plugin: &LoadedPlugin,
        cache: Arc<dyn CacheView>,
        log: Arc<LogSink>,
    ) -> Result<Self, StartError> {
        let limits = &plugin.spec.limits;
        let state = HostState::new(
            plugin.spec.name.as_str().into(),
            cache,
            plugin.readable.clone(),
            log,
            limits.memory_bytes(),
        );
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        let timeout = limits.timeout();
        let _ = store.set_fuel(limits.fuel_per_event.saturating_mul(INIT_BUDGET_FACTOR));
        store.set_epoch_deadline(
            engine
                .deadline_ticks(timeout)
                .saturating_mul(INIT_BUDGET_FACTOR),
        );
        let bindings = match plugin.pre.instantiate(&mut store) {
            Ok(b) => b,
            Err(e) => {
                let refused = store.data().limiter.refused();
                return Err(StartError::Trap(classify(&e, refused)));
            }
        };
        match bindings
            .wasm_informer_plugin_handler()
            .call_init(&mut store, &plugin.spec.config_json)
        {
            Ok(Ok(())) => {}
            Ok(Err(msg)) => return Err(StartError::Init(msg)),
            Err(e) => {
                let refused = store.data().limiter.refused();
                return Err(StartError::Trap(classify(&e, refused)));
            }
        }
        Ok(Self {
            store,
            bindings,
            fuel: limits.fuel_per_event,
            deadline_ticks: engine.deadline_ticks(timeout),
            timeout,
            slack: engine.config().epoch_tick,
        })
    }

    /// Delivers one event.
    pub fn handle(&mut self, n: &Notification) -> CallOutcome {
        let event = convert::event(n);
        self.call(&event)
    }

    /// Delivers an already converted event (used by benchmarks to separate the
    /// cost of conversion from the call).
    pub fn call(&mut self, event: &super::bindings::wit::Event) -> CallOutcome {
        self.store.data_mut().limiter.reset();
        // Fuel metering is always on in this engine, so this cannot fail.
        let _ = self.store.set_fuel(self.fuel);
        self.store.set_epoch_deadline(self.deadline_ticks);
        let start = Instant::now();
        let r = self
            .bindings
            .wasm_informer_plugin_handler()
            .call_on_event(&mut self.store, event);
        match r {
            Ok(Ok(())) => self.check_overrun(start, CallOutcome::Ok),
            Ok(Err(msg)) => self.check_overrun(start, CallOutcome::HandlerError(msg)),
            Err(e) => CallOutcome::Trap(classify(&e, self.store.data().limiter.refused())),
        }
    }

    /// A call that returned on its own but well past its deadline (it slept in
    /// a host call, where epochs cannot interrupt it) counts as a deadline trap.
    fn check_overrun(&self, start: Instant, ok: CallOutcome) -> CallOutcome {
        let took = start.elapsed();
        if took > self.timeout + self.slack * 2 {
            return CallOutcome::Trap(PluginTrap {
                kind: TrapKind::Deadline,
                message: format!(
                    "call returned after {} ms, past its deadline of {} ms",
                    took.as_millis(),
                    self.timeout.as_millis()
                ),
            });
        }
        ok
    }

    /// Fuel left from the last call's budget.
    pub fn fuel_remaining(&self) -> u64 {
        self.store.get_fuel().unwrap_or(0)
    }

    /// Fuel consumed by the last call.
    pub fn fuel_consumed(&self) -> u64 {
        self.fuel.saturating_sub(self.fuel_remaining())
    }
}
