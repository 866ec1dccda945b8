//! One live instance of a plugin: a `Store` with its own WASI context, memory
//! cap, fuel and epoch deadline, and the component instance in it, for
//! whichever world the component targets.
//!
//! Invariant: every call into the guest (instantiation, `init`, `on-event`,
//! `reconcile`) runs with a fresh fuel budget and deadline and ends in a
//! [`CallOutcome`]; the deadline bounds the guest's own time (time blocked in
//! API calls is bounded by the API budget instead, see `capability/clock.rs`);
//! after a trap the instance must be dropped (wasmtime refuses to re-enter it).

use std::time::Duration;

use wasmtime::component::{Func, TypedFunc};
use wasmtime::{Store, UpdateDeadline};

use super::capability::clock::CallClock;
use super::engine::PluginEngine;
use super::host_state::{Granted, HostState};
use super::limits::INIT_BUDGET_FACTOR;
use super::outcome::{classify, CallOutcome, PluginTrap, TrapKind};
use super::plugin::{LoadedPlugin, Pre};
use super::world::v0_1::{self, borrowed};
use super::world::v0_2;
use super::world::World;
use kube_informer::notification::{EventKind, Notification};

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

/// The instance's exports, by world.
enum Exports {
    HandlerV01 {
        /// `handler.on-event`, type-checked against [`borrowed::Event`].
        on_event: Func,
    },
    HandlerV02(v0_2::EventHandler),
    ControllerV02(v0_2::Controller),
}

/// A request to reconcile one key (the `controller` world).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRequest {
    /// The primary resource.
    pub resource: String,
    /// Namespace, for namespaced objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The cache key.
    pub key: String,
}

/// How a reconcile ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconcileOutcome {
    /// Done until the next change.
    Done,
    /// Reconcile again after this long.
    RequeueAfter(Duration),
    /// Retry with the queue's backoff.
    Retry(String),
    /// Do not retry.
    Terminal(String),
    /// The instance trapped and must be discarded.
    Trap(PluginTrap),
}

/// A live plugin instance.
pub struct PluginInstance {
    store: Store<HostState>,
    exports: Exports,
    fuel: u64,
    deadline_ticks: u64,
    slack: Duration,
}

/// Epoch ticks covering `d`, rounded up, plus one.
fn ticks(d: Duration, tick: Duration) -> u64 {
    (d.as_nanos().div_ceil(tick.as_nanos().max(1)) as u64).saturating_add(1)
}

fn link_error(e: wasmtime::Error) -> StartError {
    StartError::Trap(PluginTrap {
        kind: TrapKind::Other,
        message: format!("{e:?}"),
    })
}

