//! Prometheus metrics and health endpoints: `/metrics`, `/healthz` and `/readyz`
//! on the `metrics_addr` from host.toml.
//!
//! Job: render, on every scrape, the host's current [`Report`] snapshot as
//! Prometheus text through prometheus-client (series per plugin and per informer),
//! and answer health and readiness.
//!
//! Handler latency is the histogram `wasm_informer_plugin_handler_duration_seconds`
//! (buckets from 1 µs to 16.8 s, ×4 apart), so that replicas can be aggregated
//! with `histogram_quantile`; the report keeps its p50 and p99.
//!
//! Invariant: a scrape only reads snapshots (atomics and short locks); it never
//! waits on a plugin or the dispatcher. Ready means the config directory has been
//! loaded, every informer has synced, every plugin has had its replay and no file
//! was rejected; `/readyz` lists the reasons when it is not.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use kube_informer::latency::LatencyHistogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
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

/// Upper bounds of the handler duration histogram, in microseconds: 1 µs to
/// 16.8 s, a factor of 4 apart. Powers of two, so every bound is exact in
/// the listener's log-bucketed histogram.
pub const HANDLER_DURATION_BOUNDS_US: [u64; 13] = [
    1,
    4,
    16,
    64,
    256,
    1 << 10,
    1 << 12,
    1 << 14,
    1 << 16,
    1 << 18,
    1 << 20,
    1 << 22,
    1 << 24,
];

/// One plugin's handler durations, folded into [`HANDLER_DURATION_BOUNDS_US`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginLatency {
    /// (upper bound in seconds, durations in that bucket only), ending with
    /// `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    /// Durations recorded.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

impl PluginLatency {
    /// Reads `h` once.
    pub fn of(h: &LatencyHistogram) -> Self {
        let c = h.cumulative_us(&HANDLER_DURATION_BOUNDS_US);
        let mut buckets = Vec::with_capacity(c.below.len() + 1);
        let mut prev = 0;
        for (bound, below) in HANDLER_DURATION_BOUNDS_US.iter().zip(&c.below) {
            buckets.push((*bound as f64 / 1e6, below - prev));
            prev = *below;
        }
        buckets.push((f64::INFINITY, c.count - prev));
        Self {
            buckets,
            count: c.count,
            sum_seconds: c.sum_us as f64 / 1e6,
        }
    }
}

/// One plugin's call durations: its handler calls and its API requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginDurations {
    /// `wasm_informer_plugin_handler_duration_seconds`.
    pub handler: PluginLatency,
    /// `wasm_informer_plugin_api_request_duration_seconds`.
    pub api: PluginLatency,
}

/// What the endpoints read: the host's current state.
pub trait Observe: Send + Sync + 'static {
    /// A snapshot of every plugin and informer.
    fn report(&self) -> Report;
    /// Why the host is not ready; empty when it is.
    fn not_ready(&self) -> Vec<String>;
    /// Lines describing this replica's role and shard, for `/readyz`
    /// (empty outside leader or sharded mode).
    fn cluster_lines(&self) -> Vec<String> {
        Vec::new()
    }
    /// This replica's role and shard as JSON for `/cluster` (with the keys
    /// it delivers when asked), or `None` outside leader or sharded mode.
    fn cluster_json(&self, _with_keys: bool) -> Option<serde_json::Value> {
        None
    }
    /// Handler and API request durations of every running plugin.
    fn plugin_latency(&self) -> Vec<(String, PluginDurations)> {
        Vec::new()
    }
    /// Every shadow version's comparison, with its per-object views, for
    /// `/shadow`.
    fn shadow_reports(&self) -> Vec<crate::shadow::ShadowReport> {
        Vec::new()
    }
}

