//! `wasm-informer top`: a live view of a running host, read from its metrics
//! endpoint (`metrics_addr` in host.toml), in the terminal's alternate
//! screen: one row per plugin (state, events/s, queue depth, coalesced,
//! errors, traps, restarts, p99, versions) and one per informer.
//!
//! Job: scrape `/metrics` every interval, turn the Prometheus text back into
//! a [`Report`] ([`parse_metrics`]), compute rates from successive scrapes
//! ([`Rates`]) and draw them with ratatui ([`draw`]). `--once` prints one
//! plain table instead, for scripts and terminals without a screen.
//!
//! Invariant: the view only reads; a scrape that fails keeps the last good
//! snapshot on screen with the error beneath it, and the terminal is given
//! back as it was on `q`, Esc, Ctrl-C or an error.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::Failure;
use crate::report::Report;

/// Flags of `top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The host's metrics endpoint: `HOST:PORT` (its `metrics_addr`) or
    /// `http://HOST:PORT[/metrics]`.
    #[arg(long, default_value = crate::config::DEFAULT_METRICS_ADDR)]
    pub metrics: String,
    /// Seconds between scrapes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Print one table (two scrapes, one interval apart, for the rates) and
    /// exit, with no alternate screen.
    #[arg(long)]
    pub once: bool,
}

/// One scrape, turned back into the host's report shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Plugins and informers as the metrics describe them (no strings the
    /// metrics do not carry: no last errors, resource versions or manifests).
    pub report: Report,
    /// `wasm_informer_ready`.
    pub ready: Option<bool>,
    /// `wasm_informer_config_errors`: files currently rejected.
    pub config_errors: u64,
    /// `wasm_informer_reloads_total` by action.
    pub reloads: BTreeMap<String, u64>,
}

/// A sample's labels, in order.
type Labels = Vec<(String, String)>;

/// Splits `name{labels} value` (the classic text format, or OpenMetrics).
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let name = &line[..open];
            let mut labels = Vec::new();
            let mut chars = line[open + 1..].char_indices();
            let mut key = String::new();
            let end;
            loop {
                let (i, c) = chars.next()?;
                match c {
                    '}' => {
                        end = open + 1 + i + 1;
                        break;
                    }
                    ',' | ' ' => {}
                    '=' => {
                        if chars.next()?.1 != '"' {
                            return None;
                        }
                        let mut value = String::new();
                        loop {
                            match chars.next()?.1 {
                                '"' => break,
                                '\\' => match chars.next()?.1 {
                                    'n' => value.push('\n'),
                                    c => value.push(c),
                                },
                                c => value.push(c),
                            }
                        }
                        labels.push((std::mem::take(&mut key), value));
                    }
                    c => key.push(c),
                }
            }
            (name, labels, &line[end..])
        }
        None => {
            let (name, rest) = line.split_once(' ')?;
            (name, Vec::new(), rest)
        }
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The `q` quantile of a cumulative histogram (`(le, count)` by `le`), by
/// linear interpolation inside the bucket, as Prometheus'
/// `histogram_quantile` does; None when it holds no observation.
fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let width = count - below;
            let within = if width > 0.0 {
                (rank - below) / width
            } else {
                1.0
            };
            return Some(lower + (le - lower) * within);
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

