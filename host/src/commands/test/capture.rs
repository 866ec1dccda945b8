//! What a plugin did during one call, as `wasm-informer test` observes it:
//! its log lines and the runtime's audit line of every write it attempted
//! (both `tracing` events, on targets `plugin` and `audit`), and every
//! request that reached the API (recorded by the fixture API).
//!
//! Invariant: effects are kept in the order they happened, on the one thread
//! the plugin runs on; [`Effects::take`] hands over everything since the last
//! take, so each step of a test owns exactly the effects of its call.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use wasm_informer_runtime::capability::api::ApiRequest;

/// One observed effect.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// A log line (the `log` import, or the guest's stdout or stderr).
    Log {
        /// `trace` … `error`.
        level: String,
        /// `log`, `stdout` or `stderr`.
        stream: String,
        /// The line.
        message: String,
    },
    /// The runtime's record of one write, allowed or not: its fields
    /// (`verb`, `patch`, `resource`, `subresource`, `key`, `outcome`, `code`).
    Audit(BTreeMap<String, String>),
    /// A request that reached the API, and the status it got.
    Request {
        /// As the plugin's client sent it.
        request: Box<ApiRequest>,
        /// HTTP status, 0 when no answer came.
        code: u16,
        /// The body of an answer that was not a success (the server's
        /// `Status`).
        refusal: Option<String>,
    },
}

/// The effects of the plugin under test, shared by the log layer and the API.
#[derive(Debug, Clone, Default)]
pub struct Effects(Arc<Mutex<Vec<Effect>>>);

impl Effects {
    /// Records one effect.
    pub fn push(&self, e: Effect) {
        self.0.lock().push(e);
    }

    /// Everything recorded since the last call.
    pub fn take(&self) -> Vec<Effect> {
        std::mem::take(&mut *self.0.lock())
    }

    /// A subscriber that records the plugin's log and audit lines here and
    /// drops every other event.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        tracing_subscriber::registry().with(CaptureLayer {
            effects: self.clone(),
        })
    }
}

struct CaptureLayer {
    effects: Effects,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut f = Fields::default();
        match meta.target() {
            "plugin" => {
                event.record(&mut f);
                // The rate limiter's own summary line is not the plugin's.
                if f.0.contains_key("dropped") {
                    return;
                }
                self.effects.push(Effect::Log {
                    level: meta.level().as_str().to_ascii_lowercase(),
                    stream: f.0.remove("stream").unwrap_or_else(|| "log".into()),
                    message: f.0.remove("message").unwrap_or_default(),
                });
            }
            "audit" => {
                event.record(&mut f);
                self.effects.push(Effect::Audit(f.0));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_plugin_and_audit_lines_only_in_order() {
        let fx = Effects::default();
        tracing::subscriber::with_default(fx.subscriber(), || {
            tracing::info!(target: "plugin", plugin = "p", stream = "log", "hello {}", 1);
            tracing::info!(target: "wasm_informer", "host line");
            tracing::warn!(target: "plugin", plugin = "p", stream = "stdout", "two");
            tracing::info!(target: "audit", plugin = "p", verb = "patch", code = 200u64, "write");
        });
        let got = fx.take();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            Effect::Log {
                level: "info".into(),
                stream: "log".into(),
                message: "hello 1".into()
            }
        );
        assert!(
            matches!(&got[1], Effect::Log { level, stream, .. } if level == "warn" && stream == "stdout")
        );
        let Effect::Audit(a) = &got[2] else { panic!() };
        assert_eq!(a["verb"], "patch");
        assert_eq!(a["code"], "200");
        assert!(fx.take().is_empty());
    }
}
