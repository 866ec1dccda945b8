//! One live instance of a plugin: a `Store` with its own WASI context, memory
//! cap, fuel and epoch deadline, and the component instance in it.
//!
//! Invariant: every call into the guest (instantiation, `init`, `on-event`) runs
//! with a fresh fuel budget and deadline and ends in a [`CallOutcome`]; after a
//! trap the instance must be dropped (wasmtime refuses to re-enter it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Func, TypedFunc};
use wasmtime::Store;

use super::bindings::{EventHandler, HANDLER_EXPORT};
use super::convert::borrowed;
use super::engine::PluginEngine;
use super::host_state::HostState;
use super::limits::INIT_BUDGET_FACTOR;
use super::log_sink::LogSink;
use super::outcome::{classify, CallOutcome, PluginTrap, TrapKind};
use super::plugin::LoadedPlugin;
use kube_informer::cache_view::CacheView;
use kube_informer::notification::Notification;

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
    /// `handler.on-event`, type-checked against [`borrowed::Event`].
    on_event: Func,
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
        let instance = match plugin.pre.instance_pre().instantiate(&mut store) {
            Ok(i) => i,
            Err(e) => {
                let refused = store.data().limiter.refused();
                return Err(StartError::Trap(classify(&e, refused)));
            }
        };
        let link_error = |e: wasmtime::Error| {
            StartError::Trap(PluginTrap {
                kind: TrapKind::Other,
                message: format!("{e:?}"),
            })
        };
        let bindings = EventHandler::new(&mut store, &instance).map_err(link_error)?;
        let on_event = instance
            .get_export_index(&mut store, None, HANDLER_EXPORT)
            .and_then(|iface| instance.get_export_index(&mut store, Some(&iface), "on-event"))
            .and_then(|idx| instance.get_func(&mut store, idx))
            .ok_or_else(|| link_error(wasmtime::Error::msg("no export handler.on-event")))?;
        on_event
            .typed::<(borrowed::Event<'static>,), (Result<(), String>,)>(&store)
            .map_err(link_error)?;
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
            on_event,
            fuel: limits.fuel_per_event,
            deadline_ticks: engine.deadline_ticks(timeout),
            timeout,
            slack: engine.config().epoch_tick,
        })
    }

    /// Delivers one event. The cached object is lowered straight into the
    /// guest's memory: this is the only copy of it made for the plugin.
    pub fn handle(&mut self, n: &Notification) -> CallOutcome {
        let event = borrowed::event(n);
        // SAFETY: `on_event` was type-checked in `start` against
        // `(borrowed::Event<'static>,) -> (result<_, string>,)`; the type here
        // differs only in its lifetime, which does not change its component
        // type or its lowering.
        let f = unsafe {
            TypedFunc::<(borrowed::Event<'_>,), (Result<(), String>,)>::new_unchecked(self.on_event)
        };
        self.arm();
        let start = Instant::now();
        let r = f.call(&mut self.store, (event,)).map(|(r,)| r);
        self.finish(start, r)
    }

    /// Delivers an event already converted to the owned WIT record, through
    /// the generated bindings (benchmarks compare it with [`Self::handle`]).
    pub fn call(&mut self, event: &super::bindings::wit::Event) -> CallOutcome {
        self.arm();
        let start = Instant::now();
        let r = self
            .bindings
            .wasm_informer_plugin_handler()
            .call_on_event(&mut self.store, event);
        self.finish(start, r)
    }

    /// Fresh fuel and deadline for one call.
    fn arm(&mut self) {
        self.store.data_mut().limiter.reset();
        // Fuel metering is always on in this engine, so this cannot fail.
        let _ = self.store.set_fuel(self.fuel);
        self.store.set_epoch_deadline(self.deadline_ticks);
    }

    fn finish(&self, start: Instant, r: wasmtime::Result<Result<(), String>>) -> CallOutcome {
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
