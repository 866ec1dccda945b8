//! Saying when a plugin is held back by its own write rate: a plugin whose API
//! calls wait on its token bucket (`write_qps`, `write_burst`) while its
//! queue overflows is slower than its events, and the only sign of it would
//! otherwise be long `latency_ms` on its audit lines.
//!
//! Job: from two successive reports, find the plugins whose calls waited for
//! tokens and whose queue coalesced or overflowed in between, and say so
//! once a minute per plugin at most, naming `write_qps`.
//!
//! Invariant: a warning is given only on evidence from the interval just
//! observed (tokens waited for and events merged in it), never from totals
//! alone; and at most once per [`WARN_EVERY`] per plugin.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::report::PluginReport;

/// The shortest time between two warnings about one plugin.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// One plugin held back by its write rate, over the interval observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Throttled {
    /// The plugin.
    pub plugin: String,
    /// Its `write_qps` now.
    pub write_qps: f64,
    /// Calls that waited for a token in the interval.
    pub waited_calls: u64,
    /// Time they waited, in the interval.
    pub waited: Duration,
    /// Events coalesced or overflowed in the interval.
    pub merged: u64,
}

impl Throttled {
    /// The warning's text.
    pub fn message(&self) -> String {
        format!(
            "plugin {} is held back by its write rate: {} of its API calls waited {:.1} s for \
             tokens of write_qps = {} while {} of its events were merged in its queue; raise \
             write_qps (and write_burst) in its manifest, or make fewer calls per event",
            self.plugin,
            self.waited_calls,
            self.waited.as_secs_f64(),
            self.write_qps,
            self.merged
        )
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    throttled: u64,
    wait_ms: u64,
    merged: u64,
}

fn seen(r: &PluginReport) -> Seen {
    Seen {
        throttled: r.api.throttled,
        wait_ms: r.api.token_wait_ms,
        merged: r.coalesced + r.overflowed,
    }
}

/// What the watch remembers between two observations.
#[derive(Debug, Default)]
pub struct ThrottleWatch {
    last: BTreeMap<String, Seen>,
    warned: BTreeMap<String, Instant>,
}

impl ThrottleWatch {
    /// Compares `plugins` with the last observation and returns the plugins
    /// to warn about now.
    pub fn observe(
        &mut self,
        plugins: &BTreeMap<String, PluginReport>,
        now: Instant,
    ) -> Vec<Throttled> {
        let mut out = Vec::new();
        for (name, r) in plugins {
            let cur = seen(r);
            let prev = self.last.insert(name.clone(), cur).unwrap_or(cur);
            let waited_calls = cur.throttled.saturating_sub(prev.throttled);
            let merged = cur.merged.saturating_sub(prev.merged);
            if waited_calls == 0 || merged == 0 {
                continue;
            }
            if self
                .warned
                .get(name)
                .is_some_and(|t| now.duration_since(*t) < WARN_EVERY)
            {
                continue;
            }
            self.warned.insert(name.clone(), now);
            out.push(Throttled {
                plugin: name.clone(),
                write_qps: r.api.write_qps,
                waited_calls,
                waited: Duration::from_millis(cur.wait_ms.saturating_sub(prev.wait_ms)),
                merged,
            });
        }
        self.last.retain(|n, _| plugins.contains_key(n));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(throttled: u64, coalesced: u64) -> PluginReport {
        let mut r = PluginReport::default();
        r.api.throttled = throttled;
        r.api.token_wait_ms = throttled * 200;
        r.api.write_qps = 5.0;
        r.coalesced = coalesced;
        r
    }

    #[test]
    fn warns_on_waits_and_merges_in_the_same_interval_once_a_minute() {
        let mut w = ThrottleWatch::default();
        let t0 = Instant::now();
        let at = |throttled, coalesced| {
            BTreeMap::from([("p".to_string(), report(throttled, coalesced))])
        };
        assert!(w.observe(&at(10, 10), t0).is_empty(), "no interval yet");
        // Waits without merges, merges without waits: nothing to say.
        assert!(w
            .observe(&at(20, 10), t0 + Duration::from_secs(5))
            .is_empty());
        assert!(w
            .observe(&at(20, 30), t0 + Duration::from_secs(10))
            .is_empty());
        let got = w.observe(&at(25, 40), t0 + Duration::from_secs(15));
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].waited_calls, got[0].merged), (5, 10));
        assert!(
            got[0].message().contains("write_qps = 5"),
            "{}",
            got[0].message()
        );
        // Still throttled, but warned less than a minute ago.
        assert!(w
            .observe(&at(30, 50), t0 + Duration::from_secs(20))
            .is_empty());
        assert_eq!(
            w.observe(&at(35, 60), t0 + Duration::from_secs(80)).len(),
            1
        );
    }
}
