//! Test controller: reads the request's object from the cache and answers as
//! its annotation `probe.wasm-informer.dev/outcome` says, so a test drives
//! every outcome of the `controller` world from the host side:
//!
//! | annotation | answer |
//! |---|---|
//! | absent, `done`, or the object is gone | `ok(done)` |
//! | `requeue:MS` | `ok(requeue-after(MS))` |
//! | `retry` | `err(retry("retry call=N"))` |
//! | `terminal` | `err(terminal("terminal call=N"))` |
//! | `calls` | `err(terminal("calls=N"))`: how many calls this instance has had |
//! | `sleep:MS` | sleeps MS ms through the WASI clock, then `ok(done)` |
//! | `trap` | panics (a trap) |
//! | `spin` | loops until the deadline (a trap) |
//!
//! N counts the reconciles of this instance, so a fresh instance says 1.
//!
//! Invariant: the answer depends only on the cached object and the
//! instance's call count; the probe writes nothing.

use std::time::Duration;

use wasm_informer_sdk::{
    export_controller, Action, Config, ReconcileError, Reconciler, Request, Result,
};

const ANNOTATION: &str = "probe.wasm-informer.dev/outcome";

struct Probe {
    calls: u64,
}

impl Reconciler for Probe {
    fn init(_config: &Config) -> Result<Self> {
        Ok(Probe { calls: 0 })
    }

    fn reconcile(&mut self, request: &Request) -> std::result::Result<Action, ReconcileError> {
        self.calls += 1;
        let n = self.calls;
        let Some(object) = request.object()? else {
            return Ok(Action::done());
        };
        let what = object.annotation(ANNOTATION).unwrap_or_default();
        let (verb, arg) = what.split_once(':').unwrap_or((what.as_str(), ""));
        let ms = || Duration::from_millis(arg.parse().unwrap_or(0));
        match verb {
            "" | "done" => Ok(Action::done()),
            "requeue" => Ok(Action::requeue(ms())),
            "retry" => Err(ReconcileError::retry(format!("retry call={n}"))),
            "terminal" => Err(ReconcileError::terminal(format!("terminal call={n}"))),
            "calls" => Err(ReconcileError::terminal(format!("calls={n}"))),
            "sleep" => {
                std::thread::sleep(ms());
                Ok(Action::done())
            }
            "trap" => panic!("probe asked to trap on {}", request.key),
            "spin" =>
            {
                #[allow(clippy::empty_loop)]
                loop {}
            }
            other => Err(ReconcileError::terminal(format!(
                "unknown outcome {other:?}"
            ))),
        }
    }
}

export_controller!(Probe);