/// The host's metrics text as a [`Snapshot`].
pub fn parse_metrics(text: &str) -> Snapshot {
    let mut s = Snapshot::default();
    // wasm_informer_plugin_handler_duration_seconds_bucket, by plugin.
    let mut histograms: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines() {
        let Some((name, labels, v)) = sample(line) else {
            continue;
        };
        let label = |k: &str| labels.iter().find(|(l, _)| l == k).map(|(_, v)| v.as_str());
        let n = v.max(0.0) as u64;
        if name == "wasm_informer_shadow_writes_total" {
            if let (Some(shadow), Some(outcome)) = (label("plugin"), label("outcome")) {
                let i = match s.report.shadows.iter().position(|r| r.shadow == shadow) {
                    Some(i) => i,
                    None => {
                        s.report.shadows.push(crate::shadow::ShadowReport {
                            shadow: shadow.to_string(),
                            ..Default::default()
                        });
                        s.report.shadows.len() - 1
                    }
                };
                let c = &mut s.report.shadows[i].counts;
                match outcome {
                    "same" => c.same = n,
                    "differs" => c.differs = n,
                    "only_live" => c.only_live = n,
                    "only_shadow" => c.only_shadow = n,
                    _ => {}
                }
            }
            continue;
        }
        if let Some(metric) = name.strip_prefix("wasm_informer_plugin_") {
            let Some(plugin) = label("plugin") else {
                continue;
            };
            let p = s.report.plugins.entry(plugin.to_string()).or_default();
            match metric {
                "events_total" => match label("kind") {
                    Some("added") => p.delivered.added = n,
                    Some("updated") => p.delivered.updated = n,
                    Some("deleted") => p.delivered.deleted = n,
                    Some("synced") => p.delivered.synced = n,
                    _ => {}
                },
                "replayed_total" => p.replayed = n,
                "errors_total" => p.errors = n,
                "traps_total" => p.traps = n,
                "restarts_total" => p.restarts = n,
                "quarantines_total" => p.quarantines = n,
                "coalesced_total" => p.coalesced = n,
                "overflowed_total" => p.overflowed = n,
                "queue_depth" => p.queue_depth = n,
                "queue_depth_max" => p.queue_depth_max = n,
                "versions" => p.versions = n,
                "api_throttled_total" => p.api.throttled = n,
                "api_token_wait_seconds_total" => p.api.token_wait_ms = (v * 1e3) as u64,
                "reconciles_total" => {
                    let c = p.controller.get_or_insert_with(Default::default);
                    match label("outcome") {
                        Some("ok") => c.reconciles.ok = n,
                        Some("requeue") => c.reconciles.requeue = n,
                        Some("retry") => c.reconciles.retry = n,
                        Some("terminal") => c.reconciles.terminal = n,
                        Some("trap") => c.reconciles.trap = n,
                        _ => {}
                    }
                }
                "workers" => p.controller.get_or_insert_with(Default::default).workers = n,
                "state" if v == 1.0 => {
                    if let Some(st) = label("state") {
                        p.state = st.to_string();
                    }
                }
                // Hosts before the histogram.
                "handler_latency_p50_seconds" => p.latency_us.p50 = (v * 1e6).round() as u64,
                "handler_latency_p99_seconds" => p.latency_us.p99 = (v * 1e6).round() as u64,
                "handler_duration_seconds_bucket" => {
                    let le = match label("le") {
                        Some("+Inf") | Some("Inf") => Some(f64::INFINITY),
                        Some(b) => b.parse().ok(),
                        None => None,
                    };
                    if let Some(le) = le {
                        histograms
                            .entry(plugin.to_string())
                            .or_default()
                            .push((le, v));
                    }
                }
                _ => {}
            }
        } else if let Some(metric) = name.strip_prefix("workqueue_") {
            // client-go's workqueue series, named after the controller plugin.
            let Some(plugin) = label("name") else {
                continue;
            };
            let p = s.report.plugins.entry(plugin.to_string()).or_default();
            let q = &mut p.controller.get_or_insert_with(Default::default).queue;
            match metric {
                "depth" => q.depth = n,
                "adds_total" => q.adds = n,
                "retries_total" => q.retries = n,
                "unfinished_work_seconds" => q.unfinished_work_seconds = v,
                "longest_running_processor_seconds" => q.longest_running_processor_seconds = v,
                _ => {}
            }
        } else if let Some(metric) = name.strip_prefix("wasm_informer_informer_") {
            let Some(resource) = label("resource") else {
                continue;
            };
            let i = s.report.informers.entry(resource.to_string()).or_default();
            match metric {
                "objects" => i.objects = n,
                "synced" => i.synced = v == 1.0,
                "running" => i.running = v == 1.0,
                "lists_total" => i.lists = n,
                "watch_restarts_total" => i.watch_restarts = n,
                "relists_410_total" => i.relists_410 = n,
                _ => {}
            }
        } else {
            match name {
                "wasm_informer_ready" => s.ready = Some(v == 1.0),
                "wasm_informer_config_errors" => s.config_errors = n,
                "wasm_informer_reloads_total" => {
                    if let Some(a) = label("action") {
                        s.reloads.insert(a.to_string(), n);
                    }
                }
                _ => {}
            }
        }
    }
    for (plugin, mut buckets) in histograms {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(p) = s.report.plugins.get_mut(&plugin) {
            let us = |q| quantile(q, &buckets).map_or(0, |v| (v * 1e6).round() as u64);
            p.latency_us.p50 = us(0.5);
            p.latency_us.p99 = us(0.99);
        }
    }
    s
}

