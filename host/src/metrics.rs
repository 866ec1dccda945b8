//! Prometheus metrics and health endpoints: `/metrics`, `/healthz` and `/readyz`
//! on the `metrics_addr` from host.toml.
//!
//! Job: render, on every scrape, the host's current [`Report`] snapshot as
//! Prometheus text through prometheus-client (series per plugin and per informer),
//! and answer health and readiness.
//!
//! Invariant: a scrape only reads snapshots (atomics and short locks); it never
//! waits on a plugin or the dispatcher. Ready means every informer has synced and
//! no plugin failed to load; `/readyz` lists the reasons when it is not.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::report::Report;

/// Content type of the Prometheus text format prometheus-client writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Plugin states that get a series in `wasm_informer_plugin_state`.
pub const PLUGIN_STATES: [&str; 7] = [
    "starting",
    "running",
    "backing-off",
    "quarantined",
    "stopped",
    "removed",
    "failed",
];

/// What the endpoints read: the host's current state.
pub trait Observe: Send + Sync + 'static {
    /// A snapshot of every plugin and informer.
    fn report(&self) -> Report;
    /// Why the host is not ready; empty when it is.
    fn not_ready(&self) -> Vec<String>;
}

/// Renders a snapshot source as Prometheus metrics.
struct ReportCollector {
    source: Arc<dyn Observe>,
}

impl std::fmt::Debug for ReportCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReportCollector")
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// Reads one number out of a plugin's report line.
type PluginValue<'a> = &'a dyn Fn(&crate::report::PluginReport) -> f64;

/// Writes one metric family: `rows` are (labels, value).
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: &[(Labels<'_>, f64)],
) -> Result<(), std::fmt::Error> {
    let mut me = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in rows {
        let fe = me.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*v as u64).encode(fe)?,
            _ => ConstGauge::new(*v).encode(fe)?,
        }
    }
    Ok(())
}

