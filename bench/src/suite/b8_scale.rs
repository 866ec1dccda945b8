//! B8: scale. 200k pods and 10 plugins: the initial sync time, then churn at 5k
//! events/s for a minute; RSS and every listener's overflow counters.
//!
//! Invariant: the churn rate reported is the rate actually written.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::{handlers, side, spawn, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::spec::{Command, Side};
use crate::table::{bytes, Row, Verdict};

/// Runs B8.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let fx = Fixture::new(&ctx.rt, p.b8_pods, Mix::Default)?;
    let (fast, desc) = ctx.fast_handler();
    let mut spec = side(Side::Ours, &fx, handlers("p", p.b8_plugins, &fast));
    spec.sync_timeout_secs = 120;
    let (mut child, r0) = spawn(&spec)?;
    let rv0 = fx.current_rv();
    child.cmd(&Command::Arm {
        rv: rv0,
        record: false,
    })?;
    let t = Instant::now();
    fx.paced(p.b8_rate, Duration::from_secs(p.b8_secs), false)
        .join()
        .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
    let wrote = fx.current_rv() - rv0;
    let rate = wrote as f64 / t.elapsed().as_secs_f64();
    let r = child.cmd(&Command::Wait {
        rv: fx.current_rv(),
        timeout_ms: 30_000,
    })?;
    child.exit();
    fx.shutdown(&ctx.rt);
    // Overflows during the initial sync (listeners added while the first list
    // streams in) are reported apart from those during the steady churn.
    let at_sync: std::collections::HashMap<&str, u64> = r0
        .listeners
        .iter()
        .map(|l| (l.name.as_str(), l.overflowed))
        .collect();
    let churn_over = |l: &crate::spec::ListenerCounters| {
        l.overflowed - at_sync.get(l.name.as_str()).copied().unwrap_or(0)
    };
    let overflowed: u64 = r.listeners.iter().map(churn_over).sum();
    let sync_overflowed: u64 = r0.listeners.iter().map(|l| l.overflowed).sum();
    let per: Vec<String> = r
        .listeners
        .iter()
        .map(|l| {
            format!(
                "{}: overflowed {} during churn ({} during sync), coalesced {}, max depth {}",
                l.name,
                churn_over(l),
                at_sync.get(l.name.as_str()).copied().unwrap_or(0),
                l.coalesced,
                l.max_depth
            )
        })
        .collect();
    let rss = r.rss_bytes.max(r0.rss_bytes) as f64;
    let ok = r0.sync_ms <= 20_000.0 && rss <= 1.5e9 && overflowed == 0 && r.reached;
    Ok(vec![Row {
        id: "B8",
        what: format!(
            "{} pods, {} plugins: sync, then {:.0} events/s for {} s",
            p.b8_pods, p.b8_plugins, rate, p.b8_secs
        ),
        ours: format!(
            "sync {:.1} s, RSS {} (after sync {}), heap {} (after sync {}), overflows during churn {} (during sync {})",
            r0.sync_ms / 1000.0,
            bytes(r.rss_bytes as f64),
            bytes(r0.rss_bytes as f64),
            bytes(r.heap_bytes as f64),
            bytes(r0.heap_bytes as f64),
            overflowed,
            sync_overflowed
        ),
        peer: "-".into(),
        ratio: if r.reached {
            "all plugins caught up".into()
        } else {
            "plugins behind 30 s after churn".into()
        },
        target: "sync <= 20 s, RSS <= 1.5 GB, 0 overflows".into(),
        verdict: Verdict::of(ok),
        note: format!(
            "{desc}; queue 1024 (default). RSS is the whole host process. {}",
            per.join("; ")
        ),
    }])
}
