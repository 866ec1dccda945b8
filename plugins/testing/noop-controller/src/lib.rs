//! A controller that answers every reconcile with `done` without reading
//! anything: the subject of the controller benchmark (reconciles per second
//! through the work queue and the WIT boundary, nothing else).
//!
//! Invariant: every `reconcile` returns `ok(done)` in constant time.

use wasm_informer_sdk::{
    export_controller, Action, Config, ReconcileError, Reconciler, Request, Result,
};

struct Noop;

impl Reconciler for Noop {
    fn init(_config: &Config) -> Result<Self> {
        Ok(Noop)
    }

    fn reconcile(&mut self, _request: &Request) -> std::result::Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

export_controller!(Noop);
