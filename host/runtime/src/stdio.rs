//! The guest's stdout and stderr: WASI output streams that feed the plugin's
//! [`LogSink`] line by line instead of any host file descriptor.
//!
//! Invariant: a guest write never blocks and never fails; output beyond the log
//! rate limit is dropped (and counted), never buffered without bound.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::log_sink::{LineWriter, LogLevel, LogSink};

/// A guest output stream (`stdout` logs at info, `stderr` at warn).
#[derive(Debug, Clone)]
pub struct PluginOutput {
    sink: Arc<LogSink>,
    stream: &'static str,
    level: LogLevel,
}

impl PluginOutput {
    /// The guest's stdout.
    pub fn stdout(sink: Arc<LogSink>) -> Self {
        Self {
            sink,
            stream: "stdout",
            level: LogLevel::Info,
        }
    }

    /// The guest's stderr.
    pub fn stderr(sink: Arc<LogSink>) -> Self {
        Self {
            sink,
            stream: "stderr",
            level: LogLevel::Warn,
        }
    }

    fn writer(&self) -> LineWriter {
        LineWriter::new(self.sink.clone(), self.stream, self.level)
    }
}

impl IsTerminal for PluginOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for PluginOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(P2Writer(self.writer()))
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(AsyncWriter(self.writer()))
    }
}

/// Most bytes accepted per `check-write` permit.
const PERMIT: usize = 64 * 1024;

struct P2Writer(LineWriter);

impl Pollable for P2Writer {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(std::future::ready(()))
    }
}

impl OutputStream for P2Writer {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.0.write(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(PERMIT)
    }
}

struct AsyncWriter(LineWriter);

impl tokio::io::AsyncWrite for AsyncWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.flush();
        Poll::Ready(Ok(()))
    }
}
