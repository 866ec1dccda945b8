//! The terminal status view: a per-plugin table in the spirit of `kubectl top`,
//! redrawn every second while stdout is a terminal.
//!
//! Job: turn successive [`Report`] snapshots into rows of events/s, queue depth,
//! coalesced, errors, traps and state, plus one line per informer.
//!
//! Invariant: rendering reads only snapshots; rates come from the difference
//! between two snapshots divided by the real time between them, so a slow
//! refresh never inflates them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::metrics::Observe;
use crate::report::Report;

/// Keeps the previous snapshot to compute rates.
#[derive(Debug, Default)]
pub struct StatusTable {
    previous: Option<(Instant, BTreeMap<String, u64>)>,
}

impl StatusTable {
    /// Renders `report` taken at `now` as a table.
    pub fn render(&mut self, report: &Report, now: Instant) -> String {
        let totals: BTreeMap<String, u64> = report
            .plugins
            .iter()
            .map(|(n, p)| (n.clone(), p.delivered.total()))
            .collect();
        let rates: BTreeMap<&str, f64> = match &self.previous {
            Some((then, prev)) => {
                let secs = now.saturating_duration_since(*then).as_secs_f64().max(1e-3);
                totals
                    .iter()
                    .map(|(n, t)| {
                        (
                            n.as_str(),
                            t.saturating_sub(*prev.get(n).unwrap_or(&0)) as f64 / secs,
                        )
                    })
                    .collect()
            }
            None => BTreeMap::new(),
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:<12} {:>10} {:>7} {:>10} {:>7} {:>6} {:>9}",
            "PLUGIN", "STATE", "EVENTS/S", "QUEUE", "COALESCED", "ERRORS", "TRAPS", "P99(us)"
        );
        for (name, p) in &report.plugins {
            let rate = rates
                .get(name.as_str())
                .map(|r| format!("{r:.1}"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:<24} {:<12} {:>10} {:>7} {:>10} {:>7} {:>6} {:>9}",
                truncate(name, 24),
                p.state,
                rate,
                p.queue_depth,
                p.coalesced,
                p.errors,
                p.traps,
                p.latency_us.p99
            );
        }
        for (name, p) in report.plugins.iter().filter(|(_, p)| p.resync_behind) {
            let _ = writeln!(
                out,
                "  {name}: behind its resync period ({} resyncs overran); real changes still go first",
                p.resync_overruns
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<32} {:>8} {:>7} {:>6} {:>8} {:>8}",
            "INFORMER", "OBJECTS", "SYNCED", "LISTS", "WATCHES", "RV"
        );
        for (name, i) in &report.informers {
            let _ = writeln!(
                out,
                "{:<32} {:>8} {:>7} {:>6} {:>8} {:>8}",
                truncate(name, 32),
                i.objects,
                if i.synced { "yes" } else { "no" },
                i.lists,
                i.watch_restarts,
                i.last_sync_resource_version
            );
        }
        if let Some(c) = &report.cluster {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<24} {:>7} {:>8} {:>9}  MEMBERS",
                "CLUSTER", "ROLE", "IDENTITY", "SHARE", "KEYS", "MOVED"
            );
            let keys: u64 = c.shard_keys.values().sum();
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<24} {:>6.1}% {:>8} {:>9}  {}",
                c.mode,
                c.role,
                truncate(&c.identity, 24),
                c.owned_fraction * 100.0,
                keys,
                c.keys_gained + c.keys_released,
                c.members.join(",")
            );
        }
        for e in &report.config_errors {
            let _ = writeln!(out, "config error: {e}");
        }
        self.previous = Some((now, totals));
        out
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('~');
        t
    }
}

/// Redraws the table on stdout every second until the task is aborted.
pub fn spawn(source: Arc<dyn Observe>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut table = StatusTable::default();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let s = source.clone();
            let Ok(report) = tokio::task::spawn_blocking(move || s.report()).await else {
                return;
            };
            let text = table.render(&report, Instant::now());
            let mut stdout = std::io::stdout().lock();
            // Home, clear screen, table.
            let _ = write!(stdout, "\x1b[H\x1b[2J{text}");
            let _ = stdout.flush();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::PluginReport;

    #[test]
    fn rates_come_from_snapshot_differences() {
        let mut table = StatusTable::default();
        let mut r = Report::default();
        let mut p = PluginReport {
            state: "running".into(),
            queue_depth: 3,
            coalesced: 5,
            ..Default::default()
        };
        p.delivered.added = 100;
        r.plugins.insert("fast".into(), p.clone());
        let t0 = Instant::now();
        let first = table.render(&r, t0);
        assert!(first.lines().nth(1).unwrap().contains(" - "), "{first}");
        p.delivered.updated = 50;
        r.plugins.insert("fast".into(), p);
        let second = table.render(&r, t0 + Duration::from_secs(2));
        let row = second.lines().nth(1).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            vec!["fast", "running", "25.0", "3", "5", "0", "0", "0"],
            "{second}"
        );
    }
}
