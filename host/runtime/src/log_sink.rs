//! Where a plugin's log goes: the `log` import and the guest's stdout and stderr
//! all become `tracing` events on target `plugin` with the field `plugin=NAME`,
//! through a per-plugin rate limit.
//!
//! Invariant: a plugin can never make the host emit more than
//! [`LogLimits::burst`] lines at once or more than [`LogLimits::lines_per_second`]
//! on average, nor hold more than [`MAX_LINE_BYTES`] of partial output; excess
//! lines are counted as dropped, and a summary line reports them.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::rate::TokenBucket;
use super::status::PluginStatus;

/// Longest line kept; longer lines are cut and marked with `…`.
pub const MAX_LINE_BYTES: usize = 4096;

/// Rate limit of one plugin's log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogLimits {
    /// Sustained rate.
    pub lines_per_second: f64,
    /// Lines that may be emitted at once after a quiet period.
    pub burst: f64,
}

impl Default for LogLimits {
    /// 200 lines per second, bursts of 1000.
    fn default() -> Self {
        Self {
            lines_per_second: 200.0,
            burst: 1000.0,
        }
    }
}

/// Severity of a plugin log line (mirrors the WIT `log.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Finest detail.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// A failure.
    Error,
}

struct Bucket {
    tokens: TokenBucket,
    dropped_since_emit: u64,
}

/// The rate-limited log of one plugin.
pub struct LogSink {
    plugin: Arc<str>,
    bucket: Mutex<Bucket>,
    status: Arc<PluginStatus>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink")
            .field("plugin", &self.plugin)
            .finish()
    }
}

impl LogSink {
    /// A sink for `plugin`, counting into `status`.
    pub fn new(plugin: Arc<str>, limits: LogLimits, status: Arc<PluginStatus>) -> Self {
        Self {
            plugin,
            bucket: Mutex::new(Bucket {
                tokens: TokenBucket::new(limits.lines_per_second, limits.burst),
                dropped_since_emit: 0,
            }),
            status,
        }
    }

    /// Emits one line from `stream` (`log`, `stdout` or `stderr`), or counts it
    /// as dropped when over the rate limit.
    pub fn emit(&self, level: LogLevel, stream: &'static str, message: &str) {
        let dropped_before = {
            let mut b = self.bucket.lock();
            if !b.tokens.try_take(Instant::now()) {
                b.dropped_since_emit += 1;
                drop(b);
                self.status.record_log_dropped();
                return;
            }
            std::mem::take(&mut b.dropped_since_emit)
        };
        if dropped_before > 0 {
            tracing::warn!(
                target: "plugin",
                plugin = %self.plugin,
                dropped = dropped_before,
                "log rate limit: {dropped_before} lines dropped"
            );
        }
        self.status.record_log_line();
        let message = truncate(message);
        let p = &*self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(target: "plugin", plugin = %p, stream, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "plugin", plugin = %p, stream, "{message}"),
            LogLevel::Info => tracing::info!(target: "plugin", plugin = %p, stream, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "plugin", plugin = %p, stream, "{message}"),
            LogLevel::Error => tracing::error!(target: "plugin", plugin = %p, stream, "{message}"),
        }
    }
}

fn truncate(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= MAX_LINE_BYTES {
        return s.into();
    }
    let mut end = MAX_LINE_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

/// Splits a byte stream into lines and hands each to a [`LogSink`].
#[derive(Debug)]
pub struct LineWriter {
    sink: Arc<LogSink>,
    stream: &'static str,
    level: LogLevel,
    buf: Vec<u8>,
}

/// The line Rust's default panic hook adds after a panic message.
const RUST_BACKTRACE_NOTE: &str = "note: run with `RUST_BACKTRACE=1`";

impl LineWriter {
    /// A writer for one stream (`stdout` at info level, `stderr` at warn).
    pub fn new(sink: Arc<LogSink>, stream: &'static str, level: LogLevel) -> Self {
        Self {
            sink,
            stream,
            level,
            buf: Vec::new(),
        }
    }

    /// Appends bytes; emits every completed line and any over-long partial line.
    pub fn write(&mut self, mut bytes: &[u8]) {
        while let Some(pos) = bytes.iter().position(|b| *b == b'\n') {
            self.buf.extend_from_slice(&bytes[..pos]);
            self.emit();
            bytes = &bytes[pos + 1..];
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= MAX_LINE_BYTES {
            self.emit();
        }
    }

    /// Emits a pending partial line.
    pub fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.emit();
        }
    }

    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.buf);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        // Rust's panic hook advises an environment variable no guest can set
        // (a guest has no environment); the host reports the panic itself.
        if !line.starts_with(RUST_BACKTRACE_NOTE) {
            self.sink.emit(self.level, self.stream, line);
        }
        self.buf.clear();
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(limits: LogLimits) -> (Arc<LogSink>, Arc<PluginStatus>) {
        let status = Arc::new(PluginStatus::new("p"));
        (
            Arc::new(LogSink::new("p".into(), limits, status.clone())),
            status,
        )
    }

    #[test]
    fn rate_limit_drops_and_counts_excess_lines() {
        let (s, status) = sink(LogLimits {
            lines_per_second: 0.001,
            burst: 10.0,
        });
        for i in 0..100 {
            s.emit(LogLevel::Info, "log", &format!("line {i}"));
        }
        let snap = status.snapshot();
        assert_eq!(snap.log_lines, 10);
        assert_eq!(snap.log_dropped, 90);
    }

    #[test]
    fn line_writer_splits_lines_and_bounds_partial_output() {
        let (s, status) = sink(LogLimits::default());
        let mut w = LineWriter::new(s, "stdout", LogLevel::Info);
        w.write(b"a\nb\nc");
        assert_eq!(status.snapshot().log_lines, 2);
        w.write(&vec![b'x'; MAX_LINE_BYTES * 2]);
        assert!(w.buf.len() < MAX_LINE_BYTES);
        assert_eq!(status.snapshot().log_lines, 3);
        w.write(b"tail without newline");
        assert_eq!(status.snapshot().log_lines, 3);
        drop(w);
        assert_eq!(status.snapshot().log_lines, 4);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let long = "é".repeat(MAX_LINE_BYTES);
        let t = truncate(&long);
        assert!(t.len() <= MAX_LINE_BYTES + "…".len());
        assert!(t.ends_with('…'));
    }
}
