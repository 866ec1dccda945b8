//! B2: marginal cost of each extra plugin. Our side with 1, 4 and 16 no-op
//! plugins drains the same held burst; the time until every plugin handled
//! every event, minus the one-plugin time, per event and per extra plugin.
//!
//! Invariant: queues are large enough that every plugin handles every event.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{b1_throughput::drain_rate, handlers, side, Ctx};
use crate::fixture::{Fixture, Mix};
use crate::spec::Side;
use crate::stats::median;
use crate::table::{Row, Verdict};

/// Runs B2.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let mut fx = Fixture::new(&ctx.rt, p.b2_pods, Mix::Default)?;
    fx.calibrate(p.b2_events)?;
    let (fast, desc) = ctx.fast_handler();
    let mut secs: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut notes = Vec::new();
    for _ in 0..p.rounds {
        for &n in &p.b2_plugins {
            let mut s = side(Side::Ours, &fx, handlers("p", n, &fast));
            s.queue_capacity = p.b2_events + p.b2_pods;
            let (r, nn) = drain_rate(&fx, &s, p.b2_events)?;
            notes.extend(nn);
            // Time for all plugins to handle the whole burst.
            secs.entry(n).or_default().push(p.b2_events as f64 / r);
        }
    }
    fx.shutdown(&ctx.rt);
    let t1 = median(&secs[&1]).unwrap_or(0.0);
    let mut rows = vec![Row {
        id: "B2",
        what: format!("1 plugin: drain of {} events", p.b2_events),
        ours: format!("{:.0} events/s", p.b2_events as f64 / t1),
        peer: "-".into(),
        ratio: "-".into(),
        target: "-".into(),
        verdict: Verdict::Info,
        note: format!(
            "{desc}; every plugin sees every event (queue {})",
            p.b2_events + p.b2_pods
        ),
    }];
    for &n in p.b2_plugins.iter().filter(|&&n| n > 1) {
        let tn = median(&secs[&n]).unwrap_or(0.0);
        let us = (tn - t1) * 1e6 / (p.b2_events as f64 * (n - 1) as f64);
        rows.push(Row {
            id: "B2",
            what: format!("{n} plugins: extra time per event per extra plugin"),
            ours: format!("{us:.2} us"),
            peer: "-".into(),
            ratio: format!("{:.0} events/s for all {n}", p.b2_events as f64 / tn),
            target: "<= 2 us".into(),
            verdict: Verdict::of(us <= 2.0),
            note: format!(
                "wall time on this machine's cores; drain seconds per round {:?}{}",
                secs[&n]
                    .iter()
                    .map(|x| (x * 1000.0).round() / 1000.0)
                    .collect::<Vec<_>>(),
                if notes.is_empty() {
                    String::new()
                } else {
                    format!("; {}", notes.join("; "))
                }
            ),
        });
    }
    Ok(rows)
}