/// Events (or, for a controller, reconciles) per second per plugin, over the
/// last [`RATE_WINDOW`] of snapshots: a rate follows time, not the moments a
/// plugin's counters move (a busy plugin settles its events in batches).
#[derive(Debug, Default)]
pub struct Rates {
    history: std::collections::VecDeque<(Instant, Counters)>,
    current: BTreeMap<String, f64>,
    throttled: BTreeMap<String, bool>,
}

/// Per plugin, the counters one snapshot showed: (work done, calls throttled).
type Counters = BTreeMap<String, (u64, u64)>;

/// How far back a rate looks.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);

/// What a plugin's rate counts: events handled, or reconciles done.
fn work_done(p: &crate::report::PluginReport) -> u64 {
    match &p.controller {
        Some(c) => c.reconciles.total(),
        None => p.delivered.total(),
    }
}

impl Rates {
    /// Takes in a snapshot taken at `at`.
    pub fn update(&mut self, s: &Snapshot, at: Instant) {
        let totals: BTreeMap<String, (u64, u64)> = s
            .report
            .plugins
            .iter()
            .map(|(n, p)| (n.clone(), (work_done(p), p.api.throttled)))
            .collect();
        self.history.push_back((at, totals));
        // Keep the newest snapshot older than the window as the base.
        while self.history.len() > 2
            && at.saturating_duration_since(self.history[1].0) >= RATE_WINDOW
        {
            self.history.pop_front();
        }
        let (Some((then, first)), Some((now, last))) = (self.history.front(), self.history.back())
        else {
            return;
        };
        if self.history.len() < 2 {
            return;
        }
        let secs = now.saturating_duration_since(*then).as_secs_f64().max(1e-3);
        self.current = last
            .iter()
            .map(|(n, (t, _))| {
                let before = first.get(n).map_or(0, |b| b.0);
                (n.clone(), t.saturating_sub(before) as f64 / secs)
            })
            .collect();
        self.throttled = last
            .iter()
            .map(|(n, (_, w))| (n.clone(), first.get(n).is_some_and(|b| *w > b.1)))
            .collect();
    }

    /// Whether `plugin`'s calls waited on its write rate within the window.
    pub fn throttled(&self, plugin: &str) -> bool {
        self.throttled.get(plugin).copied().unwrap_or(false)
    }

    /// The rate of `plugin`, once two snapshots were seen.
    pub fn get(&self, plugin: &str) -> Option<f64> {
        self.current.get(plugin).copied()
    }
}

/// What the screen shows.
#[derive(Debug, Default)]
pub struct Model {
    /// Where the metrics come from (for the title).
    pub source: String,
    /// The last good scrape.
    pub snapshot: Option<Snapshot>,
    /// Rates from the last two good scrapes.
    pub rates: Rates,
    /// The last scrape's error, if it failed.
    pub error: Option<String>,
    /// The selected plugin row.
    pub table: TableState,
    /// With a log pane (`dev`'s view): the log file's path.
    pub log_title: Option<String>,
    /// The log pane's lines, oldest first.
    pub logs: Vec<String>,
    /// A line that stays under the summary until replaced (`dev`: the last
    /// build's outcome, a build error in red), and whether it is an error.
    pub banner: Option<(String, bool)>,
}

impl Model {
    /// The name of the selected row: event handlers first, then controllers,
    /// as the tables show them.
    pub fn selected_plugin(&self) -> Option<String> {
        let i = self.table.selected()?;
        self.row_names().into_iter().nth(i)
    }

    /// Every row's plugin, in the order the two tables show them.
    pub fn row_names(&self) -> Vec<String> {
        plugins_of(self, false)
            .into_iter()
            .chain(plugins_of(self, true))
            .map(|(n, _)| n)
            .collect()
    }

    /// Whether `plugin`'s calls waited on its write rate lately.
    pub fn throttled(&self, plugin: &str) -> bool {
        self.rates.throttled(plugin)
    }
}

const PLUGIN_HEADER: [&str; 10] = [
    "PLUGIN",
    "STATE",
    "EVENTS/S",
    "QUEUE",
    "COALESCED",
    "ERRORS",
    "TRAPS",
    "RESTARTS",
    "P99(us)",
    "VERSIONS",
];

