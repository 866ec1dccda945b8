//! The simulator's ceiling: a client that lists once, then watches and only
//! scans each event line for its resourceVersion (no JSON decoding, no cache).
//! Whatever rate it reaches bounds what any real client can show on this
//! simulator and machine.
//!
//! Invariant: like the real sides, it re-watches from the last resourceVersion
//! whenever its watch ends, and feeds one probe after each event.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::{AsyncBufReadExt, StreamExt};
use tokio::task::JoinHandle;

use crate::probe::{HandlerProbe, Probe};
use crate::spec::SideSpec;

/// A running raw watcher.
pub struct RawSide {
    task: JoinHandle<()>,
    /// One probe.
    pub probes: Vec<HandlerProbe>,
}

fn rv_of(line: &str) -> Option<u64> {
    let key = "\"resourceVersion\":\"";
    let i = line.find(key)? + key.len();
    let end = line[i..].find('"')? + i;
    line[i..end].parse().ok()
}

impl RawSide {
    /// Lists, then watches in a loop; waits until the list is in.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let req = http::Request::get("/api/v1/pods").body(Vec::new())?;
        let list: serde_json::Value = client.request(req).await.context("raw list")?;
        let mut rv: u64 = list["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .context("raw list: no resourceVersion")?;
        let n = list["items"].as_array().map(|a| a.len()).unwrap_or(0) as u64;
        drop(list);
        let probe = Arc::new(Probe::default());
        probe.total.fetch_add(n, Ordering::Relaxed);
        probe.max_rv.fetch_max(rv, Ordering::Relaxed);
        let p = probe.clone();
        let task = tokio::spawn(async move {
            loop {
                let uri = format!(
                    "/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=290&resourceVersion={rv}"
                );
                let Ok(req) = http::Request::get(uri).body(Vec::new()) else {
                    return;
                };
                match client.request_stream(req).await {
                    Ok(body) => {
                        let mut lines = body.lines();
                        while let Some(Ok(line)) = lines.next().await {
                            if line.starts_with("{\"type\":\"BOOKMARK\"") {
                                if let Some(v) = rv_of(&line) {
                                    rv = v;
                                }
                                continue;
                            }
                            if let Some(v) = rv_of(&line) {
                                rv = v;
                                p.observe(v);
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "raw watch failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        let name = spec
            .handlers
            .first()
            .map(|h| h.name.clone())
            .unwrap_or_else(|| "raw".into());
        Ok((
            RawSide {
                task,
                probes: vec![HandlerProbe {
                    name,
                    probe,
                    tracked: true,
                    settle: false,
                }],
            },
            Vec::new(),
        ))
    }

    /// Stops the watch.
    pub fn stop(self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_first_resource_version() {
        let l = r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"42"}}}"#;
        assert_eq!(super::rv_of(l), Some(42));
        assert_eq!(super::rv_of("{}"), None);
    }
}
