//! What plugins logged, captured from `tracing` (target `plugin`, field
//! `plugin=NAME`), so that a test can judge a plugin by what it said (its
//! findings, the events it handled) rather than by how many lines it wrote.
//! Shared by the runtime's and the host's in-process tests.
//!
//! Invariant: one capture per test binary, installed on first use; lines of
//! one plugin keep the order in which the plugin emitted them.

#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tracing_subscriber::layer::SubscriberExt;

/// One line a plugin logged: (plugin, message).
pub type LogLine = (String, String);

static LOG: OnceLock<Arc<Mutex<Vec<LogLine>>>> = OnceLock::new();

struct Capture(Arc<Mutex<Vec<LogLine>>>);

#[derive(Default)]
struct Fields {
    plugin: Option<String>,
    message: Option<String>,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "plugin" => self.plugin = Some(format!("{value:?}")),
            "message" => self.message = Some(format!("{value:?}")),
            _ => {}
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "plugin" => self.plugin = Some(value.to_string()),
            "message" => self.message = Some(value.to_string()),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if event.metadata().target() != "plugin" {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        if let (Some(p), Some(m)) = (f.plugin, f.message) {
            self.0.lock().push((p, m));
        }
    }
}

/// Every plugin log line of this test binary so far (installs the capture
/// on first use).
pub fn plugin_log() -> Arc<Mutex<Vec<LogLine>>> {
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(log.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("one capture per test binary");
        log
    })
    .clone()
}

/// The messages `plugin` logged so far, in order.
pub fn lines_of(plugin: &str) -> Vec<String> {
    plugin_log()
        .lock()
        .iter()
        .filter(|(p, _)| p == plugin)
        .map(|(_, m)| m.clone())
        .collect()
}