const CONTROLLER_HEADER: [&str; 10] = [
    "CONTROLLER",
    "STATE",
    "RECONCILES/S",
    "QUEUE",
    "OK",
    "REQUEUE",
    "RETRY",
    "TERMINAL",
    "TRAPS",
    "LONGEST(s)",
];

const INFORMER_HEADER: [&str; 7] = [
    "INFORMER",
    "OBJECTS",
    "SYNCED",
    "RUNNING",
    "LISTS",
    "WATCHES",
    "RELISTS(410)",
];

fn state_style(state: &str) -> Style {
    match state {
        "running" => Style::default().fg(Color::Green),
        "starting" | "backing-off" => Style::default().fg(Color::Yellow),
        "quarantined" | "failed" => Style::default().fg(Color::Red),
        _ => Style::default(),
    }
}

/// A rate, or `-` before there are two snapshots.
fn rate_cell(m: &Model, name: &str) -> String {
    m.rates
        .get(name)
        .map(|r| format!("{r:.1}"))
        .unwrap_or_else(|| "-".into())
}

/// The cells of an event handler's row.
fn plugin_cells(m: &Model, name: &str, p: &crate::report::PluginReport) -> Vec<String> {
    let versions = if p.versions == 0 {
        "-".to_string()
    } else {
        p.versions.to_string()
    };
    let state = if m.throttled(name) {
        format!("{} (write_qps)", p.state)
    } else {
        p.state.clone()
    };
    vec![
        name.to_string(),
        state,
        rate_cell(m, name),
        p.queue_depth.to_string(),
        p.coalesced.to_string(),
        p.errors.to_string(),
        p.traps.to_string(),
        p.restarts.to_string(),
        p.latency_us.p99.to_string(),
        versions,
    ]
}

/// The cells of a controller's row.
fn controller_cells(m: &Model, name: &str, p: &crate::report::PluginReport) -> Vec<String> {
    let c = p.controller.clone().unwrap_or_default();
    let r = &c.reconciles;
    vec![
        name.to_string(),
        p.state.clone(),
        rate_cell(m, name),
        c.queue.depth.to_string(),
        r.ok.to_string(),
        r.requeue.to_string(),
        r.retry.to_string(),
        r.terminal.to_string(),
        r.trap.to_string(),
        format!("{:.1}", c.queue.longest_running_processor_seconds),
    ]
}

/// Event handlers (`controllers` false) or controllers, by name.
fn plugins_of(m: &Model, controllers: bool) -> Vec<(String, crate::report::PluginReport)> {
    let Some(s) = &m.snapshot else {
        return Vec::new();
    };
    s.report
        .plugins
        .iter()
        .filter(|(_, p)| p.controller.is_some() == controllers)
        .map(|(n, p)| (n.clone(), p.clone()))
        .collect()
}

fn plugin_rows(m: &Model) -> Vec<Row<'static>> {
    plugins_of(m, false)
        .iter()
        .map(|(name, p)| Row::new(plugin_cells(m, name, p)).style(state_style(&p.state)))
        .collect()
}

fn controller_rows(m: &Model) -> Vec<Row<'static>> {
    plugins_of(m, true)
        .iter()
        .map(|(name, p)| Row::new(controller_cells(m, name, p)).style(state_style(&p.state)))
        .collect()
}

fn informer_rows(m: &Model) -> Vec<Row<'static>> {
    let Some(s) = &m.snapshot else {
        return Vec::new();
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    s.report
        .informers
        .iter()
        .map(|(name, i)| {
            Row::new(vec![
                name.clone(),
                i.objects.to_string(),
                yes_no(i.synced),
                yes_no(i.running),
                i.lists.to_string(),
                i.watch_restarts.to_string(),
                i.relists_410.to_string(),
            ])
        })
        .collect()
}

