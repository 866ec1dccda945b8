//! The `log` capability: leveled messages into the host's log, tagged with the
//! plugin's name, through the plugin's rate limit ([`LogSink`]). The guest's
//! stdout and stderr go the same way (`stdio.rs`).
//!
//! Invariant: a plugin can never make the host log faster than its
//! [`crate::log_sink::LogLimits`]; excess lines are counted, not written.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::host_state::HostState;

use crate::log_sink::{LogLevel, LogSink};
use crate::world::{v0_1, v0_2};

/// The log capability of one instance.
#[derive(Clone, Debug)]
pub struct LogState {
    sink: Arc<LogSink>,
}

impl LogState {
    /// Writes through `sink`.
    pub fn new(sink: Arc<LogSink>) -> Self {
        Self { sink }
    }

    /// The plugin's sink.
    pub fn sink(&self) -> &Arc<LogSink> {
        &self.sink
    }
}

impl v0_1::log_iface::Host for LogState {
    fn log(&mut self, level: v0_1::log_iface::Level, message: String) {
        use v0_1::log_iface::Level as L;
        let level = match level {
            L::Trace => LogLevel::Trace,
            L::Debug => LogLevel::Debug,
            L::Info => LogLevel::Info,
            L::Warn => LogLevel::Warn,
            L::Error => LogLevel::Error,
        };
        self.sink.emit(level, "log", &message);
    }
}

impl v0_2::log::Host for LogState {
    fn log(&mut self, level: v0_2::log::Level, message: String) {
        use v0_2::log::Level as L;
        let level = match level {
            L::Trace => LogLevel::Trace,
            L::Debug => LogLevel::Debug,
            L::Info => LogLevel::Info,
            L::Warn => LogLevel::Warn,
            L::Error => LogLevel::Error,
        };
        self.sink.emit(level, "log", &message);
    }
}

/// Links the log capability (0.1 and 0.2).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::log_iface::add_to_linker::<HostState, HasSelf<LogState>>(linker, |s| &mut s.log)?;
    v0_2::log::add_to_linker::<HostState, HasSelf<LogState>>(linker, |s| &mut s.log)
}