impl PluginInstance {
    /// Instantiates the plugin and runs its `init` with the manifest's config,
    /// under [`INIT_BUDGET_FACTOR`] times the per-event budget.
    pub fn start(
        engine: &PluginEngine,
        plugin: &LoadedPlugin,
        granted: Granted,
    ) -> Result<Self, StartError> {
        let limits = &plugin.spec.limits;
        let timeout = limits.timeout();
        let state = HostState::new(
            granted,
            limits.memory_bytes(),
            timeout,
            plugin.spec.kube.api_time_per_event,
        );
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        // When the epoch deadline fires, the guest has used up its time only
        // if the time blocked in host calls is not what took it there.
        let tick = engine.config().epoch_tick;
        store.epoch_deadline_callback(move |ctx| {
            let left = ctx.data().clock.remaining();
            if left.is_zero() {
                Err(wasmtime::Trap::Interrupt.into())
            } else {
                Ok(UpdateDeadline::Continue(ticks(left, tick)))
            }
        });
        let factor = INIT_BUDGET_FACTOR as u32;
        let _ = store.set_fuel(limits.fuel_per_event.saturating_mul(INIT_BUDGET_FACTOR));
        let tenure = store.data().kube.tenure();
        store.data_mut().clock.start(factor, tenure);
        store.set_epoch_deadline(
            engine
                .deadline_ticks(timeout)
                .saturating_mul(INIT_BUDGET_FACTOR),
        );
        let trap = |store: &Store<HostState>, e: wasmtime::Error| {
            StartError::Trap(classify(&e, store.data().limiter.refused()))
        };
        // What `init` answered: a trap, the plugin's own error, or ready.
        let initialised =
            |store: &Store<HostState>, r: wasmtime::Result<Result<(), String>>| match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(msg)) => Err(StartError::Init(msg)),
                Err(e) => Err(trap(store, e)),
            };
        let config = &plugin.spec.config_json;
        let exports = match &plugin.pre {
            Pre::HandlerV01(pre) => {
                let instance = pre
                    .instance_pre()
                    .instantiate(&mut store)
                    .map_err(|e| trap(&store, e))?;
                let bindings =
                    v0_1::EventHandler::new(&mut store, &instance).map_err(link_error)?;
                let export = World::EventHandlerV01.export();
                let on_event = instance
                    .get_export_index(&mut store, None, &export)
                    .and_then(|iface| {
                        instance.get_export_index(&mut store, Some(&iface), "on-event")
                    })
                    .and_then(|idx| instance.get_func(&mut store, idx))
                    .ok_or_else(|| {
                        link_error(wasmtime::Error::msg("no export handler.on-event"))
                    })?;
                on_event
                    .typed::<(borrowed::Event<'static>,), (Result<(), String>,)>(&store)
                    .map_err(link_error)?;
                let r = bindings
                    .wasm_informer_plugin_handler()
                    .call_init(&mut store, config);
                initialised(&store, r)?;
                Exports::HandlerV01 { on_event }
            }
            Pre::HandlerV02(pre) => {
                let bindings = pre.instantiate(&mut store).map_err(|e| trap(&store, e))?;
                let r = bindings
                    .wasm_informer_plugin_handler()
                    .call_init(&mut store, config);
                initialised(&store, r)?;
                Exports::HandlerV02(bindings)
            }
            Pre::ControllerV02(pre) => {
                let bindings = pre.instantiate(&mut store).map_err(|e| trap(&store, e))?;
                let r = bindings
                    .wasm_informer_plugin_reconciler()
                    .call_init(&mut store, config);
                initialised(&store, r)?;
                Exports::ControllerV02(bindings)
            }
        };
        store.data_mut().objects.clear();
        Ok(Self {
            store,
            exports,
            fuel: limits.fuel_per_event,
            deadline_ticks: engine.deadline_ticks(timeout),
            slack: tick,
        })
    }

    /// The world the instance runs.
    pub fn world(&self) -> World {
        match self.exports {
            Exports::HandlerV01 { .. } => World::EventHandlerV01,
            Exports::HandlerV02(_) => World::EventHandlerV02,
            Exports::ControllerV02(_) => World::ControllerV02,
        }
    }

    /// Delivers one event. For a 0.1 plugin the cached object is lowered
    /// straight into the guest's memory (the only copy made for it); a 0.2
    /// plugin gets handles to the shared objects and copies what it reads.
    pub fn handle(&mut self, n: &Notification) -> CallOutcome {
        arm(&mut self.store, self.fuel, self.deadline_ticks);
        let r = match &self.exports {
            Exports::HandlerV01 { on_event } => {
                let texts = borrowed::Texts::of(n);
                let event = borrowed::event(n, &texts);
                // SAFETY: `on_event` was type-checked in `start` against
                // `(borrowed::Event<'static>,) -> (result<_, string>,)`; the
                // type here differs only in its lifetime, which does not
                // change its component type or its lowering.
                let f = unsafe {
                    TypedFunc::<(borrowed::Event<'_>,), (Result<(), String>,)>::new_unchecked(
                        *on_event,
                    )
                };
                f.call(&mut self.store, (event,)).map(|(r,)| r)
            }
            Exports::HandlerV02(bindings) => handle_v02(&mut self.store, bindings, n),
            Exports::ControllerV02(_) => Ok(Err(
                "a controller plugin takes reconcile requests, not events".to_string(),
            )),
        };
        // The call's references die with it (and the objects they hold).
        self.store.data_mut().objects.clear();
        self.finish(r)
    }

    /// Reconciles one key (the `controller` world).
    pub fn reconcile(&mut self, request: &ReconcileRequest) -> ReconcileOutcome {
        let Exports::ControllerV02(bindings) = &self.exports else {
            return ReconcileOutcome::Terminal(
                "an event-handler plugin takes events, not reconcile requests".to_string(),
            );
        };
        arm(&mut self.store, self.fuel, self.deadline_ticks);
        let req = v0_2::reconciler::Request {
            resource: request.resource.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            key: request.key.clone(),
        };
        let r = bindings
            .wasm_informer_plugin_reconciler()
            .call_reconcile(&mut self.store, &req);
        self.store.data_mut().objects.clear();
        match r {
            Ok(Ok(v0_2::reconciler::Action::Done)) => self.check_overrun(ReconcileOutcome::Done),
            Ok(Ok(v0_2::reconciler::Action::RequeueAfter(ms))) => {
                self.check_overrun(ReconcileOutcome::RequeueAfter(Duration::from_millis(ms)))
            }
            Ok(Err(v0_2::reconciler::ReconcileError::Retry(m))) => {
                self.check_overrun(ReconcileOutcome::Retry(m))
            }
            Ok(Err(v0_2::reconciler::ReconcileError::Terminal(m))) => {
                self.check_overrun(ReconcileOutcome::Terminal(m))
            }
            Err(e) => ReconcileOutcome::Trap(classify(&e, self.store.data().limiter.refused())),
        }
    }

    fn finish(&self, r: wasmtime::Result<Result<(), String>>) -> CallOutcome {
        match r {
            Ok(Ok(())) => self.check_overrun(CallOutcome::Ok),
            Ok(Err(msg)) => self.check_overrun(CallOutcome::HandlerError(msg)),
            Err(e) => CallOutcome::Trap(classify(&e, self.store.data().limiter.refused())),
        }
    }

    /// A call that returned on its own but with its guest time well past its
    /// deadline (it slept in a host call other than an API call, where epochs
    /// cannot interrupt it) counts as a deadline trap.
    fn check_overrun<T: From<PluginTrap>>(&self, ok: T) -> T {
        let clock: &CallClock = &self.store.data().clock;
        let took = clock.guest_time();
        if took > clock.limit() + self.slack * 2 {
            return T::from(PluginTrap {
                kind: TrapKind::Deadline,
                message: format!(
                    "call returned after {} ms of its own time, past its deadline of {} ms",
                    took.as_millis(),
                    clock.limit().as_millis()
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

impl From<PluginTrap> for CallOutcome {
    fn from(t: PluginTrap) -> Self {
        CallOutcome::Trap(t)
    }
}

impl From<PluginTrap> for ReconcileOutcome {
    fn from(t: PluginTrap) -> Self {
        ReconcileOutcome::Trap(t)
    }
}

/// Calls a 0.2 handler with references to the event's objects.
fn handle_v02(
    store: &mut Store<HostState>,
    bindings: &v0_2::EventHandler,
    n: &Notification,
) -> wasmtime::Result<Result<(), String>> {
    let objects = &mut store.data_mut().objects;
    let object = objects.push(&n.resource, n.object.clone())?;
    let old_object = match &n.old {
        Some(o) => Some(objects.push(&n.resource, o.clone())?),
        None => None,
    };
    let info = v0_2::types::EventInfo {
        kind: match n.kind {
            EventKind::Added => v0_2::types::EventKind::Added,
            EventKind::Updated => v0_2::types::EventKind::Updated,
            EventKind::Deleted => v0_2::types::EventKind::Deleted,
            EventKind::Synced => v0_2::types::EventKind::Synced,
        },
        object,
        old_object,
        is_in_initial_list: n.in_initial_list,
        final_state_unknown: n.final_state_unknown,
    };
    bindings
        .wasm_informer_plugin_handler()
        .call_on_event(&mut *store, info)
}

/// Fresh fuel and deadline for one call.
fn arm(store: &mut Store<HostState>, fuel: u64, deadline_ticks: u64) {
    let data = store.data_mut();
    // References of an earlier call are forgotten before this one starts.
    data.objects.clear();
    data.limiter.reset();
    let tenure = data.kube.tenure();
    data.clock.start(1, tenure);
    // Fuel metering is always on in this engine, so this cannot fail.
    let _ = store.set_fuel(fuel);
    store.set_epoch_deadline(deadline_ticks);
}