fn summary(m: &Model) -> String {
    let Some(s) = &m.snapshot else {
        return format!("{}: waiting for the first scrape", m.source);
    };
    let ready = match s.ready {
        Some(true) => "ready",
        Some(false) => "not ready",
        None => "readiness unknown",
    };
    let reloads: Vec<String> = s
        .reloads
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(a, n)| format!("{a} {n}"))
        .collect();
    let shadows: String = s
        .report
        .shadows
        .iter()
        .map(|r| {
            let c = &r.counts;
            format!(
                " · shadow {}: {} same, {} differs, {} only live, {} only shadow",
                r.shadow, c.same, c.differs, c.only_live, c.only_shadow
            )
        })
        .collect();
    format!(
        "{ready} · {} plugin(s) · {} informer(s) · config errors {} · reloads: {}{shadows}",
        s.report.plugins.len(),
        s.report.informers.len(),
        s.config_errors,
        if reloads.is_empty() {
            "none".to_string()
        } else {
            reloads.join(", ")
        }
    )
}

/// The log lines cut into rows of at most `width` columns, the last `rows`
/// of them: a long line (an audit line) wraps instead of losing its end.
pub fn wrapped_tail(lines: &[String], width: usize, rows: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out: Vec<String> = Vec::new();
    for line in lines.iter().rev() {
        let chars: Vec<char> = line.chars().collect();
        let mut chunks: Vec<String> = chars
            .chunks(width)
            .map(|c| c.iter().collect::<String>())
            .collect();
        if chunks.is_empty() {
            chunks.push(String::new());
        }
        for c in chunks.into_iter().rev() {
            out.push(c);
            if out.len() == rows {
                out.reverse();
                return out;
            }
        }
    }
    out.reverse();
    out
}

/// The width of a name column: its longest name, within bounds.
fn name_width(header: &str, names: impl Iterator<Item = usize>) -> u16 {
    names.chain([header.len()]).max().unwrap_or(8).clamp(8, 48) as u16
}

/// A table's height for `rows` rows (borders and header included).
fn table_height(rows: usize) -> u16 {
    rows as u16 + 3
}

/// Draws the model on a frame: the summary (and the banner), the event
/// handlers, the controllers, the informers, each as tall as its rows, and
/// the log pane in all the room that is left.
pub fn draw(f: &mut Frame, m: &mut Model) {
    let plugins = plugin_rows(m);
    let controllers = controller_rows(m);
    let informers = informer_rows(m);
    let handler_names: Vec<usize> = plugins_of(m, false)
        .iter()
        .map(|(n, _)| n.chars().count())
        .collect();
    let controller_names: Vec<usize> = plugins_of(m, true)
        .iter()
        .map(|(n, _)| n.chars().count())
        .collect();
    let head_height = if m.banner.is_some() { 2 } else { 1 };
    let with_log = m.log_title.is_some();
    let controller_height = if controllers.is_empty() {
        0
    } else {
        table_height(controllers.len())
    };
    let [head, plugin_area, controller_area, informer_area, log_area, foot] = Layout::vertical([
        Constraint::Length(head_height),
        if with_log {
            Constraint::Length(table_height(plugins.len().max(1)))
        } else {
            Constraint::Min(table_height(plugins.len().max(1)))
        },
        Constraint::Length(controller_height),
        Constraint::Length(table_height(informers.len())),
        if with_log {
            Constraint::Min(6)
        } else {
            Constraint::Length(0)
        },
        Constraint::Length(1),
    ])
    .areas(f.area());
    if let Some(title) = &m.log_title {
        let rows = log_area.height.saturating_sub(2) as usize;
        let width = log_area.width.saturating_sub(2) as usize;
        let who = m
            .selected_plugin()
            .map(|p| format!("{p}'s lines"))
            .unwrap_or_else(|| "all lines".into());
        f.render_widget(
            Paragraph::new(wrapped_tail(&m.logs, width, rows).join("\n"))
                .block(Block::bordered().title(format!(" log ({who}): {title} "))),
            log_area,
        );
    }
    let [summary_area, banner_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(head_height - 1)]).areas(head);
    f.render_widget(
        Paragraph::new(Line::from(summary(m))).style(Style::default().add_modifier(Modifier::BOLD)),
        summary_area,
    );
    if let Some((text, error)) = &m.banner {
        let style = if *error {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(Color::Green)
        };
        f.render_widget(Paragraph::new(text.as_str()).style(style), banner_area);
    }
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let highlight = Style::default().add_modifier(Modifier::REVERSED);
    // One selection over both tables: event handlers first.
    let selected = m.table.selected();
    let split = plugins.len();
    let mut handler_state = TableState::default().with_selected(selected.filter(|i| *i < split));
    let mut controller_state =
        TableState::default().with_selected(selected.and_then(|i| i.checked_sub(split)));
    let plugin_widths = [
        Constraint::Length(name_width("PLUGIN", handler_names.into_iter())),
        Constraint::Length(24),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(8),
        Constraint::Length(9),
    ];
    let table = Table::new(plugins, plugin_widths)
        .header(Row::new(PLUGIN_HEADER).style(bold))
        .block(Block::bordered().title(format!(" event handlers — {} ", m.source)))
        .row_highlight_style(highlight);
    f.render_stateful_widget(table, plugin_area, &mut handler_state);
    if controller_height > 0 {
        let widths = [
            Constraint::Length(name_width("CONTROLLER", controller_names.into_iter())),
            Constraint::Length(12),
            Constraint::Length(13),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(6),
            Constraint::Length(11),
        ];
        f.render_stateful_widget(
            Table::new(controllers, widths)
                .header(Row::new(CONTROLLER_HEADER).style(bold))
                .block(Block::bordered().title(" controllers "))
                .row_highlight_style(highlight),
            controller_area,
            &mut controller_state,
        );
    }
    let informer_widths = [
        Constraint::Min(24),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(12),
    ];
    f.render_widget(
        Table::new(informers, informer_widths)
            .header(Row::new(INFORMER_HEADER).style(bold))
            .block(Block::bordered().title(" informers ")),
        informer_area,
    );
    let footer = match &m.error {
        Some(e) => Paragraph::new(format!("scrape failed (showing the last good one): {e}"))
            .style(Style::default().fg(Color::Red)),
        None => Paragraph::new("q quit · ↑/↓ select a plugin"),
    };
    f.render_widget(footer, foot);
}