impl Collector for ReportCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = self.source.report();
        let not_ready = self.source.not_ready();
        let plugins: Vec<(&String, &crate::report::PluginReport)> = r.plugins.iter().collect();
        let per_plugin =
            |f: &dyn Fn(&crate::report::PluginReport) -> f64| -> Vec<(Labels<'_>, f64)> {
                plugins
                    .iter()
                    .map(|(n, p)| (vec![("plugin", n.as_str())], f(p)))
                    .collect()
            };
        let mut events = Vec::new();
        for (n, p) in &plugins {
            for (kind, v) in [
                ("added", p.delivered.added),
                ("updated", p.delivered.updated),
                ("deleted", p.delivered.deleted),
                ("synced", p.delivered.synced),
            ] {
                events.push((vec![("plugin", n.as_str()), ("kind", kind)], v as f64));
            }
        }
        family(
            &mut enc,
            "wasm_informer_plugin_events",
            "Events handed to the plugin, by kind.",
            MetricType::Counter,
            &events,
        )?;
        let counters: [(&str, &str, PluginValue); 7] = [
            (
                "wasm_informer_plugin_replayed",
                "Initial-list adds replayed into a new, reloaded or restarted instance.",
                &|p| p.replayed as f64,
            ),
            (
                "wasm_informer_plugin_errors",
                "Handler error results.",
                &|p| p.errors as f64,
            ),
            (
                "wasm_informer_plugin_traps",
                "Traps (fuel, deadline, memory, stack, panic).",
                &|p| p.traps as f64,
            ),
            (
                "wasm_informer_plugin_restarts",
                "Instances replaced after a trap.",
                &|p| p.restarts as f64,
            ),
            (
                "wasm_informer_plugin_quarantines",
                "Times the plugin was quarantined after repeated failures.",
                &|p| p.quarantines as f64,
            ),
            (
                "wasm_informer_plugin_coalesced",
                "Overflowed notifications merged into an already pending key.",
                &|p| p.coalesced as f64,
            ),
            (
                "wasm_informer_plugin_overflowed",
                "Notifications that did not fit in the listener queue.",
                &|p| p.overflowed as f64,
            ),
        ];
        for (name, help, f) in counters {
            family(&mut enc, name, help, MetricType::Counter, &per_plugin(f))?;
        }
        family(
            &mut enc,
            "wasm_informer_plugin_queue_depth",
            "Notifications waiting in the listener queue.",
            MetricType::Gauge,
            &per_plugin(&|p| p.queue_depth as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_queue_depth_max",
            "Largest listener queue depth seen.",
            MetricType::Gauge,
            &per_plugin(&|p| p.queue_depth_max as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_versions",
            "Versions of the plugin loaded since the host started (1 before any reload).",
            MetricType::Gauge,
            &per_plugin(&|p| p.versions as f64),
        )?;
        let mut states = Vec::new();
        for (n, p) in &plugins {
            for s in PLUGIN_STATES {
                states.push((
                    vec![("plugin", n.as_str()), ("state", s)],
                    if p.state == s { 1.0 } else { 0.0 },
                ));
            }
        }
        family(
            &mut enc,
            "wasm_informer_plugin_state",
            "1 for the plugin's current state, 0 for the others.",
            MetricType::Gauge,
            &states,
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_handler_latency_p50_seconds",
            "Median time of one handler call (all versions of the plugin).",
            MetricType::Gauge,
            &per_plugin(&|p| p.latency_us.p50 as f64 / 1e6),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_handler_latency_p99_seconds",
            "99th percentile time of one handler call (all versions of the plugin).",
            MetricType::Gauge,
            &per_plugin(&|p| p.latency_us.p99 as f64 / 1e6),
        )?;

        let informers: Vec<_> = r.informers.iter().collect();
        let per_informer =
            |f: &dyn Fn(&crate::report::InformerReport) -> f64| -> Vec<(Labels<'_>, f64)> {
                informers
                    .iter()
                    .map(|(n, i)| (vec![("resource", n.as_str())], f(i)))
                    .collect()
            };
        family(
            &mut enc,
            "wasm_informer_informer_objects",
            "Objects in the informer's cache.",
            MetricType::Gauge,
            &per_informer(&|i| i.objects as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_synced",
            "1 once the informer's first list has been processed.",
            MetricType::Gauge,
            &per_informer(&|i| f64::from(u8::from(i.synced))),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_running",
            "1 while the informer runs (0 after its last user went).",
            MetricType::Gauge,
            &per_informer(&|i| f64::from(u8::from(i.running))),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_lists",
            "Completed lists (the first and every relist).",
            MetricType::Counter,
            &per_informer(&|i| i.lists as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_watch_restarts",
            "Watches re-established.",
            MetricType::Counter,
            &per_informer(&|i| i.watch_restarts as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_relists_410",
            "Relists caused by 410 Expired.",
            MetricType::Counter,
            &per_informer(&|i| i.relists_410 as f64),
        )?;

        let mut reloads = Vec::new();
        for action in ["added", "changed", "removed", "rejected"] {
            let n = r.reloads.iter().filter(|e| e.action == action).count();
            reloads.push((vec![("action", action)], n as f64));
        }
        family(
            &mut enc,
            "wasm_informer_reloads",
            "Plugin loads, reloads, removals and rejected files.",
            MetricType::Counter,
            &reloads,
        )?;
        family(
            &mut enc,
            "wasm_informer_config_errors",
            "Configuration files currently rejected.",
            MetricType::Gauge,
            &[(vec![], r.config_errors.len() as f64)],
        )?;
        family(
            &mut enc,
            "wasm_informer_ready",
            "1 when every informer has synced and no plugin failed to load.",
            MetricType::Gauge,
            &[(vec![], if not_ready.is_empty() { 1.0 } else { 0.0 })],
        )?;
        Ok(())
    }
}

/// Content type of the classic Prometheus text format (0.0.4).
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Converts prometheus-client's OpenMetrics text into the classic Prometheus
/// text format 0.0.4: counter families are named with their `_total` suffix in
/// `# HELP` and `# TYPE`, and the `# EOF` marker is dropped. (Our counters have
/// only `_total` samples, so nothing else differs.)
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 512);
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match rewritten {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Renders the metrics of `source` as OpenMetrics text.
pub fn render(source: Arc<dyn Observe>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ReportCollector { source }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

async fn metrics(
    State(source): State<Arc<dyn Observe>>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    // Scrapers that ask for OpenMetrics get it; everyone else (promtool, curl,
    // older Prometheus) gets the classic text format.
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let body = tokio::task::spawn_blocking(move || render(source))
        .await
        .unwrap_or_else(|e| format!("# metrics rendering failed: {e}\n"));
    if openmetrics {
        ([(header::CONTENT_TYPE, CONTENT_TYPE)], body)
    } else {
        (
            [(header::CONTENT_TYPE, CONTENT_TYPE_TEXT)],
            to_prometheus_text(&body),
        )
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(source): State<Arc<dyn Observe>>) -> impl IntoResponse {
    let reasons = source.not_ready();
    if reasons.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        let mut body = String::from("not ready:\n");
        for r in reasons {
            body.push_str("- ");
            body.push_str(&r);
            body.push('\n');
        }
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

/// The axum router serving `/metrics`, `/healthz` and `/readyz`.
pub fn router(source: Arc<dyn Observe>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(source)
}

/// A running metrics server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks a free port) and serves in the background.
    pub async fn start(addr: SocketAddr, source: Arc<dyn Observe>) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            anyhow::anyhow!("cannot listen for metrics on {addr} (metrics_addr in host.toml): {e}")
        })?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = router(source);
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "metrics server failed");
            }
        });
        Ok(Self {
            addr,
            stop: Some(tx),
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{InformerReport, PluginReport};

    struct Fixed(Report, Vec<String>);
    impl Observe for Fixed {
        fn report(&self) -> Report {
            self.0.clone()
        }
        fn not_ready(&self) -> Vec<String> {
            self.1.clone()
        }
    }

    #[test]
    fn renders_plugin_and_informer_series() {
        let mut r = Report::default();
        let mut p = PluginReport {
            state: "quarantined".into(),
            traps: 4,
            ..Default::default()
        };
        p.delivered.added = 9;
        r.plugins.insert("slow".into(), p);
        r.informers.insert(
            "v1/pods".into(),
            InformerReport {
                objects: 12,
                synced: true,
                ..Default::default()
            },
        );
        let text = render(Arc::new(Fixed(r, vec![])));
        assert!(
            text.contains("wasm_informer_plugin_events_total{plugin=\"slow\",kind=\"added\"} 9"),
            "{text}"
        );
        assert!(
            text.contains("wasm_informer_plugin_traps_total{plugin=\"slow\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("wasm_informer_plugin_state{plugin=\"slow\",state=\"quarantined\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("wasm_informer_plugin_state{plugin=\"slow\",state=\"running\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("wasm_informer_informer_objects{resource=\"v1/pods\"} 12"),
            "{text}"
        );
        assert!(text.contains("wasm_informer_ready 1"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        let classic = to_prometheus_text(&text);
        assert!(
            classic.contains("# TYPE wasm_informer_plugin_traps_total counter\n"),
            "{classic}"
        );
        assert!(
            classic.contains("# HELP wasm_informer_plugin_traps_total Traps"),
            "{classic}"
        );
        assert!(
            classic.contains("# TYPE wasm_informer_plugin_queue_depth gauge\n"),
            "{classic}"
        );
        assert!(!classic.contains("# EOF"));
    }
}