/// Encodes one histogram family, a series per plugin.
fn histogram<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (&'a str, &'a PluginLatency)>,
) -> Result<(), std::fmt::Error> {
    let mut me = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (plugin, l) in series {
        let labels: Labels<'_> = vec![("plugin", plugin)];
        me.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
            l.sum_seconds,
            l.count,
            &l.buckets,
            None,
        )?;
    }
    Ok(())
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
        let mut api = Vec::new();
        for (n, p) in &plugins {
            for (verb, codes) in &p.api.by_verb {
                for (code, v) in codes {
                    api.push((
                        vec![
                            ("plugin", n.as_str()),
                            ("verb", verb.as_str()),
                            ("code", code.as_str()),
                        ],
                        *v as f64,
                    ));
                }
            }
        }
        family(
            &mut enc,
            "wasm_informer_plugin_api_requests",
            "API requests a plugin made, by verb and outcome (HTTP status code, or timeout, unavailable, rate-limited).",
            MetricType::Counter,
            &api,
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_denied",
            "API calls refused by the plugin's grants (nothing was sent).",
            MetricType::Counter,
            &per_plugin(&|p| p.api.denied as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_dry_run",
            "API requests sent as dry runs.",
            MetricType::Counter,
            &per_plugin(&|p| p.api.dry_run as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_throttled",
            "API calls (and refused calls) that waited for a token of the plugin's bucket (write_qps, write_burst).",
            MetricType::Counter,
            &per_plugin(&|p| p.api.throttled as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_token_wait_seconds",
            "Time the plugin's calls spent waiting for tokens of its bucket.",
            MetricType::Counter,
            &per_plugin(&|p| p.api.token_wait_ms as f64 / 1e3),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_refusals_unlogged",
            "Refused calls not audited line by line (the refusal-line limit of 1 a second, burst 10).",
            MetricType::Counter,
            &per_plugin(&|p| p.api.refusals_unlogged as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_api_answers_refused",
            "API answers refused because they would take the plugin past its memory_mb.",
            MetricType::Counter,
            &per_plugin(&|p| p.api.answers_refused as f64),
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
        let latency = self.source.plugin_latency();
        histogram(
            &mut enc,
            "wasm_informer_plugin_handler_duration_seconds",
            "Time of one handler call (all versions of the plugin).",
            latency.iter().map(|(n, d)| (n.as_str(), &d.handler)),
        )?;
        histogram(
            &mut enc,
            "wasm_informer_plugin_api_request_duration_seconds",
            "Time of one API request of a plugin, from the grant check to the answer (rate-limiter wait and retries included).",
            latency.iter().map(|(n, d)| (n.as_str(), &d.api)),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_resync_overruns",
            "Resyncs that came due while the previous one's syncs were still waiting behind real changes.",
            MetricType::Counter,
            &per_plugin(&|p| p.resync_overruns as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_plugin_resync_behind",
            "1 while the plugin is behind its resync period (syncs of an overrun resync still wait).",
            MetricType::Gauge,
            &per_plugin(&|p| f64::from(u8::from(p.resync_behind))),
        )?;
        controller_families(&mut enc, &plugins)?;

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
            "wasm_informer_informer_packed_objects",
            "Cached objects whose JSON the background compactor packed.",
            MetricType::Gauge,
            &per_informer(&|i| i.packed_objects as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_body_bytes",
            "Bytes the cached JSON bodies hold, packed or text.",
            MetricType::Gauge,
            &per_informer(&|i| i.body_bytes as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_text_bytes",
            "Bytes the cached JSON bodies would hold as text.",
            MetricType::Gauge,
            &per_informer(&|i| i.text_bytes as f64),
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
        family(
            &mut enc,
            "wasm_informer_informer_relists_too_large",
            "Relists because the server was behind our resourceVersion (504 Too large resource version).",
            MetricType::Counter,
            &per_informer(&|i| i.relists_too_large as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_relists_rv_regressed",
            "Relists because a watch event was older than one already seen (the server's history went backwards).",
            MetricType::Counter,
            &per_informer(&|i| i.relists_rv_regressed as f64),
        )?;

        family(
            &mut enc,
            "wasm_informer_informer_bytes_received",
            "Response bytes the informer received (list pages and watch streams).",
            MetricType::Counter,
            &per_informer(&|i| i.bytes_received as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_events_received",
            "Watch events the informer applied to its cache.",
            MetricType::Counter,
            &per_informer(&|i| i.events_received as f64),
        )?;
        let sharded: Vec<_> = informers
            .iter()
            .filter_map(|(n, i)| i.shard.as_ref().map(|s| (n.as_str(), s)))
            .collect();
        let per_shard = |f: &dyn Fn(&crate::report::SourceShardReport) -> f64| {
            sharded
                .iter()
                .map(|(n, s)| {
                    (
                        vec![("resource", *n), ("filtering", s.filtering.as_str())],
                        f(s),
                    )
                })
                .collect::<Vec<(Labels<'_>, f64)>>()
        };
        family(
            &mut enc,
            "wasm_informer_informer_shard_ratio",
            "Share of the hash space an informer sharded at the source asks for (label filtering: server when the API server applies shardSelector, client when this replica filters what it receives).",
            MetricType::Gauge,
            &per_shard(&|s| s.target_fraction),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_shard_covered_ratio",
            "Share of the hash space whose objects an informer sharded at the source has all cached.",
            MetricType::Gauge,
            &per_shard(&|s| s.covered_fraction),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_shard_filtered_out",
            "Objects received outside the shard and dropped before the cache (non-zero when the server ignores shardSelector).",
            MetricType::Counter,
            &per_shard(&|s| s.filtered_out as f64),
        )?;
        family(
            &mut enc,
            "wasm_informer_informer_shard_evicted",
            "Cached objects dropped because their shard range moved to another replica.",
            MetricType::Counter,
            &per_shard(&|s| s.evicted as f64),
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
        if let Some(c) = &r.cluster {
            let leader = f64::from(u8::from(c.role == "leader"));
            family(
                &mut enc,
                "wasm_informer_leader",
                "1 while this replica holds the election lease (leader mode), or a ring lease (sharded mode).",
                MetricType::Gauge,
                &[(
                    vec![("mode", c.mode.as_str()), ("identity", c.identity.as_str())],
                    if c.mode == "sharded" {
                        f64::from(u8::from(matches!(c.role.as_str(), "member" | "settling")))
                    } else {
                        leader
                    },
                )],
            )?;
            let shard_keys: Vec<(Labels<'_>, f64)> = c
                .shard_keys
                .iter()
                .map(|(res, n)| (vec![("resource", res.as_str())], *n as f64))
                .collect();
            family(
                &mut enc,
                "wasm_informer_shard_keys",
                "Cached keys this replica delivers to its plugins, per resource.",
                MetricType::Gauge,
                &shard_keys,
            )?;
            family(
                &mut enc,
                "wasm_informer_shard_owned_ratio",
                "Share of the keys this replica delivers (0 to 1).",
                MetricType::Gauge,
                &[(vec![], c.owned_fraction)],
            )?;
            family(
                &mut enc,
                "wasm_informer_ring_members",
                "Live members this replica sees (leader mode: the leader, if any).",
                MetricType::Gauge,
                &[(vec![], c.members.len() as f64)],
            )?;
            let members: Vec<(Labels<'_>, f64)> = c
                .members
                .iter()
                .map(|m| (vec![("member", m.as_str())], 1.0))
                .collect();
            family(
                &mut enc,
                "wasm_informer_ring_member",
                "1 for each live member this replica sees.",
                MetricType::Gauge,
                &members,
            )?;
            family(
                &mut enc,
                "wasm_informer_shard_handovers",
                "Changes of what this replica delivers.",
                MetricType::Counter,
                &[(vec![], c.handovers as f64)],
            )?;
            family(
                &mut enc,
                "wasm_informer_shard_keys_moved",
                "Cached keys gained (replayed) or released by this replica.",
                MetricType::Counter,
                &[
                    (vec![("direction", "gained")], c.keys_gained as f64),
                    (vec![("direction", "released")], c.keys_released as f64),
                ],
            )?;
            family(
                &mut enc,
                "wasm_informer_fence_open",
                "1 while writes from this replica may be sent.",
                MetricType::Gauge,
                &[(vec![], f64::from(u8::from(c.fence_open)))],
            )?;
        }
        let mut shadow_writes = Vec::new();
        for sh in &r.shadows {
            for o in crate::shadow::Outcome::ALL {
                shadow_writes.push((
                    vec![("plugin", sh.shadow.as_str()), ("outcome", o.as_str())],
                    sh.counts.get(o) as f64,
                ));
            }
        }
        if !shadow_writes.is_empty() {
            family(
                &mut enc,
                "wasm_informer_shadow_writes",
                "A shadow version's intended writes compared with its live plugin's: same, differs, only_live, only_shadow.",
                MetricType::Counter,
                &shadow_writes,
            )?;
        }
        family(
            &mut enc,
            "wasm_informer_ready",
            "1 when the config is loaded, every informer has synced, every plugin has had its replay and no file was rejected.",
            MetricType::Gauge,
            &[(vec![], if not_ready.is_empty() { 1.0 } else { 0.0 })],
        )?;
        Ok(())
    }
}

/// One histogram sample of a snapshot, as prometheus-client encodes it.
struct HistogramValue<'a>(&'a kube_informer::workqueue::HistogramSnapshot);

impl EncodeMetric for HistogramValue<'_> {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.0.sum_seconds,
            self.0.count,
            &self.0.bounds(),
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The work-queue families of every controller plugin, under client-go's
/// names with the label `name=PLUGIN`, and its reconciles by outcome.
fn controller_families(
    enc: &mut DescriptorEncoder,
    plugins: &[(&String, &crate::report::PluginReport)],
) -> Result<(), std::fmt::Error> {
    let controllers: Vec<(&str, &crate::report::ControllerReport)> = plugins
        .iter()
        .filter_map(|(n, p)| p.controller.as_ref().map(|c| (n.as_str(), c)))
        .collect();
    let per = |f: &dyn Fn(&crate::report::ControllerReport) -> f64| -> Vec<(Labels<'_>, f64)> {
        controllers
            .iter()
            .map(|(n, c)| (vec![("name", *n)], f(c)))
            .collect()
    };
    family(
        enc,
        "workqueue_depth",
        "Current depth of workqueue.",
        MetricType::Gauge,
        &per(&|c| c.queue.depth as f64),
    )?;
    family(
        enc,
        "workqueue_adds",
        "Total number of adds handled by workqueue.",
        MetricType::Counter,
        &per(&|c| c.queue.adds as f64),
    )?;
    family(
        enc,
        "workqueue_retries",
        "Total number of retries handled by workqueue.",
        MetricType::Counter,
        &per(&|c| c.queue.retries as f64),
    )?;
    family(
        enc,
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
        MetricType::Gauge,
        &per(&|c| c.queue.unfinished_work_seconds),
    )?;
    family(
        enc,
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running.",
        MetricType::Gauge,
        &per(&|c| c.queue.longest_running_processor_seconds),
    )?;
    family(
        enc,
        "workqueue_oldest_low_priority_seconds",
        "How many seconds the oldest ready low-priority key (of an initial list or a resync) has waited; past max_low_priority_wait it takes every other turn.",
        MetricType::Gauge,
        &per(&|c| c.queue.oldest_low_priority_seconds),
    )?;
    for (name, help, pick) in [
        (
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            (|c: &crate::report::ControllerReport| &c.queue.queue_duration)
                as fn(
                    &crate::report::ControllerReport,
                ) -> &kube_informer::workqueue::HistogramSnapshot,
        ),
        (
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            |c: &crate::report::ControllerReport| &c.queue.work_duration,
        ),
    ] {
        let mut me = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (n, c) in &controllers {
            let labels: Labels<'_> = vec![("name", *n)];
            let fe = me.encode_family(&labels)?;
            HistogramValue(pick(c)).encode(fe)?;
        }
    }
    let mut outcomes = Vec::new();
    for (n, c) in &controllers {
        let r = &c.reconciles;
        for (outcome, v) in [
            ("ok", r.ok),
            ("requeue", r.requeue),
            ("retry", r.retry),
            ("terminal", r.terminal),
            ("trap", r.trap),
        ] {
            outcomes.push((vec![("plugin", *n), ("outcome", outcome)], v as f64));
        }
    }
    family(
        enc,
        "wasm_informer_plugin_reconciles",
        "Reconciles of a controller plugin, by outcome (ok, requeue, retry, terminal, trap).",
        MetricType::Counter,
        &outcomes,
    )?;
    family(
        enc,
        "wasm_informer_plugin_workers",
        "Workers (instances) of a controller plugin.",
        MetricType::Gauge,
        &controllers
            .iter()
            .map(|(n, c)| (vec![("plugin", *n)], c.workers as f64))
            .collect::<Vec<_>>(),
    )?;
    Ok(())
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
    let cluster = source.cluster_lines();
    let (code, mut body) = if reasons.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        let mut body = String::from("not ready:\n");
        for r in reasons {
            body.push_str("- ");
            body.push_str(&r);
            body.push('\n');
        }
        (StatusCode::SERVICE_UNAVAILABLE, body)
    };
    for l in cluster {
        body.push_str(&l);
        body.push('\n');
    }
    (code, body)
}

/// `/cluster`: this replica's role and shard as JSON; `?keys=1` adds the
/// cached keys it delivers now, by resource. 404 outside leader or sharded
/// mode.
async fn cluster(
    State(source): State<Arc<dyn Observe>>,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> impl IntoResponse {
    let with_keys = q.is_some_and(|q| q.split('&').any(|p| p == "keys=1" || p == "keys=true"));
    match tokio::task::spawn_blocking(move || source.cluster_json(with_keys)).await {
        Ok(Some(v)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"error":"not running in leader or sharded mode"}"#.to_string(),
        ),
    }
}

/// `/shadow`: every shadow version's comparison with its live plugin, with
/// a view per object (`?outcome=differs` keeps the objects with that
/// verdict).
async fn shadow(
    State(source): State<Arc<dyn Observe>>,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> impl IntoResponse {
    let only = q.and_then(|q| {
        q.split('&')
            .find_map(|p| p.strip_prefix("outcome=").map(str::to_string))
    });
    let reports = tokio::task::spawn_blocking(move || source.shadow_reports())
        .await
        .unwrap_or_default();
    let reports: Vec<_> = reports
        .into_iter()
        .map(|mut r| {
            if let Some(o) = &only {
                r.keys.retain(|_, v| v.verdict.as_str() == o);
            }
            r
        })
        .collect();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "shadows": reports }).to_string(),
    )
}

/// The axum router serving `/metrics`, `/healthz` and `/readyz`.
pub fn router(source: Arc<dyn Observe>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/cluster", get(cluster))
        .route("/shadow", get(shadow))
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

/// Asserts that `promtool check metrics` accepts `text` (the exposition as
/// Prometheus reads it). Without promtool it says so and returns, except with
/// `CI=true`, where `scripts/setup.sh` installs it. For tests.
#[doc(hidden)]
pub fn assert_promtool_accepts(text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            child
                .stdin
                .take()
                .expect("promtool's stdin")
                .write_all(text.as_bytes())
                .expect("writing to promtool");
            let out = child.wait_with_output().expect("promtool's output");
            assert!(
                out.status.success(),
                "promtool check metrics failed:\n{}{}\n{text}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(e) => panic!(
            "this test needs promtool: apt-get install prometheus (scripts/setup.sh installs it): {e}"
        ),
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

    struct WithLatency(Vec<(String, PluginDurations)>);
    impl Observe for WithLatency {
        fn report(&self) -> Report {
            let mut r = Report::default();
            for (n, _) in &self.0 {
                r.plugins.insert(n.clone(), PluginReport::default());
            }
            r
        }
        fn not_ready(&self) -> Vec<String> {
            Vec::new()
        }
        fn plugin_latency(&self) -> Vec<(String, PluginDurations)> {
            self.0.clone()
        }
    }

    /// Handler and API request durations are Prometheus histograms whose
    /// buckets count exactly the durations recorded (the oracle is the list
    /// of durations), read back by a Prometheus text parser, and accepted by
    /// `promtool check metrics` (required when CI=true).
    #[test]
    fn handler_and_api_durations_are_prometheus_histograms() {
        let handler: Vec<u64> = (0..2000u64).map(|i| (i * i * 37) % 3_000_000).collect();
        let api: Vec<u64> = (0..700u64).map(|i| 200 + (i * 7919) % 900_000).collect();
        let histogram_of = |values: &[u64]| {
            let h = LatencyHistogram::default();
            for v in values {
                h.record_us(*v);
            }
            PluginLatency::of(&h)
        };
        let source = WithLatency(vec![
            (
                "fast".into(),
                PluginDurations {
                    handler: histogram_of(&handler),
                    api: histogram_of(&api),
                },
            ),
            ("idle".into(), PluginDurations::default()),
        ]);
        let text = to_prometheus_text(&render(Arc::new(source)));
        assert!(
            !text.contains("latency_p50") && !text.contains("latency_p99"),
            "the quantile gauges are gone: {text}"
        );
        let scrape =
            prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        for (metric, recorded) in [
            ("wasm_informer_plugin_handler_duration_seconds", &handler),
            ("wasm_informer_plugin_api_request_duration_seconds", &api),
        ] {
            let fast = scrape
                .samples
                .iter()
                .find(|s| s.metric == metric && s.labels.get("plugin") == Some("fast"))
                .unwrap_or_else(|| panic!("no {metric} for fast:\n{text}"));
            let prometheus_parse::Value::Histogram(buckets) = &fast.value else {
                panic!("{metric} not parsed as a histogram: {:?}", fast.value);
            };
            assert_eq!(buckets.len(), HANDLER_DURATION_BOUNDS_US.len() + 1);
            for b in buckets {
                let want = if b.less_than.is_infinite() {
                    recorded.len()
                } else {
                    let bound_us = (b.less_than * 1e6).round() as u64;
                    recorded.iter().filter(|v| **v < bound_us).count()
                };
                assert_eq!(b.count as usize, want, "{metric} bucket le={}", b.less_than);
            }
            let sum = text
                .lines()
                .find(|l| l.starts_with(&format!("{metric}_sum{{plugin=\"fast\"}}")))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap();
            let want_sum = recorded.iter().sum::<u64>() as f64 / 1e6;
            assert!(
                (sum - want_sum).abs() < 1e-6 * want_sum.max(1.0),
                "{metric}: {sum} vs {want_sum}"
            );
            assert!(
                text.contains(&format!("# TYPE {metric} histogram")),
                "{text}"
            );
        }
        super::assert_promtool_accepts(&text);
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

    #[test]
    fn controllers_get_client_go_workqueue_series() {
        let mut r = Report::default();
        let mut c = crate::report::ControllerReport {
            primary: "apps/v1/deployments".into(),
            workers: 4,
            ..Default::default()
        };
        c.queue.depth = 3;
        c.queue.adds = 12;
        c.queue.retries = 2;
        c.queue.longest_running_processor_seconds = 0.5;
        c.queue.unfinished_work_seconds = 0.75;
        c.queue.queue_duration = kube_informer::workqueue::HistogramSnapshot {
            buckets: vec![0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1],
            count: 4,
            sum_seconds: 20.5,
        };
        c.queue.work_duration = c.queue.queue_duration.clone();
        c.reconciles.ok = 9;
        c.reconciles.trap = 1;
        r.plugins.insert(
            "exposer".into(),
            PluginReport {
                state: "running".into(),
                controller: Some(c),
                ..Default::default()
            },
        );
        r.plugins.insert("handler".into(), PluginReport::default());
        let text = to_prometheus_text(&render(Arc::new(Fixed(r, vec![]))));
        for line in [
            "workqueue_depth{name=\"exposer\"} 3",
            "workqueue_adds_total{name=\"exposer\"} 12",
            "workqueue_retries_total{name=\"exposer\"} 2",
            "workqueue_longest_running_processor_seconds{name=\"exposer\"} 0.5",
            "workqueue_unfinished_work_seconds{name=\"exposer\"} 0.75",
            "workqueue_queue_duration_seconds_bucket{le=\"0.0001\",name=\"exposer\"} 1",
            "workqueue_queue_duration_seconds_bucket{le=\"0.001\",name=\"exposer\"} 3",
            "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"exposer\"} 4",
            "workqueue_work_duration_seconds_count{name=\"exposer\"} 4",
            "workqueue_work_duration_seconds_sum{name=\"exposer\"} 20.5",
            "wasm_informer_plugin_reconciles_total{plugin=\"exposer\",outcome=\"ok\"} 9",
            "wasm_informer_plugin_reconciles_total{plugin=\"exposer\",outcome=\"trap\"} 1",
            "wasm_informer_plugin_workers{plugin=\"exposer\"} 4",
            "# TYPE workqueue_queue_duration_seconds histogram",
            "# TYPE workqueue_adds_total counter",
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
        assert!(
            !text.contains("name=\"handler\""),
            "event handlers have no work queue"
        );
        // A scraper parses it.
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        assert!(scrape.samples.iter().any(|s| s.metric == "workqueue_depth"));
    }
}

#[cfg(test)]
mod shadow_tests {
    use super::*;
    use crate::shadow::{Counts, ShadowReport};

    struct WithShadow;
    impl Observe for WithShadow {
        fn report(&self) -> Report {
            Report {
                shadows: vec![ShadowReport {
                    shadow: "enforcer-next".into(),
                    live: "enforcer".into(),
                    counts: Counts {
                        same: 5,
                        differs: 3,
                        only_live: 1,
                        only_shadow: 2,
                    },
                    ..Default::default()
                }],
                ..Report::default()
            }
        }
        fn not_ready(&self) -> Vec<String> {
            Vec::new()
        }
    }

    #[test]
    fn a_shadows_comparison_is_a_counter_by_outcome_and_top_reads_it_back() {
        let text = to_prometheus_text(&render(Arc::new(WithShadow)));
        for (o, n) in [
            ("same", 5),
            ("differs", 3),
            ("only_live", 1),
            ("only_shadow", 2),
        ] {
            let line = format!(
                "wasm_informer_shadow_writes_total{{plugin=\"enforcer-next\",outcome=\"{o}\"}} {n}"
            );
            assert!(text.contains(&line), "{line} not in:\n{text}");
        }
        let s = crate::commands::top::parse_metrics(&text);
        assert_eq!(s.report.shadows.len(), 1);
        assert_eq!(
            s.report.shadows[0].counts,
            Counts {
                same: 5,
                differs: 3,
                only_live: 1,
                only_shadow: 2
            }
        );
        let m = crate::commands::top::Model {
            snapshot: Some(s),
            ..Default::default()
        };
        let table = crate::commands::top::plain(&m);
        assert!(
            table.contains("shadow enforcer-next: 5 same, 3 differs, 1 only live, 2 only shadow"),
            "{table}"
        );
    }
}