/// The `/metrics` address and path `--metrics` names.
pub fn endpoint(spec: &str) -> Result<(String, String), String> {
    let rest = spec.strip_prefix("http://").unwrap_or(spec);
    if rest.starts_with("https://") {
        return Err(format!(
            "--metrics {spec}: the host serves plain HTTP; give HOST:PORT or http://HOST:PORT"
        ));
    }
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) if !p.is_empty() => (a, format!("/{p}")),
        Some((a, _)) => (a, "/metrics".to_string()),
        None => (rest, "/metrics".to_string()),
    };
    if authority.is_empty() || !authority.contains(':') {
        return Err(format!(
            "--metrics {spec}: expected HOST:PORT (the host's metrics_addr)"
        ));
    }
    Ok((authority.to_string(), path))
}

/// One scrape: HTTP/1.0, so the body ends with the connection.
pub fn scrape(authority: &str, path: &str, timeout: Duration) -> Result<String, String> {
    let addr: SocketAddr = authority
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot reach http://{authority}{path}: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nAccept: text/plain\r\n\r\n"
    )
    .map_err(|e| format!("http://{authority}{path}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("http://{authority}{path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("http://{authority}{path}: not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!(
            "http://{authority}{path}: HTTP {status} (is this a wasm-informer metrics_addr?)"
        ));
    }
    Ok(body.to_string())
}

/// The plain table `--once` prints.
pub fn plain(m: &Model) -> String {
    let mut out = summary(m);
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![PLUGIN_HEADER.iter().map(|s| s.to_string()).collect()];
    for (name, p) in plugins_of(m, false) {
        rows.push(plugin_cells(m, &name, &p));
    }
    out.push_str(&columns(&rows));
    let controllers = plugins_of(m, true);
    if !controllers.is_empty() {
        out.push('\n');
        let mut rows: Vec<Vec<String>> =
            vec![CONTROLLER_HEADER.iter().map(|s| s.to_string()).collect()];
        for (name, p) in controllers {
            rows.push(controller_cells(m, &name, &p));
        }
        out.push_str(&columns(&rows));
    }
    out.push('\n');
    let mut rows: Vec<Vec<String>> = vec![INFORMER_HEADER.iter().map(|s| s.to_string()).collect()];
    if let Some(s) = &m.snapshot {
        for (name, i) in &s.report.informers {
            rows.push(vec![
                name.clone(),
                i.objects.to_string(),
                if i.synced { "yes" } else { "no" }.into(),
                if i.running { "yes" } else { "no" }.into(),
                i.lists.to_string(),
                i.watch_restarts.to_string(),
                i.relists_410.to_string(),
            ]);
        }
    }
    out.push_str(&columns(&rows));
    out
}

fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.first().map(Vec::len).unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Restores the terminal when the view ends, however it ends.
struct Screen;

impl Drop for Screen {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs `top`.
pub fn run(args: TopArgs) -> Result<(), Failure> {
    let (authority, path) = endpoint(&args.metrics).map_err(Failure::input)?;
    if !(args.interval.is_finite() && args.interval > 0.0) {
        return Err(Failure::input(format!(
            "--interval {}: must be a number of seconds > 0",
            args.interval
        )));
    }
    let interval = Duration::from_secs_f64(args.interval);
    let timeout = interval.max(Duration::from_secs(2));
    let mut m = Model {
        source: format!("http://{authority}{path}"),
        ..Default::default()
    };
    let take = |m: &mut Model| {
        let sent = Instant::now();
        let scraped = scrape(&authority, &path, timeout);
        // The host counted what it answers somewhere between the request
        // and the answer: the midpoint halves the error a slow scrape puts
        // into a rate, and keeps it from growing with the parse.
        let at = sent + sent.elapsed() / 2;
        take_scrape(m, scraped, at)
    };
    fn take_scrape(m: &mut Model, scraped: Result<String, String>, at: Instant) {
        match scraped {
            Ok(text) => {
                let s = parse_metrics(&text);
                m.rates.update(&s, at);
                m.snapshot = Some(s);
                m.error = None;
            }
            Err(e) => m.error = Some(e),
        }
    }
    if args.once {
        take(&mut m);
        if let Some(e) = &m.error {
            return Err(Failure::runtime(e));
        }
        std::thread::sleep(interval);
        take(&mut m);
        print!("{}", plain(&m));
        return Ok(());
    }
    let mut terminal = ratatui::try_init().map_err(|e| {
        Failure::runtime(format!(
            "cannot take over the terminal ({e}); use --once for a plain table"
        ))
    })?;
    let _screen = Screen;
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            take(&mut m);
            next = Instant::now() + interval;
        }
        let count = m.row_names().len();
        terminal
            .draw(|f| draw(f, &mut m))
            .map_err(|e| Failure::runtime(format!("terminal: {e}")))?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(|e| Failure::runtime(format!("terminal: {e}")))? {
            if let Event::Key(k) =
                event::read().map_err(|e| Failure::runtime(format!("terminal: {e}")))?
            {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(())
                    }
                    KeyCode::Down | KeyCode::Char('j') if count > 0 => {
                        let i = m.table.selected().map(|i| (i + 1) % count).unwrap_or(0);
                        m.table.select(Some(i));
                    }
                    KeyCode::Up | KeyCode::Char('k') if count > 0 => {
                        let i = m
                            .table
                            .selected()
                            .map(|i| (i + count - 1) % count)
                            .unwrap_or(0);
                        m.table.select(Some(i));
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// `/metrics` of a host running the examples against the simulator,
    /// recorded twice, two seconds apart.
    const FIRST: &str = include_str!("../../tests/fixtures/top/metrics-1.txt");
    const SECOND: &str = include_str!("../../tests/fixtures/top/metrics-2.txt");

    fn screen(m: &mut Model, w: u16, h: u16) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, m)).unwrap();
        let buf = t.backend().buffer().clone();
        buf.content
            .chunks(w as usize)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
            .collect()
    }

    #[test]
    fn samples_parse_with_labels_escapes_and_bare_names() {
        let (n, l, v) = sample(r#"a_total{plugin="x\"y",kind="added"} 9"#).unwrap();
        assert_eq!(n, "a_total");
        assert_eq!(
            l,
            vec![
                ("plugin".to_string(), "x\"y".to_string()),
                ("kind".to_string(), "added".to_string())
            ]
        );
        assert_eq!(v, 9.0);
        assert_eq!(sample("wasm_informer_ready 1").unwrap().2, 1.0);
        assert!(sample("# TYPE x counter").is_none());
    }

    #[test]
    fn a_recorded_scrape_renders_one_row_per_plugin_and_informer() {
        let first = parse_metrics(FIRST);
        let second = parse_metrics(SECOND);
        assert!(!second.report.plugins.is_empty(), "{SECOND}");
        let t0 = Instant::now();
        let mut m = Model {
            source: "http://127.0.0.1:9898/metrics".into(),
            ..Default::default()
        };
        m.rates.update(&first, t0);
        m.rates.update(&second, t0 + Duration::from_secs(2));
        m.snapshot = Some(second.clone());
        let lines = screen(&mut m, 120, 30);
        let text = lines.join("\n");
        let ready = if second.ready == Some(true) {
            "ready · "
        } else {
            "not ready · "
        };
        assert!(lines[0].starts_with(ready), "{text}");
        // The recording's handler times are a histogram: p99 comes from it.
        assert!(
            second.report.plugins.values().all(|p| p.latency_us.p99 > 0),
            "{:?}",
            second.report.plugins
        );
        for (name, p) in &second.report.plugins {
            let row = lines
                .iter()
                .find(|l| l.contains(&format!("│{name} ")))
                .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
            let cols: Vec<&str> = row
                .trim_matches(|c: char| c == '│' || c.is_whitespace())
                .split_whitespace()
                .collect();
            let before = first.report.plugins[name].delivered.total();
            let rate = (p.delivered.total() - before) as f64 / 2.0;
            assert_eq!(cols[1], p.state, "{row}");
            assert_eq!(cols[2], format!("{rate:.1}"), "{row}");
            assert_eq!(cols[3], p.queue_depth.to_string(), "{row}");
            assert_eq!(cols[8], p.latency_us.p99.to_string(), "{row}");
        }
        for (name, i) in &second.report.informers {
            let row = lines
                .iter()
                .find(|l| l.contains(&format!("│{name} ")))
                .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
            assert!(row.contains(&format!(" {} ", i.objects)), "{row}");
        }
        assert!(text.contains("q quit"), "{text}");
        // A failed scrape keeps the rows and says why.
        m.error = Some("cannot reach http://127.0.0.1:9898/metrics: refused".into());
        let text = screen(&mut m, 120, 30).join("\n");
        assert!(text.contains("scrape failed"), "{text}");
        assert!(
            text.contains(second.report.plugins.keys().next().unwrap()),
            "{text}"
        );
        // The plain table has the same rows.
        let p = plain(&m);
        for name in second.report.plugins.keys() {
            assert!(p.lines().any(|l| l.starts_with(name.as_str())), "{p}");
        }
    }

    #[test]
    fn p99_comes_from_the_histogram_as_histogram_quantile_computes_it() {
        // 100 calls: 90 at most 4 µs, 9 more at most 16 µs, 1 at most 64 µs.
        let b = [
            (1e-6, 0.0),
            (4e-6, 90.0),
            (16e-6, 99.0),
            (64e-6, 100.0),
            (f64::INFINITY, 100.0),
        ];
        let p99 = quantile(0.99, &b).unwrap();
        assert!((p99 - 16e-6).abs() < 1e-12, "{p99}");
        let p50 = quantile(0.5, &b).unwrap();
        assert!((p50 - (1e-6 + 3e-6 * 50.0 / 90.0)).abs() < 1e-12, "{p50}");
        assert_eq!(quantile(0.99, &[(1e-6, 0.0), (f64::INFINITY, 0.0)]), None);
        let text = "wasm_informer_plugin_events_total{plugin=\"a\",kind=\"added\"} 100\n\
            wasm_informer_plugin_handler_duration_seconds_bucket{plugin=\"a\",le=\"4e-6\"} 90\n\
            wasm_informer_plugin_handler_duration_seconds_bucket{plugin=\"a\",le=\"1.6e-5\"} 99\n\
            wasm_informer_plugin_handler_duration_seconds_bucket{plugin=\"a\",le=\"6.4e-5\"} 100\n\
            wasm_informer_plugin_handler_duration_seconds_bucket{plugin=\"a\",le=\"+Inf\"} 100\n";
        let s = parse_metrics(text);
        assert_eq!(s.report.plugins["a"].latency_us.p99, 16);
    }

    #[test]
    fn endpoints_are_addresses_or_http_urls() {
        assert_eq!(
            endpoint("127.0.0.1:9898").unwrap(),
            ("127.0.0.1:9898".into(), "/metrics".into())
        );
        assert_eq!(
            endpoint("http://localhost:1/metrics").unwrap(),
            ("localhost:1".into(), "/metrics".into())
        );
        assert!(endpoint("https://x:1").is_err());
        assert!(endpoint("localhost").is_err());
    }
}
